//! The native strategy: tools go in the request's `tools`, calls come back as events,
//! and calls a model wrote as text instead are recovered here.
//!
//! Native calls and recovered ones are recorded alike: an assistant message carrying the
//! calls (with the reply's text) followed by one tool message per call. Streamed text is
//! shown as it arrives ([`common::PassThrough`]).
//!
//! # Tool calls written as text
//!
//! Models served without a tool-call parser, or that slip out of it, put their calls in
//! the answer text: qwen3 and Hermes-style models write `<tool_call>{"name": ...,
//! "arguments": {...}}</tool_call>`, others answer with nothing but a JSON object (often
//! in a ```json fence). Those are recovered as calls, but never JSON that is only quoted in
//! prose (an example in an explanation must not run, goose#1857). The rules:
//! - a `<tool_call>` block counts only when its tag opens a line and it is outside a
//!   fenced code block;
//! - a bare JSON object counts only when it is the whole reply (alone, or alone in one
//!   fence);
//! - the JSON must name a tool that is offered (`name`, with `arguments` or `parameters`
//!   as an object or as a string holding one); otherwise nothing is recovered and the text
//!   stays the answer.

use ollm_types::{Message, ProviderRequest, ToolSchema};
use serde_json::{Map, Value};

use super::common::{self, Turn};

/// A call found in text: the tool's name and its arguments.
pub(crate) type TextCall = (String, Map<String, Value>);

/// Offers `tools` natively.
pub(crate) fn prepare(request: &mut ProviderRequest, tools: &[ToolSchema]) {
    request.tools = tools.to_vec();
}

/// Records a native turn: calls with the reply's text, everything else as the default.
pub(crate) fn record(turn: Turn<'_>) -> Vec<Message> {
    match turn {
        Turn::Calls { raw, .. } => common::record_default(turn, raw),
        _ => common::record_default(turn, ""),
    }
}

/// The calls written in `text`, or `None` when it holds none by the rules above. Every
/// candidate must name a tool for which `offered` is true, or none is taken.
pub(crate) fn recover(text: &str, offered: &dyn Fn(&str) -> bool) -> Option<Vec<TextCall>> {
    let calls = match tagged_blocks(text) {
        Some(blocks) => blocks
            .iter()
            .map(|b| call_from_json(b))
            .collect::<Option<Vec<_>>>()?,
        None => vec![call_from_json(whole_reply_json(text)?)?],
    };
    calls.iter().all(|(name, _)| offered(name)).then_some(calls)
}

/// The bodies of `<tool_call>` blocks whose tag opens a line outside code fences; `None`
/// when there are none. An unclosed block at the end counts (models often stop there).
fn tagged_blocks(text: &str) -> Option<Vec<&str>> {
    const OPEN: &str = "<tool_call>";
    const CLOSE: &str = "</tool_call>";
    let mut blocks = Vec::new();
    let mut in_fence = false;
    let mut offset = 0;
    while offset < text.len() {
        let line_end = text[offset..]
            .find('\n')
            .map_or(text.len(), |i| offset + i + 1);
        let line = text[offset..line_end].trim_start();
        if line.starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with(OPEN) {
            let start = text[offset..].find(OPEN).map_or(offset, |i| offset + i) + OPEN.len();
            let (body, next) = match text[start..].find(CLOSE) {
                Some(i) => (&text[start..start + i], start + i + CLOSE.len()),
                None => (&text[start..], text.len()),
            };
            blocks.push(body.trim());
            offset = next;
            continue;
        }
        offset = line_end;
    }
    (!blocks.is_empty()).then_some(blocks)
}

/// The reply itself when it is nothing but one JSON object, bare or in one fence.
/// The fence must be closed, span lines and hold nothing else.
fn whole_reply_json(text: &str) -> Option<&str> {
    let inner = match common::fence(text) {
        Some(f) if f.closed && !f.one_line && !f.body.contains("```") => f.body,
        Some(_) => return None,
        None => text.trim(),
    };
    (inner.starts_with('{') && inner.ends_with('}')).then_some(inner)
}

/// `{"name": ..., "arguments" | "parameters": {...} | "{...}"}` as a call.
fn call_from_json(json: &str) -> Option<TextCall> {
    let Value::Object(mut object) = serde_json::from_str::<Value>(json).ok()? else {
        return None;
    };
    let Some(Value::String(name)) = object.remove("name") else {
        return None;
    };
    let arguments = object
        .remove("arguments")
        .or_else(|| object.remove("parameters"));
    let arguments = match arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(Value::String(s)) => match serde_json::from_str::<Value>(&s).ok()? {
            Value::Object(map) => map,
            _ => return None,
        },
        Some(_) => return None,
    };
    Some((name, arguments))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(text: &str, expected: Option<Vec<(&str, Value)>>) {
        let offered = |name: &str| matches!(name, "read_file" | "list_dir");
        let got = recover(text, &offered);
        let expected = expected.map(|calls| {
            calls
                .into_iter()
                .map(|(n, a)| (n.to_owned(), a.as_object().cloned().unwrap_or_default()))
                .collect::<Vec<_>>()
        });
        assert_eq!(got, expected, "{text:?}");
    }

    #[test]
    fn recovers_deliberate_calls() {
        check(
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>",
            Some(vec![("read_file", json!({"path": "a"}))]),
        );
        check(
            "Let me look.\n<tool_call>{\"name\":\"list_dir\",\"arguments\":\"{}\"}</tool_call>\n<tool_call>{\"name\":\"read_file\",\"parameters\":{\"path\":\"b\"}}",
            Some(vec![
                ("list_dir", json!({})),
                ("read_file", json!({"path": "b"})),
            ]),
        );
        check(
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"c\"}}\n```",
            Some(vec![("read_file", json!({"path": "c"}))]),
        );
        check(
            " {\"name\": \"list_dir\"} ",
            Some(vec![("list_dir", json!({}))]),
        );
    }

    #[test]
    fn never_runs_what_is_only_quoted() {
        // JSON in prose, inline tags, fenced examples, unknown tools, bad JSON.
        check(
            "To read a file, send {\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}.",
            None,
        );
        check(
            "The format is `<tool_call>{\"name\": \"read_file\"}</tool_call>`.",
            None,
        );
        check(
            "Example:\n```\n<tool_call>{\"name\": \"read_file\"}</tool_call>\n```\nThat is all.",
            None,
        );
        check(
            "Here:\n```json\n{\"name\": \"read_file\"}\n```\nand more prose",
            None,
        );
        check(
            "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>",
            None,
        );
        check(
            "<tool_call>{\"name\": \"read_file\", \"arguments\": [1]}</tool_call>",
            None,
        );
        check("<tool_call>not json</tool_call>", None);
        check("{\"answer\": 42}", None);
        check("plain answer", None);
    }
}
