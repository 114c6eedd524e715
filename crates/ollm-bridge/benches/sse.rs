//! SSE decoding and tool-call assembly of a large in-memory stream, next to a serde-only
//! baseline in the same run.
//!
//! The stream is vLLM-shaped: thousands of content chunks with the usual metadata, then
//! two tool calls streamed as many id-less argument fragments, a finish and a usage chunk.
//! The baseline is the least any decoder must do: find each `data:` line and parse it into
//! a minimal borrowed struct. The ratio (ollm / baseline) is what the event stream costs on
//! top: SSE framing across arbitrary chunk cuts, the `<think>` splitter, tool-call
//! assembly, and owned events.
//!
//! Run with `cargo bench -p ollm-bridge --bench sse`.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    reason = "a benchmark binary reports on stdout and fails loudly"
)]

use std::borrow::Cow;
use std::hint::black_box;
use std::time::{Duration, Instant};

use ollm_bridge::Decoder;
use ollm_bridge::openai::{SseDecoder, decode_all};
use ollm_types::ProviderEvent;
use serde::Deserialize;
use serde_json::json;

fn stream() -> Vec<u8> {
    let mut body = String::new();
    let base = |choices: serde_json::Value| {
        json!({"id": "chatcmpl-8f1", "object": "chat.completion.chunk",
               "created": 1_732_240_000, "model": "Qwen/Qwen2.5-7B-Instruct",
               "choices": choices})
    };
    for i in 0..20_000 {
        let chunk = base(
            json!([{"index": 0, "delta": {"content": format!("word{i} \"q\" ")},
                                 "logprobs": null, "finish_reason": null}]),
        );
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    for (index, id) in [(0, "chatcmpl-tool-a"), (1, "chatcmpl-tool-b")] {
        let first = base(json!([{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": id, "type": "function",
             "function": {"name": "write_file", "arguments": ""}}]}}]));
        body.push_str(&format!("data: {first}\n\n"));
        body.push_str(&format!(
            "data: {}\n\n",
            base(json!([{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": "{\"text\": \""}}]}}]))
        ));
        for j in 0..2_000 {
            let frag = base(json!([{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": format!("line {j}\\n")}}]}}]));
            body.push_str(&format!("data: {frag}\n\n"));
        }
        body.push_str(&format!(
            "data: {}\n\n",
            base(json!([{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": "\"}"}}]}}]))
        ));
    }
    body.push_str(&format!(
        "data: {}\n\n",
        base(json!([{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]))
    ));
    body.push_str(
        "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":24000}}\n\n",
    );
    body.push_str("data: [DONE]\n\n");
    body.into_bytes()
}

/// The baseline's view of a chunk: only what a decoder must look at.
#[derive(Deserialize)]
struct MinChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<MinChoice<'a>>,
}

#[derive(Deserialize)]
struct MinChoice<'a> {
    #[serde(borrow, default)]
    delta: Option<MinDelta<'a>>,
}

#[derive(Deserialize)]
struct MinDelta<'a> {
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<MinCall<'a>>>,
}

#[derive(Deserialize)]
struct MinCall<'a> {
    #[serde(borrow, default)]
    function: Option<MinFunction<'a>>,
}

#[derive(Deserialize)]
struct MinFunction<'a> {
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

/// Splits the whole body into lines and parses each data payload; returns bytes of text
/// and arguments seen, so nothing is optimised away.
fn baseline(body: &[u8]) -> usize {
    let text = std::str::from_utf8(body).unwrap();
    let mut seen = 0;
    for line in text.lines() {
        let Some(data) = line.strip_prefix("data: ") else {
            continue;
        };
        if data == "[DONE]" {
            break;
        }
        let chunk: MinChunk<'_> = serde_json::from_str(data).unwrap();
        for choice in chunk.choices {
            if let Some(delta) = choice.delta {
                seen += delta.content.map_or(0, |c| c.len());
                for call in delta.tool_calls.into_iter().flatten() {
                    seen += call
                        .function
                        .and_then(|f| f.arguments)
                        .map_or(0, |a| a.len());
                }
            }
        }
    }
    seen
}

/// ollm's decoder, fed in 16 KiB network-sized pieces.
fn ollm(body: &[u8]) -> usize {
    let mut decoder = SseDecoder::with_id_prefix("b");
    let mut out = Vec::new();
    let mut events = 0;
    for piece in body.chunks(16 * 1024) {
        decoder.push(piece, &mut out);
        events += out.len();
        out.clear();
    }
    decoder.finish(&mut out);
    events + out.len()
}

/// The fastest of `runs` timings of `f`.
fn best(runs: usize, mut f: impl FnMut() -> usize) -> Duration {
    (0..runs)
        .map(|_| {
            let start = Instant::now();
            black_box(f());
            start.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let body = stream();
    // Sanity: the decoder assembles both calls and finishes.
    let events = decode_all(&mut SseDecoder::with_id_prefix("b"), &body);
    let calls = events
        .iter()
        .filter(|e| matches!(e, ProviderEvent::ToolCall { .. }))
        .count();
    assert_eq!(calls, 2);
    assert!(matches!(events.last(), Some(ProviderEvent::Finish { .. })));

    let runs = 15;
    let base = best(runs, || baseline(black_box(&body)));
    let ours = best(runs, || ollm(black_box(&body)));
    let mib = body.len() as f64 / (1024.0 * 1024.0);
    let rate = |d: Duration| mib / d.as_secs_f64();
    println!(
        "sse: {:.1} MiB, {} events ({} chunks)",
        mib,
        events.len(),
        body.windows(6).filter(|w| w == b"data: ").count()
    );
    println!(
        "  serde-only baseline  {:>8.2?}  {:>7.1} MiB/s",
        base,
        rate(base)
    );
    println!(
        "  ollm decode+assemble {:>8.2?}  {:>7.1} MiB/s",
        ours,
        rate(ours)
    );
    println!(
        "  ratio ollm/baseline  {:.2}x",
        ours.as_secs_f64() / base.as_secs_f64()
    );
}
