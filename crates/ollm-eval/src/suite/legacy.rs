//! The table of the eval's first format (issues 9 and 24: 14 tasks, one workspace, a
//! `plain words` flag), kept so the result files committed before issue 35 still give
//! their figures in `docs/eval/history.md`. New result files go to [`super::measures`].
//!
//! # Decisions
//!
//! - **Frozen**: this code changes only if those files must be read differently.
//! - A column's score is the mean of its repeats' pass counts, its spread the lowest and
//!   highest, over complete repeats.

use std::collections::BTreeMap;

use super::results::{ResultFile, RunRecord};

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
fn summarise(runs: &[RunRecord], column: &str) -> Option<Summary> {
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
pub(super) fn header() -> String {
    "| model | column | sampling | passed (mean) | spread | tool tasks | plain words | no-tool | s/run | repeats | result file |\n\
     |---|---|---|---|---|---|---|---|---|---|---|\n"
        .to_owned()
}

/// The table rows of one result file, one per column, citing `name`.
pub(super) fn rows(file: &ResultFile, name: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn record(task: &str, kind: &str, plain: bool, repeat: usize, pass: bool) -> RunRecord {
        RunRecord {
            task: task.into(),
            kind: kind.into(),
            plain_words: plain,
            column: "auto".into(),
            repeat,
            pass,
            finish: Some("stop".into()),
            exit_code: Some(0),
            seconds: 2.0,
            turns: 1,
            ..RunRecord::default()
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
}
