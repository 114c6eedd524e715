//! What a run shares with its client ([`Shared`], read through [`lock`]) and where its
//! events and recorded messages go ([`Sink`]).
//!
//! # Decisions
//! - A leaf of the chat module: the client, the run's task, the turn loop, the budget step
//!   and the calls all use these, and this imports none of them (issue 26: these types
//!   used to live in `client.rs` and `run.rs`, which made the chat module a knot of import
//!   circles).
//! - The sink records what the run appends to the history as it appends it, so `Finish`
//!   can report exactly that (and nothing, after a failed first turn removed the prompt).
//! - What the coach says is recorded apart ([`Sink::coach`]) and taken back out of the
//!   history when the run ends ([`Sink::finish`]): it belongs to the run that needed it
//!   (`crate::coach`). The run's messages are the history's end, so they are matched
//!   from the end; where a compaction in the run summarised some of them the walk stops,
//!   and a nudge inside the summary stays there, as words of the summary.
//! - A poisoned lock is taken over: a panic in one run (which becomes an `Error` event)
//!   must not make the client unusable.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::FutureExt;
use ollm_types::{
    FinishReason, Message, ModelInfo, ProviderError, ProviderErrorKind, Usage, Warning, WarningKind,
};
use tokio::sync::mpsc;

use super::config::ChatConfig;
use super::event::ChatEvent;
use crate::coach::{Route, Rule};
use crate::context::calibrate::Calibration;
use crate::context::{Compactor, ModelSummary};
use crate::strategy::{Learned, Shown};
use crate::{History, ProviderAdapter, ToolRegistry};

/// What a run shares with the client.
pub(super) struct Shared {
    pub(super) provider: Arc<dyn ProviderAdapter>,
    pub(super) tools: Mutex<Arc<ToolRegistry>>,
    pub(super) config: Mutex<ChatConfig>,
    pub(super) history: Mutex<History>,
    model_info: Mutex<HashMap<String, Option<ModelInfo>>>,
    /// What runs learned about each model's tool calling (`Auto` goes by it).
    pub(super) learned: Mutex<HashMap<String, Learned>>,
    /// Models the server refused `think` for.
    pub(super) no_think: Mutex<HashSet<String>>,
    pub(super) run_lock: tokio::sync::Mutex<()>,
    /// Writes the summaries compaction needs.
    pub(super) compactor: Mutex<Arc<dyn Compactor>>,
    /// What the server's prompt counts taught about the template's overhead.
    pub(super) calibration: Mutex<Calibration>,
    /// The `tool-or-none` choice of the latest run that made or was given one.
    pub(super) route: Mutex<Option<Route>>,
    next_id: AtomicU64,
}

/// Locks `m`, taking over a lock a panicking run poisoned.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// What a new client shares with its runs; the history starts with the configured
    /// system prompt.
    pub(super) fn new(
        provider: Arc<dyn ProviderAdapter>,
        tools: ToolRegistry,
        config: ChatConfig,
    ) -> Self {
        let mut history = History::new();
        history.set_system(config.system.clone());
        Shared {
            provider,
            tools: Mutex::new(Arc::new(tools)),
            config: Mutex::new(config),
            history: Mutex::new(history),
            model_info: Mutex::new(HashMap::new()),
            learned: Mutex::new(HashMap::new()),
            no_think: Mutex::new(HashSet::new()),
            run_lock: tokio::sync::Mutex::new(()),
            compactor: Mutex::new(Arc::new(ModelSummary)),
            calibration: Mutex::new(Calibration::default()),
            route: Mutex::new(None),
            next_id: AtomicU64::new(1),
        }
    }

    /// A fresh call id, for calls that came without a usable one.
    pub(super) fn mint_id(&self) -> String {
        format!("call_{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// What the server reports about `model`, cached per client (see the module docs of
    /// [`crate::chat`] for what is cached).
    pub(super) async fn model_info(&self, model: &str) -> Option<ModelInfo> {
        if let Some(cached) = lock(&self.model_info).get(model) {
            return cached.clone();
        }
        let asked = std::panic::AssertUnwindSafe(self.provider.show_model(model))
            .catch_unwind()
            .await;
        let info = match asked {
            Ok(Ok(info)) => Some(info),
            // A passing failure (server down, busy) is not remembered: the next run asks
            // again.
            Ok(Err(e)) if e.kind != ProviderErrorKind::Unsupported => return None,
            _ => None,
        };
        lock(&self.model_info).insert(model.to_owned(), info.clone());
        info
    }
}

/// Where a run's events go, and what it added to the history.
#[derive(Clone)]
pub(super) struct Sink {
    tx: mpsc::UnboundedSender<ChatEvent>,
    /// The messages this run appended to the history, in order, each marked `true` when
    /// the coach said it; the others are reported on `Finish`.
    added: Arc<Mutex<Vec<(Message, bool)>>>,
}

impl Sink {
    /// A sink sending to `tx` that has recorded nothing yet.
    pub(super) fn new(tx: mpsc::UnboundedSender<ChatEvent>) -> Self {
        Sink {
            tx,
            added: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub(super) fn send(&self, event: ChatEvent) {
        // A closed channel means the run was dropped, which also cancelled it.
        let _ = self.tx.send(event);
    }

    pub(super) fn shown(&self, shown: Vec<Shown>) {
        for s in shown {
            self.send(match s {
                Shown::Text(text) => ChatEvent::TextDelta { text },
                Shown::Thinking(text) => ChatEvent::ThinkingDelta { text },
            });
        }
    }

    pub(super) fn warn(&self, kind: WarningKind, message: impl Into<String>) {
        self.send(ChatEvent::Warning {
            warning: Warning::new(kind, message),
        });
    }

    pub(super) fn error(&self, kind: ProviderErrorKind, message: impl Into<String>) {
        self.send(ChatEvent::Error {
            error: ProviderError::new(kind, message),
        });
    }

    /// Appends `messages` to the history and remembers them as added by this run.
    pub(super) fn record(&self, shared: &Shared, messages: Vec<Message>) {
        lock(&shared.history).extend(messages.iter().cloned());
        lock(&self.added).extend(messages.into_iter().map(|m| (m, false)));
    }

    /// Appends what the coach says (`message`, for `rule`) to the history for the rest
    /// of the run (see the module docs), and tells the caller with a `Coached` event.
    pub(super) fn coach(&self, shared: &Shared, message: Message, rule: Rule) {
        self.send(ChatEvent::Coached {
            rule,
            call_id: None,
            detail: format!("told the model: {}", message.text()),
        });
        lock(&shared.history).push(message.clone());
        lock(&self.added).push((message, true));
    }

    /// Tells the caller that the coach acted (a `Coached` event), and, when it has
    /// something to `warn` about, sends the `Repetition` warning after it.
    pub(super) fn coached(&self, rule: Rule, call_id: Option<&str>, detail: String, warn: bool) {
        self.send(ChatEvent::Coached {
            rule,
            call_id: call_id.map(str::to_owned),
            detail: detail.clone(),
        });
        if warn {
            self.warn(WarningKind::Repetition, detail);
        }
    }

    /// Removes everything this run added, which is at the end of the history (a
    /// compaction keeps the newest turn, so this holds after one too).
    pub(super) fn unrecord(&self, shared: &Shared) {
        let mut added = lock(&self.added);
        let mut history = lock(&shared.history);
        let len = history.len().saturating_sub(added.len());
        history.truncate(len);
        added.clear();
    }

    /// Takes what the coach said out of the history, then sends the last event with
    /// what the run added.
    pub(super) fn finish(&self, shared: &Shared, reason: FinishReason, usage: Usage) {
        let added = std::mem::take(&mut *lock(&self.added));
        forget_coached(&mut lock(&shared.history), &added);
        let added = added
            .into_iter()
            .filter(|(_, coached)| !coached)
            .map(|(m, _)| m)
            .collect();
        self.send(ChatEvent::Finish {
            reason,
            usage,
            added,
        });
    }
}

/// Removes from the end of `history` the messages of `added` the coach said, walking
/// both from the end while they match (see the module docs).
fn forget_coached(history: &mut History, added: &[(Message, bool)]) {
    let mut at = history.len();
    for (message, coached) in added.iter().rev() {
        if at == 0 || history.get(at - 1) != Some(message) {
            return;
        }
        at -= 1;
        if *coached {
            history.splice(at..at + 1, Vec::new());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is left of `history` after a run that added `added` (`true`: the coach said
    /// it) ends.
    fn check(history: &[&str], added: &[(&str, bool)], expected: &[&str]) {
        let mut h = History::new();
        h.extend(history.iter().map(|t| Message::user(*t)));
        let added: Vec<(Message, bool)> = added
            .iter()
            .map(|(t, coached)| (Message::user(*t), *coached))
            .collect();
        forget_coached(&mut h, &added);
        let left: Vec<String> = h.messages().iter().map(Message::text).collect();
        assert_eq!(left, expected, "{history:?} after {added:?}");
    }

    #[test]
    fn what_the_coach_said_leaves_with_the_run() {
        let run = [
            ("q", false),
            ("call", false),
            ("nudge", true),
            ("answer", false),
        ];
        check(
            &["q", "call", "nudge", "answer"],
            &run,
            &["q", "call", "answer"],
        );
        // The same words typed by the user in an earlier run stay.
        check(
            &["nudge", "a0", "q", "call", "nudge", "answer"],
            &run,
            &["nudge", "a0", "q", "call", "answer"],
        );
        // A compaction in the run summarised its start: the nudge after it still goes.
        check(
            &["q0", "summary", "nudge", "answer"],
            &run,
            &["q0", "summary", "answer"],
        );
        // It summarised the nudge too: it is words of the summary now, and nothing of
        // the history before the summary is touched.
        let summarised = ["nudge", "summary", "answer"];
        check(&summarised, &run, &summarised);
        check(&["q"], &[("q", false)], &["q"]);
    }
}
