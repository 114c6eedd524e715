//! The Ollama adapter: Ollama's native API (`/api/chat` streamed as NDJSON, and model
//! management), the default provider of ollm.
//!
//! Pure translators do the work, each with table tests: [`request`] builds the chat body,
//! [`decode`]'s [`NdjsonDecoder`] turns bytes into events however they are split, [`host`]
//! reads `OLLAMA_HOST` ([`parse_host`]), [`truncation`] judges the final token count.
//! [`OllamaProvider`] hands the request to the bridge's one adapter shell (send, retry
//! before output, decode, map errors with Ollama's hints) on the shared
//! [`crate::Transport`].
//!
//! # The window: facts up, one number down
//! The adapter decides nothing about the context window; core's `context::window` does.
//! It reports facts: `show_model` gives the trained length (`<arch>.context_length`),
//! the server's own `num_ctx` as [`ModelInfo::window`] when the model's parameters set
//! one (a Modelfile's `PARAMETER num_ctx`), and `window_per_request` (Ollama sizes the
//! window from each request's `num_ctx`); every reply's `Usage::prompt_tokens` is the
//! server's `prompt_eval_count`. A chat sends exactly the request's
//! `options.context_length` as `num_ctx` (the runtime always sets it), and nothing when
//! the request has none, which leaves the server's default. `/api/ps`'s
//! `context_length` is reported by `running_models` but not taken as the window: it is
//! whatever the last request asked for, so one run's window would stick to the next.
//!
//! Until issue 26 the adapter worked out a `num_ctx` of its own (`OllamaConfig::num_ctx`,
//! else the trained length capped at `num_ctx_cap`, 8192), reported it as the window
//! and kept a characters-per-token calibration for `count_tokens`; core settled the
//! window again and calibrated again. Both now live in core only.
//!
//! # Capabilities
//! `think` and tools are sent exactly as the request carries them: the runtime reads
//! [`ollm_core::ProviderAdapter::show_model`] and decides (with its warning), so there is
//! one gate, not two. A server refusing them anyway answers a typed `ThinkingUnsupported`
//! or `ToolsUnsupported` error, whether as a 400 or as an error line inside the stream.
//!
//! `/api/show` is cached per model, and a chat sends none. A model the server does not
//! have is remembered until the next chat with it takes the answer, so the runtime's
//! `show_model` and the chat that follows ask the server once, not twice; `pull` and
//! `rm` forget both.

pub mod decode;
mod errors;
pub mod host;
mod management;
pub mod request;
pub mod truncation;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use ollm_core::tokens::estimate_tokens;
use ollm_core::{ProviderAdapter, ProviderStream, PullStream};
use ollm_types::{ModelInfo, ProviderError, ProviderErrorKind, ProviderRequest, RunningModel};
use reqwest::Method;

use crate::lines::DEFAULT_MAX_LINE;
use crate::shell::{self, Hints};
use crate::{BridgeError, HttpConfig, RequestSpec, Transport};
use errors::{provider_error, refine};

pub use decode::NdjsonDecoder;
pub use host::{DEFAULT_BASE_URL, parse_host};
pub use request::{ChatPlan, chat_body};
pub use truncation::{TruncationCheck, truncation_warning};

/// How to reach and use an Ollama server.
#[derive(Debug, Clone, PartialEq)]
pub struct OllamaConfig {
    /// `scheme://host:port`, see [`parse_host`].
    pub base_url: String,
    /// Keep-alive sent with requests that set none (`"5m"`, `"0"`, ...); `None` leaves the
    /// server's default.
    pub keep_alive: Option<String>,
    /// Timeouts and retries.
    pub http: HttpConfig,
    /// The longest NDJSON line accepted, in bytes.
    pub max_line: usize,
}

impl Default for OllamaConfig {
    fn default() -> Self {
        OllamaConfig {
            base_url: DEFAULT_BASE_URL.to_owned(),
            keep_alive: None,
            http: HttpConfig::default(),
            max_line: DEFAULT_MAX_LINE,
        }
    }
}

impl OllamaConfig {
    /// The defaults, with the address from an `OLLAMA_HOST` value (`None`: the default).
    pub fn from_host(ollama_host: Option<&str>) -> Result<Self, BridgeError> {
        Ok(OllamaConfig {
            base_url: parse_host(ollama_host.unwrap_or(""))?,
            ..Self::default()
        })
    }

    /// The defaults, with the address from the `OLLAMA_HOST` environment variable.
    pub fn from_env() -> Result<Self, BridgeError> {
        Self::from_host(std::env::var("OLLAMA_HOST").ok().as_deref())
    }
}

/// The state shared by a provider and the streams it started.
#[derive(Debug)]
struct Inner {
    transport: Transport,
    config: OllamaConfig,
    shows: Mutex<HashMap<String, ModelInfo>>,
    /// Models `/api/show` said are missing, until a chat takes the answer.
    missing: Mutex<HashMap<String, ProviderError>>,
}

/// The Ollama provider. Cheap to clone; clones share the `/api/show` cache.
#[derive(Debug, Clone)]
pub struct OllamaProvider {
    inner: Arc<Inner>,
}

impl OllamaProvider {
    /// A provider for `config`; fails only on an unusable address.
    pub fn new(config: OllamaConfig) -> Result<Self, BridgeError> {
        let transport = Transport::new(&config.base_url, config.http.clone())?;
        Ok(OllamaProvider {
            inner: Arc::new(Inner {
                transport,
                config,
                shows: Mutex::new(HashMap::new()),
                missing: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The base URL in use.
    pub fn base_url(&self) -> &str {
        self.inner.transport.base_url()
    }
}

/// Ollama's hints for one chat with `model`.
struct ChatHints {
    model: String,
}

impl Hints for ChatHints {
    fn transport(&self, error: BridgeError) -> ProviderError {
        provider_error(error, Some(&self.model))
    }

    fn in_stream(&self, error: ProviderError) -> ProviderError {
        refine(error, Some(&self.model))
    }
}

impl Inner {
    /// The cached `/api/show` of `model`, asking the server the first time.
    async fn show(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        if let Some(info) = self.shows.lock().ok().and_then(|s| s.get(model).cloned()) {
            return Ok(info);
        }
        let info = management::show(&self.transport, model)
            .await
            .map_err(|e| provider_error(e, Some(model)));
        match &info {
            Ok(info) => {
                if let Ok(mut shows) = self.shows.lock() {
                    shows.insert(model.to_owned(), info.clone());
                }
            }
            Err(e) if e.kind == ProviderErrorKind::ModelNotFound => {
                if let Ok(mut missing) = self.missing.lock() {
                    missing.insert(model.to_owned(), e.clone());
                }
            }
            Err(_) => {}
        }
        info
    }

    fn forget(&self, model: &str) {
        if let Ok(mut shows) = self.shows.lock() {
            shows.remove(model);
        }
        if let Ok(mut missing) = self.missing.lock() {
            missing.remove(model);
        }
    }

    /// The plan for a chat: the default keep-alive. A model `show_model` just found
    /// missing fails here without asking the server again (and is forgotten: the next
    /// chat asks, the model may have been pulled).
    fn plan(&self, req: &ProviderRequest) -> Result<ChatPlan, ProviderError> {
        let missing = self
            .missing
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&req.model));
        match missing {
            Some(error) => Err(error),
            None => Ok(ChatPlan {
                keep_alive: self.config.keep_alive.clone(),
            }),
        }
    }
}

/// The exchange for one chat: the body as the request carries it (`num_ctx` is its
/// `options.context_length`, see the module docs), and a decoder that judges truncation
/// against the runtime's estimate carried on the request (else `ceil(chars / 4)`, core's
/// plain estimate, for a request that did not come through the runtime).
fn prepare(inner: &Inner, req: &ProviderRequest) -> Result<Exchange, ProviderError> {
    let plan = inner.plan(req)?;
    let body = serde_json::to_vec(&chat_body(req, &plan))
        .map_err(|e| ProviderError::new(ProviderErrorKind::BadRequest, e.to_string()))?;
    let estimate = req
        .estimated_prompt_tokens
        .unwrap_or_else(|| u32::try_from(estimate_tokens(req.char_count())).unwrap_or(u32::MAX));
    let check = TruncationCheck {
        num_ctx: req.options.context_length,
        estimated_prompt_tokens: estimate,
        fresh: truncation::is_fresh(req),
    };
    let spec = RequestSpec {
        method: Method::POST,
        path: "/api/chat".into(),
        body: Some(Bytes::from(body)),
        headers: req.headers.clone(),
    };
    let decoder = NdjsonDecoder::new(Some(check))
        .with_max_line(inner.config.max_line)
        .with_tools(req.tools.iter().map(|t| t.name.clone()));
    let hints = ChatHints {
        model: req.model.clone(),
    };
    Ok(shell::Exchange {
        spec,
        decoder,
        hints,
    })
}

/// One Ollama exchange.
type Exchange = shell::Exchange<NdjsonDecoder, ChatHints>;

#[async_trait]
impl ProviderAdapter for OllamaProvider {
    fn name(&self) -> &str {
        "ollama"
    }

    /// Nothing happens until the stream is polled (the body is built, and a remembered
    /// missing model taken, then).
    fn chat(&self, request: ProviderRequest) -> ProviderStream {
        let inner = Arc::clone(&self.inner);
        let prepared = futures::future::lazy(move |_| prepare(&inner, &request));
        shell::exchange_after(self.inner.transport.clone(), prepared)
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        management::tags(&self.inner.transport)
            .await
            .map_err(|e| provider_error(e, None))
    }

    async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        self.inner.show(model).await
    }

    fn pull_model(&self, model: &str) -> PullStream {
        self.inner.forget(model);
        management::pull(
            self.inner.transport.clone(),
            model.to_owned(),
            self.inner.config.max_line,
        )
    }

    async fn delete_model(&self, model: &str) -> Result<(), ProviderError> {
        self.inner.forget(model);
        management::delete(&self.inner.transport, model)
            .await
            .map_err(|e| provider_error(e, Some(model)))
    }

    async fn running_models(&self) -> Result<Vec<RunningModel>, ProviderError> {
        management::ps(&self.inner.transport)
            .await
            .map_err(|e| provider_error(e, None))
    }

    async fn server_version(&self) -> Result<String, ProviderError> {
        management::version(&self.inner.transport)
            .await
            .map_err(|e| provider_error(e, None))
    }
}
