//! The turn's budget step with compaction: [`fit`] makes the next request fit the window
//! (compacting the history when it passes the threshold), [`compact_now`] is `/compact`,
//! and [`bound_results`] cuts tool results to the room left.
//!
//! # Decisions
//! - The window is settled once per request ([`crate::context::settle_window`]) and
//!   written into the request's `options.context_length`, so what is enforced is what is
//!   asked of the server.
//! - Sizes come from the server's count of the whole request where it has one
//!   (`ProviderAdapter::count_request`: the Messages API's `count_tokens`, template and
//!   tools included, so no template estimate is added), else from the provider's
//!   tokenizer when it answers, else `ceil(chars / 4)`, each corrected by what the
//!   server reported for earlier requests ([`crate::context::calibrate`]);
//!   the ratio of characters to tokens of the whole request prices single messages.
//! - **Every request carries a generation cap** (`options.max_tokens`), set here once
//!   the request's size is known: the run's cap (`ChatConfig::max_tokens`,
//!   4096 by default), bounded by what the window leaves after the prompt's estimated
//!   cost; with no cap configured, exactly what the window leaves. vLLM refuses a
//!   `max_tokens` over its `max_model_len` with a 400 (docs/vllm.md), so a default of
//!   4096 against a 2048-token window used to fail every request.
//! - With compaction off, today's rule stands: a warning near the limit, a refusal over
//!   it (with a hint that compaction is off).

use std::sync::Arc;
use std::time::Instant;

use futures::FutureExt;
use ollm_types::{Message, ProviderErrorKind, ProviderRequest, WarningKind};
use tokio_util::sync::CancellationToken;

use super::event::ChatEvent;
use super::settle::RunSettings;
use super::shared::{Shared, Sink, lock};
use crate::context::calibrate::Counted;
use crate::context::split::turns_in;
use crate::context::{
    Compaction, CompactionConfig, SUMMARY_HEADER, Window, cut_result, plan_split,
};
use crate::tokens::{
    Budget, budget, estimate_text, request_text, template_overhead, usage_percent,
};
use crate::tool::ToolOutcome;
use crate::{CoreError, History};

/// The size of a request, and how many characters a token stood for in it.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Room {
    pub(super) window: usize,
    /// The request's cost, corrected ([`crate::context::calibrate`]).
    pub(super) used: usize,
    /// How its text was counted (what the reply's prompt count is compared with).
    pub(super) counted: Counted,
    /// Its text's cost, corrected, without the template prior: what the request carries
    /// down for an adapter's truncation check ([`crate::context::calibrate`]).
    text: usize,
    chars_per_token: f64,
}

impl Room {
    /// The tokens `message` costs at this request's ratio.
    fn cost(&self, message: &Message) -> usize {
        (message.char_count() as f64 / self.chars_per_token).ceil() as usize
    }
}

/// What the budget step decided.
pub(super) enum Fitted {
    /// Send this request; `Room` says how full it is.
    Send(Box<ProviderRequest>, Room),
    /// The run was cancelled meanwhile.
    Cancelled,
    /// Over the window and it could not be made to fit: an `Error` was sent.
    Refused,
}

/// Counts `request`'s tokens; `None` when the run was cancelled meanwhile.
async fn measure(
    shared: &Shared,
    request: &ProviderRequest,
    window: usize,
    cancel: &CancellationToken,
) -> Option<Room> {
    let text = request_text(request);
    let whole = tokio::select! {
        biased;
        _ = cancel.cancelled() => return None,
        n = std::panic::AssertUnwindSafe(shared.provider.count_request(request))
            .catch_unwind() => n,
    };
    // The server's count of the whole request already holds the template's tokens.
    let (tokens, exact, overhead) = match whole {
        Ok(Ok(Some(n))) => (n, true, 0),
        _ => {
            let counted = tokio::select! {
                biased;
                _ = cancel.cancelled() => return None,
                n = std::panic::AssertUnwindSafe(
                    shared.provider.count_tokens(&request.model, &text),
                )
                .catch_unwind() => n,
            };
            match counted {
                Ok(Ok(Some(n))) => (n, true, template_overhead(request)),
                _ => (estimate_text(&text), false, template_overhead(request)),
            }
        }
    };
    let counted = Counted {
        tokens,
        exact,
        overhead,
        tools: !request.tools.is_empty(),
    };
    let (used, text_cost) = {
        let calibration = lock(&shared.calibration);
        let model = &request.model;
        (
            calibration.cost(model, &counted),
            calibration.text_cost(model, &counted),
        )
    };
    let chars = text.chars().count().max(1) as f64;
    Some(Room {
        window,
        used,
        counted,
        text: text_cost,
        chars_per_token: (chars / tokens.max(1) as f64).clamp(1.0, 8.0),
    })
}

/// Makes the request `build` returns fit `window`, compacting the history when the
/// settings allow (see the module docs).
pub(super) async fn fit(
    shared: &Shared,
    settings: &RunSettings,
    window: Window,
    build: &(dyn Fn() -> ProviderRequest + Sync),
    cancel: &CancellationToken,
    sink: &Sink,
) -> Fitted {
    let config = &settings.compaction;
    let mut request = build();
    let Some(mut room) = measure(shared, &request, window.tokens, cancel).await else {
        return Fitted::Cancelled;
    };
    let threshold = window.tokens * usize::from(config.threshold_percent.min(100)) / 100;
    if config.enabled && room.used > threshold {
        let before = room.used;
        let mut done = summarise(shared, &settings.model, config, room, cancel)
            .await
            .unwrap_or_default();
        if cancel.is_cancelled() {
            return Fitted::Cancelled;
        }
        if done.summary.is_some() {
            request = build();
            let Some(after) = measure(shared, &request, window.tokens, cancel).await else {
                return Fitted::Cancelled;
            };
            room = after;
        }
        if room.used > window.tokens {
            let Some(after) = drop_oldest(shared, &mut done, room, threshold, build, cancel).await
            else {
                return Fitted::Cancelled;
            };
            (request, room) = after;
        }
        if done.turns_summarised + done.turns_dropped > 0 {
            done.tokens_before = before;
            done.tokens_after = room.used;
            warn_dropped(sink, &done);
            sink.send(ChatEvent::Compacted { compaction: done });
        }
    }
    check(settings, &room, sink, request)
}

/// The near-limit warning, or the refusal over the window.
fn check(settings: &RunSettings, room: &Room, sink: &Sink, mut request: ProviderRequest) -> Fitted {
    let (estimated, limit) = (room.used, room.window);
    match budget(estimated, limit) {
        Budget::Over => {
            let error = CoreError::ContextOverflow {
                model: settings.model.clone(),
                estimated,
                limit,
            };
            let mut error = ollm_types::ProviderError::new(
                ProviderErrorKind::ContextOverflow,
                error.to_string(),
            );
            if !settings.compaction.enabled {
                error.hint =
                    Some("automatic compaction is off: compact or shorten the conversation".into());
            }
            sink.send(ChatEvent::Error { error });
            return Fitted::Refused;
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
    // The text's corrected cost travels with the request: an adapter judges a silent
    // truncation by it (crate::context::calibrate).
    request.estimated_prompt_tokens = u32::try_from(room.text).ok();
    request.options.max_tokens = Some(generation_cap(request.options.max_tokens, room));
    Fitted::Send(Box::new(request), *room)
}

/// The generation cap a request carries: the one `asked` for, never more than the window
/// leaves after the prompt's estimated cost (vLLM refuses a `max_tokens` over the window
/// with a 400, docs/vllm.md); with none asked, all the window leaves. At least one token.
fn generation_cap(asked: Option<u32>, room: &Room) -> u32 {
    let left = u32::try_from(room.window.saturating_sub(room.used)).unwrap_or(u32::MAX);
    asked.unwrap_or(u32::MAX).min(left).max(1)
}

/// Replaces the turns between the head and the recent tail by a summary. Nothing to
/// summarise, or a cancel, is an empty [`Compaction`]; a failed summary is its error and
/// leaves the history as it was.
async fn summarise(
    shared: &Shared,
    model: &str,
    config: &CompactionConfig,
    room: Room,
    cancel: &CancellationToken,
) -> Result<Compaction, ollm_types::ProviderError> {
    let keep = room.window * usize::from(config.keep_percent.min(100)) / 100;
    let (split, middle) = {
        let history = lock(&shared.history);
        let split = plan_split(history.messages(), keep, |m| room.cost(m));
        (split, history.messages()[split.middle()].to_vec())
    };
    if middle.is_empty() {
        return Ok(Compaction::default());
    }
    let compactor = Arc::clone(&*lock(&shared.compactor));
    let started = Instant::now();
    let asked = std::panic::AssertUnwindSafe(compactor.summarise(
        shared.provider.as_ref(),
        model,
        &middle,
        room.window,
    ))
    .catch_unwind();
    let summary = tokio::select! {
        biased;
        _ = cancel.cancelled() => return Ok(Compaction::default()),
        s = asked => s,
    };
    let summary_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let summary = match summary {
        Ok(Ok(summary)) => summary,
        Ok(Err(error)) => return Err(error),
        Err(_panic) => {
            return Err(ollm_types::ProviderError::new(
                ProviderErrorKind::Other,
                "the compactor panicked",
            ));
        }
    };
    let mut history = lock(&shared.history);
    let turns = turns_in(history.messages(), split.middle());
    let message = Message::user(format!("{SUMMARY_HEADER}\n{summary}"));
    history.splice(split.middle(), vec![message]);
    Ok(Compaction {
        turns_summarised: turns,
        summary: Some(summary),
        summary_ms,
        ..Compaction::default()
    })
}

/// Drops the oldest turns after the head until the request is within `target` (never
/// the newest turn), with a warning; the request and its size after.
async fn drop_oldest(
    shared: &Shared,
    done: &mut Compaction,
    mut room: Room,
    target: usize,
    build: &(dyn Fn() -> ProviderRequest + Sync),
    cancel: &CancellationToken,
) -> Option<(ProviderRequest, Room)> {
    let mut request = None;
    while room.used > target {
        let dropped = {
            let mut history = lock(&shared.history);
            drop_one(&mut history)
        };
        if !dropped {
            break;
        }
        done.turns_dropped += 1;
        let rebuilt = build();
        room = measure(shared, &rebuilt, room.window, cancel).await?;
        request = Some(rebuilt);
    }
    Some((request.unwrap_or_else(build), room))
}

/// Drops the oldest turn after the head; `false` when only the newest is left.
fn drop_one(history: &mut History) -> bool {
    history.drop_oldest_turn()
}

/// Warns about dropped turns.
fn warn_dropped(sink: &Sink, compaction: &Compaction) {
    if compaction.turns_dropped > 0 {
        sink.warn(
            WarningKind::TurnsDropped,
            format!(
                "{} of the oldest turns were dropped to fit the context window{}",
                compaction.turns_dropped,
                if compaction.summary.is_some() {
                    " (the summary was not enough)"
                } else {
                    " (no summary could be written)"
                }
            ),
        );
    }
}

/// Cuts each result that would take more than the configured share of the room left
/// after `room`, with a warning naming the tool.
pub(super) fn bound_results(
    results: &mut [ToolOutcome],
    names: &[&str],
    room: &Room,
    config: &CompactionConfig,
    sink: &Sink,
) {
    let left = room.window.saturating_sub(room.used);
    let share = left * usize::from(config.tool_output_percent.min(100)) / 100 / names.len().max(1);
    let max_chars = ((share as f64 * room.chars_per_token) as usize).max(200);
    for (result, name) in results.iter_mut().zip(names) {
        if let Some(cut) = cut_result(&result.content, max_chars) {
            sink.warn(
                WarningKind::ToolOutputCut,
                format!(
                    "the result of {name} was cut to about {max_chars} characters to fit the \
                     context window"
                ),
            );
            result.content = cut;
        }
    }
}

/// `/compact`: summarises every turn but the head and the recent tail, now.
pub(super) async fn compact_now(
    shared: &Shared,
    model: &str,
    window: usize,
    config: &CompactionConfig,
) -> Result<Compaction, CoreError> {
    let build = || {
        let history = lock(&shared.history);
        let mut request = ProviderRequest::new(model, history.messages().to_vec());
        request.system = history.system_text();
        request
    };
    // Nothing cancels a `/compact`: `measure` always answers.
    let never = CancellationToken::new();
    let Some(before) = measure(shared, &build(), window, &never).await else {
        return Ok(Compaction::default());
    };
    let mut done = summarise(shared, model, config, before, &never).await?;
    done.tokens_before = before.used;
    done.tokens_after = measure(shared, &build(), window, &never)
        .await
        .map_or(before.used, |r| r.used);
    Ok(done)
}
