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

use futures::{FutureExt, StreamExt};
use ollm_types::{
    FinishReason, Message, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest,
    ToolCall, Usage, WarningKind,
};
use tokio_util::sync::CancellationToken;

use super::calls::{answer_cancelled, execute_all};
use super::client::{Shared, lock, model_info};
use super::run::Sink;
use super::settle::RunSettings;
use super::{ChatEvent, ChatOptions};
use crate::CoreError;
use crate::strategy::{Strategy, TextFilter, Turn, TurnOutcome};
use crate::tokens::{Budget, budget, estimate_text, request_text, usage_percent};
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
    let start_len = lock(&shared.history).len();
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
        sink.unrecord(&shared, start_len);
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
    let request = build_request(shared, settings);
    if !check_budget(shared, settings, &request, cancel, sink).await? {
        return Ok(TurnEnd::Finish(FinishReason::Cancelled));
    }
    let mut filter = settings.strategy.text_filter();
    let reply = stream_reply(
        shared,
        settings,
        request,
        filter.as_mut(),
        cancel,
        sink,
        total,
    );
    match reply.await? {
        Streamed::Done(reply) => {
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

/// Checks the request's size before anything is sent: a warning near the limit, an
/// error over it. `Ok(false)` when the run was cancelled meanwhile.
async fn check_budget(
    shared: &Shared,
    settings: &RunSettings,
    request: &ProviderRequest,
    cancel: &CancellationToken,
    sink: &Sink,
) -> Result<bool, TurnFailure> {
    let text = request_text(request);
    let counted = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Ok(false),
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
    Ok(true)
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
        &settings.tools.schemas(),
        &mut || shared.mint_id(),
    );
    sink.shown(filter.finish(outcome.shown()));
    let raw = reply.raw.as_str();
    let end = match outcome {
        TurnOutcome::Answer(answer) => {
            let answer = answer.as_str();
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
            sink.warn(WarningKind::MalformedOutput, problem);
            let correction = correction.as_str();
            sink.record(shared, strategy.record(Turn::Retry { raw, correction }));
            TurnEnd::Continue
        }
        TurnOutcome::Calls(calls) => {
            let answered = vec![None; calls.len()];
            let planned = Planned {
                text: raw,
                calls: &calls,
                answered,
            };
            if !run_planned(shared, settings, &reply.calls, planned, cancel, sink).await {
                return Ok(TurnEnd::Finish(FinishReason::Cancelled));
            }
            TurnEnd::Continue
        }
        TurnOutcome::TextCalls {
            calls,
            answered,
            prose,
        } => {
            let planned = Planned {
                text: &prose,
                calls: &calls,
                answered,
            };
            if !run_planned(shared, settings, &reply.calls, planned, cancel, sink).await {
                return Ok(TurnEnd::Finish(FinishReason::Cancelled));
            }
            TurnEnd::Continue
        }
    };
    let usage = reply.usage;
    sink.send(ChatEvent::TurnComplete { turn, usage });
    Ok(end)
}

/// A turn's calls: the text its assistant message keeps, the calls, and per call the
/// result decided without running it (`None`: run it).
struct Planned<'a> {
    text: &'a str,
    calls: &'a [ToolCall],
    answered: Vec<Option<ToolOutcome>>,
}

/// Announces the calls that were not announced while streaming (those read from text),
/// runs the rest of `planned`'s calls, answers the others as decided, and records the
/// turn; `false` when the run was cancelled meanwhile (what it produced is recorded too).
async fn run_planned(
    shared: &Shared,
    settings: &RunSettings,
    announced: &[ToolCall],
    planned: Planned<'_>,
    cancel: &CancellationToken,
    sink: &Sink,
) -> bool {
    let Planned {
        text,
        calls,
        answered,
    } = planned;
    for call in calls.iter().filter(|c| !announced.contains(c)) {
        sink.send(ChatEvent::ToolCallStarted { call: call.clone() });
    }
    let to_run: Vec<ToolCall> = calls
        .iter()
        .zip(&answered)
        .filter(|(_, a)| a.is_none())
        .map(|(c, _)| c.clone())
        .collect();
    let (ran, cancelled) = execute_all(&settings.tools, &to_run, cancel, sink).await;
    let mut ran = ran.into_iter();
    let results: Vec<Option<ToolOutcome>> = calls
        .iter()
        .zip(answered)
        .map(|(call, decided)| match decided {
            Some(outcome) => {
                sink.send(ChatEvent::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: outcome.content.clone(),
                    is_error: outcome.is_error,
                });
                Some(outcome)
            }
            None => ran.next().flatten(),
        })
        .collect();
    if cancelled {
        record_cancelled(shared, settings, sink, text, calls, &results);
        return false;
    }
    let results: Vec<ToolOutcome> = results
        .into_iter()
        .map(|r| r.unwrap_or_else(|| ToolOutcome::error("the tool did not run")))
        .collect();
    let results = &results;
    let turn = Turn::Calls {
        raw: text,
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
