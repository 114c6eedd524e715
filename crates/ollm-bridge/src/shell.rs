//! The one adapter shell: send a chat request, retry before any output, feed the body to
//! the adapter's [`Decoder`], and map every failure through the adapter's [`Hints`].
//!
//! Both adapters go through [`exchange`]; only their decoder and their hints differ, so a
//! rule about the stream (what a broken body means, when to stop reading) is written once.
//!
//! # Decisions
//! - Retries happen only before the response: [`crate::retrying::Attempts`] surfaces each as a
//!   `Warning` event. Once the body is read, nothing is retried.
//! - A transport failure goes through [`Hints::transport`] (the adapter's hints: "is the
//!   server running?", "pull the model"); an error the server wrote into the body goes
//!   through [`Hints::in_stream`], so both get the same refinement.
//! - A body that breaks after output keeps the delivered output and says it is partial
//!   ([`partial`]); an idle timeout stays a `Timeout` (the documented exit code 3), any
//!   other break becomes `IncompleteStream`.
//! - The raw stream is logged at `trace`: each chunk of the body as received, and each
//!   event decoded from it (the request itself is logged by the transport at `debug`).

use std::borrow::Cow;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use ollm_core::ProviderStream;
use ollm_types::{ProviderError, ProviderErrorKind, ProviderEvent};

use crate::retrying::retry_warning;
use crate::{Attempt, BodyChunks, BridgeError, RequestSpec, Transport};

/// The incremental decoder of one protocol's streamed reply (bytes to events, pure).
///
/// Every decoder keeps the stream contract: the events end with exactly one `Finish` or
/// `Error`, and nothing follows.
pub trait Decoder: Send + 'static {
    /// Decodes a chunk of the body (cut anywhere), appending events to `out`.
    fn push(&mut self, chunk: &[u8], out: &mut Vec<ProviderEvent>);
    /// The body ended: decodes what is left and closes the reply.
    fn finish(&mut self, out: &mut Vec<ProviderEvent>);
    /// The body broke with `error` (already mapped by the adapter): ends the reply with
    /// it, saying the output already delivered is partial when there was some (an idle
    /// timeout stays a `Timeout`, any other break becomes an `IncompleteStream`).
    fn fail(&mut self, error: ProviderError, out: &mut Vec<ProviderEvent>);
    /// Whether the final event (`Finish` or `Error`) was produced.
    fn is_ended(&self) -> bool;
}

/// How one adapter words its errors.
pub(crate) trait Hints: Send + 'static {
    /// A transport failure, as the neutral error with this server's hints.
    fn transport(&self, error: BridgeError) -> ProviderError;
    /// An error the decoder produced (the server's own words in the body, or a protocol
    /// failure), refined the same way.
    fn in_stream(&self, error: ProviderError) -> ProviderError {
        error
    }
}

/// `error` after `delivered` output: an idle timeout stays a `Timeout`, anything else is
/// an `IncompleteStream`; the message says the output already delivered is partial.
pub(crate) fn partial(mut error: ProviderError, delivered: &str) -> ProviderError {
    if error.kind != ProviderErrorKind::Timeout {
        error.kind = ProviderErrorKind::IncompleteStream;
        error.status = None;
    }
    error.retryable = false;
    error.message = format!(
        "the reply stopped before its end ({}); {delivered} already delivered are partial",
        error.message
    );
    error
}

/// Appends answer text to `out`: onto the last event when that is answer text too, so the
/// pieces one read of the body brings are delivered as one event.
pub(crate) fn push_text(out: &mut Vec<ProviderEvent>, text: Cow<'_, str>) {
    match out.last_mut() {
        Some(ProviderEvent::TextDelta { text: last }) => append(last, &text),
        _ => out.push(ProviderEvent::TextDelta {
            text: text.into_owned(),
        }),
    }
}

/// Appends reasoning text to `out`, joined with the last event like [`push_text`].
pub(crate) fn push_thinking(out: &mut Vec<ProviderEvent>, text: Cow<'_, str>) {
    match out.last_mut() {
        Some(ProviderEvent::ThinkingDelta { text: last }) => append(last, &text),
        _ => out.push(ProviderEvent::ThinkingDelta {
            text: text.into_owned(),
        }),
    }
}

/// The least room a text event gets once a second piece joins it.
const JOINED_ROOM: usize = 512;

/// Joins `text` to an event's text. A read that brings two pieces usually brings
/// hundreds (a fast stream read 64 KiB at a time): the event grows to at least
/// [`JOINED_ROOM`] bytes and then fourfold, not by doubling from the first piece's few
/// bytes, which cost each such read about ten reallocations (issue 28). A read of one
/// piece, the usual case of a stream read token by token, keeps its exact allocation.
#[inline]
fn append(last: &mut String, text: &str) {
    if last.capacity() - last.len() < text.len() {
        last.reserve((last.len() * 3).max(JOINED_ROOM).max(text.len()));
    }
    last.push_str(text);
}

/// One chat exchange, ready to send: the request, the decoder of its reply and the
/// adapter's hints. (Until issue 26 an `on_end` hook let the Ollama adapter learn a token
/// ratio from the decoder; token cost is core's alone now.)
pub(crate) struct Exchange<D, H> {
    pub(crate) spec: RequestSpec,
    pub(crate) decoder: D,
    pub(crate) hints: H,
}

/// Sends the exchange through `transport` and streams the decoded reply.
pub(crate) fn exchange<D, H>(transport: Transport, exchange: Exchange<D, H>) -> ProviderStream
where
    D: Decoder + Unpin,
    H: Hints + Unpin,
{
    exchange_after(transport, std::future::ready(Ok(exchange)))
}

/// [`exchange`] once `prepare` has built the exchange; a preparation that fails is the
/// stream's one `Error` event.
pub(crate) fn exchange_after<D, H, F>(transport: Transport, prepare: F) -> ProviderStream
where
    D: Decoder + Unpin,
    H: Hints + Unpin,
    F: Future<Output = Result<Exchange<D, H>, ProviderError>> + Send + 'static,
{
    Box::pin(Chat {
        transport,
        phase: Phase::Preparing(Box::pin(prepare)),
        queue: Vec::new(),
    })
}

/// The stream of one exchange: a hand-written state machine, so that an event costs a
/// pop from the queue and a body chunk one poll and one decode (generators added a
/// resume and a thread-local hand-off per event).
struct Chat<D, H> {
    transport: Transport,
    phase: Phase<D, H>,
    /// Events decoded and not yet handed out, last first (handed out by `pop`).
    queue: Vec<ProviderEvent>,
}

type Prepare<D, H> = Pin<Box<dyn Future<Output = Result<Exchange<D, H>, ProviderError>> + Send>>;

enum Phase<D, H> {
    Preparing(Prepare<D, H>),
    Sending {
        attempts: BoxStream<'static, Attempt>,
        reply: Reply<D, H>,
    },
    Reading {
        body: BodyChunks,
        reply: Reply<D, H>,
    },
    Ended,
}

struct Reply<D, H> {
    decoder: D,
    hints: H,
}

impl<D, H> Chat<D, H>
where
    D: Decoder + Unpin,
    H: Hints + Unpin,
{
    /// Moves the exchange on by one step before the body (preparing, sending, retrying),
    /// queueing what it produced; `Pending` when it waits on the network. Out of line
    /// and cold: it runs a few times per reply, the body's step once per read.
    #[cold]
    #[inline(never)]
    fn start(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match &mut self.phase {
            Phase::Preparing(prepare) => match ready!(prepare.as_mut().poll(cx)) {
                Ok(Exchange {
                    spec,
                    decoder,
                    hints,
                }) => {
                    let attempts = self.transport.send_retrying(spec);
                    let reply = Reply { decoder, hints };
                    self.phase = Phase::Sending { attempts, reply };
                }
                Err(error) => self.end_with(error),
            },
            Phase::Sending { attempts, reply } => match ready!(attempts.poll_next_unpin(cx)) {
                Some(Attempt::Retrying {
                    retry,
                    delay,
                    error,
                }) => {
                    let warning = retry_warning(retry, delay, &error);
                    self.queue.push(ProviderEvent::Warning { warning });
                }
                Some(Attempt::Response(response)) => {
                    let body = self.transport.body_chunks(response);
                    let Phase::Sending { reply, .. } =
                        std::mem::replace(&mut self.phase, Phase::Ended)
                    else {
                        unreachable!("the phase was just matched")
                    };
                    self.phase = Phase::Reading { body, reply };
                }
                Some(Attempt::Failed(error)) => {
                    let error = reply.hints.transport(error);
                    self.end_with(error);
                }
                None => {
                    let error = reply.hints.transport(BridgeError::Incomplete {
                        message: "no attempt was made".into(),
                    });
                    self.end_with(error);
                }
            },
            Phase::Reading { .. } | Phase::Ended => {}
        }
        Poll::Ready(())
    }

    /// The reply has ended (its last event is in the queue, first): refines a final
    /// error through the hints and lets the connection go back at once (even if the
    /// consumer stops at the final event).
    #[cold]
    #[inline(never)]
    fn ended(&mut self) {
        let Phase::Reading { reply, .. } = std::mem::replace(&mut self.phase, Phase::Ended) else {
            return;
        };
        // Errors end a reply: only the last event (first in the reversed queue) can be one.
        if let Some(ProviderEvent::Error { error }) = self.queue.first_mut() {
            let placeholder = ProviderError::new(ProviderErrorKind::Other, "");
            let taken = std::mem::replace(error, placeholder);
            *error = reply.hints.in_stream(taken);
        }
    }

    fn end_with(&mut self, error: ProviderError) {
        self.queue.push(ProviderEvent::Error { error });
        self.phase = Phase::Ended;
    }
}

/// Logs a chunk of the body as received (out of line: the hot loop only checks the level).
#[cold]
#[inline(never)]
fn trace_raw(chunk: &[u8]) {
    tracing::trace!(chunk = %String::from_utf8_lossy(chunk), "raw");
}

/// The body ended (`None`) or broke: the decoder closes the reply.
#[cold]
#[inline(never)]
fn end_of_body<D: Decoder, H: Hints>(
    reply: &mut Reply<D, H>,
    last: Option<Result<bytes::Bytes, BridgeError>>,
    out: &mut Vec<ProviderEvent>,
) {
    match last {
        Some(Ok(chunk)) => reply.decoder.push(&chunk, out),
        Some(Err(error)) => reply.decoder.fail(reply.hints.transport(error), out),
        None => reply.decoder.finish(out),
    }
}

impl<D, H> Stream for Chat<D, H>
where
    D: Decoder + Unpin,
    H: Hints + Unpin,
{
    type Item = ProviderEvent;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ProviderEvent>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.queue.pop() {
                tracing::trace!(?event, "decoded");
                return Poll::Ready(Some(event));
            }
            let Phase::Reading { body, reply } = &mut this.phase else {
                if matches!(this.phase, Phase::Ended) {
                    return Poll::Ready(None);
                }
                ready!(this.start(cx));
                continue;
            };
            // The queue is empty: decode the next read into it, then hand it out from
            // the end.
            let out = &mut this.queue;
            match ready!(body.poll_next_unpin(cx)) {
                Some(Ok(chunk)) => {
                    if tracing::enabled!(tracing::Level::TRACE) {
                        trace_raw(&chunk);
                    }
                    reply.decoder.push(&chunk, out);
                }
                last => end_of_body(reply, last, out),
            }
            out.reverse();
            if reply.decoder.is_ended() {
                this.ended();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_text_keeps_its_order_and_grows_in_few_steps_within_bounded_room() {
        let mut out = Vec::new();
        push_text(&mut out, Cow::Borrowed("one"));
        let ProviderEvent::TextDelta { text } = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(
            text.capacity(),
            3,
            "a one-piece read keeps its exact allocation"
        );
        let mut expected = String::from("one");
        let mut growths = 0;
        for i in 0..400 {
            let piece = format!(" piece {i}");
            expected.push_str(&piece);
            let before = match &out[0] {
                ProviderEvent::TextDelta { text } => text.capacity(),
                other => panic!("{other:?}"),
            };
            push_text(&mut out, Cow::Owned(piece));
            let ProviderEvent::TextDelta { text } = &out[0] else {
                panic!("{out:?}")
            };
            growths += usize::from(text.capacity() != before);
            assert!(
                text.capacity() <= 4 * text.len() + JOINED_ROOM,
                "{}",
                text.len()
            );
        }
        assert_eq!(out, vec![ProviderEvent::TextDelta { text: expected }]);
        // 3.8 KB from 3 bytes: doubling took 11 reallocations.
        assert!(growths <= 4, "{growths} reallocations");
        push_thinking(&mut out, Cow::Borrowed("hm"));
        push_text(&mut out, Cow::Borrowed("after"));
        assert_eq!(out.len(), 3, "text after reasoning is a new event");
    }

    #[test]
    fn a_break_after_output_is_partial_but_a_timeout_stays_a_timeout() {
        let check = |kind, want| {
            let error = partial(ProviderError::new(kind, "why"), "the text");
            assert_eq!(error.kind, want, "{kind:?}");
            assert!(error.message.contains("why"), "{}", error.message);
            assert!(
                error
                    .message
                    .contains("the text already delivered are partial")
            );
        };
        check(ProviderErrorKind::Timeout, ProviderErrorKind::Timeout);
        check(
            ProviderErrorKind::Connection,
            ProviderErrorKind::IncompleteStream,
        );
        check(
            ProviderErrorKind::Server,
            ProviderErrorKind::IncompleteStream,
        );
    }
}
