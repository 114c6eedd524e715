//! Building the provider adapter the settings name: the one place the CLI touches the
//! adapters' constructors.

use std::sync::Arc;

use async_trait::async_trait;
use ollm_core::{ProviderAdapter, ProviderStream};
use ollm_types::{ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest};

use crate::config::{ProviderKind, ProviderSettings};
use crate::exit::CliError;

/// The adapter for `settings`.
///
/// MERGE: wire the real adapters here, from plain data only (the adapters must not read
/// the CLI's config):
///
/// ```text
/// ProviderKind::Ollama => Arc::new(ollm_bridge::ollama::OllamaProvider::new(
///     ollm_bridge::ollama::OllamaConfig { base_url: s.base_url.clone(),
///         connect_timeout: s.connect_timeout, idle_timeout: s.idle_timeout, .. })?),
/// ProviderKind::Openai => Arc::new(ollm_bridge::openai::OpenAiProvider::new(
///     ollm_bridge::openai::OpenAiConfig { base_url: s.base_url.clone(),
///         api_key: s.api_key.clone(), connect_timeout: s.connect_timeout,
///         idle_timeout: s.idle_timeout, .. })?),
/// ```
///
/// mapping a constructor error to `CliError::Usage` (a bad URL) or `CliError::Other`.
pub(crate) fn connect(settings: &ProviderSettings) -> Result<Arc<dyn ProviderAdapter>, CliError> {
    let name = match settings.kind {
        ProviderKind::Ollama => "ollama",
        ProviderKind::Openai => "openai",
    };
    Ok(Arc::new(Unwired {
        name: name.to_owned(),
    }))
}

/// Stands in for an adapter this build does not have yet: every operation answers
/// `Unsupported`.
struct Unwired {
    name: String,
}

impl Unwired {
    fn error(&self) -> ProviderError {
        ProviderError::new(
            ProviderErrorKind::Unsupported,
            format!("the {} adapter is not part of this build", self.name),
        )
    }
}

#[async_trait]
impl ProviderAdapter for Unwired {
    fn name(&self) -> &str {
        &self.name
    }

    fn chat(&self, _request: ProviderRequest) -> ProviderStream {
        let error = self.error();
        Box::pin(futures::stream::once(async move {
            ProviderEvent::Error { error }
        }))
    }

    async fn server_version(&self) -> Result<String, ProviderError> {
        Err(self.error())
    }
}
