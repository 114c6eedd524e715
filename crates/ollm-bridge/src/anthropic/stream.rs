//! Bytes of a streamed Messages reply to [`ProviderEvent`]s (pure).
//!
//! [`MessagesDecoder`] reads the SSE events with the shared [`SseFramer`] and keeps the
//! stream contract: whatever the bytes, the events end with exactly one `Finish` or
//! `Error`, and nothing follows.
//!
//! # Decisions
//! - An event is told by its data's `type` (the SSE `event:` name repeats it); an
//!   `event: error` is an error whatever its data. Unknown event and block types are
//!   skipped, as the API reference asks of clients.
//! - `text_delta` is answer text, `thinking_delta` reasoning. `signature_delta` (and
//!   `redacted_thinking`) are not kept: ollm never sends thinking blocks back, so it has
//!   no use for the signature that would verify them.
//! - A `tool_use` block and its `input_json_delta` fragments go through the same
//!   [`ToolCallAssembler`] as OpenAI's streamed calls, keyed by the block index: names
//!   brought back to the offered tools, an id minted when none came, arguments that are
//!   not a JSON object answered with an error (after a `MalformedOutput` warning), calls
//!   emitted when the reply is complete, in the order they started. A start's whole
//!   `input` counts when no fragment follows.
//! - Usage: the prompt is `message_start`'s input tokens, cache reads and writes
//!   included (each alone undercounts a cached prompt); the completion is the last
//!   `output_tokens` (they are cumulative). Sent once, before the `Finish`.
//! - `message_stop` ends the reply. The end of the body after a `stop_reason` ends it
//!   too; before one it is an incomplete stream.
//! - Stop reasons ([`finish_reason`]): `max_tokens` and `model_context_window_exceeded`
//!   are `Length`, `tool_use` is `ToolCalls`, the rest (`end_turn`, `stop_sequence`,
//!   `pause_turn`, `refusal`, unknown ones) a `Stop`; a reply that made tool calls
//!   finishes with `ToolCalls` whatever the server says.
//! - Errors in Anthropic's shape (`{"type": "error", "error": {"type", "message"}}`) get
//!   typed kinds by their `type` ([`error_kind`]): `overloaded_error` (HTTP 529) and
//!   `rate_limit_error` are `Busy` and retryable.

use std::ops::ControlFlow;

use ollm_types::{FinishReason, ProviderError, ProviderErrorKind, ProviderEvent, Usage};
use serde_json::Value;

use super::wire::{Block, Delta, Event};
use crate::BridgeError;
use crate::lines::DEFAULT_MAX_LINE;
use crate::openai::{SseEvent, SseFramer, ToolCallAssembler};
use crate::shell::{Decoder, partial, push_text, push_thinking};

/// Decodes one streamed Messages reply.
#[derive(Debug)]
pub struct MessagesDecoder {
    sse: SseFramer,
    reply: Reply,
}

/// Everything but the SSE layer (see `SseDecoder` for why they are apart).
#[derive(Debug)]
struct Reply {
    calls: ToolCallAssembler,
    stop: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
    /// Whether any output (text, reasoning or a tool call) has arrived.
    started: bool,
    /// The body has ended: an event still pending was cut by that end.
    ending: bool,
}

impl Default for MessagesDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl MessagesDecoder {
    /// A decoder minting random ids for calls without one.
    pub fn new() -> Self {
        Self::with_id_prefix(format!("toolu_{:012x}", fastrand::u64(..) >> 16))
    }

    /// A decoder minting ids `<prefix>_0`, `<prefix>_1`, ... (for repeatable tests).
    pub fn with_id_prefix(prefix: impl Into<String>) -> Self {
        Self::with_max_line(prefix, DEFAULT_MAX_LINE)
    }

    /// A decoder with its own cap on a line (and on an event's data), in bytes.
    pub fn with_max_line(prefix: impl Into<String>, max_line: usize) -> Self {
        MessagesDecoder {
            sse: SseFramer::new(max_line),
            reply: Reply {
                calls: ToolCallAssembler::new(prefix),
                stop: None,
                usage: None,
                done: false,
                started: false,
                ending: false,
            },
        }
    }

    /// The same decoder bringing tool-call names back to the tools the request offered.
    pub fn with_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        let calls = std::mem::replace(&mut self.reply.calls, ToolCallAssembler::new(""));
        self.reply.calls = calls.with_offered(names);
        self
    }
}

impl Decoder for MessagesDecoder {
    fn is_ended(&self) -> bool {
        self.reply.done
    }

    fn push(&mut self, bytes: &[u8], out: &mut Vec<ProviderEvent>) {
        if self.reply.done {
            return;
        }
        let reply = &mut self.reply;
        if let Err(e) = self.sse.push(bytes, |event| reply.event(event, out)) {
            self.reply.fail(out, e.into());
        }
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.reply.done {
            return;
        }
        self.reply.ending = true;
        let reply = &mut self.reply;
        if let Err(e) = self.sse.finish(|event| reply.event(event, out)) {
            self.reply.fail(out, e.into());
        }
        if self.reply.done {
            return;
        }
        if self.reply.stop.is_some() {
            self.reply.complete(out);
        } else {
            let error = BridgeError::Incomplete {
                message: "the stream ended without message_stop or a stop_reason".into(),
            };
            let error = self.reply.partial_if_started(error.into());
            self.reply.fail(out, error);
        }
    }

    fn fail(&mut self, error: ProviderError, out: &mut Vec<ProviderEvent>) {
        if self.reply.done {
            return;
        }
        let error = self.reply.partial_if_started(error);
        self.reply.fail(out, error);
    }
}

impl Reply {
    /// One SSE event of the reply; `Break` once the reply has ended.
    fn event(&mut self, event: SseEvent<'_>, out: &mut Vec<ProviderEvent>) -> ControlFlow<()> {
        if event.event == Some("error") {
            let error = in_stream_error(event.data);
            self.fail(out, error);
        } else {
            match serde_json::from_str::<Event<'_>>(event.data) {
                Ok(parsed) => self.apply(parsed, out),
                Err(e) if self.ending && e.is_eof() => {
                    let error = BridgeError::Incomplete {
                        message: "the stream ended inside an event's JSON".into(),
                    };
                    let error = self.partial_if_started(error.into());
                    self.fail(out, error);
                }
                Err(e) => {
                    let error = BridgeError::Decode {
                        line: BridgeError::cap(event.data, 512),
                        message: e.to_string(),
                    };
                    self.fail(out, error.into());
                }
            }
        }
        match self.done {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    }

    fn apply(&mut self, event: Event<'_>, out: &mut Vec<ProviderEvent>) {
        match event {
            Event::MessageStart { message } => {
                let wire = message.and_then(|m| m.usage).unwrap_or_default();
                let usage = self.usage.get_or_insert_with(Usage::default);
                usage.prompt_tokens = wire.prompt().or(usage.prompt_tokens);
                usage.completion_tokens = wire.output_tokens.or(usage.completion_tokens);
            }
            Event::ContentBlockStart {
                index,
                content_block,
            } => self.block_start(index, content_block, out),
            Event::ContentBlockDelta { index, delta } => self.delta(index, delta, out),
            Event::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.and_then(|d| d.stop_reason) {
                    self.stop = Some(finish_reason(&reason));
                }
                if let Some(wire) = usage {
                    let usage = self.usage.get_or_insert_with(Usage::default);
                    usage.prompt_tokens = wire.prompt().or(usage.prompt_tokens);
                    usage.completion_tokens = wire.output_tokens.or(usage.completion_tokens);
                }
            }
            Event::MessageStop {} => self.complete(out),
            Event::Error { error } => {
                let error = stream_error(&error.unwrap_or(Value::Null));
                self.fail(out, error);
            }
            Event::ContentBlockStop {} | Event::Ping {} | Event::Unknown => {}
        }
    }

    fn block_start(&mut self, index: u32, block: Block<'_>, out: &mut Vec<ProviderEvent>) {
        match block {
            Block::Text { text: Some(text) } if !text.is_empty() => {
                self.started = true;
                push_text(out, text);
            }
            Block::Thinking {
                thinking: Some(text),
            } if !text.is_empty() => {
                self.started = true;
                push_thinking(out, text);
            }
            Block::ToolUse { id, name, input } => {
                self.started = true;
                let input = input.filter(|v| v.as_object().is_some_and(|m| !m.is_empty()));
                let name = Some(name.as_deref().unwrap_or_default());
                self.calls
                    .push_parts(Some(index), id.as_deref(), name, input.as_ref());
            }
            Block::Text { .. } | Block::Thinking { .. } | Block::Other => {}
        }
    }

    fn delta(&mut self, index: u32, delta: Delta<'_>, out: &mut Vec<ProviderEvent>) {
        match delta {
            Delta::Text { text } if !text.is_empty() => {
                self.started = true;
                push_text(out, text);
            }
            Delta::Thinking { thinking } if !thinking.is_empty() => {
                self.started = true;
                push_thinking(out, thinking);
            }
            Delta::InputJson { partial_json } if !partial_json.is_empty() => {
                let fragment = Value::String(partial_json.into_owned());
                self.calls
                    .push_parts(Some(index), None, None, Some(&fragment));
            }
            Delta::Text { .. }
            | Delta::Thinking { .. }
            | Delta::InputJson { .. }
            | Delta::Signature {}
            | Delta::Other => {}
        }
    }

    fn complete(&mut self, out: &mut Vec<ProviderEvent>) {
        self.calls.close(out);
        if let Some(usage) = self.usage.take() {
            out.push(ProviderEvent::Usage { usage });
        }
        let mut reason = self.stop.unwrap_or(FinishReason::Stop);
        if self.calls.emitted() > 0 && reason == FinishReason::Stop {
            reason = FinishReason::ToolCalls;
        }
        out.push(ProviderEvent::Finish { reason });
        self.done = true;
    }

    fn partial_if_started(&self, error: ProviderError) -> ProviderError {
        match self.started {
            true => partial(error, "the text and tool calls"),
            false => error,
        }
    }

    fn fail(&mut self, out: &mut Vec<ProviderEvent>, error: ProviderError) {
        out.push(ProviderEvent::Error { error });
        self.done = true;
    }
}

/// Maps a `stop_reason` (see the module docs).
pub(crate) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

/// The error of an `event: error` event: `{"type": "error", "error": {...}}`, the error
/// itself, or plain text.
fn in_stream_error(data: &str) -> ProviderError {
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Object(mut map)) => match map.remove("error") {
            Some(inner) => stream_error(&inner),
            None => stream_error(&Value::Object(map)),
        },
        Ok(other) => stream_error(&other),
        Err(_) => stream_error(&Value::String(data.to_owned())),
    }
}

/// The neutral error for an error value the server wrote into the stream.
fn stream_error(error: &Value) -> ProviderError {
    let message = crate::openai::error_message(error);
    let mut mapped: ProviderError = BridgeError::InStream { message }.into();
    if let Some((kind, retryable)) = error_kind(error, &mapped.message) {
        mapped.kind = kind;
        mapped.retryable = retryable;
    }
    mapped
}

/// The kind (and whether retrying could help) that an Anthropic error `type` names;
/// `message` catches the context overflow, which Anthropic reports as an
/// `invalid_request_error` saying "prompt is too long". `None` keeps the status's kind.
pub(crate) fn error_kind(error: &Value, message: &str) -> Option<(ProviderErrorKind, bool)> {
    let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
    if message.contains("prompt is too long") {
        return Some((ProviderErrorKind::ContextOverflow, false));
    }
    Some(match kind {
        "overloaded_error" | "rate_limit_error" => (ProviderErrorKind::Busy, true),
        "api_error" => (ProviderErrorKind::Server, true),
        "timeout_error" => (ProviderErrorKind::Timeout, true),
        "authentication_error" | "permission_error" => (ProviderErrorKind::Auth, false),
        "not_found_error" => (ProviderErrorKind::ModelNotFound, false),
        "invalid_request_error" | "request_too_large" => (ProviderErrorKind::BadRequest, false),
        // llama.cpp's own type for a prompt over the window.
        "exceed_context_size_error" => (ProviderErrorKind::ContextOverflow, false),
        _ => return None,
    })
}

/// Decodes a whole body at once (for tests, fixtures and benchmarks).
pub fn decode_all(decoder: &mut MessagesDecoder, body: &[u8]) -> Vec<ProviderEvent> {
    let mut out = Vec::new();
    decoder.push(body, &mut out);
    decoder.finish(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use ollm_types::{ToolCall, Warning, WarningKind};
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn decode(chunks: &[&[u8]]) -> Vec<ProviderEvent> {
        let mut d = MessagesDecoder::with_id_prefix("m").with_tools(["read_file".to_owned()]);
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out);
        }
        d.finish(&mut out);
        out
    }

    /// Writes events as SSE, each named by its `type` as the API does.
    fn sse(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
            .collect()
    }

    fn start(input: u32) -> Value {
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "m", "stop_reason": null,
            "usage": {"input_tokens": input, "output_tokens": 1}}})
    }
    fn block(index: u32, block: Value) -> Value {
        json!({"type": "content_block_start", "index": index, "content_block": block})
    }
    fn delta(index: u32, delta: Value) -> Value {
        json!({"type": "content_block_delta", "index": index, "delta": delta})
    }
    fn text_delta(index: u32, text: &str) -> Value {
        delta(index, json!({"type": "text_delta", "text": text}))
    }
    fn stop_block(index: u32) -> Value {
        json!({"type": "content_block_stop", "index": index})
    }
    fn message_delta(reason: &str, output: u32) -> Value {
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
            "usage": {"output_tokens": output}})
    }
    fn message_stop() -> Value {
        json!({"type": "message_stop"})
    }

    fn text(t: &str) -> ProviderEvent {
        ProviderEvent::TextDelta { text: t.into() }
    }
    fn usage(prompt: u32, completion: u32) -> ProviderEvent {
        ProviderEvent::Usage {
            usage: Usage {
                prompt_tokens: Some(prompt),
                completion_tokens: Some(completion),
                ..Usage::default()
            },
        }
    }
    fn finish(reason: FinishReason) -> ProviderEvent {
        ProviderEvent::Finish { reason }
    }
    fn call(id: &str, name: &str, args: Value) -> ProviderEvent {
        ProviderEvent::ToolCall {
            call: ToolCall::new(id, name, args).unwrap(),
        }
    }
    fn kind_of(events: &[ProviderEvent]) -> Option<ProviderErrorKind> {
        match events.last() {
            Some(ProviderEvent::Error { error }) => Some(error.kind),
            _ => None,
        }
    }

    fn check(events: &[Value], expected: &[ProviderEvent]) {
        let body = sse(events);
        assert_eq!(decode(&[body.as_bytes()]), expected, "body: {body}");
    }

    #[test]
    fn every_event_of_a_reply() {
        // Text, thinking with its signature, a tool call in fragments, ping, usage.
        check(
            &[
                start(25),
                json!({"type": "ping"}),
                block(0, json!({"type": "thinking", "thinking": ""})),
                delta(
                    0,
                    json!({"type": "thinking_delta", "thinking": "let me see"}),
                ),
                delta(0, json!({"type": "signature_delta", "signature": "EqQB"})),
                stop_block(0),
                block(1, json!({"type": "text", "text": ""})),
                text_delta(1, "Reading"),
                text_delta(1, " it."),
                stop_block(1),
                block(
                    2,
                    json!({"type": "tool_use", "id": "toolu_1", "name": "read_file",
                    "input": {}}),
                ),
                delta(2, json!({"type": "input_json_delta", "partial_json": ""})),
                delta(
                    2,
                    json!({"type": "input_json_delta", "partial_json": "{\"pa"}),
                ),
                delta(
                    2,
                    json!({"type": "input_json_delta", "partial_json": "th\": \"a.txt\"}"}),
                ),
                stop_block(2),
                message_delta("tool_use", 42),
                message_stop(),
            ],
            &[
                ProviderEvent::ThinkingDelta {
                    text: "let me see".into(),
                },
                text("Reading it."),
                call("toolu_1", "read_file", json!({"path": "a.txt"})),
                usage(25, 42),
                finish(FinishReason::ToolCalls),
            ],
        );
    }

    #[test]
    fn stop_reasons_map_to_finish_reasons() {
        let cases = [
            ("end_turn", FinishReason::Stop),
            ("stop_sequence", FinishReason::Stop),
            ("max_tokens", FinishReason::Length),
            ("model_context_window_exceeded", FinishReason::Length),
            ("tool_use", FinishReason::ToolCalls),
            ("pause_turn", FinishReason::Stop),
            ("refusal", FinishReason::Stop),
            ("something_new", FinishReason::Stop),
        ];
        for (reason, want) in cases {
            check(
                &[
                    start(3),
                    text_delta(0, "a"),
                    message_delta(reason, 1),
                    message_stop(),
                ],
                &[text("a"), usage(3, 1), finish(want)],
            );
        }
    }

    #[test]
    fn cache_tokens_count_in_the_prompt_and_llama_cpp_starts_calls_without_input() {
        check(
            &[
                json!({"type": "message_start", "message": {"usage": {"input_tokens": 2,
                    "cache_creation_input_tokens": 5, "cache_read_input_tokens": 158,
                    "output_tokens": 0}}}),
                // llama.cpp: no `input` on the start, a name off by case (repaired).
                block(
                    0,
                    json!({"type": "tool_use", "id": "x1", "name": "READ_FILE"}),
                ),
                delta(
                    0,
                    json!({"type": "input_json_delta", "partial_json": "{\"path\":\"b\"}"}),
                ),
                // A whole `input` and no fragments; no id (minted).
                block(
                    1,
                    json!({"type": "tool_use", "name": "read_file", "input": {"path": "c"}}),
                ),
                stop_block(1),
                // Unknown blocks and deltas are skipped.
                block(2, json!({"type": "server_tool_use", "id": "s"})),
                delta(2, json!({"type": "citations_delta", "citation": {}})),
                json!({"type": "some_future_event"}),
                message_delta("end_turn", 9),
                message_stop(),
            ],
            &[
                call("x1", "read_file", json!({"path": "b"})),
                call("m_0", "read_file", json!({"path": "c"})),
                usage(165, 9),
                // Calls were made: `ToolCalls` though the server said `end_turn`.
                finish(FinishReason::ToolCalls),
            ],
        );
    }

    #[test]
    fn unparseable_arguments_are_a_marked_call_after_a_warning() {
        let events = decode(&[sse(&[
            start(1),
            block(
                0,
                json!({"type": "tool_use", "id": "t", "name": "read_file"}),
            ),
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "{\"path\":"}),
            ),
            message_delta("tool_use", 3),
            message_stop(),
        ])
        .as_bytes()]);
        assert!(
            matches!(&events[0], ProviderEvent::Warning { warning: Warning { kind, .. } }
                if *kind == WarningKind::MalformedOutput),
            "{events:?}"
        );
        assert_eq!(
            events[1],
            call(
                "t",
                "read_file",
                json!({ollm_types::INVALID_ARGUMENTS_KEY: "{\"path\":"})
            )
        );
    }

    #[test]
    fn endings() {
        // A stop_reason then the end of the body: complete without message_stop.
        check(
            &[start(1), text_delta(0, "a"), message_delta("end_turn", 1)],
            &[text("a"), usage(1, 1), finish(FinishReason::Stop)],
        );
        // Nothing follows message_stop.
        check(
            &[start(1), message_stop(), text_delta(0, "late")],
            &[usage(1, 1), finish(FinishReason::Stop)],
        );
    }

    #[test]
    fn failures_are_typed() {
        let error = |kind: &str, message: &str| json!({"type": "error", "error": {"type": kind, "message": message}});
        // (body, the kind of the final error, retryable)
        let cases: Vec<(String, ProviderErrorKind, bool)> = vec![
            (
                sse(&[start(1), text_delta(0, "a")]),
                ProviderErrorKind::IncompleteStream,
                false,
            ),
            (String::new(), ProviderErrorKind::IncompleteStream, false),
            (
                "data: {not json\n\n".into(),
                ProviderErrorKind::Protocol,
                false,
            ),
            (
                sse(&[
                    start(1),
                    text_delta(0, "a"),
                    error("overloaded_error", "Overloaded"),
                ]),
                ProviderErrorKind::Busy,
                true,
            ),
            (
                sse(&[error("rate_limit_error", "slow down")]),
                ProviderErrorKind::Busy,
                true,
            ),
            (
                sse(&[error("api_error", "oops")]),
                ProviderErrorKind::Server,
                true,
            ),
            (
                sse(&[error(
                    "invalid_request_error",
                    "prompt is too long: 9 tokens > 8",
                )]),
                ProviderErrorKind::ContextOverflow,
                false,
            ),
            (
                sse(&[error("authentication_error", "bad key")]),
                ProviderErrorKind::Auth,
                false,
            ),
            (
                "event: error\ndata: plain words\n\n".into(),
                ProviderErrorKind::Server,
                false,
            ),
            // An error named only by its data's type.
            (
                format!("data: {}\n\n", error("not_found_error", "no model")),
                ProviderErrorKind::ModelNotFound,
                false,
            ),
            (
                format!(
                    "{}data: {{\"type\":\"content_block_del",
                    sse(&[start(1), text_delta(0, "a")])
                ),
                ProviderErrorKind::IncompleteStream,
                false,
            ),
        ];
        for (body, kind, retryable) in cases {
            let events = decode(&[body.as_bytes()]);
            assert_eq!(kind_of(&events), Some(kind), "body: {body} -> {events:?}");
            let last = events.last().cloned();
            if let Some(ProviderEvent::Error { error }) = last {
                assert_eq!(error.retryable, retryable, "{body}: {error:?}");
            }
            let errors = events
                .iter()
                .filter(|e| {
                    matches!(
                        e,
                        ProviderEvent::Error { .. } | ProviderEvent::Finish { .. }
                    )
                })
                .count();
            assert_eq!(errors, 1, "{events:?}");
        }
    }

    #[test]
    fn a_broken_body_after_output_is_partial_and_an_idle_timeout_stays_a_timeout() {
        let idle = || BridgeError::Timeout {
            phase: crate::TimeoutPhase::Idle,
            after: std::time::Duration::from_secs(1),
        };
        let broken = || BridgeError::Body {
            message: "reset".into(),
        };
        // (body before the break, the break, the kind of the final error, partial)
        let cases: Vec<(String, BridgeError, ProviderErrorKind, bool)> = vec![
            (sse(&[start(1)]), idle(), ProviderErrorKind::Timeout, false),
            (
                sse(&[start(1), text_delta(0, "Hel")]),
                idle(),
                ProviderErrorKind::Timeout,
                true,
            ),
            (
                sse(&[start(1), text_delta(0, "Hel")]),
                broken(),
                ProviderErrorKind::IncompleteStream,
                true,
            ),
            (
                sse(&[start(1)]),
                broken(),
                ProviderErrorKind::Connection,
                false,
            ),
        ];
        for (body, cause, kind, is_partial) in cases {
            let mut d = MessagesDecoder::with_id_prefix("m");
            let mut out = Vec::new();
            d.push(body.as_bytes(), &mut out);
            d.fail(cause.into(), &mut out);
            assert_eq!(kind_of(&out), Some(kind), "{body} -> {out:?}");
            let message = match out.last() {
                Some(ProviderEvent::Error { error }) => error.message.clone(),
                _ => String::new(),
            };
            assert_eq!(message.contains("partial"), is_partial, "{message}");
            assert!(d.is_ended());
            d.finish(&mut out);
            assert_eq!(
                out.iter()
                    .filter(|e| matches!(e, ProviderEvent::Error { .. }))
                    .count(),
                1
            );
        }
    }

    /// A reply with every kind of event, for the byte-split property.
    fn whole_reply(pieces: &[String]) -> String {
        let mut events = vec![start(7), json!({"type": "ping"})];
        events.push(block(0, json!({"type": "thinking", "thinking": ""})));
        events.extend(
            pieces
                .iter()
                .map(|p| delta(0, json!({"type": "thinking_delta", "thinking": p}))),
        );
        events.push(delta(
            0,
            json!({"type": "signature_delta", "signature": "c2ln"}),
        ));
        events.push(stop_block(0));
        events.push(block(1, json!({"type": "text", "text": ""})));
        events.extend(pieces.iter().map(|p| text_delta(1, p)));
        events.push(stop_block(1));
        events.push(block(
            2,
            json!({"type": "tool_use", "id": "t", "name": "read_file", "input": {}}),
        ));
        events.push(delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "{\"path\": \"é"}),
        ));
        events.push(delta(
            2,
            json!({"type": "input_json_delta", "partial_json": "\"}"}),
        ));
        events.push(stop_block(2));
        events.push(message_delta("tool_use", 11));
        events.push(message_stop());
        sse(&events).replace("\n\n", "\r\n\r\n")
    }

    /// Pieces of Messages streams, mixed with arbitrary bytes below.
    const PIECES: &[&str] = &[
        "event: ",
        "data: ",
        "\n",
        "\n\n",
        "\r\n",
        ": keep-alive",
        "event: error",
        r#"{"type":"message_start","message":{"usage":{"input_tokens":3}}}"#,
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi "}}"#,
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"so"}}"#,
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"read_file"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"pa"}}"#,
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"th\": 1}"}}"#,
        r#"{"type":"content_block_stop","index":1}"#,
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":2}}"#,
        r#"{"type":"message_stop"}"#,
        r#"{"type":"ping"}"#,
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
    ];

    fn noisy_body() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            4 => proptest::sample::select(PIECES).prop_map(|p| p.as_bytes().to_vec()),
            1 => proptest::collection::vec(any::<u8>(), 0..16),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        /// Whatever the bytes (protocol pieces and noise, under a small cap), the reply
        /// ends exactly once, last, and the same however the bytes are cut.
        #[test]
        fn any_bytes_end_once_and_split_alike(
            bytes in noisy_body(),
            cuts in proptest::collection::vec(any::<usize>(), 0..12),
            max in 16usize..300,
        ) {
            let run = |chunks: &[&[u8]]| {
                let mut d = MessagesDecoder::with_max_line("m", max);
                let mut out = Vec::new();
                for c in chunks {
                    d.push(c, &mut out);
                }
                d.finish(&mut out);
                out
            };
            let whole = run(&[&bytes]);
            let ends = |e: &ProviderEvent| {
                matches!(e, ProviderEvent::Finish { .. } | ProviderEvent::Error { .. })
            };
            prop_assert_eq!(whole.iter().filter(|e| ends(e)).count(), 1, "{:?}", whole);
            prop_assert!(whole.last().is_some_and(ends));
            let split = run(&test_utils::split::split_at(&bytes, &cuts));
            // The shared SSE framer quotes the line or only its value in a UTF-8 error,
            // depending on where the chunk was cut: errors compare by kind.
            let kinds = |events: Vec<ProviderEvent>| -> Vec<ProviderEvent> {
                events
                    .into_iter()
                    .map(|e| match e {
                        ProviderEvent::Error { error } => ProviderEvent::Error {
                            error: ProviderError::new(error.kind, ""),
                        },
                        other => other,
                    })
                    .collect()
            };
            prop_assert_eq!(kinds(split), kinds(whole));
        }

        #[test]
        fn any_byte_split_gives_the_same_events(
            pieces in proptest::collection::vec("[a-zé\"{}\\\\ ]{0,6}", 1..6),
            cuts in proptest::collection::vec(0usize..4000, 0..16),
        ) {
            let body = whole_reply(&pieces);
            let bytes = body.as_bytes();
            let parts = test_utils::split::split_at(bytes, &cuts);
            let whole = test_utils::split::merged(decode(&[bytes]));
            prop_assert_eq!(whole.last(), Some(&finish(FinishReason::ToolCalls)));
            prop_assert_eq!(test_utils::split::merged(decode(&parts)), whole);
        }

        /// An error event anywhere in the reply ends it with that error, nothing after.
        #[test]
        fn an_error_event_mid_stream_ends_the_reply(
            at in 0usize..20,
            cuts in proptest::collection::vec(0usize..4000, 0..8),
        ) {
            let body = whole_reply(&["ab".to_owned()]);
            let mut events: Vec<&str> = body.split_inclusive("\r\n\r\n").collect();
            let at = at % events.len();
            let error = "event: error\r\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\r\n\r\n";
            events.insert(at, error);
            let body = events.concat();
            let parts = test_utils::split::split_at(body.as_bytes(), &cuts);
            let got = decode(&parts);
            prop_assert_eq!(kind_of(&got), Some(ProviderErrorKind::Busy));
            let finished = got.iter().any(|e| matches!(e, ProviderEvent::Finish { .. }));
            prop_assert!(!finished, "{:?}", got);
        }
    }
}
