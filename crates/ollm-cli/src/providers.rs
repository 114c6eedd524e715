//! Building the provider adapter the settings name: the one place the CLI touches the
//! adapters' constructors.

use std::sync::Arc;

use ollm_bridge::{
    AnthropicConfig, AnthropicProvider, BridgeError, HttpConfig, OllamaConfig, OllamaProvider,
    OpenAiConfig, OpenAiProvider, RetryPolicy, Secret,
};
use ollm_core::ProviderAdapter;

use crate::config::{ProviderKind, ProviderSettings};
use crate::exit::CliError;

/// The adapter for `settings`, built from plain data only (the adapters never read the
/// CLI's configuration). A bad address is a usage error.
pub(crate) fn connect(settings: &ProviderSettings) -> Result<Arc<dyn ProviderAdapter>, CliError> {
    connect_with(settings, RetryPolicy::default())
}

/// The adapter for one member of `ollm serve`'s pool: `settings` at `address`, without
/// retries of its own (the pool's failover is the retry).
pub(crate) fn connect_member(
    settings: &ProviderSettings,
    address: &str,
) -> Result<Arc<dyn ProviderAdapter>, CliError> {
    let mut member = settings.clone();
    member.address = Secret::new(address);
    let retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    connect_with(&member, retry)
}

fn connect_with(
    settings: &ProviderSettings,
    retry: RetryPolicy,
) -> Result<Arc<dyn ProviderAdapter>, CliError> {
    let http = HttpConfig {
        retry,
        connect_timeout: settings.connect_timeout,
        idle_timeout: settings.idle_timeout,
        api_key: settings.api_key.clone(),
        headers: settings
            .headers
            .iter()
            .map(|(name, value)| (name.clone(), value.expose().to_owned()))
            .collect(),
        ..HttpConfig::default()
    };
    let built: Result<Arc<dyn ProviderAdapter>, BridgeError> = match settings.kind {
        ProviderKind::Ollama => OllamaProvider::new(OllamaConfig {
            base_url: settings.address.expose().to_owned(),
            http,
            ..OllamaConfig::default()
        })
        .map(|p| Arc::new(p) as Arc<dyn ProviderAdapter>),
        ProviderKind::Openai => {
            let mut config = OpenAiConfig::new(settings.address.expose());
            config.api_key_env = settings.api_key_env.clone();
            config.http = http;
            OpenAiProvider::new(config).map(|p| Arc::new(p) as Arc<dyn ProviderAdapter>)
        }
        ProviderKind::Anthropic => {
            let mut config = AnthropicConfig::new(settings.address.expose());
            config.api_key_env = settings.api_key_env.clone();
            config.http = http;
            AnthropicProvider::new(config).map(|p| Arc::new(p) as Arc<dyn ProviderAdapter>)
        }
    };
    built.map_err(|e| match e {
        BridgeError::InvalidUrl { .. } => CliError::Usage(e.to_string()),
        other => CliError::Other(other.into()),
    })
}
