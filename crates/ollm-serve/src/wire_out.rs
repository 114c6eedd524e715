//! Replies in OpenAI's chat-completions wire: a whole `chat.completion`, or
//! `chat.completion.chunk` SSE events, and errors in OpenAI's error shape.
//!
//! # Decisions
//! - A streamed call is sent the way OpenAI streams one: a chunk with its `index`, `id`,
//!   `type` and `name` and empty `arguments`, then the arguments in fragments of at most
//!   [`ARGUMENT_FRAGMENT`] bytes (cut on character boundaries), each in its own chunk with
//!   only the `index`. Clients that reassemble by index (the `openai` package, LangChain)
//!   get exactly the call; a call is never shown as `content`.
//! - Text chunks, the hot path of a stream, are written by hand around the JSON-escaped
//!   text (a test checks they parse to exactly what serde writes); the rest of the
//!   chunks are built as JSON values.
//! - Reasoning goes out as `reasoning_content`, the field llama-server, vLLM and DeepSeek
//!   use.
//! - The finish reason is `tool_calls` when the reply made calls, `length` when the cap
//!   cut it, else `stop`, whatever the upstream said: it always agrees with the body
//!   (a client loops on `tool_calls` and would wait for calls that never came). vLLM
//!   answers a named `tool_choice` with a call and `finish_reason: "stop"`.
//! - Where the reply's calls came from ([`Piece::Repair`]) goes in an `ollm` extension
//!   object: top level in a whole reply, in the finish chunk of a stream.
//! - An error after the stream began is one `data: {"error": {...}}` event and the stream
//!   ends without `[DONE]`: the `openai` package raises on it, so a partial answer is
//!   never taken for a whole one.

use ollm_types::{FinishReason, ProviderError, ProviderErrorKind, ProviderEvent, ToolCall, Usage};
use serde_json::{Value, json};

use super::provenance::{Provenance, call_json};

/// The largest piece of a call's arguments one chunk carries, in bytes.
pub(crate) const ARGUMENT_FRAGMENT: usize = 48;

/// One piece of a reply, whichever path produced it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    Text(String),
    Reasoning(String),
    Call(ToolCall),
    Usage(Usage),
    /// Where the reply's calls came from (before its calls, if it has any).
    Repair(Provenance),
    Finish(FinishReason),
    Error(ProviderError),
}

impl Piece {
    /// The piece a provider event is, if any (warnings are none).
    pub(crate) fn from_event(event: ProviderEvent) -> Option<Piece> {
        Some(match event {
            ProviderEvent::TextDelta { text } => Piece::Text(text),
            ProviderEvent::ThinkingDelta { text } => Piece::Reasoning(text),
            ProviderEvent::ToolCall { call } => Piece::Call(call),
            ProviderEvent::Usage { usage } => Piece::Usage(usage),
            ProviderEvent::Finish { reason } => Piece::Finish(reason),
            ProviderEvent::Error { error } => Piece::Error(error),
            _ => return None,
        })
    }
}

/// What a reply's chunks share.
#[derive(Debug, Clone)]
pub(crate) struct Meta {
    pub(crate) id: String,
    pub(crate) created: u64,
    pub(crate) model: String,
}

impl Meta {
    fn chunk(&self, delta: Value, finish: Option<&str>) -> Value {
        json!({
            "id": self.id, "object": "chat.completion.chunk", "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        })
    }
}

/// Turns pieces into SSE `data:` payloads.
#[derive(Debug)]
pub(crate) struct Chunker {
    meta: Meta,
    /// `data: {"id":...,"choices":[{"index":0,"delta":`, the start every text chunk shares.
    head: String,
    calls: usize,
    usage: Usage,
    include_usage: bool,
    length: bool,
    repair: Option<Provenance>,
}

impl Chunker {
    /// A stream for `meta`; the first chunk says the role.
    pub(crate) fn new(meta: Meta, include_usage: bool) -> (Self, String) {
        let first = meta.chunk(json!({"role": "assistant", "content": ""}), None);
        let head = format!(
            r#"data: {{"id":{},"object":"chat.completion.chunk","created":{},"model":{},"choices":[{{"index":0,"delta":"#,
            Value::from(meta.id.as_str()),
            meta.created,
            Value::from(meta.model.as_str()),
        );
        let chunker = Chunker {
            meta,
            head,
            calls: 0,
            usage: Usage::default(),
            include_usage,
            length: false,
            repair: None,
        };
        (chunker, sse(&first))
    }

    /// The SSE events for `piece`, appended to `out`.
    pub(crate) fn push(&mut self, piece: Piece, out: &mut String) {
        match piece {
            Piece::Text(text) if !text.is_empty() => self.text_chunk(&text, out),
            Piece::Reasoning(text) if !text.is_empty() => {
                let delta = json!({"reasoning_content": text});
                out.push_str(&sse(&self.meta.chunk(delta, None)));
            }
            Piece::Call(call) => {
                let index = self.calls;
                self.calls += 1;
                for delta in call_deltas(index, &call) {
                    out.push_str(&sse(&self.meta.chunk(delta, None)));
                }
            }
            Piece::Usage(usage) => self.usage.accumulate(&usage),
            Piece::Repair(provenance) => self.repair = Some(provenance),
            Piece::Finish(reason) => {
                self.length |= reason == FinishReason::Length;
                let finish = self.finish_reason();
                let mut last = self.meta.chunk(json!({}), Some(finish));
                if let Some(repair) = &self.repair {
                    last["ollm"] = repair.extension();
                }
                out.push_str(&sse(&last));
                if self.include_usage {
                    let mut chunk = self.meta.chunk(json!({}), None);
                    chunk["choices"] = json!([]);
                    chunk["usage"] = usage_json(&self.usage);
                    out.push_str(&sse(&chunk));
                }
                out.push_str("data: [DONE]\n\n");
            }
            Piece::Error(error) => out.push_str(&sse(&error_body(&error))),
            Piece::Text(_) | Piece::Reasoning(_) => {}
        }
    }

    /// A content chunk, written without building a JSON value: this runs once per piece
    /// of streamed text.
    fn text_chunk(&self, text: &str, out: &mut String) {
        out.push_str(&self.head);
        out.push_str(r#"{"content":"#);
        out.push_str(&Value::from(text).to_string());
        out.push_str("},\"finish_reason\":null}]}\n\n");
    }

    fn finish_reason(&self) -> &'static str {
        finish_name(self.calls > 0, self.length)
    }
}

fn finish_name(calls: bool, length: bool) -> &'static str {
    match (calls, length) {
        (true, _) => "tool_calls",
        (false, true) => "length",
        (false, false) => "stop",
    }
}

/// The deltas of one streamed call: its head, then its arguments in fragments.
pub(crate) fn call_deltas(index: usize, call: &ToolCall) -> Vec<Value> {
    let arguments = call.arguments_value().to_string();
    let head = json!({"tool_calls": [{
        "index": index, "id": call.id, "type": "function",
        "function": {"name": call.name, "arguments": ""},
    }]});
    let mut deltas = vec![head];
    let mut rest = arguments.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(ARGUMENT_FRAGMENT);
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        let (piece, tail) = rest.split_at(cut);
        deltas.push(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}));
        rest = tail;
    }
    deltas
}

fn sse(value: &Value) -> String {
    format!("data: {value}\n\n")
}

fn usage_json(usage: &Usage) -> Value {
    let prompt = usage.prompt_tokens.unwrap_or(0);
    let completion = usage.completion_tokens.unwrap_or(0);
    json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
}

/// A whole reply gathered from its pieces: the `chat.completion` body, or the error.
pub(crate) fn completion(meta: &Meta, pieces: Vec<Piece>) -> Result<Value, ProviderError> {
    let (mut text, mut reasoning, mut calls) = (String::new(), String::new(), Vec::new());
    let (mut usage, mut length, mut repair) = (Usage::default(), false, None);
    for piece in pieces {
        match piece {
            Piece::Text(t) => text.push_str(&t),
            Piece::Reasoning(t) => reasoning.push_str(&t),
            Piece::Call(call) => calls.push(call_json(&call)),
            Piece::Usage(u) => usage.accumulate(&u),
            Piece::Repair(p) => repair = Some(p),
            Piece::Finish(reason) => length |= reason == FinishReason::Length,
            Piece::Error(error) => return Err(error),
        }
    }
    let finish = finish_name(!calls.is_empty(), length);
    let mut message = json!({"role": "assistant", "content": if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text) }});
    if !reasoning.is_empty() {
        message["reasoning_content"] = Value::String(reasoning);
    }
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let mut body = json!({
        "id": meta.id, "object": "chat.completion", "created": meta.created, "model": meta.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage_json(&usage),
    });
    if let Some(repair) = repair {
        body["ollm"] = repair.extension();
    }
    Ok(body)
}

/// OpenAI's error body for `error`.
pub(crate) fn error_body(error: &ProviderError) -> Value {
    let kind = match error.kind {
        ProviderErrorKind::BadRequest
        | ProviderErrorKind::ContextOverflow
        | ProviderErrorKind::ToolsUnsupported
        | ProviderErrorKind::ThinkingUnsupported
        | ProviderErrorKind::VisionUnsupported => "invalid_request_error",
        ProviderErrorKind::ModelNotFound => "not_found_error",
        ProviderErrorKind::Auth => "authentication_error",
        ProviderErrorKind::Busy => "rate_limit_error",
        _ => "server_error",
    };
    let message = match &error.hint {
        Some(hint) => format!("{} ({hint})", error.message),
        None => error.message.clone(),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": error.status}})
}

/// The HTTP status for `error` before any of the reply was sent.
pub(crate) fn error_status(error: &ProviderError) -> u16 {
    if let Some(status) = error.status.filter(|s| (400..600).contains(s)) {
        return status;
    }
    match error.kind {
        ProviderErrorKind::BadRequest
        | ProviderErrorKind::ContextOverflow
        | ProviderErrorKind::ToolsUnsupported
        | ProviderErrorKind::ThinkingUnsupported
        | ProviderErrorKind::VisionUnsupported => 400,
        ProviderErrorKind::Auth => 401,
        ProviderErrorKind::ModelNotFound => 404,
        ProviderErrorKind::Busy => 503,
        ProviderErrorKind::Timeout => 504,
        _ => 502,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_streams_as_a_head_then_argument_fragments_that_join_to_its_arguments() {
        let args = json!({"path": "ünïcödé/".repeat(12), "n": 3});
        let call = ToolCall::new("call_1", "read", args.clone()).expect("object");
        let deltas = call_deltas(2, &call);
        assert_eq!(deltas[0]["tool_calls"][0]["function"]["name"], "read");
        assert_eq!(deltas[0]["tool_calls"][0]["id"], "call_1");
        let joined: String = deltas
            .iter()
            .map(|d| {
                d["tool_calls"][0]["function"]["arguments"]
                    .as_str()
                    .unwrap_or("!")
            })
            .collect();
        assert_eq!(serde_json::from_str::<Value>(&joined).ok(), Some(args));
        assert!(deltas.len() > 3, "fragments: {}", deltas.len());
        assert!(deltas.iter().all(|d| d["tool_calls"][0]["index"] == 2));
        assert!(
            deltas[1..]
                .iter()
                .all(|d| d["tool_calls"][0].get("id").is_none())
        );
    }

    #[test]
    fn the_finish_reason_says_calls_then_length_then_stop() {
        let meta = Meta {
            id: "x".into(),
            created: 0,
            model: "m".into(),
        };
        let call = ToolCall::new("c", "f", json!({})).expect("object");
        let check = |pieces: Vec<Piece>, want: &str| {
            let body = completion(&meta, pieces).expect("no error");
            assert_eq!(body["choices"][0]["finish_reason"], want);
        };
        check(
            vec![Piece::Text("hi".into()), Piece::Finish(FinishReason::Stop)],
            "stop",
        );
        check(vec![Piece::Finish(FinishReason::Length)], "length");
        check(
            vec![Piece::Call(call), Piece::Finish(FinishReason::MaxTurns)],
            "tool_calls",
        );
    }

    #[test]
    fn an_error_mid_stream_is_an_error_event_and_no_done() {
        let meta = Meta {
            id: "x".into(),
            created: 0,
            model: "m".into(),
        };
        let (mut chunker, first) = Chunker::new(meta, false);
        let mut out = first;
        chunker.push(Piece::Text("half".into()), &mut out);
        let error = ProviderError::new(ProviderErrorKind::IncompleteStream, "broke");
        chunker.push(Piece::Error(error), &mut out);
        assert!(out.contains(r#"data: {"error":"#), "{out}");
        assert!(!out.contains("[DONE]"), "{out}");
    }
}

#[cfg(test)]
mod text_chunks {
    use super::*;

    #[test]
    fn a_text_chunk_written_by_hand_is_the_chunk_serde_writes() {
        let meta = Meta {
            id: "chatcmpl-\"x\"".into(),
            created: 7,
            model: "m\\1".into(),
        };
        let (mut chunker, _) = Chunker::new(meta.clone(), false);
        for text in ["plain", "quote \" and \\ and \n and ü and \u{1}", "</s>"] {
            let mut out = String::new();
            chunker.push(Piece::Text(text.into()), &mut out);
            let data = out
                .strip_prefix("data: ")
                .and_then(|d| d.strip_suffix("\n\n"));
            let got: Value = serde_json::from_str(data.unwrap_or("")).expect("json");
            assert_eq!(got, meta.chunk(json!({"content": text}), None), "{out}");
        }
    }
}
