//! The grade: what a run did, and whether it passes its task.
//!
//! # Decisions
//!
//! - **The run's end is graded first.** A run passes only if it ended the way a user
//!   would accept: exit code 0 and finish `stop`. A run ended by `repetition`,
//!   `max_turns`, `length`, a timeout or an error fails, whatever text it printed.
//! - **Only calls that ran count.** A call refused as unknown, invalid or repeated gets
//!   an error result (`is_error`), and is not "the right tool"; a tool task needs at
//!   least one call that ran, and every expected call must be among those that ran.
//!   A no-tool task fails on *any* call, run or not.
//! - **The answer is the final answer**: the text after the last call, so a call
//!   followed by an invented result, or prose written before the result came, is not
//!   graded as the answer. Each pattern must match it (see [`super::tasks`]).
//! - **A call written as text is no answer.** A final answer that opens with a
//!   `{"name": ..., "arguments": ...}` object (bare or fenced, closed or not) is a call
//!   nobody ran; the
//!   user sees JSON, so the run fails even when a pattern happens to match inside it
//!   (`{"name": "say_hello", "arguments": {"message": "Bonjour"}}`).
//! - The grade is a pure function of [`Run`], the task and the folder afterwards, the
//!   same for ollm's columns and the plain loop's.

use std::fs;
use std::path::Path;

use regex::Regex;
use serde_json::{Value, json};

use super::tasks::{ExpectedCall, Kind, Task};

/// One call the model made, and whether it ran.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    pub(super) name: String,
    pub(super) args: Value,
    /// It ran and succeeded: its result was no error.
    pub(super) ran: bool,
}

/// What one run did, whoever ran it.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Run {
    /// The final answer: the text after the last call.
    pub(super) answer: String,
    pub(super) calls: Vec<Call>,
    /// `stop`, `max_turns`, `repetition`, `length`, `error`, `timeout`, ... or `None`
    /// when the run said nothing.
    pub(super) finish: Option<String>,
    /// The process's exit code (the plain loop reports 0 when it ended normally).
    pub(super) exit_code: Option<i32>,
    pub(super) turns: u32,
    pub(super) prompt_tokens: u64,
    pub(super) completion_tokens: u64,
}

impl Run {
    /// How many calls ran.
    pub(super) fn calls_run(&self) -> usize {
        self.calls.iter().filter(|c| c.ran).count()
    }
}

/// Every reason `run` fails `task`, given the folder afterwards; empty when it passes.
pub(super) fn grade(task: &Task, run: &Run, project: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    if run.exit_code != Some(0) {
        failures.push(format!("exit code {:?}", run.exit_code));
    }
    if run.finish.as_deref() != Some("stop") {
        failures.push(format!("finish {:?}", run.finish));
    }
    if is_call_text(&run.answer) {
        failures.push("the answer is a call written as text".into());
    }
    for pattern in &task.answer {
        if !matches(pattern, &run.answer) {
            failures.push(format!("answer does not match {pattern}"));
        }
    }
    match task.kind {
        Kind::None if !run.calls.is_empty() => {
            failures.push(format!("{} calls on a no-tool task", run.calls.len()));
        }
        Kind::None => {}
        Kind::Tool => {
            if run.calls_run() == 0 {
                failures.push(format!("no call ran ({} made)", run.calls.len()));
            }
            for want in &task.calls {
                if !run.calls.iter().any(|c| c.ran && call_matches(want, c)) {
                    failures.push(format!("{} {:?} did not run", want.tool, want.args));
                }
            }
        }
    }
    if let Some(file) = &task.file {
        let text = fs::read_to_string(project.join(&file.path)).unwrap_or_default();
        if !matches(&file.pattern, &text) {
            failures.push(format!("{} does not match {}", file.path, file.pattern));
        }
    }
    failures
}

/// Whether `answer` is a call written as text: bare or in one fence, an object that
/// opens the answer and has `"name"` and `"arguments"` keys, parsed or not (the model
/// often drops the last brace).
fn is_call_text(answer: &str) -> bool {
    let text = answer.trim();
    let text = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .map_or(text, |t| t.trim_end().trim_end_matches("```"))
        .trim();
    text.starts_with('{') && text.contains("\"name\"") && text.contains("\"arguments\"")
}

/// Whether `pattern` matches `text`; a pattern that does not compile matches nothing
/// (the task file is validated on load, so this is only a safety net).
fn matches(pattern: &str, text: &str) -> bool {
    Regex::new(pattern).is_ok_and(|re| re.is_match(text))
}

/// Whether `call` is `want`: the same tool, and each key argument equal after
/// [`normalise`].
fn call_matches(want: &ExpectedCall, call: &Call) -> bool {
    call.name == want.tool
        && want
            .args
            .iter()
            .all(|(key, value)| normalise(&call.args[key]) == normalise(&json!(value)))
}

/// An argument for comparison: trimmed, lower-case, no leading `./` or trailing `/`; a
/// missing or empty path is the current folder.
fn normalise(value: &Value) -> String {
    let text = match value {
        Value::String(s) => s.trim().to_lowercase(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let text = text.strip_prefix("./").unwrap_or(&text);
    let text = text.strip_suffix('/').unwrap_or(text);
    if text.is_empty() {
        ".".into()
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool_task() -> Task {
        serde_json::from_value(json!({"id": "t", "kind": "tool", "prompt": "p",
            "answer": ["\\b8123\\b"],
            "calls": [{"tool": "read_file", "args": {"path": "config/app.toml"}}]}))
        .unwrap()
    }

    fn none_task() -> Task {
        serde_json::from_value(
            json!({"id": "n", "kind": "none", "prompt": "p", "answer": ["\\b42\\b"]}),
        )
        .unwrap()
    }

    fn read(path: &str, ran: bool) -> Call {
        Call {
            name: "read_file".into(),
            args: json!({ "path": path }),
            ran,
        }
    }

    /// A run that ended well, answered `answer` and made `calls`.
    fn run(answer: &str, calls: Vec<Call>) -> Run {
        Run {
            answer: answer.into(),
            calls,
            finish: Some("stop".into()),
            exit_code: Some(0),
            ..Run::default()
        }
    }

    /// Grades `run` on `task` in an empty folder: the failures, or empty for a pass;
    /// `expected` is the one failure wanted (a substring of it), or `None` for a pass.
    fn check(task: &Task, run: &Run, expected: Option<&str>) {
        let dir = tempfile::tempdir().unwrap();
        let failures = grade(task, run, dir.path());
        match expected {
            None => assert!(failures.is_empty(), "{failures:?}"),
            Some(want) => assert!(
                failures.len() == 1 && failures[0].contains(want),
                "wanted only {want:?}: {failures:?}"
            ),
        }
    }

    #[test]
    fn a_right_call_and_answer_pass() {
        check(
            &tool_task(),
            &run("The port is 8123.", vec![read("./Config/app.toml", true)]),
            None,
        );
    }

    #[test]
    fn a_run_ended_by_repetition_fails_whatever_it_answered() {
        let mut r = run("8123", vec![read("config/app.toml", true)]);
        r.finish = Some("repetition".into());
        check(&tool_task(), &r, Some("finish Some(\"repetition\")"));
    }

    #[test]
    fn a_run_at_the_turn_limit_or_timed_out_fails() {
        for finish in ["max_turns", "timeout", "error", "length"] {
            let mut r = run("8123", vec![read("config/app.toml", true)]);
            r.finish = Some(finish.into());
            check(&tool_task(), &r, Some(finish));
        }
    }

    #[test]
    fn a_nonzero_exit_code_fails() {
        let mut r = run("8123", vec![read("config/app.toml", true)]);
        r.exit_code = Some(3);
        check(&tool_task(), &r, Some("exit code Some(3)"));
    }

    #[test]
    fn a_refused_call_is_not_the_right_tool() {
        check(
            &tool_task(),
            &run(
                "8123",
                vec![read("config/app.toml", false), read("x", true)],
            ),
            Some("read_file"),
        );
    }

    #[test]
    fn a_tool_task_without_a_call_that_ran_fails() {
        let mut task = tool_task();
        task.calls.clear();
        check(
            &task,
            &run("8123", vec![read("a", false)]),
            Some("no call ran (1 made)"),
        );
    }

    #[test]
    fn an_answer_sharing_only_digits_fails_the_word_boundary() {
        check(
            &tool_task(),
            &run("port 81234", vec![read("config/app.toml", true)]),
            Some("answer does not match"),
        );
    }

    #[test]
    fn any_call_on_a_no_tool_task_fails_even_unrun() {
        check(
            &none_task(),
            &run("42", vec![read("a", false)]),
            Some("1 calls"),
        );
        check(&none_task(), &run("It is 42.", vec![]), None);
    }

    #[test]
    fn a_call_written_as_text_is_no_answer_even_when_a_pattern_matches() {
        let call = r#"{"name": "say_hello", "arguments": {"message": "42"}}"#;
        check(
            &none_task(),
            &run(call, vec![]),
            Some("a call written as text"),
        );
        let unclosed = r#"{"name": "say_hello", "arguments": {"text": "42"}"#;
        check(
            &none_task(),
            &run(unclosed, vec![]),
            Some("a call written as text"),
        );
        let fenced = format!("```json\n{call}\n```");
        check(
            &none_task(),
            &run(&fenced, vec![]),
            Some("a call written as text"),
        );
        check(
            &none_task(),
            &run(r#"It is 42: {"name": "x"}"#, vec![]),
            None,
        );
    }

    #[test]
    fn a_written_file_is_checked_on_disk() {
        let task: Task = serde_json::from_value(json!({"id": "w", "kind": "tool",
            "prompt": "p", "answer": ["\\bdone\\b"],
            "file": {"path": "hello.txt", "pattern": "\\bHello\\b"}}))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let r = run("done", vec![read("a", true)]);
        assert_eq!(grade(&task, &r, dir.path()).len(), 1);
        fs::write(dir.path().join("hello.txt"), "Hello, world!").unwrap();
        assert!(grade(&task, &r, dir.path()).is_empty());
    }
}
