//! A running chat as the caller sees it ([`ChatRun`]), the task that supervises it, and
//! the [`Sink`] every event and every recorded message of the run goes through.
//!
//! # Decisions
//! - The run's task is spawned inside a second task, so a panic anywhere in the run
//!   becomes an `Error` event and a `Finish` instead of a silent end.
//! - The sink records what the run appends to the history as it appends it, so `Finish`
//!   can report exactly that (and nothing, after a failed first turn removed the prompt).

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use ollm_types::{
    FinishReason, Message, ProviderError, ProviderErrorKind, Usage, Warning, WarningKind,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::client::{Shared, lock};
use super::turn::run_chat;
use super::{ChatEvent, ChatOptions};
use crate::strategy::Shown;

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
    /// A run whose events arrive on `rx`; `start` spawns its task at once inside a Tokio
    /// runtime, or on first poll otherwise.
    pub(super) fn start(
        rx: mpsc::UnboundedReceiver<ChatEvent>,
        cancel: CancellationToken,
        start: DeferredStart,
    ) -> Self {
        let events = Box::pin(futures::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|e| (e, rx))
        }));
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
                deferred: Some(start),
            },
        }
    }

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
            added: Vec::new(),
        },
    ]
}

/// Runs one chat in its own task and turns a panic of that task into events.
pub(super) async fn supervise(
    shared: Arc<Shared>,
    prompt: String,
    options: ChatOptions,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<ChatEvent>,
) {
    let sink = Sink {
        tx,
        added: Arc::new(Mutex::new(Vec::new())),
    };
    let model = lock(&shared.config).model.clone();
    let span = tracing::info_span!("run", %model);
    let run = run_chat(shared, prompt, options, cancel, sink.clone()).instrument(span);
    let inner = tokio::spawn(run);
    if let Err(e) = inner.await {
        let message = if e.is_panic() {
            "internal error: the chat run panicked"
        } else {
            "internal error: the chat run was aborted"
        };
        sink.error(ProviderErrorKind::Other, message);
        sink.finish(FinishReason::Error, Usage::default());
    }
}

/// Where a run's events go, and what it added to the history.
#[derive(Clone)]
pub(super) struct Sink {
    tx: mpsc::UnboundedSender<ChatEvent>,
    /// The messages this run appended to the history, reported on `Finish`.
    added: Arc<Mutex<Vec<Message>>>,
}

impl Sink {
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
        lock(&self.added).extend(messages);
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

    /// Sends the last event.
    pub(super) fn finish(&self, reason: FinishReason, usage: Usage) {
        let added = std::mem::take(&mut *lock(&self.added));
        self.send(ChatEvent::Finish {
            reason,
            usage,
            added,
        });
    }
}
