//! The Ollama adapter against the mock Ollama and the recorded fixtures.

mod chat;
mod fixtures;
mod management;
mod window;

use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::{HttpConfig, OllamaConfig, OllamaProvider, RetryPolicy};
use ollm_types::ProviderEvent;
use test_utils::mock_ollama::MockOllama;

/// A provider for `mock` with quick retries.
fn provider(mock: &MockOllama) -> OllamaProvider {
    provider_with(mock, |_| {})
}

fn provider_with(mock: &MockOllama, tweak: impl FnOnce(&mut OllamaConfig)) -> OllamaProvider {
    let mut config = OllamaConfig::from_host(Some(&mock.host_port())).unwrap();
    config.http = HttpConfig {
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_millis(20),
            max_retry_after: Duration::from_millis(50),
        },
        ..HttpConfig::default()
    };
    tweak(&mut config);
    OllamaProvider::new(config).unwrap()
}

async fn collect(stream: ollm_core::ProviderStream) -> Vec<ProviderEvent> {
    stream.collect().await
}
