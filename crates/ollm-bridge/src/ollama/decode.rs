//! Bytes of a streamed `/api/chat` reply -> [`ProviderEvent`]s: pure and incremental.
//!
//! The decoder decodes complete lines straight from each chunk and keeps only a cut line
//! in its [`LineSplitter`] (the body is never re-copied per line, nor copied at all but for cut lines); it parses
//! each line once, straight into the borrowed [`ChatLine`] (the final line a second time,
//! for its statistics: [`FinalLine`]), as text whose UTF-8 was checked once for the whole
//! line ([`parse_json`]); text is copied only into the
//! event that carries it. Feed it chunks cut anywhere (mid-line, mid-character) with
//! [`NdjsonDecoder::push`], then call [`NdjsonDecoder::finish`] at the end of the body. It
//! closes every stream with exactly one `Finish` or `Error` event and emits nothing after.

use std::time::Duration;

use ollm_types::{
    FinishReason, INVALID_ARGUMENTS_KEY, ProviderError, ProviderErrorKind, ProviderEvent, ToolCall,
    Usage, Warning, WarningKind,
};
use serde_json::{Map, Value};

use super::truncation::{TruncationCheck, truncation_warning};
use super::wire::{ChatLine, FinalLine, WireStr, WireToolCallIn};
use crate::lines::{DEFAULT_MAX_LINE, parse_json};
use crate::repair::Offered;
use crate::shell::{Decoder, partial, push_text, push_thinking};
use crate::{BridgeError, LineSplitter};

/// How much of a malformed line an error keeps.
const LINE_IN_ERROR: usize = 200;

/// Names tool calls: mints ids for calls the server sent without one (a per-stream random
/// prefix and a counter, so ids are unique within a conversation and across streams), and
/// brings call names back to the offered tools (see `repair`).
#[derive(Debug)]
struct IdMint {
    prefix: String,
    next: u64,
    offered: Offered,
}

impl IdMint {
    fn mint(&mut self) -> String {
        self.next += 1;
        format!("{}{}", self.prefix, self.next)
    }
}

/// Where a push started in the events: how many there were and, when the last was
/// answer text (which the push may extend), its length.
///
/// The characters of text delivered (for the "partial reply" message) are counted once
/// per push over the text it added, not per line: counting a token's few bytes cost a
/// fast stream's line about a fifth of the decoder's own work (issue 28).
struct TextMark {
    events: usize,
    last_text: Option<usize>,
}

impl TextMark {
    fn of(out: &[ProviderEvent]) -> Self {
        let last_text = match out.last() {
            Some(ProviderEvent::TextDelta { text }) => Some(text.len()),
            _ => None,
        };
        TextMark {
            events: out.len(),
            last_text,
        }
    }

    /// The characters of answer text added to `out` since the mark.
    fn chars_since(&self, out: &[ProviderEvent]) -> usize {
        let extended = match (self.last_text, self.events.checked_sub(1)) {
            (Some(len), Some(last)) => match out.get(last) {
                Some(ProviderEvent::TextDelta { text }) => text.get(len..).map_or(0, count),
                _ => 0,
            },
            _ => 0,
        };
        let added = out.get(self.events..).unwrap_or_default().iter();
        let added: usize = added
            .map(|event| match event {
                ProviderEvent::TextDelta { text } => count(text),
                _ => 0,
            })
            .sum();
        extended + added
    }
}

fn count(text: &str) -> usize {
    text.chars().count()
}

/// What the decoder has seen so far.
#[derive(Debug, Default)]
struct Seen {
    text_chars: usize,
    calls: usize,
    ended: bool,
}

/// The incremental decoder of one `/api/chat` stream.
#[derive(Debug)]
pub struct NdjsonDecoder {
    lines: LineSplitter,
    max_line: usize,
    ids: IdMint,
    seen: Seen,
    check: Option<TruncationCheck>,
}

impl Default for NdjsonDecoder {
    fn default() -> Self {
        Self::new(None)
    }
}

impl NdjsonDecoder {
    /// A decoder; with `check`, the final line is judged for silent truncation.
    pub fn new(check: Option<TruncationCheck>) -> Self {
        NdjsonDecoder {
            lines: LineSplitter::default(),
            max_line: DEFAULT_MAX_LINE,
            ids: IdMint {
                prefix: format!("call_{:08x}_", fastrand::u32(..)),
                next: 0,
                offered: Offered::default(),
            },
            seen: Seen::default(),
            check,
        }
    }

    /// The same decoder with a line cap of `max_line` bytes.
    pub fn with_max_line(mut self, max_line: usize) -> Self {
        self.lines = LineSplitter::new(max_line);
        self.max_line = max_line;
        self
    }

    /// The same decoder minting ids `<prefix>1`, `<prefix>2`, ... (for tests).
    pub fn with_id_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.ids.prefix = prefix.into();
        self
    }

    /// The same decoder bringing tool-call names back to the tools the request offered
    /// (a different case, a `functions.` prefix or a `:N` suffix).
    pub fn with_tools(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.ids.offered = Offered::new(names);
        self
    }
}

impl NdjsonDecoder {
    /// [`Decoder::push`]'s lines (the text they add is counted once, by the caller).
    fn push_lines(&mut self, chunk: &[u8], out: &mut Vec<ProviderEvent>) {
        let mut rest = chunk;
        if self.lines.pending() > 0 {
            // Finish the line the previous chunk cut.
            let take = memchr::memchr(b'\n', rest).map_or(rest.len(), |i| i + 1);
            self.lines.push(&rest[..take]);
            rest = &rest[take..];
            match self.lines.next_line() {
                Ok(Some(line)) => {
                    if let Err(e) =
                        decode_line(line, &mut self.seen, &mut self.ids, self.check, out)
                    {
                        return end_with(&mut self.seen, e.into(), out);
                    }
                    if self.seen.ended {
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => return end_with(&mut self.seen, e.into(), out),
            }
        }
        while let Some(i) = memchr::memchr(b'\n', rest) {
            let line = &rest[..i];
            rest = &rest[i + 1..];
            if line.len() > self.max_line {
                let e = BridgeError::LineTooLong {
                    limit: self.max_line,
                };
                return end_with(&mut self.seen, e.into(), out);
            }
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Err(e) = decode_line(line, &mut self.seen, &mut self.ids, self.check, out) {
                return end_with(&mut self.seen, e.into(), out);
            }
            if self.seen.ended {
                return;
            }
        }
        if !rest.is_empty() {
            self.lines.push(rest);
            if let Err(e) = self.lines.next_line() {
                end_with(&mut self.seen, e.into(), out);
            }
        }
    }
}

impl Decoder for NdjsonDecoder {
    fn is_ended(&self) -> bool {
        self.seen.ended
    }

    /// Decodes a chunk, appending events to `out`. Ignored once the stream has ended.
    ///
    /// Complete lines are decoded straight from `chunk`; only a line cut by the chunk's end
    /// goes through the [`LineSplitter`]'s buffer, so the body is not copied.
    fn push(&mut self, chunk: &[u8], out: &mut Vec<ProviderEvent>) {
        if self.seen.ended {
            return;
        }
        let mark = TextMark::of(out);
        self.push_lines(chunk, out);
        self.seen.text_chars += mark.chars_since(out);
    }

    /// The body ended: decodes a last line without newline, then, if no final line came,
    /// ends the stream with an `IncompleteStream` error.
    fn finish(&mut self, out: &mut Vec<ProviderEvent>) {
        if self.seen.ended {
            return;
        }
        if let Some(line) = self.lines.finish() {
            let cut = cut_mid_json(line);
            let mark = TextMark::of(out);
            let decoded = decode_line(line, &mut self.seen, &mut self.ids, self.check, out);
            self.seen.text_chars += mark.chars_since(out);
            if let Err(e) = decoded {
                // A last line that is the start of a JSON value was cut by the end of the
                // body: the reply is incomplete, not malformed.
                let error = if cut {
                    incomplete(&self.seen)
                } else {
                    e.into()
                };
                return end_with(&mut self.seen, error, out);
            }
        }
        if !self.seen.ended {
            let err = incomplete(&self.seen);
            end_with(&mut self.seen, err, out);
        }
    }

    /// The body broke (a network error, an idle timeout) with `error`: ends the stream.
    /// After some output the error says the text already delivered is partial.
    fn fail(&mut self, error: ProviderError, out: &mut Vec<ProviderEvent>) {
        if self.seen.ended {
            return;
        }
        let started = self.seen.text_chars > 0 || self.seen.calls > 0;
        let error = if started {
            let delivered = format!(
                "the {} characters of text and {} tool calls",
                self.seen.text_chars, self.seen.calls
            );
            partial(error, &delivered)
        } else {
            error
        };
        end_with(&mut self.seen, error, out);
    }
}

fn end_with(seen: &mut Seen, error: ProviderError, out: &mut Vec<ProviderEvent>) {
    seen.ended = true;
    out.push(ProviderEvent::Error { error });
}

/// The body ended before the final line.
fn incomplete(seen: &Seen) -> ProviderError {
    ProviderError::from(BridgeError::Incomplete {
        message: format!(
            "Ollama's reply stopped before its final line; the {} characters of text \
             and {} tool calls already delivered are partial",
            seen.text_chars, seen.calls
        ),
    })
}

/// Whether `line` is a JSON text that ended before it was complete.
fn cut_mid_json(line: &[u8]) -> bool {
    serde_json::from_slice::<serde::de::IgnoredAny>(line).is_err_and(|e| e.is_eof())
}

fn protocol(line: &[u8], message: impl std::fmt::Display) -> BridgeError {
    BridgeError::Decode {
        line: BridgeError::cap(&String::from_utf8_lossy(line), LINE_IN_ERROR),
        message: message.to_string(),
    }
}

fn nanos(n: Option<u64>) -> Option<Duration> {
    n.map(Duration::from_nanos)
}

/// Decodes one line; errors are turned into the final `Error` event by the caller.
///
/// The hot path is a line of text or reasoning: an in-stream error, tool calls and the
/// final line are out of line, so this frame stays small (issue 28: moving the parsed
/// line through a frame sized for the final line's statistics was much of its cost).
fn decode_line(
    line: &[u8],
    seen: &mut Seen,
    ids: &mut IdMint,
    check: Option<TruncationCheck>,
    out: &mut Vec<ProviderEvent>,
) -> Result<(), BridgeError> {
    if line.first().is_none_or(u8::is_ascii_whitespace) && line.iter().all(u8::is_ascii_whitespace)
    {
        return Ok(());
    }
    let parsed: ChatLine<'_> = parse_json(line).map_err(|e| protocol(line, e))?;
    if let Some(error) = parsed.error {
        in_stream_error(error, seen, out);
        return Ok(());
    }
    if let Some(message) = parsed.message {
        if let Some(thinking) = message.thinking.filter(|t| !t.0.is_empty()) {
            push_thinking(out, thinking.0);
        }
        if let Some(content) = message.content.filter(|t| !t.0.is_empty()) {
            push_text(out, content.0);
        }
        if let Some(calls) = message.tool_calls {
            tool_calls(calls, seen, ids, out);
        }
    }
    match parsed.done {
        true => final_line(line, seen, check, out),
        false => Ok(()),
    }
}

/// The server's error inside the stream: the reply's last event.
#[cold]
#[inline(never)]
fn in_stream_error(error: WireStr<'_>, seen: &mut Seen, out: &mut Vec<ProviderEvent>) {
    seen.ended = true;
    out.push(ProviderEvent::Error {
        error: ProviderError::new(ProviderErrorKind::Server, error.0.into_owned())
            .with_retryable(false),
    });
}

/// The tool calls of a line, in order.
#[cold]
#[inline(never)]
fn tool_calls(
    calls: Vec<WireToolCallIn>,
    seen: &mut Seen,
    ids: &mut IdMint,
    out: &mut Vec<ProviderEvent>,
) {
    for call in calls {
        let call = tool_call(call, ids, out);
        seen.calls += 1;
        out.push(ProviderEvent::ToolCall { call });
    }
}

/// The final line (`done: true`): its statistics (a second parse of this one line), the
/// truncation check, the finish reason.
#[cold]
#[inline(never)]
fn final_line(
    line: &[u8],
    seen: &mut Seen,
    check: Option<TruncationCheck>,
    out: &mut Vec<ProviderEvent>,
) -> Result<(), BridgeError> {
    let last: FinalLine<'_> = parse_json(line).map_err(|e| protocol(line, e))?;
    seen.ended = true;
    out.push(ProviderEvent::Usage {
        usage: Usage {
            prompt_tokens: last.prompt_eval_count,
            completion_tokens: last.eval_count,
            total_duration: nanos(last.total_duration),
            load_duration: nanos(last.load_duration),
            prompt_eval_duration: nanos(last.prompt_eval_duration),
            eval_duration: nanos(last.eval_duration),
        },
    });
    if let (Some(check), Some(read)) = (check, last.prompt_eval_count) {
        if let Some(warning) = truncation_warning(&check, read) {
            out.push(ProviderEvent::Warning { warning });
        }
    }
    let reason = if seen.calls > 0 {
        FinishReason::ToolCalls
    } else if last.done_reason.as_ref().is_some_and(|r| r.0 == "length") {
        FinishReason::Length
    } else {
        FinishReason::Stop
    };
    out.push(ProviderEvent::Finish { reason });
    Ok(())
}

/// A wire tool call -> a [`ToolCall`]: the server's id or a minted one. Arguments should
/// be an object; a string holding a JSON object (double-encoded) is that object, `null` and
/// blank text are `{}`. Anything else is not a crash: the call is emitted with the raw
/// text under [`INVALID_ARGUMENTS_KEY`] after a `MalformedOutput` warning, so the turn loop
/// answers it with an error result and the model can try again.
fn tool_call(call: WireToolCallIn, ids: &mut IdMint, out: &mut Vec<ProviderEvent>) -> ToolCall {
    let id = match call.id {
        Some(id) if !id.is_empty() => id,
        _ => ids.mint(),
    };
    // A flat call (`name` and `arguments` beside `id`, no `function`) is the same call.
    let (name, arguments) = match call.function {
        Some(function) => (function.name, function.arguments),
        None => (call.name.unwrap_or_default(), call.arguments),
    };
    let name = ids.offered.normalise(name);
    let arguments = match arguments {
        Value::Object(map) => Ok(map),
        Value::Null => Ok(Map::new()),
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(map)) => Ok(map),
            Ok(Value::Null) => Ok(Map::new()),
            Ok(other) => Err((
                s,
                format!("a string holding a JSON {}", ollm_types::json_type(&other)),
            )),
            Err(e) => Err((s, format!("a string that is not JSON: {e}"))),
        },
        other => {
            let why = format!("a JSON {}", ollm_types::json_type(&other));
            Err((other.to_string(), why))
        }
    };
    let arguments = arguments.unwrap_or_else(|(raw, why)| {
        out.push(ProviderEvent::Warning {
            warning: Warning::new(
                WarningKind::MalformedOutput,
                format!(
                    "the arguments of call {id} to {name:?} are not a JSON object ({why}); \
                     the call is answered with an error"
                ),
            ),
        });
        let mut map = Map::new();
        map.insert(INVALID_ARGUMENTS_KEY.to_owned(), Value::String(raw));
        map
    });
    ToolCall {
        id,
        name,
        arguments,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn decode(body: &str, check: Option<TruncationCheck>) -> Vec<ProviderEvent> {
        let mut d = NdjsonDecoder::new(check).with_id_prefix("m");
        let mut out = Vec::new();
        d.push(body.as_bytes(), &mut out);
        d.finish(&mut out);
        out
    }

    fn text(t: &str) -> ProviderEvent {
        ProviderEvent::TextDelta { text: t.into() }
    }

    fn finish(reason: FinishReason) -> ProviderEvent {
        ProviderEvent::Finish { reason }
    }

    fn usage(p: u32, c: u32) -> ProviderEvent {
        ProviderEvent::Usage {
            usage: Usage {
                prompt_tokens: Some(p),
                completion_tokens: Some(c),
                ..Usage::default()
            },
        }
    }

    fn kind(events: &[ProviderEvent]) -> Option<ProviderErrorKind> {
        match events.last() {
            Some(ProviderEvent::Error { error }) => Some(error.kind),
            _ => None,
        }
    }

    fn check(body: &str, expected: Vec<ProviderEvent>) {
        assert_eq!(decode(body, None), expected, "body:\n{body}");
    }

    const DONE: &str = r#"{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":10,"eval_count":2}"#;

    #[test]
    fn the_partial_message_counts_the_characters_delivered_however_the_body_is_cut() {
        // Text (multi-byte too) around reasoning, and no final line: the message counts
        // characters, whether a push extends the text event of the one before (the
        // events not yet handed out) or starts anew, and for a last line without newline.
        let lines = concat!(
            r#"{"message":{"content":"héllo "},"done":false}"#,
            "\n",
            r#"{"message":{"thinking":"hm"},"done":false}"#,
            "\n",
            r#"{"message":{"content":"wörld "},"done":false}"#,
            "\n",
            r#"{"message":{"content":"✓"},"done":false}"#,
        );
        let want = "the 13 characters of text";
        for body in [lines.to_owned(), format!("{lines}\n")] {
            let body = body.as_bytes();
            for cut in 0..=body.len() {
                for handed_out in [false, true] {
                    let mut d = NdjsonDecoder::new(None);
                    let mut out = Vec::new();
                    d.push(&body[..cut], &mut out);
                    if handed_out {
                        out.clear();
                    }
                    d.push(&body[cut..], &mut out);
                    d.finish(&mut out);
                    let Some(ProviderEvent::Error { error }) = out.last() else {
                        panic!("{out:?}")
                    };
                    assert!(
                        error.message.contains(want),
                        "cut {cut}, handed out {handed_out}: {}",
                        error.message
                    );
                }
            }
        }
        let mut d = NdjsonDecoder::new(None);
        let mut out = Vec::new();
        d.push(lines.as_bytes(), &mut out);
        d.fail(
            BridgeError::Body {
                message: "reset".into(),
            }
            .into(),
            &mut out,
        );
        let Some(ProviderEvent::Error { error }) = out.last() else {
            panic!("{out:?}")
        };
        // The last line has no newline yet: only the first three were delivered.
        assert!(
            error.message.contains("the 12 characters of text"),
            "{}",
            error.message
        );
    }

    #[test]
    fn text_thinking_and_finish() {
        check(
            &format!(
                "{}\n{}\n\n{}\n{DONE}\n",
                r#"{"model":"m","created_at":"t","message":{"role":"assistant","content":"","thinking":"hmm"},"done":false}"#,
                r#"{"message":{"role":"assistant","content":"Hé\n\"x\""},"done":false}"#,
                r#"{"message":{"role":"assistant","content":"!"},"done":false}"#,
            ),
            vec![
                ProviderEvent::ThinkingDelta { text: "hmm".into() },
                // Two lines in one read: one event.
                text("Hé\n\"x\"!"),
                usage(10, 2),
                finish(FinishReason::Stop),
            ],
        );
    }

    #[test]
    fn text_of_one_read_is_one_event_and_reads_apart_stay_apart() {
        let line = |t: &str| format!("{{\"message\":{{\"content\":\"{t}\"}},\"done\":false}}\n");
        let thinking =
            r#"{"message":{"content":"","thinking":"t"},"done":false}"#.to_owned() + "\n";
        let mut d = NdjsonDecoder::default();
        let mut out = Vec::new();
        d.push(
            (line("a") + &line("b") + &thinking + &line("c")).as_bytes(),
            &mut out,
        );
        d.push(line("d").as_bytes(), &mut out);
        assert_eq!(
            out,
            [
                text("ab"),
                ProviderEvent::ThinkingDelta { text: "t".into() },
                text("cd"),
            ],
            "the second read joins the last event of the first only because both are \
             in the same `out`; the shell hands each read's events on before the next"
        );
        let mut apart = Vec::new();
        let mut d = NdjsonDecoder::default();
        d.push(line("a").as_bytes(), &mut apart);
        let first = apart.split_off(0);
        d.push(line("b").as_bytes(), &mut apart);
        assert_eq!((first, apart), (vec![text("a")], vec![text("b")]));
    }

    #[test]
    fn durations_and_length() {
        let events = decode(
            r#"{"message":{"content":"a"},"done":true,"done_reason":"length","total_duration":1500,"load_duration":2,"prompt_eval_duration":3,"eval_duration":4}"#,
            None,
        );
        assert_eq!(
            events,
            vec![
                text("a"),
                ProviderEvent::Usage {
                    usage: Usage {
                        total_duration: Some(Duration::from_nanos(1500)),
                        load_duration: Some(Duration::from_nanos(2)),
                        prompt_eval_duration: Some(Duration::from_nanos(3)),
                        eval_duration: Some(Duration::from_nanos(4)),
                        ..Usage::default()
                    }
                },
                finish(FinishReason::Length),
            ]
        );
    }

    #[test]
    fn tool_calls_with_and_without_ids() {
        let body = format!(
            "{}\n{DONE}\n",
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_x","function":{"index":0,"name":"a","arguments":{"k":1}}},{"function":{"name":"b","arguments":{}}},{"function":{"name":"c","arguments":"{\"s\":true}"}}]},"done":false}"#
        );
        check(
            &body,
            vec![
                ProviderEvent::ToolCall {
                    call: ToolCall::new("call_x", "a", json!({"k": 1})).unwrap(),
                },
                ProviderEvent::ToolCall {
                    call: ToolCall::new("m1", "b", json!({})).unwrap(),
                },
                ProviderEvent::ToolCall {
                    call: ToolCall::new("m2", "c", json!({"s": true})).unwrap(),
                },
                usage(10, 2),
                finish(FinishReason::ToolCalls),
            ],
        );
    }

    #[test]
    fn bad_arguments_reach_the_model_as_an_invalid_call() {
        // (wire arguments, the raw text handed on, or the object they decode to)
        let cases: &[(&str, Result<Value, &str>)] = &[
            (r#""{\"s\":true}""#, Ok(json!({"s": true}))),
            (r#""""#, Ok(json!({}))),
            ("null", Ok(json!({}))),
            (r#""[1]""#, Err("[1]")),
            (r#""{\"path\": ""#, Err("{\"path\": ")),
            (r#""not json""#, Err("not json")),
            ("[1,2]", Err("[1,2]")),
            ("7", Err("7")),
            ("true", Err("true")),
        ];
        for (wire, want) in cases {
            let body = format!(
                "{{\"message\":{{\"tool_calls\":[{{\"function\":{{\"name\":\"b\",\"arguments\":{wire}}}}}]}},\"done\":false}}\n{DONE}\n"
            );
            let events = decode(&body, None);
            let expected_call = ProviderEvent::ToolCall {
                call: ToolCall::new(
                    "m1",
                    "b",
                    match want {
                        Ok(v) => v.clone(),
                        Err(raw) => json!({ INVALID_ARGUMENTS_KEY: raw }),
                    },
                )
                .unwrap(),
            };
            let mut expected = Vec::new();
            if want.is_err() {
                match &events[0] {
                    ProviderEvent::Warning { warning } => {
                        assert_eq!(warning.kind, WarningKind::MalformedOutput, "{wire}");
                    }
                    other => panic!("{wire}: {other:?}"),
                }
                expected.push(events[0].clone());
            }
            expected.extend([expected_call, usage(10, 2), finish(FinishReason::ToolCalls)]);
            assert_eq!(events, expected, "arguments {wire}");
        }
    }

    #[test]
    fn minted_ids_differ_between_streams() {
        let body = format!(
            "{}\n{DONE}\n",
            r#"{"message":{"tool_calls":[{"function":{"name":"b","arguments":{}}}]},"done":false}"#
        );
        let id = |events: Vec<ProviderEvent>| match &events[0] {
            ProviderEvent::ToolCall { call } => call.id.clone(),
            other => panic!("{other:?}"),
        };
        let mut a = NdjsonDecoder::default();
        let mut b = NdjsonDecoder::default();
        let (mut ea, mut eb) = (Vec::new(), Vec::new());
        a.push(body.as_bytes(), &mut ea);
        b.push(body.as_bytes(), &mut eb);
        assert_ne!(id(ea), id(eb));
    }

    #[test]
    fn errors() {
        // An error line inside a 200 stream: the server's text, nothing after.
        let events = decode(
            "{\"message\":{\"content\":\"a\"},\"done\":false}\n{\"error\":\"an error was encountered while running the model: unexpected EOF\"}\n{\"message\":{\"content\":\"b\"}}\n",
            None,
        );
        assert_eq!(events.len(), 2);
        match &events[1] {
            ProviderEvent::Error { error } => {
                assert_eq!(error.kind, ProviderErrorKind::Server);
                assert_eq!(
                    error.message,
                    "an error was encountered while running the model: unexpected EOF"
                );
            }
            other => panic!("{other:?}"),
        }
        // End of body without done: text kept, then IncompleteStream.
        let events = decode("{\"message\":{\"content\":\"par\"},\"done\":false}\n", None);
        assert_eq!(events[0], text("par"));
        assert_eq!(kind(&events), Some(ProviderErrorKind::IncompleteStream));
        // Malformed line: a protocol error naming it.
        let events = decode(
            "{\"message\":{\"content\":\"a\"},\"done\":false}\nnot json\n",
            None,
        );
        assert_eq!(kind(&events), Some(ProviderErrorKind::Protocol));
        // ... whose typed error carries the line itself.
        let mut ids = IdMint {
            prefix: "m".into(),
            next: 0,
            offered: Offered::default(),
        };
        let decoded = decode_line(
            b"not json",
            &mut Seen::default(),
            &mut ids,
            None,
            &mut Vec::new(),
        );
        assert!(
            matches!(&decoded, Err(BridgeError::Decode { line, .. }) if line == "not json"),
            "{decoded:?}"
        );
        // A line over the cap.
        let mut d = NdjsonDecoder::default().with_max_line(64);
        let mut out = Vec::new();
        d.push(&[b'x'; 100], &mut out);
        assert_eq!(kind(&out), Some(ProviderErrorKind::Protocol));
        assert!(d.is_ended());
        // ... also when the whole line, newline included, is in one chunk.
        let mut d = NdjsonDecoder::default().with_max_line(64);
        let mut out = Vec::new();
        let mut long = vec![b' '; 100];
        long.push(b'\n');
        d.push(&long, &mut out);
        assert_eq!(kind(&out), Some(ProviderErrorKind::Protocol));
    }

    #[test]
    fn truncation_warning_comes_before_finish() {
        let check = TruncationCheck {
            num_ctx: Some(2048),
            estimated_prompt_tokens: 5000,
            fresh: true,
        };
        let events = decode(
            r#"{"message":{"content":"ok"},"done":true,"done_reason":"stop","prompt_eval_count":2048,"eval_count":1}"#,
            Some(check),
        );
        assert!(
            matches!(
                events.as_slice(),
                [
                    ProviderEvent::TextDelta { .. },
                    ProviderEvent::Usage { .. },
                    ProviderEvent::Warning {
                        warning: Warning {
                            kind: WarningKind::PromptTruncated,
                            ..
                        }
                    },
                    ProviderEvent::Finish {
                        reason: FinishReason::Stop
                    },
                ]
            ),
            "{events:?}"
        );
    }

    #[test]
    fn wire_repair_table() {
        let call = |id: &str, name: &str, args: Value| ProviderEvent::ToolCall {
            call: ToolCall::new(id, name, args).unwrap(),
        };
        let decode = |calls: Value| {
            let body = format!(
                "{}\n{}\n",
                json!({"message":{"role":"assistant","content":"","tool_calls":calls},"done":false}),
                json!({"done":true,"done_reason":"stop"})
            );
            let mut d = NdjsonDecoder::new(None)
                .with_id_prefix("m")
                .with_tools(["read_file".to_owned(), "list_dir".to_owned()]);
            let mut out = Vec::new();
            d.push(body.as_bytes(), &mut out);
            d.finish(&mut out);
            out.retain(|e| {
                matches!(
                    e,
                    ProviderEvent::ToolCall { .. } | ProviderEvent::Error { .. }
                )
            });
            out
        };
        let cases: Vec<(&str, Value, Vec<ProviderEvent>)> = vec![
            (
                "flat call without function (was a protocol error)",
                json!([{"name":"read_file","arguments":{"path":"a"}}]),
                vec![call("m1", "read_file", json!({"path":"a"}))],
            ),
            (
                "flat call with string arguments and an id",
                json!([{"id":"c","type":"function","name":"list_dir","arguments":"{\"dir\":\".\"}"}]),
                vec![call("c", "list_dir", json!({"dir":"."}))],
            ),
            (
                "string arguments, no type, no id",
                json!([{"function":{"name":"read_file","arguments":"{\"path\":\"b\"}"}}]),
                vec![call("m1", "read_file", json!({"path":"b"}))],
            ),
            (
                "names off by case, prefix and index",
                json!([
                    {"function":{"name":"functions.read_file","arguments":{}}},
                    {"function":{"name":"LIST_DIR:3","arguments":{}}},
                    {"function":{"name":"rm_rf","arguments":{}}}
                ]),
                vec![
                    call("m1", "read_file", json!({})),
                    call("m2", "list_dir", json!({})),
                    call("m3", "rm_rf", json!({})),
                ],
            ),
        ];
        for (what, calls, want) in cases {
            assert_eq!(decode(calls), want, "{what}");
        }
    }

    #[test]
    fn a_body_cut_mid_json_is_incomplete_not_protocol() {
        let cut = "{\"message\":{\"content\":\"a\"},\"done\":false}\n{\"message\":{\"cont";
        assert_eq!(
            kind(&decode(cut, None)),
            Some(ProviderErrorKind::IncompleteStream)
        );
        // A complete but wrong last line stays a protocol error.
        assert_eq!(
            kind(&decode("{\"done\":false}\nnot json", None)),
            Some(ProviderErrorKind::Protocol)
        );
    }
}
