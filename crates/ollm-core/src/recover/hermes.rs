//! Hermes / Qwen2.5 / Qwen3: `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`.
//!
//! Decisions: a block runs to its `</tool_call>`, or to the next `<tool_call>` when the
//! model left the closer out between consecutive blocks, or to the end of the reply
//! (models stop there). A body that opens with `<function=` is Qwen3-Coder XML in the
//! Hermes wrapper and goes to [`super::qwen_xml`]. A `<tools>...</tools>` wrapper (the
//! tag from the system prompt, echoed) holds `<tool_call>` blocks or bare call JSON. A
//! body may also be a Python-style call (`get_weather(city="Antwerp")`) or JSON in a
//! fence. An empty block (`<tools></tools>`, seen from Qwen2.5-Coder-1.5B asked in plain
//! words) holds no call: it is not answered as a malformed one.

use super::{RawCall, pythonic, qwen_xml};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
const TOOLS_OPEN: &str = "<tools>";
const TOOLS_CLOSE: &str = "</tools>";

/// Parses the block that opens `rest`: bytes consumed and the calls.
pub(super) fn parse(rest: &str) -> (usize, Vec<RawCall>) {
    if let Some(after) = rest.strip_prefix(TOOLS_OPEN) {
        let (body_len, end) = match after.find(TOOLS_CLOSE) {
            Some(i) => (i, i + TOOLS_CLOSE.len()),
            None => (after.len(), after.len()),
        };
        let body = &after[..body_len];
        let calls = if body.trim().is_empty() {
            // `<tools></tools>`: the model echoed the tag and wrote no call in it.
            Vec::new()
        } else if body.trim_start().starts_with(OPEN) {
            let mut calls = Vec::new();
            let mut at = body.len() - body.trim_start().len();
            while body[at..].trim_start().starts_with(OPEN) {
                at += body[at..].len() - body[at..].trim_start().len();
                let (len, more) = parse(&body[at..]);
                calls.extend(more);
                at += len.max(1);
                if body[at..].trim_start().starts_with(CLOSE) {
                    at += body[at..].len() - body[at..].trim_start().len() + CLOSE.len();
                }
            }
            calls
        } else {
            super::json::body_calls(body, "a <tools> block")
        };
        return (TOOLS_OPEN.len() + end, calls);
    }
    let after = rest.strip_prefix(OPEN).unwrap_or(rest);
    let body_len = [after.find(CLOSE), after.find(OPEN)]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(after.len());
    let body = &after[..body_len];
    let end = OPEN.len() + body_len;
    let end = if after[body_len..].starts_with(CLOSE) {
        end + CLOSE.len()
    } else {
        end
    };
    let calls = if body.trim().is_empty() {
        Vec::new()
    } else if body.trim_start().starts_with("<function=") {
        let inner = body.trim_start();
        qwen_xml::parse(inner).1
    } else if let Ok(calls) = pythonic::parse_calls(body.trim()) {
        calls.into_iter().map(Ok).collect()
    } else {
        super::json::body_calls(body, "a <tool_call> block")
    };
    (end, calls)
}
