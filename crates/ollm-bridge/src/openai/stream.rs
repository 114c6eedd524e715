//! Bytes of a streamed chat completion to [`ProviderEvent`]s (pure).
//!
//! [`SseDecoder`] stacks the SSE decoder, the chunk parser, the `<think>` splitter and
//! the tool-call assembler. It keeps the stream contract of [`ProviderEvent`]: whatever
//! the bytes, the events end with exactly one `Finish` or `Error`, and nothing follows.
//!
//! - `data: [DONE]` ends the reply; so does the end of the body after a `finish_reason`
//!   (some servers omit `[DONE]`). The end of the body before either is an
//!   incomplete-stream error.
//! - The usage chunk comes after the `finish_reason` chunk, so `Finish` waits for the end.
//! - `event: error` and `data: {"error": ...}` end the reply with the server's error.
//! - Wire repair: OpenAI's legacy `function_call` (streamed or whole) is a call like any
//!   other, and so is a flat call without `function`; names are brought back to the
//!   offered tools ([`SseDecoder::with_tools`]).
//! - A reply that made tool calls finishes with [`FinishReason::ToolCalls`] even where the
//!   server says `stop` (llama.cpp and Ollama `/v1` do).

use std::borrow::Cow;
use std::ops::ControlFlow;
use std::time::Duration;

use ollm_types::{FinishReason, ProviderError, ProviderErrorKind, ProviderEvent, Usage};
use serde_json::Value;

use super::assemble::ToolCallAssembler;
use super::sse::{SseEvent, SseFramer};
use super::think::{Side, ThinkSplitter};
use super::wire::{self, Chunk};
use crate::BridgeError;
use crate::lines::DEFAULT_MAX_LINE;
use crate::shell::{Decoder, partial, push_text, push_thinking};

/// Decodes one streamed reply.
#[derive(Debug)]
pub struct SseDecoder {
    sse: SseFramer,
    reply: Reply,
}

/// Everything but the SSE layer, apart so that a parsed chunk can borrow from the SSE
/// decoder's buffer while the reply state changes.
#[derive(Debug)]
struct Reply {
    think: ThinkSplitter,
    calls: ToolCallAssembler,
    finish_reason: Option<FinishReason>,
    usage: Option<Usage>,
    done: bool,
    /// Whether any output (text, reasoning or a tool call) has arrived.
    started: bool,
    /// The body has ended: an event still pending was cut by that end.
    ending: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl SseDecoder {
    /// A decoder minting random ids for calls without one.
    pub fn new() -> Self {
        Self::with_id_prefix(format!("call_{:012x}", fastrand::u64(..) >> 16))
    }

    /// A decoder minting ids `<prefix>_0`, `<prefix>_1`, ... (for repeatable tests).
    pub fn with_id_prefix(prefix: impl Into<String>) -> Self {
        Self::with_max_line(prefix, DEFAULT_MAX_LINE)
    }

    /// A decoder with its own cap on a line (and on an event's data), in bytes.
    pub fn with_max_line(prefix: impl Into<String>, max_line: usize) -> Self {
        SseDecoder {
            sse: SseFramer::new(max_line),
            reply: Reply {
                think: ThinkSplitter::new(),
                calls: ToolCallAssembler::new(prefix),
                finish_reason: None,
                usage: None,
                done: false,
                started: false,
                ending: false,
            },
        }
    }

    /// The same decoder bringing tool-call names back to the tools the request offered
    /// (a different case, a `functions.` prefix or a `:N` suffix).
    pub fn with_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        let calls = std::mem::replace(&mut self.reply.calls, ToolCallAssembler::new(""));
        self.reply.calls = calls.with_offered(names);
        self
    }

    /// Whether any output (text, reasoning or a tool call) has arrived.
    pub fn has_output(&self) -> bool {
        self.reply.started
    }
}

impl Decoder for SseDecoder {
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
        if self.reply.finish_reason.is_some() {
            self.reply.complete(out);
        } else {
            self.reply.fail(
                out,
                BridgeError::Incomplete {
                    message: "the stream ended without [DONE] or a finish_reason".into(),
                }
                .into(),
            );
        }
    }

    /// The body broke (a network error or an idle timeout) with `error`: ends the reply,
    /// saying the output already delivered is partial when there was some.
    fn fail(&mut self, error: ProviderError, out: &mut Vec<ProviderEvent>) {
        if self.reply.done {
            return;
        }
        let error = if self.reply.started {
            partial(error, "the text and tool calls")
        } else {
            error
        };
        self.reply.fail(out, error);
    }
}

impl Reply {
    /// One SSE event of the reply; `Break` once the reply has ended.
    fn event(&mut self, event: SseEvent<'_>, out: &mut Vec<ProviderEvent>) -> ControlFlow<()> {
        if event.event == Some("error") {
            let error = in_stream_error(event.data);
            self.fail(out, error);
        } else if is_done(event.data) {
            self.complete(out);
        } else {
            match serde_json::from_str::<Chunk<'_>>(event.data) {
                Ok(chunk) => self.apply(chunk, out),
                // The last event, cut inside its JSON by the end of the body.
                Err(e) if self.ending && e.is_eof() => {
                    let error = BridgeError::Incomplete {
                        message: "the stream ended inside an event's JSON".into(),
                    };
                    let error = match self.started {
                        true => partial(error.into(), "the text and tool calls"),
                        false => error.into(),
                    };
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

    fn apply(&mut self, chunk: Chunk<'_>, out: &mut Vec<ProviderEvent>) {
        if let Some(error) = &chunk.error {
            self.fail(out, stream_error(error));
            return;
        }
        for choice in &chunk.choices {
            if let Some(delta) = &choice.delta {
                self.started |= [&delta.reasoning_content, &delta.reasoning, &delta.content]
                    .into_iter()
                    .flatten()
                    .any(|t| !t.is_empty())
                    || delta.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
                    || delta.function_call.is_some();
                for reasoning in [&delta.reasoning_content, &delta.reasoning]
                    .into_iter()
                    .flatten()
                {
                    if !reasoning.is_empty() {
                        push_thinking(out, Cow::Borrowed(reasoning));
                    }
                }
                if let Some(content) = &delta.content {
                    self.think
                        .push(content, |side, text| piece(out, side, text));
                }
                for call in delta.tool_calls.iter().flatten() {
                    self.calls.push(call);
                }
                if let Some(legacy) = &delta.function_call {
                    self.calls.push_legacy(legacy);
                }
            }
            if let Some(reason) = &choice.finish_reason {
                self.finish_reason = Some(finish_reason(reason));
            }
        }
        if chunk.usage.is_some() || chunk.timings.is_some() {
            let wire = chunk.usage.unwrap_or_default();
            let timings = chunk.timings.unwrap_or_default();
            // Server numbers: negative, NaN or too large for a Duration are dropped.
            let ms = |v: Option<f64>| v.and_then(|v| Duration::try_from_secs_f64(v / 1000.0).ok());
            let usage = self.usage.get_or_insert_with(Usage::default);
            usage.prompt_tokens = wire.prompt_tokens.or(usage.prompt_tokens);
            usage.completion_tokens = wire.completion_tokens.or(usage.completion_tokens);
            usage.prompt_eval_duration = ms(timings.prompt_ms).or(usage.prompt_eval_duration);
            usage.eval_duration = ms(timings.predicted_ms).or(usage.eval_duration);
        }
    }

    fn complete(&mut self, out: &mut Vec<ProviderEvent>) {
        self.think.finish(|side, text| piece(out, side, text));
        self.calls.close(out);
        if let Some(usage) = self.usage.take() {
            out.push(ProviderEvent::Usage { usage });
        }
        let mut reason = self.finish_reason.unwrap_or(FinishReason::Stop);
        if self.calls.emitted() > 0 && reason == FinishReason::Stop {
            reason = FinishReason::ToolCalls;
        }
        out.push(ProviderEvent::Finish { reason });
        self.done = true;
    }

    /// Ends the reply with `error`, after the text the `<think>` splitter still held back
    /// (a trailing `<` that might have opened a tag): what arrived is delivered, even when
    /// the reply breaks.
    fn fail(&mut self, out: &mut Vec<ProviderEvent>, error: ProviderError) {
        self.think.finish(|side, text| piece(out, side, text));
        out.push(ProviderEvent::Error { error });
        self.done = true;
    }
}

/// Whether an event's data is the `[DONE]` sentinel (whitespace around it tolerated); a
/// JSON chunk is ruled out by its first byte without trimming.
fn is_done(data: &str) -> bool {
    data.as_bytes().first() != Some(&b'{') && data.trim() == "[DONE]"
}

fn piece(out: &mut Vec<ProviderEvent>, side: Side, text: &str) {
    match side {
        Side::Text => push_text(out, Cow::Borrowed(text)),
        Side::Thinking => push_thinking(out, Cow::Borrowed(text)),
    }
}

/// Maps a `finish_reason`; unknown reasons (`content_filter`, server-specific ones) count
/// as an ordinary stop.
pub(crate) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        _ => FinishReason::Stop,
    }
}

/// The error of an `event: error` event, whose data is JSON (`{"error": ...}` or the error
/// itself) or plain text.
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

/// The neutral error for a server's in-stream error value; its `type`/`code` refines the
/// kind where servers use a known one.
fn stream_error(error: &Value) -> ProviderError {
    let message = wire::error_message(error);
    let mut mapped: ProviderError = BridgeError::InStream { message }.into();
    if let Some("exceed_context_size_error" | "context_length_exceeded") = wire::error_type(error) {
        mapped.kind = ProviderErrorKind::ContextOverflow;
        mapped.retryable = false;
    }
    mapped
}

/// Decodes a whole body at once (for tests, fixtures and benchmarks).
pub fn decode_all(decoder: &mut SseDecoder, body: &[u8]) -> Vec<ProviderEvent> {
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
        let mut d = SseDecoder::with_id_prefix("m");
        let mut out = Vec::new();
        for c in chunks {
            d.push(c, &mut out);
        }
        d.finish(&mut out);
        out
    }

    /// Writes chunks as SSE `data:` events.
    fn sse(chunks: &[Value]) -> String {
        chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
    }

    fn text(t: &str) -> ProviderEvent {
        ProviderEvent::TextDelta { text: t.into() }
    }
    fn thinking(t: &str) -> ProviderEvent {
        ProviderEvent::ThinkingDelta { text: t.into() }
    }
    fn finish(reason: FinishReason) -> ProviderEvent {
        ProviderEvent::Finish { reason }
    }
    fn content(t: &str) -> Value {
        json!({"choices":[{"index":0,"delta":{"content":t}}]})
    }
    fn kind_of(events: &[ProviderEvent]) -> Option<ProviderErrorKind> {
        match events.last() {
            Some(ProviderEvent::Error { error }) => Some(error.kind),
            _ => None,
        }
    }

    fn check(body: &str, expected: &[ProviderEvent]) {
        assert_eq!(decode(&[body.as_bytes()]), expected, "body: {body}");
    }

    #[test]
    fn text_reasoning_usage_and_finish() {
        let body = sse(&[
            json!({"choices":[{"delta":{"role":"assistant","content":null}}]}),
            json!({"choices":[{"delta":{"reasoning_content":"r1"}}]}),
            json!({"choices":[{"delta":{"reasoning":"r2"}}]}),
            content("<think>t</think>Hi"),
            json!({"choices":[{"delta":{},"finish_reason":"length"}]}),
            json!({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2},
                   "timings":{"prompt_ms":1.5,"predicted_ms":2.0}}),
        ]) + "data: [DONE]\n\n";
        let usage = Usage {
            prompt_tokens: Some(5),
            completion_tokens: Some(2),
            prompt_eval_duration: Some(Duration::from_micros(1500)),
            eval_duration: Some(Duration::from_millis(2)),
            ..Usage::default()
        };
        check(
            &body,
            &[
                // Reasoning from three events of one read: one event.
                thinking("r1r2t"),
                text("Hi"),
                ProviderEvent::Usage { usage },
                finish(FinishReason::Length),
            ],
        );
    }

    #[test]
    fn endings() {
        // [DONE] alone is a normal stop; a finish_reason then EOF is too.
        check("data: [DONE]\n\n", &[finish(FinishReason::Stop)]);
        check(
            &sse(&[json!({"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]})]),
            &[text("a"), finish(FinishReason::Stop)],
        );
        // Nothing follows the final event.
        check(
            &(String::from("data: [DONE]\n\n") + &sse(&[content("late")])),
            &[finish(FinishReason::Stop)],
        );
    }

    #[test]
    fn text_held_back_for_a_possible_tag_is_delivered_before_an_error() {
        let body = format!(
            "{}data: {{\"error\": {{\"message\": \"boom\"}}}}\n\n",
            sse(&[content("a <")])
        );
        let events = decode(&[body.as_bytes()]);
        let texts: String = events
            .iter()
            .filter_map(|e| match e {
                ProviderEvent::TextDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, "a <", "{events:?}");
        assert!(matches!(events.last(), Some(ProviderEvent::Error { .. })));
    }

    #[test]
    fn failures_are_typed() {
        let cases: &[(&str, ProviderErrorKind)] = &[
            (
                "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\n",
                ProviderErrorKind::IncompleteStream,
            ),
            ("", ProviderErrorKind::IncompleteStream),
            ("data: {not json\n\n", ProviderErrorKind::Protocol),
            (
                "data: {\"error\":{\"message\":\"boom\",\"type\":\"server_error\"}}\n\n",
                ProviderErrorKind::Server,
            ),
            (
                "event: error\ndata: {\"message\":\"boom\"}\n\n",
                ProviderErrorKind::Server,
            ),
            (
                "event: error\ndata: plain words\n\n",
                ProviderErrorKind::Server,
            ),
            (
                "data: {\"error\":{\"code\":400,\"message\":\"too long\",\"type\":\"exceed_context_size_error\"}}\n\n",
                ProviderErrorKind::ContextOverflow,
            ),
        ];
        for (body, kind) in cases {
            let events = decode(&[body.as_bytes()]);
            assert_eq!(kind_of(&events), Some(*kind), "body: {body} -> {events:?}");
        }
        let events = decode(&[b"event: error\ndata: {\"error\":{\"message\":\"boom\"}}\n\n"]);
        // A JSON error inside `event: error` is the server's error, and ends the reply.
        match &events[..] {
            [ProviderEvent::Error { error }] => assert_eq!(error.kind, ProviderErrorKind::Server),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn timings_out_of_range_are_dropped() {
        // (prompt_ms, the duration kept)
        let cases: &[(Value, Option<Duration>)] = &[
            (json!(1.5), Some(Duration::from_micros(1500))),
            (json!(0), Some(Duration::ZERO)),
            (json!(-1.0), None),
            (json!(1e300), None),
            (json!(f64::MAX), None),
            (json!(1.9e22), None), // just past u64::MAX seconds
        ];
        for (ms, want) in cases {
            let body = sse(&[
                content("a"),
                json!({"choices":[],"timings":{"prompt_ms":ms}}),
            ]) + "data: [DONE]\n\n";
            let events = decode(&[body.as_bytes()]);
            let got = events.iter().find_map(|e| match e {
                ProviderEvent::Usage { usage } => Some(usage.prompt_eval_duration),
                _ => None,
            });
            assert_eq!(got, Some(*want), "prompt_ms {ms} -> {events:?}");
            assert_eq!(events.last(), Some(&finish(FinishReason::Stop)));
        }
    }

    #[test]
    fn a_broken_body_after_output_is_partial_and_an_idle_timeout_stays_a_timeout() {
        let idle = || BridgeError::Timeout {
            phase: crate::TimeoutPhase::Idle,
            after: Duration::from_secs(1),
        };
        let call = json!({"choices":[{"delta":{"tool_calls":[
            {"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\""}}]}}]});
        // (body before the break, the kind of the final error)
        let cases: Vec<(String, ProviderErrorKind)> = vec![
            (String::new(), ProviderErrorKind::Timeout),
            (
                sse(&[json!({"choices":[{"delta":{"role":"assistant"}}]})]),
                ProviderErrorKind::Timeout,
            ),
            // Issue 16: after partial text an idle timeout is still a timeout (exit 3).
            (sse(&[content("Hel")]), ProviderErrorKind::Timeout),
            (
                sse(&[json!({"choices":[{"delta":{"reasoning_content":"r"}}]})]),
                ProviderErrorKind::Timeout,
            ),
            (sse(&[call]), ProviderErrorKind::Timeout),
        ];
        for (body, kind) in cases {
            let mut d = SseDecoder::with_id_prefix("m");
            let mut out = Vec::new();
            d.push(body.as_bytes(), &mut out);
            d.fail(idle().into(), &mut out);
            assert_eq!(kind_of(&out), Some(kind), "body: {body} -> {out:?}");
            assert!(d.is_ended());
            // Nothing follows the error.
            d.finish(&mut out);
            d.fail(idle().into(), &mut out);
            assert_eq!(kind_of(&out), Some(kind));
            assert_eq!(
                out.iter()
                    .filter(|e| matches!(e, ProviderEvent::Error { .. }))
                    .count(),
                1
            );
        }
    }

    #[test]
    fn tool_calls_finish_with_tool_calls_even_after_stop() {
        let body = sse(&[json!({"choices":[{"delta":{"tool_calls":[
                {"index":0,"id":"a","function":{"name":"f","arguments":"{\"x\":1}"}}
            ]},"finish_reason":"stop"}]})])
            + "data: [DONE]\n\n";
        check(
            &body,
            &[
                ProviderEvent::ToolCall {
                    call: ToolCall::new("a", "f", json!({"x":1})).unwrap(),
                },
                finish(FinishReason::ToolCalls),
            ],
        );
        let bad = sse(&[json!({"choices":[{"delta":{"tool_calls":[
            {"index":0,"function":{"name":"f","arguments":"{oops"}}
        ]},"finish_reason":"tool_calls"}]})]);
        let events = decode(&[bad.as_bytes()]);
        assert!(
            matches!(
                &events[0],
                ProviderEvent::Warning {
                    warning: Warning {
                        kind: WarningKind::MalformedOutput,
                        ..
                    }
                }
            ),
            "{events:?}"
        );
        assert!(matches!(
            &events[2],
            ProviderEvent::Finish {
                reason: FinishReason::ToolCalls
            }
        ));
    }

    proptest! {
        #[test]
        fn any_byte_split_gives_the_same_events(
            pieces in proptest::collection::vec("[a-zé<>/]{0,5}|<think>|</think>", 1..8),
            cuts in proptest::collection::vec(0usize..2000, 0..16),
        ) {
            let mut chunks: Vec<Value> = pieces.iter().map(|p| content(p)).collect();
            chunks.push(json!({"choices":[{"delta":{"tool_calls":[
                {"index":0,"id":"a","function":{"name":"f","arguments":"{\"k\":"}}]}}]}));
            chunks.push(json!({"choices":[{"delta":{"tool_calls":[
                {"index":0,"function":{"arguments":"\"é\"}"}}]},"finish_reason":"tool_calls"}]}));
            let body = sse(&chunks) + ": keep-alive\r\n\r\ndata: [DONE]\r\n\r\n";
            let bytes = body.as_bytes();
            let parts = test_utils::split::split_at(bytes, &cuts);
            prop_assert_eq!(
                test_utils::split::merged(decode(&parts)),
                test_utils::split::merged(decode(&[bytes]))
            );
        }
    }

    /// Decodes `chunks` (as `data:` events, then `[DONE]`) offering the tools `read_file`
    /// and `list_dir`, and keeps the tool calls and the finish.
    fn repaired(chunks: &[Value]) -> Vec<ProviderEvent> {
        let body = sse(chunks) + "data: [DONE]\n\n";
        let mut d = SseDecoder::with_id_prefix("m")
            .with_tools(["read_file".to_owned(), "list_dir".to_owned()]);
        decode_all(&mut d, body.as_bytes())
    }

    fn delta(d: Value) -> Value {
        json!({"choices":[{"index":0,"delta":d}]})
    }

    #[test]
    fn a_stream_cut_mid_json_is_incomplete_and_llama_legacy_errors_are_server_errors() {
        // Issue 12: a body cut inside an event's JSON was a protocol error.
        let cut = format!(
            "{}data: {{\"choices\":[{{\"delta\":{{\"cont",
            sse(&[content("a")])
        );
        assert_eq!(
            kind_of(&decode(&[cut.as_bytes()])),
            Some(ProviderErrorKind::IncompleteStream)
        );
        // A whole event that is not JSON is still a protocol error.
        assert_eq!(
            kind_of(&decode(&[b"data: {]\n\n"])),
            Some(ProviderErrorKind::Protocol)
        );
        // Issue 12: llama.cpp's legacy `error:` field was dropped.
        let events = decode(&[
            b"error: {\"code\":500,\"message\":\"slot gone\",\"type\":\"server_error\"}\n\n",
        ]);
        match events.last() {
            Some(ProviderEvent::Error { error }) => {
                assert_eq!(error.kind, ProviderErrorKind::Server);
                assert!(error.message.contains("slot gone"), "{}", error.message);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wire_repair_table() {
        let call = |id: &str, name: &str, args: Value| ProviderEvent::ToolCall {
            call: ToolCall::new(id, name, args).unwrap(),
        };
        let done = finish(FinishReason::ToolCalls);
        let cases: Vec<(&str, Vec<Value>, Vec<ProviderEvent>)> = vec![
            (
                "legacy function_call, streamed",
                vec![
                    delta(json!({"function_call":{"name":"read_file","arguments":""}})),
                    delta(json!({"function_call":{"arguments":"{\"path\":"}})),
                    delta(json!({"function_call":{"arguments":"\"a\"}"}})),
                    json!({"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}),
                ],
                vec![call("m_0", "read_file", json!({"path":"a"})), done.clone()],
            ),
            (
                "legacy function_call, whole",
                vec![delta(
                    json!({"function_call":{"name":"list_dir","arguments":"{\"dir\":\".\"}"}}),
                )],
                vec![call("m_0", "list_dir", json!({"dir":"."})), done.clone()],
            ),
            (
                "flat call without function or type",
                vec![delta(json!({"tool_calls":[
                    {"index":0,"id":"c1","name":"read_file","arguments":"{\"path\":\"x\"}"}
                ]}))],
                vec![call("c1", "read_file", json!({"path":"x"})), done.clone()],
            ),
            (
                "flat call streamed, no id (minted), arguments as an object",
                vec![
                    delta(json!({"tool_calls":[{"index":0,"name":"list_dir"}]})),
                    delta(json!({"tool_calls":[{"index":0,"arguments":{"dir":"src"}}]})),
                ],
                vec![call("m_0", "list_dir", json!({"dir":"src"})), done.clone()],
            ),
            (
                "names off by case, prefix and index",
                vec![delta(json!({"tool_calls":[
                    {"index":0,"id":"a","type":"function",
                     "function":{"name":"functions.READ_FILE:0","arguments":"{}"}},
                    {"index":1,"id":"b","function":{"name":"List_Dir","arguments":"{}"}},
                    {"index":2,"id":"c","function":{"name":"delete_all","arguments":"{}"}}
                ]}))],
                vec![
                    call("a", "read_file", json!({})),
                    call("b", "list_dir", json!({})),
                    call("c", "delete_all", json!({})),
                    done.clone(),
                ],
            ),
        ];
        for (what, chunks, want) in cases {
            assert_eq!(repaired(&chunks), want, "{what}");
        }
    }

    proptest! {
        /// A legacy `function_call` cut into any fragments assembles to the one call.
        #[test]
        fn any_split_of_a_legacy_call_assembles_it(
            value in "[a-z0-9 ]{0,20}",
            cuts in proptest::collection::vec(0usize..40, 0..6),
        ) {
            let args = json!({"q": value}).to_string();
            let mut cuts = cuts;
            cuts.push(args.len());
            cuts.sort_unstable();
            cuts.dedup();
            let mut chunks = vec![delta(json!({"function_call":{"name":"read_file"}}))];
            let mut from = 0;
            for cut in cuts.into_iter().filter(|&c| c <= args.len()) {
                chunks.push(delta(json!({"function_call":{"arguments":&args[from..cut]}})));
                from = cut;
            }
            let events = repaired(&chunks);
            let want = ToolCall::new("m_0", "read_file", json!({"q": value})).unwrap();
            prop_assert_eq!(&events[0], &ProviderEvent::ToolCall { call: want });
        }
    }
}
