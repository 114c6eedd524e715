//! Running a turn's calls: all at once, one task each, a `ToolResult` event as each
//! finishes, and every call answered whatever happens.
//!
//! # Decisions
//! - On cancel, running tools are aborted and no tool starts; a call without a result is
//!   answered by [`super::CANCELLED_RESULT`] (and an event says so), so calls and results stay
//!   1:1.
//! - A tool that panics or is stopped is answered by an error result naming it.

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use ollm_types::ToolCall;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::event::ChatEvent;
use super::shared::Sink;
use crate::ToolRegistry;
use crate::coach::CoachConfig;
use crate::tool::ToolOutcome;

/// Runs `calls` concurrently, one task each, emitting a `ToolResult` as each finishes;
/// the registry applies the coach's rules of `coach` (`typed-strings`, `key-hint`).
/// Returns the outcomes in call order (`None` for calls that did not finish) and whether
/// the run was cancelled.
pub(super) async fn execute_all(
    tools: &Arc<ToolRegistry>,
    calls: &[ToolCall],
    coach: &CoachConfig,
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
        let coach = coach.clone();
        let handle = set.spawn(async move { tools.execute_coached(&call, &coach).await });
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
        let Some(joined) = joined else { break };
        let (i, outcome) = match joined {
            Ok((id, outcome)) => (ids.get(&id).copied(), outcome),
            Err(e) => {
                let i = ids.get(&e.id()).copied();
                (i, failed(&e, i.map(|i| calls[i].name.as_str())))
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
        abort(set).await;
    }
    (results, cancelled)
}

/// The result of a tool task that panicked or was stopped.
fn failed(error: &tokio::task::JoinError, name: Option<&str>) -> ToolOutcome {
    let name = name.unwrap_or("tool");
    if error.is_panic() {
        ToolOutcome::error(format!("the tool {name} panicked"))
    } else {
        ToolOutcome::error(format!("the tool {name} was stopped"))
    }
}

/// Aborts the running tools. Aborted tasks end at their next poll; they get a few
/// scheduler rounds so that the tools are gone when the run reports its end. No timer is
/// used (the caller's runtime may have none), and a tool that blocks its thread is not
/// waited for.
async fn abort(mut set: JoinSet<ToolOutcome>) {
    set.abort_all();
    for _ in 0..8 {
        while let Some(Some(_)) = set.join_next().now_or_never() {}
        if set.is_empty() {
            break;
        }
        tokio::task::yield_now().await;
    }
}

/// One result per call: the real one where the tool finished, `placeholder` (such as
/// [`super::CANCELLED_RESULT`], announced with a `ToolResult` event) where it did not.
pub(super) fn answer_unfinished(
    calls: &[ToolCall],
    results: &[Option<ToolOutcome>],
    sink: &Sink,
    placeholder: &str,
) -> Vec<ToolOutcome> {
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| match results.get(i).cloned().flatten() {
            Some(done) => done,
            None => {
                sink.send(ChatEvent::ToolResult {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: placeholder.to_owned(),
                    is_error: true,
                });
                ToolOutcome {
                    content: placeholder.to_owned(),
                    is_error: true,
                }
            }
        })
        .collect()
}
