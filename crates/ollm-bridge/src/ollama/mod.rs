//! The Ollama adapter: Ollama's native API (`/api/chat` streamed as NDJSON, and model
//! management), the default provider of ollm.
//!
//! Pure translators do the work, each with table tests: [`request`] builds the chat body,
//! [`decode`] turns bytes into events however they are split, [`host`] reads
//! `OLLAMA_HOST`, [`truncation`] judges the final token count and calibrates estimates.
//! [`OllamaProvider`] is the thin I/O shell around them on the shared
//! [`crate::Transport`] (timeouts, retries, proxy rules).
//!
//! # `num_ctx`
//! Ollama's own default context window is small (2048-4096 depending on the version) and
//! it silently drops the front of a longer prompt. The adapter therefore always sends
//! `num_ctx`: the request's `options.context_length` when it sets one; else the
//! configured [`OllamaConfig::num_ctx`]; else the model's trained context
//! length (from `/api/show`) capped at [`OllamaConfig::num_ctx_cap`] (default
//! [`DEFAULT_NUM_CTX_CAP`] = 8192, because memory grows with the window); else, when the
//! server does not report a length, the cap itself.
//!
//! # Capabilities
//! `/api/show` is asked once per model (cached) before the first chat with it: `think` is
//! sent only to models reporting `thinking`. Tools are sent as asked: the runtime reads
//! [`ollm_core::ProviderAdapter::show_model`] to choose native tools or its ReAct fallback,
//! and a server refusing them anyway answers a typed `ToolsUnsupported` error.

pub mod decode;
pub mod host;
mod management;
pub mod request;
pub mod truncation;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use ollm_core::{ProviderAdapter, ProviderStream, PullStream};
use ollm_types::{
    ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest, RunningModel,
    WarningKind,
};
use reqwest::Method;

use crate::lines::DEFAULT_MAX_LINE;
use crate::retrying::{Attempts, Step};
use crate::{BridgeError, HttpConfig, RequestSpec, Transport};

pub use decode::ChatDecoder;
pub use host::{DEFAULT_BASE_URL, base_url_from_host};
pub use request::{ChatPlan, chat_body};
pub use truncation::{Calibration, TruncationCheck, truncation_warning};

/// The default cap on the `num_ctx` taken from a model's trained context length.
pub const DEFAULT_NUM_CTX_CAP: u32 = 8192;

/// How to reach and use an Ollama server.
#[derive(Debug, Clone, PartialEq)]
pub struct OllamaConfig {
    /// `scheme://host:port`, see [`base_url_from_host`].
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
    pub fn from_host(ollama_host: Option<&str>) -> Self {
        OllamaConfig {
            base_url: base_url_from_host(ollama_host.unwrap_or("")),
            ..Self::default()
        }
    }

    /// The defaults, with the address from the `OLLAMA_HOST` environment variable.
    pub fn from_env() -> Self {
        Self::from_host(std::env::var("OLLAMA_HOST").ok().as_deref())
    }
}

/// The state shared by a provider and the streams it started.
#[derive(Debug)]
struct Inner {
    transport: Transport,
    config: OllamaConfig,
    shows: Mutex<HashMap<String, ModelInfo>>,
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

/// Maps a transport error to the neutral error, refining what Ollama's statuses and texts
/// say: a connection failure hints `ollama serve`, 404 on a model is `ModelNotFound` with
/// the `ollama pull` hint, 400 "does not support tools/thinking" are capability errors.
fn provider_error(err: BridgeError, model: Option<&str>) -> ProviderError {
    let refined = match &err {
        BridgeError::Connect { .. } => Some((ProviderErrorKind::Connection, None)),
        BridgeError::Http {
            status: 404,
            message,
            ..
        } if model.is_some() || message.contains("not found") => Some((
            ProviderErrorKind::ModelNotFound,
            model.map(|m| format!("ollama pull {m}")),
        )),
        BridgeError::Http {
            status: 400,
            message,
            ..
        } if message.contains("does not support tools") => {
            Some((ProviderErrorKind::ToolsUnsupported, None))
        }
        BridgeError::Http {
            status: 400,
            message,
            ..
        } if message.contains("does not support thinking") => {
            Some((ProviderErrorKind::ThinkingUnsupported, None))
        }
        _ => None,
    };
    let connect = matches!(err, BridgeError::Connect { .. });
    let mut out = ProviderError::from(err);
    if let Some((kind, hint)) = refined {
        out.kind = kind;
        if let Some(hint) = hint {
            out.hint = Some(hint);
        }
    }
    if connect {
        out.hint = Some("is Ollama running? start it with: ollama serve".to_owned());
    }
    out
}

impl Inner {
    /// The cached `/api/show` of `model`, asking the server the first time.
    async fn show(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        if let Some(info) = self.shows.lock().ok().and_then(|s| s.get(model).cloned()) {
            return Ok(info);
        }
        let info = management::show(&self.transport, model)
            .await
            .map_err(|e| provider_error(e, Some(model)))?;
        if let Ok(mut shows) = self.shows.lock() {
            shows.insert(model.to_owned(), info.clone());
        }
        Ok(info)
    }

    fn forget(&self, model: &str) {
        if let Ok(mut shows) = self.shows.lock() {
            shows.remove(model);
        }
    }

    /// The plan for a chat with `model`: `num_ctx` and whether it can think.
    async fn plan(&self, req: &ProviderRequest) -> Result<ChatPlan, ProviderError> {
        let keep_alive = self.config.keep_alive.clone();
        match self.show(&req.model).await {
            Ok(info) => Ok(ChatPlan {
                num_ctx: Some(self.config.num_ctx.unwrap_or_else(|| {
                    info.context_length
                        .map_or(self.config.num_ctx_cap, |c| c.min(self.config.num_ctx_cap))
                })),
                can_think: info.has(&ollm_types::Capability::Thinking),
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
                num_ctx: Some(self.config.num_ctx.unwrap_or(self.config.num_ctx_cap)),
                can_think: false,
                keep_alive,
            }),
        }
    }
}

fn chat_stream(inner: Arc<Inner>, req: ProviderRequest) -> ProviderStream {
    Box::pin(async_stream::stream! {
        let plan = match inner.plan(&req).await {
            Ok(plan) => plan,
            Err(error) => {
                yield ProviderEvent::Error { error };
                return;
            }
        };
        let body = match serde_json::to_vec(&chat_body(&req, &plan)) {
            Ok(body) => Bytes::from(body),
            Err(e) => {
                let error = ProviderError::new(ProviderErrorKind::BadRequest, e.to_string());
                yield ProviderEvent::Error { error };
                return;
            }
        };
        let chars = req.char_count();
        let num_ctx = request::num_ctx(&req, &plan);
        let check = TruncationCheck {
            num_ctx,
            estimated_prompt_tokens: inner.calibration.estimate(&req.model, chars),
        };
        let spec = RequestSpec { method: Method::POST, path: "/api/chat".into(), body: Some(body) };
        let mut attempts = Attempts::new(&inner.transport, spec);
        let response = loop {
            match attempts.next().await {
                Step::Retrying(warning) => yield ProviderEvent::Warning { warning },
                Step::Response(response) => break response,
                Step::Failed(e) => {
                    yield ProviderEvent::Error { error: provider_error(e, Some(&req.model)) };
                    return;
                }
            }
        };
        drop(attempts);
        let mut decoder = ChatDecoder::new(Some(check)).with_max_line(inner.config.max_line);
        let mut chunks = inner.transport.body_chunks(response);
        let mut events = Vec::new();
        let mut truncated = false;
        loop {
            match chunks.next().await {
                Some(Ok(chunk)) => decoder.push(&chunk, &mut events),
                Some(Err(e)) => decoder.fail(e, &mut events),
                None => decoder.finish(&mut events),
            }
            for event in events.drain(..) {
                if let ProviderEvent::Warning { warning } = &event {
                    truncated |= warning.kind == WarningKind::PromptTruncated;
                }
                yield event;
            }
            if decoder.is_ended() {
                break;
            }
        }
        drop(chunks);
        if let Some(read) = decoder.prompt_eval_count() {
            let at_cap = num_ctx.is_some_and(|n| read >= n - (n / 32).max(16).min(n));
            if !truncated && !at_cap && truncation::is_calibration_sample(&req) {
                inner.calibration.observe(&req.model, chars, read);
            }
        }
    })
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
