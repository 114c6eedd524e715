//! `ollm-eval --bfcl`: the Berkeley Function-Calling Leaderboard's questions on a real
//! model, in the eval's columns (issue 24). `cargo xtask eval --bfcl` runs it against the
//! llama-server it starts; `--url` and `--model` point it at any OpenAI-compatible server.
//!
//! Not a test: it measures. [`data`] fetches BFCL's files pinned (never in the tree);
//! each question of the subset runs once per column against the server at `--url` with
//! the model `--model`: `plain` (a bare request, [`plain`]), `native` and `auto` (the
//! library, [`library`]). [`checker`] judges the calls; [`report`] writes
//! `docs/eval/bfcl/bfcl-<model>-<stamp>.json` and the section of `docs/tool-calling.md`.
//!
//! # Decisions
//!
//! - **Categories**: simple (BFCL v4's `simple_python`), multiple, parallel, irrelevance:
//!   the single-turn AST categories the paper reports for small models.
//! - **A deterministic subset**: `--limit N` questions per category (default
//!   [`DEFAULT_LIMIT`]), the `i * len / N`-th of each file, so the same questions run
//!   every time and they spread over the whole file (BFCL's files are grouped by topic).
//!   `--limit 0` runs every question (1,040; hours on 2 cores). On the shared 2-core
//!   machine the default takes about 15 minutes for the 0.5B model's three columns.
//! - **Temperature 0** in every column, and a generation cap of [`MAX_TOKENS`] tokens (a
//!   call, or a few parallel calls, fits in far less; a reply that runs on costs bounded
//!   time), the same for all three columns. No seed.
//! - **Order**: question by question, categories interleaved (the first of each, then
//!   the second of each, ...), all columns of a question before the next, so a `--budget`
//!   that runs out leaves every column with the same questions and every category
//!   represented. Two at a time, one per server slot.
//! - **Temperature 0 is not bit-for-bit repeatable here**: two requests share the server
//!   at once (`-np 2`), and which requests are batched together changes the arithmetic,
//!   so a question near a tie can go either way between runs. The subset's figures carry
//!   that noise besides their sampling error.
//! - **A per-question timeout** ([`TIMEOUT`]): a reply that never ends fails (`timeout`).
//! - **Scores never fail the command; a broken harness does**, as in the eval.

mod checker;
mod data;
mod library;
mod plain;
mod report;
mod tools;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use ollm_core::ToolMode;
use serde_json::{Value, json};

use crate::suite::report::utc_stamp;
use crate::util::{Server, cache_dir, section};
use data::Item;
use report::{ResultFile, RunRecord};

/// The columns, in the order they run for each question.
const COLUMNS: &[&str] = &["plain", "native", "auto"];
/// Questions per category unless `--limit` says otherwise.
const DEFAULT_LIMIT: usize = 15;
/// The generation cap of every column.
const MAX_TOKENS: u32 = 512;
/// The temperature of every column.
const TEMPERATURE: f64 = 0.0;
/// How long one question may take in one column.
const TIMEOUT: Duration = Duration::from_secs(240);
/// Runs at once: one per server slot.
const PARALLEL: usize = 2;

/// `ollm-eval --bfcl`'s options.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Options {
    /// The model the server serves; needed for a run.
    pub(crate) model: Option<String>,
    /// The server's OpenAI base URL; needed for a run.
    pub(crate) url: Option<String>,
    /// What the server is, for the result file.
    pub(crate) server_note: Option<String>,
    /// Questions per category (`Some(0)`: all).
    pub(crate) limit: Option<usize>,
    /// Columns to run (all when empty).
    pub(crate) columns: Vec<String>,
    /// Start no question after this long.
    pub(crate) budget: Option<Duration>,
    /// Only regenerate the docs' section.
    pub(crate) table: bool,
    /// Only check the committed runs again with today's checker.
    pub(crate) regrade: bool,
}

impl Options {
    /// Parses the flags of `ollm-eval --bfcl` (`--bfcl` itself is skipped).
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut o = Options::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--bfcl" => {}
                "--table" => o.table = true,
                "--regrade" => o.regrade = true,
                "--model" => o.model = Some(value()?.clone()),
                "--url" => o.url = Some(value()?.clone()),
                "--server-note" => o.server_note = Some(value()?.clone()),
                "--limit" => o.limit = Some(number(arg, value()?)?),
                "--columns" => {
                    o.columns = value()?.split(',').map(|s| s.trim().to_owned()).collect()
                }
                "--budget" => {
                    o.budget = Some(Duration::from_secs(60 * number::<u64>(arg, value()?)?))
                }
                other => bail!("`--bfcl` does not take `{other}`"),
            }
        }
        if let Some(bad) = o.columns.iter().find(|c| !COLUMNS.contains(&c.as_str())) {
            bail!("unknown column `{bad}`; known: {}", COLUMNS.join(", "));
        }
        Ok(o)
    }
}

fn number<T: std::str::FromStr>(flag: &str, text: &str) -> Result<T> {
    text.parse()
        .ok()
        .with_context(|| format!("{flag} {text}: not a number"))
}

/// One question in one column.
struct Job {
    item: Item,
    column: String,
}

/// What every run shares.
struct Ctx {
    base_url: String,
    model: String,
    deadline: Option<Instant>,
}

/// BFCL: a run, or `--table`, `--regrade`.
pub(crate) fn run(root: &Path, options: &Options) -> Result<()> {
    if options.table {
        return report::regenerate(root);
    }
    if options.regrade {
        return regrade(root);
    }
    let server = Server::from_options(options.url.as_deref(), options.model.as_deref())?;
    let Plan {
        columns,
        limit,
        chosen,
    } = choose(options)?;
    let jobs = jobs(&chosen, &columns);
    section(&format!(
        "bfcl: {} questions x {} columns = {} runs, {PARALLEL} at a time, temperature {TEMPERATURE}",
        chosen.iter().map(Vec::len).sum::<usize>(),
        columns.len(),
        jobs.len()
    ));
    let started = Instant::now();
    let ctx = Ctx {
        base_url: server.url.to_owned(),
        model: server.model.to_owned(),
        deadline: options.budget.map(|b| started + b),
    };
    let mut result = ResultFile {
        benchmark: "BFCL (simple, multiple, parallel, irrelevance)".into(),
        model: server.model.to_owned(),
        server: server.note(options.server_note.as_deref()),
        ollm: describe_ollm(root),
        data: json!({"package": data::PACKAGE, "gorilla_commit": data::GORILLA_COMMIT,
            "files": "bfcl_eval/data/BFCL_v4_{simple_python,multiple,parallel,irrelevance}.json and possible_answer/, sha256-pinned in crates/ollm-eval/src/bfcl/data.rs"}),
        sampling: format!(
            "temperature {TEMPERATURE} in every column, max_tokens {MAX_TOKENS}, no seed, one model turn"
        ),
        subset: subset_json(&chosen, limit),
        columns,
        started: utc_stamp(SystemTime::now()),
        wall_s: 0.0,
        planned: jobs.len(),
        runs: Vec::new(),
    };
    // The file is written again after every run, so a run stopped from outside still
    // leaves what it measured.
    let results_dir = root.join(report::RESULTS_DIR);
    let partial = Mutex::new(result.clone());
    let save = |record: &RunRecord| save_partial(&partial, record, started, &results_dir);
    let (runs, harness) = run_all(&ctx, jobs, &save);
    result.runs = runs;
    result.wall_s = started.elapsed().as_secs_f64();
    finish(root, &result, &harness)
}

/// Adds `record` to the partial results and writes them to `dir`.
fn save_partial(partial: &Mutex<ResultFile>, record: &RunRecord, started: Instant, dir: &Path) {
    if let Ok(mut file) = partial.lock() {
        file.runs.push(record.clone());
        file.wall_s = started.elapsed().as_secs_f64();
        if let Err(err) = report::write(dir, &file) {
            println!("bfcl: could not save the partial results: {err:#}");
        }
    }
}

/// What a run measures: the columns, the per-category limit (`None`: all) and the
/// questions chosen for each category.
struct Plan {
    columns: Vec<String>,
    limit: Option<usize>,
    chosen: Vec<Vec<Item>>,
}

fn choose(options: &Options) -> Result<Plan> {
    let columns: Vec<String> = if options.columns.is_empty() {
        COLUMNS.iter().map(|c| (*c).to_owned()).collect()
    } else {
        options.columns.clone()
    };
    let dir = data::ensure(&cache_dir()?)?;
    let limit = match options.limit {
        Some(0) => None,
        Some(n) => Some(n),
        None => Some(DEFAULT_LIMIT),
    };
    let mut chosen = Vec::new();
    for category in data::CATEGORIES {
        chosen.push(data::subset(data::load(&dir, category)?, limit));
    }
    Ok(Plan {
        columns,
        limit,
        chosen,
    })
}

/// `eval --bfcl --regrade`: every committed run checked again from the calls it recorded,
/// so a corrected checker applies to old results too; then the section is regenerated.
fn regrade(root: &Path) -> Result<()> {
    let dir = data::ensure(&cache_dir()?)?;
    let mut items = std::collections::HashMap::new();
    for category in data::CATEGORIES {
        for item in data::load(&dir, category)? {
            items.insert(item.id.clone(), item);
        }
    }
    for (name, mut file) in report::committed(root)? {
        let mut changed = 0;
        for run in &mut file.runs {
            let item = items
                .get(&run.id)
                .with_context(|| format!("{name}: no question {}", run.id))?;
            let calls: Vec<checker::Call> = run
                .calls
                .iter()
                .map(|c| checker::Call {
                    name: c["name"].as_str().unwrap_or_default().to_owned(),
                    args: c["arguments"].clone(),
                })
                .collect();
            let verdict = checker::check(item.category, &item.functions, &calls, &item.answers);
            let why = verdict.err().unwrap_or_default();
            changed += usize::from(why != run.why);
            run.pass = why.is_empty();
            run.why = why;
        }
        report::write(&root.join(report::RESULTS_DIR), &file)?;
        println!("{name}: {changed} runs checked differently");
    }
    report::regenerate(root)
}

/// Writes the result file, regenerates the docs' section and prints the scores.
fn finish(root: &Path, result: &ResultFile, harness: &[String]) -> Result<()> {
    let path = report::write(&root.join(report::RESULTS_DIR), result)?;
    report::regenerate(root)?;
    for column in &result.columns {
        let scores: Vec<String> = data::CATEGORIES
            .iter()
            .map(|c| {
                let (p, n) = report::score(result, column, data::name(*c));
                format!("{} {p}/{n}", data::name(*c))
            })
            .collect();
        println!("{column:<7} {}", scores.join("  "));
    }
    println!(
        "total wall time {:.1} min; wrote {}",
        result.wall_s / 60.0,
        path.display()
    );
    if let Some(first) = harness.first() {
        bail!(
            "the harness failed in {} runs (scores above are not valid); first: {first}",
            harness.len()
        );
    }
    Ok(())
}

fn subset_json(chosen: &[Vec<Item>], limit: Option<usize>) -> Value {
    let rule = match limit {
        Some(n) => format!("the i*len/{n}-th question of each category's file, i = 0..{n}"),
        None => "every question".into(),
    };
    let ids: serde_json::Map<String, Value> = chosen
        .iter()
        .filter_map(|items| {
            let first = items.first()?;
            let ids = items.iter().map(|i| Value::from(i.id.clone())).collect();
            Some((data::name(first.category).to_owned(), Value::Array(ids)))
        })
        .collect();
    json!({"rule": rule, "ids": ids})
}

/// Question by question with the categories interleaved, every column of a question
/// before the next question.
fn jobs(chosen: &[Vec<Item>], columns: &[String]) -> Vec<Job> {
    let longest = chosen.iter().map(Vec::len).max().unwrap_or(0);
    let mut jobs = Vec::new();
    for i in 0..longest {
        for item in chosen.iter().filter_map(|items| items.get(i)) {
            for column in columns {
                jobs.push(Job {
                    item: item.clone(),
                    column: column.clone(),
                });
            }
        }
    }
    jobs
}

/// The library measured: the last commit that changed `crates/`, and the worktree's.
fn describe_ollm(root: &Path) -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
            .unwrap_or_default()
    };
    let crates = git(&["log", "-1", "--format=%h %s", "--", "crates"]);
    let head = git(&["describe", "--always", "--dirty", "--abbrev=12"]);
    format!(
        "ollm-core and ollm-bridge as of {crates} (the last change to crates/), run from {head}"
    )
}

/// Runs `jobs` [`PARALLEL`] at a time, handing each record to `save` as it ends; the
/// records in job order and the harness failures.
fn run_all(
    ctx: &Ctx,
    jobs: Vec<Job>,
    save: &(dyn Fn(&RunRecord) + Sync),
) -> (Vec<RunRecord>, Vec<String>) {
    let count = jobs.len();
    let queue = Mutex::new(jobs.into_iter().enumerate());
    let results = Mutex::new(Vec::with_capacity(count));
    let harness = Mutex::new(Vec::new());
    thread::scope(|scope| {
        for _ in 0..PARALLEL {
            scope.spawn(|| {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(err) => {
                        if let Ok(mut h) = harness.lock() {
                            h.push(format!("no async runtime: {err}"));
                        }
                        return;
                    }
                };
                while ctx.deadline.is_none_or(|d| Instant::now() <= d) {
                    let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                    let Some((index, job)) = next else {
                        break;
                    };
                    match run_one(ctx, &runtime, &job) {
                        Ok(record) => {
                            println!("[{}/{count}] {}", index + 1, progress_line(&record));
                            save(&record);
                            if let Ok(mut r) = results.lock() {
                                r.push((index, record));
                            }
                        }
                        Err(err) => {
                            println!("[{}/{count}] HARNESS FAILURE: {err:#}", index + 1);
                            if let Ok(mut h) = harness.lock() {
                                h.push(format!("{} {}: {err:#}", job.column, job.item.id));
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
        "{:<6} {:<22} {} {:>5.1}s {} calls ({} refused), finish {}{}",
        r.column,
        r.id,
        if r.pass { "PASS" } else { "fail" },
        r.seconds,
        r.calls.len(),
        r.refused.unwrap_or(0),
        r.finish,
        if r.why.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.why)
        }
    )
}

/// One question in one column, checked; `Err` only when the harness broke.
fn run_one(ctx: &Ctx, runtime: &tokio::runtime::Runtime, job: &Job) -> Result<RunRecord> {
    let item = &job.item;
    let offered: Vec<Value> = item.functions.iter().map(tools::tool).collect();
    let started = Instant::now();
    let outcome = match job.column.as_str() {
        "plain" => plain::ask(
            &ctx.base_url,
            &ctx.model,
            &item.question,
            &offered,
            (TEMPERATURE, MAX_TOKENS, TIMEOUT),
        )?,
        column => {
            let settings = library::Settings {
                base_url: &ctx.base_url,
                model: &ctx.model,
                mode: if column == "native" {
                    ToolMode::Native
                } else {
                    ToolMode::Auto
                },
                temperature: TEMPERATURE,
                max_tokens: MAX_TOKENS,
                timeout: TIMEOUT,
            };
            runtime.block_on(library::ask(&settings, &item.question, &offered))?
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let verdict = checker::check(
        item.category,
        &item.functions,
        &outcome.calls,
        &item.answers,
    );
    Ok(RunRecord {
        id: item.id.clone(),
        category: data::name(item.category).to_owned(),
        column: job.column.clone(),
        pass: verdict.is_ok(),
        why: verdict.err().unwrap_or_default(),
        finish: outcome.finish,
        strategy: outcome.strategy,
        calls: outcome
            .calls
            .iter()
            .map(|c| json!({"name": c.name, "arguments": c.args}))
            .collect(),
        refused: (job.column != "plain").then_some(outcome.refused),
        text: outcome.text.chars().take(400).collect(),
        seconds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use checker::Category;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn options_parse() {
        let o = Options::parse(&args(&[
            "--bfcl",
            "--model",
            "m",
            "--limit",
            "4",
            "--columns",
            "plain,auto",
            "--budget",
            "2",
        ]))
        .unwrap();
        assert_eq!(o.model.as_deref(), Some("m"));
        assert_eq!(o.limit, Some(4));
        assert_eq!(o.columns, ["plain", "auto"]);
        assert_eq!(o.budget, Some(Duration::from_secs(120)));
        assert!(Options::parse(&args(&["--bfcl", "--table"])).unwrap().table);
        for bad in [
            &["--columns", "react"][..],
            &["--limit", "many"],
            &["--limit"],
            &["--fast"],
        ] {
            assert!(Options::parse(&args(bad)).is_err(), "{bad:?}");
        }
    }

    fn item(id: &str, category: Category) -> Item {
        Item {
            id: id.into(),
            category,
            question: String::new(),
            functions: Vec::new(),
            answers: Vec::new(),
        }
    }

    #[test]
    fn jobs_interleave_categories_and_keep_a_questions_columns_together() {
        let chosen = vec![
            vec![item("s0", Category::Simple), item("s1", Category::Simple)],
            vec![item("i0", Category::Irrelevance)],
        ];
        let order: Vec<(String, String)> = jobs(&chosen, &args(&["plain", "auto"]))
            .into_iter()
            .map(|j| (j.item.id, j.column))
            .collect();
        let want = [
            ("s0", "plain"),
            ("s0", "auto"),
            ("i0", "plain"),
            ("i0", "auto"),
            ("s1", "plain"),
            ("s1", "auto"),
        ];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(a, b)| ((*a).into(), (*b).into()))
            .collect();
        assert_eq!(order, want);
    }
}
