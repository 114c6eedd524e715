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
//! - A reply that made tool calls finishes with [`FinishReason::ToolCalls`] even where the
//!   server says `stop` (llama.cpp and Ollama `/v1` do).

use std::time::Duration;

use ollm_types::{FinishReason, ProviderError, ProviderErrorKind, ProviderEvent, Usage};
use serde_json::Value;

use super::assemble::ToolCallAssembler;
use super::sse::SseFramer;
use super::think::{Side, ThinkSplitter};
use super::wire::{self, Chunk};
use crate::shell::{Decoder, partial};
use crate::{BridgeError, LineSplitter};

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
        Self::with_lines(prefix, LineSplitter::default())
    }

    /// A decoder with its own line cap.
    pub fn with_lines(prefix: impl Into<String>, lines: LineSplitter) -> Self {
        SseDecoder {
            sse: SseFramer::new(lines),
            reply: Reply {
                think: ThinkSplitter::new(),
                calls: ToolCallAssembler::new(prefix),
                finish_reason: None,
                usage: None,
                done: false,
                started: false,
            },
        }
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
        self.sse.push(bytes);
        self.drain(out);
    }

    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.reply.done {
            return;
        }
        self.sse.finish();
        self.drain(out);
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

impl SseDecoder {
    fn drain(&mut self, out: &mut Vec<ProviderEvent>) {
        while !self.reply.done {
            let event = match self.sse.next_event() {
                Ok(Some(event)) => event,
                Ok(None) => return,
                Err(e) => {
                    self.reply.fail(out, e.into());
                    return;
                }
            };
            if event.event == Some("error") {
                let error = in_stream_error(event.data);
                self.reply.fail(out, error);
                return;
            }
            if event.data.trim() == "[DONE]" {
                self.reply.complete(out);
                return;
            }
            match serde_json::from_str::<Chunk<'_>>(event.data) {
                Ok(chunk) => self.reply.apply(chunk, out),
                Err(e) => {
                    let error = BridgeError::Decode {
                        line: BridgeError::cap(event.data, 512),
                        message: e.to_string(),
                    };
                    self.reply.fail(out, error.into());
                }
            }
        }
    }
}

impl Reply {
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
                    || delta.tool_calls.as_ref().is_some_and(|c| !c.is_empty());
                for reasoning in [&delta.reasoning_content, &delta.reasoning]
                    .into_iter()
                    .flatten()
                {
                    if !reasoning.is_empty() {
                        out.push(ProviderEvent::ThinkingDelta {
                            text: reasoning.to_string(),
                        });
                    }
                }
                if let Some(content) = &delta.content {
                    self.think
                        .push(content, |side, text| out.push(piece(side, text)));
                }
                for call in delta.tool_calls.iter().flatten() {
                    self.calls.push(call);
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
        self.think.finish(|side, text| out.push(piece(side, text)));
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

    fn fail(&mut self, out: &mut Vec<ProviderEvent>, error: ProviderError) {
        out.push(ProviderEvent::Error { error });
        self.done = true;
    }
}

fn piece(side: Side, text: &str) -> ProviderEvent {
    match side {
        Side::Text => ProviderEvent::TextDelta { text: text.into() },
        Side::Thinking => ProviderEvent::ThinkingDelta { text: text.into() },
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
                thinking("r1"),
                thinking("r2"),
                thinking("t"),
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

    /// Merges adjacent text and thinking deltas, so that streams split differently compare
    /// equal.
    fn merged(events: Vec<ProviderEvent>) -> Vec<ProviderEvent> {
        let mut out: Vec<ProviderEvent> = Vec::new();
        for e in events {
            match (out.last_mut(), e) {
                (
                    Some(ProviderEvent::TextDelta { text: a }),
                    ProviderEvent::TextDelta { text: b },
                )
                | (
                    Some(ProviderEvent::ThinkingDelta { text: a }),
                    ProviderEvent::ThinkingDelta { text: b },
                ) => a.push_str(&b),
                (_, e) => out.push(e),
            }
        }
        out
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
            prop_assert_eq!(merged(decode(&parts)), merged(decode(&[bytes])));
        }
    }
}
