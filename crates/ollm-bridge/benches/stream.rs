//! NDJSON stream decoding: the Ollama decoder (line splitting, parsing, event mapping)
//! against a floor that only parses each line with serde_json into a minimal borrowed
//! struct, on the same 100k-line `/api/chat` body served from memory in 8 KiB reads.
//!
//! Run with `cargo bench -p ollm-bridge --bench stream`; prints chunks per second for
//! both and their ratio (the target is at most 1.2).

#![allow(clippy::print_stdout, reason = "a benchmark reports on stdout")]
#![allow(missing_docs, reason = "a benchmark binary")]

use std::borrow::Cow;
use std::hint::black_box;
use std::time::{Duration, Instant};

use ollm_bridge::Decoder;
use ollm_bridge::ollama::NdjsonDecoder;
use serde::Deserialize;

const LINES: usize = 100_000;
const READ: usize = 8 * 1024;
const ROUNDS: usize = 15;

fn body() -> Vec<u8> {
    let words = [
        "The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
    ];
    let mut out = String::new();
    for i in 0..LINES {
        out.push_str(&format!(
            "{{\"model\":\"qwen3:8b\",\"created_at\":\"2025-05-01T12:00:{:02}.{:09}Z\",\"message\":{{\"role\":\"assistant\",\"content\":\"{}\"}},\"done\":false}}\n",
            i % 60,
            i,
            words[i % words.len()]
        ));
    }
    out.push_str("{\"model\":\"qwen3:8b\",\"created_at\":\"2025-05-01T12:01:00Z\",\"message\":{\"role\":\"assistant\",\"content\":\"\"},\"done\":true,\"done_reason\":\"stop\",\"total_duration\":1,\"load_duration\":1,\"prompt_eval_count\":10,\"prompt_eval_duration\":1,\"eval_count\":100000,\"eval_duration\":1}\n");
    out.into_bytes()
}

#[derive(Deserialize)]
struct MinLine<'a> {
    #[serde(borrow)]
    message: MinMessage<'a>,
    done: bool,
}

#[derive(Deserialize)]
struct MinMessage<'a> {
    #[serde(borrow)]
    content: Cow<'a, str>,
}

/// The floor: split the whole buffer on `\n` in place and parse each line.
fn baseline(body: &[u8]) -> usize {
    let mut n = 0;
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let parsed: MinLine<'_> = serde_json::from_slice(line).unwrap_or_else(|e| panic!("{e}"));
        black_box((&parsed.message.content, parsed.done));
        n += 1;
    }
    n
}

/// The decoder as the adapter runs it: 8 KiB reads, events mapped and drained per read.
fn decoder(body: &[u8]) -> usize {
    let mut d = NdjsonDecoder::default();
    let mut events = Vec::with_capacity(64);
    let mut n = 0;
    for chunk in body.chunks(READ) {
        d.push(chunk, &mut events);
        n += events.len();
        for e in events.drain(..) {
            black_box(e);
        }
    }
    d.finish(&mut events);
    n + events.len()
}

fn best(f: impl Fn() -> usize) -> (Duration, usize) {
    let mut best = Duration::MAX;
    let mut out = 0;
    for _ in 0..ROUNDS {
        let t = Instant::now();
        out = black_box(f());
        best = best.min(t.elapsed());
    }
    (best, out)
}

fn main() {
    let body = body();
    let chunks = (LINES + 1) as f64;
    // `cargo bench -- decoder` (or `baseline`) runs one side once, alone, for a profiler
    // or `valgrind --tool=callgrind` (instruction counts do not suffer from a busy machine
    // as times do).
    if std::env::args().any(|a| a == "decoder") {
        black_box(decoder(&body));
        return;
    }
    if std::env::args().any(|a| a == "baseline") {
        black_box(baseline(&body));
        return;
    }
    // Alternate the two, keeping each one's best, so both see the same machine state.
    let (mut floor, mut ours) = (Duration::MAX, Duration::MAX);
    let (mut lines, mut events) = (0, 0);
    for _ in 0..3 {
        let (f, l) = best(|| baseline(&body));
        let (o, e) = best(|| decoder(&body));
        (floor, lines) = (floor.min(f), l);
        (ours, events) = (ours.min(o), e);
    }
    assert_eq!(lines, LINES + 1);
    assert!(events >= LINES + 2, "events: {events}");
    let rate = |d: Duration| chunks / d.as_secs_f64();
    println!(
        "ndjson stream, {} chunks, {} MiB",
        LINES + 1,
        body.len() / (1024 * 1024)
    );
    println!(
        "  serde-only floor : {:>12.0} chunks/s ({floor:?})",
        rate(floor)
    );
    println!(
        "  ollama decoder   : {:>12.0} chunks/s ({ours:?})",
        rate(ours)
    );
    println!(
        "  ratio            : {:.2}x",
        ours.as_secs_f64() / floor.as_secs_f64()
    );
}
