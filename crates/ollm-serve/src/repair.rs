//! The paths a request takes through `ollm serve`, by its repair policy (`policy.rs`):
//! straight through the pool, through the runtime's turn loop with every repair applied
//! and marked, or through it with the repairs only reported.
//!
//! # Decisions
//! - **Requests without tools, or under `off`, pass straight through** the pool: the
//!   adapter's events become chunks without the turn loop.
//! - **`on`** runs the loop (`turns.rs`) until a reply's calls are to declared tools, or
//!   it has none: a reply whose calls all name tools the client never declared is
//!   answered inside the request and the model asked again, at most
//!   [`INVENTED_RETRIES`](super::turns::INVENTED_RETRIES) times; a reply that still invents them reaches the client as
//!   its text alone. Text streams as it comes; a later run's text starts a new paragraph.
//! - **The coach's nudge gets its turn when nothing of the nudged reply reached the
//!   client.** A run is one turn, so a nudge the run's coach says after its reply
//!   (`can-nudge`, `act-nudge`, `answer-after-empty`, `answer-after-idle`,
//!   `answer-after-runaway`) ends the run with no turn to answer it in; `ollm run` plays
//!   it. Serve plays it as the next run, over the conversation so far with the nudge
//!   (tools withheld after the answer nudge), when the client has seen nothing of the
//!   reply: always for a client that takes the reply whole (its runs' text is held until
//!   the reply ends, [`Attempt::new`], which a whole reply waits for anyway), and on a
//!   stream only when no text went out. A reply that would reach the client with no text
//!   and no declared call, about which the run's coach said nothing (an empty answer
//!   before any call, the server's own undeclared calls left out after the retries), gets
//!   the answer nudge the same way (`answer-after-nothing`): one decision,
//!   [`Turns::nudge`](super::turns::Turns::nudge). Each nudge once per request (act and
//!   can as one, the coach's once per run), so at most two nudge turns besides the
//!   retries; never under a `tool_choice` that obliges a call (that is `contract.rs`'s);
//!   each rule's switch turns its turn off. The client gets the reply after the nudge,
//!   marked `coached; rule=RULE` with the calls left out (a recovered call after it
//!   carries the rule beside its format), with the usage of every run; never the nudge.
//!   Why: on the eval's tuning part (2026-11-26) the 0.5B scored 8-10/54 through serve
//!   against 15-16/54 under `ollm run`; 12-16 of its ~45 served failures were a tool task
//!   answered in words with no call ("I'm sorry, but I can't assist with that."), which
//!   `can-nudge` answers in `ollm run`, and 6 of 46 an empty reply (5 after calls answered
//!   inside the request). The eval's plain client takes replies whole.
//! - **`flag`** sends the upstream's reply exactly as it came (text, calls, finish) and
//!   runs the loop beside it only to learn which calls it would have recovered, which it
//!   reports (`provenance.rs`). The loop runs with native tools named, so no fallback
//!   rewrites the request either.
//! - **The coach of `ollm run` holds across requests** ([`guarded`]): small models
//!   repeat a call whose result they already have until the client's turn limit. The
//!   run's coach ([`Coach::seeded`] from the conversation since its last user message,
//!   which is all a proxy sees of the run) plans the reply's calls as `ollm run`'s would
//!   (`repeat-guard`, `repeat-ignores-undeclared`); a reply made only of calls it would
//!   answer from earlier results is replaced by the answer to its answer nudge, asked
//!   without tools (`answer-after-idle`), and marked `coached` (`provenance.rs`): the
//!   client sees an answer where it would have looped. Serve keeps no rule of its own:
//!   the switches are the coach's ([`Options::coach`](crate::Options::coach)). Not under
//!   a `tool_choice` that obliges a call (that is `contract.rs`'s).

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;
use ollm_core::coach::{Coach, Source};
use ollm_core::{CoachConfig, Rule, ToolMode};
use ollm_types::{FinishReason, Message, ProviderRequest, ToolCall};
use tokio::sync::mpsc;

use super::contract;
use super::policy::Repair;
use super::provenance::{Provenance, Status};
use super::turns::{self, Ask, Attempt, Turns, Upstream};
use super::wire_out::Piece;

/// The pieces of the reply to `request` under `repair`, for a client that takes it
/// `whole` or streamed.
pub(crate) fn reply(
    up: &Upstream,
    request: ProviderRequest,
    session: Option<String>,
    repair: Repair,
    whole: bool,
) -> BoxStream<'static, Piece> {
    if repair == Repair::Off || request.tools.is_empty() {
        return passthrough(up, request, session.as_deref());
    }
    let ask = Ask {
        up: up.clone(),
        request,
        session,
        whole,
    };
    if repair == Repair::Flag {
        return flagged(ask);
    }
    if ask.request.tool_choice.requires_call() {
        return obliged(ask);
    }
    guarded(ask.clone(), repaired(ask, ToolMode::Auto))
}

/// A reply under a `tool_choice` that obliges a call (`contract.rs`): asked as the client
/// asked, then under the constraint; or under the constraint at once, where the server
/// ignored such a choice for the model before.
fn obliged(ask: Ask) -> BoxStream<'static, Piece> {
    let constraint = ask.up.constraint;
    if ask.up.cache.ignores_choice(&ask.request.model) {
        return repaired(ask, constraint);
    }
    let learn = contract::Learn {
        metrics: Arc::clone(&ask.up.metrics),
        cache: Arc::clone(&ask.up.cache),
        model: ask.request.model.clone(),
    };
    let retry = ask.clone();
    let first = repaired(ask, ToolMode::Auto);
    contract::kept(first, move || repaired(retry, constraint), learn)
}

fn passthrough(
    up: &Upstream,
    request: ProviderRequest,
    session: Option<&str>,
) -> BoxStream<'static, Piece> {
    up.clock
        .time(up.pool.chat_in_session(request, session))
        .filter_map(|e| std::future::ready(Piece::from_event(e)))
        .boxed()
}

/// The reply through the turn loop under `mode`, every repair applied (see the module
/// docs).
pub(crate) fn repaired(ask: Ask, mode: ToolMode) -> BoxStream<'static, Piece> {
    Box::pin(async_stream::stream! {
        let turns = match Turns::new(&ask, mode, None) {
            Ok(turns) => turns,
            Err(e) => {
                yield Piece::Error(e);
                return;
            }
        };
        let (mut turns, mut tries, mut attempt) = (turns, 0, Attempt::new(ask.whole));
        loop {
            let mut run = turns.run();
            while let Some(piece) = run.next().await {
                if let Some(shown) = attempt.take(piece) {
                    yield shown;
                }
                if attempt.over() {
                    break;
                }
            }
            if attempt.failed {
                return;
            }
            if !attempt.over() {
                yield Piece::Error(ended_early());
                return;
            }
            let Some(last) = turns.conclude(&mut attempt, &mut tries).await else {
                attempt = attempt.again();
                continue;
            };
            if let Some(mark) = turns.nudge(&attempt, &last) {
                tracing::info!(model = %ask.request.model, rule = mark.format,
                    left_out = mark.calls.len(),
                    "serve: the coach's nudge gets its turn; nothing of the reply it answers reached the client");
                yield Piece::Repair(mark);
                attempt = attempt.nudged();
                continue;
            }
            for piece in attempt.release().into_iter().chain(last) {
                yield piece;
            }
            return;
        }
    })
}

fn ended_early() -> ollm_types::ProviderError {
    ollm_types::ProviderError::new(
        ollm_types::ProviderErrorKind::IncompleteStream,
        "the run ended without a reply",
    )
}

/// What the `flag` path is waiting on next.
enum Step {
    /// A piece of the upstream's reply as it came (`None`: no more).
    Raw(Option<Piece>),
    /// A piece of the loop's reading of it (`None`: the run is over).
    Run(Option<Piece>),
}

/// The upstream's reply untouched, with the calls the loop found in its text reported
/// before its finish (see the module docs).
fn flagged(ask: Ask) -> BoxStream<'static, Piece> {
    Box::pin(async_stream::stream! {
        let (tx, mut raw) = mpsc::unbounded_channel();
        let turns = match Turns::new(&ask, ToolMode::Native, Some(tx)) {
            Ok(turns) => turns,
            Err(e) => {
                yield Piece::Error(e);
                return;
            }
        };
        let mut run = turns.run();
        let (mut read, mut finish, mut any) = (Attempt::default(), None, false);
        while !read.over() {
            let step = tokio::select! {
                biased;
                piece = raw.recv(), if finish.is_none() => Step::Raw(piece),
                piece = run.next() => Step::Run(piece),
            };
            match step {
                Step::Raw(Some(Piece::Finish(reason))) => finish = Some(reason),
                Step::Raw(Some(piece)) => {
                    any = true;
                    yield piece;
                }
                Step::Raw(None) => finish = Some(FinishReason::Stop),
                Step::Run(Some(piece)) => {
                    // The loop's own error matters only when the upstream said nothing.
                    if let Some(error @ Piece::Error(_)) = read.take(piece) {
                        if !any && finish.is_none() {
                            yield error;
                            return;
                        }
                    }
                }
                Step::Run(None) => read.failed = true,
            }
        }
        let calls = turns.declared(std::mem::take(&mut read.calls));
        if let Some(p) = turns.provenance(Status::Flagged, &calls) {
            yield Piece::Repair(p);
        }
        yield Piece::Finish(finish.or(read.finish).unwrap_or(FinishReason::Stop));
    })
}

/// The coach of `ollm run` across requests: a reply whose calls the coach would all
/// answer from the conversation's earlier results is not sent; the model is asked once
/// more, without tools, with the coach's answer nudge, and the answer goes out marked
/// (see the module docs; `coach/` in ollm-core for the measurements behind the rules).
/// Calls come at the end of a turn, so holding them back (and where they came from)
/// until the reply ends delays nothing.
fn guarded(ask: Ask, mut pieces: BoxStream<'static, Piece>) -> BoxStream<'static, Piece> {
    Box::pin(async_stream::stream! {
        let (mut calls, mut held) = (Vec::new(), Vec::new());
        while let Some(piece) = pieces.next().await {
            match piece {
                Piece::Call(call) => {
                    calls.push(call.clone());
                    held.push(Piece::Call(call));
                }
                // Once the calls begin, the rest is held with them.
                Piece::Repair(_) | Piece::Usage(_) | Piece::Reasoning(_) | Piece::Text(_)
                    if !held.is_empty() || matches!(piece, Piece::Repair(_)) =>
                {
                    held.push(piece);
                }
                Piece::Finish(reason) => {
                    if let Some((coached, nudge)) = idle(&ask, &calls) {
                        tracing::info!(calls = calls.len(), rule = coached.format,
                            "serve: the reply only repeats answered calls; asking for the answer");
                        let mut nudged = ask.request.clone();
                        nudged.tools.clear();
                        nudged.messages.push(nudge);
                        yield Piece::Repair(coached);
                        let mut answer = passthrough(&ask.up, nudged, ask.session.as_deref());
                        while let Some(piece) = answer.next().await {
                            yield piece;
                        }
                        return;
                    }
                    for piece in held.drain(..) {
                        yield piece;
                    }
                    yield Piece::Finish(reason);
                }
                other => yield other,
            }
        }
    })
}

/// The mark of the coach's repair when `calls` are all ones the coach, seeded from the
/// request's conversation since its last user message, would answer from earlier results
/// (`repeat-guard`; twins of such a call too), and it asks for the answer after such a
/// turn (`answer-after-idle`), with the nudge it says. `None`: the calls go to the client.
fn idle(ask: &Ask, calls: &[ToolCall]) -> Option<(Provenance, Message)> {
    let config = CoachConfig::clone(&ask.up.coach);
    if calls.is_empty() || !config.is_on(Rule::AnswerAfterIdle) {
        return None;
    }
    let tools = turns::registry(&ask.request.tools).ok()?;
    let coach = Coach::seeded(config, &ask.request.messages, &tools);
    let sources = coach.plan(&tools, calls).sources().to_vec();
    let answered = |source: &Source| match source {
        Source::Earlier => true,
        Source::Twin(i) => sources.get(*i) == Some(&Source::Earlier),
        _ => false,
    };
    let nudge = coach.says(Rule::AnswerAfterIdle)?;
    sources.iter().all(answered).then(|| {
        let provenance = Provenance {
            status: Status::Coached,
            format: Rule::AnswerAfterIdle.name(),
            calls: calls.to_vec(),
            nudged: None,
        };
        (provenance, coach.message(nudge))
    })
}
