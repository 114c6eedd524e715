//! What the strategies share: the display pieces ([`Shown`], [`TextFilter`]), the one
//! code-fence reader ([`fence`]), the one tool-list prompt ([`tool_list`]), and the shape
//! of a finished turn ([`Turn`]) with the default way to record it.
//!
//! # Decisions
//! - This module is a leaf: it imports no other strategy module, so `native`, `react` and
//!   `constrained` can each use it without importing one another or `strategy` itself
//!   (no module cycle).
//! - A [`TextFilter`] is a trait, not an enum of the strategies, so a new way of showing a
//!   reply (for example one that holds back possible call markup) is a new type beside
//!   its strategy, not another arm here.
//! - A fence's info string is the rest of its opening line (CommonMark); a fence on one
//!   line (```` ```json {...}``` ````) has only a run of letters and digits as its info
//!   string. Callers decide how strict to be with [`Fence::closed`] and
//!   [`Fence::one_line`].

use ollm_types::{Message, ToolCall, ToolSchema};

use crate::tool::ToolOutcome;

/// A piece of text to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Shown {
    /// Answer text.
    Text(String),
    /// Reasoning text.
    Thinking(String),
}

/// How streamed text is shown while a reply arrives; one fresh filter per reply.
pub(crate) trait TextFilter: Send + std::fmt::Debug {
    /// What to show for a new piece of text.
    fn feed(&mut self, delta: &str) -> Vec<Shown>;

    /// What is left to show when the reply ends; `answer` is the turn's answer when the
    /// reply was read as one.
    fn finish(&mut self, answer: Option<&str>) -> Vec<Shown>;
}

/// Text is the answer: shown as it arrives.
#[derive(Debug, Default)]
pub(crate) struct PassThrough;

impl TextFilter for PassThrough {
    fn feed(&mut self, delta: &str) -> Vec<Shown> {
        vec![Shown::Text(delta.to_owned())]
    }

    fn finish(&mut self, _answer: Option<&str>) -> Vec<Shown> {
        Vec::new()
    }
}

/// A Markdown code fence around the whole of a text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fence<'a> {
    /// The text inside, trimmed, without the closing fence.
    pub(crate) body: &'a str,
    /// Whether the text ends with a closing fence.
    pub(crate) closed: bool,
    /// Whether the opening fence has no line break after it.
    pub(crate) one_line: bool,
}

/// The fence around `text` (surrounding whitespace ignored), or `None` when it does not
/// open with one.
pub(crate) fn fence(text: &str) -> Option<Fence<'_>> {
    let rest = text.trim().strip_prefix("```")?;
    let (one_line, inner) = match rest.find('\n') {
        Some(i) => (false, &rest[i..]),
        None => (
            true,
            rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric()),
        ),
    };
    let inner = inner.trim_end();
    let closed = inner.ends_with("```");
    Some(Fence {
        body: inner.trim_end_matches("```").trim(),
        closed,
        one_line,
    })
}

/// The text inside a fence around `text`, or `text` itself (trimmed) when there is none.
pub(crate) fn strip_fence(text: &str) -> &str {
    fence(text).map_or(text.trim(), |f| f.body)
}

/// One line per tool: its name, description and argument schema.
pub(crate) fn tool_list(tools: &[ToolSchema]) -> String {
    tools
        .iter()
        .map(|t| {
            format!(
                "- {}: {}\n  Arguments (JSON Schema): {}\n",
                t.name, t.description, t.parameters
            )
        })
        .collect()
}

/// Appends `extra` to a system prompt (after a blank line), or makes it the prompt.
pub(crate) fn append_system(system: &mut Option<String>, extra: String) {
    *system = Some(match system.take() {
        Some(s) if !s.is_empty() => format!("{s}\n\n{extra}"),
        _ => extra,
    });
}

/// A finished (or cut short) turn, as the strategy records it in the history.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Turn<'a> {
    /// The reply was the answer.
    Answer {
        /// The reply's whole text.
        raw: &'a str,
        /// The answer read from it.
        answer: &'a str,
    },
    /// The reply could not be read; `correction` answers it.
    Retry {
        /// The reply's whole text.
        raw: &'a str,
        /// The message that tells the model what to fix.
        correction: &'a str,
    },
    /// The reply made calls, each answered by the result at the same index.
    Calls {
        /// The reply's whole text.
        raw: &'a str,
        /// The calls.
        calls: &'a [ToolCall],
        /// One result per call.
        results: &'a [ToolOutcome],
    },
    /// The run was cancelled before the reply made any call.
    Cut {
        /// The text that had arrived.
        raw: &'a str,
    },
}

/// The default record: an answer or partial text as an assistant message, calls as an
/// assistant message carrying them (with `call_text` as its text) followed by one tool
/// message per call, and a retry as the reply followed by the correction.
pub(crate) fn record_default(turn: Turn<'_>, call_text: &str) -> Vec<Message> {
    match turn {
        Turn::Answer { answer, .. } => vec![Message::assistant(answer)],
        Turn::Retry { raw, correction } => {
            vec![Message::assistant(raw), Message::user(correction)]
        }
        Turn::Calls { calls, results, .. } => {
            let mut out = vec![Message::assistant_with_calls(call_text, calls.to_vec())];
            out.extend(
                calls.iter().zip(results).map(|(call, result)| {
                    Message::tool_result(&call.id, &call.name, &result.content)
                }),
            );
            out
        }
        Turn::Cut { raw: "" } => Vec::new(),
        Turn::Cut { raw } => vec![Message::assistant(raw)],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Option<(&str, bool, bool)>) {
        let got = fence(text).map(|f| (f.body, f.closed, f.one_line));
        assert_eq!(got, expected, "{text:?}");
    }

    #[test]
    fn fences_are_read() {
        check("plain", None);
        check(
            "```json\n{\"a\": 1}\n```",
            Some(("{\"a\": 1}", true, false)),
        );
        check(" ```\n{}\n``` ", Some(("{}", true, false)));
        check("```tool_call\n{}\n```", Some(("{}", true, false)));
        check("```json\n{}", Some(("{}", false, false)));
        check("```json {}```", Some(("{}", true, true)));
        assert_eq!(strip_fence("  x  "), "x");
    }
}
