//! The native strategy: tools go in the request's `tools`, calls come back as events,
//! and calls a model wrote as text instead are recovered here through
//! [`crate::recover`] (every local-model format, per call, never an example; see its
//! module docs and `docs/tool-calling.md`).
//!
//! # Decisions
//! - **Display**: streamed text goes through [`Hold`] ([`crate::recover::HoldBack`]):
//!   text that cannot start a call is shown as it arrives, text that may is held until
//!   the reply ends; then only the prose is released. A recovered call is announced as a
//!   tool call (`ToolCallStarted`), never shown as answer text, and held text that turns
//!   out to be no call is released unchanged.
//! - **Answer hygiene**: a reply that makes calls keeps only its prose, in the display
//!   and in the history: the assistant message carries the calls as structured calls
//!   (the server's template renders them as the model was trained on) and the prose as
//!   its text, without the markup. Fence debris that a server's own parser leaves around
//!   a call it took out of the content (```` ```json ```` and ```` ``` ```` lines, a bare
//!   `json`) is dropped too.
//! - **Native calls win**: when the server parsed calls, the text is not searched for
//!   more (a model rarely mixes both; running a quoted copy twice would be worse).
//! - **1:1 always**: a recovered call to a tool that is not offered is recorded as a call
//!   answered `Error: Unknown tool "<name>"; available: a, b`; a malformed block in a
//!   reply that is clearly a call is recorded as a call named [`MALFORMED_CALL`]
//!   answered with what was wrong. Neither runs anything. JSON quoted in prose is never a
//!   call, so it never gets such an answer either.

use ollm_types::{Message, ProviderRequest, ToolCall, ToolSchema};
use serde_json::{Map, Value};

use super::common::{self, Shown, TextFilter, Turn};
use crate::coach::{CoachConfig, Rule};
use crate::recover::{self, HoldBack, OfferedTools, Recovered};
use crate::tool::ToolOutcome;

/// The name a malformed text call is recorded under (it never runs).
pub(crate) const MALFORMED_CALL: &str = "invalid_tool_call";

/// Offers `tools` natively.
pub(crate) fn prepare(request: &mut ProviderRequest, tools: &[ToolSchema]) {
    request.tools = tools.to_vec();
}

/// Records a native turn: calls with the text the reply keeps (its prose, trimmed),
/// everything else as the default.
pub(crate) fn record(turn: Turn<'_>) -> Vec<Message> {
    match turn {
        Turn::Calls { raw, .. } => common::record_default(turn, raw.trim()),
        _ => common::record_default(turn, ""),
    }
}

/// The display of a native reply: possible call markup held back by [`HoldBack`], then a
/// trailing run of fence debris held by [`Debris`] (see the module docs). The shown text
/// is always a prefix of what the turn finally shows, so nothing is lost or shown twice.
#[derive(Debug, Default)]
pub(crate) struct Hold {
    hold: HoldBack,
    /// What the hold-back released.
    released: String,
    /// How much of it was shown.
    shown: usize,
    debris: Debris,
}

impl TextFilter for Hold {
    fn feed(&mut self, delta: &str) -> Vec<Shown> {
        self.released.push_str(self.hold.push(delta));
        let safe = self.debris.advance(&self.released, false);
        let from = self.shown;
        self.shown = safe.max(from);
        text(&self.released[from..self.shown])
    }

    fn finish(&mut self, shown: Option<&str>) -> Vec<Shown> {
        let done = &self.released[..self.shown];
        match shown.and_then(|s| s.strip_prefix(done)) {
            Some(rest) => text(rest),
            None => Vec::new(),
        }
    }
}

fn text(s: &str) -> Vec<Shown> {
    if s.is_empty() {
        Vec::new()
    } else {
        vec![Shown::Text(s.to_owned())]
    }
}

/// The line scan that finds a trailing run of fence debris: blank lines, a bare `json`,
/// and fences that hold nothing but blank lines. A fence with content in it is kept
/// whole, so a real code block survives. Incremental: each line is looked at once.
#[derive(Debug, Default)]
struct Debris {
    /// The start of the first line not yet scanned.
    line: usize,
    /// Inside a fence, and whether it has content.
    in_fence: bool,
    has_content: bool,
    /// Where the trailing run of debris lines starts, if the last line was debris.
    run: Option<usize>,
}

impl Debris {
    /// Scans `text` (which only grows) and returns how much of it is safe to show: up to
    /// the trailing debris run, or the partial last line that may be debris. With `end`,
    /// the last line counts as complete.
    fn advance(&mut self, text: &str, end: bool) -> usize {
        while self.line < text.len() {
            let Some(len) = text[self.line..].find('\n') else {
                break;
            };
            let next = self.line + len + 1;
            self.take(self.line, &text[self.line..next]);
            self.line = next;
        }
        let partial = &text[self.line..];
        if end && !partial.is_empty() {
            self.take(self.line, partial);
            self.line = text.len();
        }
        let partial = text[self.line..].trim();
        let may_be_debris = partial.is_empty()
            || "json".starts_with(partial)
            || "```".starts_with(partial)
            || is_fence(partial);
        match self.run {
            Some(run) => run,
            None if may_be_debris => self.line,
            None => text.len(),
        }
    }

    /// Takes in one complete line starting at `at`.
    fn take(&mut self, at: usize, line: &str) {
        let l = line.trim();
        let debris = if is_fence(l) {
            let closes_content = self.in_fence && self.has_content;
            self.in_fence = !self.in_fence;
            self.has_content = false;
            !closes_content
        } else if l.is_empty() || l == "json" {
            true
        } else {
            self.has_content |= self.in_fence;
            false
        };
        if !debris {
            self.run = None;
        } else if self.run.is_none() {
            self.run = Some(at);
        }
    }
}

fn is_fence(line: &str) -> bool {
    line.strip_prefix("```")
        .is_some_and(|info| info.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
}

/// A reply read by the native strategy.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Read {
    /// No call: the whole text is the answer.
    Answer(String),
    /// Calls, each with the result decided here (unknown tool, malformed) or `None` to
    /// run it, and the prose the reply keeps.
    Calls {
        /// The calls, in order.
        calls: Vec<ToolCall>,
        /// A result per call, where it is decided without running anything.
        answered: Vec<Option<ToolOutcome>>,
        /// The reply's text without call markup.
        prose: String,
        /// The calls the coach repaired, to be told to the caller.
        repaired: Vec<RepairedCall>,
    },
}

/// A call recovered from text that the coach repaired (`name-repair`, `path-in-name`,
/// `file-as-name`, `tool-from-arguments`): the turn loop tells the caller with a
/// `Coached` event, as it does for the server's own calls, so a front end and the eval
/// can see where each repair acted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RepairedCall {
    /// The call's id.
    pub(crate) call_id: String,
    /// The rule that repaired it.
    pub(crate) rule: Rule,
    /// What it did: the name written and the call it became.
    pub(crate) detail: String,
}

/// Reads a finished native reply: the server's calls, or calls recovered from `text`
/// under the `coach`'s switches.
pub(crate) fn interpret(
    text: &str,
    native_calls: Vec<ToolCall>,
    tools: &[ToolSchema],
    mint: &mut dyn FnMut() -> String,
    coach: &CoachConfig,
) -> Read {
    if !native_calls.is_empty() {
        let answered = vec![None; native_calls.len()];
        return Read::Calls {
            calls: native_calls,
            answered,
            prose: without_fence_debris(text),
            repaired: Vec::new(),
        };
    }
    let offered = OfferedTools::new(tools.iter().map(|t| (t.name.clone(), t.parameters.clone())))
        .coached(coach);
    let recovery = recover::recover(text, &offered);
    if recovery.calls.is_empty() {
        return Read::Answer(text.to_owned());
    }
    let available = coach
        .is_on(Rule::ToolsHint)
        .then(|| offered.names().collect::<Vec<_>>().join(", "));
    let (calls, answered): (Vec<ToolCall>, _) = recovery
        .calls
        .into_iter()
        .map(|item| planned(item, mint(), available.as_deref()))
        .unzip();
    let repaired = (calls.iter().zip(recovery.repairs))
        .filter_map(|(call, repair)| {
            let repair = repair?;
            Some(RepairedCall {
                call_id: call.id.clone(),
                rule: repair.rule,
                detail: format!(
                    "the reply's call to \"{}\" read as {} {}",
                    repair.written,
                    call.name,
                    Value::Object(call.arguments.clone())
                ),
            })
        })
        .collect();
    Read::Calls {
        calls,
        answered,
        prose: without_fence_debris(&recovery.prose),
        repaired,
    }
}

/// One recovered item as a call to record, with its result when it must not run; the
/// names of the tools on offer are `available` (the coach's `tools-hint`).
fn planned(
    item: Recovered,
    id: String,
    available: Option<&str>,
) -> (ToolCall, Option<ToolOutcome>) {
    let call = |name: String, arguments| ToolCall {
        id: id.clone(),
        name,
        arguments,
    };
    match item {
        Recovered::Call { name, arguments } => (call(name, arguments), None),
        Recovered::UnknownTool { name, arguments } => {
            let answer = match available {
                Some(available) => format!("Unknown tool \"{name}\"; available: {available}"),
                None => format!("Unknown tool \"{name}\""),
            };
            (call(name, arguments), Some(ToolOutcome::error(answer)))
        }
        Recovered::Malformed { reason, .. } => {
            let how = "Write it again as one {\"name\": ..., \"arguments\": {...}} call";
            let answer = match available {
                Some(available) => format!(
                    "the tool call could not be read: {reason}. {how} naming one of: {available}"
                ),
                None => format!("the tool call could not be read: {reason}. {how}"),
            };
            (
                call(MALFORMED_CALL.to_owned(), Map::new()),
                Some(ToolOutcome::error(answer)),
            )
        }
    }
}

/// `text` without its trailing run of fence debris (see [`Debris`]); empty when the
/// text is nothing but debris. The display holds back exactly this run, so what it shows
/// is always a prefix of the result.
pub(crate) fn without_fence_debris(text: &str) -> String {
    let keep = Debris::default().advance(text, true);
    if text[..keep].trim().is_empty() {
        String::new()
    } else {
        text[..keep].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn tools() -> Vec<ToolSchema> {
        ["read_file", "list_dir"]
            .into_iter()
            .map(|n| ToolSchema::new(n, "", json!({"type": "object"})))
            .collect()
    }

    /// What `text` reads as: the calls (name, arguments, preset result) and the prose, or
    /// `None` for an answer.
    /// A call as read: name, arguments and the preset result.
    type Read3 = (String, Value, Option<String>);

    fn read(text: &str) -> Option<(Vec<Read3>, String)> {
        let mut n = 0;
        let mut mint = || {
            n += 1;
            format!("t{n}")
        };
        match interpret(
            text,
            Vec::new(),
            &tools(),
            &mut mint,
            &CoachConfig::default(),
        ) {
            Read::Answer(answer) => {
                assert_eq!(answer, text);
                None
            }
            Read::Calls {
                calls,
                answered,
                prose,
                ..
            } => Some((
                calls
                    .into_iter()
                    .zip(answered)
                    .map(|(c, a)| (c.name, Value::Object(c.arguments), a.map(|a| a.content)))
                    .collect(),
                prose,
            )),
        }
    }

    fn check(text: &str, expected: Option<Vec<(&str, Value)>>) {
        let got = read(text).map(|(calls, _)| {
            calls
                .into_iter()
                .map(|(n, a, answer)| {
                    assert_eq!(answer, None, "{text:?}");
                    (n, a)
                })
                .collect::<Vec<_>>()
        });
        let expected = expected.map(|c| c.into_iter().map(|(n, a)| (n.to_owned(), a)).collect());
        assert_eq!(got, expected, "{text:?}");
    }

    #[test]
    fn recovers_deliberate_calls() {
        check(
            "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>",
            Some(vec![("read_file", json!({"path": "a"}))]),
        );
        check(
            "Let me look.\n<tool_call>{\"name\":\"list_dir\",\"arguments\":\"{}\"}</tool_call>\n<tool_call>{\"name\":\"read_file\",\"parameters\":{\"path\":\"b\"}}",
            Some(vec![
                ("list_dir", json!({})),
                ("read_file", json!({"path": "b"})),
            ]),
        );
        check(
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"c\"}}\n```",
            Some(vec![("read_file", json!({"path": "c"}))]),
        );
        check(
            " {\"name\": \"list_dir\"} ",
            Some(vec![("list_dir", json!({}))]),
        );
    }

    #[test]
    fn never_runs_what_is_only_quoted() {
        // JSON in prose, inline tags, fenced examples, anything that is not clearly a call.
        check(
            "To read a file, send {\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}.",
            None,
        );
        check(
            "The format is `<tool_call>{\"name\": \"read_file\"}</tool_call>`.",
            None,
        );
        check(
            "Example:\n```\n<tool_call>{\"name\": \"read_file\"}</tool_call>\n```\nThat is all.",
            None,
        );
        check(
            "Here:\n```json\n{\"name\": \"read_file\"}\n```\nand more prose",
            None,
        );
        check(
            "I don't have a `launch_code` tool; here is {\"name\": \"launch_code\"}.",
            None,
        );
        check("{\"answer\": 42}", None);
        check("plain answer", None);
    }

    #[test]
    fn unknown_and_malformed_calls_are_answered_without_running() {
        let (calls, prose) =
            read("```json\n{\"name\": \"launch_code\", \"arguments\": {\"file\": \"a\"}}\n```")
                .unwrap_or_default();
        assert_eq!(prose, "");
        assert_eq!(
            calls,
            [(
                "launch_code".to_owned(),
                // Kept as written: the history and the trace show what the model asked.
                json!({"file": "a"}),
                // The tools on offer are named only with `tools-hint` on (off by default).
                Some("Error: Unknown tool \"launch_code\"".into())
            )]
        );
        let (calls, _) = read("<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>")
            .unwrap_or_default();
        assert_eq!(calls[0].0, "rm_rf");
        let (calls, _) = read("<tool_call>not json</tool_call>").unwrap_or_default();
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].0, MALFORMED_CALL);
        let answer = calls[0].2.clone().unwrap_or_default();
        assert!(
            answer.starts_with("Error: the tool call could not be read: "),
            "{answer}"
        );
        assert!(
            answer.ends_with("{\"name\": ..., \"arguments\": {...}} call"),
            "{answer}"
        );
        let (calls, _) =
            read("<tool_call>{\"name\": \"read_file\", \"arguments\": [1]}</tool_call>")
                .unwrap_or_default();
        assert_eq!(calls[0].0, MALFORMED_CALL);
    }

    #[test]
    fn the_prose_keeps_no_markup() {
        let (_, prose) = read(
            "Let me look.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {}}\n</tool_call>",
        )
        .unwrap_or_default();
        assert_eq!(prose, "Let me look.\n");
    }

    #[test]
    fn fence_debris_is_dropped() {
        let check = |text: &str, expected: &str| {
            assert_eq!(without_fence_debris(text), expected, "{text:?}");
        };
        check("```json\n\n```", "");
        check("```json\n", "");
        check("\n```", "");
        check("json\n", "");
        check("Reading it.\n```json\n```\n", "Reading it.\n");
        check("Reading it.\n```json", "Reading it.\n");
        check("plain", "plain");
        check(
            "Code:\n```rust\nfn x() {}\n```\nDone.",
            "Code:\n```rust\nfn x() {}\n```\nDone.",
        );
        check(
            "Code:\n```rust\nfn x() {}\n```",
            "Code:\n```rust\nfn x() {}\n```",
        );
        check(
            "Text.\n```json\n\n```\nMore.",
            "Text.\n```json\n\n```\nMore.",
        );
    }
}
