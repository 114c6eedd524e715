//! The tool-calling eval on a real model (issues 9, 24 and 35): `ollm-eval --url URL
//! --model NAME`, which `cargo xtask eval` runs against the llama-server it starts.
//!
//! Not a test: it measures. Each task ([`tasks`]: the tuning part of
//! `crates/ollm-eval/data/tasks.json`, the held-out part of
//! `crates/ollm-eval/data/held-out.json`) runs in each column, `plain` (a bare
//! OpenAI-client loop, [`plain`]), `served` (that loop through an `ollm serve` the
//! eval starts, [`served`]) and ollm's tool modes (`native`, `react`, `constrained`,
//! `auto`, [`ollm`]), against the server at `--url` with the model `--model`, in a fresh copy of its workspace, `--repeats` times. [`grade`]
//! decides each run; [`report`] writes the result file and the docs' tables, from
//! [`measures`] and [`newest`].
//!
//! # Decisions
//!
//! - **Columns**: `plain,native,auto` by default, so the table shows what ollm adds over
//!   a bare client and what auto adds over native.
//! - **Parts**: `--part all` by default, so the table shows the held-out part beside the
//!   tuning part; `--part tuning` while tuning.
//! - **Ablation** (`--ablate --rules a,b`): the auto column once with nothing off (the
//!   baseline) and once per coach rule with that rule off (`ollm run --coach-off RULE`,
//!   `all` for every rule), on the tuning part unless `--part` says otherwise: the
//!   held-out part is not for deciding which rules stay. The eval refuses an `ollm`
//!   whose `run --help` does not name `--coach-off`, since every run would fail on the
//!   flag and measure nothing.
//! - **The folder is named after its workspace** (`rust-service`, `notes`, ...), as a
//!   user's folder is named after what it holds; the model sees the name in ollm's
//!   working-folder line and in absolute paths. The first eval named every folder
//!   `project`.
//! - **Sampling** is what a user gets unless `--temperature T` is given: the default
//!   column's server (as `cargo xtask eval` starts it) has llama.cpp's own sampling (not
//!   the e2e suite's pinned `--temp 0`) and the eval sends no temperature, so each client's own defaults apply: the plain
//!   loop gets the server's 0.8, `ollm` its greedy tool turns
//!   (`ChatConfig::tool_temperature`). When a server's `/props` still reports another
//!   default temperature, the eval sends `temperature: 0.8` (the other defaults, top-k
//!   40, top-p 0.95, min-p 0.05, are the server's untouched) and never a seed; the result
//!   file says what was sent. Result files from before 2026-11-25T02 sent 0.8 to every
//!   column. `--temperature 0` is the second column, and `--smoke`'s default.
//! - **Repeats**: 3 by default (1 for `--smoke`); a repeat is one pass over the tasks,
//!   and the table reports the mean and the spread over repeats.
//! - **Two runs at once**, one per server slot (`-np 2`). Runs go repeat by repeat and,
//!   within one, column by column (both slots then share a prompt prefix in their
//!   cache), so a `--budget` that runs out leaves whole repeats of every column.
//! - **A per-run timeout** ([`context::RUN_TIMEOUT`]): a reply that never ends costs bounded time
//!   and fails (finish `timeout`).
//! - **Scores never fail the command; a broken harness does**: no server, no `ollm`
//!   binary, a refused connection. That is what CI's `eval --smoke` step checks.

mod context;
mod grade;
mod legacy;
mod measures;
mod newest;
mod ollm;
pub(crate) mod plain;
pub(crate) mod report;
mod results;
mod served;
mod tasks;
mod toolset;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::util::{Server, cargo, run_cmd, section, target_dir};
use context::{COLUMNS, Column, RunContext};
use grade::{Grade, Run};
use results::{FORMAT, ResultFile, RunRecord};
use tasks::{Part, PartChoice, Suite, Task};

/// The tool schemas the plain loop offers: ollm's built-in tools, as `ollm run` sends them.
const TOOLS_FILE: &str = "crates/ollm-eval/data/tools.json";
/// Runs at once: one per server slot.
const PARALLEL: usize = 2;
/// `--max-turns`: room for a two-step task and an answer.
const MAX_TURNS: u32 = 4;
/// llama.cpp's own default temperature (`common_params_sampling::temp`).
const LLAMA_DEFAULT_TEMPERATURE: f64 = 0.8;

/// The eval's options: `ollm-eval`'s flags without `--bfcl`.
#[derive(Debug, Default)]
pub(crate) struct Options {
    /// Columns to run (the default set when empty).
    pub(crate) columns: Vec<String>,
    /// Only tasks whose id contains one of these (all when empty).
    pub(crate) filters: Vec<String>,
    /// The part to run (`all`, or `tuning` for `--ablate`, when `None`).
    pub(crate) part: Option<PartChoice>,
    /// Run the auto column once per rule of `rules` with that rule off, and a baseline.
    pub(crate) ablate: bool,
    /// The coach rules `--ablate` switches off, one at a time.
    pub(crate) rules: Vec<String>,
    /// Only print the task counts per part, kind and workspace.
    pub(crate) list: bool,
    /// The task file's `smoke` subset, 1 repeat, temperature 0, `plain,auto`.
    pub(crate) smoke: bool,
    /// A prebuilt `ollm` to measure instead of building this worktree's.
    pub(crate) ollm: Option<PathBuf>,
    /// Start no run after this long; the report covers the runs that finished.
    pub(crate) budget: Option<Duration>,
    /// The model the server serves, sent in every request and naming the result file;
    /// needed for a run.
    pub(crate) model: Option<String>,
    /// The server's base URL (`http://127.0.0.1:8080`); needed for a run.
    pub(crate) url: Option<String>,
    /// What the server is, for the result file (`the server at URL` when `None`).
    pub(crate) server_note: Option<String>,
    /// Repeats per task.
    pub(crate) repeats: Option<usize>,
    /// A temperature to send instead of the default sampling.
    pub(crate) temperature: Option<f64>,
    /// Only regenerate the docs' table from `docs/eval/`.
    pub(crate) table: bool,
    /// Only grade the runs of `docs/eval/` again with today's grader and tasks.
    pub(crate) regrade: bool,
}

impl Options {
    /// Parses the flags of `ollm-eval` (see `src/main.rs`'s help).
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut o = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
            let list = |v: &str| v.split(',').map(|s| s.trim().to_owned()).collect();
            match arg.as_str() {
                "--strategies" | "--columns" => o.columns = list(value()?),
                "--tasks" => o.filters = list(value()?),
                "--part" => o.part = Some(PartChoice::parse(value()?)?),
                "--ablate" => o.ablate = true,
                "--rules" => o.rules = list(value()?),
                "--list" => o.list = true,
                "--smoke" => o.smoke = true,
                "--table" => o.table = true,
                "--regrade" => o.regrade = true,
                "--model" => o.model = Some(value()?.clone()),
                "--url" => o.url = Some(value()?.clone()),
                "--server-note" => o.server_note = Some(value()?.clone()),
                "--repeats" => o.repeats = Some(number(arg, value()?)?),
                "--temperature" => o.temperature = Some(number(arg, value()?)?),
                "--budget" => {
                    let minutes: u64 = number(arg, value()?)?;
                    o.budget = Some(Duration::from_secs(minutes * 60));
                }
                "--ollm" => o.ollm = Some(PathBuf::from(value()?)),
                other => bail!("the eval does not take `{other}`"),
            }
        }
        if let Some(bad) = o.columns.iter().find(|s| Column::parse(s).is_none()) {
            bail!(
                "unknown column `{bad}`; known: {}, served-with-tool-or-none, \
                 served-without-RULE, auto-without-RULE",
                COLUMNS.join(", ")
            );
        }
        if o.repeats == Some(0) {
            bail!("--repeats must be at least 1");
        }
        o.check_ablation()?;
        Ok(o)
    }

    /// `--ablate` needs `--rules` (kebab-case names) and no `--columns`; `--rules` needs
    /// `--ablate`.
    fn check_ablation(&self) -> Result<()> {
        if !self.ablate {
            if !self.rules.is_empty() {
                bail!("--rules needs --ablate");
            }
            return Ok(());
        }
        if !self.columns.is_empty() || self.smoke {
            bail!("--ablate runs the auto column only: drop --columns and --smoke");
        }
        if self.rules.is_empty() {
            bail!("--ablate needs --rules a,b: the coach rules to switch off, one at a time");
        }
        let kebab = |r: &String| {
            !r.is_empty()
                && r.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        };
        if let Some(bad) = self.rules.iter().find(|r| !kebab(r)) {
            bail!("--rules: `{bad}` is no rule name (kebab-case)");
        }
        Ok(())
    }

    /// The part to run.
    fn part(&self) -> PartChoice {
        match (self.part, self.smoke, self.ablate) {
            (_, true, _) => PartChoice::Only(Part::Tuning),
            (Some(part), _, _) => part,
            (None, _, true) => PartChoice::Only(Part::Tuning),
            (None, _, false) => PartChoice::All,
        }
    }
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T> {
    text.parse()
        .ok()
        .with_context(|| format!("{flag} {text}: not a number"))
}

/// One run to make.
#[derive(Clone)]
struct Job {
    task: Task,
    column: Column,
    repeat: usize,
}

/// The eval: a run, or `--list`, `--table`, `--regrade`.
pub(crate) fn run(root: &Path, options: &Options) -> Result<()> {
    if options.table {
        return report::regenerate(root);
    }
    if options.regrade {
        return regrade(root);
    }
    let suite = tasks::load(root)?;
    if options.list {
        print!("{}", tasks::counts(&suite));
        return Ok(());
    }
    let tasks = tasks::select(&suite, options.smoke, options.part(), &options.filters)?;
    eval(root, options, &suite, &tasks)
}

/// Whether `options` select a task from the task files, running nothing.
pub(crate) fn check(root: &Path, options: &Options) -> Result<()> {
    let suite = tasks::load(root)?;
    tasks::select(&suite, options.smoke, options.part(), &options.filters).map(drop)
}

/// Runs `tasks` in every column and writes the result file.
fn eval(root: &Path, options: &Options, suite: &Suite, tasks: &[Task]) -> Result<()> {
    let server = Server::from_options(options.url.as_deref(), options.model.as_deref())?;
    let model = server.model;
    let mut result = plan(options, model, tasks);
    let snapshot = Snapshot::take(root, &ollm_binary(root, options)?)?;
    let ollm = snapshot.0.clone();
    if options.ablate && !ollm::has_coach_off(&ollm)? {
        bail!("this ollm takes no --coach-off, so no rule can be switched off (the coach adds it)");
    }
    // Read now: the worktree may move on while the eval runs (its copy does not).
    result.ollm = describe_ollm(root, options, options.ollm.as_deref().unwrap_or(&ollm));
    result.server = server.note(options.server_note.as_deref());
    let temperature;
    (temperature, result.sampling, result.sampling_note) = sampling(options, server.url)?;
    println!(
        "eval: sampling {}: {}",
        result.sampling, result.sampling_note
    );
    let jobs = jobs(tasks, &columns(options), result.repeats);
    result.planned = jobs.len();
    section(&format!(
        "eval: {} tasks ({}) x {} columns x {} repeats = {} runs, {PARALLEL} at a time",
        tasks.len(),
        result.part,
        result.columns.len(),
        result.repeats,
        jobs.len()
    ));
    let traces = traces_dir(root, model, &result.started)?;
    // Stopped when `_servers` drops: at the end of this function, also on an error.
    let (_servers, served) = served::start_all(&ollm, server.url, &columns(options), &traces)?;
    let started = Instant::now();
    let ctx = RunContext {
        traces,
        deadline: options.budget.map(|b| started + b),
        ollm,
        base_url: server.url.to_owned(),
        model: model.to_owned(),
        workspaces: suite.workspaces.clone(),
        temperature,
        max_turns: MAX_TURNS,
        tools: tool_schemas(root)?,
        served,
    };
    let (records, harness) = run_all(&ctx, jobs);
    result.runs = records;
    result.wall_s = started.elapsed().as_secs_f64();
    finish(root, options, &result, &harness)
}

/// The result file as planned from the options, before anything runs: the model, the
/// part, the tasks, the columns, the repeats, the start time.
fn plan(options: &Options, model: &str, tasks: &[Task]) -> ResultFile {
    ResultFile {
        format: FORMAT,
        model: model.to_owned(),
        repeats: options.repeats.unwrap_or(if options.smoke { 1 } else { 3 }),
        max_turns: MAX_TURNS,
        part: options.part().name().to_owned(),
        ablation: if options.ablate {
            options.rules.clone()
        } else {
            Vec::new()
        },
        tasks: tasks.iter().map(|t| t.id.clone()).collect(),
        columns: columns(options).iter().map(Column::name).collect(),
        started: report::utc_stamp(SystemTime::now()),
        ..ResultFile::default()
    }
}

/// The tools the plain column offers, from [`TOOLS_FILE`].
fn tool_schemas(root: &Path) -> Result<Value> {
    let tools: Value = serde_json::from_str(&fs::read_to_string(root.join(TOOLS_FILE))?)
        .with_context(|| format!("parsing {TOOLS_FILE}"))?;
    Ok(tools["tools"].clone())
}

/// The folder, made, that keeps each ollm run's stream-json for this eval.
fn traces_dir(root: &Path, model: &str, stamp: &str) -> Result<PathBuf> {
    let traces = target_dir(root)
        .join("eval/traces")
        .join(format!("{model}-{stamp}"));
    fs::create_dir_all(&traces)?;
    println!(
        "eval: each ollm run's stream-json is kept in {}",
        traces.display()
    );
    Ok(traces)
}

/// Writes the result file and prints the table; fails if the harness broke.
fn finish(root: &Path, options: &Options, result: &ResultFile, harness: &[String]) -> Result<()> {
    let dir = if options.smoke {
        target_dir(root).join("eval")
    } else {
        root.join(report::RESULTS_DIR)
    };
    let path = report::write(&dir, result)?;
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    println!("\n{}", report::table(result, &name));
    if result.runs.len() < result.planned {
        println!(
            "the budget ran out: {} of {} runs finished",
            result.runs.len(),
            result.planned
        );
    }
    println!("total wall time {:.1} min", result.wall_s / 60.0);
    println!("eval: wrote {}", path.display());
    if let Some(first) = harness.first() {
        bail!(
            "the eval harness failed in {} runs (scores above are not valid); first: {first}",
            harness.len()
        );
    }
    Ok(())
}

/// The columns to run: `--columns`, the ablation's, or the default set.
fn columns(options: &Options) -> Vec<Column> {
    if options.ablate {
        let base = Column::parse(measures::BASELINE).into_iter();
        return base
            .chain(options.rules.iter().map(|r| Column::without(r)))
            .collect();
    }
    let default: &[&str] = if options.smoke {
        &["plain", "auto"]
    } else {
        &["plain", "native", "auto"]
    };
    let names: Vec<&str> = if options.columns.is_empty() {
        default.to_vec()
    } else {
        options.columns.iter().map(String::as_str).collect()
    };
    names.into_iter().filter_map(Column::parse).collect()
}

/// Repeat by repeat, then column by column, then task by task: a run cut short by
/// `--budget` still has whole repeats of every column.
fn jobs(tasks: &[Task], columns: &[Column], repeats: usize) -> Vec<Job> {
    let mut jobs = Vec::new();
    for repeat in 0..repeats {
        for column in columns {
            for task in tasks {
                jobs.push(Job {
                    task: task.clone(),
                    column: column.clone(),
                    repeat,
                });
            }
        }
    }
    jobs
}

/// The `ollm` to measure: `--ollm`, else this worktree's debug build.
fn ollm_binary(root: &Path, options: &Options) -> Result<PathBuf> {
    let path = match &options.ollm {
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
    if !path.is_file() {
        bail!("no ollm binary at {}", path.display());
    }
    Ok(path)
}

/// A copy of `binary` for this eval alone, so that building the worktree while the eval
/// runs (tests rebuild `target/debug/ollm`) never changes what is measured midway. The
/// copy is removed when the eval ends; copies left by evals that were killed (their
/// process is gone) are removed when the next one starts. Each copy is a whole debug
/// build (about 250 MB), and 35 left behind had taken 8.7 GB.
struct Snapshot(PathBuf);

impl Snapshot {
    fn take(root: &Path, binary: &Path) -> Result<Snapshot> {
        let dir = target_dir(root).join("eval/bin");
        fs::create_dir_all(&dir)?;
        remove_orphans(&dir, Path::new("/proc"));
        let copy = dir.join(format!("ollm-{}", std::process::id()));
        fs::copy(binary, &copy).with_context(|| format!("copying {}", binary.display()))?;
        Ok(Snapshot(copy))
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Err(e) = fs::remove_file(&self.0) {
            warn_kept(&self.0, &e);
        }
    }
}

fn warn_kept(path: &Path, e: &std::io::Error) {
    eprintln!("eval: could not remove {}: {e}", path.display());
}

/// Removes the copies in `dir` named `ollm-PID` whose process has no entry in `procs`.
fn remove_orphans(dir: &Path, procs: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let pid = name.to_str().and_then(|n| n.strip_prefix("ollm-"));
        if pid.is_some_and(|pid| !procs.join(pid).exists()) {
            if let Err(e) = fs::remove_file(entry.path()) {
                warn_kept(&entry.path(), &e);
            }
        }
    }
}

/// The `ollm` measured: its path and, for this worktree's build, the commit.
fn describe_ollm(root: &Path, options: &Options, path: &Path) -> String {
    if options.ollm.is_some() {
        return format!("{} (given with --ollm)", path.display());
    }
    let head = Command::new("git")
        .current_dir(root)
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let config = std::env::var_os("OLLM_CONFIG").map_or_else(String::new, |path| {
        let text = fs::read_to_string(&path).unwrap_or_default();
        format!(
            ", with OLLM_CONFIG={} ({})",
            Path::new(&path).display(),
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        )
    });
    format!("this worktree's debug build at {head}{config}")
}

/// The temperature to send, the sampling's name and a note saying what was sent. The
/// default column meets a server as users run it: its own sampling, and nothing sent, so
/// each client's own defaults apply (ollm's greedy tool turns); `cargo xtask eval` starts
/// the pinned server for a set temperature and for the smoke run.
fn sampling(options: &Options, base_url: &str) -> Result<(Option<f64>, String, String)> {
    if let Some(t) = options.temperature.or(options.smoke.then_some(0.0)) {
        return Ok((
            Some(t),
            format!("temperature {t}"),
            format!("temperature {t} sent, no seed"),
        ));
    }
    let props = plain::props(base_url)?;
    let server_default = props["default_generation_settings"]["params"]["temperature"].as_f64();
    let stock = server_default.is_some_and(|t| (t - LLAMA_DEFAULT_TEMPERATURE).abs() < 1e-6);
    if stock {
        return Ok((
            None,
            "default".into(),
            "nothing sent: the server's defaults".into(),
        ));
    }
    Ok((
        Some(LLAMA_DEFAULT_TEMPERATURE),
        "default".into(),
        format!(
            "temperature {LLAMA_DEFAULT_TEMPERATURE} sent (llama.cpp's default), no seed: the \
             server's own default temperature is {server_default:?}"
        ),
    ))
}

/// Runs `jobs` [`PARALLEL`] at a time, printing a line as each ends; keeps the job
/// order. Returns the records and the harness failures.
fn run_all(ctx: &RunContext, jobs: Vec<Job>) -> (Vec<RunRecord>, Vec<String>) {
    let count = jobs.len();
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let results = Mutex::new(Vec::with_capacity(count));
    let harness = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                while ctx.deadline.is_none_or(|d| Instant::now() <= d) {
                    let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                    let Some((index, job)) = next else {
                        break;
                    };
                    match run_one(ctx, &job) {
                        Ok(record) => {
                            println!("[{}/{count}] {}", index + 1, progress_line(&record));
                            if let Ok(mut r) = results.lock() {
                                r.push((index, record));
                            }
                        }
                        Err(err) => {
                            println!("[{}/{count}] HARNESS FAILURE: {err:#}", index + 1);
                            if let Ok(mut h) = harness.lock() {
                                let column = job.column.name();
                                h.push(format!("{column} {}: {err:#}", job.task.id));
                            }
                        }
                    }
                }
            });
        }
    });
    let mut results = results.into_inner().unwrap_or_default();
    results.sort_by_key(|(index, _)| *index);
    let records = results.into_iter().map(|(_, r)| r).collect();
    (records, harness.into_inner().unwrap_or_default())
}

fn progress_line(r: &RunRecord) -> String {
    format!(
        "{:<7} #{} {:<16} {} {:>5.1}s finish {} calls {}/{} run{}",
        r.column,
        r.repeat + 1,
        r.task,
        if r.pass { "PASS" } else { "fail" },
        r.seconds,
        r.finish.as_deref().unwrap_or("none"),
        r.calls_run,
        r.calls_made,
        if r.failures.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.failures.join("; "))
        }
    )
}

/// One run in a fresh copy of its workspace, graded; `Err` only when the harness broke.
fn run_one(ctx: &RunContext, job: &Job) -> Result<RunRecord> {
    let scratch = tempfile::Builder::new()
        .prefix("ollm-eval-")
        .tempdir()
        .context("creating the run's folder")?;
    // Named after the workspace, as a user's folder is named after what it holds.
    let project = scratch.path().join(&job.task.workspace);
    let files = ctx
        .workspaces
        .get(&job.task.workspace)
        .with_context(|| format!("no workspace {}", job.task.workspace))?;
    fs::create_dir_all(&project)?;
    for (name, text) in files {
        let path = project.join(name);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    let started = Instant::now();
    let tools = job.column.ollm_tools;
    let mut run = match job.column.mode.as_str() {
        "plain" => plain::run(ctx, &ctx.base_url, &job.task.prompt, &project, tools)?,
        "served" => {
            let name = job.column.name();
            let url = ctx
                .served
                .get(&name)
                .with_context(|| format!("no serve for {name}"))?;
            plain::run(ctx, url, &job.task.prompt, &project, tools)?
        }
        _ => ollm::run(ctx, &job.column, &job.task.prompt, &project)?,
    };
    let seconds = started.elapsed().as_secs_f64();
    run.changed = grade::changes(files, &project);
    let grade = grade::grade(&job.task, &run);
    let out = scratch.path().join("out.jsonl");
    if out.is_file() {
        let name = format!("{}.{}.{}.jsonl", job.task.id, job.column.name(), job.repeat);
        fs::copy(&out, ctx.traces.join(name)).context("keeping the run's trace")?;
    }
    let raw = ollm::raw_log(&project)?;
    if run.finish.as_deref() == Some("timeout") && raw.is_file() {
        let name = format!(
            "{}.{}.{}.raw.log",
            job.task.id,
            job.column.name(),
            job.repeat
        );
        fs::copy(&raw, ctx.traces.join(name)).context("keeping the timed-out run's log")?;
    }
    Ok(record(job, run, grade, seconds))
}

/// `eval --regrade`: every committed run graded again from what it recorded, so a
/// stricter grader applies to old results too. Files of the first format are left as
/// they are: their tasks are gone.
fn regrade(root: &Path) -> Result<()> {
    let suite = tasks::load(root)?;
    for path in report::result_files(root)? {
        let mut result: ResultFile = serde_json::from_str(&fs::read_to_string(&path)?)
            .with_context(|| format!("parsing {}", path.display()))?;
        if result.format < FORMAT {
            continue;
        }
        let mut changed = 0;
        for record in &mut result.runs {
            let Some(task) = suite.tasks.iter().find(|t| t.id == record.task) else {
                continue;
            };
            let Grade { failures, unasked } = grade::grade(task, &replay(record));
            changed += usize::from(failures != record.failures);
            record.pass = failures.is_empty();
            record.failures = failures;
            record.unasked = unasked;
        }
        report::rewrite(&path, &result)?;
        println!("{}: {changed} runs graded differently", path.display());
    }
    Ok(())
}

/// What a recorded run did, as the grader reads it.
fn replay(record: &RunRecord) -> Run {
    let calls = record
        .calls
        .iter()
        .map(|c| grade::Call {
            name: c["name"].as_str().unwrap_or_default().to_owned(),
            args: c["arguments"].clone(),
            ran: c["ran"].as_bool().unwrap_or(false),
        })
        .collect();
    Run {
        answer: record.answer.clone(),
        calls,
        finish: record.finish.clone(),
        exit_code: record.exit_code,
        turns: record.turns,
        changed: record.changed.clone(),
        ..Run::default()
    }
}

fn record(job: &Job, run: Run, grade: Grade, seconds: f64) -> RunRecord {
    RunRecord {
        task: job.task.id.clone(),
        kind: job.task.kind.name().into(),
        plain_words: true,
        part: job.task.part.name().into(),
        workspace: job.task.workspace.clone(),
        column: job.column.name(),
        repeat: job.repeat,
        pass: grade.failures.is_empty(),
        failures: grade.failures,
        unasked: grade.unasked,
        finish: run.finish.clone(),
        exit_code: run.exit_code,
        calls_made: run.calls.len(),
        calls_run: run.calls_run(),
        calls: run
            .calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.args, "ran": c.ran}))
            .collect(),
        changed: run.changed,
        seconds,
        turns: run.turns,
        tokens: run.prompt_tokens + run.completion_tokens,
        answer: run.answer,
        coached: run.coached,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    /// Every eval used to leave its copy of `ollm` (a 250 MB debug build) behind.
    #[test]
    fn the_copy_of_ollm_goes_with_its_eval_and_orphans_with_the_next() {
        let root = tempfile::tempdir().unwrap();
        let binary = root.path().join("ollm");
        fs::write(&binary, "binary").unwrap();
        let copy = {
            let snapshot = Snapshot::take(root.path(), &binary).unwrap();
            assert_eq!(fs::read_to_string(&snapshot.0).unwrap(), "binary");
            snapshot.0.clone()
        };
        assert!(!copy.exists(), "the copy outlived its eval");

        let (bin, procs) = (root.path().join("bin"), root.path().join("proc"));
        fs::create_dir_all(procs.join("17")).unwrap();
        fs::create_dir_all(&bin).unwrap();
        for name in ["ollm-17", "ollm-4000000", "notes.txt"] {
            fs::write(bin.join(name), "x").unwrap();
        }
        remove_orphans(&bin, &procs);
        let mut left: Vec<String> = fs::read_dir(&bin)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["notes.txt", "ollm-17"]);
    }

    #[test]
    fn options_parse() {
        let o = Options::parse(&args(&[
            "--smoke",
            "--columns",
            "plain,auto",
            "--model",
            "m",
            "--repeats",
            "2",
            "--temperature",
            "0",
            "--budget",
            "30",
        ]))
        .unwrap();
        assert!(o.smoke);
        assert_eq!(o.columns, ["plain", "auto"]);
        assert_eq!(o.model.as_deref(), Some("m"));
        assert_eq!((o.repeats, o.temperature), (Some(2), Some(0.0)));
        assert_eq!(o.budget, Some(Duration::from_secs(1800)));
    }

    #[test]
    fn options_refuse_unknown_columns_flags_and_bad_numbers() {
        for bad in [
            &["--strategies", "magic"][..],
            &["--tasks"],
            &["--fast"],
            &["--budget", "half"],
            &["--repeats", "0"],
            &["--temperature", "warm"],
        ] {
            assert!(Options::parse(&args(bad)).is_err(), "{bad:?}");
        }
    }

    /// The names of the columns `a` asks for.
    fn column_names(a: &[&str]) -> Vec<String> {
        columns(&Options::parse(&args(a)).unwrap())
            .iter()
            .map(Column::name)
            .collect()
    }

    #[test]
    fn smoke_defaults_to_plain_and_auto_at_temperature_0() {
        let smoke = Options::parse(&args(&["--smoke"])).unwrap();
        assert_eq!(column_names(&["--smoke"]), ["plain", "auto"]);
        assert_eq!(column_names(&[]), ["plain", "native", "auto"]);
        assert_eq!(smoke.part(), PartChoice::Only(Part::Tuning));
        let (t, name, _) = sampling(&smoke, "http://unused").unwrap();
        assert_eq!((t, name.as_str()), (Some(0.0), "temperature 0"));
    }

    #[test]
    fn served_columns_are_selected_by_name_and_go_through_serve() {
        let names = column_names(&[
            "--columns",
            "served,auto,served-with-tool-or-none,served-without-tool-or-none",
        ]);
        assert_eq!(
            names,
            [
                "served",
                "auto",
                "served-with-tool-or-none",
                "served-without-tool-or-none"
            ]
        );
        let chosen = columns(&Options::parse(&args(&["--columns", "plain,served"])).unwrap());
        let served: Vec<bool> = chosen.iter().map(Column::is_served).collect();
        assert_eq!(served, [false, true]);
        for bad in [
            "serve",
            "served-with-repeat-guard",
            "served-with-",
            "plain,servd",
        ] {
            assert!(Options::parse(&args(&["--columns", bad])).is_err(), "{bad}");
        }
    }

    #[test]
    fn parts_default_to_all_and_to_tuning_for_the_ablation() {
        let part = |a: &[&str]| Options::parse(&args(a)).unwrap().part();
        assert_eq!(part(&[]), PartChoice::All);
        assert_eq!(
            part(&["--part", "held-out"]),
            PartChoice::Only(Part::HeldOut)
        );
        assert_eq!(
            part(&["--ablate", "--rules", "a"]),
            PartChoice::Only(Part::Tuning)
        );
        assert_eq!(
            part(&["--ablate", "--rules", "a", "--part", "all"]),
            PartChoice::All
        );
    }

    #[test]
    fn the_ablation_runs_a_baseline_then_each_rule_off() {
        assert_eq!(
            column_names(&["--ablate", "--rules", "answer-nudge, repeat-guard,all"]),
            [
                "auto",
                "auto-without-answer-nudge",
                "auto-without-repeat-guard",
                "auto-without-all"
            ]
        );
        for bad in [
            &["--ablate"][..],
            &["--rules", "a"],
            &["--ablate", "--rules", "Answer_Nudge"],
            &["--ablate", "--rules", "a,,b"],
            &["--ablate", "--rules", "a", "--columns", "plain"],
            &["--ablate", "--rules", "a", "--smoke"],
            &["--part", "half"],
        ] {
            assert!(Options::parse(&args(bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn jobs_go_repeat_by_repeat_then_column_by_column() {
        let suite = tasks::load(&crate::util::workspace_root()).unwrap();
        let two = &suite.tasks[..2];
        let columns: Vec<Column> = ["plain", "auto"]
            .into_iter()
            .filter_map(Column::parse)
            .collect();
        let order: Vec<(String, usize, String)> = jobs(two, &columns, 2)
            .into_iter()
            .map(|j| (j.column.name(), j.repeat, j.task.id))
            .collect();
        assert_eq!(order.len(), 8);
        assert_eq!(order[0], ("plain".into(), 0, two[0].id.clone()));
        assert_eq!(order[2], ("auto".into(), 0, two[0].id.clone()));
        assert_eq!(order[4], ("plain".into(), 1, two[0].id.clone()));
    }

    #[test]
    fn a_recorded_run_regrades_as_it_was_graded() {
        let suite = tasks::load(&crate::util::workspace_root()).unwrap();
        let task = suite
            .tasks
            .iter()
            .find(|t| t.id == "port-file.casual")
            .unwrap();
        let mut run = Run {
            answer: "Saved.".into(),
            calls: vec![grade::Call {
                name: "write_file".into(),
                args: json!({"path": "port.txt", "content": "7341"}),
                ran: true,
            }],
            finish: Some("stop".into()),
            exit_code: Some(0),
            ..Run::default()
        };
        run.changed.insert("port.txt".into(), Some("7341\n".into()));
        run.changed.insert("config.toml".into(), None);
        let job = Job {
            task: task.clone(),
            column: Column::without("answer-nudge"),
            repeat: 1,
        };
        let graded = grade::grade(task, &run);
        assert_eq!(graded.unasked, ["config.toml removed"]);
        let record = record(&job, run.clone(), graded.clone(), 1.0);
        assert_eq!(record.column, "auto-without-answer-nudge");
        assert_eq!(
            (record.part.as_str(), record.kind.as_str()),
            ("tuning", "write")
        );
        assert_eq!(grade::grade(task, &replay(&record)), graded);
    }
}
