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

use futures::StreamExt;
use ollm_core::ProviderStream;
use ollm_types::{ProviderError, ProviderErrorKind, ProviderEvent};

use crate::retrying::{Attempts, Step};
use crate::{BridgeError, RequestSpec, Transport};

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

/// Sends `spec` through `transport` and streams the decoded reply. `on_end` sees the
/// decoder once the reply has ended (Ollama learns its token ratio there).
pub(crate) fn exchange<D, H, E>(
    transport: Transport,
    spec: RequestSpec,
    mut decoder: D,
    hints: H,
    on_end: E,
) -> ProviderStream
where
    D: Decoder,
    H: Hints,
    E: FnOnce(&D) + Send + 'static,
{
    Box::pin(async_stream::stream! {
        let mut attempts = Attempts::new(&transport, spec);
        let response = loop {
            match attempts.next().await {
                Step::Retrying(warning) => yield ProviderEvent::Warning { warning },
                Step::Response(response) => break response,
                Step::Failed(error) => {
                    yield ProviderEvent::Error { error: hints.transport(error) };
                    return;
                }
            }
        };
        drop(attempts);
        let mut chunks = transport.body_chunks(response);
        let mut out = Vec::new();
        while !decoder.is_ended() {
            match chunks.next().await {
                Some(Ok(chunk)) => {
                    tracing::trace!(chunk = %String::from_utf8_lossy(&chunk), "raw");
                    decoder.push(&chunk, &mut out);
                }
                Some(Err(error)) => decoder.fail(hints.transport(error), &mut out),
                None => decoder.finish(&mut out),
            }
            for event in out.drain(..) {
                tracing::trace!(?event, "decoded");
                yield match event {
                    ProviderEvent::Error { error } => {
                        ProviderEvent::Error { error: hints.in_stream(error) }
                    }
                    other => other,
                };
            }
        }
        drop(chunks);
        on_end(&decoder);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
