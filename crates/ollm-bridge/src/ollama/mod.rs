//! The Ollama adapter: Ollama's native API (`/api/chat` streamed as NDJSON, and model
//! management), the default provider of ollm.
//!
//! Pure translators do the work, each with table tests: [`request`] builds the chat body,
//! [`decode`]'s [`NdjsonDecoder`] turns bytes into events however they are split, [`host`]
//! reads `OLLAMA_HOST` ([`parse_host`]), [`truncation`] judges the final token count and
//! calibrates estimates. [`OllamaProvider`] plans the request (`num_ctx`) and hands it to
//! the bridge's one adapter shell (send, retry before output, decode, map errors with
//! Ollama's hints) on the shared [`crate::Transport`].
//!
//! # `num_ctx`
//! Ollama's own default context window is small (2048-4096 depending on the version) and
//! it silently drops the front of a longer prompt. The adapter therefore always sends
//! `num_ctx`: the request's `options.context_length` when it sets one; else the
//! configured [`OllamaConfig::num_ctx`]; else the model's trained context
//! length (from `/api/show`) capped at [`OllamaConfig::num_ctx_cap`] (default
//! [`DEFAULT_NUM_CTX_CAP`] = 8192, because memory grows with the window); else, when the
//! server does not report a length, the cap itself. `show_model` reports that derived
//! number as the model's `window`; the runtime settles its window from it and sends it
//! back as `options.context_length`, so the window ollm enforces and the `num_ctx` sent
//! are one number, computed once.
//!
//! # Capabilities
//! `think` and tools are sent exactly as the request carries them: the runtime reads
//! [`ollm_core::ProviderAdapter::show_model`] and decides (with its warning), so there is
//! one gate, not two. A server refusing them anyway answers a typed `ThinkingUnsupported`
//! or `ToolsUnsupported` error, whether as a 400 or as an error line inside the stream.
//!
//! `/api/show` is cached per model (for `num_ctx`), and a chat whose request carries
//! `options.context_length` (the runtime always sets it) sends none. A model the server does not have is
//! remembered until the next chat with it takes the answer, so the runtime's `show_model`
//! and the chat that follows ask the server once, not twice; `pull` and `rm` forget both.

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
pub use truncation::{Calibration, TruncationCheck, truncation_warning};

/// The default cap on the `num_ctx` taken from a model's trained context length.
pub const DEFAULT_NUM_CTX_CAP: u32 = 8192;

/// How to reach and use an Ollama server.
#[derive(Debug, Clone, PartialEq)]
pub struct OllamaConfig {
    /// `scheme://host:port`, see [`parse_host`].
    pub base_url: String,
    /// Keep-alive sent with requests that set none (`"5m"`, `"0"`, ...); `None` leaves the
    /// server's default.
    pub keep_alive: Option<String>,
    /// The `num_ctx` to send; `None` derives it (see the module docs).
    pub num_ctx: Option<u32>,
    /// The cap on a derived `num_ctx`.
    pub num_ctx_cap: u32,
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
            num_ctx: None,
            num_ctx_cap: DEFAULT_NUM_CTX_CAP,
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
    calibration: Calibration,
}

/// The Ollama provider. Cheap to clone; clones share the `/api/show` cache and the
/// token calibration.
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
                calibration: Calibration::default(),
            }),
        })
    }

    /// The base URL in use.
    pub fn base_url(&self) -> &str {
        self.inner.transport.base_url()
    }

    /// The learned characters-per-token ratio for `model`, if any reply taught one.
    pub fn calibrated_ratio(&self, model: &str) -> Option<f64> {
        self.inner.calibration.ratio(model)
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
            .map(|mut info| {
                info.window = Some(self.num_ctx(Some(&info)));
                info
            })
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

    /// The show for a chat: a missing model just reported by `show_model` is taken from
    /// the memory (and forgotten) instead of being asked again.
    async fn show_for_chat(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        let known_missing = self.missing.lock().ok().and_then(|mut m| m.remove(model));
        match known_missing {
            Some(error) => Err(error),
            None => self.show(model).await,
        }
    }

    fn forget(&self, model: &str) {
        if let Ok(mut shows) = self.shows.lock() {
            shows.remove(model);
        }
        if let Ok(mut missing) = self.missing.lock() {
            missing.remove(model);
        }
    }

    /// The `num_ctx` this adapter asks for when a request names none: the configured
    /// value, else the trained length capped at the cap, else the cap. `show_model`
    /// reports it as the model's `window`, so the runtime enforces (and sends) the same
    /// number.
    fn num_ctx(&self, info: Option<&ModelInfo>) -> u32 {
        let cap = self.config.num_ctx_cap;
        self.config.num_ctx.unwrap_or_else(|| {
            info.and_then(|i| i.context_length)
                .map_or(cap, |c| c.min(cap))
        })
    }

    /// The plan for a chat with `model`: the `num_ctx` to send.
    async fn plan(&self, req: &ProviderRequest) -> Result<ChatPlan, ProviderError> {
        let keep_alive = self.config.keep_alive.clone();
        if req.options.context_length.is_some() {
            // The runtime settled the window (it always does): `/api/show` has nothing
            // to add, so none is sent (a thousand concurrent first chats sent a
            // thousand). A model `show_model` just found missing still fails here.
            return match self
                .missing
                .lock()
                .ok()
                .and_then(|mut m| m.remove(&req.model))
            {
                Some(error) => Err(error),
                None => Ok(ChatPlan {
                    num_ctx: None,
                    keep_alive,
                }),
            };
        }
        match self.show_for_chat(&req.model).await {
            Ok(info) => Ok(ChatPlan {
                num_ctx: Some(self.num_ctx(Some(&info))),
                keep_alive,
            }),
            // Unreachable or unknown model: the chat would fail the same way.
            Err(e)
                if matches!(
                    e.kind,
                    ProviderErrorKind::Connection | ProviderErrorKind::ModelNotFound
                ) =>
            {
                Err(e)
            }
            // A server that cannot `show` (old, or a proxy): chat without the extras.
            Err(_) => Ok(ChatPlan {
                num_ctx: Some(self.num_ctx(None)),
                keep_alive,
            }),
        }
    }
}

/// The chat: plan, then the shell's stream. The planning future hands over the shell's
/// stream itself (`once(..).flatten()`) rather than re-yielding each of its events from
/// a stream of its own, which cost every event a second generator resume.
fn chat_stream(inner: Arc<Inner>, req: ProviderRequest) -> ProviderStream {
    let transport = inner.transport.clone();
    let prepared = async move {
        let plan = inner.plan(&req).await?;
        let body = serde_json::to_vec(&chat_body(&req, &plan))
            .map_err(|e| ProviderError::new(ProviderErrorKind::BadRequest, e.to_string()))?;
        let chars = req.char_count();
        let num_ctx = request::num_ctx(&req, &plan);
        let check = TruncationCheck {
            num_ctx,
            estimated_prompt_tokens: inner.calibration.estimate(&req.model, chars),
            fresh: truncation::is_calibration_sample(&req),
        };
        let spec = RequestSpec {
            method: Method::POST,
            path: "/api/chat".into(),
            body: Some(Bytes::from(body)),
        };
        let decoder = NdjsonDecoder::new(Some(check))
            .with_max_line(inner.config.max_line)
            .with_tools(req.tools.iter().map(|t| t.name.clone()));
        let hints = ChatHints {
            model: req.model.clone(),
        };
        let learner = Arc::clone(&inner);
        let sample = check.fresh;
        let model = req.model;
        let learn = move |decoder: &NdjsonDecoder| {
            let Some(read) = decoder.prompt_eval_count() else {
                return;
            };
            let at_cap = num_ctx.is_some_and(|n| read >= n - (n / 32).max(16).min(n));
            if !decoder.warned_truncation() && !at_cap && sample {
                learner.calibration.observe(&model, chars, read);
            }
        };
        Ok(shell::Exchange {
            spec,
            decoder,
            hints,
            on_end: learn,
        })
    };
    shell::exchange_after(transport, prepared)
}

#[async_trait]
impl ProviderAdapter for OllamaProvider {
    fn name(&self) -> &str {
        "ollama"
    }

    fn chat(&self, request: ProviderRequest) -> ProviderStream {
        chat_stream(Arc::clone(&self.inner), request)
    }

    /// The calibrated estimate (see [`truncation`]): `None` until a reply from `model` has
    /// taught a ratio, since until then it is no better than `ceil(chars / 4)`.
    async fn count_tokens(&self, model: &str, text: &str) -> Result<Option<usize>, ProviderError> {
        let chars = text.chars().count();
        Ok(self.inner.calibration.ratio(model).map(|_| {
            let tokens = self.inner.calibration.estimate(model, chars);
            usize::try_from(tokens).unwrap_or(usize::MAX)
        }))
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
