//! Mistral: `[TOOL_CALLS] [{"name": ..., "arguments": {...}}, ...]` (with or without the
//! space), and the newer `[TOOL_CALLS]NAME[ARGS]{json}` repeated per call, optionally with
//! `[CALL_ID]id` between the name and `[ARGS]`.
//!
//! Decisions: consecutive `[TOOL_CALLS]` markers (with only whitespace between) form one
//! block; a name not followed by `[ARGS]` and a JSON object is a malformed call.

use super::{RawArgs, RawCall, json, scan};

const MARKER: &str = "[TOOL_CALLS]";
const ARGS: &str = "[ARGS]";
const CALL_ID: &str = "[CALL_ID]";

/// Parses the `[TOOL_CALLS]` run that opens `rest`.
pub(super) fn parse(rest: &str) -> (usize, Vec<RawCall>) {
    let mut calls = Vec::new();
    let mut at = 0;
    while let Some(after) = rest[at..].trim_start().strip_prefix(MARKER) {
        let start = rest.len() - after.len();
        let (len, more) = one(after);
        calls.extend(more);
        at = start + len;
    }
    (at, calls)
}

fn one(after: &str) -> (usize, Vec<RawCall>) {
    let lead = after.len() - after.trim_start().len();
    let body = &after[lead..];
    if body.starts_with('[') || body.starts_with('{') {
        return match scan::first_json(body) {
            Ok((len, value)) => {
                let calls = json::calls_in(value, None).unwrap_or_else(|| {
                    vec![Err("[TOOL_CALLS] must be followed by a list of {\"name\": ..., \"arguments\": {...}}".to_owned())]
                });
                (lead + len, calls)
            }
            Err(e) => (after.len(), vec![Err(format!("[TOOL_CALLS] {e}"))]),
        };
    }
    let name_len = body
        .find(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '-' | '.')))
        .unwrap_or(body.len());
    let name = &body[..name_len];
    let mut rest = &body[name_len..];
    if let Some(id) = rest.strip_prefix(CALL_ID) {
        rest = id.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_' || c == '-');
    }
    let consumed_to = |r: &str| after.len() - r.len();
    let Some(args) = rest.strip_prefix(ARGS) else {
        let why = format!("[TOOL_CALLS]{name} must be followed by [ARGS] and a JSON object");
        return (consumed_to(rest), vec![Err(why)]);
    };
    if name.is_empty() {
        return (
            consumed_to(args),
            vec![Err("[TOOL_CALLS] names no tool".to_owned())],
        );
    }
    match scan::first_json(args).and_then(|(len, v)| json::arguments(v).map(|m| (len, m))) {
        Ok((len, map)) => (
            consumed_to(&args[len..]),
            vec![Ok((name.to_owned(), RawArgs::Json(map)))],
        ),
        Err(e) => (after.len(), vec![Err(format!("[TOOL_CALLS]{name}: {e}"))]),
    }
}
