//! The shared scanner: where the reasoning ends, which lines open a call marker outside
//! code fences, and the blocks those markers start.
//!
//! Decisions: a marker counts only at the start of a line (after spaces or tabs), or right
//! after the reasoning's `</think>`; special-token markers (`[TOOL_CALLS]`,
//! `<|python_tag|>`, `<|python_start|>`, DeepSeek's and LFM's begin tokens) also count in
//! mid-line, outside inline code, because models emit them straight after their prose; a line opening with ```` ``` ```` or `~~~` toggles a
//! fence and nothing inside a fence is a marker. The reasoning is a `<think>` that opens
//! the reply (to its `</think>`, or to the end when unclosed), or the text before an
//! orphan `</think>` (templates that put the opening tag in the prompt). The same
//! functions drive [`super::HoldBack`], so the streaming display and the whole-reply parse
//! cannot disagree. A leaf: it says where markers are, never parses what follows them
//! (`blocks.rs` hands each block to its format's parser).

use super::types::Format;

pub(super) const THINK_OPEN: &str = "<think>";
pub(super) const THINK_CLOSE: &str = "</think>";

/// The markers that open a call block, with their family.
pub(super) const MARKERS: &[(&str, Format)] = &[
    ("<tool_call>", Format::Hermes),
    ("<tools>", Format::Hermes),
    ("<function=", Format::QwenXml),
    ("[TOOL_CALLS]", Format::Mistral),
    ("<|python_tag|>", Format::Llama),
    ("<|python_start|>", Format::Llama),
    (">>>", Format::Functionary),
    ("<｜tool▁calls▁begin｜>", Format::DeepSeek),
    ("<｜tool▁call▁begin｜>", Format::DeepSeek),
    ("<|tool_call_start|>", Format::Lfm),
];

/// Special-token markers, which count in mid-line too (after prose on the same line), unless
/// inside inline code: models emit them as single tokens right after their text.
pub(super) const MID_LINE: &[&str] = &[
    "[TOOL_CALLS]",
    "<|python_tag|>",
    "<|python_start|>",
    "<｜tool▁calls▁begin｜>",
    "<|tool_call_start|>",
];

/// Where the reasoning ends: 0 when the reply has none.
pub(super) fn think_end(text: &str) -> usize {
    let lead = text.trim_start();
    let offset = text.len() - lead.len();
    if lead.starts_with(THINK_OPEN) {
        return text[offset..]
            .find(THINK_CLOSE)
            .map_or(text.len(), |i| offset + i + THINK_CLOSE.len());
    }
    orphan_close(text).map_or(0, |i| i + THINK_CLOSE.len())
}

/// The first `</think>` outside a code fence (a quoted transcript may hold one).
fn orphan_close(text: &str) -> Option<usize> {
    let mut in_fence = false;
    let mut at = 0;
    while at < text.len() {
        let start = unindent(text, at);
        let end = line_end(text, start);
        if is_fence(&text[start..end]) {
            in_fence = !in_fence;
        } else if !in_fence {
            if let Some(i) = text[start..end].find(THINK_CLOSE) {
                return Some(start + i);
            }
        }
        at = end;
    }
    None
}

/// Whether `s` could still grow into the opening `<think>` (hold it while streaming).
pub(super) fn may_open_think(lead: &str) -> bool {
    THINK_OPEN.starts_with(lead)
}

/// The family of the marker that opens `line` (already stripped of indentation).
pub(super) fn marker_at(line: &str) -> Option<Format> {
    let (marker, format) = MARKERS.iter().find(|(m, _)| line.starts_with(m))?;
    if *format == Format::Functionary {
        let name_line = line[marker.len()..].split('\n').next().unwrap_or_default();
        let is_name = !name_line.is_empty()
            && name_line != "all"
            && name_line
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.'));
        return is_name.then_some(*format);
    }
    Some(*format)
}

/// Whether a partial line may still become a marker line.
pub(super) fn may_become_marker(partial: &str) -> bool {
    MARKERS
        .iter()
        .any(|(m, _)| m.starts_with(partial) || partial.starts_with(m))
}

/// The offset in `line` (up to its newline) of the first special-token marker outside
/// inline code.
pub(super) fn mid_line_marker(line: &str) -> Option<usize> {
    let line = line.split('\n').next().unwrap_or_default();
    MID_LINE
        .iter()
        .filter_map(|m| {
            line.match_indices(m)
                .map(|(i, _)| i)
                .find(|&i| outside_inline_code(line, i))
        })
        .min()
}

/// The offset in a partial line from which its tail may still grow into a special-token
/// marker (hold it while streaming).
#[cfg(test)]
pub(super) fn mid_line_partial(partial: &str) -> Option<usize> {
    partial.char_indices().map(|(i, _)| i).find(|&i| {
        let tail = &partial[i..];
        MID_LINE.iter().any(|m| m.starts_with(tail)) && outside_inline_code(partial, i)
    })
}

fn outside_inline_code(line: &str, at: usize) -> bool {
    line[..at].matches('`').count() % 2 == 0
}

/// Whether a line (without indentation) opens or closes a code fence.
pub(super) fn is_fence(line: &str) -> bool {
    line.starts_with("```") || line.starts_with("~~~")
}

/// The indentation-free start of the line at `at`.
pub(super) fn unindent(text: &str, at: usize) -> usize {
    at + (text[at..].len() - text[at..].trim_start_matches([' ', '\t']).len())
}

/// The end of the line at `at`, after its newline.
pub(super) fn line_end(text: &str, at: usize) -> usize {
    text[at..].find('\n').map_or(text.len(), |i| at + i + 1)
}

/// The starts of the lines after `from`, outside fences, that open with `[`.
pub(super) fn list_lines(text: &str, from: usize) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut in_fence = false;
    let mut at = from;
    while at < text.len() {
        let start = unindent(text, at);
        let line = &text[start..];
        if is_fence(line) {
            in_fence = !in_fence;
        } else if !in_fence && line.starts_with('[') {
            starts.push(at);
        }
        at = line_end(text, start);
    }
    starts
}

/// The longest info string (after ```` ``` ````) a fence around calls may have.
const MAX_CALL_INFO: usize = 32;

/// Whether a fence's info string (the rest of its opening line) is one calls are fenced
/// in: none, `json` or `tool_call`. Bounded, so a stream can tell early.
fn call_fence_info(info: &str) -> bool {
    let trimmed = info.trim();
    info.len() <= MAX_CALL_INFO
        && (trimmed.is_empty() || trimmed.eq_ignore_ascii_case("json") || trimmed == "tool_call")
}

/// For a reply that opens with a fence: `None` while its opening line may still become
/// that of a fence around calls, else whether it is one.
pub(super) fn call_fence(rest: &str) -> Option<bool> {
    let after_open = rest.strip_prefix("```")?;
    match after_open.find('\n') {
        Some(end) => Some(call_fence_info(&after_open[..end])),
        None if after_open.len() > MAX_CALL_INFO => Some(false),
        None => None,
    }
}

/// The inner text of a reply that is nothing but fenced blocks: each block's body.
pub(super) fn only_fences(text: &str) -> Option<Vec<&str>> {
    let mut bodies = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let after_open = rest.strip_prefix("```")?;
        let info_end = after_open.find('\n')?;
        if !call_fence_info(&after_open[..info_end]) {
            return None;
        }
        let body = &after_open[info_end + 1..];
        let close = body.find("```")?;
        bodies.push(&body[..close]);
        rest = body[close + 3..].trim_start();
    }
    (!bodies.is_empty()).then_some(bodies)
}

/// The byte index just past the first JSON value in `s` (after leading whitespace), and
/// the value; an error message when `s` does not open with one.
pub(super) fn first_json(s: &str) -> Result<(usize, serde_json::Value), String> {
    let lead = s.len() - s.trim_start().len();
    let mut stream =
        serde_json::Deserializer::from_str(&s[lead..]).into_iter::<serde_json::Value>();
    match stream.next() {
        Some(Ok(value)) => Ok((lead + stream.byte_offset(), value)),
        Some(Err(e)) => Err(format!("the arguments are not valid JSON ({e})")),
        None => Err("the arguments are missing".to_owned()),
    }
}
