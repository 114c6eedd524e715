//! Hold-back for streaming display: text that cannot start a call is released as it
//! arrives; text that may (a line opening with a marker or `[`, or a reply opening with
//! `{`, `[` or a fence calls are fenced in) is held until the reply ends and
//! [`super::recover`] decides. A reply opening with a fence in another language
//! (```` ```python ````) streams: its opening line (at most 32 bytes of info string)
//! settles that it is no call.
//!
//! Decisions: the released text is always a prefix of the final prose, so nothing is
//! lost or shown twice whatever the chunking (a property test checks this over arbitrary
//! splits). Everything from the first possible call onwards is held to the end: whether
//! a block runs depends on the whole reply. The scan is incremental: complete lines are
//! looked at once (with the fence state carried along), the reasoning's end is searched
//! only in new text, and on the unfinished last line only what was not released yet is
//! looked at, so a whole reply costs time linear in its length (a test counts the work
//! against the rescanning rule it replaces, which is kept as the tests' oracle).
//! Memory is the reply itself.

use super::scan::{self, MID_LINE, THINK_CLOSE, THINK_OPEN};
#[cfg(test)]
use super::{OfferedTools, Recovery, recover};

/// Incremental hold-back of one streamed reply.
#[derive(Debug, Default)]
pub(crate) struct HoldBack {
    text: String,
    released: usize,
    stage: Stage,
    /// The scan of the body's lines.
    lines: Lines,
    /// The search for an orphan `</think>`, in replies that do not open with `<think>`.
    orphan: Option<Orphan>,
    /// Bytes looked at so far (the tests' work measure).
    #[cfg(test)]
    looked: usize,
}

/// How far the reply's shape is known.
#[derive(Debug, Default, Clone, Copy)]
enum Stage {
    /// Nothing but whitespace, or the start of `<think>`, so far.
    #[default]
    Lead,
    /// Inside a `<think>` that opens the reply; `</think>` not found before `searched`.
    Think { searched: usize },
    /// The body starts at `from`; `decided` once its first character is known.
    Body { from: usize, decided: bool },
}

/// The line scan of the body.
#[derive(Debug, Default)]
struct Lines {
    /// The first line not scanned yet.
    line: usize,
    in_fence: bool,
    /// Set once a possible call opened here: everything from it is held.
    held: Option<usize>,
    /// Backticks counted on the current line up to `ticks_at` (inline code parity).
    ticks: usize,
    ticks_at: usize,
    /// Bytes looked at (the tests' work measure).
    #[cfg(test)]
    looked: usize,
}

/// The search for an orphan `</think>` outside fences.
#[derive(Debug, Default)]
struct Orphan {
    line: usize,
    in_fence: bool,
    /// Where the search on the unfinished last line may resume.
    partial_from: usize,
    found: bool,
    /// Bytes looked at (the tests' work measure).
    #[cfg(test)]
    looked: usize,
}

impl HoldBack {
    /// Feeds a chunk; returns the text now safe to show as answer text.
    pub(crate) fn push(&mut self, chunk: &str) -> &str {
        self.text.push_str(chunk);
        #[cfg(test)]
        let before = (
            self.lines.looked,
            self.orphan.as_ref().map_or(0, |o| o.looked),
        );
        let safe = self.safe().max(self.released);
        #[cfg(test)]
        {
            let after = (
                self.lines.looked,
                self.orphan.as_ref().map_or(0, |o| o.looked),
            );
            self.looked += after.0.saturating_sub(before.0) + after.1.saturating_sub(before.1);
        }
        let from = self.released;
        self.released = safe;
        &self.text[from..safe]
    }

    /// Ends the reply: the rest of the answer text to show, and the whole recovery.
    #[cfg(test)]
    pub(crate) fn finish(self, offered: &OfferedTools) -> (String, Recovery) {
        let recovery = recover(&self.text, offered);
        let rest = recovery
            .prose
            .get(self.released..)
            .unwrap_or_default()
            .to_owned();
        (rest, recovery)
    }

    /// How much of the reply so far is answer text whatever follows.
    fn safe(&mut self) -> usize {
        let text = self.text.as_str();
        loop {
            match self.stage {
                Stage::Lead => {
                    let lead = text.trim_start();
                    if lead.is_empty()
                        || (scan::may_open_think(lead) && lead.len() < THINK_OPEN.len())
                    {
                        return 0;
                    }
                    let lead_at = text.len() - lead.len();
                    self.stage = if lead.starts_with(THINK_OPEN) {
                        Stage::Think { searched: lead_at }
                    } else {
                        self.orphan = Some(Orphan::default());
                        body(0)
                    };
                }
                Stage::Think { searched } => match text[searched..].find(THINK_CLOSE) {
                    Some(i) => self.stage = body(searched + i + THINK_CLOSE.len()),
                    None => {
                        let back = text.len().saturating_sub(THINK_CLOSE.len()).max(searched);
                        self.stage = Stage::Think {
                            searched: floor_boundary(text, back),
                        };
                        return text.len();
                    }
                },
                Stage::Body { from, decided } => {
                    if let Some(close) = self.orphan.as_mut().and_then(|o| o.scan(text)) {
                        self.stage = body(close + THINK_CLOSE.len());
                        self.lines = Lines::default();
                        continue;
                    }
                    if let Some(held) = self.lines.held {
                        return held;
                    }
                    if !decided {
                        let opening = opening(text[from..].trim_start());
                        if opening == Opening::Undecided {
                            return from;
                        }
                        self.stage = Stage::Body {
                            from,
                            decided: true,
                        };
                        self.lines.line = from;
                        self.lines.ticks_at = from;
                        if opening == Opening::Held {
                            self.lines.held = Some(from);
                            return from;
                        }
                    }
                    return self.lines.advance(text, self.released);
                }
            }
        }
    }
}

/// What the start of the body (after any reasoning) says about the reply.
#[derive(Debug, PartialEq, Eq)]
enum Opening {
    /// Not enough of it yet.
    Undecided,
    /// It may be a call as a whole (`{`, `[`, a fence calls are fenced in): held.
    Held,
    /// It streams, scanned line by line.
    Streams,
}

/// What the body starting with `rest` is.
fn opening(rest: &str) -> Opening {
    let fence = rest.starts_with("```").then(|| scan::call_fence(rest));
    if rest.is_empty() || "```".starts_with(rest) || fence == Some(None) {
        return Opening::Undecided;
    }
    // A reply opening with a fence in another language (```` ```rust ````) is no call in
    // fences: it streams, scanned line by line.
    if rest.starts_with(['{', '[']) || fence == Some(Some(true)) {
        Opening::Held
    } else {
        Opening::Streams
    }
}

fn body(from: usize) -> Stage {
    Stage::Body {
        from,
        decided: false,
    }
}

/// The largest char boundary of `text` at or before `at`.
fn floor_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl Orphan {
    /// Scans new text for the first `</think>` outside a fence; its offset, once.
    fn scan(&mut self, text: &str) -> Option<usize> {
        if self.found {
            return None;
        }
        while let Some(len) = text[self.line..].find('\n') {
            let end = self.line + len + 1;
            let start = scan::unindent(text, self.line);
            let line = &text[start..end];
            #[cfg(test)]
            {
                self.looked += end - self.line;
            }
            if scan::is_fence(line) {
                self.in_fence = !self.in_fence;
            } else if !self.in_fence {
                if let Some(i) = line.find(THINK_CLOSE) {
                    self.found = true;
                    return Some(start + i);
                }
            }
            self.line = end;
            self.partial_from = end;
        }
        let start = scan::unindent(text, self.line);
        let line = &text[start..];
        if self.in_fence || line.is_empty() || scan::is_fence(line) {
            return None;
        }
        let from = self.partial_from.max(start);
        #[cfg(test)]
        {
            self.looked += text.len() - from;
        }
        match text[from..].find(THINK_CLOSE) {
            Some(i) => {
                self.found = true;
                Some(from + i)
            }
            None => {
                let back = text.len().saturating_sub(THINK_CLOSE.len()).max(from);
                self.partial_from = floor_boundary(text, back);
                None
            }
        }
    }
}

impl Lines {
    /// Scans the complete lines not scanned yet, then looks at the unfinished last line
    /// from `released` on; returns how much of `text` is safe to show.
    fn advance(&mut self, text: &str, released: usize) -> usize {
        while let Some(len) = text[self.line..].find('\n') {
            let at = self.line;
            let end = at + len + 1;
            let start = scan::unindent(text, at);
            let line = &text[start..end];
            #[cfg(test)]
            {
                self.looked += end - at;
            }
            if scan::is_fence(line) {
                self.in_fence = !self.in_fence;
            } else if !self.in_fence {
                let found = if scan::marker_at(line).is_some() || line.starts_with('[') {
                    Some(at)
                } else {
                    scan::mid_line_marker(line).map(|off| start + off)
                };
                if found.is_some() {
                    self.held = found;
                    return at.max(found.unwrap_or(at));
                }
            }
            self.line = end;
            self.ticks = 0;
            self.ticks_at = end;
        }
        self.partial(text, released)
    }

    /// The unfinished last line: held from its start when it may open a call, from a
    /// special-token marker (or the start of one) outside inline code, else released.
    fn partial(&mut self, text: &str, released: usize) -> usize {
        let at = self.line;
        let start = scan::unindent(text, at);
        let line = &text[start..];
        if self.in_fence || (!line.is_empty() && scan::is_fence(line)) {
            return text.len();
        }
        let may = line.is_empty()
            || line.starts_with('[')
            || scan::marker_at(line).is_some()
            || scan::may_become_marker(line);
        if may {
            return at;
        }
        let from = released.max(start);
        #[cfg(test)]
        {
            self.looked += text.len() - from;
        }
        let longest = MID_LINE.iter().map(|m| m.len()).max().unwrap_or(0);
        let tail_from = floor_boundary(text, text.len().saturating_sub(longest).max(from));
        let mut whole: Vec<usize> = MID_LINE
            .iter()
            .flat_map(|m| text[from..].match_indices(m).map(|(i, _)| from + i))
            .collect();
        whole.sort_unstable();
        if let Some(&i) = whole.iter().find(|&&i| self.even_ticks(text, start, i)) {
            return i;
        }
        let tail = text[tail_from..]
            .char_indices()
            .map(|(i, _)| tail_from + i)
            .filter(|&i| MID_LINE.iter().any(|m| m.starts_with(&text[i..])))
            .find(|&i| self.even_ticks(text, start, i));
        if let Some(i) = tail {
            return i;
        }
        text.len()
    }

    /// Whether the backticks on the line from `start` to `at` are even (outside inline
    /// code); counts only text not counted before.
    fn even_ticks(&mut self, text: &str, start: usize, at: usize) -> bool {
        self.ticks_at = self.ticks_at.max(start);
        if at >= self.ticks_at {
            self.ticks += text[self.ticks_at..at].matches('`').count();
            self.ticks_at = at;
            self.ticks % 2 == 0
        } else {
            text[start..at].matches('`').count() % 2 == 0
        }
    }
}

#[cfg(test)]
mod tests {
    //! The rescanning rule this scan replaced, kept as the oracle: the incremental scan
    //! must release exactly what it released after every chunk, and do linear work.

    use proptest::prelude::*;

    use super::super::scan;
    use super::HoldBack;

    /// How much of the reply so far is answer text whatever follows (rescanning it all).
    fn safe_len(text: &str) -> usize {
        let lead = text.trim_start();
        let lead_at = text.len() - lead.len();
        if lead.is_empty() || (scan::may_open_think(lead) && lead.len() < "<think>".len()) {
            return 0;
        }
        let from = scan::think_end(text);
        if from == text.len() {
            return text.len();
        }
        let body = text[from..].trim_start();
        if body.is_empty()
            || body.starts_with('{')
            || body.starts_with('[')
            || (body.starts_with("```") && scan::call_fence(body) != Some(false))
            || "```".starts_with(body)
        {
            return if from == 0 { lead_at.min(from) } else { from };
        }
        held_line(text, from)
    }

    fn held_line(text: &str, from: usize) -> usize {
        let mut in_fence = false;
        let mut at = from;
        while at < text.len() {
            let start = scan::unindent(text, at);
            let line_end = scan::line_end(text, start);
            let line = &text[start..line_end];
            let complete = line.ends_with('\n');
            if scan::is_fence(line) {
                in_fence = !in_fence;
            } else if !in_fence {
                let may = if complete {
                    scan::marker_at(line).is_some() || line.starts_with('[')
                } else {
                    line.is_empty()
                        || line.starts_with('[')
                        || scan::marker_at(line).is_some()
                        || scan::may_become_marker(line)
                };
                if may {
                    return at;
                }
                if let Some(off) = scan::mid_line_marker(line) {
                    return start + off;
                }
                if let Some(off) = (!complete).then(|| scan::mid_line_partial(line)).flatten() {
                    return start + off;
                }
            }
            at = line_end;
        }
        text.len()
    }

    fn chunks<'a>(text: &'a str, cuts: &[usize]) -> Vec<&'a str> {
        let mut cuts: Vec<usize> = cuts
            .iter()
            .map(|c| c % (text.len() + 1))
            .filter(|&c| text.is_char_boundary(c))
            .collect();
        cuts.sort_unstable();
        cuts.push(text.len());
        let mut at = 0;
        let mut out = Vec::new();
        for cut in cuts {
            if cut > at {
                out.push(&text[at..cut]);
                at = cut;
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// After every chunk, the incremental scan has released exactly what rescanning
        /// the whole reply releases.
        #[test]
        fn matches_the_rescanning_rule(
            parts in proptest::collection::vec(prop_oneof![
                Just("<tool_call>"), Just("\n"), Just("```"), Just("{\"name\": \"f\"}"),
                Just("<think>"), Just("</think>"), Just(">>>f\n"), Just("[TOOL_CALLS]"),
                Just("<function=f>"), Just("prose "), Just("  "), Just("["), Just("]"),
                Just("é"), Just("`"), Just("<|python_tag|>"), Just("<|tool_call_start|>"),
                Just("<｜tool▁calls▁begin｜>"), Just("<"), Just("|"), Just("json"), Just("~~~"),
            ], 0..24),
            cuts in proptest::collection::vec(0usize..600, 0..16),
        ) {
            let text: String = parts.concat();
            let mut hold = HoldBack::default();
            let (mut released, mut expected) = (0, 0);
            let mut sent = String::new();
            for chunk in chunks(&text, &cuts) {
                sent.push_str(chunk);
                released += hold.push(chunk).len();
                expected = safe_len(&sent).max(expected);
                prop_assert_eq!(released, expected, "{:?}", sent);
            }
        }
    }

    /// The bytes the scan looks at per byte of reply, pushed in 3-byte chunks.
    fn work_per_byte(text: &str) -> f64 {
        let mut hold = HoldBack::default();
        let (mut at, mut shown) = (0, 0);
        while at < text.len() {
            let mut end = (at + 3).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            shown += hold.push(&text[at..end]).len();
            at = end;
        }
        assert_eq!(shown, text.len(), "plain prose is released whole");
        hold.looked as f64 / text.len() as f64
    }

    /// A long reply costs the same work per byte as a short one (the rescanning rule
    /// grew with the square of the length). Counted, not timed.
    #[test]
    fn a_long_reply_costs_linear_work() {
        let line = "Some prose with `code` and a [link](x) in it, é.\n";
        let long_line = "word ".repeat(20_000);
        for text in [line.repeat(2_000), long_line] {
            let short = work_per_byte(&text[..text.len() / 20]);
            let long = work_per_byte(&text);
            assert!(long < 12.0, "{long} bytes looked at per byte");
            assert!(long < short * 1.5, "short {short}, long {long}");
        }
    }
}
