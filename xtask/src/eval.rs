//! `cargo xtask eval`: the tool-calling benchmark on the real model (issue 9).
//!
//! Not a test: it measures. Each task of `xtask/eval/tasks.json` runs under each strategy
//! (`native`, `react`, `constrained`, `auto`) as a real `ollm run` against the
//! [`crate::llama::Server`], in a fresh copy of the task file's project folder. It prints a
//! table per strategy and writes every run's details to `target/eval/eval-<UTC time>.json`.
//!
//! # Decisions
//!
//! - **Tasks are data** (`xtask/eval/tasks.json`): adding one needs no Rust. Checks are
//!   simple and strict: substrings in the answer (case-insensitive), the expected calls in
//!   order with their key arguments, the file's text after a write, and no call at all on
//!   a question that needs no tool. A task passes when all of its checks hold.
//! - **The binary, as a user runs it**: `ollm run --provider openai --host URL --tool-mode M
//!   --output-format stream-json --yes --max-turns N --temperature 0 --seed 42 MODEL
//!   PROMPT`. `stream-json` rather than `json` because it also says how many turns ran
//!   (`turn_complete`) and keeps what happened before a timeout.
//! - **Two runs at once**, one per server slot (`-np 2`). Runs go strategy by strategy, so
//!   both slots keep the same system prompt and tool schemas in their prompt cache.
//! - **A per-run timeout** ([`RUN_TIMEOUT`]): a reply that never ends (issue 9) costs a
//!   bounded time and counts as a failure; the child is killed by its own handle.
//! - Output goes to a file, not a pipe, so a chatty run can never block on a full pipe
//!   while we wait for it.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::thread::{self, sleep};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::llama::{self, MODEL_ALIAS, QWEN_05B, target_dir};
use crate::{cargo, run_cmd, section};

/// The task file, relative to the workspace root.
const TASKS_FILE: &str = "xtask/eval/tasks.json";
/// Every strategy, in the order runs go.
const STRATEGIES: &[&str] = &["native", "react", "constrained", "auto"];
/// How long one `ollm run` may take before it is killed and counted as failed. Generous:
/// on the shared 2-core machine (load ~16) the first request of a strategy on a slot,
/// whose ~800-token system prompt and tool schemas are not yet in that slot's cache,
/// took 2 min 18 s of prompt processing alone.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// Runs at once: one per server slot.
const PARALLEL: usize = 2;
/// `--max-turns` unless a task says otherwise: room for a two-step task and an answer.
const MAX_TURNS: u32 = 4;

/// `cargo xtask eval`'s options.
#[derive(Debug, Default)]
pub(crate) struct Options {
    /// Strategies to run (all when empty).
    pub(crate) strategies: Vec<String>,
    /// Only tasks whose id contains one of these (all when empty).
    pub(crate) filters: Vec<String>,
    /// Only the task file's `smoke` subset.
    pub(crate) smoke: bool,
    /// A prebuilt `ollm` to measure instead of building this worktree's (for example
    /// another checkout's, to compare before and after).
    pub(crate) ollm: Option<PathBuf>,
    /// Start no run after this long; the report covers the runs that finished.
    pub(crate) budget: Option<Duration>,
}

impl Options {
    /// Parses `--strategies a,b`, `--tasks x,y` and `--smoke`.
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut options = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut list = |name: &str| -> Result<Vec<String>> {
                let value = args
                    .next()
                    .with_context(|| format!("{name} needs a value"))?;
                Ok(value.split(',').map(|s| s.trim().to_owned()).collect())
            };
            match arg.as_str() {
                "--strategies" => options.strategies = list("--strategies")?,
                "--tasks" => options.filters = list("--tasks")?,
                "--smoke" => options.smoke = true,
                "--budget" => {
                    let minutes = args.next().context("--budget needs minutes")?;
                    let minutes: u64 = minutes
                        .parse()
                        .with_context(|| format!("--budget {minutes}: not whole minutes"))?;
                    options.budget = Some(Duration::from_secs(minutes * 60));
                }
                "--ollm" => {
                    let path = args.next().context("--ollm needs a path")?;
                    options.ollm = Some(PathBuf::from(path));
                }
                other => bail!("`eval` does not take `{other}`"),
            }
        }
        if let Some(bad) = options
            .strategies
            .iter()
            .find(|s| !STRATEGIES.contains(&s.as_str()))
        {
            bail!("unknown strategy `{bad}`; known: {}", STRATEGIES.join(", "));
        }
        Ok(options)
    }
}

/// The task file.
#[derive(Debug, Deserialize)]
struct TaskFile {
    /// The project folder every run starts from: path -> text.
    files: BTreeMap<String, String>,
    /// Ids of the smoke subset.
    smoke: Vec<String>,
    tasks: Vec<Task>,
}

/// One task and its checks.
#[derive(Debug, Clone, Deserialize)]
struct Task {
    id: String,
    kind: String,
    prompt: String,
    #[serde(default)]
    answer: Vec<String>,
    #[serde(default)]
    answer_any: Vec<String>,
    #[serde(default)]
    calls: Vec<ExpectedCall>,
    #[serde(default)]
    file: Option<ExpectedFile>,
    #[serde(default)]
    no_call: bool,
    #[serde(default)]
    max_turns: Option<u32>,
}

/// A call the task expects: the tool, and the arguments that matter.
#[derive(Debug, Clone, Deserialize)]
struct ExpectedCall {
    tool: String,
    #[serde(default)]
    args: BTreeMap<String, String>,
}

/// A file the task expects to exist afterwards, containing some text.
#[derive(Debug, Clone, Deserialize)]
struct ExpectedFile {
    path: String,
    contains: String,
}

/// What one run did, read from its `stream-json` output.
#[derive(Debug, Default, Clone, PartialEq)]
struct Observed {
    answer: String,
    calls: Vec<(String, Value)>,
    turns: u32,
    prompt_tokens: u64,
    completion_tokens: u64,
    finish_reason: Option<String>,
}

/// One run's verdict.
#[derive(Debug, Clone)]
struct Outcome {
    task: String,
    kind: String,
    strategy: String,
    success: bool,
    /// Whether the expected calls were made (`None` for a task that expects none).
    right_calls: Option<bool>,
    timed_out: bool,
    exit_code: Option<i32>,
    wall: Duration,
    observed: Observed,
    failures: Vec<String>,
}

/// `cargo xtask eval`.
pub(crate) fn run(root: &Path, options: &Options) -> Result<()> {
    let file = load(root)?;
    let tasks = select(&file, options)?;
    let strategies: Vec<String> = if options.strategies.is_empty() {
        STRATEGIES.iter().map(|s| (*s).to_owned()).collect()
    } else {
        options.strategies.clone()
    };
    let ollm = match &options.ollm {
        Some(path) => path.clone(),
        None => {
            section("eval: build ollm");
            run_cmd(
                cargo()
                    .current_dir(root)
                    .args(["build", "-q", "-p", "ollm-cli"]),
            )?;
            target_dir(root).join("debug/ollm")
        }
    };
    let sampling = has_sampling_flags(&ollm)?;
    if !sampling {
        println!(
            "eval: {} has no --temperature/--seed; the server's default (--temp 0) applies",
            ollm.display()
        );
    }
    let server = llama::start(&QWEN_05B)?;
    section(&format!(
        "eval: {} tasks x {} strategies, {PARALLEL} at a time",
        tasks.len(),
        strategies.len()
    ));
    let jobs: Vec<(Task, String)> = strategies
        .iter()
        .flat_map(|s| tasks.iter().map(move |t| (t.clone(), s.clone())))
        .collect();
    let started = Instant::now();
    let planned = jobs.len();
    let ctx = RunContext {
        deadline: options.budget.map(|b| started + b),
        ollm,
        base_url: server.base_url(),
        files: file.files.clone(),
        sampling,
    };
    let outcomes = run_all(&ctx, jobs);
    let total = started.elapsed();
    drop(server);
    let table = render_table(&strategies, &outcomes);
    println!("\n{table}");
    if outcomes.len() < planned {
        println!(
            "the budget ran out: {} of {planned} runs finished",
            outcomes.len()
        );
    }
    println!("total wall time {:.1} min", total.as_secs_f64() / 60.0);
    let path = write_report(root, &strategies, &outcomes, total, &table)?;
    println!("eval: wrote {}", path.display());
    Ok(())
}

fn load(root: &Path) -> Result<TaskFile> {
    let path = root.join(TASKS_FILE);
    let text = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// The tasks `options` asks for; an id in the smoke list that names no task is an error.
fn select(file: &TaskFile, options: &Options) -> Result<Vec<Task>> {
    if let Some(bad) = file
        .smoke
        .iter()
        .find(|id| !file.tasks.iter().any(|t| &t.id == *id))
    {
        bail!("the smoke list names `{bad}`, which is no task");
    }
    let tasks: Vec<Task> = file
        .tasks
        .iter()
        .filter(|t| !options.smoke || file.smoke.contains(&t.id))
        .filter(|t| {
            options.filters.is_empty() || options.filters.iter().any(|f| t.id.contains(f.as_str()))
        })
        .cloned()
        .collect();
    if tasks.is_empty() {
        bail!("no task matches {:?}", options.filters);
    }
    Ok(tasks)
}

/// What every run shares.
struct RunContext {
    ollm: PathBuf,
    base_url: String,
    files: BTreeMap<String, String>,
    /// Whether the binary takes `--temperature` and `--seed` (older builds do not).
    sampling: bool,
    /// After this, no new run starts.
    deadline: Option<Instant>,
}

/// Whether `ollm run --help` lists `--temperature`.
fn has_sampling_flags(ollm: &Path) -> Result<bool> {
    let output = Command::new(ollm)
        .args(["run", "--help"])
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("running {} run --help", ollm.display()))?;
    Ok(String::from_utf8_lossy(&output.stdout).contains("--temperature"))
}

/// Runs `jobs` [`PARALLEL`] at a time, printing a line as each ends; keeps the job order.
fn run_all(ctx: &RunContext, jobs: Vec<(Task, String)>) -> Vec<Outcome> {
    let count = jobs.len();
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let results = Mutex::new(Vec::with_capacity(count));
    thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                loop {
                    if ctx.deadline.is_some_and(|d| Instant::now() > d) {
                        break;
                    }
                    let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                    let Some((index, (task, strategy))) = next else {
                        break;
                    };
                    let outcome = run_one(ctx, &task, &strategy);
                    println!("[{}/{count}] {}", index + 1, progress_line(&outcome));
                    if let Ok(mut r) = results.lock() {
                        r.push((index, outcome));
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, outcome)| outcome).collect()
}

fn progress_line(o: &Outcome) -> String {
    format!(
        "{:<11} {:<20} {} {:>5.1}s turns {} calls {}{}{}",
        o.strategy,
        o.task,
        if o.success { "PASS" } else { "fail" },
        o.wall.as_secs_f64(),
        o.observed.turns,
        o.observed.calls.len(),
        if o.timed_out { " TIMEOUT" } else { "" },
        if o.failures.is_empty() {
            String::new()
        } else {
            format!(" ({})", o.failures.join("; "))
        }
    )
}

/// One `ollm run` of `task` under `strategy`; a run that cannot even start is a failure
/// with the reason, not an abort of the whole eval.
fn run_one(ctx: &RunContext, task: &Task, strategy: &str) -> Outcome {
    let mut outcome = Outcome {
        task: task.id.clone(),
        kind: task.kind.clone(),
        strategy: strategy.to_owned(),
        success: false,
        right_calls: None,
        timed_out: false,
        exit_code: None,
        wall: Duration::ZERO,
        observed: Observed::default(),
        failures: Vec::new(),
    };
    if let Err(err) = run_and_check(ctx, task, strategy, &mut outcome) {
        outcome.failures.push(format!("{err:#}"));
        outcome.success = false;
    }
    outcome
}

fn run_and_check(ctx: &RunContext, task: &Task, strategy: &str, out: &mut Outcome) -> Result<()> {
    let scratch = tempfile::Builder::new()
        .prefix("ollm-eval-")
        .tempdir()
        .context("creating the run's folder")?;
    let project = scratch.path().join("project");
    for (name, text) in &ctx.files {
        let path = project.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let log_path = scratch.path().join("out.jsonl");
    let log = File::create(&log_path)?;
    let max_turns = task.max_turns.unwrap_or(MAX_TURNS).to_string();
    let mut cmd = Command::new(&ctx.ollm);
    cmd.current_dir(&project)
        .args(["run", "--provider", "openai", "--host", &ctx.base_url])
        .args([
            "--tool-mode",
            strategy,
            "--output-format",
            "stream-json",
            "--yes",
        ])
        .args(["--max-turns", &max_turns]);
    if ctx.sampling {
        cmd.args(["--temperature", "0", "--seed", "42"]);
    }
    cmd.args([MODEL_ALIAS, &task.prompt])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(Stdio::null());
    let started = Instant::now();
    let mut child = cmd.spawn().context("starting ollm")?;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break Some(status);
        }
        if started.elapsed() > RUN_TIMEOUT {
            out.timed_out = true;
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        sleep(Duration::from_millis(100));
    };
    out.wall = started.elapsed();
    out.exit_code = status.and_then(|s| s.code());
    out.observed = observe(&fs::read_to_string(&log_path)?);
    check(task, &project, out);
    Ok(())
}

/// Reads a run's `stream-json` lines (see `docs/output-formats.md`).
fn observe(text: &str) -> Observed {
    let mut seen = Observed::default();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match event["type"].as_str().unwrap_or_default() {
            "text_delta" => seen
                .answer
                .push_str(event["text"].as_str().unwrap_or_default()),
            "tool_call_started" => seen.calls.push((
                event["name"].as_str().unwrap_or_default().to_owned(),
                event["arguments"].clone(),
            )),
            "turn_complete" => seen.turns += 1,
            "finish" => {
                seen.finish_reason = event["finish_reason"].as_str().map(str::to_owned);
                seen.prompt_tokens = event["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
                seen.completion_tokens = event["usage"]["completion_tokens"].as_u64().unwrap_or(0);
            }
            _ => {}
        }
    }
    seen
}

/// Applies `task`'s checks to what the run did, recording each failure.
fn check(task: &Task, project: &Path, out: &mut Outcome) {
    let answer = out.observed.answer.to_lowercase();
    let mut failures = Vec::new();
    for want in &task.answer {
        if !answer.contains(&want.to_lowercase()) {
            failures.push(format!("answer lacks {want:?}"));
        }
    }
    if !task.answer_any.is_empty()
        && !task
            .answer_any
            .iter()
            .any(|w| answer.contains(&w.to_lowercase()))
    {
        failures.push(format!("answer has none of {:?}", task.answer_any));
    }
    if !task.calls.is_empty() {
        let right = calls_match(&task.calls, &out.observed.calls);
        out.right_calls = Some(right);
        if !right {
            failures.push("expected calls not made".into());
        }
    }
    if let Some(file) = &task.file {
        let text = fs::read_to_string(project.join(&file.path)).unwrap_or_default();
        if !text.contains(&file.contains) {
            failures.push(format!("{} lacks {:?}", file.path, file.contains));
        }
    }
    if task.no_call && !out.observed.calls.is_empty() {
        failures.push(format!("{} calls made", out.observed.calls.len()));
    }
    if out.timed_out {
        failures.push("timed out".into());
    }
    out.success = failures.is_empty();
    out.failures = failures;
}

/// Whether each expected call appears among `actual`, in order.
fn calls_match(expected: &[ExpectedCall], actual: &[(String, Value)]) -> bool {
    let mut rest = actual.iter();
    expected.iter().all(|want| {
        rest.any(|(name, args)| {
            name == &want.tool
                && want
                    .args
                    .iter()
                    .all(|(key, value)| normalise(&args[key]) == normalise(&json!(value)))
        })
    })
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

/// Per-strategy sums.
#[derive(Debug, Default)]
struct Row {
    runs: usize,
    passed: usize,
    call_tasks: usize,
    right_calls: usize,
    none_tasks: usize,
    none_with_calls: usize,
    none_calls: usize,
    turns: u64,
    tokens: u64,
    timeouts: usize,
    wall: Duration,
}

fn summarise(strategy: &str, outcomes: &[Outcome]) -> Row {
    let mut row = Row::default();
    for o in outcomes.iter().filter(|o| o.strategy == strategy) {
        row.runs += 1;
        row.passed += usize::from(o.success);
        if let Some(right) = o.right_calls {
            row.call_tasks += 1;
            row.right_calls += usize::from(right);
        }
        if o.kind == "none" {
            row.none_tasks += 1;
            row.none_with_calls += usize::from(!o.observed.calls.is_empty());
            row.none_calls += o.observed.calls.len();
        }
        row.turns += u64::from(o.observed.turns);
        row.tokens += o.observed.prompt_tokens + o.observed.completion_tokens;
        row.timeouts += usize::from(o.timed_out);
        row.wall += o.wall;
    }
    row
}

/// The Markdown table: one row per strategy.
fn render_table(strategies: &[String], outcomes: &[Outcome]) -> String {
    let mut out = String::from(
        "| strategy | success | right tool + args | no-tool tasks with calls (calls) | avg turns | tokens (avg/run) | avg wall | timeouts |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for strategy in strategies {
        let r = summarise(strategy, outcomes);
        if r.runs == 0 {
            continue;
        }
        let per = |n: u64| n as f64 / r.runs as f64;
        out.push_str(&format!(
            "| {strategy} | {}/{} | {}/{} | {}/{} ({}) | {:.1} | {} ({:.0}) | {:.1} s | {} |\n",
            r.passed,
            r.runs,
            r.right_calls,
            r.call_tasks,
            r.none_with_calls,
            r.none_tasks,
            r.none_calls,
            per(r.turns),
            r.tokens,
            per(r.tokens),
            r.wall.as_secs_f64() / r.runs as f64,
            r.timeouts,
        ));
    }
    out
}

fn write_report(
    root: &Path,
    strategies: &[String],
    outcomes: &[Outcome],
    total: Duration,
    table: &str,
) -> Result<PathBuf> {
    let dir = target_dir(root).join("eval");
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stamp = utc_stamp(SystemTime::now());
    let runs: Vec<Value> = outcomes
        .iter()
        .map(|o| {
            json!({
                "task": o.task, "kind": o.kind, "strategy": o.strategy, "success": o.success,
                "right_calls": o.right_calls, "timed_out": o.timed_out,
                "exit_code": o.exit_code, "wall_s": o.wall.as_secs_f64(),
                "turns": o.observed.turns, "prompt_tokens": o.observed.prompt_tokens,
                "completion_tokens": o.observed.completion_tokens,
                "finish_reason": o.observed.finish_reason, "failures": o.failures,
                "calls": o.observed.calls.iter()
                    .map(|(n, a)| json!({"name": n, "arguments": a})).collect::<Vec<_>>(),
                "answer": o.observed.answer,
            })
        })
        .collect();
    let report = json!({
        "model": MODEL_ALIAS, "time": stamp, "strategies": strategies,
        "total_wall_s": total.as_secs_f64(), "table": table, "runs": runs,
    });
    let path = dir.join(format!("eval-{stamp}.json"));
    fs::write(&path, serde_json::to_string_pretty(&report)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// `2026-11-22T18-30-05Z` (no colons, so it is a portable file name).
fn utc_stamp(now: SystemTime) -> String {
    let secs = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Howard Hinnant's days-to-civil conversion.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}-{:02}-{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(json: Value) -> Task {
        serde_json::from_value(json).unwrap()
    }

    fn observed(answer: &str, calls: &[(&str, Value)]) -> Observed {
        Observed {
            answer: answer.into(),
            calls: calls
                .iter()
                .map(|(n, a)| ((*n).to_owned(), a.clone()))
                .collect(),
            ..Observed::default()
        }
    }

    /// Runs `task`'s checks on `seen` in an empty folder; returns success and the
    /// right-calls verdict.
    fn check_run(task: &Task, seen: Observed) -> (bool, Option<bool>) {
        let dir = tempfile::tempdir().unwrap();
        let mut out = run_one_stub(task, seen);
        check(task, dir.path(), &mut out);
        (out.success, out.right_calls)
    }

    fn run_one_stub(task: &Task, seen: Observed) -> Outcome {
        Outcome {
            task: task.id.clone(),
            kind: task.kind.clone(),
            strategy: "native".into(),
            success: false,
            right_calls: None,
            timed_out: false,
            exit_code: Some(0),
            wall: Duration::ZERO,
            observed: seen,
            failures: Vec::new(),
        }
    }

    #[test]
    fn the_task_file_parses_and_is_big_enough() {
        let root = crate::workspace_root();
        let file = load(&root).unwrap();
        assert!(file.tasks.len() >= 30, "{} tasks", file.tasks.len());
        let mut ids: Vec<&str> = file.tasks.iter().map(|t| t.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), file.tasks.len(), "task ids are unique");
        let smoke = select(
            &file,
            &Options {
                smoke: true,
                ..Options::default()
            },
        )
        .unwrap();
        assert_eq!(smoke.len(), file.smoke.len());
        for t in &file.tasks {
            let checks = t.answer.len() + t.answer_any.len() + t.calls.len();
            assert!(checks > 0 || t.file.is_some(), "{} checks nothing", t.id);
        }
    }

    #[test]
    fn answers_calls_and_no_call_checks() {
        let read = task(
            json!({"id": "r", "kind": "read", "prompt": "p", "answer": ["8123"],
            "calls": [{"tool": "read_file", "args": {"path": "config.toml"}}]}),
        );
        let call = |path: &str| ("read_file", json!({"path": path}));
        let cases = [
            (
                observed("Port 8123.", &[call("./config.toml")]),
                (true, Some(true)),
            ),
            (observed("Port 8123.", &[]), (false, Some(false))),
            (
                observed("Port 80.", &[call("config.toml")]),
                (false, Some(true)),
            ),
            (
                observed("8123", &[call("x.toml"), call("CONFIG.toml")]),
                (true, Some(true)),
            ),
            (
                observed("8123", &[("list_dir", json!({"path": "config.toml"}))]),
                (false, Some(false)),
            ),
        ];
        for (seen, expected) in cases {
            assert_eq!(check_run(&read, seen.clone()), expected, "{seen:?}");
        }
        let none = task(json!({"id": "n", "kind": "none", "prompt": "p",
            "answer_any": ["3", "three"], "no_call": true}));
        assert_eq!(check_run(&none, observed("Three.", &[])), (true, None));
        assert_eq!(check_run(&none, observed("3", &[call("a")])), (false, None));
        assert_eq!(check_run(&none, observed("two", &[])), (false, None));
    }

    #[test]
    fn expected_calls_must_come_in_order_and_missing_paths_mean_here() {
        let want = |tool: &str, path: Option<&str>| ExpectedCall {
            tool: tool.into(),
            args: path
                .map(|p| ("path".to_owned(), p.to_owned()))
                .into_iter()
                .collect(),
        };
        let list_then_read = [want("list_dir", Some(".")), want("read_file", Some("a"))];
        let list = ("list_dir".to_owned(), json!({}));
        let read = ("read_file".to_owned(), json!({"path": "a/"}));
        assert!(calls_match(&list_then_read, &[list.clone(), read.clone()]));
        assert!(!calls_match(&list_then_read, &[read, list]));
        assert!(calls_match(
            &[want("list_dir", None)],
            &[("list_dir".into(), json!({"path": "src"}))]
        ));
    }

    #[test]
    fn a_written_file_is_checked_on_disk() {
        let write = task(json!({"id": "w", "kind": "write", "prompt": "p",
            "file": {"path": "hello.txt", "contains": "Hello"}}));
        let dir = tempfile::tempdir().unwrap();
        let mut out = run_one_stub(&write, Observed::default());
        check(&write, dir.path(), &mut out);
        assert!(!out.success);
        fs::write(dir.path().join("hello.txt"), "Hello, world!").unwrap();
        check(&write, dir.path(), &mut out);
        assert!(out.success, "{:?}", out.failures);
    }

    #[test]
    fn stream_json_lines_become_what_the_run_did() {
        let text = [
            r#"{"type":"tool_call_started","id":"c1","name":"read_file","arguments":{"path":"a"}}"#,
            r#"{"type":"tool_result","id":"c1","name":"read_file","content":"x","is_error":false}"#,
            r#"{"type":"turn_complete","turn":1,"usage":{}}"#,
            r#"{"type":"text_delta","text":"It "}"#,
            "not json",
            r#"{"type":"text_delta","text":"says x."}"#,
            r#"{"type":"turn_complete","turn":2,"usage":{}}"#,
            r#"{"type":"finish","finish_reason":"stop","usage":{"prompt_tokens":30,"completion_tokens":5}}"#,
        ]
        .join("\n");
        let seen = observe(&text);
        assert_eq!(
            seen,
            Observed {
                answer: "It says x.".into(),
                calls: vec![("read_file".into(), json!({"path": "a"}))],
                turns: 2,
                prompt_tokens: 30,
                completion_tokens: 5,
                finish_reason: Some("stop".into()),
            }
        );
    }

    #[test]
    fn options_parse_and_refuse_unknown_strategies() {
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let o = Options::parse(&args(&["--smoke", "--strategies", "native,auto"])).unwrap();
        assert!(o.smoke);
        assert_eq!(o.strategies, ["native", "auto"]);
        assert!(Options::parse(&args(&["--strategies", "magic"])).is_err());
        assert!(Options::parse(&args(&["--tasks"])).is_err());
        assert!(Options::parse(&args(&["--fast"])).is_err());
        let o = Options::parse(&args(&["--budget", "30"])).unwrap();
        assert_eq!(o.budget, Some(Duration::from_secs(1800)));
        assert!(Options::parse(&args(&["--budget", "half"])).is_err());
    }

    #[test]
    fn utc_stamps() {
        let at = |secs| utc_stamp(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00-00-00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00-00-00Z");
        assert_eq!(at(1_795_372_205), "2026-11-22T18-30-05Z");
    }
}
