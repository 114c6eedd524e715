//! LFM2 / LFM2.5 (Liquid): `<|tool_call_start|>[name(key=value), ...]<|tool_call_end|>`.
//!
//! Decisions: the body is a pythonic list; the JSON list some LFM builds write instead
//! is accepted too. A missing `<|tool_call_end|>` ends the block at the end of the reply.

use super::{RawCall, json, pythonic};

const OPEN: &str = "<|tool_call_start|>";
const CLOSE: &str = "<|tool_call_end|>";

/// Parses the block that opens `rest`.
pub(super) fn parse(rest: &str) -> (usize, Vec<RawCall>) {
    let after = rest.strip_prefix(OPEN).unwrap_or(rest);
    let (body_len, end) = match after.find(CLOSE) {
        Some(i) => (i, i + CLOSE.len()),
        None => (after.len(), after.len()),
    };
    let body = after[..body_len].trim();
    let calls = if body.starts_with('{') || body.starts_with("[{") {
        json::body_calls(body, "<|tool_call_start|>")
    } else {
        pythonic::block_calls(body)
    };
    (OPEN.len() + end, calls)
}
