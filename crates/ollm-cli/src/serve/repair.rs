//! The two paths a request takes through `ollm serve`: straight through the pool, or
//! through ollm's turn loop for one turn, so that everything the runtime repairs is
//! repaired on the way.
//!
//! # Decisions
//! - **Repair reuses the runtime, not a copy of it.** A request with tools runs as one
//!   turn of an [`ollm_core::ChatClient`] whose tools are the client's schemas, each a
//!   [`Deferred`] stand-in. The turn loop then does what it does for `ollm run`: calls
//!   written as text are recovered (every format of `recover`), names normalised,
//!   `<think>` text moved to reasoning, and a model without native tools gets the ReAct
//!   strategy; every call comes out as a `ToolCallStarted` event, which is what the
//!   client receives. The stand-ins never run anything: `serve` never executes a tool,
//!   and the run stops after its one turn (`max_turns` 1).
//! - The turn loop always adds the run's prompt as a user message; the client's
//!   conversation can end with tool results. So the prompt is a sentinel, and
//!   [`Through`], the adapter the client talks to, removes it from the end of each
//!   request before the pool sees it: the upstream gets the client's messages as sent.
//! - The loop's own limits are set to the client's: its token cap is the client's
//!   `max_tokens` (none: the server's), compaction is off (a proxy does not rewrite a
//!   conversation it does not own).
//! - What the server says about a model (`show_model`) is cached for a minute across
//!   requests, so the turn loop's capability check does not cost a round trip each. A
//!   server that refused native tools for a model (vLLM without
//!   `--enable-auto-tool-choice`, llama-server without `--jinja`) is remembered for the
//!   server's life: later requests for that model go straight to the ReAct fallback.
//!   Nothing else the loop learns is kept: each request decides afresh.
//! - **The loop guard of `ollm run` holds across requests** ([`guarded`]): small models
//!   repeat a call whose result they already have until the client's turn limit. A
//!   reply made only of such repeats is replaced by the answer to the runtime's nudge,
//!   asked without tools; the client sees an answer where it would have looped.
//! - **Requests without tools, or with repair off, pass straight through** the pool:
//!   the adapter's events become chunks without the turn loop.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::StreamExt;
use futures::stream::BoxStream;
use ollm_bridge::ProviderPool;
use ollm_core::{
    ANSWER_NUDGE, ChatClient, ChatConfig, ChatEvent, ChatOptions, CompactionConfig, Learned,
    ProviderAdapter, ProviderStream, Tool, ToolError, ToolRegistry,
};
use ollm_types::{
    ContentPart, FinishReason, Message, ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderRequest, Role, ToolCall, ToolSchema,
};
use serde_json::{Map, Value};

use super::wire_out::Piece;

/// The run's prompt, removed before the request leaves (see the module docs).
const SENTINEL: &str = "\u{0}ollm-serve: continue the conversation above\u{0}";

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
}

/// The pieces of the reply to `request`.
pub(crate) fn reply(
    pool: &ProviderPool,
    cache: &Arc<InfoCache>,
    request: ProviderRequest,
    session: Option<String>,
    repair: bool,
) -> BoxStream<'static, Piece> {
    if !repair || request.tools.is_empty() {
        let events = pool.chat_in_session(request, session.as_deref());
        return events
            .filter_map(|e| std::future::ready(from_event(e)))
            .boxed();
    }
    repaired(pool, cache, request, session)
}

fn from_event(event: ProviderEvent) -> Option<Piece> {
    Some(match event {
        ProviderEvent::TextDelta { text } => Piece::Text(text),
        ProviderEvent::ThinkingDelta { text } => Piece::Reasoning(text),
        ProviderEvent::ToolCall { call } => Piece::Call(call),
        ProviderEvent::Usage { usage } => Piece::Usage(usage),
        ProviderEvent::Finish { reason } => Piece::Finish(reason),
        ProviderEvent::Error { error } => Piece::Error(error),
        _ => return None,
    })
}

/// One turn of the runtime's loop over the client's conversation.
fn repaired(
    pool: &ProviderPool,
    cache: &Arc<InfoCache>,
    request: ProviderRequest,
    session: Option<String>,
) -> BoxStream<'static, Piece> {
    let mut tools = ToolRegistry::new();
    for schema in &request.tools {
        if let Err(e) = tools.register(Arc::new(Deferred(schema.clone()))) {
            let error = ProviderError::new(ProviderErrorKind::BadRequest, e.to_string());
            return futures::stream::once(std::future::ready(Piece::Error(error))).boxed();
        }
    }
    let config = ChatConfig {
        model: request.model.clone(),
        system: request.system.clone(),
        max_turns: 1,
        tool_choice: request.tool_choice.clone(),
        parallel_tool_calls: request.parallel_tool_calls,
        max_tokens: request.options.max_tokens,
        options: request.options.clone(),
        // The client's sampling passes through as sent: a proxy does not make tool turns
        // greedy behind its back (`ollm run` does, as its own default).
        tool_temperature: None,
        think: request.think,
        compaction: CompactionConfig {
            enabled: false,
            ..CompactionConfig::default()
        },
        ..ChatConfig::default()
    };
    let through = Through {
        pool: pool.clone(),
        session: session.clone(),
        cache: Arc::clone(cache),
    };
    let client =
        ChatClient::new(Arc::new(through), tools, config).with_history(request.messages.clone());
    let model = request.model.clone();
    if lock(&cache.native_refused).contains(&model) {
        let learned = Learned {
            native_refused: true,
            ..Learned::default()
        };
        client.remember(model.clone(), learned);
    }
    let run = client.chat(SENTINEL, ChatOptions::default());
    let cache = Arc::clone(cache);
    // The client lives as long as the run's stream; at its end, a refusal is remembered.
    let pieces = run
        .filter_map(move |event| {
            if matches!(event, ChatEvent::Finish { .. }) && client.learned(&model).native_refused {
                lock(&cache.native_refused).insert(model.clone());
            }
            std::future::ready(from_chat(event))
        })
        .boxed();
    guarded(pool.clone(), request, session, pieces)
}

/// The loop guard of `ollm run` across requests: a reply whose calls all repeat calls the
/// conversation already has results for is not sent; the model is asked once more,
/// without tools, with the runtime's [`ANSWER_NUDGE`] (see `chat/guard.rs` in ollm-core
/// for the measurements behind it). Calls come at the end of a turn, so holding them
/// back until the reply ends delays nothing.
fn guarded(
    pool: ProviderPool,
    request: ProviderRequest,
    session: Option<String>,
    mut pieces: BoxStream<'static, Piece>,
) -> BoxStream<'static, Piece> {
    Box::pin(async_stream::stream! {
        let mut calls = Vec::new();
        while let Some(piece) = pieces.next().await {
            match piece {
                Piece::Call(call) => calls.push(call),
                Piece::Finish(reason) => {
                    if !calls.is_empty() && calls.iter().all(|c| answered(&request, c)) {
                        tracing::info!(calls = calls.len(), "serve: repeated calls; asking for the answer");
                        let mut nudged = request.clone();
                        nudged.tools.clear();
                        nudged.messages.push(Message::user(ANSWER_NUDGE));
                        let mut answer = pool.chat_in_session(nudged, session.as_deref());
                        while let Some(event) = answer.next().await {
                            if let Some(piece) = from_event(event) {
                                yield piece;
                            }
                        }
                        return;
                    }
                    for call in calls.drain(..) {
                        yield Piece::Call(call);
                    }
                    yield Piece::Finish(reason);
                }
                other => yield other,
            }
        }
    })
}

/// Whether the conversation, since the user's last message, already holds `call` (same
/// tool, same arguments) with a result. Like `ollm run`'s memory, which lasts one prompt:
/// a new question may well need a fresh result.
fn answered(request: &ProviderRequest, call: &ToolCall) -> bool {
    let since = request
        .messages
        .iter()
        .rposition(|m| m.role() == Role::User)
        .map_or(0, |i| i + 1);
    let messages = &request.messages[since..];
    messages.iter().enumerate().any(|(i, m)| {
        m.parts().iter().any(|p| match p {
            ContentPart::ToolCall(earlier) => {
                earlier.name == call.name
                    && earlier.arguments == call.arguments
                    && messages[i + 1..]
                        .iter()
                        .any(|r| r.tool_call_id() == Some(earlier.id.as_str()))
            }
            _ => false,
        })
    })
}

fn from_chat(event: ChatEvent) -> Option<Piece> {
    Some(match event {
        ChatEvent::TextDelta { text } => Piece::Text(text),
        ChatEvent::ThinkingDelta { text } => Piece::Reasoning(text),
        ChatEvent::ToolCallStarted { call } => Piece::Call(call),
        ChatEvent::TurnComplete { usage, .. } => Piece::Usage(usage),
        ChatEvent::Error { error } => Piece::Error(error),
        ChatEvent::Finish { reason, .. } if reason != FinishReason::Error => Piece::Finish(reason),
        _ => return None,
    })
}

/// A client's tool as the turn loop sees it: its schema, and nothing to run.
struct Deferred(ToolSchema);

#[async_trait]
impl Tool for Deferred {
    fn schema(&self) -> ToolSchema {
        self.0.clone()
    }

    async fn execute(&self, _arguments: Map<String, Value>) -> Result<Value, ToolError> {
        Ok(Value::String(
            "(returned to the client; ollm serve runs no tools)".into(),
        ))
    }
}

/// The pool as the turn loop's provider: the sentinel prompt removed, the session kept,
/// model descriptions cached.
struct Through {
    pool: ProviderPool,
    session: Option<String>,
    cache: Arc<InfoCache>,
}

#[async_trait]
impl ProviderAdapter for Through {
    fn name(&self) -> &str {
        "serve"
    }

    fn chat(&self, mut request: ProviderRequest) -> ProviderStream {
        let last = request.messages.last();
        if last.is_some_and(|m| m.role() == Role::User && m.text() == SENTINEL) {
            request.messages.pop();
        }
        self.pool.chat_in_session(request, self.session.as_deref())
    }

    async fn count_tokens(&self, model: &str, text: &str) -> Result<Option<usize>, ProviderError> {
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

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
