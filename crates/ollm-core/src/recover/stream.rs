//! Hold-back for streaming display: text that cannot start a call is released as it
//! arrives; text that may (a line opening with a marker or `[`, or a reply opening with
//! `{`, `[` or a fence) is held until the reply ends and [`super::recover`] decides.
//!
//! Decisions: the released text is always a prefix of the final prose, so nothing is
//! lost or shown twice whatever the chunking (a property test checks this over arbitrary
//! splits). Everything from the first possible call onwards is held to the end: whether
//! a block runs depends on the whole reply. Each push rescans the reply so far (fence and
//! reasoning state depend on all of it), so the work per chunk is linear in the reply;
//! replies are bounded by the generation cap, and memory is the reply itself.

use super::{OfferedTools, Recovery, recover, scan};

/// Incremental hold-back of one streamed reply.
#[derive(Debug, Default)]
pub(crate) struct HoldBack {
    text: String,
    released: usize,
}

impl HoldBack {
    /// A hold-back for a new reply.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Feeds a chunk; returns the text now safe to show as answer text.
    pub(crate) fn push(&mut self, chunk: &str) -> &str {
        self.text.push_str(chunk);
        let safe = safe_len(&self.text).max(self.released);
        let from = self.released;
        self.released = safe;
        &self.text[from..safe]
    }

    /// Ends the reply: the rest of the answer text to show, and the whole recovery.
    pub(crate) fn finish(self, offered: &OfferedTools) -> (String, Recovery) {
        let recovery = recover(&self.text, offered);
        let rest = recovery
            .prose
            .get(self.released..)
            .unwrap_or_default()
            .to_owned();
        (rest, recovery)
    }
}

/// How much of the reply so far is answer text whatever follows.
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
        || body.starts_with("```")
        || "```".starts_with(body)
    {
        return if from == 0 { lead_at.min(from) } else { from };
    }
    held_line(text, from)
}

/// The start of the first line after `from` that is or may become a call marker outside a
/// fence, or the whole length when there is none.
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
