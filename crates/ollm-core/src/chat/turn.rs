//! The turn loop ([`run_chat`]) and one turn as named steps: [`build_request`],
//! [`check_budget`], [`stream_reply`], then [`conclude`], which reads the reply, runs
//! the calls and records the turn through the strategy.
//!
//! # Decisions
//! - No step branches on the strategy: it offers the tools, filters the display, reads
//!   the reply and says what to record ([`crate::strategy`]).
//! - Each fallback (ReAct for refused native tools, no `think` for refused thinking)
//!   removes its own cause, so the same turn is retried at most twice.

use std::sync::Arc;

use futures::StreamExt;
use ollm_types::{
    FinishReason, Message, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest,
    ToolCall, Usage, WarningKind,
};
use tokio_util::sync::CancellationToken;

use super::calls::{answer_cancelled, execute_all};
use super::client::{Shared, lock, model_info};
use super::compact::{Fitted, Room, bound_results, fit};
use super::run::Sink;
use super::settle::RunSettings;
use super::{ChatEvent, ChatOptions};
use crate::context::settle_window;
use crate::strategy::{Strategy, TextFilter, Turn, TurnOutcome};
use crate::tool::ToolOutcome;

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

/// One run: waits for the client's earlier runs, records the prompt, settles the run's
/// settings and runs turns until one ends the run; `Finish` is always sent last.
pub(super) async fn run_chat(
    shared: Arc<Shared>,
    prompt: String,
    options: ChatOptions,
    cancel: CancellationToken,
    sink: Sink,
) {
    let _guard = tokio::select! {
        biased;
        _ = cancel.cancelled() => return sink.finish(FinishReason::Cancelled, Usage::default()),
        guard = shared.run_lock.lock() => guard,
    };
    let config = lock(&shared.config).clone();
    let prompt = if options.images.is_empty() {
        Message::user(prompt)
    } else {
        Message::user_with_images(prompt, options.images.clone())
    };
    sink.record(&shared, vec![prompt]);
    let info = tokio::select! {
        biased;
        _ = cancel.cancelled() => return sink.finish(FinishReason::Cancelled, Usage::default()),
        info = model_info(&shared, &config.model) => info,
    };
    let mut settings = RunSettings::settle(&shared, &config, &options, info, &sink);
    let mut total = Usage::default();
    let (reason, recorded_turns) =
        run_turns(&shared, &mut settings, &cancel, &sink, &mut total).await;
    if reason == FinishReason::Error && recorded_turns == 0 {
        // The failed run recorded no turn: take the prompt back too.
        sink.unrecord(&shared);
    }
    sink.finish(reason, total);
}

/// Runs turns until one ends the run; says why it ended and how many turns recorded
/// before the last.
async fn run_turns(
    shared: &Shared,
    settings: &mut RunSettings,
    cancel: &CancellationToken,
    sink: &Sink,
    total: &mut Usage,
) -> (FinishReason, u32) {
    let mut turn = 1;
    while turn <= settings.max_turns {
        match run_turn(shared, settings, turn, cancel, sink, total).await {
            Ok(TurnEnd::Continue) => turn += 1,
            Ok(TurnEnd::Finish(reason)) => return (reason, turn - 1),
            Err(TurnFailure::Fallback(fallback)) => fall_back(shared, settings, sink, fallback),
            Err(TurnFailure::Reported) => return (FinishReason::Error, turn - 1),
        }
    }
    (FinishReason::MaxTurns, turn - 1)
}

/// Does without what the server refused, for this run and later ones, with a warning.
fn fall_back(shared: &Shared, settings: &mut RunSettings, sink: &Sink, fallback: Fallback) {
    let model = settings.model.clone();
    let message = match fallback {
        Fallback::React => {
            lock(&shared.no_native_tools).insert(model.clone());
            settings.strategy = Strategy::React;
            format!(
                "{model} does not support native tool calls; describing the tools as ReAct \
                 text instead"
            )
        }
        Fallback::NoThink => {
            lock(&shared.no_think).insert(model.clone());
            settings.think = None;
            format!("{model} does not support thinking; asking again without it")
        }
    };
    sink.warn(WarningKind::Other, message);
}

/// One turn: build the request, check its size, stream the reply, then conclude.
async fn run_turn(
    shared: &Shared,
    settings: &RunSettings,
    turn: u32,
    cancel: &CancellationToken,
    sink: &Sink,
    total: &mut Usage,
) -> Result<TurnEnd, TurnFailure> {
    let (request, room) = match check_budget(shared, settings, cancel, sink).await {
        Fitted::Send(request, room) => (request, room),
        Fitted::Cancelled => return Ok(TurnEnd::Finish(FinishReason::Cancelled)),
        Fitted::Refused => return Err(TurnFailure::Reported),
    };
    let mut filter = settings.strategy.text_filter();
    let reply = stream_reply(
        shared,
        settings,
        *request,
        filter.as_mut(),
        cancel,
        sink,
        total,
    );
    match reply.await? {
        Streamed::Done(mut reply) => {
            reply.room = room;
            conclude(shared, settings, turn, reply, filter.as_mut(), cancel, sink).await
        }
        Streamed::Cancelled(partial) => {
            record_cancelled(shared, settings, sink, &partial.raw, &partial.calls, &[]);
            Ok(TurnEnd::Finish(FinishReason::Cancelled))
        }
    }
}

/// The request for the next reply: the history, the options, `think` as settled, and
/// the tools as the strategy offers them.
fn build_request(shared: &Shared, settings: &RunSettings) -> ProviderRequest {
    let history = lock(&shared.history);
    let mut request = ProviderRequest::new(&settings.model, history.messages().to_vec());
    request.system = history.system_text();
    request.options = settings.options.clone();
    request.think = settings.think;
    settings
        .strategy
        .prepare(&mut request, &settings.tools.schemas());
    request
}

/// Makes the request fit the model's window before anything is sent: the window is
/// settled here and sent as `options.context_length`; past the threshold the history is
/// compacted ([`super::compact`]); over the window the request is refused.
async fn check_budget(
    shared: &Shared,
    settings: &RunSettings,
    cancel: &CancellationToken,
    sink: &Sink,
) -> Fitted {
    let window = settle_window(
        &settings.limits,
        &settings.model,
        settings.options.context_length,
        settings.info.as_ref(),
    );
    let build = || {
        let mut request = build_request(shared, settings);
        request.options.context_length = u32::try_from(window.tokens).ok();
        request
    };
    fit(shared, settings, window, &build, cancel, sink).await
}

/// A reply as it streamed in.
#[derive(Default)]
struct Reply {
    /// Its whole text.
    raw: String,
    /// The native calls, in order, each with an id unique in the reply.
    calls: Vec<ToolCall>,
    usage: Usage,
    /// Why the provider ended it.
    finish: Option<FinishReason>,
    /// How full the request was (bounds the results of its calls).
    room: Room,
}

/// How streaming a reply ended.
enum Streamed {
    /// The provider finished it.
    Done(Reply),
    /// The run was cancelled; what had arrived.
    Cancelled(Reply),
}

/// What one provider event means for the reply.
enum Flow {
    More,
    Finished(FinishReason),
    Failed(ProviderError),
}

impl Reply {
    /// Takes in one provider event, forwarding what is to be shown.
    fn take(
        &mut self,
        event: ProviderEvent,
        filter: &mut dyn TextFilter,
        shared: &Shared,
        sink: &Sink,
    ) -> Flow {
        match event {
            ProviderEvent::TextDelta { text } => {
                sink.shown(filter.feed(&text));
                self.raw.push_str(&text);
            }
            ProviderEvent::ThinkingDelta { text } => sink.send(ChatEvent::ThinkingDelta { text }),
            ProviderEvent::ToolCall { mut call } => {
                // Results are matched to calls by id: an id that is missing or used twice
                // in one reply gets a fresh one.
                if call.id.is_empty() || self.calls.iter().any(|c| c.id == call.id) {
                    call.id = shared.mint_id();
                }
                sink.send(ChatEvent::ToolCallStarted { call: call.clone() });
                self.calls.push(call);
            }
            ProviderEvent::Usage { usage } => self.usage.accumulate(&usage),
            ProviderEvent::Warning { warning } => sink.send(ChatEvent::Warning { warning }),
            ProviderEvent::Finish { reason } => return Flow::Finished(reason),
            ProviderEvent::Error { error } => return Flow::Failed(error),
            // Event kinds added later are not understood by this loop; skip them.
            #[allow(unreachable_patterns, reason = "ProviderEvent is non_exhaustive")]
            _ => {}
        }
        Flow::More
    }

    /// The fallback that answers `error`, when the server refused something before any
    /// output and the run can do without it.
    fn fallback_for(&self, error: &ProviderError, settings: &RunSettings) -> Option<Fallback> {
        if !self.raw.is_empty() || !self.calls.is_empty() {
            return None;
        }
        match error.kind {
            ProviderErrorKind::ToolsUnsupported
                if settings.auto && settings.strategy == Strategy::Native =>
            {
                Some(Fallback::React)
            }
            ProviderErrorKind::ThinkingUnsupported if settings.think.is_some() => {
                Some(Fallback::NoThink)
            }
            _ => None,
        }
    }
}

/// Streams the reply to `request`, showing text through `filter` and announcing native
/// calls as they arrive. The reply's usage is added to `total` however it ends.
async fn stream_reply(
    shared: &Shared,
    settings: &RunSettings,
    request: ProviderRequest,
    filter: &mut dyn TextFilter,
    cancel: &CancellationToken,
    sink: &Sink,
    total: &mut Usage,
) -> Result<Streamed, TurnFailure> {
    let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        shared.provider.chat(request)
    }));
    let Ok(stream) = started else {
        sink.error(ProviderErrorKind::Other, "the provider panicked");
        return Err(TurnFailure::Reported);
    };
    let mut stream = std::panic::AssertUnwindSafe(stream).catch_unwind();
    let mut reply = Reply::default();
    let flow = loop {
        let next = tokio::select! {
            biased;
            _ = cancel.cancelled() => {
                total.accumulate(&reply.usage);
                return Ok(Streamed::Cancelled(reply));
            }
            next = stream.next() => next,
        };
        let flow = match next {
            Some(Ok(event)) => reply.take(event, filter, shared, sink),
            Some(Err(_panic)) => Flow::Failed(ProviderError::new(
                ProviderErrorKind::Other,
                "the provider panicked",
            )),
            None => Flow::Failed(ProviderError::new(
                ProviderErrorKind::IncompleteStream,
                "the provider's stream ended without a finish",
            )),
        };
        if !matches!(flow, Flow::More) {
            break flow;
        }
    };
    total.accumulate(&reply.usage);
    match flow {
        Flow::Failed(error) => match reply.fallback_for(&error, settings) {
            Some(fallback) => Err(TurnFailure::Fallback(fallback)),
            None => {
                sink.send(ChatEvent::Error { error });
                Err(TurnFailure::Reported)
            }
        },
        Flow::Finished(reason) => {
            reply.finish = Some(reason);
            Ok(Streamed::Done(reply))
        }
        Flow::More => Ok(Streamed::Done(reply)),
    }
}

/// Reads the finished reply, shows what is left to show, runs its calls and records the
/// turn as the strategy says.
async fn conclude(
    shared: &Shared,
    settings: &RunSettings,
    turn: u32,
    reply: Reply,
    filter: &mut dyn TextFilter,
    cancel: &CancellationToken,
    sink: &Sink,
) -> Result<TurnEnd, TurnFailure> {
    let strategy = settings.strategy;
    let outcome = strategy.interpret(
        &reply.raw,
        reply.calls.clone(),
        &|name| settings.tools.contains(name),
        &mut || shared.mint_id(),
    );
    sink.shown(filter.finish(outcome.answer()));
    let raw = reply.raw.as_str();
    let end = match &outcome {
        TurnOutcome::Answer(answer) => {
            sink.record(shared, strategy.record(Turn::Answer { raw, answer }));
            TurnEnd::Finish(match reply.finish {
                Some(FinishReason::Length) => FinishReason::Length,
                _ => FinishReason::Stop,
            })
        }
        TurnOutcome::Retry {
            correction,
            problem,
        } => {
            sink.warn(WarningKind::MalformedOutput, problem.clone());
            sink.record(shared, strategy.record(Turn::Retry { raw, correction }));
            TurnEnd::Continue
        }
        TurnOutcome::Calls(calls) => {
            // Calls parsed from text were not announced while streaming.
            for call in calls.iter().filter(|c| !reply.calls.contains(c)) {
                sink.send(ChatEvent::ToolCallStarted { call: call.clone() });
            }
            if !run_calls(shared, settings, raw, calls, reply.room, cancel, sink).await {
                return Ok(TurnEnd::Finish(FinishReason::Cancelled));
            }
            TurnEnd::Continue
        }
    };
    let usage = reply.usage;
    sink.send(ChatEvent::TurnComplete { turn, usage });
    Ok(end)
}

/// Runs `calls` and records the turn with their results; `false` when the run was
/// cancelled meanwhile (what it produced is recorded too).
async fn run_calls(
    shared: &Shared,
    settings: &RunSettings,
    raw: &str,
    calls: &[ToolCall],
    room: Room,
    cancel: &CancellationToken,
    sink: &Sink,
) -> bool {
    let (results, cancelled) = execute_all(&settings.tools, calls, cancel, sink).await;
    if cancelled {
        record_cancelled(shared, settings, sink, raw, calls, &results);
        return false;
    }
    let mut results: Vec<ToolOutcome> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| ToolOutcome::error("the tool did not run")))
        .collect();
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    bound_results(&mut results, &names, &room, &settings.compaction, sink);
    let results = &results;
    let turn = Turn::Calls {
        raw,
        calls,
        results,
    };
    sink.record(shared, settings.strategy.record(turn));
    true
}

/// Records what a cancelled turn produced (see the module docs of [`crate::chat`]),
/// answering every call without a result.
fn record_cancelled(
    shared: &Shared,
    settings: &RunSettings,
    sink: &Sink,
    raw: &str,
    calls: &[ToolCall],
    results: &[Option<ToolOutcome>],
) {
    let results = answer_cancelled(calls, results, sink);
    let turn = if calls.is_empty() {
        Turn::Cut { raw }
    } else {
        Turn::Calls {
            raw,
            calls,
            results: &results,
        }
    };
    sink.record(shared, settings.strategy.record(turn));
}
