//! The chat client and its turn loop.
//!
//! [`ChatClient::chat`] spawns one task per run that feeds a channel; the [`ChatRun`] the
//! caller holds is that channel as a stream plus a cancellation token. A turn is:
//! 1. build the request from the history (system prompt, messages, tools as the
//!    [`Strategy`] offers them, options; `think` only when the model can think, or when
//!    its capabilities are unknown);
//! 2. check its size: the provider's `count_tokens` when it answers, else
//!    `ceil(chars / 4)` (see [`crate::tokens`] for where the limit comes from); a warning at
//!    90% or more, and a refusal (an `Error` event of kind `ContextOverflow`) over the
//!    limit, before anything is sent;
//! 3. stream the reply, forwarding text, thinking and warnings as they arrive and queuing
//!    tool calls (`ToolCallStarted` as each arrives);
//! 4. after the stream ends, run all calls **concurrently** (one task each), emitting one
//!    `ToolResult` per call as each finishes;
//! 5. record the assistant message with its calls, then one tool message per call in call
//!    order, emit `TurnComplete`, and start the next turn.
//!
//! The run ends when a reply has no calls (`Finish` with `stop` or `length`), at the turn
//! limit (`max_turns`), on an error (`Error`, then `Finish` with `error`) or on
//! cancellation (`Finish` with `cancelled`). `Finish` is always the last event and carries
//! the usage summed over the turns.
//!
//! # Decisions
//! - **History on cancel**: the unfinished turn is recorded if anything of it arrived:
//!   the partial text and the calls, each call answered by its real result when its tool
//!   had finished and by the placeholder [`CANCELLED_RESULT`] otherwise (and a
//!   `ToolResult` event says so), so calls and results stay 1:1. Running tools are
//!   aborted and no tool starts after the cancel.
//! - **How turns are recorded**: native and constrained calls as an assistant message
//!   carrying the calls followed by one tool message per call (constrained replies keep
//!   no text, since their JSON is a protocol, not an answer); ReAct turns as the model's
//!   own text followed by a user message of `Observation: <json>` lines, which is what a
//!   model without tool support can read. A ReAct or constrained reply that could not be
//!   read is recorded with the correction message that answers it.
//! - **History on error**: the failed turn records nothing; if no turn of the run was
//!   recorded, the prompt is removed too, so the client is as before and the same prompt
//!   can be sent again.
//! - **Capabilities**: `show_model` is asked once per model and cached per client; any
//!   error (including `Unsupported`) means "unknown": native tools are allowed and `think`
//!   is sent as asked. Only answers and `Unsupported` are cached; after a passing failure
//!   (connection, busy) the next run asks again. Known capabilities without `thinking` drop `think` with a warning.
//! - **Fallbacks**: when the server refuses native tools (`ToolsUnsupported`) in
//!   [`ToolMode::Auto`], or refuses `think` (`ThinkingUnsupported`), before any output,
//!   the turn is retried with ReAct or without `think`, with a warning, and the client
//!   remembers it for that model.
//! - Runs of one client are serialised: a second `chat` waits for the first to end.
//! - A panic anywhere in a run (provider, tool, this loop) becomes an `Error` event and a
//!   `Finish`; the client stays usable.

use std::collections::{HashMap, HashSet};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};

use futures::stream::BoxStream;
use futures::{FutureExt, Stream, StreamExt};
use ollm_types::{
    Capability, FinishReason, GenerationOptions, Message, ModelInfo, ProviderError,
    ProviderErrorKind, ProviderEvent, ProviderRequest, Think, ToolCall, Usage, Warning,
    WarningKind,
};
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::strategy::{Shown, Strategy, TextFilter, ToolMode, TurnOutcome, capabilities_known};
use crate::tokens::{Budget, ContextLimits, budget, estimate_text, request_text, usage_percent};
use crate::tool::ToolOutcome;
use crate::{CoreError, History, ProviderAdapter, ToolRegistry, react};

/// The result recorded for a call whose tool had not finished when the run was cancelled.
pub const CANCELLED_RESULT: &str = "Error: cancelled before the tool finished";

/// One event of a chat run, in the order things happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
#[non_exhaustive]
pub enum ChatEvent {
    /// Answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// Reasoning text.
    ThinkingDelta {
        /// The new text.
        text: String,
    },
    /// The model asked for a tool call; it runs after the reply ends.
    ToolCallStarted {
        /// The call.
        call: ToolCall,
    },
    /// A tool call finished (exactly one per call).
    ToolResult {
        /// The call answered.
        call_id: String,
        /// The tool.
        name: String,
        /// The result text the model will read.
        content: String,
        /// Whether it is an error result (unknown tool, invalid arguments, failure,
        /// denial, cancellation).
        is_error: bool,
    },
    /// One provider round trip (and its tool calls) is done.
    TurnComplete {
        /// The turn's number, from 1.
        turn: u32,
        /// The turn's usage, where the server reported it.
        usage: Usage,
    },
    /// Something the user should know.
    Warning {
        /// The warning.
        warning: Warning,
    },
    /// The run failed; a `Finish` with reason `error` follows.
    Error {
        /// What went wrong.
        error: ProviderError,
    },
    /// The run ended; always the last event.
    Finish {
        /// Why.
        reason: FinishReason,
        /// Usage summed over the run's turns.
        usage: Usage,
    },
}

/// Settings of a chat client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatConfig {
    /// The model to talk to.
    pub model: String,
    /// The system prompt.
    pub system: Option<String>,
    /// The most provider round trips one `chat` call may make (default 10).
    pub max_turns: u32,
    /// How tools reach the model.
    pub tool_mode: ToolMode,
    /// Sampling options.
    pub options: GenerationOptions,
    /// Whether to think.
    pub think: Option<Think>,
    /// Context limits per model.
    pub context_limits: ContextLimits,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            model: String::new(),
            system: None,
            max_turns: 10,
            tool_mode: ToolMode::default(),
            options: GenerationOptions::default(),
            think: None,
            context_limits: ContextLimits::default(),
        }
    }
}

impl ChatConfig {
    /// A configuration for `model` with defaults elsewhere.
    pub fn for_model(model: impl Into<String>) -> Self {
        ChatConfig {
            model: model.into(),
            ..ChatConfig::default()
        }
    }
}

/// Per-call overrides of a [`ChatConfig`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatOptions {
    /// Tool mode for this call.
    pub tool_mode: Option<ToolMode>,
    /// Sampling options for this call.
    pub options: Option<GenerationOptions>,
    /// Thinking for this call.
    pub think: Option<Think>,
    /// Turn limit for this call.
    pub max_turns: Option<u32>,
    /// Offer no tools in this call.
    pub no_tools: bool,
    /// Images attached to the prompt (base64 data, MIME type).
    pub images: Vec<(String, String)>,
}

/// A running chat: a stream of [`ChatEvent`]s ending with `Finish`, and a handle to
/// cancel it. Dropping it cancels too.
pub struct ChatRun {
    events: BoxStream<'static, ChatEvent>,
    cancel: CancellationToken,
    /// The run's task when `chat` was called outside a runtime: it starts on first poll.
    deferred: Option<DeferredStart>,
}

/// Starts a run's task on a runtime.
type DeferredStart = Box<dyn FnOnce(&tokio::runtime::Handle) + Send>;

impl std::fmt::Debug for ChatRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatRun")
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

impl ChatRun {
    /// Cancels the run: the stream ends with `Finish { reason: cancelled }` promptly,
    /// running tools are stopped and none starts after.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// A token that cancels this run (for signal handlers).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

impl Drop for ChatRun {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

impl Stream for ChatRun {
    type Item = ChatEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ChatEvent>> {
        if let Some(start) = self.deferred.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(handle) => start(&handle),
                Err(_) => {
                    // Dropping the closure drops the sender: report and end.
                    drop(start);
                    self.events = Box::pin(futures::stream::iter(not_in_runtime()));
                }
            }
        }
        self.events.as_mut().poll_next(cx)
    }
}

/// What a run shares with the client.
struct Shared {
    provider: Arc<dyn ProviderAdapter>,
    tools: Mutex<Arc<ToolRegistry>>,
    config: Mutex<ChatConfig>,
    history: Mutex<History>,
    model_info: Mutex<HashMap<String, Option<ModelInfo>>>,
    /// Models the server refused native tools for (Auto mode then uses ReAct).
    no_native_tools: Mutex<HashSet<String>>,
    /// Models the server refused `think` for.
    no_think: Mutex<HashSet<String>>,
    run_lock: tokio::sync::Mutex<()>,
    next_id: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A conversation with one model through one provider, with tools.
///
/// The client keeps the history; [`ChatClient::chat`] appends to it. Cloning a client
/// shares the conversation.
#[derive(Clone)]
pub struct ChatClient {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatClient")
            .field("provider", &self.shared.provider.name())
            .field("config", &*lock(&self.shared.config))
            .finish()
    }
}

impl ChatClient {
    /// A client; the history starts with the configured system prompt.
    pub fn new(
        provider: Arc<dyn ProviderAdapter>,
        tools: ToolRegistry,
        config: ChatConfig,
    ) -> Self {
        let mut history = History::new();
        history.set_system(config.system.clone());
        ChatClient {
            shared: Arc::new(Shared {
                provider,
                tools: Mutex::new(Arc::new(tools)),
                config: Mutex::new(config),
                history: Mutex::new(history),
                model_info: Mutex::new(HashMap::new()),
                no_native_tools: Mutex::new(HashSet::new()),
                no_think: Mutex::new(HashSet::new()),
                run_lock: tokio::sync::Mutex::new(()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// The provider.
    pub fn provider(&self) -> Arc<dyn ProviderAdapter> {
        Arc::clone(&self.shared.provider)
    }

    /// A copy of the settings.
    pub fn config(&self) -> ChatConfig {
        lock(&self.shared.config).clone()
    }

    /// Replaces the settings for later runs (the history's system prompt follows
    /// `config.system`).
    pub fn set_config(&self, config: ChatConfig) {
        lock(&self.shared.history).set_system(config.system.clone());
        *lock(&self.shared.config) = config;
    }

    /// Switches to another model for later runs.
    pub fn set_model(&self, model: impl Into<String>) {
        lock(&self.shared.config).model = model.into();
    }

    /// Sets or removes the system prompt.
    pub fn set_system(&self, system: Option<String>) {
        lock(&self.shared.history).set_system(system.clone());
        lock(&self.shared.config).system = system;
    }

    /// The tools offered.
    pub fn tools(&self) -> Arc<ToolRegistry> {
        Arc::clone(&lock(&self.shared.tools))
    }

    /// Replaces the tools for later runs.
    pub fn set_tools(&self, tools: ToolRegistry) {
        *lock(&self.shared.tools) = Arc::new(tools);
    }

    /// A snapshot of the conversation.
    pub fn history(&self) -> History {
        lock(&self.shared.history).clone()
    }

    /// Replaces the conversation (for example one read back with [`History::from_json`]).
    pub fn set_history(&self, history: History) {
        *lock(&self.shared.history) = history;
    }

    /// The same client with `messages` appended to its conversation (to resume a saved
    /// session; a system message among them replaces the system prompt).
    pub fn with_history(self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.extend_history(messages);
        self
    }

    /// Appends `messages` to the conversation (see [`History::push`]).
    pub fn extend_history(&self, messages: impl IntoIterator<Item = Message>) {
        lock(&self.shared.history).extend(messages);
    }

    /// Forgets the messages but keeps the system prompt.
    pub fn clear_history(&self) {
        lock(&self.shared.history).clear();
    }

    /// What the server reports about the configured model (asked once, then cached);
    /// `None` when it cannot say.
    pub async fn model_info(&self) -> Option<ModelInfo> {
        let model = lock(&self.shared.config).model.clone();
        model_info(&self.shared, &model).await
    }

    /// Sends `prompt` and runs turns until the model answers without tool calls, the turn
    /// limit is reached, an error occurs or the run is cancelled.
    ///
    /// Inside a Tokio runtime the run starts at once; otherwise it starts when the stream
    /// is first polled (and ends with an error event if that is not inside a runtime
    /// either).
    pub fn chat(&self, prompt: impl Into<String>, options: ChatOptions) -> ChatRun {
        let cancel = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let events = Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|e| (e, rx))
        }));
        let shared = Arc::clone(&self.shared);
        let prompt = prompt.into();
        let token = cancel.clone();
        let start = move |handle: &tokio::runtime::Handle| {
            handle.spawn(supervise(shared, prompt, options, token, tx));
        };
        match tokio::runtime::Handle::try_current() {
            Ok(handle) => {
                start(&handle);
                ChatRun {
                    events,
                    cancel,
                    deferred: None,
                }
            }
            Err(_) => ChatRun {
                events,
                cancel,
                deferred: Some(Box::new(start)),
            },
        }
    }
}

/// The events of a run that could not start because no Tokio runtime was running.
fn not_in_runtime() -> Vec<ChatEvent> {
    vec![
        ChatEvent::Error {
            error: ProviderError::new(
                ProviderErrorKind::Other,
                "a chat run must be polled inside a Tokio runtime",
            ),
        },
        ChatEvent::Finish {
            reason: FinishReason::Error,
            usage: Usage::default(),
        },
    ]
}

/// Runs one chat in its own task and turns a panic of that task into events.
async fn supervise(
    shared: Arc<Shared>,
    prompt: String,
    options: ChatOptions,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<ChatEvent>,
) {
    let sink = Sink { tx: tx.clone() };
    let inner = tokio::spawn(run_chat(shared, prompt, options, cancel, sink));
    if let Err(e) = inner.await {
        let message = if e.is_panic() {
            "internal error: the chat run panicked".to_owned()
        } else {
            "internal error: the chat run was aborted".to_owned()
        };
        let _ = tx.send(ChatEvent::Error {
            error: ProviderError::new(ProviderErrorKind::Other, message),
        });
        let _ = tx.send(ChatEvent::Finish {
            reason: FinishReason::Error,
            usage: Usage::default(),
        });
    }
}

/// Where a run's events go.
struct Sink {
    tx: mpsc::UnboundedSender<ChatEvent>,
}

impl Sink {
    fn send(&self, event: ChatEvent) {
        // A closed channel means the run was dropped, which also cancelled it.
        let _ = self.tx.send(event);
    }

    fn shown(&self, shown: Vec<Shown>) {
        for s in shown {
            self.send(match s {
                Shown::Text(text) => ChatEvent::TextDelta { text },
                Shown::Thinking(text) => ChatEvent::ThinkingDelta { text },
            });
        }
    }

    fn warn(&self, kind: WarningKind, message: impl Into<String>) {
        self.send(ChatEvent::Warning {
            warning: Warning::new(kind, message),
        });
    }

    fn error(&self, kind: ProviderErrorKind, message: impl Into<String>) {
        self.send(ChatEvent::Error {
            error: ProviderError::new(kind, message),
        });
    }
}

async fn model_info(shared: &Shared, model: &str) -> Option<ModelInfo> {
    if let Some(cached) = lock(&shared.model_info).get(model) {
        return cached.clone();
    }
    let asked = std::panic::AssertUnwindSafe(shared.provider.show_model(model))
        .catch_unwind()
        .await;
    let info = match asked {
        Ok(Ok(info)) => Some(info),
        // A passing failure (server down, busy) is not remembered: the next run asks again.
        Ok(Err(e)) if e.kind != ProviderErrorKind::Unsupported => return None,
        _ => None,
    };
    lock(&shared.model_info).insert(model.to_owned(), info.clone());
    info
}

/// The settled inputs of one run.
struct RunSettings {
    model: String,
    /// Whether the strategy was chosen automatically (and may fall back to ReAct).
    auto: bool,
    max_turns: u32,
    strategy: Strategy,
    options: GenerationOptions,
    think: Option<Think>,
    limits: ContextLimits,
    info: Option<ModelInfo>,
    tools: Arc<ToolRegistry>,
}

/// How a turn ended.
enum TurnEnd {
    Continue,
    Finish(FinishReason),
}

/// Why a turn did not end.
enum TurnFailure {
    /// An `Error` event has been sent.
    Reported,
    /// The server refused something the run can do without; retry the turn without it.
    Fallback(Fallback),
}

/// What to do without.
enum Fallback {
    /// Native tools: use ReAct.
    React,
    /// `think`.
    NoThink,
}

async fn run_chat(
    shared: Arc<Shared>,
    prompt: String,
    options: ChatOptions,
    cancel: CancellationToken,
    sink: Sink,
) {
    let mut total = Usage::default();
    let finish = |sink: &Sink, reason, total: Usage| {
        sink.send(ChatEvent::Finish {
            reason,
            usage: total,
        })
    };
    let _guard = tokio::select! {
        biased;
        _ = cancel.cancelled() => return finish(&sink, FinishReason::Cancelled, total),
        guard = shared.run_lock.lock() => guard,
    };
    let config = lock(&shared.config).clone();
    // With tools turned off for this run, calls a model makes anyway meet an empty
    // registry: each is answered `Unknown tool` (1:1 kept) and nothing runs.
    let tools = if options.no_tools {
        Arc::new(ToolRegistry::default())
    } else {
        Arc::clone(&lock(&shared.tools))
    };

    let start_len = {
        let mut history = lock(&shared.history);
        let len = history.len();
        history.push(if options.images.is_empty() {
            Message::user(prompt)
        } else {
            Message::user_with_images(prompt, options.images.clone())
        });
        len
    };

    let info = tokio::select! {
        biased;
        _ = cancel.cancelled() => return finish(&sink, FinishReason::Cancelled, total),
        info = model_info(&shared, &config.model) => info,
    };
    let mut think = options.think.or(config.think);
    if lock(&shared.no_think).contains(&config.model) {
        think = None;
    }
    if think.is_some()
        && capabilities_known(info.as_ref())
        && info.as_ref().is_some_and(|i| !i.has(&Capability::Thinking))
    {
        sink.warn(
            WarningKind::Other,
            format!(
                "{} does not report the thinking capability; thinking was not requested",
                config.model
            ),
        );
        think = None;
    }
    let has_tools = !options.no_tools && !tools.is_empty();
    let mode = options.tool_mode.unwrap_or(config.tool_mode);
    let mut strategy = Strategy::resolve(mode, info.as_ref(), has_tools);
    if mode == ToolMode::Auto
        && strategy == Strategy::Native
        && lock(&shared.no_native_tools).contains(&config.model)
    {
        strategy = Strategy::React;
    }
    let mut settings = RunSettings {
        auto: mode == ToolMode::Auto,
        strategy,
        max_turns: options.max_turns.unwrap_or(config.max_turns),
        options: options.options.clone().unwrap_or(config.options.clone()),
        think,
        limits: config.context_limits.clone(),
        model: config.model.clone(),
        info,
        tools,
    };

    let mut recorded_turns = 0;
    let mut turn = 1;
    while turn <= settings.max_turns {
        let end = run_turn(&shared, &settings, turn, &cancel, &sink, &mut total).await;
        match end {
            Ok(TurnEnd::Continue) => {
                recorded_turns += 1;
                turn += 1;
            }
            Ok(TurnEnd::Finish(reason)) => return finish(&sink, reason, total),
            // Each fallback removes its own cause, so the same turn is retried at most
            // twice.
            Err(TurnFailure::Fallback(Fallback::React)) => {
                lock(&shared.no_native_tools).insert(settings.model.clone());
                sink.warn(
                    WarningKind::Other,
                    format!(
                        "{} does not support native tool calls; describing the tools as ReAct \
                         text instead",
                        settings.model
                    ),
                );
                settings.strategy = Strategy::React;
            }
            Err(TurnFailure::Fallback(Fallback::NoThink)) => {
                lock(&shared.no_think).insert(settings.model.clone());
                sink.warn(
                    WarningKind::Other,
                    format!(
                        "{} does not support thinking; asking again without it",
                        settings.model
                    ),
                );
                settings.think = None;
            }
            Err(TurnFailure::Reported) => {
                if recorded_turns == 0 {
                    lock(&shared.history).truncate(start_len);
                }
                return finish(&sink, FinishReason::Error, total);
            }
        }
    }
    finish(&sink, FinishReason::MaxTurns, total)
}

/// One turn.
async fn run_turn(
    shared: &Shared,
    settings: &RunSettings,
    turn: u32,
    cancel: &CancellationToken,
    sink: &Sink,
    total: &mut Usage,
) -> Result<TurnEnd, TurnFailure> {
    let strategy = settings.strategy;
    let request = {
        let history = lock(&shared.history);
        let mut request = ProviderRequest::new(&settings.model, history.messages().to_vec());
        request.system = history.system_text();
        request.options = settings.options.clone();
        request.think = settings.think;
        strategy.prepare(&mut request, &settings.tools.schemas());
        request
    };

    // Size check, before anything is sent.
    let text = request_text(&request);
    let counted = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Ok(TurnEnd::Finish(FinishReason::Cancelled)),
        n = std::panic::AssertUnwindSafe(shared.provider.count_tokens(&settings.model, &text))
            .catch_unwind() => n,
    };
    let estimated = match counted {
        Ok(Ok(Some(n))) => n,
        _ => estimate_text(&text),
    };
    let limit = settings.limits.effective_limit(
        &settings.model,
        settings.options.context_length,
        settings.info.as_ref().and_then(|i| i.context_length),
    );
    match budget(estimated, limit) {
        Budget::Over => {
            let error = CoreError::ContextOverflow {
                model: settings.model.clone(),
                estimated,
                limit,
            };
            sink.error(ProviderErrorKind::ContextOverflow, error.to_string());
            return Err(TurnFailure::Reported);
        }
        Budget::NearLimit => sink.warn(
            WarningKind::ContextNearLimit,
            format!(
                "the request uses about {estimated} of {limit} tokens ({:.0}%) of {}'s context",
                usage_percent(estimated, limit),
                settings.model
            ),
        ),
        Budget::Fits => {}
    }

    // Stream the reply.
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shared.provider.chat(request)
    }));
    let Ok(stream) = started else {
        sink.error(ProviderErrorKind::Other, "the provider panicked");
        return Err(TurnFailure::Reported);
    };
    let mut stream = std::panic::AssertUnwindSafe(stream).catch_unwind();
    let mut filter: TextFilter = strategy.text_filter();
    let mut raw = String::new();
    let mut calls: Vec<ToolCall> = Vec::new();
    let mut usage = Usage::default();
    let provider_finish = loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                drop(stream);
                record_cancelled(shared, sink, strategy, &raw, &calls, &[]);
                total.accumulate(&usage);
                return Ok(TurnEnd::Finish(FinishReason::Cancelled));
            }
            next = stream.next() => next,
        };
        match next {
            Some(Ok(event)) => match event {
                ProviderEvent::TextDelta { text } => {
                    sink.shown(filter.feed(&text));
                    raw.push_str(&text);
                }
                ProviderEvent::ThinkingDelta { text } => {
                    sink.send(ChatEvent::ThinkingDelta { text });
                }
                ProviderEvent::ToolCall { mut call } => {
                    // Results are matched to calls by id: an id that is missing or used
                    // twice in one reply gets a fresh one.
                    if call.id.is_empty() || calls.iter().any(|c| c.id == call.id) {
                        call.id = mint_id(shared);
                    }
                    sink.send(ChatEvent::ToolCallStarted { call: call.clone() });
                    calls.push(call);
                }
                ProviderEvent::Usage { usage: u } => usage.accumulate(&u),
                ProviderEvent::Warning { warning } => sink.send(ChatEvent::Warning { warning }),
                ProviderEvent::Finish { reason } => break reason,
                ProviderEvent::Error { error } => {
                    total.accumulate(&usage);
                    if raw.is_empty() && calls.is_empty() {
                        if error.kind == ProviderErrorKind::ToolsUnsupported
                            && settings.auto
                            && strategy == Strategy::Native
                        {
                            return Err(TurnFailure::Fallback(Fallback::React));
                        }
                        if error.kind == ProviderErrorKind::ThinkingUnsupported
                            && settings.think.is_some()
                        {
                            return Err(TurnFailure::Fallback(Fallback::NoThink));
                        }
                    }
                    sink.send(ChatEvent::Error { error });
                    return Err(TurnFailure::Reported);
                }
                // Event kinds added later are not understood by this loop; skip them.
                #[allow(unreachable_patterns, reason = "ProviderEvent is non_exhaustive")]
                _ => {}
            },
            Some(Err(_panic)) => {
                total.accumulate(&usage);
                sink.error(ProviderErrorKind::Other, "the provider panicked");
                return Err(TurnFailure::Reported);
            }
            None => {
                total.accumulate(&usage);
                sink.error(
                    ProviderErrorKind::IncompleteStream,
                    "the provider's stream ended without a finish",
                );
                return Err(TurnFailure::Reported);
            }
        }
    };
    drop(stream);
    total.accumulate(&usage);

    let outcome = strategy.interpret(
        &raw,
        calls.clone(),
        &|name| settings.tools.contains(name),
        &mut || mint_id(shared),
    );
    sink.shown(filter.finish(&outcome));
    match outcome {
        TurnOutcome::Answer(answer) => {
            let text = if strategy == Strategy::React {
                raw
            } else {
                answer
            };
            lock(&shared.history).push(Message::assistant(text));
            sink.send(ChatEvent::TurnComplete { turn, usage });
            let reason = match provider_finish {
                FinishReason::Length => FinishReason::Length,
                _ => FinishReason::Stop,
            };
            Ok(TurnEnd::Finish(reason))
        }
        TurnOutcome::Retry {
            correction,
            problem,
        } => {
            sink.warn(WarningKind::MalformedOutput, problem);
            let mut history = lock(&shared.history);
            history.push(Message::assistant(raw));
            history.push(Message::user(correction));
            drop(history);
            sink.send(ChatEvent::TurnComplete { turn, usage });
            Ok(TurnEnd::Continue)
        }
        TurnOutcome::Calls(new_calls) => {
            // Calls parsed from text were not announced while streaming.
            for call in new_calls.iter().filter(|c| !calls.contains(c)) {
                sink.send(ChatEvent::ToolCallStarted { call: call.clone() });
            }
            let calls = new_calls;
            let (results, cancelled) = execute_all(&settings.tools, &calls, cancel, sink).await;
            if cancelled {
                record_cancelled(shared, sink, strategy, &raw, &calls, &results);
                return Ok(TurnEnd::Finish(FinishReason::Cancelled));
            }
            let results: Vec<ToolOutcome> = results
                .into_iter()
                .map(|r| r.unwrap_or_else(|| ToolOutcome::error("the tool did not run")))
                .collect();
            record_calls(shared, strategy, &raw, &calls, &results);
            sink.send(ChatEvent::TurnComplete { turn, usage });
            Ok(TurnEnd::Continue)
        }
    }
}

fn mint_id(shared: &Shared) -> String {
    format!("call_{}", shared.next_id.fetch_add(1, Ordering::Relaxed))
}

/// Runs `calls` concurrently, one task each, emitting a `ToolResult` as each finishes.
/// Returns the outcomes in call order (`None` for calls that did not finish) and whether
/// the run was cancelled.
async fn execute_all(
    tools: &Arc<ToolRegistry>,
    calls: &[ToolCall],
    cancel: &CancellationToken,
    sink: &Sink,
) -> (Vec<Option<ToolOutcome>>, bool) {
    let mut results: Vec<Option<ToolOutcome>> = vec![None; calls.len()];
    if cancel.is_cancelled() {
        return (results, true);
    }
    let mut set = JoinSet::new();
    let mut ids = HashMap::new();
    for (i, call) in calls.iter().enumerate() {
        let tools = Arc::clone(tools);
        let call = call.clone();
        let handle = set.spawn(async move { tools.execute(&call).await });
        ids.insert(handle.id(), i);
    }
    let mut cancelled = false;
    loop {
        let joined = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                cancelled = true;
                break;
            }
            joined = set.join_next_with_id() => joined,
        };
        let (i, outcome) = match joined {
            None => break,
            Some(Ok((id, outcome))) => (ids.get(&id).copied(), outcome),
            Some(Err(e)) => {
                let name = ids
                    .get(&e.id())
                    .map(|&i| calls[i].name.as_str())
                    .unwrap_or("tool");
                let outcome = if e.is_panic() {
                    ToolOutcome::error(format!("the tool {name} panicked"))
                } else {
                    ToolOutcome::error(format!("the tool {name} was stopped"))
                };
                (ids.get(&e.id()).copied(), outcome)
            }
        };
        if let Some(i) = i {
            sink.send(ChatEvent::ToolResult {
                call_id: calls[i].id.clone(),
                name: calls[i].name.clone(),
                content: outcome.content.clone(),
                is_error: outcome.is_error,
            });
            results[i] = Some(outcome);
        }
    }
    if cancelled {
        set.abort_all();
        // Aborted tasks end at their next poll; give them a few scheduler rounds so that
        // the tools are gone when the run reports its end. No timer is used (the caller's
        // runtime may have none), and a tool that blocks its thread is not waited for.
        for _ in 0..8 {
            while let Some(Some(_)) = set.join_next().now_or_never() {}
            if set.is_empty() {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
    (results, cancelled)
}

/// Records a completed turn with calls.
fn record_calls(
    shared: &Shared,
    strategy: Strategy,
    raw: &str,
    calls: &[ToolCall],
    results: &[ToolOutcome],
) {
    let mut history = lock(&shared.history);
    if strategy == Strategy::React && !raw.is_empty() {
        // The model reads its own Action lines and the observations that answer them.
        history.push(Message::assistant(raw));
        let observations: Vec<String> = results
            .iter()
            .map(|r| react::format_observation(&r.content))
            .collect();
        history.push(Message::user(observations.join("\n")));
        return;
    }
    let text = if strategy == Strategy::Constrained {
        ""
    } else {
        raw
    };
    history.push(Message::assistant_with_calls(text, calls.to_vec()));
    for (call, result) in calls.iter().zip(results) {
        history.push(Message::tool_result(&call.id, &call.name, &result.content));
    }
}

/// Records what a cancelled turn produced (see the module docs) and answers every call
/// without a result with [`CANCELLED_RESULT`].
fn record_cancelled(
    shared: &Shared,
    sink: &Sink,
    strategy: Strategy,
    raw: &str,
    calls: &[ToolCall],
    results: &[Option<ToolOutcome>],
) {
    let results: Vec<ToolOutcome> = calls
        .iter()
        .enumerate()
        .map(|(i, call)| match results.get(i).cloned().flatten() {
            Some(done) => done,
            None => {
                sink.send(ChatEvent::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: CANCELLED_RESULT.to_owned(),
                    is_error: true,
                });
                ToolOutcome {
                    content: CANCELLED_RESULT.to_owned(),
                    is_error: true,
                }
            }
        })
        .collect();
    if calls.is_empty() {
        // Half a constrained reply is half a JSON document, not text worth keeping.
        if !raw.is_empty() && strategy != Strategy::Constrained {
            lock(&shared.history).push(Message::assistant(raw));
        }
        return;
    }
    record_calls(shared, strategy, raw, calls, &results);
}
