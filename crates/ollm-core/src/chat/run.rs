//! A running chat as the caller sees it ([`ChatRun`]) and the task that supervises it.
//!
//! # Decisions
//! - The run's task is spawned inside a second task, so a panic anywhere in the run
//!   becomes an `Error` event and a `Finish` instead of a silent end.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use ollm_types::{FinishReason, ProviderError, ProviderErrorKind, Usage};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::config::ChatOptions;
use super::event::ChatEvent;
use super::shared::{Shared, Sink, lock};
use super::turn::run_chat;

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
    prompt: Option<String>,
    options: ChatOptions,
    cancel: CancellationToken,
    tx: mpsc::UnboundedSender<ChatEvent>,
) {
    let sink = Sink::new(tx);
    let model = (options.model.clone()).unwrap_or_else(|| lock(&shared.config).model.clone());
    let span = tracing::info_span!("run", %model);
    let run = run_chat(Arc::clone(&shared), prompt, options, cancel, sink.clone()).instrument(span);
    let inner = tokio::spawn(run);
    if let Err(e) = inner.await {
        let message = if e.is_panic() {
            "internal error: the chat run panicked"
        } else {
            "internal error: the chat run was aborted"
        };
        sink.error(ProviderErrorKind::Other, message);
        sink.finish(&shared, FinishReason::Error, Usage::default());
    }
}
