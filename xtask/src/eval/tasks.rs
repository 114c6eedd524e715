//! The task file (`xtask/eval/tasks.json`): loading, selecting, and the rules a task
//! file must keep.
//!
//! # Decisions
//!
//! - **Tasks are data**: adding one needs no Rust.
//! - **Answers are regexes** (`regex` crate syntax), every one of which must match the
//!   final answer. Each must hold a word boundary (`\b`), so `3` cannot pass on `13` or a
//!   date, and no pattern is a bare common word: the loose substrings of the first eval
//!   (`"no"`, `"yes"`, `"3"`) passed on unrelated text.
//! - **Two kinds**: a `tool` task needs at least one call that ran (its answer is only in
//!   the folder); a `none` task passes only without any call at all.
//! - **Plain words**: at least half of the tool tasks name no tool and say neither
//!   "read" nor "use" (`plain_words: true`), as users ask; a test holds the file to that,
//!   and to each such prompt really naming nothing.
//! - **Expected calls** only where the prompt names the tool: a plain-words task may be
//!   solved by any route that runs (read, search, a command), and the answer pattern is
//!   what proves the folder was consulted.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use regex::Regex;
use serde::Deserialize;

/// The task file, relative to the workspace root.
pub(super) const TASKS_FILE: &str = "xtask/eval/tasks.json";
/// Tool names and words a plain-words prompt must not contain.
const NAMING_WORDS: &[&str] = &[
    "read_file",
    "list_dir",
    "search_text",
    "write_file",
    "run_command",
    "read",
    "use",
    "tool",
];

/// The task file.
#[derive(Debug, Deserialize)]
pub(super) struct TaskFile {
    /// The project folder every run starts from: path -> text.
    pub(super) files: BTreeMap<String, String>,
    /// Ids of the smoke subset.
    pub(super) smoke: Vec<String>,
    pub(super) tasks: Vec<Task>,
}

/// Whether a task needs the folder or no tool at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Kind {
    Tool,
    None,
}

/// One task and its checks.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Task {
    pub(super) id: String,
    pub(super) kind: Kind,
    #[serde(default)]
    pub(super) plain_words: bool,
    pub(super) prompt: String,
    /// Regexes the final answer must all match.
    pub(super) answer: Vec<String>,
    #[serde(default)]
    pub(super) calls: Vec<ExpectedCall>,
    #[serde(default)]
    pub(super) file: Option<ExpectedFile>,
}

/// A call the task expects to run: the tool, and the arguments that matter.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct ExpectedCall {
    pub(super) tool: String,
    #[serde(default)]
    pub(super) args: BTreeMap<String, String>,
}

/// A file the task expects afterwards, matching a regex.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct ExpectedFile {
    pub(super) path: String,
    pub(super) pattern: String,
}

/// Reads and validates the task file.
pub(super) fn load(root: &Path) -> Result<TaskFile> {
    let path = root.join(TASKS_FILE);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let file: TaskFile =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    validate(&file).with_context(|| format!("in {}", path.display()))?;
    Ok(file)
}

/// The rules of the module docs: strict patterns, plain words where claimed, at least
/// half of the tool tasks in plain words, unique ids, a smoke list of real ids.
fn validate(file: &TaskFile) -> Result<()> {
    let mut ids: Vec<&str> = file.tasks.iter().map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.len() != file.tasks.len() {
        bail!("task ids are not unique");
    }
    if let Some(bad) = file.smoke.iter().find(|id| !ids.contains(&id.as_str())) {
        bail!("the smoke list names `{bad}`, which is no task");
    }
    for task in &file.tasks {
        validate_task(task).with_context(|| format!("task `{}`", task.id))?;
    }
    let tool: Vec<&Task> = file.tasks.iter().filter(|t| t.kind == Kind::Tool).collect();
    let plain = tool.iter().filter(|t| t.plain_words).count();
    if plain * 2 < tool.len() {
        bail!(
            "only {plain} of {} tool tasks are in plain words",
            tool.len()
        );
    }
    Ok(())
}

fn validate_task(task: &Task) -> Result<()> {
    if task.answer.is_empty() {
        bail!("no answer pattern");
    }
    let file_pattern = task.file.iter().map(|f| &f.pattern);
    for pattern in task.answer.iter().chain(file_pattern) {
        Regex::new(pattern).with_context(|| format!("bad pattern {pattern:?}"))?;
        if !pattern.contains(r"\b") {
            bail!("pattern {pattern:?} has no word boundary (\\b)");
        }
    }
    if task.plain_words
        && let Some(word) = naming_word(&task.prompt)
    {
        bail!("claims plain words but says {word:?}");
    }
    if task.kind == Kind::None && (!task.calls.is_empty() || task.file.is_some()) {
        bail!("a no-tool task expects calls or a file");
    }
    Ok(())
}

/// The first tool name or naming word in `prompt`, as a whole word.
fn naming_word(prompt: &str) -> Option<&'static str> {
    let lower = prompt.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    NAMING_WORDS.iter().copied().find(|w| words.contains(w))
}

/// The tasks asked for: the smoke subset or all, then those whose id contains one of
/// `filters` (all when empty).
pub(super) fn select(file: &TaskFile, smoke: bool, filters: &[String]) -> Result<Vec<Task>> {
    let tasks: Vec<Task> = file
        .tasks
        .iter()
        .filter(|t| !smoke || file.smoke.contains(&t.id))
        .filter(|t| filters.is_empty() || filters.iter().any(|f| t.id.contains(f.as_str())))
        .cloned()
        .collect();
    if tasks.is_empty() {
        bail!("no task matches {filters:?}");
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// Validates a one-task file built from `task`; `Ok` or the error's text.
    fn check(task: Value, expected: Result<(), &str>) {
        let file: TaskFile =
            serde_json::from_value(json!({"files": {}, "smoke": [], "tasks": [task]})).unwrap();
        let got = validate(&file).map_err(|e| format!("{e:#}"));
        match expected {
            Ok(()) => assert!(got.is_ok(), "{got:?}"),
            Err(want) => {
                let err = got.expect_err("should be refused");
                assert!(err.contains(want), "{err}");
            }
        }
    }

    #[test]
    fn the_task_file_keeps_its_rules() {
        let file = load(&crate::workspace_root()).unwrap();
        let tool = file.tasks.iter().filter(|t| t.kind == Kind::Tool).count();
        assert!(tool >= 10, "{tool} tool tasks");
        assert!(file.tasks.iter().any(|t| t.kind == Kind::None));
        assert_eq!(select(&file, true, &[]).unwrap().len(), file.smoke.len());
    }

    #[test]
    fn a_pattern_without_a_word_boundary_is_refused() {
        check(
            json!({"id": "a", "kind": "none", "prompt": "p", "answer": ["3"]}),
            Err("no word boundary"),
        );
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_refused() {
        check(
            json!({"id": "a", "kind": "none", "prompt": "p", "answer": ["\\b(3\\b"]}),
            Err("bad pattern"),
        );
    }

    #[test]
    fn a_plain_words_prompt_naming_a_tool_or_saying_read_is_refused() {
        let task = |prompt: &str| {
            json!({"id": "a", "kind": "tool", "plain_words": true, "prompt": prompt,
                   "answer": ["\\bx\\b"]})
        };
        check(task("Use list_dir on src."), Err("\"list_dir\""));
        check(task("Read notes.txt, what is in it?"), Err("\"read\""));
        check(task("Which port is set in config/app.toml?"), Ok(()));
        check(task("Is the file already there?"), Ok(()));
    }

    #[test]
    fn too_few_plain_words_tool_tasks_are_refused() {
        check(
            json!({"id": "a", "kind": "tool", "prompt": "Use read_file.", "answer": ["\\bx\\b"]}),
            Err("only 0 of 1 tool tasks"),
        );
    }
}
