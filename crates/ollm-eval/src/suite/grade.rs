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
//!   graded as the answer; nor is a reply the coach dropped and asked for again (the
//!   question asked back, a reply that looped: since 2026-11-28; passes before graded
//!   it with the answer after it). Each pattern must match it (see [`super::tasks`]).
//! - **A call written as text is no answer.** A final answer that opens with a
//!   `{"name": ..., "arguments": ...}` object (bare or fenced, closed or not) is a call
//!   nobody ran; the
//!   user sees JSON, so the run fails even when a pattern happens to match inside it
//!   (`{"name": "say_hello", "arguments": {"message": "Bonjour"}}`).
//! - **An empty answer fails**: the user is left with nothing, whatever the folder holds.
//! - **Unasked actions fail, and are counted apart.** A `write_file` or `run_command` call
//!   the task does not ask for ([`Task::asks_for`]), whether it ran or not, and any file
//!   added, changed or removed in the folder but the one a write task names, fail the run;
//!   [`Grade::unasked`] lists them, so the report can count runs that acted unasked
//!   (issue 35: a write on "How do you say hello in French?"). A read-only command
//!   (`wc -l`) counts too: the user did not ask for a command, and ollm's `--yes` in the
//!   eval runs what a user would have been asked to approve.
//! - The grade is a pure function of [`Run`] (which holds the folder's changes) and the
//!   task, the same for ollm's columns and the plain loop's, so `--regrade` can apply it
//!   to committed runs.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use regex::Regex;
use serde_json::{Value, json};

use super::tasks::{ACTIONS, ExpectedCall, Files, Kind, Task};

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
    /// Files added or changed (their text afterwards) or removed (`None`) in the folder.
    pub(super) changed: BTreeMap<String, Option<String>>,
    /// The coach's rules that acted, and how often: `ollm run`'s `coached` events, or
    /// the rule `ollm serve` names in a reply's `ollm.repair` (served columns).
    pub(super) coached: BTreeMap<String, usize>,
}

impl Run {
    /// How many calls ran.
    pub(super) fn calls_run(&self) -> usize {
        self.calls.iter().filter(|c| c.ran).count()
    }
}

/// A run's grade.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Grade {
    /// Every reason the run fails its task; empty when it passes.
    pub(super) failures: Vec<String>,
    /// The actions nobody asked for (also among `failures`).
    pub(super) unasked: Vec<String>,
}

/// `run`'s grade on `task`.
pub(super) fn grade(task: &Task, run: &Run) -> Grade {
    let mut failures = Vec::new();
    if run.exit_code != Some(0) {
        failures.push(format!("exit code {:?}", run.exit_code));
    }
    if run.finish.as_deref() != Some("stop") {
        failures.push(format!("finish {:?}", run.finish));
    }
    if run.answer.trim().is_empty() {
        failures.push("no answer".into());
    } else if is_call_text(&run.answer) {
        failures.push("the answer is a call written as text".into());
    }
    for pattern in &task.answer {
        if !matches(pattern, &run.answer) {
            failures.push(format!("answer does not match {pattern}"));
        }
    }
    failures.extend(calls_failures(task, run));
    if let Some(file) = &task.file {
        let text = run
            .changed
            .get(&file.path)
            .cloned()
            .flatten()
            .unwrap_or_default();
        for pattern in &file.patterns {
            if !matches(pattern, &text) {
                failures.push(format!("{} does not match {pattern}", file.path));
            }
        }
    }
    let unasked = unasked(task, run);
    failures.extend(unasked.iter().map(|u| format!("unasked: {u}")));
    Grade { failures, unasked }
}

/// What the kind asks of the calls.
fn calls_failures(task: &Task, run: &Run) -> Vec<String> {
    let mut failures = Vec::new();
    match task.kind {
        Kind::None if !run.calls.is_empty() => {
            failures.push(format!("{} calls on a no-tool task", run.calls.len()));
        }
        Kind::None => {}
        Kind::Tool | Kind::Write => {
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
    failures
}

/// The actions in `run` that `task` does not ask for: calls of [`ACTIONS`], and changes
/// to the folder but the task's file.
fn unasked(task: &Task, run: &Run) -> Vec<String> {
    let calls = run
        .calls
        .iter()
        .filter(|c| ACTIONS.contains(&c.name.as_str()) && !task.asks_for(&c.name))
        .map(|c| format!("{} {}", c.name, c.args));
    let asked = task.file.as_ref().map(|f| f.path.as_str());
    let changes = run
        .changed
        .iter()
        .filter(|(path, _)| Some(path.as_str()) != asked)
        .map(|(path, after)| match after {
            Some(_) => format!("{path} written"),
            None => format!("{path} removed"),
        });
    calls.chain(changes).collect()
}

/// The files of `project` that differ from `before`: added or changed (their text) or
/// removed (`None`). A file that is no UTF-8 is compared lossily.
pub(super) fn changes(before: &Files, project: &Path) -> BTreeMap<String, Option<String>> {
    let mut after = Files::new();
    walk(project, project, &mut after);
    let mut changed: BTreeMap<String, Option<String>> = after
        .iter()
        .filter(|(path, text)| before.get(*path) != Some(*text))
        .map(|(path, text)| (path.clone(), Some(text.clone())))
        .collect();
    for path in before.keys().filter(|p| !after.contains_key(*p)) {
        changed.insert(path.clone(), None);
    }
    changed
}

/// Every file under `dir` into `out`, by its path relative to `root` with `/`.
fn walk(root: &Path, dir: &Path, out: &mut Files) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            walk(root, &path, out);
        } else if let Ok(relative) = path.strip_prefix(root) {
            let bytes = fs::read(&path).unwrap_or_default();
            let name = relative.to_string_lossy().replace('\\', "/");
            out.insert(name, String::from_utf8_lossy(&bytes).into_owned());
        }
    }
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

    /// A task from its JSON fields (the task file's shape, one wording).
    fn task(fields: Value) -> Task {
        let mut intent = json!({"id": "t", "workspace": "w", "kind": "tool",
            "casual": "a", "polite": "b", "terse": "c", "answer": []});
        for (k, v) in fields.as_object().unwrap() {
            intent[k] = v.clone();
        }
        let tuning = json!({"workspaces": {"w": {}}, "smoke": [], "intents": [intent]});
        super::super::tasks::from_values(tuning, json!({"intents": []}))
            .unwrap()
            .remove(0)
    }

    fn tool_task() -> Task {
        task(json!({"answer": ["\\b8123\\b"],
            "calls": [{"tool": "read_file", "args": {"path": "config/app.toml"}}]}))
    }

    fn none_task() -> Task {
        task(json!({"kind": "none", "answer": ["\\b42\\b"]}))
    }

    fn call(name: &str, args: Value, ran: bool) -> Call {
        Call {
            name: name.into(),
            args,
            ran,
        }
    }

    fn read(path: &str, ran: bool) -> Call {
        call("read_file", json!({ "path": path }), ran)
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

    /// Grades `run` on `task`: `expected` is the one failure wanted (a substring of
    /// it), or `None` for a pass.
    fn check(task: &Task, run: &Run, expected: Option<&str>) {
        let failures = grade(task, run).failures;
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
    fn an_empty_answer_fails_even_without_patterns() {
        let small_talk = task(json!({"kind": "none"}));
        check(&small_talk, &run("You're welcome!", vec![]), None);
        check(&small_talk, &run(" \n", vec![]), Some("no answer"));
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

    /// A write task for `hello.txt` holding Hello.
    fn write_task() -> Task {
        task(json!({"kind": "write",
            "file": {"path": "hello.txt", "patterns": ["\\bHello\\b"]}}))
    }

    fn wrote(path: &str, text: &str) -> Run {
        let mut r = run(
            "done",
            vec![call("write_file", json!({"path": path}), true)],
        );
        r.changed.insert(path.into(), Some(text.into()));
        r
    }

    #[test]
    fn a_written_file_is_checked_by_its_text_afterwards() {
        check(&write_task(), &wrote("hello.txt", "Hello, world!"), None);
        check(
            &write_task(),
            &wrote("hello.txt", "Bonjour"),
            Some("hello.txt does not match"),
        );
    }

    #[test]
    fn an_unasked_write_or_command_fails_and_is_counted_apart() {
        let g = grade(&none_task(), &wrote("hello.txt", "x"));
        assert_eq!(
            g.unasked,
            [r#"write_file {"path":"hello.txt"}"#, "hello.txt written"]
        );
        assert!(
            g.failures
                .iter()
                .any(|f| f.starts_with("unasked: write_file"))
        );
        // A write task may write its file, but no other.
        let mut other = wrote("hello.txt", "Hello");
        other.changed.insert("notes.md".into(), None);
        assert_eq!(grade(&write_task(), &other).unasked, ["notes.md removed"]);
        // A command counts unless the task asks for one, even when it was refused.
        let wc = call("run_command", json!({"program": "wc"}), false);
        let counted = run("8123", vec![read("config/app.toml", true), wc.clone()]);
        assert_eq!(grade(&tool_task(), &counted).unasked.len(), 1);
        let mut asks = tool_task();
        asks.may = vec!["run_command".into()];
        assert_eq!(grade(&asks, &counted), Grade::default());
    }

    #[test]
    fn changes_are_what_differs_from_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        let before: Files = [("a.txt", "a"), ("sub/b.txt", "b"), ("c.txt", "c")]
            .into_iter()
            .map(|(p, t)| (p.to_owned(), t.to_owned()))
            .collect();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("a.txt"), "a").unwrap();
        fs::write(dir.path().join("sub/b.txt"), "B").unwrap();
        fs::write(dir.path().join("new.txt"), "n").unwrap();
        let got = changes(&before, dir.path());
        let want: BTreeMap<String, Option<String>> = [
            ("c.txt", None),
            ("new.txt", Some("n")),
            ("sub/b.txt", Some("B")),
        ]
        .into_iter()
        .map(|(p, t)| (p.to_owned(), t.map(str::to_owned)))
        .collect();
        assert_eq!(got, want);
    }
}
