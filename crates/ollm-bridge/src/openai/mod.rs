//! The OpenAI-compatible adapter: Chat Completions over SSE, as llama.cpp's
//! `llama-server`, vLLM, LM Studio and Ollama's `/v1` serve it.
//!
//! The translation is pure and lives in private submodules: `request` builds the body,
//! [`SseFramer`] splits the byte stream into events, [`ThinkSplitter`] moves `<think>`
//! text to reasoning, [`ToolCallAssembler`] puts streamed tool calls together, and
//! [`SseDecoder`] stacks them into [`ProviderEvent`]s; `tokenize` probes the server's
//! tokenizer once per provider. [`OpenAiProvider`] is the thin shell that sends the request through
//! the shared [`Transport`] and feeds the body to a [`SseDecoder`]. Dropping its stream
//! drops the connection, which makes the server stop generating.

mod assemble;
pub(crate) mod props;
mod request;
mod sse;
mod stream;
mod think;
mod tokenize;
mod wire;

use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use ollm_core::{ProviderAdapter, ProviderStream};
use ollm_types::{ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest};
use reqwest::Method;

pub use assemble::{INVALID_ARGUMENTS_KEY, ToolCallAssembler};
pub use sse::{SseEvent, SseFramer};
pub use stream::{SseDecoder, decode_all};
pub use think::{Side, ThinkSplitter};
pub(crate) use wire::error_message;

use crate::host::{Defaults, parse};
use crate::shell::{self, Hints};
use crate::{BridgeError, HttpConfig, RequestSpec, Secret, Transport};

/// The base URL for an OpenAI-compatible server's address as people write it
/// (`127.0.0.1:8080`, `http://host:port`, `[::1]:8080`, `https://host/api/v1`, ...): `http`
/// when no scheme is given, `/v1` when no path is given; `0.0.0.0` and `::` become
/// loopback. A value that is no address is an `InvalidUrl` error.
pub fn parse_host(value: &str) -> Result<String, BridgeError> {
    if value.trim().is_empty() {
        return Err(BridgeError::InvalidUrl {
            url: value.to_owned(),
            message: "no address given".to_owned(),
        });
    }
    parse(
        value,
        Defaults {
            port: None,
            path: "/v1",
        },
    )
}

/// How to reach an OpenAI-compatible server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OpenAiConfig {
    /// The API's base URL, including `/v1` (for example `http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The name of the environment variable holding the API key, if the server wants one.
    /// The key itself never appears in the configuration, in logs or in `Debug` output.
    pub api_key_env: Option<String>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Timeouts and retries (its own `headers` and `api_key` are added to the above).
    pub http: HttpConfig,
}

impl OpenAiConfig {
    /// A configuration for `base_url` with default settings.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            ..OpenAiConfig::default()
        }
    }
}

/// The adapter.
#[derive(Debug, Clone)]
pub struct OpenAiProvider {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    api: Transport,
    /// The server root (without `/v1`), where llama.cpp serves `/props`.
    root: Transport,
    tokenizer: tokenize::Tokenizer,
    api_key_env: Option<String>,
}

impl OpenAiProvider {
    /// A provider for the server `config` names. Without a key in `config.http`, the key
    /// is read from `config.api_key_env` now; a variable that is unset means no key.
    pub fn new(config: OpenAiConfig) -> Result<Self, BridgeError> {
        let mut http = config.http;
        http.headers.extend(config.headers);
        if http.api_key.is_none() {
            if let Some(var) = &config.api_key_env {
                if let Ok(key) = std::env::var(var) {
                    if !key.is_empty() {
                        http.api_key = Some(Secret::new(key));
                    }
                }
            }
        }
        let base = config.base_url.trim_end_matches('/');
        let api = Transport::new(base, http)?;
        // One client for both: `/props` and `/tokenize` live on the same server.
        let root = api.rebased(server_root(api.base_url()));
        Ok(OpenAiProvider {
            inner: Arc::new(Inner {
                api,
                tokenizer: tokenize::Tokenizer::new(root.clone()),
                root,
                api_key_env: config.api_key_env,
            }),
        })
    }

    /// The API's base URL.
    pub fn base_url(&self) -> &str {
        self.inner.api.base_url()
    }
}

/// The server root of a `.../v1` base URL, where llama.cpp and vLLM serve `/tokenize`.
fn server_root(base: &str) -> &str {
    base.strip_suffix("/v1").unwrap_or(base)
}

impl Inner {
    /// The neutral error for `error`, with the server's details and a hint.
    fn error(&self, error: BridgeError, model: Option<&str>) -> ProviderError {
        let body_type = match &error {
            BridgeError::Http { body, .. } => serde_json::from_str::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("error").and_then(wire::error_type).map(str::to_owned)),
            _ => None,
        };
        let base = self.api.base_url();
        let mapped: ProviderError = error.clone().into();
        if let Some(hint) = error.tools_refusal() {
            let mut e = mapped.with_hint(hint);
            e.kind = ProviderErrorKind::ToolsUnsupported;
            e.retryable = false;
            return e;
        }
        match (&error, mapped.kind) {
            (BridgeError::Connect { .. }, _) => mapped.with_hint(format!(
                "is an OpenAI-compatible server running at {base}? (start it, or set the \
                 base URL)"
            )),
            (_, ProviderErrorKind::ModelNotFound) => mapped.with_hint(match model {
                Some(model) => format!(
                    "the server at {base} does not serve a model named {model:?} (GET \
                     {base}/models lists what it serves), or the base URL lacks `/v1`"
                ),
                None => format!("is {base} an OpenAI-compatible base URL ending in `/v1`?"),
            }),
            (_, ProviderErrorKind::Auth) => mapped.with_hint(match &self.api_key_env {
                Some(var) => format!("check the API key in the environment variable {var}"),
                None => "the server wants an API key: name the environment variable that \
                         holds it in the configuration (api_key_env)"
                    .to_owned(),
            }),
            // vLLM says it only in words, as a `BadRequestError`.
            _ if matches!(
                body_type.as_deref(),
                Some("exceed_context_size_error" | "context_length_exceeded")
            ) || mapped.message.contains("maximum context length is") =>
            {
                let mut e = mapped;
                e.kind = ProviderErrorKind::ContextOverflow;
                e.retryable = false;
                e
            }
            _ => mapped,
        }
    }
}

/// This adapter's hints for one chat with `model`.
struct ChatHints {
    inner: Arc<Inner>,
    model: String,
}

impl Hints for ChatHints {
    fn transport(&self, error: BridgeError) -> ProviderError {
        self.inner.error(error, Some(&self.model))
    }
}

#[async_trait]
impl ProviderAdapter for OpenAiProvider {
    fn name(&self) -> &str {
        "openai"
    }

    fn chat(&self, request: ProviderRequest) -> ProviderStream {
        let body = match serde_json::to_vec(&request::chat_request(&request)) {
            Ok(body) => body,
            Err(e) => {
                let error = ProviderError::new(ProviderErrorKind::Other, e.to_string());
                return Box::pin(futures::stream::iter([ProviderEvent::Error { error }]));
            }
        };
        let spec = RequestSpec {
            method: Method::POST,
            path: "/chat/completions".into(),
            body: Some(Bytes::from(body)),
            headers: request.headers.clone(),
        };
        let decoder = SseDecoder::new().with_tools(request.tools.iter().map(|t| t.name.clone()));
        let hints = ChatHints {
            inner: Arc::clone(&self.inner),
            model: request.model,
        };
        let exchange = shell::Exchange {
            spec,
            decoder,
            hints,
        };
        shell::exchange(self.inner.api.clone(), exchange)
    }

    async fn count_tokens(&self, model: &str, text: &str) -> Result<Option<usize>, ProviderError> {
        self.inner
            .tokenizer
            .count(model, text)
            .await
            .map_err(|e| self.inner.error(e, Some(model)))
    }

    /// llama.cpp's `/props`: the window per slot, the template's capabilities and the
    /// modalities. Other servers have no such endpoint: `Unsupported`, saying so.
    async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        let base = self.inner.api.base_url();
        match self
            .inner
            .root
            .fetch_json::<props::Props>(RequestSpec::get("/props"))
            .await
        {
            Ok(found) => Ok(props::model_info(model, found)),
            Err(BridgeError::Http { status: 404, .. } | BridgeError::Decode { .. }) => {
                // vLLM has no `/props`; its `/v1/models` says the window (`max_model_len`).
                let listed = self.list_models().await.ok().and_then(|models| {
                    models
                        .into_iter()
                        .find(|m| m.name == model && m.window.is_some())
                });
                listed.ok_or_else(|| props::refusal("show", base))
            }
            Err(e) => Err(self.inner.error(e, None)),
        }
    }

    fn pull_model(&self, _model: &str) -> ollm_core::PullStream {
        let error = props::refusal("pull", self.inner.api.base_url());
        Box::pin(futures::stream::iter([Err(error)]))
    }

    async fn delete_model(&self, _model: &str) -> Result<(), ProviderError> {
        Err(props::refusal("rm", self.inner.api.base_url()))
    }

    async fn running_models(&self) -> Result<Vec<ollm_types::RunningModel>, ProviderError> {
        Err(props::refusal("ps", self.inner.api.base_url()))
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let list: wire::ModelList = self
            .inner
            .api
            .fetch_json(RequestSpec::get("/models"))
            .await
            .map_err(|e| self.inner.error(e, None))?;
        Ok(list
            .data
            .into_iter()
            .map(|m| {
                // The window a prompt must fit: vLLM's `max_model_len`, llama.cpp's `n_ctx`.
                let window = m
                    .max_model_len
                    .or_else(|| m.meta.as_ref().and_then(|meta| meta.n_ctx));
                ModelInfo {
                    name: m.id,
                    size: m.meta.as_ref().and_then(|meta| meta.size),
                    context_length: window.or_else(|| m.meta.as_ref()?.n_ctx_train),
                    window,
                    ..ModelInfo::default()
                }
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_forms() {
        let check = |raw: &str, want: Option<&str>| {
            assert_eq!(parse_host(raw).ok().as_deref(), want, "{raw:?}");
        };
        check("h:8080", Some("http://h:8080/v1"));
        check("127.0.0.1:8080", Some("http://127.0.0.1:8080/v1"));
        check("0.0.0.0:8080", Some("http://127.0.0.1:8080/v1"));
        check("[::1]:8080", Some("http://[::1]:8080/v1"));
        check("http://h:8080/api/v1", Some("http://h:8080/api/v1"));
        check("https://api.example/v1/", Some("https://api.example/v1"));
        check("https://api.example", Some("https://api.example/v1"));
        check("", None);
        check("ftp://h", None);
    }

    #[test]
    fn server_root_drops_v1() {
        assert_eq!(server_root("http://h:1/v1"), "http://h:1");
        assert_eq!(server_root("http://h:1/api"), "http://h:1/api");
    }

    #[test]
    fn the_api_key_is_not_debug_printed() {
        // Setting the environment needs `unsafe` in edition 2024 (forbidden here), so the
        // variable stays unset and the key goes in through the HTTP settings, where the
        // provider keeps it either way.
        let var = "OLLM_TEST_OPENAI_KEY_DEBUG_UNSET";
        let mut config = OpenAiConfig::new("http://127.0.0.1:9/v1");
        config.api_key_env = Some(var.into());
        config.http.api_key = Some(Secret::new("sk-secret-123"));
        let provider = OpenAiProvider::new(config).unwrap();
        assert!(!format!("{provider:?}").contains("sk-secret-123"));
    }
}
