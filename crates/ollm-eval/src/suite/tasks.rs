//! The task files: the tuning part with the workspaces (`crates/ollm-eval/data/tasks.json`) and the
//! held-out part (`crates/ollm-eval/data/held-out.json`); loading, selecting, and the rules a task
//! file must keep.
//!
//! # Decisions
//!
//! - **Tasks are data**: adding one needs no Rust.
//! - **Intents in three wordings.** Each intent is asked casually ("which port does
//!   config.toml set?"), politely ("Could you tell me which port ...") and tersely
//!   ("config.toml port?"); a task is one wording, with the id `INTENT.WORDING`. One
//!   wording per intent measured the phrasing as much as the runtime: issue 35 found the
//!   old set's prompts were the examples the runtime had been tuned on.
//! - **Every prompt in plain words**: none names a tool or says "read", "use" or "tool",
//!   as users ask; [`validate`] refuses one that does.
//! - **Workspaces**: each intent runs in one of several small project folders (a Rust
//!   service, a folder of Python scripts, notes, data), so a rule that only helps in one
//!   kind of folder shows.
//! - **The held-out part brings its own workspaces** (`held-out.json`'s optional
//!   `workspaces`, on top of `tasks.json`'s): a folder that only held-out intents run in
//!   is declared there, so reading the tuning file shows nothing of it. A name may not be
//!   declared in both files, and no tuning intent may run in a held-out workspace (its
//!   per-task results would show the folder). `--list` counts the held-out part's tasks
//!   under one row, [`HELD_OUT_ROW`], not per workspace, so listing names none of them.
//! - **Two parts, split by intent**: all three wordings of an intent sit on the same side.
//!   The held-out part lives in its own file, which whoever tunes the runtime does not
//!   open; the report gives both parts side by side. Roughly 2/3 tuning, 1/3 held-out,
//!   and each part has tool, write and no-tool intents (a test holds the files to it).
//! - **A seen held-out part is retired, not reused.** On 2026-11-26 the tuner saw the
//!   held-out intents, so they no longer measured generalization; they were moved to
//!   `crates/ollm-eval/data/retired-held-out.json` (kept so earlier result files' task
//!   ids can be traced; nothing loads it) and replaced by fresh intents in fresh
//!   workspaces. Do the same whenever the held-out part is seen.
//! - **Answers are regexes** (`regex` crate syntax), every one of which must match the
//!   final answer. Each must hold a word boundary (`\b`), so `3` cannot pass on `13` or a
//!   date, and no pattern is a bare common word. Small talk ("thanks, that's all") and
//!   write tasks may have none: any plain answer does.
//! - **Three kinds**: a `tool` task needs at least one call that ran (its answer is only
//!   in the folder); a `write` task asks for a file, which must hold its patterns
//!   afterwards; a `none` task passes only without any call at all.
//! - **Actions must be asked for**: `write_file` and `run_command` change or run things;
//!   a task lists in `may` the ones its prompt asks for (a write task may always write).
//!   Any other such call, or any change to the folder but the asked-for file, fails the
//!   task and is counted apart ([`super::grade`]).
//! - **Expected calls** (`calls`) only where the prompt asks for an action ("run wc -l on
//!   sales.csv"); otherwise any route that runs is fine, and the answer pattern is what
//!   proves the folder was consulted.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};
use regex::Regex;
use serde::Deserialize;

/// The tuning part and the workspaces, relative to the workspace root.
pub(super) const TASKS_FILE: &str = "crates/ollm-eval/data/tasks.json";
/// The held-out part, relative to the workspace root.
pub(super) const HELD_OUT_FILE: &str = "crates/ollm-eval/data/held-out.json";
/// `--list`'s workspace column for every held-out task: their workspaces stay unnamed.
const HELD_OUT_ROW: &str = "(held out)";
/// Tools that change or run something: each must be asked for.
pub(super) const ACTIONS: &[&str] = &["write_file", "run_command"];
/// Tool names and words a prompt must not contain.
const NAMING_WORDS: &[&str] = &[
    "read_file",
    "list_dir",
    "search_text",
    "write_file",
    "run_command",
    "read",
    "use",
    "tool",
    "tools",
];

/// A folder's files: path -> text.
pub(super) type Files = BTreeMap<String, String>;

/// `tasks.json`: the workspaces, the smoke subset and the tuning part's intents.
#[derive(Debug, Deserialize)]
struct TuningFile {
    workspaces: BTreeMap<String, Files>,
    smoke: Vec<String>,
    intents: Vec<Intent>,
}

/// `held-out.json`: the held-out part's own workspaces and its intents.
#[derive(Debug, Deserialize)]
struct HeldOutFile {
    #[serde(default)]
    workspaces: BTreeMap<String, Files>,
    intents: Vec<Intent>,
}

/// Which part a task belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Part {
    Tuning,
    HeldOut,
}

impl Part {
    /// The part's name in result files and the table.
    pub(super) fn name(self) -> &'static str {
        match self {
            Part::Tuning => "tuning",
            Part::HeldOut => "held-out",
        }
    }
}

/// What a task needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Kind {
    /// The answer is in the folder.
    Tool,
    /// The user asks for a file.
    Write,
    /// No tool at all.
    None,
}

impl Kind {
    /// The kind's name in result files.
    pub(super) fn name(self) -> &'static str {
        match self {
            Kind::Tool => "tool",
            Kind::Write => "write",
            Kind::None => "none",
        }
    }
}

/// One intent in its three wordings, and its checks.
#[derive(Debug, Clone, Deserialize)]
struct Intent {
    id: String,
    workspace: String,
    kind: Kind,
    casual: String,
    polite: String,
    terse: String,
    answer: Vec<String>,
    #[serde(default)]
    calls: Vec<ExpectedCall>,
    #[serde(default)]
    may: Vec<String>,
    #[serde(default)]
    file: Option<ExpectedFile>,
}

/// One task: an intent in one wording.
#[derive(Debug, Clone)]
pub(super) struct Task {
    /// `INTENT.WORDING`.
    pub(super) id: String,
    pub(super) part: Part,
    pub(super) workspace: String,
    pub(super) kind: Kind,
    pub(super) prompt: String,
    /// Regexes the final answer must all match.
    pub(super) answer: Vec<String>,
    pub(super) calls: Vec<ExpectedCall>,
    /// The actions ([`ACTIONS`]) the prompt asks for.
    pub(super) may: Vec<String>,
    pub(super) file: Option<ExpectedFile>,
}

impl Task {
    /// Whether the prompt asks for `action` (one of [`ACTIONS`]): it is in `may`, or it
    /// is `write_file` in a write task.
    pub(super) fn asks_for(&self, action: &str) -> bool {
        self.may.iter().any(|m| m == action) || (self.kind == Kind::Write && action == "write_file")
    }
}

/// A call the task expects to run: the tool, and the arguments that matter.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct ExpectedCall {
    pub(super) tool: String,
    #[serde(default)]
    pub(super) args: BTreeMap<String, String>,
}

/// A file the task expects afterwards, matching every pattern.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct ExpectedFile {
    pub(super) path: String,
    pub(super) patterns: Vec<String>,
}

/// Both parts, as tasks.
#[derive(Debug)]
pub(super) struct Suite {
    pub(super) workspaces: BTreeMap<String, Files>,
    /// Ids of the smoke subset.
    pub(super) smoke: Vec<String>,
    pub(super) tasks: Vec<Task>,
}

/// Which part to run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum PartChoice {
    #[default]
    All,
    Only(Part),
}

impl PartChoice {
    /// `tuning`, `held-out` or `all`.
    pub(super) fn parse(text: &str) -> Result<Self> {
        Ok(match text {
            "all" => PartChoice::All,
            "tuning" => PartChoice::Only(Part::Tuning),
            "held-out" => PartChoice::Only(Part::HeldOut),
            other => bail!("--part {other}: expected tuning, held-out or all"),
        })
    }

    /// The name in result files.
    pub(super) fn name(self) -> &'static str {
        match self {
            PartChoice::All => "all",
            PartChoice::Only(part) => part.name(),
        }
    }

    fn admits(self, part: Part) -> bool {
        self == PartChoice::All || self == PartChoice::Only(part)
    }
}

/// Reads and validates both task files.
pub(super) fn load(root: &Path) -> Result<Suite> {
    let tuning: TuningFile = parse(root, TASKS_FILE)?;
    let held_out: HeldOutFile = parse(root, HELD_OUT_FILE)?;
    suite(tuning, held_out)
}

fn parse<T: serde::de::DeserializeOwned>(root: &Path, file: &str) -> Result<T> {
    let path = root.join(file);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The validated suite of both files' intents, three tasks each.
fn suite(tuning: TuningFile, held_out: HeldOutFile) -> Result<Suite> {
    let held_only: Vec<String> = held_out.workspaces.keys().cloned().collect();
    let workspaces = merged(tuning.workspaces, held_out.workspaces)?;
    let parts = [
        (Part::Tuning, tuning.intents),
        (Part::HeldOut, held_out.intents),
    ];
    let mut tasks = Vec::new();
    let mut ids: Vec<String> = Vec::new();
    for (part, intents) in parts {
        for intent in intents {
            validate(&intent, &workspaces)
                .with_context(|| format!("intent `{}` ({})", intent.id, part.name()))?;
            if part == Part::Tuning && held_only.contains(&intent.workspace) {
                bail!(
                    "tuning intent `{}` runs in the held-out workspace `{}`",
                    intent.id,
                    intent.workspace
                );
            }
            if ids.contains(&intent.id) {
                bail!("intent `{}` appears twice", intent.id);
            }
            ids.push(intent.id.clone());
            tasks.extend(wordings(&intent, part));
        }
    }
    let tuning_ids: Vec<&str> = tasks
        .iter()
        .filter(|t| t.part == Part::Tuning)
        .map(|t| t.id.as_str())
        .collect();
    if let Some(bad) = tuning
        .smoke
        .iter()
        .find(|id| !tuning_ids.contains(&id.as_str()))
    {
        bail!("the smoke list names `{bad}`, which is no task of the tuning part");
    }
    Ok(Suite {
        workspaces,
        smoke: tuning.smoke,
        tasks,
    })
}

/// The tuning file's workspaces and the held-out file's own, whose names must differ.
fn merged(
    mut workspaces: BTreeMap<String, Files>,
    held_out: BTreeMap<String, Files>,
) -> Result<BTreeMap<String, Files>> {
    for (name, files) in held_out {
        if workspaces.contains_key(&name) {
            bail!("workspace `{name}` is declared in both task files");
        }
        workspaces.insert(name, files);
    }
    Ok(workspaces)
}

/// The intent's three tasks.
fn wordings(intent: &Intent, part: Part) -> Vec<Task> {
    let each = [
        ("casual", &intent.casual),
        ("polite", &intent.polite),
        ("terse", &intent.terse),
    ];
    each.into_iter()
        .map(|(wording, prompt)| Task {
            id: format!("{}.{wording}", intent.id),
            part,
            workspace: intent.workspace.clone(),
            kind: intent.kind,
            prompt: prompt.clone(),
            answer: intent.answer.clone(),
            calls: intent.calls.clone(),
            may: intent.may.clone(),
            file: intent.file.clone(),
        })
        .collect()
}

/// The rules of the module docs for one intent.
fn validate(intent: &Intent, workspaces: &BTreeMap<String, Files>) -> Result<()> {
    if intent.id.is_empty() || intent.id.contains('.') {
        bail!("an intent id is not empty and holds no `.`");
    }
    if !workspaces.contains_key(&intent.workspace) {
        bail!("no workspace `{}`", intent.workspace);
    }
    let prompts = [&intent.casual, &intent.polite, &intent.terse];
    for prompt in prompts {
        if let Some(word) = naming_word(prompt) {
            bail!("{prompt:?} says {word:?}");
        }
    }
    if intent.casual == intent.polite || intent.polite == intent.terse {
        bail!("the three wordings are not distinct");
    }
    let file_patterns = intent.file.iter().flat_map(|f| &f.patterns);
    for pattern in intent.answer.iter().chain(file_patterns) {
        Regex::new(pattern).with_context(|| format!("bad pattern {pattern:?}"))?;
        if !pattern.contains(r"\b") {
            bail!("pattern {pattern:?} has no word boundary (\\b)");
        }
    }
    if let Some(bad) = intent.may.iter().find(|m| !ACTIONS.contains(&m.as_str())) {
        bail!("`may` names {bad:?}, which is no action ({ACTIONS:?})");
    }
    validate_kind(intent)
}

/// What each kind must and must not have.
fn validate_kind(intent: &Intent) -> Result<()> {
    match intent.kind {
        Kind::Tool if intent.answer.is_empty() => bail!("a tool task has no answer pattern"),
        Kind::Tool if intent.file.is_some() => bail!("a tool task expects a file: make it write"),
        Kind::Write if intent.file.as_ref().is_none_or(|f| f.patterns.is_empty()) => {
            bail!("a write task names no file with patterns")
        }
        Kind::None if !intent.calls.is_empty() || intent.file.is_some() => {
            bail!("a no-tool task expects calls or a file")
        }
        Kind::None if !intent.may.is_empty() => bail!("a no-tool task may take actions"),
        _ => Ok(()),
    }
}

/// The first tool name or naming word in `prompt`, as a whole word.
fn naming_word(prompt: &str) -> Option<&'static str> {
    let lower = prompt.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .collect();
    NAMING_WORDS.iter().copied().find(|w| words.contains(w))
}

/// The tasks asked for: the smoke subset or `part`, then those whose id contains one of
/// `filters` (all when empty).
pub(super) fn select(
    suite: &Suite,
    smoke: bool,
    part: PartChoice,
    filters: &[String],
) -> Result<Vec<Task>> {
    let tasks: Vec<Task> = suite
        .tasks
        .iter()
        .filter(|t| {
            if smoke {
                suite.smoke.contains(&t.id)
            } else {
                part.admits(t.part)
            }
        })
        .filter(|t| filters.is_empty() || filters.iter().any(|f| t.id.contains(f.as_str())))
        .cloned()
        .collect();
    if tasks.is_empty() {
        bail!("no task matches {filters:?} in part {}", part.name());
    }
    Ok(tasks)
}

/// Task counts per part, kind and workspace, for `eval --list`.
pub(super) fn counts(suite: &Suite) -> String {
    let mut by: BTreeMap<(&str, &str), [usize; 4]> = BTreeMap::new();
    for t in &suite.tasks {
        let slot = match t.kind {
            Kind::Tool => 0,
            Kind::Write => 1,
            Kind::None => 2,
        };
        let workspace = match t.part {
            Part::Tuning => t.workspace.as_str(),
            Part::HeldOut => HELD_OUT_ROW,
        };
        let part = t.part.name();
        for key in [
            (part, workspace),
            (part, "all"),
            ("all", workspace),
            ("all", "all"),
        ] {
            let row = by.entry(key).or_default();
            row[slot] += 1;
            row[3] += 1;
        }
    }
    let mut out = String::from(
        "| part | workspace | tool | write | none | tasks |\n|---|---|---|---|---|---|\n",
    );
    for ((part, workspace), [tool, write, none, all]) in by {
        out.push_str(&format!(
            "| {part} | {workspace} | {tool} | {write} | {none} | {all} |\n"
        ));
    }
    out
}

/// The tasks of a tuning file and a held-out file given as JSON, validated.
#[cfg(test)]
pub(super) fn from_values(
    tuning: serde_json::Value,
    held_out: serde_json::Value,
) -> Result<Vec<Task>> {
    Ok(suite(
        serde_json::from_value(tuning)?,
        serde_json::from_value(held_out)?,
    )?
    .tasks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// A tuning file with one workspace `w` and `intent`.
    fn file(intent: Value) -> (TuningFile, HeldOutFile) {
        let tuning = json!({"workspaces": {"w": {"a.txt": "x"}}, "smoke": [],
            "intents": [intent]});
        (
            serde_json::from_value(tuning).unwrap(),
            serde_json::from_value(json!({"intents": []})).unwrap(),
        )
    }

    /// An intent of `kind` whose wordings are built from `prompt`, with `extra` fields.
    fn intent(kind: &str, prompt: &str, extra: Value) -> Value {
        let mut i = json!({"id": "i", "workspace": "w", "kind": kind,
            "casual": prompt, "polite": format!("Could you: {prompt}"),
            "terse": format!("{prompt}?"), "answer": ["\\bx\\b"]});
        for (k, v) in extra.as_object().unwrap() {
            i[k] = v.clone();
        }
        i
    }

    /// Validates a one-intent suite: `Ok` or an error holding `expected`.
    fn check(intent: Value, expected: Result<(), &str>) {
        let (tuning, held_out) = file(intent);
        let got = suite(tuning, held_out)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"));
        match expected {
            Ok(()) => assert!(got.is_ok(), "{got:?}"),
            Err(want) => {
                let err = got.expect_err("should be refused");
                assert!(err.contains(want), "{err}");
            }
        }
    }

    #[test]
    fn the_task_files_keep_their_rules() {
        let suite = load(&crate::util::workspace_root()).unwrap();
        let n = |keep: &dyn Fn(&Task) -> bool| suite.tasks.iter().filter(|t| keep(t)).count();
        assert!(suite.tasks.len() >= 60, "{} tasks", suite.tasks.len());
        assert!(n(&|t| t.kind == Kind::None) >= 15);
        assert!(suite.workspaces.len() >= 4);
        for ws in suite.workspaces.keys() {
            assert!(n(&|t| &t.workspace == ws) >= 9, "workspace {ws}");
        }
        let held_out = n(&|t| t.part == Part::HeldOut) as f64 / suite.tasks.len() as f64;
        assert!(
            (0.25..=0.4).contains(&held_out),
            "held-out share {held_out}"
        );
        for part in [Part::Tuning, Part::HeldOut] {
            for kind in [Kind::Tool, Kind::Write, Kind::None] {
                assert!(
                    n(&|t| t.part == part && t.kind == kind) >= 3,
                    "{part:?} {kind:?}"
                );
            }
        }
        let smoke = select(&suite, true, PartChoice::All, &[]).unwrap();
        assert_eq!(smoke.len(), 3);
        let listed = counts(&suite);
        for t in suite.tasks.iter().filter(|t| t.part == Part::HeldOut) {
            assert!(
                !listed.contains(&format!("| {} |", t.workspace)),
                "{listed}"
            );
        }
        assert!(listed.contains(&format!("| held-out | {HELD_OUT_ROW} | ")));
    }

    #[test]
    fn parts_and_filters_select_tasks() {
        let suite = load(&crate::util::workspace_root()).unwrap();
        let part = |p: &str| select(&suite, false, PartChoice::parse(p).unwrap(), &[]).unwrap();
        let (tuning, held_out) = (part("tuning"), part("held-out"));
        assert!(tuning.iter().all(|t| t.part == Part::Tuning));
        assert!(held_out.iter().all(|t| t.part == Part::HeldOut));
        assert_eq!(part("all").len(), tuning.len() + held_out.len());
        let one = select(
            &suite,
            false,
            PartChoice::All,
            &["service-port.terse".into()],
        );
        assert_eq!(one.unwrap()[0].prompt, "config.toml port?");
        assert!(PartChoice::parse("held").is_err());
    }

    #[test]
    fn an_intent_becomes_three_tasks_on_one_side() {
        let (tuning, held_out) = file(intent("tool", "which port", json!({})));
        let suite = suite(tuning, held_out).unwrap();
        let ids: Vec<&str> = suite.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["i.casual", "i.polite", "i.terse"]);
        assert!(suite.tasks.iter().all(|t| t.part == Part::Tuning));
    }

    /// The suite of a tuning file with workspace `w` and `tuning` intents, and a
    /// held-out file with its own `workspaces` and `held_out` intents: its error, if any.
    fn check_parts(tuning: Value, workspaces: Value, held_out: Value, expected: Result<(), &str>) {
        let tuning = json!({"workspaces": {"w": {"a.txt": "x"}}, "smoke": [],
            "intents": tuning});
        let held_out = json!({"workspaces": workspaces, "intents": held_out});
        let got = from_values(tuning, held_out).map_err(|e| format!("{e:#}"));
        match expected {
            Ok(()) => assert_eq!(got.map(|t| t.len()).unwrap(), 3),
            Err(want) => assert!(got.unwrap_err().contains(want)),
        }
    }

    #[test]
    fn the_held_out_part_may_bring_workspaces_the_tuning_part_cannot_run_in() {
        let own = json!({"h": {"b.txt": "y"}});
        let in_h = intent("tool", "p", json!({"workspace": "h"}));
        check_parts(json!([]), own.clone(), json!([in_h.clone()]), Ok(()));
        check_parts(
            json!([]),
            json!({}),
            json!([in_h.clone()]),
            Err("no workspace `h`"),
        );
        check_parts(
            json!([in_h]),
            own,
            json!([]),
            Err("runs in the held-out workspace `h`"),
        );
        check_parts(
            json!([]),
            json!({"w": {}}),
            json!([intent("tool", "p", json!({}))]),
            Err("workspace `w` is declared in both task files"),
        );
    }

    #[test]
    fn patterns_need_a_word_boundary_and_must_compile() {
        check(
            intent("tool", "p", json!({"answer": ["3"]})),
            Err("no word boundary"),
        );
        check(
            intent("tool", "p", json!({"answer": ["\\b(3\\b"]})),
            Err("bad pattern"),
        );
    }

    #[test]
    fn a_prompt_naming_a_tool_or_saying_read_is_refused() {
        check(
            intent("tool", "Use list_dir on src", json!({})),
            Err("\"list_dir\""),
        );
        check(intent("tool", "Read notes.txt", json!({})), Err("\"read\""));
        check(
            intent("tool", "any tools for this", json!({})),
            Err("\"tools\""),
        );
        check(
            intent("tool", "Which port is set in config/app.toml", json!({})),
            Ok(()),
        );
        check(
            intent("tool", "Is the file already used", json!({})),
            Ok(()),
        );
    }

    #[test]
    fn each_kind_keeps_its_shape() {
        check(
            intent("tool", "p", json!({"answer": []})),
            Err("no answer pattern"),
        );
        check(intent("write", "p", json!({})), Err("names no file"));
        let file = json!({"path": "a", "patterns": ["\\bx\\b"]});
        check(
            intent("write", "p", json!({"file": file, "answer": []})),
            Ok(()),
        );
        check(
            intent("none", "p", json!({"may": ["write_file"]})),
            Err("may take actions"),
        );
        check(
            intent("none", "p", json!({"file": file})),
            Err("expects calls or a file"),
        );
        check(
            intent("tool", "p", json!({"may": ["rm"]})),
            Err("no action"),
        );
        check(
            intent("none", "p", json!({"workspace": "v"})),
            Err("no workspace"),
        );
        check(intent("none", "p", json!({"id": "a.b"})), Err("no `.`"));
    }
}
