//! The provider seam: one trait for every backend, and a registry of them by name.
//!
//! # Why `async-trait`
//! Providers are used as `Arc<dyn ProviderAdapter>` from a registry chosen at run time, so
//! the trait must be object safe. Native `async fn` in traits is not (yet) usable through
//! `dyn`; `async-trait` boxes the futures, which costs one allocation per call — nothing
//! next to an HTTP round trip. Streams are returned by plain `fn`s as a named boxed stream
//! ([`ProviderStream`]), so starting a reply needs no `await` and dropping the stream is
//! the way to cancel it (adapters close the connection when their stream is dropped).

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use futures::stream::BoxStream;
use ollm_types::{
    ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest, PullProgress,
    RunningModel,
};

use crate::CoreError;

/// A streamed reply: events closed by one `Finish` or `Error` (see [`ProviderEvent`]).
/// Dropping it cancels the request.
pub type ProviderStream = BoxStream<'static, ProviderEvent>;

/// A streamed model download: progress steps, ending after `success` or with an error.
pub type PullStream = BoxStream<'static, Result<PullProgress, ProviderError>>;

/// A model backend. Only [`ProviderAdapter::chat`] is required; the model-management
/// methods answer `Unsupported` unless a backend offers them.
#[async_trait]
pub trait ProviderAdapter: Send + Sync {
    /// A short name for messages and registries (`ollama`, `openai`, ...).
    fn name(&self) -> &str;

    /// Starts a streamed reply. Failures, including those before the first byte, arrive as
    /// the stream's final [`ProviderEvent::Error`].
    fn chat(&self, request: ProviderRequest) -> ProviderStream;

    /// Counts the tokens `text` makes for `model` with the server's own tokenizer or a
    /// calibrated estimate. `Ok(None)` means "no better than `ceil(chars / 4)`".
    async fn count_tokens(&self, model: &str, text: &str) -> Result<Option<usize>, ProviderError> {
        let _ = (model, text);
        Ok(None)
    }

    /// Counts the tokens the whole `request` makes as the model reads it (chat template,
    /// tools and all), where the server can say exactly (the Messages API's
    /// `count_tokens`). `Ok(None)` means it cannot: the caller counts the text with
    /// [`ProviderAdapter::count_tokens`] and corrects for the template.
    async fn count_request(
        &self,
        request: &ProviderRequest,
    ) -> Result<Option<usize>, ProviderError> {
        let _ = request;
        Ok(None)
    }

    /// The models the server has.
    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        Err(unsupported(self.name(), "listing models"))
    }

    /// What the server knows of one model: capabilities, context length, parameters.
    async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        let _ = model;
        Err(unsupported(self.name(), "showing a model"))
    }

    /// Downloads a model, streaming progress.
    fn pull_model(&self, model: &str) -> PullStream {
        let _ = model;
        let err = unsupported(self.name(), "pulling models");
        Box::pin(futures::stream::once(async move { Err(err) }))
    }

    /// Deletes a model.
    async fn delete_model(&self, model: &str) -> Result<(), ProviderError> {
        let _ = model;
        Err(unsupported(self.name(), "deleting models"))
    }

    /// The models loaded in memory now.
    async fn running_models(&self) -> Result<Vec<RunningModel>, ProviderError> {
        Err(unsupported(self.name(), "listing running models"))
    }

    /// The server's version.
    async fn server_version(&self) -> Result<String, ProviderError> {
        Err(unsupported(self.name(), "reporting its version"))
    }
}

/// The error a provider returns for an operation it does not offer.
pub fn unsupported(provider: &str, what: &str) -> ProviderError {
    ProviderError::new(
        ProviderErrorKind::Unsupported,
        format!("the {provider} provider does not support {what}"),
    )
}

/// Providers by name, with a default.
#[derive(Default, Clone)]
pub struct ProviderRegistry {
    providers: BTreeMap<String, Arc<dyn ProviderAdapter>>,
    default: Option<String>,
}

impl std::fmt::Debug for ProviderRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderRegistry")
            .field("providers", &self.names())
            .field("default", &self.default)
            .finish()
    }
}

impl ProviderRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `provider` under `name`, replacing any provider of that name. The first
    /// provider registered becomes the default until another is set.
    pub fn register(&mut self, name: impl Into<String>, provider: Arc<dyn ProviderAdapter>) {
        let name = name.into();
        if self.default.is_none() {
            self.default = Some(name.clone());
        }
        self.providers.insert(name, provider);
    }

    /// The provider registered under `name`.
    pub fn get(&self, name: &str) -> Result<Arc<dyn ProviderAdapter>, CoreError> {
        self.providers
            .get(name)
            .cloned()
            .ok_or_else(|| CoreError::UnknownProvider {
                name: name.to_owned(),
                known: self.names(),
            })
    }

    /// Makes `name` the default; it must be registered.
    pub fn set_default(&mut self, name: &str) -> Result<(), CoreError> {
        if !self.providers.contains_key(name) {
            return Err(CoreError::UnknownProvider {
                name: name.to_owned(),
                known: self.names(),
            });
        }
        self.default = Some(name.to_owned());
        Ok(())
    }

    /// The name of the default provider.
    pub fn default_name(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// The default provider.
    pub fn get_default(&self) -> Result<Arc<dyn ProviderAdapter>, CoreError> {
        let name = self
            .default
            .as_deref()
            .ok_or(CoreError::NoDefaultProvider)?;
        self.get(name)
    }

    /// The registered names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.providers.keys().cloned().collect()
    }
}
