//! The Anthropic Messages adapter: `POST /v1/messages` over SSE, as Anthropic's API,
//! llama.cpp's `llama-server`, Ollama and several hosted providers serve it.
//!
//! The translation is pure and lives in private submodules: `request` builds the bodies
//! (the chat and the token count), [`MessagesDecoder`] turns the streamed events into
//! [`ProviderEvent`]s (on the shared SSE framer and tool-call assembler). The
//! [`AnthropicProvider`] is the thin shell that sends the request through the shared
//! [`Transport`] and hands the body to the decoder.
//!
//! # Decisions
//! - The base URL is the server root, as `ANTHROPIC_BASE_URL` is written
//!   (`https://api.anthropic.com`); the adapter adds `/v1/messages`. A trailing `/v1` is
//!   dropped, so an OpenAI-style address of the same server works too.
//! - The key goes in `x-api-key` ([`KeyHeader::XApiKey`]), a sensitive header value the
//!   transport never logs or prints; `anthropic-version` is [`ANTHROPIC_VERSION`] unless
//!   the configuration's headers set another.
//! - Exact counts: [`ProviderAdapter::count_request`] asks
//!   `/v1/messages/count_tokens` for the whole request (template, tools and all). A
//!   server without the endpoint (404, 405, 501) is remembered and never asked again;
//!   the caller then counts the text itself.
//! - Errors: HTTP statuses map as for every adapter; Anthropic's error `type` in the
//!   body refines the kind (`overloaded_error`, HTTP 529, is `Busy` and retried like any
//!   5xx); a prompt over the window is `ContextOverflow`; llama-server refusing `tools`
//!   without `--jinja` is `ToolsUnsupported`, as on the OpenAI-compatible adapter.
//! - `show` reads llama.cpp's `/props` where the server has it, else the model's entry in
//!   `/v1/models`; `pull`, `rm` and `ps` are not part of the API (`Unsupported`).
//!
//! # Observed on llama-server's `/v1/messages` (Qwen2.5-Coder-0.5B, `--jinja`)
//! - `count_tokens` exists and equals the `input_tokens` the reply reports (34, 27, 187
//!   and 224 tokens on four request shapes; the e2e test pins it).
//! - Usage splits a prompt-cache hit: `input_tokens` is only the part read anew, the rest
//!   is `cache_read_input_tokens` (1 + 160 for a repeated prompt), so both are summed.
//! - A `tool_use` block starts without `input`; its arguments come only as
//!   `input_json_delta`s. `tool_choice` `any` and `tool` are not enforced: the model
//!   still writes its call as text unless the reply is begun with `<tool_call>`.
//! - Errors come in llama.cpp's own shape (`{"error": {"code", "message", "type"}}`,
//!   `exceed_context_size_error` for a prompt over the window), not Anthropic's; the
//!   error `type` is read from either.
//! - A stop sequence ends the reply with `stop_reason: "end_turn"` and `stop_sequence`
//!   set (Anthropic says `stop_sequence`); both are a `Stop`.
//! - Lenient where Anthropic is strict: `max_tokens` may be missing, unknown fields
//!   (`seed`) and any model name are accepted; `thinking` is accepted and ignored by a
//!   model that does not reason. Images without a multimodal projector are a 500 ("image
//!   input is not supported"). `x-api-key` is checked when started with `--api-key`
//!   (401 `authentication_error`), as is `Authorization: Bearer`.
//! - `/v1/models` is its OpenAI-style list with `meta.n_ctx`, not Anthropic's.

mod request;
mod stream;
mod wire;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use ollm_core::{ProviderAdapter, ProviderStream};
use ollm_types::{ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest};
use reqwest::Method;

pub use request::DEFAULT_MAX_TOKENS;
pub use stream::{MessagesDecoder, decode_all};

use crate::host::{Defaults, parse};
use crate::openai::props;
use crate::shell::{self, Hints};
use crate::{BridgeError, HttpConfig, KeyHeader, RequestSpec, Secret, Transport};

/// The API version sent as `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The base URL when none is configured: a llama-server on its default port.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080";

/// The base URL (the server root) for an address as people write it (`host:port`,
/// `http://host:port`, `https://api.anthropic.com`, `http://host:8080/v1`, ...): `http`
/// when no scheme is given, a trailing `/v1` dropped, `0.0.0.0` and `::` as loopback.
/// A value that is no address is an `InvalidUrl` error.
pub fn parse_host(value: &str) -> Result<String, BridgeError> {
    if value.trim().is_empty() {
        return Err(BridgeError::InvalidUrl {
            url: value.to_owned(),
            message: "no address given".to_owned(),
        });
    }
    let url = parse(
        value,
        Defaults {
            port: None,
            path: "",
        },
    )?;
    Ok(url.strip_suffix("/v1").map(str::to_owned).unwrap_or(url))
}

/// How to reach a Messages API server.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AnthropicConfig {
    /// The server root (for example `http://127.0.0.1:8080` or
    /// `https://api.anthropic.com`), without `/v1`.
    pub base_url: String,
    /// The name of the environment variable holding the API key (`ANTHROPIC_API_KEY`
    /// by convention). The key itself never appears in the configuration, in logs or in
    /// `Debug` output.
    pub api_key_env: Option<String>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Timeouts and retries (its `api_key`, if set, is sent as `x-api-key`).
    pub http: HttpConfig,
}

impl AnthropicConfig {
    /// A configuration for `base_url` with default settings.
    pub fn new(base_url: impl Into<String>) -> Self {
        AnthropicConfig {
            base_url: base_url.into(),
            ..AnthropicConfig::default()
        }
    }
}

/// The adapter.
#[derive(Debug, Clone)]
pub struct AnthropicProvider {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    api: Transport,
    api_key_env: Option<String>,
    /// Whether `/v1/messages/count_tokens` exists: `None` until a count settles it.
    counts: Mutex<Option<bool>>,
}

impl AnthropicProvider {
    /// A provider for the server `config` names. Without a key in `config.http`, the key
    /// is read from `config.api_key_env` now; a variable that is unset means no key.
    pub fn new(config: AnthropicConfig) -> Result<Self, BridgeError> {
        let mut http = config.http;
        http.headers.extend(config.headers);
        if !http
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("anthropic-version"))
        {
            http.headers
                .push(("anthropic-version".into(), ANTHROPIC_VERSION.into()));
        }
        http.api_key_header = KeyHeader::XApiKey;
        if http.api_key.is_none() {
            let key = config
                .api_key_env
                .as_ref()
                .and_then(|v| std::env::var(v).ok());
            http.api_key = key.filter(|k| !k.is_empty()).map(Secret::new);
        }
        let base = config.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/v1").unwrap_or(base);
        Ok(AnthropicProvider {
            inner: Arc::new(Inner {
                api: Transport::new(base, http)?,
                api_key_env: config.api_key_env,
                counts: Mutex::new(None),
            }),
        })
    }

    /// The server root.
    pub fn base_url(&self) -> &str {
        self.inner.api.base_url()
    }
}

impl Inner {
    /// The neutral error for `error`, with the server's details and a hint.
    fn error(&self, error: BridgeError, model: Option<&str>) -> ProviderError {
        let base = self.api.base_url();
        let mut mapped: ProviderError = error.clone().into();
        if let BridgeError::Http { body, .. } = &error {
            let value = serde_json::from_str::<serde_json::Value>(body).ok();
            let inner = value.as_ref().and_then(|v| v.get("error"));
            if let Some((kind, retryable)) =
                inner.and_then(|e| stream::error_kind(e, &mapped.message))
            {
                mapped.kind = kind;
                mapped.retryable = retryable && error.is_retryable();
            }
        }
        if let Some(hint) = error.tools_refusal() {
            mapped.kind = ProviderErrorKind::ToolsUnsupported;
            mapped.retryable = false;
            return mapped.with_hint(hint);
        }
        match (&error, mapped.kind) {
            (BridgeError::Connect { .. }, _) => mapped.with_hint(format!(
                "is an Anthropic Messages server running at {base}? (start it, or set the \
                 base URL)"
            )),
            (_, ProviderErrorKind::ModelNotFound) => mapped.with_hint(match model {
                Some(model) => format!(
                    "the server at {base} does not serve a model named {model:?} (GET \
                     {base}/v1/models lists what it serves)"
                ),
                None => format!("does {base} serve the Messages API at /v1/messages?"),
            }),
            (_, ProviderErrorKind::Auth) => mapped.with_hint(match &self.api_key_env {
                Some(var) => format!("check the API key in the environment variable {var}"),
                None => "the server wants an API key: name the environment variable that \
                         holds it in the configuration (api_key_env)"
                    .to_owned(),
            }),
            _ => mapped,
        }
    }

    /// The exact count of `request` from `/v1/messages/count_tokens`; `None` when the
    /// server has no such endpoint (remembered).
    async fn count(&self, request: &ProviderRequest) -> Result<Option<usize>, BridgeError> {
        if self.counts.lock().ok().and_then(|c| *c) == Some(false) {
            return Ok(None);
        }
        let body = request::count_request(request);
        let spec = RequestSpec::json(Method::POST, "/v1/messages/count_tokens", &body);
        match self.api.fetch_json::<wire::TokenCount>(spec).await {
            Ok(count) => {
                self.settle(true);
                Ok(Some(count.input_tokens))
            }
            Err(BridgeError::Http {
                status: 404 | 405 | 501,
                ..
            }) => {
                self.settle(false);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }
}

impl Inner {
    fn settle(&self, exists: bool) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts = Some(exists);
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

/// The refusal of `what` (`show`), saying what the server offers instead.
fn refusal(what: &str, base: &str) -> ProviderError {
    ProviderError::new(
        ProviderErrorKind::Unsupported,
        format!(
            "the anthropic provider does not support `{what}` here: the Messages API serves \
             no per-model details and the server at {base} has no llama.cpp /props; \
             `ollm list` shows what GET {base}/v1/models offers"
        ),
    )
}

#[async_trait]
impl ProviderAdapter for AnthropicProvider {
    fn name(&self) -> &str {
        "anthropic"
    }

    fn chat(&self, request: ProviderRequest) -> ProviderStream {
        let body = match serde_json::to_vec(&request::messages_request(&request)) {
            Ok(body) => body,
            Err(e) => {
                let error = ProviderError::new(ProviderErrorKind::Other, e.to_string());
                return Box::pin(futures::stream::iter([ProviderEvent::Error { error }]));
            }
        };
        let spec = RequestSpec {
            method: Method::POST,
            path: "/v1/messages".into(),
            body: Some(Bytes::from(body)),
            headers: request.headers.clone(),
        };
        let decoder =
            MessagesDecoder::new().with_tools(request.tools.iter().map(|t| t.name.clone()));
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

    async fn count_request(
        &self,
        request: &ProviderRequest,
    ) -> Result<Option<usize>, ProviderError> {
        self.inner
            .count(request)
            .await
            .map_err(|e| self.inner.error(e, Some(&request.model)))
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        let list: wire::ModelList = self
            .inner
            .api
            .fetch_json(RequestSpec::get("/v1/models"))
            .await
            .map_err(|e| self.inner.error(e, None))?;
        Ok(list.data.into_iter().map(model_info).collect())
    }

    /// llama.cpp's `/props` (the window per slot, the template's capabilities), else
    /// the model's entry in `/v1/models`.
    async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        let props = self
            .inner
            .api
            .fetch_json::<props::Props>(RequestSpec::get("/props"))
            .await;
        match props {
            Ok(found) => Ok(props::model_info(model, found)),
            Err(BridgeError::Http { status: 404, .. } | BridgeError::Decode { .. }) => {
                let listed = self.list_models().await?;
                listed
                    .into_iter()
                    .find(|m| m.name == model)
                    .ok_or_else(|| refusal("show", self.inner.api.base_url()))
            }
            Err(e) => Err(self.inner.error(e, None)),
        }
    }
}

/// One entry of `/v1/models` as a [`ModelInfo`].
fn model_info(entry: wire::ModelEntry) -> ModelInfo {
    let meta = entry.meta.unwrap_or_default();
    ModelInfo {
        name: entry.id,
        modified_at: entry.created_at,
        size: meta.size,
        context_length: meta.n_ctx.or(meta.n_ctx_train),
        window: meta.n_ctx,
        ..ModelInfo::default()
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
        check("h:8080", Some("http://h:8080"));
        check("0.0.0.0:8080", Some("http://127.0.0.1:8080"));
        check("[::1]:8080", Some("http://[::1]:8080"));
        check("http://h:8080/v1", Some("http://h:8080"));
        check("http://h:8080/v1/", Some("http://h:8080"));
        check(
            "https://api.anthropic.com",
            Some("https://api.anthropic.com"),
        );
        check(
            "https://gw.example/anthropic",
            Some("https://gw.example/anthropic"),
        );
        check("", None);
        check("ftp://h", None);
    }

    #[test]
    fn the_api_key_is_not_debug_printed() {
        let mut config = AnthropicConfig::new("http://127.0.0.1:9");
        config.http.api_key = Some(Secret::new("sk-ant-secret-123"));
        let provider = AnthropicProvider::new(config).unwrap();
        assert!(!format!("{provider:?}").contains("sk-ant-secret-123"));
    }
}
