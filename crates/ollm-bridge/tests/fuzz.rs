//! The long-running randomized check of the stream decoders (issue 12), run by
//! `cargo xtask fuzz`: the line splitter, the SSE framer, and both `Decoder`s (SSE and
//! NDJSON) over bodies built from real protocol fragments mixed with arbitrary bytes,
//! invalid UTF-8 and bare `\r`, under small caps so overlong lines and events are common.
//!
//! Properties: nothing panics; the same bytes cut at random points give the same lines,
//! events or errors (byte-split invariance); what a decoder holds stays under its cap;
//! a reply ends with exactly one `Finish` or `Error`, last.
//!
//! The tests are `#[ignore]`d so the ordinary test run stays fast (each module's own
//! property tests run there with few cases); `cargo xtask fuzz` runs them with
//! `PROPTEST_CASES` cases per round, repeating rounds with fresh seeds for `--minutes`.
#![allow(
    clippy::unwrap_used,
    reason = "a property test fails loudly on an unexpected value"
)]

use std::ops::ControlFlow;

use ollm_bridge::lines::LineSplitter;
use ollm_bridge::ollama::NdjsonDecoder;
use ollm_bridge::openai::{SseDecoder, SseEvent, SseFramer};
use ollm_bridge::{BridgeError, Decoder};
use ollm_types::ProviderEvent;
use proptest::prelude::*;
use test_utils::split::split_at;

/// Proptest's defaults (so `PROPTEST_CASES` sets the cases) without failure files: a
/// failure prints its shrunk input, which is what a regression test needs.
fn config() -> ProptestConfig {
    ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A body made of `pieces` and arbitrary bytes.
fn body(pieces: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        4 => proptest::sample::select(pieces).prop_map(|p| p.as_bytes().to_vec()),
        1 => proptest::collection::vec(any::<u8>(), 0..24),
        1 => "[a-zé\"{}:,\\[\\] ]{0,24}".prop_map(String::into_bytes),
        1 => prop_oneof![Just(b"\n".to_vec()), Just(b"\r".to_vec()), Just(b"\r\n".to_vec())],
    ];
    proptest::collection::vec(piece, 0..48).prop_map(|v| v.concat())
}

const SSE_PIECES: &[&str] = &[
    "data: ",
    "data:",
    "event: ",
    "event: error",
    "error: ",
    ": keep-alive",
    "id: 7",
    "retry: 10",
    "\n",
    "\n\n",
    "\r\n",
    "[DONE]",
    r#"{"choices":[{"index":0,"delta":{"content":"hi "}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"content":"<think>hm</think>ok"}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"reasoning_content":"so"}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"a\"}"}}]}}]}"#,
    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#,
    r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
    r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
    r#"{"error":{"message":"boom","type":"server_error"}}"#,
];

const NDJSON_PIECES: &[&str] = &[
    "\n",
    r#"{"model":"m","created_at":"2025-05-01T12:00:00Z","message":{"role":"assistant","content":"hi "},"done":false}"#,
    r#"{"model":"m","created_at":"2025-05-01T12:00:00Z","message":{"role":"assistant","content":"","thinking":"so"},"done":false}"#,
    r#"{"model":"m","created_at":"2025-05-01T12:00:00Z","message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"read_file","arguments":{"path":"a"}}}]},"done":false}"#,
    r#"{"model":"m","created_at":"2025-05-01T12:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":5,"eval_count":2}"#,
    r#"{"model":"m","created_at":"2025-05-01T12:00:01Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"length"}"#,
    r#"{"error":"boom"}"#,
    "{",
    "}",
];

/// Runs `decoder` over `chunks` and checks, after every push, that the reply has not
/// gone on past its end.
fn decode(mut decoder: impl Decoder, chunks: &[&[u8]]) -> Vec<ProviderEvent> {
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.push(chunk, &mut out);
    }
    decoder.finish(&mut out);
    assert!(decoder.is_ended(), "not ended after finish: {out:?}");
    out
}

/// Exactly one `Finish` or `Error`, and it is the last event.
fn ends_once(events: &[ProviderEvent]) -> Result<(), TestCaseError> {
    let ends = |e: &ProviderEvent| {
        matches!(
            e,
            ProviderEvent::Finish { .. } | ProviderEvent::Error { .. }
        )
    };
    prop_assert_eq!(events.iter().filter(|e| ends(e)).count(), 1, "{:?}", events);
    prop_assert!(events.last().is_some_and(ends), "{:?}", events);
    Ok(())
}

/// The lines (or the first error) of `chunks`, checking after each drained push that
/// the splitter holds no more than its cap.
fn split_lines(max: usize, chunks: &[&[u8]]) -> Result<Vec<Vec<u8>>, TestCaseError> {
    let mut splitter = LineSplitter::new(max);
    let mut out = Vec::new();
    for chunk in chunks {
        splitter.push(chunk);
        loop {
            match splitter.next_line() {
                Ok(Some(line)) => {
                    prop_assert!(line.len() <= max);
                    out.push(line.to_vec());
                }
                Ok(None) => break,
                Err(BridgeError::LineTooLong { limit }) => {
                    prop_assert_eq!(limit, max);
                    out.push(b"<too long>".to_vec());
                    return Ok(out);
                }
                Err(e) => return Err(TestCaseError::fail(format!("untyped: {e:?}"))),
            }
        }
        prop_assert!(splitter.pending() <= max, "{} held", splitter.pending());
    }
    out.extend(splitter.finish().map(<[u8]>::to_vec));
    Ok(out)
}

/// The events (owned) of `chunks`, or the error that ended them, checking after each
/// drained push that the framer holds less than three times its cap.
fn frame(max: usize, chunks: &[&[u8]]) -> Result<Vec<(Option<String>, String)>, TestCaseError> {
    let mut framer = SseFramer::new(max);
    let mut out = Vec::new();
    let mut longest = 0;
    let mut keep = |e: SseEvent<'_>| {
        longest = longest.max(e.data.len());
        out.push((e.event.map(str::to_owned), e.data.to_owned()));
        ControlFlow::Continue(())
    };
    // The error that ended the events, as an event, or `None` when none did.
    let ended = |result: Result<ControlFlow<()>, BridgeError>| match result {
        Ok(_) => Ok(None),
        Err(BridgeError::LineTooLong { .. } | BridgeError::EventTooLarge { .. }) => {
            Ok(Some("<too large>"))
        }
        Err(BridgeError::Decode { .. }) => Ok(Some("<not utf-8>")),
        Err(e) => Err(TestCaseError::fail(format!("untyped: {e:?}"))),
    };
    let mut end = None;
    for chunk in chunks {
        end = ended(framer.push(chunk, &mut keep))?;
        if end.is_some() {
            break;
        }
        prop_assert!(framer.pending() < 3 * max + 3, "{} held", framer.pending());
    }
    if end.is_none() {
        end = ended(framer.finish(&mut keep))?;
    }
    out.extend(end.map(|e| (None, e.to_owned())));
    prop_assert!(longest <= max, "an event of {longest} bytes");
    Ok(out)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    #[ignore = "long-running: cargo xtask fuzz"]
    fn fuzz_line_splitter(
        bytes in body(SSE_PIECES),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
        max in 1usize..96,
    ) {
        let whole = split_lines(max, &[&bytes])?;
        let split = split_lines(max, &split_at(&bytes, &cuts))?;
        prop_assert_eq!(split, whole);
    }

    #[test]
    #[ignore = "long-running: cargo xtask fuzz"]
    fn fuzz_sse_framer(
        bytes in body(SSE_PIECES),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
        max in 1usize..160,
    ) {
        let whole = frame(max, &[&bytes])?;
        let split = frame(max, &split_at(&bytes, &cuts))?;
        prop_assert_eq!(split, whole);
    }

    #[test]
    #[ignore = "long-running: cargo xtask fuzz"]
    fn fuzz_sse_decoder(
        bytes in body(SSE_PIECES),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
        max in 16usize..400,
    ) {
        let new = || {
            SseDecoder::with_max_line("c", max).with_tools(["read_file".to_owned()])
        };
        let whole = decode(new(), &[&bytes]);
        ends_once(&whole)?;
        let split = decode(new(), &split_at(&bytes, &cuts));
        prop_assert_eq!(split, whole);
    }

    #[test]
    #[ignore = "long-running: cargo xtask fuzz"]
    fn fuzz_ndjson_decoder(
        bytes in body(NDJSON_PIECES),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
        max in 16usize..400,
    ) {
        let new = || {
            NdjsonDecoder::new(None)
                .with_max_line(max)
                .with_id_prefix("c")
                .with_tools(["read_file".to_owned()])
        };
        let whole = decode(new(), &[&bytes]);
        ends_once(&whole)?;
        let split = decode(new(), &split_at(&bytes, &cuts));
        prop_assert_eq!(split, whole);
    }
}
