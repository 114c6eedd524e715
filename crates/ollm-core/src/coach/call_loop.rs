//! The call-loop guard: a reply that opens with calls written as text and then keeps
//! writing calls is cut where it starts to repeat them.
//!
//! Qwen2.5-Coder-0.5B, asked in plain words (issue 24's eval), answered a result with a
//! reply of call lines that cycled through four calls (`search_text`, `list_dir`,
//! `read_file`, `run_command`) or echoed the offered tools' schemas as calls, one after
//! another, until the generation cap: minutes on a slow machine (six of ten eval runs
//! killed at 300 s). Every line held back for recovery showed nothing meanwhile, and the
//! text runaway guard (`runaway.rs`) looks for units of at most 256 bytes, shorter than
//! such a cycle.
//!
//! # Decisions
//! - **Only a reply that opens like a call** is watched: its first character, after
//!   whitespace, is `{` or `[`, or it opens with a fence calls are
//!   written in (no info string, `json`, `tool_call`, `tool_code`). Such a reply is held
//!   back from display whole (`recover/stream.rs`), so the cut never takes back shown
//!   text. Prose that quotes JSON, and code in other fences, is never cut.
//! - **What counts as a call**: a complete top-level JSON object (braces counted outside
//!   strings, so `[{..},{..}]` is two) and a line that opens with `{`. Objects are
//!   compared as canonical JSON (`memory.rs`), lines as written.
//! - **The cut**: before the first object or line that repeats an earlier one of the same
//!   reply, or before the one past [`MAX_CALLS_PER_REPLY`] (`call-loop-cut`). The stream is then dropped
//!   (which cancels the request), the text up to the cut is read as the whole reply (an
//!   open fence is closed) and its calls run as usual; a warning says what happened. A
//!   reply that repeats a call is no batch a user asked for: the guard already answers
//!   such twins from one result (`repeat-guard`), so what is cut is only ever repeats.
//! - **A reply that names [`LISTED_TOOLS`] different tools** is the model going through
//!   its tools, not using them: it is cut before the second tool's first call, so only
//!   the first tool's calls run. The 0.5B's first reply often called every offered tool
//!   in the order offered (`read_file`, `list_dir`, `search_text`, `write_file`,
//!   `run_command`), the right call first and the rest filler, among them `write_file`
//!   calls with invented content that replaced files in the eval's folder (`--yes`).
//!   Calls to two tools, which a task may need at once, are read whole
//!   (`listed-tools-cut`).
//! - Cost: each byte is looked at once; memory is the set of distinct calls of the
//!   reply, each a line or an object of it.
//! - Each cut is its own rule with its own switch; the CLI's `--no-runaway-guard` turns
//!   both off with `runaway-stop`.

use std::collections::HashSet;

use serde_json::Value;

use super::rule::{MAX_CALLS_PER_REPLY, Rule};

/// How many different tools a reply written as calls names before it counts as listing
/// the tools rather than using them (see the module docs).
pub(crate) const LISTED_TOOLS: usize = 3;

/// Where a reply that kept writing calls is cut, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cut {
    /// The byte offset in the reply: the text before it is kept.
    pub(crate) at: usize,
    /// The rule that cut it.
    pub(crate) rule: Rule,
    /// What the reply did, for the warning.
    pub(crate) why: String,
}

/// Watches one streamed reply (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct CallWatch {
    /// Whether a repeated call, or one past the cap, cuts (`call-loop-cut`).
    loops: bool,
    /// Whether a third tool cuts (`listed-tools-cut`).
    lists: bool,
    /// Whether the reply opens like a call: unknown while only whitespace has come.
    watched: Option<bool>,
    /// Bytes of the reply looked at.
    pos: usize,
    /// Brace depth outside strings, and the string state inside objects.
    depth: usize,
    in_string: bool,
    escaped: bool,
    /// Where the object being read opened.
    object_at: usize,
    /// Where the current line opened, and the brace depth there.
    line_at: usize,
    line_depth: usize,
    objects: HashSet<String>,
    lines: HashSet<String>,
    /// Distinct calls seen: objects, and call lines that are no complete object.
    calls: usize,
    /// Each tool named, in order, and where its first call opened.
    tools: Vec<(String, usize)>,
}

impl CallWatch {
    /// A watch that cuts at a loop (`loops`), at a listing of the tools (`lists`), or both.
    pub(crate) fn new(loops: bool, lists: bool) -> Self {
        CallWatch {
            loops,
            lists,
            ..CallWatch::default()
        }
    }

    /// Looks at what `reply` (the whole reply so far) added; the cut once it loops.
    pub(crate) fn push(&mut self, reply: &str) -> Option<Cut> {
        if self.watched == Some(false) {
            return None;
        }
        if self.watched.is_none() {
            self.watched = Some(opens_like_call(reply.trim_start())?);
            if self.watched == Some(false) {
                return None;
            }
        }
        let bytes = reply.as_bytes();
        while self.pos < bytes.len() {
            let at = self.pos;
            self.pos += 1;
            if let Some(cut) = self.step(reply, at, bytes[at]) {
                return Some(cut);
            }
        }
        None
    }

    /// One byte of the reply at `at`.
    fn step(&mut self, reply: &str, at: usize, byte: u8) -> Option<Cut> {
        if byte == b'\n' {
            // JSON strings hold no raw newline: a string still open is a broken one.
            self.in_string = false;
            self.escaped = false;
            let cut = self.line(&reply[self.line_at..at]);
            self.line_at = at + 1;
            self.line_depth = self.depth;
            return cut;
        }
        if self.depth > 0 && self.in_string {
            match (self.escaped, byte) {
                (true, _) => self.escaped = false,
                (false, b'\\') => self.escaped = true,
                (false, b'"') => self.in_string = false,
                _ => {}
            }
            return None;
        }
        match byte {
            b'"' if self.depth > 0 => self.in_string = true,
            b'{' => {
                if self.depth == 0 {
                    self.object_at = at;
                }
                self.depth += 1;
            }
            b'}' if self.depth > 0 => {
                self.depth -= 1;
                if self.depth == 0 {
                    return self.object(&reply[self.object_at..=at]);
                }
            }
            _ => {}
        }
        None
    }

    /// A complete top-level object.
    fn object(&mut self, text: &str) -> Option<Cut> {
        let Ok(value) = serde_json::from_str::<Value>(text) else {
            return None;
        };
        let mut key = String::new();
        super::memory::canonical(&value, &mut key);
        if !self.objects.insert(key) && self.loops {
            let why = "repeated a call it had written";
            return Some(self.cut_at(self.object_at, Rule::CallLoopCut, why));
        }
        if let Some(cut) = self.tool(&value) {
            return Some(cut);
        }
        self.count(self.object_at)
    }

    /// Notes the tool `call` names; the cut once a third tool is named: before the
    /// second tool's first call.
    fn tool(&mut self, call: &Value) -> Option<Cut> {
        let name = call
            .get("name")
            .or_else(|| call.get("function").and_then(|f| f.get("name")))
            .and_then(Value::as_str)?;
        if self.tools.iter().any(|(t, _)| t == name) {
            return None;
        }
        self.tools.push((name.to_owned(), self.object_at));
        (self.lists && self.tools.len() >= LISTED_TOOLS).then(|| {
            self.cut_at(
                self.tools[1].1,
                Rule::ListedToolsCut,
                "called one tool after another as if listing them; only its first tool's calls \
                 are read",
            )
        })
    }

    /// A complete line, as written; only lines that open with `{` outside any object,
    /// and hold more than the brace, count: the `{` alone that opens an object written
    /// over several lines, or one nested in it, is no call (the 0.5B's `"arguments": [`
    /// then `{` on a line of its own was cut as a repeat of the line that opened the
    /// call, and the call could not be read: `wc -l sales.csv`, 2026-11-29).
    fn line(&mut self, raw: &str) -> Option<Cut> {
        let line = raw.trim();
        if !line.starts_with('{') || line == "{" || self.line_depth > 0 {
            return None;
        }
        let start = self.line_at + (raw.len() - raw.trim_start().len());
        if !self.lines.insert(line.to_owned()) && self.loops {
            let why = "repeated a call line it had written";
            return Some(self.cut_at(start, Rule::CallLoopCut, why));
        }
        // A line that is a complete object was counted as one already.
        if serde_json::from_str::<Value>(line).is_err() {
            return self.count(start);
        }
        None
    }

    /// Counts one more distinct call that opened at `at`.
    fn count(&mut self, at: usize) -> Option<Cut> {
        self.calls += 1;
        (self.loops && self.calls > MAX_CALLS_PER_REPLY).then(|| {
            let why = format!("wrote more than {MAX_CALLS_PER_REPLY} calls");
            self.cut_at(at, Rule::CallLoopCut, &why)
        })
    }

    fn cut_at(&self, at: usize, rule: Rule, what: &str) -> Cut {
        Cut {
            at,
            rule,
            why: format!("the reply {what}; it was stopped there"),
        }
    }
}

/// Whether a reply's body opens like a call: `{`, `[`, or a fence with no info
/// string or one calls are fenced in; `None` while that is not known yet.
fn opens_like_call(body: &str) -> Option<bool> {
    let first = body.chars().next()?;
    if first != '`' {
        return Some(matches!(first, '{' | '['));
    }
    let head = body.as_bytes();
    if !b"```".starts_with(&head[..head.len().min(3)]) {
        return Some(false);
    }
    let after = body.strip_prefix("```")?;
    let info = &after[..after.find('\n')?];
    let info = info.trim().to_ascii_lowercase();
    Some(matches!(
        info.as_str(),
        "" | "json" | "tool_call" | "tool_code"
    ))
}

/// `reply` cut at `at`, with an array it opened closed and a fence it opened (a line
/// starting with three backticks) closed again, so the calls before the cut read as they would in a finished reply.
pub(crate) fn cut_reply(reply: &str, at: usize) -> String {
    let mut kept = reply[..at].trim_end().to_owned();
    if kept.trim_start().starts_with('[') && !kept.ends_with(']') {
        kept = kept.trim_end_matches(',').trim_end().to_owned();
        kept.push(']');
    }
    let fences = kept
        .lines()
        .filter(|l| l.trim_start().starts_with("```"))
        .count();
    if fences % 2 == 1 {
        kept.push_str("\n```");
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where feeding `text` in `chunk`-byte pieces (at char boundaries) cuts it.
    fn cut(text: &str, chunk: usize) -> Option<usize> {
        cut_by(text, chunk, CallWatch::new(true, true)).map(|c| c.at)
    }

    /// The cut feeding `text` in `chunk`-byte pieces to `watch` makes.
    fn cut_by(text: &str, chunk: usize, mut watch: CallWatch) -> Option<Cut> {
        let mut so_far = String::new();
        let mut piece = String::new();
        for c in text.chars() {
            piece.push(c);
            if piece.len() >= chunk {
                so_far.push_str(&std::mem::take(&mut piece));
                if let Some(cut) = watch.push(&so_far) {
                    return Some(cut);
                }
            }
        }
        so_far.push_str(&piece);
        watch.push(&so_far)
    }

    /// Checks that `text` is cut (whatever the chunking) so that `kept` is what stays.
    fn check(text: &str, kept: Option<&str>) {
        for chunk in [1, 5, 64, 4096] {
            let got = cut(text, chunk).map(|at| cut_reply(text, at));
            assert_eq!(got.as_deref(), kept, "chunk {chunk}: {text:?}");
        }
    }

    const SEARCH: &str =
        r#"{"name": "search_text", "arguments": {"pattern": "notes.txt", "regex": true}}"#;
    const LIST: &str = r#"{"name": "list_dir", "arguments": {"path": null}}"#;
    const READ: &str = r#"{"name": "read_file", "arguments": {"path": "/tmp/p05"}}"#;

    #[test]
    fn a_cycle_of_call_lines_is_cut_at_its_first_repeat() {
        // The 0.5B's reply (issue 24), its four-call cycle shortened to two tools (with
        // three, the listing rule below cuts sooner).
        let other = r#"{"name": "search_text", "arguments": {"pattern": "launch"}}"#;
        let cycle = format!("{SEARCH}\n{LIST}\n{other}\n");
        let reply = cycle.repeat(40);
        check(&reply, Some(cycle.trim_end()));
        // The same in a fence: the fence is closed again.
        let fenced = format!("```json\n{}", cycle.repeat(5));
        check(
            &fenced,
            Some(&format!("```json\n{}\n```", cycle.trim_end())),
        );
        // An array of objects on one line: cut at the repeated object.
        let array = format!("[{SEARCH}, {LIST}, {SEARCH}, {LIST}]");
        check(&array, Some(&format!("[{SEARCH}, {LIST}]")));
    }

    #[test]
    fn a_reply_that_goes_through_the_tools_keeps_its_first_tool() {
        // The 0.5B's first reply to "Which port is set in config/app.toml?" (issue 24).
        let port = r#"{"name": "read_file", "arguments": {"path": "config/app.toml"}}"#;
        let write =
            r#"{"name": "write_file", "arguments": {"path": "data/x.txt", "content": "Hello"}}"#;
        let reply = format!("{port}\n{LIST}\n{SEARCH}\n{write}\n");
        check(&reply, Some(port));
        // Two tools are read whole, and two calls of one tool are kept together.
        check(&format!("{port}\n{LIST}\n"), None);
        check(
            &format!("{port}\n{READ}\n{LIST}\n{SEARCH}\n"),
            Some(&format!("{port}\n{READ}")),
        );
    }

    #[test]
    fn each_cut_names_its_rule_and_has_its_own_switch() {
        let port = r#"{"name": "read_file", "arguments": {"path": "config/app.toml"}}"#;
        let listing = format!("{port}\n{LIST}\n{SEARCH}\n");
        let looping = format!("{SEARCH}\n{LIST}\n{SEARCH}\n");
        let rule = |text: &str, loops: bool, lists: bool| {
            cut_by(text, 7, CallWatch::new(loops, lists)).map(|c| c.rule)
        };
        assert_eq!(rule(&listing, true, true), Some(Rule::ListedToolsCut));
        assert_eq!(rule(&listing, true, false), None);
        assert_eq!(rule(&looping, true, true), Some(Rule::CallLoopCut));
        assert_eq!(rule(&looping, false, true), None);
        let many: String = (0..40)
            .map(|i| format!(r#"{{"name": "read_file", "arguments": {{"path": "f{i}"}}}}"#) + "\n")
            .collect();
        assert_eq!(rule(&many, true, false), Some(Rule::CallLoopCut));
        assert_eq!(rule(&many, false, true), None);
    }

    #[test]
    fn a_twin_written_differently_is_a_repeat_too() {
        let twin =
            r#"{"arguments": {"regex": true, "pattern": "notes.txt"}, "name": "search_text"}"#;
        check(&format!("{SEARCH}\n{twin}\n"), Some(SEARCH));
    }

    #[test]
    fn distinct_calls_run_up_to_the_cap() {
        let call =
            |i: usize| format!(r#"{{"name": "read_file", "arguments": {{"path": "f{i}"}}}}"#);
        let few: String = (0..MAX_CALLS_PER_REPLY).map(|i| call(i) + "\n").collect();
        check(&few, None);
        let many: String = (0..40).map(|i| call(i) + "\n").collect();
        check(&many, Some(few.trim_end()));
    }

    #[test]
    fn replies_that_do_not_open_like_a_call_are_never_cut() {
        let prose = format!("Here is how to call it:\n{SEARCH}\n{SEARCH}\n{SEARCH}\n");
        check(&prose, None);
        check("The result was {\"a\": 1} and {\"a\": 1}.\n", None);
        // Braces inside strings do not confuse the count.
        let tricky = r#"{"name": "write_file", "arguments": {"path": "a", "content": "} { \" }"}}"#;
        check(&format!("{tricky}\n"), None);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 200, failure_persistence: None, ..Default::default() })]

        /// Any text, however split, never panics the watch, and a cut keeps a prefix of
        /// the reply (up to the closing it adds).
        #[test]
        fn any_text_is_watched_safely(text in "[`{}\\[\\]\"\\\\a-c ,:\n\u{e9}\u{1F600}]{0,200}", chunk in 1usize..9) {
            if let Some(at) = cut(&text, chunk) {
                let kept = cut_reply(&text, at);
                let body = kept.trim_end_matches("\n```").trim_end_matches(']');
                proptest::prop_assert!(text.starts_with(body.trim_end_matches(',')), "{kept:?}");
            }
        }
    }

    #[test]
    fn a_call_written_over_several_lines_is_read_whole() {
        // The 0.5B's reply to "Could you run `wc -l sales.csv` and tell me the result?",
        // its arguments an array of objects, each `{` on a line of its own.
        let pretty = "```json\n{\n  \"name\": \"run_command\",\n  \"arguments\": [\n    {\n      \"program\": \"wc\"\n    },\n    {\n      \"args\": [\"-l\"]\n    }\n  ]\n}\n```\n";
        check(pretty, None);
        let two = "{\n  \"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}\n}\n{\n  \"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}\n}\n";
        check(two, None);
        // The same object twice is still a repeat.
        let again = "{\n  \"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}\n}\n";
        let twice = format!("{again}{again}");
        check(&twice, Some(again.trim_end()));
    }

    #[test]
    fn a_fence_in_another_language_streams_uncut() {
        let code = "```python\n{1: 2}\n{1: 2}\n```\n";
        check(code, None);
        assert_eq!(opens_like_call("``"), None);
        assert_eq!(opens_like_call("```json"), None);
        assert_eq!(opens_like_call("```JSON\n{"), Some(true));
        assert_eq!(opens_like_call("`x`"), Some(false));
    }

    #[test]
    fn one_call_and_its_invented_result_are_not_cut() {
        // Cut by recovery (`leading_calls`), not here: nothing repeats.
        check(
            &format!("{READ}\n{{\"type\": \"error\", \"message\": \"No such file\"}}\n"),
            None,
        );
    }
}
