//! The runaway guard: a reply that keeps repeating itself is stopped.
//!
//! A small model sometimes falls into a loop and writes the same line (or the same few
//! words) until the generation cap, which can take minutes on a slow machine. The turn
//! loop feeds each text delta to a [`RepeatDetector`]; when the end of the reply has
//! become one unit repeated over and over, the loop drops the provider's stream (which
//! cancels the request, so the server stops generating), records what arrived, warns,
//! and ends the run with `FinishReason::Repetition`.
//!
//! # Decisions
//! - The rule: the last `max(MIN_SPAN, MIN_REPEATS × p)` bytes of the reply are periodic
//!   with a period `p` of at most [`MAX_PERIOD`] bytes. With the constants here: a line
//!   of up to 102 bytes written five times in a row over 512 bytes, a 256-byte paragraph
//!   five times, or a short word or character over 512 bytes. Normal prose, lists and
//!   code are not periodic over that many bytes; a run of 512 identical characters (a
//!   rule line, padding) is taken as a loop, which costs one false stop at worst.
//! - Only text (answer) is watched, not thinking; the generation cap bounds the rest.
//! - Memory is bounded: only the last [`WINDOW`] bytes are kept.

/// The longest repeated unit looked for, in bytes.
pub(crate) const MAX_PERIOD: usize = 256;
/// The fewest bytes of repetition that count.
pub(crate) const MIN_SPAN: usize = 512;
/// The fewest repeats of a unit that count.
pub(crate) const MIN_REPEATS: usize = 5;
/// The bytes of the reply's end kept.
const WINDOW: usize = MAX_PERIOD * MIN_REPEATS;

/// Watches a streamed reply for a loop.
#[derive(Debug, Default)]
pub(crate) struct RepeatDetector {
    tail: Vec<u8>,
}

impl RepeatDetector {
    /// Takes in a delta; the repeated unit (lossily decoded) once the reply loops.
    pub(crate) fn push(&mut self, delta: &str) -> Option<String> {
        if delta.is_empty() {
            return None;
        }
        self.tail.extend_from_slice(delta.as_bytes());
        if self.tail.len() > WINDOW {
            let cut = self.tail.len() - WINDOW;
            self.tail.drain(..cut);
        }
        let period = (1..=MAX_PERIOD).find(|&p| periodic(&self.tail, p))?;
        let unit = &self.tail[self.tail.len() - period..];
        Some(String::from_utf8_lossy(unit).into_owned())
    }
}

/// Whether the end of `tail` repeats a unit of `p` bytes over the span the rule needs.
fn periodic(tail: &[u8], p: usize) -> bool {
    let need = MIN_SPAN.max(p * MIN_REPEATS);
    if tail.len() < need {
        return false;
    }
    let s = &tail[tail.len() - need..];
    (0..need - p).rev().all(|i| s[i] == s[i + p])
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whether feeding `text` in `chunk`-byte pieces (at char boundaries) trips the detector.
    fn trips(text: &str, chunk: usize) -> bool {
        let mut d = RepeatDetector::default();
        let mut tripped = false;
        let mut piece = String::new();
        for c in text.chars() {
            piece.push(c);
            if piece.len() >= chunk {
                tripped |= d.push(&std::mem::take(&mut piece)).is_some();
            }
        }
        tripped |= d.push(&piece).is_some();
        tripped
    }

    fn check(text: &str, expected: bool) {
        for chunk in [1, 7, 64, 4096] {
            assert_eq!(trips(text, chunk), expected, "chunk {chunk}: {text:?}");
        }
    }

    #[test]
    fn loops_trip_and_prose_does_not() {
        check(&"The port is 8080.\n".repeat(40), true);
        check(&"ha".repeat(300), true);
        check(&format!("Answer: {}", "I'm sorry. ".repeat(60)), true);
        let paragraph = "x".repeat(10) + &"abcdefghij".repeat(20) + "\n";
        check(&paragraph.repeat(6), true);
        check(&"The port is 8080.\n".repeat(4), false);
        let prose: String = (0..200)
            .map(|i| format!("line {i} says something\n"))
            .collect();
        check(&prose, false);
        let code = "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n".repeat(3);
        check(&code, false);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 100, failure_persistence: None, ..ProptestConfig::default() })]

        /// Any unit repeated past the rule's span trips, however the text is split.
        #[test]
        fn every_long_enough_loop_trips(unit in "[a-z .\n]{1,40}", chunk in 1usize..50) {
            let times = (MIN_SPAN / unit.len()).max(MIN_REPEATS) + 2;
            prop_assert!(trips(&unit.repeat(times), chunk));
        }

        /// Text in which no 8-byte window repeats never trips (it cannot be periodic).
        #[test]
        fn distinct_numbered_lines_never_trip(n in 1usize..400, chunk in 1usize..50) {
            let text: String = (0..n).map(|i| format!("{i:05}\n")).collect();
            prop_assert!(!trips(&text, chunk));
        }
    }
}
