//! Llama 3.x `<|python_tag|>` followed by JSON `{"name": ..., "parameters": {...}}` (one or
//! several, separated by `;`) or a Python call `name.call(key="value")`; Llama 4's
//! `<|python_start|>...<|python_end|>` around a pythonic list or JSON.
//!
//! Decisions: the body runs to the first end token (`<|eom_id|>`, `<|eot_id|>`,
//! `<|python_end|>`) or the end of the reply; JSON is tried first, then pythonic calls.

use super::{RawCall, json, pythonic};

const ENDS: &[&str] = &["<|eom_id|>", "<|eot_id|>", "<|python_end|>"];

/// Parses the block that opens `rest` (with either marker).
pub(super) fn parse(rest: &str) -> (usize, Vec<RawCall>) {
    let marker_len = rest.find('>').map_or(rest.len(), |i| i + 1);
    let after = &rest[marker_len..];
    let body_len = ENDS
        .iter()
        .filter_map(|e| after.find(e))
        .min()
        .unwrap_or(after.len());
    let body = after[..body_len].trim();
    let calls = if body.starts_with('{') || body.starts_with("[{") {
        json::body_calls(body, "<|python_tag|>")
    } else {
        pythonic::block_calls(body)
    };
    (marker_len + body_len, calls)
}
