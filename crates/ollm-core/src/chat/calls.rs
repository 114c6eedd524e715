//! Running a turn's calls: all at once, one task each, a `ToolResult` event as each
//! finishes, and every call answered whatever happens.
//!
//! # Decisions
//! - On cancel, running tools are aborted and no tool starts; a call without a result is
//!   answered by [`super::CANCELLED_RESULT`] (and an event says so), so calls and results stay
//!   1:1.
//! - A tool that panics or is stopped is answered by an error result naming it.
//! - **A tool that hangs** is dropped at its timeout (the tool's own, else the client's
//!   [`super::ChatConfig::tool_timeout`], ten minutes by default) and answered
//!   `Error: ...` ([`crate::ToolError::TimedOut`]), so one custom tool can no longer stall
//!   a run until the caller cancels. In a runtime without timers (the caller built it
//!   without `enable_time`) calls run without a limit rather than fail.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use ollm_types::ToolCall;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::event::ChatEvent;
use super::shared::Sink;
use crate::coach::CoachConfig;
use crate::tool::ToolOutcome;
use crate::{ToolError, ToolRegistry};

/// The tools a turn's calls run with: the registry, the coach's rules it applies, and the
/// time a call may take when its tool does not say.
pub(super) struct Toolbox<'a> {
    pub(super) tools: &'a Arc<ToolRegistry>,
    pub(super) coach: &'a CoachConfig,
    pub(super) timeout: Option<Duration>,
}

/// Runs `calls` concurrently, one task each, emitting a `ToolResult` as each finishes;
/// the registry applies the coach's rules (`typed-strings`, `key-hint`), and each call
/// ends at its timeout. Returns the outcomes in call order (`None` for calls that did
/// not finish) and whether the run was cancelled.
pub(super) async fn execute_all(
    toolbox: Toolbox<'_>,
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
        let tools = Arc::clone(toolbox.tools);
        let call = call.clone();
        let coach = toolbox.coach.clone();
        let limit = (tools.get(&call.name).and_then(|t| t.timeout())).or(toolbox.timeout);
        let handle = set.spawn(async move {
            let run = tools.execute_coached(&call, &coach);
            within(limit, run).await
        });
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

/// `run`'s outcome, or a [`ToolError::TimedOut`] result when it takes longer than
/// `limit` (see the module docs for a runtime without timers).
async fn within(limit: Option<Duration>, run: impl Future<Output = ToolOutcome>) -> ToolOutcome {
    // Creating a timer panics in a runtime without one; that runtime gets no limit.
    let timer = limit.and_then(|limit| {
        std::panic::catch_unwind(|| tokio::time::sleep(limit))
            .ok()
            .map(|sleep| (limit, sleep))
    });
    let Some((limit, sleep)) = timer else {
        return run.await;
    };
    tokio::select! {
        outcome = run => outcome,
        () = sleep => ToolOutcome::error(ToolError::TimedOut(limit)),
    }
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
