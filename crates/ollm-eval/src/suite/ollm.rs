//! The ollm columns: one `ollm run` as a user runs it, read back from `stream-json`.
//!
//! # Decisions
//!
//! - **The binary, as a user runs it**: `ollm run --provider openai --host URL --tool-mode
//!   M --output-format stream-json --yes --max-turns N [--temperature T] [--coach-off
//!   RULE] MODEL PROMPT`.
//!   `stream-json` rather than `json` because it keeps what happened before a timeout and
//!   says which calls got an error result.
//! - Output goes to a file, not a pipe, so a chatty run can never block on a full pipe
//!   while we wait for it; the child is killed by its own handle at the timeout.
//! - **The raw stream, kept for a timeout**: each run logs at trace level (`-vvv
//!   --log-file`, the server's chunks as they came) beside its output, and the log is
//!   kept with the trace only when the run timed out. A timed-out run's `stream-json`
//!   may show nothing after the choice: the 1.5B spent the whole 300 s on one reply
//!   that ollm held back as a possible call (tuning part, 2026-11-28 and 2026-11-29),
//!   and what it wrote could not be told.
//! - A call "ran" when its `tool_result` has `is_error: false`; unknown tools, invalid
//!   arguments and repeats answered by the loop guard all come back as errors.

use std::fs::{self, File};
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;

use super::context::{Column, RUN_TIMEOUT, RunContext};
use super::grade::{Call, Run};

/// Runs `prompt` in `column` in `project`; `Err` only when ollm could not be started
/// (a broken harness), never for what the model did.
pub(super) fn run(ctx: &RunContext, column: &Column, prompt: &str, project: &Path) -> Result<Run> {
    let log_path = project
        .parent()
        .context("the project folder has a parent")?
        .join("out.jsonl");
    let log = File::create(&log_path)?;
    let mut cmd = command(ctx, column, prompt, &raw_log(project)?);
    cmd.current_dir(project)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(Stdio::null());
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting {}", ctx.ollm.display()))?;
    // Polling the child's own handle: there is no portable wait with a timeout in std.
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        sleep(Duration::from_millis(100));
    };
    let mut seen = observe(&fs::read_to_string(&log_path)?);
    match status {
        Some(status) => seen.exit_code = status.code(),
        None => seen.finish = Some("timeout".into()),
    }
    Ok(seen)
}

/// Where the run in `project` logs its raw stream (see the module docs).
pub(super) fn raw_log(project: &Path) -> Result<std::path::PathBuf> {
    let scratch = project
        .parent()
        .context("the project folder has a parent")?;
    Ok(scratch.join("raw.log"))
}

/// `ollm run` with the module docs' flags for `column`, logging to `raw`.
fn command(ctx: &RunContext, column: &Column, prompt: &str, raw: &Path) -> Command {
    let mut cmd = Command::new(&ctx.ollm);
    cmd.arg("-vvv").arg("--log-file").arg(raw);
    cmd.args(["run", "--provider", "openai", "--host", &ctx.base_url])
        .args(["--tool-mode", &column.mode])
        .args(["--output-format", "stream-json", "--yes"])
        .args(["--max-turns", &ctx.max_turns.to_string()]);
    if let Some(t) = ctx.temperature {
        cmd.args(["--temperature", &t.to_string()]);
    }
    for rule in column.rules_off() {
        cmd.args(["--coach-off", rule]);
    }
    for rule in column.rules_on() {
        cmd.args(["--coach-on", rule]);
    }
    cmd.args([ctx.model.as_str(), prompt]);
    cmd
}

/// Whether the `ollm` at `path` takes `--coach-off` (the coach's switch, which the
/// ablation needs): its `run --help` names it.
pub(super) fn has_coach_off(path: &Path) -> Result<bool> {
    let out = Command::new(path)
        .args(["run", "--help"])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("starting {}", path.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).contains("--coach-off"))
}

/// The coach's rules that drop a reply already streamed and ask for another (the
/// model asked the question back, or looped in its text): what it said before is not
/// its answer.
const DROPS_REPLY: &[&str] = &["answer-after-echo", "answer-after-runaway"];

/// Reads a run's `stream-json` lines (see `docs/output-formats.md`).
pub(super) fn observe(text: &str) -> Run {
    let mut seen = Run::default();
    let mut ids: Vec<String> = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let str_of = |key: &str| event[key].as_str().unwrap_or_default().to_owned();
        match event["type"].as_str().unwrap_or_default() {
            "text_delta" => seen.answer.push_str(&str_of("text")),
            "tool_call_started" => {
                seen.answer.clear();
                ids.push(str_of("id"));
                seen.calls.push(Call {
                    name: str_of("name"),
                    args: event["arguments"].clone(),
                    ran: false,
                });
            }
            "tool_result" => {
                let id = str_of("id");
                if let Some(at) = ids.iter().position(|i| *i == id) {
                    seen.calls[at].ran = event["is_error"] == Value::Bool(false);
                }
            }
            "turn_complete" => seen.turns += 1,
            "coached" => {
                let rule = str_of("rule");
                // The reply such a rule dropped is not the answer; the next one is.
                if DROPS_REPLY.contains(&rule.as_str()) {
                    seen.answer.clear();
                }
                *seen.coached.entry(rule).or_default() += 1;
            }
            "finish" => {
                seen.finish = event["finish_reason"].as_str().map(str::to_owned);
                let usage = &event["usage"];
                seen.prompt_tokens = usage["prompt_tokens"].as_u64().unwrap_or(0);
                seen.completion_tokens = usage["completion_tokens"].as_u64().unwrap_or(0);
            }
            _ => {}
        }
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    fn ctx(ollm: PathBuf) -> RunContext {
        RunContext {
            ollm,
            base_url: "http://127.0.0.1:1/v1".into(),
            model: "m".into(),
            workspaces: BTreeMap::new(),
            temperature: None,
            max_turns: 4,
            tools: Value::Null,
            traces: PathBuf::new(),
            deadline: None,
            served: BTreeMap::new(),
        }
    }

    #[test]
    fn a_column_with_a_rule_off_passes_coach_off() {
        let args = |column: &Column| -> Vec<String> {
            command(&ctx("ollm".into()), column, "hi?", Path::new("s/raw.log"))
                .get_args()
                .map(|a| a.to_string_lossy().into_owned())
                .collect()
        };
        let off = args(&Column::without("repeat-guard"));
        let at = off.iter().position(|a| a == "--coach-off").unwrap();
        assert_eq!(off[at + 1], "repeat-guard");
        assert_eq!(off[off.len() - 2..], ["m", "hi?"]);
        assert_eq!(off[..4], ["-vvv", "--log-file", "s/raw.log", "run"]);
        let auto = args(&Column::parse("auto").unwrap());
        assert!(!auto.iter().any(|a| a == "--coach-off"), "{auto:?}");
        assert!(auto.windows(2).any(|w| w == ["--tool-mode", "auto"]));
        let group = args(&Column::without("key-hint+tools-hint"));
        let offs: Vec<&str> = (group.windows(2))
            .filter(|w| w[0] == "--coach-off")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(offs, ["key-hint", "tools-hint"]);
    }

    /// An executable script at `dir/name` that prints `help`.
    #[cfg(unix)]
    fn fake_ollm(dir: &Path, name: &str, help: &str) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        fs::write(&path, format!("#!/bin/sh\necho '{help}'\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn the_ablation_needs_an_ollm_whose_help_names_coach_off() {
        let dir = tempfile::tempdir().unwrap();
        let with = fake_ollm(
            dir.path(),
            "with",
            "      --coach-off <RULE>  switch a rule off",
        );
        let without = fake_ollm(dir.path(), "without", "      --tool-mode <MODE>");
        // A thread of another test that forks while a script is being written holds its
        // file open until it execs: starting the script may then fail with ETXTBSY.
        let help = |path: &Path| (0..5).find_map(|_| has_coach_off(path).ok()).unwrap();
        assert!(help(&with));
        assert!(!help(&without));
        assert!(has_coach_off(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn stream_json_lines_become_what_the_run_did() {
        let text = [
            r#"{"type":"text_delta","text":"Let me look. "}"#,
            r#"{"type":"tool_call_started","id":"c1","name":"read_file","arguments":{"path":"a"}}"#,
            r#"{"type":"tool_call_started","id":"c2","name":"launch_code","arguments":{}}"#,
            r#"{"type":"tool_result","id":"c2","name":"launch_code","content":"Error: Unknown tool","is_error":true}"#,
            r#"{"type":"tool_result","id":"c1","name":"read_file","content":"x","is_error":false}"#,
            r#"{"type":"turn_complete","turn":1,"usage":{}}"#,
            r#"{"type":"coached","rule":"answer-after-idle","call_id":null,"detail":"d"}"#,
            r#"{"type":"text_delta","text":"It "}"#,
            "not json",
            r#"{"type":"text_delta","text":"says x."}"#,
            r#"{"type":"turn_complete","turn":2,"usage":{}}"#,
            r#"{"type":"finish","finish_reason":"stop","usage":{"prompt_tokens":30,"completion_tokens":5}}"#,
        ]
        .join("\n");
        let call = |name: &str, args, ran| Call {
            name: name.into(),
            args,
            ran,
        };
        // A reply the coach dropped (the question asked back) is not the answer.
        let echoed = [
            r#"{"type":"text_delta","text":"How do I use venv?"}"#,
            r#"{"type":"coached","rule":"answer-after-echo","call_id":null,"detail":"d"}"#,
            r#"{"type":"text_delta","text":"Run it."}"#,
        ]
        .join("\n");
        assert_eq!(observe(&echoed).answer, "Run it.");
        assert_eq!(
            observe(&text),
            Run {
                answer: "It says x.".into(),
                calls: vec![
                    call("read_file", json!({"path": "a"}), true),
                    call("launch_code", json!({}), false),
                ],
                finish: Some("stop".into()),
                exit_code: None,
                turns: 2,
                prompt_tokens: 30,
                completion_tokens: 5,
                coached: BTreeMap::from([("answer-after-idle".to_owned(), 1)]),
                ..Run::default()
            }
        );
    }
}
