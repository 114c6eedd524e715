//! Issue 12's flood: 100 MB of a body that never ends its event (SSE `data:` lines with no
//! blank line between them) or its line (NDJSON without a newline) goes through each
//! decoder, and the memory the process allocates stays bounded while the reply ends with
//! a typed error. A binary of its own, because it measures the process's resident memory
//! (the peak, `VmHWM`, reset through `/proc/self/clear_refs` before each flood; Linux
//! only; no timing is measured).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    reason = "test helpers fail the test loudly on setup errors; the measured peak is printed"
)]

use std::sync::Mutex;

use ollm_bridge::Decoder;
use ollm_bridge::lines::DEFAULT_MAX_LINE;
use ollm_bridge::ollama::NdjsonDecoder;
use ollm_bridge::openai::SseDecoder;
use ollm_types::{ProviderErrorKind, ProviderEvent};

/// A field of `/proc/self/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap();
    let kib: usize = line.trim().trim_end_matches("kB").trim().parse().unwrap();
    kib * 1024
}

/// The tests of this binary measure one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const FLOOD: usize = 100 * 1024 * 1024;

/// Pushes `FLOOD` bytes made of `piece` repeated (after `head`) through `decoder`, and
/// returns the events and the peak resident bytes above those resident before.
fn flood(mut decoder: impl Decoder, head: &[u8], piece: &[u8]) -> (Vec<ProviderEvent>, usize) {
    let chunk: Vec<u8> = piece.iter().copied().cycle().take(64 * 1024).collect();
    let mut events = Vec::new();
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let base = status_bytes("VmRSS");
    decoder.push(head, &mut events);
    let mut sent = head.len();
    while sent < FLOOD {
        decoder.push(&chunk, &mut events);
        sent += chunk.len();
    }
    decoder.finish(&mut events);
    (events, status_bytes("VmHWM").saturating_sub(base))
}

fn check(events: &[ProviderEvent], peak: usize) {
    match events.last() {
        Some(ProviderEvent::Error { error }) => {
            assert_eq!(error.kind, ProviderErrorKind::Protocol, "{error:?}")
        }
        other => panic!("expected a typed error, got {other:?}"),
    }
    // The cap (16 MiB) plus the growth of one buffer to it; 100 MB held would be far more.
    assert!(
        peak <= 3 * DEFAULT_MAX_LINE,
        "peak {peak} bytes for a {FLOOD}-byte flood"
    );
    println!("peak resident growth: {:.1} MiB", peak as f64 / 1048576.0);
}

#[test]
fn an_sse_event_that_never_ends_is_refused_with_bounded_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let line = format!("data: {}\n", "x".repeat(1017));
    let (events, peak) = flood(SseDecoder::with_id_prefix("m"), b"", line.as_bytes());
    check(&events, peak);
}

#[test]
fn an_ndjson_line_that_never_ends_is_refused_with_bounded_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (events, peak) = flood(NdjsonDecoder::new(None), b"{\"message\":\"", b"y");
    check(&events, peak);
}
