//! Results as data: the result file each eval run writes, its summary, and the table in
//! `docs/tool-calling.md` generated from the committed files.
//!
//! # Decisions
//!
//! - **One JSON file per eval run**, under `docs/eval/` (target/eval/ for `--smoke`, which
//!   CI runs and nobody commits): the model, the server, the ollm build, the sampling,
//!   and per task, column and repeat the pass, the failures, the finish, the calls made
//!   and run, the seconds and the answer. The docs cite these files; a figure that is not
//!   in one is not a figure.
//! - **Mean and spread over repeats**: a repeat is one pass over every task; a column's
//!   score is the mean of its repeats' pass counts, its spread the lowest and highest.
//! - **The table is generated** from every file in `docs/eval/` by `cargo xtask eval
//!   --table`, between two markers in `docs/tool-calling.md`, and a test fails when the
//!   committed table differs from what the committed files give.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where committed result files live, relative to the workspace root.
pub(super) const RESULTS_DIR: &str = "docs/eval";
/// The document whose table is generated.
const DOC: &str = "docs/tool-calling.md";
const START: &str = "<!-- eval-table:start (cargo xtask eval --table) -->";
const END: &str = "<!-- eval-table:end -->";

/// One eval run's result file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct ResultFile {
    pub(super) model: String,
    /// Which llama-server ran, and how.
    pub(super) server: String,
    /// The `ollm` binary measured (path and the commit it was built from).
    pub(super) ollm: String,
    /// `default` or `temperature T`.
    pub(super) sampling: String,
    /// What was sent, and why.
    pub(super) sampling_note: String,
    pub(super) repeats: usize,
    pub(super) max_turns: u32,
    pub(super) tasks: Vec<String>,
    pub(super) columns: Vec<String>,
    pub(super) started: String,
    pub(super) wall_s: f64,
    /// Runs planned; fewer in `runs` when the budget ran out.
    pub(super) planned: usize,
    pub(super) runs: Vec<RunRecord>,
}

/// One run of one task in one column.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct RunRecord {
    pub(super) task: String,
    pub(super) kind: String,
    pub(super) plain_words: bool,
    pub(super) column: String,
    pub(super) repeat: usize,
    pub(super) pass: bool,
    pub(super) failures: Vec<String>,
    pub(super) finish: Option<String>,
    pub(super) exit_code: Option<i32>,
    pub(super) calls_made: usize,
    pub(super) calls_run: usize,
    pub(super) calls: Vec<Value>,
    pub(super) seconds: f64,
    pub(super) turns: u32,
    pub(super) tokens: u64,
    pub(super) answer: String,
}

/// A column's figures over its repeats.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Summary {
    pub(super) tasks: usize,
    pub(super) repeats: usize,
    pub(super) mean: f64,
    pub(super) min: usize,
    pub(super) max: usize,
    /// Mean passes of tool tasks, of plain-words tool tasks, of no-tool tasks, and how
    /// many of each there are per repeat.
    pub(super) tool: (f64, usize),
    pub(super) plain: (f64, usize),
    pub(super) none: (f64, usize),
    pub(super) seconds: f64,
}

/// `column`'s summary from `runs`, over its complete repeats only (a repeat that
/// `--budget` cut short would skew the spread); `None` when it has none.
pub(super) fn summarise(runs: &[RunRecord], column: &str) -> Option<Summary> {
    let mut size: BTreeMap<usize, usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.column == column) {
        *size.entry(r.repeat).or_default() += 1;
    }
    let whole = size.values().copied().max()?;
    let mine: Vec<&RunRecord> = runs
        .iter()
        .filter(|r| r.column == column && size.get(&r.repeat) == Some(&whole))
        .collect();
    let mut per_repeat: BTreeMap<usize, usize> = BTreeMap::new();
    for r in &mine {
        *per_repeat.entry(r.repeat).or_default() += usize::from(r.pass);
    }
    let repeats = per_repeat.len();
    let mean_of = |keep: &dyn Fn(&RunRecord) -> bool| {
        let all = mine.iter().filter(|r| keep(r)).count();
        let passed = mine.iter().filter(|r| keep(r) && r.pass).count();
        (passed as f64 / repeats as f64, all / repeats)
    };
    Some(Summary {
        tasks: mine.len() / repeats,
        repeats,
        mean: mine.iter().filter(|r| r.pass).count() as f64 / repeats as f64,
        min: per_repeat.values().copied().min().unwrap_or(0),
        max: per_repeat.values().copied().max().unwrap_or(0),
        tool: mean_of(&|r| r.kind == "tool"),
        plain: mean_of(&|r| r.kind == "tool" && r.plain_words),
        none: mean_of(&|r| r.kind == "none"),
        seconds: mine.iter().map(|r| r.seconds).sum::<f64>() / mine.len() as f64,
    })
}

/// `12.3/14` style: a mean with one decimal unless whole.
fn mean(value: f64, of: usize) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}/{of}")
    } else {
        format!("{value:.1}/{of}")
    }
}

/// The table header.
fn header() -> String {
    "| model | column | sampling | passed (mean) | spread | tool tasks | plain words | no-tool | s/run | repeats | result file |\n\
     |---|---|---|---|---|---|---|---|---|---|---|\n"
        .to_owned()
}

/// The table rows of one result file, one per column, citing `name`.
fn rows(file: &ResultFile, name: &str) -> String {
    let mut out = String::new();
    for column in &file.columns {
        let Some(s) = summarise(&file.runs, column) else {
            continue;
        };
        let cut = if s.tasks < file.tasks.len() {
            format!(" (cut at {} of {} tasks)", s.tasks, file.tasks.len())
        } else {
            String::new()
        };
        out.push_str(&format!(
            "| {} | {column} | {} | {}{cut} | {}-{} | {} | {} | {} | {:.0} | {} | `{name}` |\n",
            file.model,
            file.sampling,
            mean(s.mean, s.tasks),
            s.min,
            s.max,
            mean(s.tool.0, s.tool.1),
            mean(s.plain.0, s.plain.1),
            mean(s.none.0, s.none.1),
            s.seconds,
            s.repeats,
        ));
    }
    out
}

/// The table of one result file, for the console.
pub(super) fn table(file: &ResultFile, name: &str) -> String {
    header() + &rows(file, name)
}

/// Writes `file` as `<dir>/<model>-<sampling>-<stamp>.json`; returns its path.
pub(super) fn write(dir: &Path, file: &ResultFile) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let sampling = file.sampling.replace(' ', "-");
    let path = dir.join(format!("{}-{sampling}-{}.json", file.model, file.started));
    rewrite(&path, file)?;
    Ok(path)
}

/// Writes `file` to `path`.
pub(super) fn rewrite(path: &Path, file: &ResultFile) -> Result<()> {
    let mut text = serde_json::to_string_pretty(file)?;
    text.push('\n');
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

/// Every result file in `docs/eval/`, in name order.
pub(super) fn result_files(root: &Path) -> Result<Vec<PathBuf>> {
    let dir = root.join(RESULTS_DIR);
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let mut paths: Vec<PathBuf> = fs::read_dir(&dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    Ok(paths)
}

/// The table of every result file in `docs/eval/`.
fn committed_table(root: &Path) -> Result<String> {
    let mut out = header();
    for path in result_files(root)? {
        let text = fs::read_to_string(&path)?;
        let file: ResultFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        out.push_str(&rows(&file, &format!("{RESULTS_DIR}/{name}")));
    }
    Ok(out)
}

/// `doc` with the text between the markers replaced by `table`.
fn splice(doc: &str, table: &str) -> Result<String> {
    let (head, rest) = doc.split_once(START).context("no table start marker")?;
    let (_, tail) = rest.split_once(END).context("no table end marker")?;
    Ok(format!("{head}{START}\n{table}{END}{tail}"))
}

/// `cargo xtask eval --table`: regenerates the table in `docs/tool-calling.md`.
pub(super) fn regenerate(root: &Path) -> Result<()> {
    let path = root.join(DOC);
    let doc = fs::read_to_string(&path)?;
    let table = committed_table(root)?;
    let new = splice(&doc, &table)?;
    if new == doc {
        println!("{DOC}: the table is up to date");
    } else {
        fs::write(&path, new)?;
        println!("{DOC}: table regenerated from {RESULTS_DIR}/");
    }
    print!("{table}");
    Ok(())
}

/// Fails when the doc's table is not what the committed files give.
#[cfg(test)]
pub(super) fn check_doc(root: &Path) -> Result<()> {
    let doc = fs::read_to_string(root.join(DOC))?;
    if splice(&doc, &committed_table(root)?)? != doc {
        anyhow::bail!("{DOC}'s eval table is stale: run `cargo xtask eval --table`");
    }
    Ok(())
}

/// `2026-11-22T18-30-05Z` (no colons, so it is a portable file name).
pub(super) fn utc_stamp(now: SystemTime) -> String {
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
    use std::time::Duration;

    fn record(task: &str, kind: &str, plain: bool, repeat: usize, pass: bool) -> RunRecord {
        RunRecord {
            task: task.into(),
            kind: kind.into(),
            plain_words: plain,
            column: "auto".into(),
            repeat,
            pass,
            failures: Vec::new(),
            finish: Some("stop".into()),
            exit_code: Some(0),
            calls_made: 0,
            calls_run: 0,
            calls: Vec::new(),
            seconds: 2.0,
            turns: 1,
            tokens: 0,
            answer: String::new(),
        }
    }

    #[test]
    fn mean_and_spread_are_over_repeats() {
        // Repeat 0 passes 2 of 3, repeat 1 passes 1 of 3.
        let runs = [
            record("a", "tool", true, 0, true),
            record("b", "tool", false, 0, true),
            record("c", "none", false, 0, false),
            record("a", "tool", true, 1, false),
            record("b", "tool", false, 1, true),
            record("c", "none", false, 1, false),
        ];
        let s = summarise(&runs, "auto").unwrap();
        assert_eq!(
            s,
            Summary {
                tasks: 3,
                repeats: 2,
                mean: 1.5,
                min: 1,
                max: 2,
                tool: (1.5, 2),
                plain: (0.5, 1),
                none: (0.0, 1),
                seconds: 2.0,
            }
        );
        assert_eq!(summarise(&runs, "plain"), None);
        // A third repeat cut short after one task is left out.
        let mut cut = runs.to_vec();
        cut.push(record("a", "tool", true, 2, false));
        assert_eq!(summarise(&cut, "auto"), Some(s));
        assert_eq!(mean(1.5, 3), "1.5/3");
        assert_eq!(mean(2.0, 3), "2/3");
    }

    #[test]
    fn the_table_splices_between_the_markers_only() {
        let doc = format!("before\n{START}\nold\n{END}\nafter\n");
        assert_eq!(
            splice(&doc, "new\n").unwrap(),
            format!("before\n{START}\nnew\n{END}\nafter\n")
        );
        assert!(splice("no markers", "x").is_err());
    }

    #[test]
    fn the_committed_table_is_generated_from_the_committed_results() {
        check_doc(&crate::workspace_root()).unwrap();
    }

    #[test]
    fn utc_stamps() {
        let at = |secs| utc_stamp(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00-00-00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00-00-00Z");
        assert_eq!(at(1_795_372_205), "2026-11-22T18-30-05Z");
    }
}
