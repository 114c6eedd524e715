//! An incremental Server-Sent Events decoder (pure: bytes in, events out).
//!
//! It follows the parts of the WHATWG event-stream rules that model servers use: lines
//! end in `\n` or `\r\n`; a blank line dispatches the event; `data:` lines are joined with
//! `\n`; `event:` names the event; lines starting with `:` are comments (keep-alives);
//! `id:`, `retry:` and unknown fields are ignored, but for llama.cpp's legacy `error:`
//! field, an `error` event of its own; one space after the colon is dropped.
//! Lines come from the shared [`LineSplitter`], so chunks may be cut anywhere, even inside
//! a UTF-8 character. At the end of the body an event that was not closed by a blank line
//! is still dispatched: several servers end with `data: [DONE]` and no blank line.

use crate::{BridgeError, LineSplitter};

/// One decoded event, borrowing from the decoder until the next call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` name, `None` for the default (`message`).
    pub event: Option<&'a str>,
    /// The data lines, joined with `\n`.
    pub data: &'a str,
}

impl Default for SseFramer {
    fn default() -> Self {
        Self::new(LineSplitter::default())
    }
}

/// Decodes a byte stream into [`SseEvent`]s.
///
/// Push a chunk with [`SseFramer::push`], then call [`SseFramer::next_event`] until it
/// returns `Ok(None)`; at the end of the body call [`SseFramer::finish`] and drain again.
#[derive(Debug)]
pub struct SseFramer {
    lines: LineSplitter,
    /// The cap on one event's joined data (the line cap).
    max_data: usize,
    event: String,
    has_event: bool,
    data: String,
    has_data: bool,
    /// The last event handed out; its buffers are cleared on the next call.
    dispatched: bool,
    finished: bool,
}

impl SseFramer {
    /// A decoder whose lines are capped by `lines`.
    pub fn new(lines: LineSplitter) -> Self {
        SseFramer {
            max_data: lines.max_line(),
            lines,
            event: String::new(),
            has_event: false,
            data: String::new(),
            has_data: false,
            dispatched: false,
            finished: false,
        }
    }

    /// Appends a chunk of the body.
    pub fn push(&mut self, chunk: &[u8]) {
        self.lines.push(chunk);
    }

    /// Marks the end of the body: a last unterminated line and a pending event are
    /// decoded by the following [`SseFramer::next_event`] calls.
    pub fn finish(&mut self) {
        self.finished = true;
    }

    /// The next complete event, `Ok(None)` when more bytes are needed (or, after
    /// [`SseFramer::finish`], when the body is exhausted).
    pub fn next_event(&mut self) -> Result<Option<SseEvent<'_>>, BridgeError> {
        if self.dispatched {
            self.dispatched = false;
            self.event.clear();
            self.data.clear();
            self.has_event = false;
            self.has_data = false;
        }
        loop {
            let line = match self.lines.next_line()? {
                Some(line) => line,
                None if self.finished => match self.lines.finish() {
                    Some(line) => line,
                    None => {
                        // End of body: dispatch what is pending, once.
                        self.finished = false;
                        if self.has_data {
                            return Ok(Some(self.dispatch()));
                        }
                        return Ok(None);
                    }
                },
                None => return Ok(None),
            };
            if line.is_empty() {
                if self.has_data {
                    return Ok(Some(self.dispatch()));
                }
                // An event without data is dropped, as the standard says.
                self.event.clear();
                self.has_event = false;
                continue;
            }
            if line[0] == b':' {
                continue;
            }
            let (field, value) = match memchr::memchr(b':', line) {
                Some(colon) => {
                    let value = &line[colon + 1..];
                    (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
                }
                None => (line, &b""[..]),
            };
            match field {
                b"data" => append_data(
                    &mut self.data,
                    &mut self.has_data,
                    self.max_data,
                    utf8(value, line)?,
                )?,
                b"error" => {
                    // llama.cpp's older servers: `error: {...}` as a field of its own.
                    self.event.clear();
                    self.event.push_str("error");
                    self.has_event = true;
                    append_data(
                        &mut self.data,
                        &mut self.has_data,
                        self.max_data,
                        utf8(value, line)?,
                    )?;
                }
                b"event" => {
                    let value = utf8(value, line)?;
                    self.event.clear();
                    self.event.push_str(value);
                    self.has_event = true;
                }
                _ => {}
            }
        }
    }

    /// Bytes held for the event being read: its unfinished line, its name and its data
    /// so far. Each part is capped by the line cap, so this stays under three times it.
    pub fn pending(&self) -> usize {
        self.lines.pending() + self.event.len() + self.data.len()
    }

    fn dispatch(&mut self) -> SseEvent<'_> {
        self.dispatched = true;
        SseEvent {
            event: (self.has_event && !self.event.is_empty()).then_some(self.event.as_str()),
            data: &self.data,
        }
    }
}

/// Adds a `data` value to the pending event's `data`; the event's data may not outgrow
/// `limit`, so `data:` lines without a blank line between them cannot grow memory without
/// bound.
fn append_data(
    data: &mut String,
    has_data: &mut bool,
    limit: usize,
    value: &str,
) -> Result<(), BridgeError> {
    if data.len() + value.len() + usize::from(*has_data) > limit {
        return Err(BridgeError::EventTooLarge { limit });
    }
    if *has_data {
        data.push('\n');
    }
    data.push_str(value);
    *has_data = true;
    Ok(())
}

fn utf8<'a>(value: &'a [u8], line: &[u8]) -> Result<&'a str, BridgeError> {
    std::str::from_utf8(value).map_err(|e| BridgeError::Decode {
        line: String::from_utf8_lossy(&line[..line.len().min(512)]).into_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Owned copy of an event, for comparisons.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Owned {
        event: Option<String>,
        data: String,
    }

    fn decode(chunks: &[&[u8]]) -> Result<Vec<Owned>, BridgeError> {
        let mut decoder = SseFramer::default();
        let mut out = Vec::new();
        let mut drain = |d: &mut SseFramer| -> Result<(), BridgeError> {
            while let Some(e) = d.next_event()? {
                out.push(Owned {
                    event: e.event.map(str::to_owned),
                    data: e.data.to_owned(),
                });
            }
            Ok(())
        };
        for chunk in chunks {
            decoder.push(chunk);
            drain(&mut decoder)?;
        }
        decoder.finish();
        drain(&mut decoder)?;
        Ok(out)
    }

    fn check(input: &str, expected: &[(Option<&str>, &str)]) {
        let got = decode(&[input.as_bytes()]).unwrap();
        let expected: Vec<Owned> = expected
            .iter()
            .map(|(e, d)| Owned {
                event: e.map(str::to_owned),
                data: (*d).to_owned(),
            })
            .collect();
        assert_eq!(got, expected, "input: {input:?}");
    }

    #[test]
    fn event_stream_rules() {
        check("data: a\n\ndata: b\n\n", &[(None, "a"), (None, "b")]);
        check("data:a\r\n\r\n", &[(None, "a")]);
        check("data:  two spaces\n\n", &[(None, " two spaces")]);
        check(": keep-alive\n\ndata: x\n\n", &[(None, "x")]);
        check("data: one\ndata: two\n\n", &[(None, "one\ntwo")]);
        check("event: error\ndata: {}\n\n", &[(Some("error"), "{}")]);
        check("event: error\n\ndata: x\n\n", &[(None, "x")]);
        check("id: 7\nretry: 10\ndata: x\n\n", &[(None, "x")]);
        check("data\n\n", &[(None, "")]);
        check("data: [DONE]", &[(None, "[DONE]")]);
        check("data: [DONE]\n", &[(None, "[DONE]")]);
        check("\n\n\n", &[]);
        check("", &[]);
    }

    #[test]
    fn invalid_utf8_in_data_is_a_decode_error() {
        let err = decode(&[b"data: \xff\n\n"]).unwrap_err();
        assert!(matches!(err, BridgeError::Decode { .. }), "{err:?}");
    }

    #[test]
    fn an_endless_line_is_refused() {
        let mut d = SseFramer::new(LineSplitter::new(8));
        d.push(b"data: 0123456789");
        assert_eq!(
            d.next_event().map(|e| e.map(|e| e.data.to_owned())),
            Err(BridgeError::LineTooLong { limit: 8 })
        );
    }

    #[test]
    fn data_lines_without_a_blank_line_are_capped() {
        // Issue 12: `data:` lines with no blank line between them were joined without a cap.
        let mut d = SseFramer::new(LineSplitter::new(64));
        for _ in 0..10 {
            d.push(b"data: 0123456789\n");
        }
        assert_eq!(
            d.next_event().map(|e| e.map(|e| e.data.to_owned())),
            Err(BridgeError::EventTooLarge { limit: 64 })
        );
        // Exactly at the cap is fine; one byte more is not (every line within its cap).
        let data_len = |body: &[u8]| {
            let mut d = SseFramer::new(LineSplitter::new(8));
            d.push(body);
            d.next_event().map(|e| e.map(|e| e.data.len()))
        };
        assert_eq!(
            data_len(b"data: a\ndata: a\ndata: a\ndata: ab\n\n"),
            Ok(Some(8))
        );
        assert_eq!(
            data_len(b"data: a\ndata: a\ndata: a\ndata: a\ndata: a\n\n"),
            Err(BridgeError::EventTooLarge { limit: 8 })
        );
    }

    #[test]
    fn llama_cpp_legacy_error_field_is_an_error_event() {
        check(
            "error: {\"message\":\"boom\"}\n\n",
            &[(Some("error"), "{\"message\":\"boom\"}")],
        );
    }

    fn event_text() -> impl Strategy<Value = String> {
        let line = prop_oneof![
            "data: [a-zé{}\":,]{0,12}".prop_map(|s| s),
            Just(": ping".to_owned()),
            Just("event: error".to_owned()),
            Just("data: [DONE]".to_owned()),
            Just(String::new()),
        ];
        proptest::collection::vec((line, prop::bool::ANY), 0..20).prop_map(|lines| {
            lines
                .into_iter()
                .map(|(l, crlf)| format!("{l}{}", if crlf { "\r\n" } else { "\n" }))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn any_byte_split_gives_the_same_events(
            text in event_text(),
            cuts in proptest::collection::vec(0usize..400, 0..12),
        ) {
            let bytes = text.as_bytes();
            let chunks = test_utils::split::split_at(bytes, &cuts);
            prop_assert_eq!(decode(&chunks).unwrap(), decode(&[bytes]).unwrap());
        }
    }
}
