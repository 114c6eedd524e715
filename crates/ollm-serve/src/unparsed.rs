//! Ollama's HTTP 500 for a tool call it could not parse (`error parsing tool call:
//! raw='…', err=…`), mended on the way to the turn loop ([`mended`]).
//!
//! # Decisions
//! - **Ollama fails the whole turn when its own tool parser fails**: the model wrote a
//!   call, Ollama's parser (`json.Unmarshal` of the call's text) refused it, and the
//!   client gets a 500 before the stream opens (ollama#12884: about 1 in 4 gpt-oss
//!   requests with multi-line arguments; ollama#17638: 2 in 5 with one free-form string
//!   argument). Nothing has reached the client yet, so serve can still answer.
//! - **A raw text that names a call is read as the reply's text** (`{"name": …,
//!   "arguments": …}`, `<tool_call>` markup): the turn loop then recovers the call as it
//!   recovers any call written as text (core's `recover`, which also mends one missing
//!   closing brace), and it is marked `recovered` like any other (`provenance.rs`).
//! - **Any other raw text gets one clean retry** of the same request: with gpt-oss the
//!   raw text is the arguments alone, or analysis prose before them, and the tool's name
//!   is not in the error, so the text cannot be read as a call; the failure is not
//!   deterministic (sampling), so asking again usually passes. A second failure is the
//!   client's error, as before: serve does not loop on an upstream that keeps failing.

use futures::StreamExt;
use ollm_core::ProviderStream;
use ollm_types::{FinishReason, ProviderError, ProviderEvent};

/// How Ollama's message begins, and where its raw text ends.
const PREFIX: &str = "error parsing tool call: raw='";
const SUFFIX: &str = "', err=";

/// The raw text of Ollama's tool-call parse error, if `error` is one.
fn raw_text(error: &ProviderError) -> Option<&str> {
    if error.status != Some(500) {
        return None;
    }
    let rest = error.message.strip_prefix(PREFIX)?;
    Some(rest.rsplit_once(SUFFIX).map_or(rest, |(raw, _)| raw))
}

/// Whether `raw` names its call (so the turn loop can read it as one).
fn names_a_call(raw: &str) -> bool {
    raw.contains("<tool_call>")
        || (raw.contains("\"name\"")
            && (raw.contains("\"arguments\"") || raw.contains("\"parameters\"")))
}

/// `first`, with Ollama's parse error mended (see the module docs): as its raw text when
/// that names a call, else by `again`, asked once.
pub(crate) fn mended(
    mut first: ProviderStream,
    again: impl FnOnce() -> ProviderStream + Send + 'static,
) -> ProviderStream {
    Box::pin(async_stream::stream! {
        let Some(event) = first.next().await else {
            return;
        };
        let raw = match &event {
            ProviderEvent::Error { error } => raw_text(error).map(str::to_owned),
            _ => None,
        };
        match raw {
            None => {
                yield event;
                while let Some(event) = first.next().await {
                    yield event;
                }
            }
            Some(text) if names_a_call(&text) => {
                tracing::warn!("serve: the upstream could not parse its tool call; reading it from the raw text");
                yield ProviderEvent::TextDelta { text };
                yield ProviderEvent::Finish { reason: FinishReason::Stop };
            }
            Some(_) => {
                tracing::warn!("serve: the upstream could not parse its tool call; asking once more");
                let mut again = again();
                while let Some(event) = again.next().await {
                    yield event;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use ollm_types::ProviderErrorKind;

    use super::*;

    #[test]
    fn the_raw_text_is_read_from_ollamas_message_only() {
        let error = |status: u16, message: &str| {
            let mut e = ProviderError::new(ProviderErrorKind::Server, message);
            e.status = Some(status);
            e
        };
        let check = |status: u16, message: &str, want: Option<&str>| {
            assert_eq!(raw_text(&error(status, message)), want, "{message}");
        };
        check(
            500,
            "error parsing tool call: raw='{\"path\":\"a', b\"}', err=unexpected end of JSON input",
            Some("{\"path\":\"a', b\"}"),
        );
        check(500, "error parsing tool call: raw='x", Some("x"));
        check(400, "error parsing tool call: raw='x', err=y", None);
        check(500, "model runner has unexpectedly stopped", None);
        assert!(names_a_call("{\"name\": \"f\", \"arguments\": {\"a\": 1}"));
        assert!(names_a_call("<tool_call>{\"name\": \"f\"}</tool_call>"));
        assert!(!names_a_call(
            "We need to read it. {\"path\": \"notes.txt\"}"
        ));
    }
}
