//! The pool as the turn loop's provider ([`Through`]): the client's session and
//! forwarded headers kept, model descriptions cached, token counts asked of the server
//! only when the window decision needs them, and each upstream reply watched on its way
//! to the loop (what it looked like before the loop read it: [`Seen`]).
//!
//! # Decisions
//! - The runs add no prompt (`turns.rs` resumes the conversation as it stands), so the
//!   upstream gets the client's messages as sent, plus only what a run answered itself
//!   (calls to undeclared tools).
//! - **`/tokenize` only when the window decision needs it.** The loop counts every
//!   request against the window before sending it (the server's tokenizer, else
//!   `ceil(chars / 4)`). Issue 37 found serve asking llama-server's `/tokenize` before
//!   every chat request. A request whose estimate is at most
//!   half the window would need two tokens per four characters of its text to overflow,
//!   which code and prose in the tokenizers we run never reach; and a server refuses a
//!   request over its window itself (llama-server and vLLM answer 400, which the client
//!   gets). So below half the window the estimate stands and nothing is asked; above it
//!   the server counts the text.
//! - What the server says about a model (`show_model`) is cached for a minute across
//!   requests, so the loop's capability check does not cost a round trip each. A server
//!   that refused native tools for a model (vLLM without `--enable-auto-tool-choice`,
//!   llama-server without `--jinja`) is remembered for the server's life: later requests
//!   for that model go straight to the ReAct fallback; so is a server that ignored a
//!   `tool_choice` obliging a call (`contract.rs`).
//! - Ollama's 500 for a tool call it could not parse is mended here, before the loop
//!   reads the reply (`unparsed.rs`).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use ollm_bridge::ProviderPool;
use ollm_core::context::settle_window;
use ollm_core::tokens::estimate_text;
use ollm_core::{ContextLimits, ProviderAdapter, ProviderStream};
use ollm_types::{ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest};
use tokio::sync::mpsc::UnboundedSender;

use super::clock::Clock;
use super::unparsed;
use super::wire_out::Piece;

/// How long a model's description is reused.
const INFO_TTL: Duration = Duration::from_secs(60);

/// What the server said about one model.
type Described = Result<ModelInfo, ProviderError>;

/// What the server said about each model, and when; and the models whose server refused
/// native tools (so later requests go straight to the fallback).
#[derive(Debug, Default)]
pub(crate) struct InfoCache {
    entries: Mutex<HashMap<String, (Instant, Described)>>,
    native_refused: Mutex<HashSet<String>>,
    /// Models for which the server answered a `tool_choice` that obliges a call without
    /// one (`contract.rs`).
    ignores_choice: Mutex<HashSet<String>>,
}

impl InfoCache {
    /// Whether the server refused native tools for `model`.
    pub(crate) fn native_refused(&self, model: &str) -> bool {
        lock(&self.native_refused).contains(model)
    }

    /// Remembers that the server refused native tools for `model`.
    pub(crate) fn refuse_native(&self, model: &str) {
        lock(&self.native_refused).insert(model.to_owned());
    }

    /// Whether the server answered a `tool_choice` obliging a call for `model` without
    /// one.
    pub(crate) fn ignores_choice(&self, model: &str) -> bool {
        lock(&self.ignores_choice).contains(model)
    }

    /// Remembers that the server ignores a `tool_choice` obliging a call for `model`.
    pub(crate) fn ignore_choice(&self, model: &str) {
        lock(&self.ignores_choice).insert(model.to_owned());
    }
}

/// The last upstream reply as it came, before the turn loop read it.
#[derive(Debug, Default, Clone)]
pub(crate) struct Seen {
    /// Its whole text.
    pub(crate) text: String,
    /// The calls the server sent as structured calls.
    pub(crate) native_calls: usize,
}

/// The pool as the turn loop's provider (see the module docs).
pub(crate) struct Through {
    pub(crate) pool: ProviderPool,
    pub(crate) session: Option<String>,
    pub(crate) cache: Arc<InfoCache>,
    /// The limits the loop settles the window with (the same as the run's config).
    pub(crate) limits: ContextLimits,
    /// The last reply, as it came.
    pub(crate) seen: Arc<Mutex<Seen>>,
    /// Where the replies' pieces also go as they came (the `flag` policy's client).
    pub(crate) raw: Option<UnboundedSender<Piece>>,
    /// The request's clock, which times each upstream request.
    pub(crate) clock: Arc<Clock>,
    /// The client's headers forwarded with every request (`http.rs`).
    pub(crate) headers: Vec<(String, String)>,
}

#[async_trait]
impl ProviderAdapter for Through {
    fn name(&self) -> &str {
        "serve"
    }

    fn chat(&self, mut request: ProviderRequest) -> ProviderStream {
        request.headers.clone_from(&self.headers);
        *lock(&self.seen) = Seen::default();
        let (seen, raw) = (Arc::clone(&self.seen), self.raw.clone());
        let first = self
            .pool
            .chat_in_session(request.clone(), self.session.as_deref());
        let (pool, session) = (self.pool.clone(), self.session.clone());
        let reply = unparsed::mended(first, move || {
            pool.chat_in_session(request, session.as_deref())
        });
        self.clock
            .time(reply)
            .inspect(move |event| watch(&seen, raw.as_ref(), event))
            .boxed()
    }

    async fn count_tokens(&self, model: &str, text: &str) -> Result<Option<usize>, ProviderError> {
        let info = self.show_model(model).await.ok();
        let window = settle_window(&self.limits, model, None, info.as_ref()).tokens;
        if estimate_text(text).saturating_mul(2) <= window {
            return Ok(None);
        }
        self.pool.count_tokens(model, text).await
    }

    async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        let cached = lock(&self.cache.entries)
            .get(model)
            .filter(|(at, _)| at.elapsed() < INFO_TTL)
            .map(|(_, info)| info.clone());
        if let Some(info) = cached {
            return info;
        }
        let info = self.pool.show_model(model).await;
        // A server that cannot say is remembered as such; a passing failure is not.
        let lasting = match &info {
            Ok(_) => true,
            Err(e) => e.kind == ProviderErrorKind::Unsupported,
        };
        if lasting {
            lock(&self.cache.entries).insert(model.to_owned(), (Instant::now(), info.clone()));
        }
        info
    }
}

/// Notes `event` in `seen`, and passes it on to `raw` as the piece it is.
fn watch(seen: &Mutex<Seen>, raw: Option<&UnboundedSender<Piece>>, event: &ProviderEvent) {
    {
        let mut seen = lock(seen);
        match event {
            ProviderEvent::TextDelta { text } => seen.text.push_str(text),
            ProviderEvent::ToolCall { .. } => seen.native_calls += 1,
            _ => {}
        }
    }
    if let Some(tx) = raw {
        if let Some(piece) = Piece::from_event(event.clone()) {
            // A closed channel means the client left, which also ends the run.
            let _ = tx.send(piece);
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
