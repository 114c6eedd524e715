//! The provider registry and the adapter contract (properties 1, 2, 3, 10).

use std::collections::BTreeSet;
use std::sync::Arc;

use futures::StreamExt;
use ollm_core::{CoreError, ProviderAdapter, ProviderRegistry};
use ollm_types::{FinishReason, ProviderErrorKind, ProviderEvent, ProviderRequest};
use proptest::prelude::*;
use test_utils::mock_provider::{MockProvider, check_compliance, ev};

use crate::support::{block_on, config};

fn named(name: &str) -> Arc<MockProvider> {
    MockProvider::builder().name(name).build()
}

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-z][a-z0-9]{0,7}", 0..8)
}

proptest! {
    #![proptest_config(config())]

    // Property 1: registry round trip
    #[test]
    fn registry_round_trip(names in names()) {
        let mut reg = ProviderRegistry::new();
        for n in &names {
            reg.register(n.clone(), named(n));
        }
        for n in &names {
            let p = reg.get(n).unwrap();
            prop_assert_eq!(p.name(), n.as_str());
        }
        match reg.get("NOT-REGISTERED") {
            Err(CoreError::UnknownProvider { name, .. }) => prop_assert_eq!(name, "NOT-REGISTERED"),
            other => prop_assert!(false, "unexpected {:?}", other.map(|p| p.name().to_owned())),
        }
    }

    // Property 2: default resolution
    #[test]
    fn default_resolution(names in names(), pick in any::<prop::sample::Index>()) {
        let mut reg = ProviderRegistry::new();
        let unset = matches!(reg.get_default(), Err(CoreError::NoDefaultProvider));
        prop_assert!(unset);
        for n in &names {
            reg.register(n.clone(), named(n));
        }
        if names.is_empty() {
            let unset = matches!(reg.get_default(), Err(CoreError::NoDefaultProvider));
            prop_assert!(unset);
        } else {
            // The first registered is the default until another is set.
            prop_assert_eq!(reg.get_default().unwrap().name().to_owned(), names[0].as_str());
            let chosen = &names[pick.index(names.len())];
            reg.set_default(chosen).unwrap();
            prop_assert_eq!(reg.default_name(), Some(chosen.as_str()));
            prop_assert_eq!(reg.get_default().unwrap().name().to_owned(), chosen.as_str());
        }
        let refused = matches!(
            reg.set_default("NOT-REGISTERED"),
            Err(CoreError::UnknownProvider { .. })
        );
        prop_assert!(refused);
    }

    // Property 3: list completeness
    #[test]
    fn list_completeness(names in names()) {
        let mut reg = ProviderRegistry::new();
        for n in &names {
            reg.register(n.clone(), named(n));
        }
        let expected: Vec<String> = names.iter().cloned().collect::<BTreeSet<_>>().into_iter().collect();
        prop_assert_eq!(reg.names(), expected);
    }

    // Property 10: adapter compliance, of the scripted adapter (the real adapters over
    // their mock servers: ollm-bridge's tests/compliance).
    #[test]
    fn adapter_compliance(texts in prop::collection::vec(".{0,12}", 0..6), fail in any::<bool>()) {
        // A scripted adapter streams exactly what it was given, closed by one terminal
        // event, and the optional operations it does not offer answer `Unsupported`.
        let mut script: Vec<ProviderEvent> = texts.iter().map(ev::text).collect();
        script.push(if fail {
            ev::error(ProviderErrorKind::Server, "boom")
        } else {
            ev::finish_with(FinishReason::Stop)
        });
        let provider = MockProvider::builder().turn(script.clone()).build();
        let dynamic: Arc<dyn ProviderAdapter> = provider.clone();
        block_on(async move {
            let got: Vec<ProviderEvent> =
                dynamic.chat(ProviderRequest::new("m", vec![])).collect().await;
            assert_eq!(got, script);
            check_compliance(&got).unwrap();
            // The checker itself rejects broken streams.
            assert!(check_compliance(&got[..got.len() - 1]).is_err());
            let mut doubled = got.clone();
            doubled.push(ev::finish());
            assert!(check_compliance(&doubled).is_err());
            assert_eq!(dynamic.list_models().await.unwrap_err().kind, ProviderErrorKind::Unsupported);
            assert_eq!(dynamic.delete_model("m").await.unwrap_err().kind, ProviderErrorKind::Unsupported);
            assert_eq!(dynamic.show_model("m").await.unwrap_err().kind, ProviderErrorKind::Unsupported);
            let pulled: Vec<_> = dynamic.pull_model("m").collect().await;
            assert!(matches!(&pulled[..], [Err(e)] if e.kind == ProviderErrorKind::Unsupported));
            assert_eq!(dynamic.count_tokens("m", "abc").await.unwrap(), None);
        });
        prop_assert_eq!(provider.request_count(), 1);
    }
}
