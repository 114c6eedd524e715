//! The turn loop ([`run_chat`]) and one turn as named steps: [`build_request`],
//! [`check_budget`], [`stream_reply`], then [`conclude`], which reads the reply, runs
//! the calls and records the turn through the strategy.
//!
//! # Decisions
//! - No step branches on the strategy: it offers the tools, filters the display, reads
//!   the reply and says what to record ([`crate::strategy`]).
//! - Each fallback (ReAct for refused native tools, no `think` for refused thinking)
//!   removes its own cause, so the same turn is retried at most twice.
//! - A strategy may answer some of a turn's calls itself (a text call to a tool not on
//!   offer, a malformed one): those never run, get their `ToolResult` like the others,
//!   and are recorded in call order, so calls and results stay 1:1.

use std::sync::Arc;

use futures::StreamExt;
use ollm_types::{
    ContentPart, FinishReason, Message, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderRequest, Role, ToolCall, ToolChoice, Usage, WarningKind,
};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::call_loop::{CallWatch, Cut, cut_reply};
use super::calls::{answer_unfinished, execute_all};
use super::client::{Shared, lock, model_info};
use super::compact::{Fitted, Room, bound_results, fit};
use super::guard::{ACT_NUDGE, ANSWER_NUDGE, CAN_NUDGE, CallMemory, REPEAT_LIMIT, Source};
use super::run::Sink;
use super::runaway::RepeatDetector;
use super::settle::{Offer, RunSettings};
use super::{CANCELLED_RESULT, ChatEvent, ChatOptions, MAX_CALLS_PER_REPLY, STOPPED_RESULT};
use crate::context::settle_window;
use crate::strategy::{Reason, Strategy, TextFilter, Turn, TurnOutcome};
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
    /// Native tools: use ReAct. The server's hint, if it gave one.
    React(Option<String>),
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
    let Some(mut settings) = RunSettings::settle(&shared, &config, &options, info, &sink) else {
        sink.unrecord(&shared);
        return sink.finish(FinishReason::Error, Usage::default());
    };
    let mut total = Usage::default();
    let (reason, recorded_turns) =
        run_turns(&shared, &mut settings, &cancel, &sink, &mut total).await;
    if reason == FinishReason::Error && recorded_turns == 0 {
        // The failed run recorded no turn: take the prompt back too.
        sink.unrecord(&shared);
    }
    tracing::info!(
        ?reason,
        prompt_tokens = total.prompt_tokens.unwrap_or_default(),
        completion_tokens = total.completion_tokens.unwrap_or_default(),
        "run finished"
    );
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
    let mut memory = CallMemory::default();
    while turn <= settings.max_turns {
        let step = Step { turn, cancel, sink };
        let span = tracing::info_span!("turn", n = turn);
        let ended = run_turn(shared, settings, &mut memory, step, total)
            .instrument(span)
            .await;
        match ended {
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
        Fallback::React(hint) => {
            lock(&shared.learned)
                .entry(model.clone())
                .or_default()
                .native_refused = true;
            settings.strategy = Strategy::React;
            let reason = Reason::Refused(hint);
            tracing::info!(%model, %reason, "native tools refused; falling back to ReAct");
            sink.send(ChatEvent::StrategyChosen {
                strategy: settings.strategy.mode(),
                reason: reason.to_string(),
            });
            format!(
                "{model}: the server refused native tool calls; describing the tools as \
                 ReAct text instead ({})",
                hint_of(&reason)
            )
        }
        Fallback::NoThink => {
            tracing::info!(%model, "the server refused `think`; asking again without it");
            lock(&shared.no_think).insert(model.clone());
            settings.think = None;
            format!("{model} does not support thinking; asking again without it")
        }
    };
    sink.warn(WarningKind::Other, message);
}

/// The text of the fallback hint in `reason`.
fn hint_of(reason: &Reason) -> String {
    match reason {
        Reason::Refused(Some(hint)) => hint.clone(),
        _ => crate::strategy::SERVER_FLAGS_HINT.to_owned(),
    }
}

/// Where a turn is in its run: its number, the run's cancel token and its sink.
#[derive(Clone, Copy)]
struct Step<'a> {
    turn: u32,
    cancel: &'a CancellationToken,
    sink: &'a Sink,
}

/// One turn: build the request, check its size, stream the reply, then conclude.
async fn run_turn(
    shared: &Shared,
    settings: &RunSettings,
    memory: &mut CallMemory,
    step: Step<'_>,
    total: &mut Usage,
) -> Result<TurnEnd, TurnFailure> {
    let Step { cancel, sink, .. } = step;
    let offer = settings.offer(memory);
    let (request, room) = match check_budget(shared, settings, &offer, cancel, sink).await {
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
    let reply = reply.await?;
    let mut room = room;
    if let Streamed::Done(reply) = &reply {
        // The server's count of this request is the truth: the results of its calls are
        // cut to the room it really left (compact.rs), and later requests learn from it.
        let reported = reply.usage.prompt_tokens;
        lock(&shared.calibration).learn(&settings.model, &room.counted, reported);
        room.used = room.used.max(reported.map_or(0, |n| n as usize));
    }
    match reply {
        Streamed::Done(reply) if reply.finish == Some(FinishReason::Repetition) => {
            let end = if ask_again(memory, &reply) {
                // After a result: not recorded; the nudge asks for the answer (guard.rs).
                memory.set_answer_due(true);
                sink.record(shared, vec![Message::user(ANSWER_NUDGE)]);
                TurnEnd::Continue
            } else {
                record_unfinished(shared, settings, sink, &reply, STOPPED_RESULT);
                TurnEnd::Finish(FinishReason::Repetition)
            };
            let usage = reply.usage;
            sink.send(ChatEvent::TurnComplete {
                turn: step.turn,
                usage,
            });
            Ok(end)
        }
        Streamed::Done(mut reply) => {
            reply.room = room;
            if let Some(context) = settings.tools_context.as_deref() {
                drop_echo(&mut reply.raw, context);
            }
            let read = Read {
                reply,
                choice: &offer.choice,
            };
            conclude(shared, settings, memory, read, filter.as_mut(), step).await
        }
        Streamed::Cancelled(partial) => {
            record_unfinished(shared, settings, sink, &partial, CANCELLED_RESULT);
            Ok(TurnEnd::Finish(FinishReason::Cancelled))
        }
    }
}

/// Whether a reply stopped for repeating itself is asked for again, with the answer
/// nudge: once per nudge, after the run has results, when no native call came with it.
fn ask_again(memory: &CallMemory, reply: &Reply) -> bool {
    memory.any() && !memory.answer_due() && reply.calls.is_empty()
}

/// The request for the next reply: the history, the options, `think` as settled, and
/// the tools as the strategy offers them under the turn's `offer`.
fn build_request(shared: &Shared, settings: &RunSettings, offer: &Offer<'_>) -> ProviderRequest {
    let history = lock(&shared.history);
    let mut messages = history.messages().to_vec();
    if let Some(context) = settings.tools_context.as_deref() {
        before_first_prompt(&mut messages, context);
    }
    let mut request = ProviderRequest::new(&settings.model, messages);
    request.system = history.system_text();
    request.options = settings.options.clone();
    request.think = settings.think;
    request.keep_alive.clone_from(&settings.keep_alive);
    settings
        .strategy
        .prepare(&mut request, offer.tools, &offer.choice);
    request
}

/// Puts the run's tools context before the conversation's first user message, in the
/// request only. Measured on Qwen2.5-Coder-1.5B (docs/tool-calling.md): in the system
/// prompt the same text lowered how often the model called a tool on the first turn
/// (22 of 42 against 32 of 42 without it), before the first prompt it raised it (38 of
/// 42). The first message of the conversation, in every turn and every run with tools,
/// so the server's prompt cache keeps the prefix.
fn before_first_prompt(messages: &mut [Message], context: &str) {
    let Some(first) = messages.iter_mut().find(|m| m.role() == Role::User) else {
        return;
    };
    let mut parts = first.parts().to_vec();
    match parts.first_mut() {
        Some(ContentPart::Text { text }) => *text = format!("{context}\n\n{text}"),
        _ => parts.insert(
            0,
            ContentPart::Text {
                text: format!("{context}\n\n"),
            },
        ),
    }
    if let Ok(prefixed) = Message::new(Role::User, parts, None, None) {
        *first = prefixed;
    }
}

/// Drops the run's tools context from the front of a reply that repeats it: the 0.5B
/// began a reply with the `[Working folder: ...]` block it had been sent, then a fenced
/// call, which the echo made prose with an example in it (issue 24). From the context's
/// first line, when the reply opens with it, to the end of its last line.
fn drop_echo(raw: &mut String, context: &str) {
    let (Some(first), Some(last)) = (context.lines().next(), context.lines().last()) else {
        return;
    };
    let body = raw.trim_start();
    if first.trim().is_empty() || !body.starts_with(first.trim()) {
        return;
    }
    let from = raw.len() - body.len();
    let Some(end) = raw[from..]
        .find(last.trim())
        .map(|at| from + at + last.trim().len())
    else {
        return;
    };
    raw.replace_range(..end, "");
}

/// Makes the request fit the model's window before anything is sent: the window is
/// settled here and sent as `options.context_length`; past the threshold the history is
/// compacted ([`super::compact`]); over the window the request is refused.
async fn check_budget(
    shared: &Shared,
    settings: &RunSettings,
    offer: &Offer<'_>,
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
        let mut request = build_request(shared, settings, offer);
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
                Some(Fallback::React(error.hint.clone()))
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
    let mut detector = settings.runaway_guard.then(RepeatDetector::default);
    let mut watch = settings.runaway_guard.then(CallWatch::default);
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
            Some(Ok(ProviderEvent::TextDelta { text }))
                if detector.as_mut().is_some_and(|d| d.push(&text).is_some()) =>
            {
                reply.take(ProviderEvent::TextDelta { text }, filter, shared, sink);
                stopped_repeating(&reply, sink);
                Flow::Finished(FinishReason::Repetition)
            }
            Some(Ok(event)) => match reply.take(event, filter, shared, sink) {
                Flow::More => match watch.as_mut().and_then(|w| w.push(&reply.raw)) {
                    Some(cut) => stopped_calling(&mut reply, cut, sink),
                    None => Flow::More,
                },
                flow => flow,
            },
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

/// Warns that the reply was stopped because it kept repeating itself; the caller drops
/// the stream, which cancels the request.
fn stopped_repeating(reply: &Reply, sink: &Sink) {
    let tail: String = {
        let chars: Vec<char> = reply.raw.chars().rev().take(60).collect();
        chars.into_iter().rev().collect()
    };
    sink.warn(
        WarningKind::Repetition,
        format!(
            "the reply kept repeating itself and was stopped after {} characters (it ended \
             \"{}\")",
            reply.raw.chars().count(),
            tail.escape_debug()
        ),
    );
}

/// Cuts a reply that kept writing calls where it began to repeat them
/// (`call_loop.rs`), and warns; the caller drops the stream, which cancels the request,
/// and reads what is left as the whole reply.
fn stopped_calling(reply: &mut Reply, cut: Cut, sink: &Sink) -> Flow {
    let made = reply.raw.len();
    reply.raw = cut_reply(&reply.raw, cut.at);
    sink.warn(
        WarningKind::Repetition,
        format!(
            "{} (after {} of its {made} bytes so far)",
            cut.why,
            reply.raw.len()
        ),
    );
    Flow::Finished(FinishReason::Stop)
}

/// A finished reply and the tool choice it answered.
struct Read<'a> {
    reply: Reply,
    choice: &'a ToolChoice,
}

/// Reads the finished reply, shows what is left to show, runs its calls and records the
/// turn as the strategy says.
async fn conclude(
    shared: &Shared,
    settings: &RunSettings,
    memory: &mut CallMemory,
    read: Read<'_>,
    filter: &mut dyn TextFilter,
    step: Step<'_>,
) -> Result<TurnEnd, TurnFailure> {
    let Read { reply, choice } = read;
    let sink = step.sink;
    let strategy = settings.strategy;
    let outcome = strategy.interpret(
        &reply.raw,
        reply.calls.clone(),
        &settings.tools.schemas(),
        &mut || shared.mint_id(),
        choice,
    );
    sink.shown(filter.finish(outcome.shown()));
    if reply.finish == Some(FinishReason::Length) {
        warn_cut(settings, sink);
    }
    let raw = reply.raw.as_str();
    let end = match outcome {
        TurnOutcome::Answer(answer) => {
            let nudge = answer_nudge(strategy, &answer, settings, memory);
            let answer = answer.as_str();
            let mut record = strategy.record(Turn::Answer { raw, answer });
            if let Some(nudge) = nudge {
                // Asked once to act, or to answer (guard.rs); an empty reply is dropped.
                if nudge == ANSWER_NUDGE {
                    record.clear();
                    memory.set_answer_due(true);
                }
                record.push(Message::user(nudge));
                sink.record(shared, record);
                TurnEnd::Continue
            } else {
                sink.record(shared, record);
                TurnEnd::Finish(match reply.finish {
                    Some(FinishReason::Length) => FinishReason::Length,
                    _ => FinishReason::Stop,
                })
            }
        }
        TurnOutcome::Retry {
            correction,
            problem,
        } => {
            sink.warn(WarningKind::MalformedOutput, problem);
            let correction = correction.as_str();
            sink.record(shared, strategy.record(Turn::Retry { raw, correction }));
            TurnEnd::Continue
        }
        TurnOutcome::Calls(mut calls) => {
            learn(shared, settings, !reply.calls.is_empty());
            bound_calls(&mut calls, &reply.calls, sink);
            let planned = Planned {
                text: raw,
                calls: &calls,
                answered: vec![None; calls.len()],
                room: &reply.room,
            };
            run_calls(shared, settings, memory, planned, &reply.calls, step, sink).await
        }
        TurnOutcome::TextCalls {
            mut calls,
            mut answered,
            prose,
        } => {
            learn(shared, settings, false);
            bound_calls(&mut calls, &reply.calls, sink);
            answered.truncate(calls.len());
            let planned = Planned {
                text: &prose,
                calls: &calls,
                answered,
                room: &reply.room,
            };
            run_calls(shared, settings, memory, planned, &reply.calls, step, sink).await
        }
    };
    let usage = reply.usage;
    sink.send(ChatEvent::TurnComplete {
        turn: step.turn,
        usage,
    });
    Ok(end)
}

/// The user message that follows an answer, if any (guard.rs): an empty answer after
/// the run's calls asks for the answer; an example of a call, or a claim that it cannot
/// reach the files, asks the model to act (once, before any call, with tools offered).
fn answer_nudge(
    strategy: Strategy,
    answer: &str,
    settings: &RunSettings,
    memory: &mut CallMemory,
) -> Option<&'static str> {
    if answer.trim().is_empty() {
        return memory.ask_to_answer().then_some(ANSWER_NUDGE);
    }
    let nudge = if strategy.shows_call(answer, &settings.offered) {
        ACT_NUDGE
    } else if !settings.offered.is_empty() && super::guard::says_it_cannot(answer) {
        CAN_NUDGE
    } else {
        return None;
    };
    memory.ask_to_act().then_some(nudge)
}

/// Keeps the first [`MAX_CALLS_PER_REPLY`] of a reply's calls; the rest are dropped from
/// the conversation, with a warning, and each dropped call that was announced while
/// streaming is answered by an event (not in the history, which no longer holds it).
fn bound_calls(calls: &mut Vec<ToolCall>, announced: &[ToolCall], sink: &Sink) {
    if calls.len() <= MAX_CALLS_PER_REPLY {
        return;
    }
    let made = calls.len();
    let dropped = calls.split_off(MAX_CALLS_PER_REPLY);
    let why = format!(
        "the reply made {made} tool calls; the first {MAX_CALLS_PER_REPLY} run and the \
         other {} were dropped from the conversation",
        dropped.len()
    );
    for call in dropped.iter().filter(|c| announced.contains(c)) {
        sink.send(ChatEvent::ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: format!("Error: not run: {why}"),
            is_error: true,
        });
    }
    sink.warn(WarningKind::Repetition, why);
}

/// Warns that the reply was cut at the generation cap.
fn warn_cut(settings: &RunSettings, sink: &Sink) {
    let cap = match settings.options.max_tokens {
        Some(n) => format!("the cap of {n} tokens per reply"),
        None => "the server's token limit".to_owned(),
    };
    sink.warn(
        WarningKind::TokenLimit,
        format!("the reply was cut at {cap} (raise it with max_tokens, `ollm run --max-tokens`)"),
    );
}

/// Remembers how a native reply's calls came: structured, or written as text.
fn learn(shared: &Shared, settings: &RunSettings, structured: bool) {
    if settings.strategy != Strategy::Native {
        return;
    }
    let mut learned = lock(&shared.learned);
    let entry = learned.entry(settings.model.clone()).or_default();
    let count = if structured {
        &mut entry.native_calls
    } else {
        &mut entry.text_calls
    };
    *count = count.saturating_add(1);
}

/// A turn's calls: the text its assistant message keeps, the calls, and per call the
/// result decided without running it (`None`: run it, unless the guard answers it).
struct Planned<'a> {
    text: &'a str,
    calls: &'a [ToolCall],
    answered: Vec<Option<ToolOutcome>>,
    /// How full the request was (bounds the results).
    room: &'a Room,
}

/// Announces the calls that were not announced while streaming (those read from text),
/// runs the calls of `planned` that are new to the run, answers the repeated ones from
/// what their twins produced (see `guard.rs`) and the decided ones as decided, and
/// records the turn and the answer nudge as `guard.rs` says. Ends the run when cancelled meanwhile (what was produced is recorded
/// too) or when a call was asked for the [`REPEAT_LIMIT`]th time.
async fn run_calls(
    shared: &Shared,
    settings: &RunSettings,
    memory: &mut CallMemory,
    planned: Planned<'_>,
    announced: &[ToolCall],
    step: Step<'_>,
    sink: &Sink,
) -> TurnEnd {
    let Planned {
        text,
        calls,
        answered,
        room,
    } = planned;
    for call in calls.iter().filter(|c| !announced.contains(c)) {
        sink.send(ChatEvent::ToolCallStarted { call: call.clone() });
    }
    let identities = super::guard::identities(&settings.tools, calls);
    let sources = memory.sort(&identities);
    let runs = |i: usize| answered[i].is_none() && sources[i] == Source::Run;
    let fresh: Vec<ToolCall> = (0..calls.len())
        .filter(|&i| runs(i))
        .map(|i| calls[i].clone())
        .collect();
    let (ran, cancelled) = execute_all(&settings.tools, &fresh, step.cancel, sink).await;
    let mut ran = ran.into_iter();
    let mut results: Vec<Option<ToolOutcome>> = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        let result = match (&answered[i], &sources[i]) {
            (Some(decided), _) => Some(decided.clone()),
            (None, Source::Run) => ran.next().flatten(),
            (None, Source::Earlier) => memory.answer(&identities[i]),
            (None, Source::Twin(j)) => results[*j]
                .as_ref()
                .map(|r| super::guard::repeat_result(&call.name, &r.content)),
        };
        if !runs(i) && !cancelled {
            if let Some(r) = &result {
                announce(sink, call, r);
            }
        }
        results.push(result);
    }
    if cancelled {
        let partial = (text, calls);
        record_calls_unfinished(shared, settings, sink, partial, &results, CANCELLED_RESULT);
        return TurnEnd::Finish(FinishReason::Cancelled);
    }
    let mut results: Vec<ToolOutcome> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| ToolOutcome::error("the tool did not run")))
        .collect();
    let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
    bound_results(&mut results, &names, room, &settings.compaction, sink);
    let stuck = memory.learn(&identities, &results);
    // None ran (repeats, unknown tools): the nudge follows; a turn of repeats only is
    // not recorded (see `guard.rs`).
    let idle = (0..calls.len())
        .all(|i| !settings.tools.contains(&calls[i].name) || sources[i] == Source::Earlier);
    memory.set_answer_due(idle && stuck.is_none());
    let mut record = Vec::new();
    if !memory.repeated() {
        let turn = Turn::Calls {
            raw: text,
            calls,
            results: &results,
        };
        record = settings.strategy.record(turn);
    }
    if memory.answer_due() {
        record.push(Message::user(ANSWER_NUDGE));
    }
    sink.record(shared, record);
    match stuck {
        Some(i) => {
            warn_stuck(sink, &calls[i]);
            TurnEnd::Finish(FinishReason::Repetition)
        }
        None => TurnEnd::Continue,
    }
}

/// Sends the `ToolResult` of a call answered without running.
fn announce(sink: &Sink, call: &ToolCall, result: &ToolOutcome) {
    sink.send(ChatEvent::ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: result.content.clone(),
        is_error: result.is_error,
    });
}

/// Warns that the run ends because the model kept asking for `call`.
fn warn_stuck(sink: &Sink, call: &ToolCall) {
    let mut args = String::new();
    super::guard::canonical(&call.arguments_value(), &mut args);
    sink.warn(
        WarningKind::Repetition,
        format!(
            "the model asked for the same call {REPEAT_LIMIT} times ({} {args}) instead of \
             answering from its result; the run was stopped",
            call.name
        ),
    );
}

/// Records what an unfinished reply produced (cancelled, or stopped for repeating
/// itself; see the module docs of [`crate::chat`]), answering each of its calls with
/// `placeholder`.
fn record_unfinished(
    shared: &Shared,
    settings: &RunSettings,
    sink: &Sink,
    reply: &Reply,
    placeholder: &str,
) {
    let partial = (reply.raw.as_str(), &reply.calls[..]);
    record_calls_unfinished(shared, settings, sink, partial, &[], placeholder);
}

/// Records the text and calls of an unfinished turn, answering every call without a
/// result with `placeholder`.
fn record_calls_unfinished(
    shared: &Shared,
    settings: &RunSettings,
    sink: &Sink,
    (raw, calls): (&str, &[ToolCall]),
    results: &[Option<ToolOutcome>],
    placeholder: &str,
) {
    let results = answer_unfinished(calls, results, sink, placeholder);
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
