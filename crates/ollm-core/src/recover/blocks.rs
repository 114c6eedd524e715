//! The call blocks of a reply: each marker line the scanner finds (`scan.rs`) handed to
//! its format's parser, with the block's extent (trailing closers and end tokens taken
//! in). The dispatch to every format lives here, above them: no format imports this
//! module, so the scanner and the formats stay free of import circles (issue 26).

use super::scan::{is_fence, line_end, marker_at, mid_line_marker, unindent};
use super::types::{Format, RawCall};
use super::{deepseek, functionary, hermes, lfm, llama, mistral, qwen_xml};

/// Tokens that may trail a block and belong to it (closers of wrappers and end tokens).
const TRAILERS: &[&str] = &[
    "</tool_call>",
    "</tools>",
    "<|python_end|>",
    "<|eom_id|>",
    "<|eot_id|>",
    "<|im_end|>",
    "<|tool_call_end|>",
    "<｜tool▁calls▁end｜>",
    "</s>",
];

/// A span of the reply that holds calls.
#[derive(Debug)]
pub(super) struct Block {
    pub(super) start: usize,
    pub(super) end: usize,
    pub(super) format: Format,
    pub(super) calls: Vec<RawCall>,
}

/// The call blocks of `text` after `from`, by the marker rules.
pub(super) fn marker_blocks(text: &str, from: usize) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut in_fence = false;
    let mut at = from;
    while at < text.len() {
        let start = unindent(text, at);
        let line = &text[start..];
        if is_fence(line) {
            in_fence = !in_fence;
        } else if !in_fence {
            let found = match marker_at(line) {
                Some(format) => Some((at, start, format)),
                None => mid_line_marker(line).and_then(|off| {
                    marker_at(&text[start + off..]).map(|f| (start + off, start + off, f))
                }),
            };
            if let Some((block_start, marker, format)) = found {
                let (len, calls) = parse_block(format, &text[marker..]);
                let end = trailing(text, marker + len.max(1));
                blocks.push(Block {
                    start: block_start,
                    end,
                    format,
                    calls,
                });
                at = end;
                continue;
            }
        }
        at = line_end(text, start);
    }
    blocks
}

/// Runs the parser of `format` on `rest`, which opens with its marker.
fn parse_block(format: Format, rest: &str) -> (usize, Vec<RawCall>) {
    match format {
        Format::Hermes => hermes::parse(rest),
        Format::QwenXml => qwen_xml::parse(rest),
        Format::Mistral => mistral::parse(rest),
        Format::Llama => llama::parse(rest),
        Format::Functionary => functionary::parse(rest),
        Format::DeepSeek => deepseek::parse(rest),
        Format::Lfm => lfm::parse(rest),
        Format::Pythonic | Format::Json => (rest.len(), Vec::new()),
    }
}

/// The end of a block at `end`, taking in trailing closers and the rest of its line.
fn trailing(text: &str, mut end: usize) -> usize {
    loop {
        let rest = &text[end..];
        let trimmed = rest.trim_start();
        match TRAILERS.iter().find(|t| trimmed.starts_with(**t)) {
            Some(t) => end += rest.len() - trimmed.len() + t.len(),
            None => break,
        }
    }
    let rest = &text[end..];
    let spaces = rest.len() - rest.trim_start_matches([' ', '\t', '\r']).len();
    if rest[spaces..].starts_with('\n') {
        end += spaces + 1;
    } else if rest[spaces..].is_empty() {
        end = text.len();
    }
    end
}
