//! The server under test, from the environment.

use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::openai::{OpenAiConfig, OpenAiProvider};
use ollm_core::ProviderAdapter;
use ollm_types::{Message, ProviderEvent, ProviderRequest};

/// The base URL (with `/v1`) and the model name; panics with instructions when unset.
pub(crate) fn server() -> (String, String) {
    let get = |name: &str| {
        std::env::var(name).unwrap_or_else(|_| {
            panic!(
                "{name} is not set: run the end-to-end tests with `cargo xtask e2e`, which \
                 starts llama-server and sets OLLM_E2E_BASE_URL and OLLM_E2E_MODEL"
            )
        })
    };
    (get("OLLM_E2E_BASE_URL"), get("OLLM_E2E_MODEL"))
}

/// A provider for the server under test.
pub(crate) fn provider() -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig::new(server().0)).unwrap()
}

/// A short, repeatable request.
pub(crate) fn request(prompt: &str, max_tokens: u32) -> ProviderRequest {
    let mut r = ProviderRequest::new(server().1, vec![Message::user(prompt)]);
    r.options.max_tokens = Some(max_tokens);
    r.options.temperature = Some(0.0);
    r.options.seed = Some(42);
    r
}

/// All events of one reply (bounded by a generous timeout: CPU inference).
pub(crate) async fn collect(
    provider: &OpenAiProvider,
    request: ProviderRequest,
) -> Vec<ProviderEvent> {
    collect_from(provider, request).await
}

/// [`collect`] for any adapter.
pub(crate) async fn collect_from(
    provider: &dyn ProviderAdapter,
    request: ProviderRequest,
) -> Vec<ProviderEvent> {
    tokio::time::timeout(Duration::from_secs(120), provider.chat(request).collect())
        .await
        .expect("the reply took over 120 s")
}

/// The answer text of a reply.
pub(crate) fn text_of(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}
