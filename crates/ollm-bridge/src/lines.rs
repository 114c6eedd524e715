//! Incremental line splitting for line-based streams (NDJSON, SSE).
//!
//! Bytes arrive in chunks cut anywhere, mid-line and mid-character. The splitter keeps one
//! buffer; complete lines are handed out as slices of it, and the unfinished tail is moved
//! to the front once per pushed chunk — never once per line — so decoding a chunk with many
//! lines copies nothing but the tail. A line longer than the cap is an error, so a server
//! that never sends a newline cannot make the buffer grow without bound.
//!
//! [`parse_json`] reads one JSON line, checking its UTF-8 once (see there).

use serde::Deserialize;

use crate::BridgeError;

/// Parses one JSON line, such as a line of Ollama's NDJSON stream.
///
/// The line's UTF-8 is checked once, as a whole, and serde_json then reads it as text.
/// Read as bytes, serde_json checks each string it keeps on its own: a streamed token's
/// line has about eight short ones (its keys, its text), and those checks were 5% of the
/// Ollama adapter's CPU at 1000 streams, the most of what kept it above the floor (issue
/// 28). The SSE framer hands out events already checked the same way.
///
/// A line that is not UTF-8 is read as bytes, exactly as before, so what it gives (an
/// error, or a value when the bad byte is in a field that is skipped) does not change.
pub fn parse_json<'a, T: Deserialize<'a>>(line: &'a [u8]) -> serde_json::Result<T> {
    match std::str::from_utf8(line) {
        Ok(text) => serde_json::from_str(text),
        Err(_) => serde_json::from_slice(line),
    }
}

/// The default cap on one line: 16 MiB (an image or a long tool result in one JSON line
/// fits; a runaway stream does not).
pub const DEFAULT_MAX_LINE: usize = 16 * 1024 * 1024;

/// Splits a byte stream into lines (without `\n` or a trailing `\r`).
#[derive(Debug)]
pub struct LineSplitter {
    buf: Vec<u8>,
    /// Start of the first line not yet handed out.
    start: usize,
    /// Bytes before this offset (from `start`) hold no newline.
    scanned: usize,
    max_line: usize,
}

impl Default for LineSplitter {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_LINE)
    }
}

impl LineSplitter {
    /// A splitter refusing lines longer than `max_line` bytes.
    pub fn new(max_line: usize) -> Self {
        LineSplitter {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            max_line,
        }
    }

    /// Appends a chunk. Lines handed out before are no longer valid after this.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(chunk);
    }

    /// The next complete line, `Ok(None)` when the buffer holds no newline yet.
    pub fn next_line(&mut self) -> Result<Option<&[u8]>, BridgeError> {
        let pending = &self.buf[self.scanned..];
        match memchr::memchr(b'\n', pending) {
            Some(offset) => {
                let end = self.scanned + offset;
                let line_start = self.start;
                if end - line_start > self.max_line {
                    return Err(BridgeError::LineTooLong {
                        limit: self.max_line,
                    });
                }
                self.start = end + 1;
                self.scanned = self.start;
                let mut line = &self.buf[line_start..end];
                if let [rest @ .., b'\r'] = line {
                    line = rest;
                }
                Ok(Some(line))
            }
            None => {
                self.scanned = self.buf.len();
                if self.buf.len() - self.start > self.max_line {
                    return Err(BridgeError::LineTooLong {
                        limit: self.max_line,
                    });
                }
                Ok(None)
            }
        }
    }

    /// At the end of the stream: the last line if it had no newline (`None` when empty).
    pub fn finish(&mut self) -> Option<&[u8]> {
        let rest = &self.buf[self.start..];
        self.start = self.buf.len();
        self.scanned = self.start;
        let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
        (!rest.is_empty()).then_some(rest)
    }

    /// The cap on one line, in bytes.
    pub fn max_line(&self) -> usize {
        self.max_line
    }

    /// Bytes held that do not form a complete line yet.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn split_all(splitter: &mut LineSplitter, chunks: &[&[u8]]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for chunk in chunks {
            splitter.push(chunk);
            while let Some(line) = splitter.next_line().unwrap() {
                out.push(line.to_vec());
            }
        }
        if let Some(last) = splitter.finish() {
            out.push(last.to_vec());
        }
        out
    }

    #[test]
    fn lines_and_tail() {
        let mut s = LineSplitter::default();
        let lines = split_all(&mut s, &[b"a\r\nb", b"c\n", b"", b"d"]);
        assert_eq!(lines, vec![b"a".to_vec(), b"bc".to_vec(), b"d".to_vec()]);
    }

    #[test]
    fn overlong_line_is_refused_without_a_newline() {
        let mut s = LineSplitter::new(4);
        s.push(b"abc");
        assert_eq!(s.next_line(), Ok(None));
        s.push(b"de");
        assert_eq!(s.next_line(), Err(BridgeError::LineTooLong { limit: 4 }));
    }

    #[test]
    fn overlong_line_is_refused_with_a_newline() {
        let mut s = LineSplitter::new(2);
        s.push(b"abc\n");
        assert_eq!(s.next_line(), Err(BridgeError::LineTooLong { limit: 2 }));
    }

    #[test]
    fn a_json_line_reads_as_text_or_as_bytes_alike() {
        #[derive(Debug, PartialEq, Deserialize)]
        struct Line<'a> {
            #[serde(borrow)]
            content: std::borrow::Cow<'a, str>,
        }
        let check = |line: &[u8], want: Result<&str, &str>| {
            let got: serde_json::Result<Line<'_>> = parse_json(line);
            let got = got
                .map(|l| l.content.into_owned())
                .map_err(|e| e.to_string());
            assert_eq!(
                got,
                want.map(str::to_owned).map_err(str::to_owned),
                "{line:?}"
            );
        };
        check(br#"{"content":"hi \u00e9","model":"m"}"#, Ok("hi é"));
        check("{\"content\":\"é\"}".as_bytes(), Ok("é"));
        // Not UTF-8 in a skipped field: accepted, as serde_json reading bytes does.
        check(b"{\"model\":\"\xff\",\"content\":\"a\"}", Ok("a"));
        check(
            b"{\"content\":\"\xff\"}",
            Err("invalid unicode code point at line 1 column 13"),
        );
        check(
            b"{\"content\":",
            Err("EOF while parsing a value at line 1 column 11"),
        );
    }

    proptest! {
        /// Any line, UTF-8 or not, JSON or not: the same value or the same error as
        /// serde_json reading the bytes.
        #[test]
        fn a_json_line_parses_as_serde_json_reads_its_bytes(
            line in prop_oneof![
                "[{}\\[\\]\":,a-z0-9 é\\\\u]{0,40}".prop_map(String::into_bytes),
                proptest::collection::vec(any::<u8>(), 0..40),
                Just(br#"{"a":"\u00e9x","b":[1,2.5,null,true]}"#.to_vec()),
            ],
        ) {
            let ours: Result<serde_json::Value, String> =
                parse_json(&line).map_err(|e| e.to_string());
            let theirs: Result<serde_json::Value, String> =
                serde_json::from_slice(&line).map_err(|e| e.to_string());
            prop_assert_eq!(ours, theirs);
        }

        #[test]
        fn any_split_gives_the_same_lines(
            text in "[a-zé\n]{0,200}",
            cuts in proptest::collection::vec(0usize..200, 0..10),
        ) {
            let bytes = text.as_bytes();
            let chunks = test_utils::split::split_at(bytes, &cuts);
            let got = split_all(&mut LineSplitter::default(), &chunks);
            let whole = split_all(&mut LineSplitter::default(), &[bytes]);
            prop_assert_eq!(&got, &whole);
            let expected: Vec<Vec<u8>> = {
                let mut v: Vec<Vec<u8>> = text.split('\n').map(|l| l.as_bytes().to_vec()).collect();
                if v.last().is_some_and(Vec::is_empty) { v.pop(); }
                v
            };
            prop_assert_eq!(got, expected);
        }
    }
}
