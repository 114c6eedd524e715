//! The measures of a result file, each a mean over repeats with its spread, and the
//! tables built from them: one row per column with both parts side by side, and the
//! ablation table (each coach rule switched off against the baseline).
//!
//! # Decisions
//!
//! - **Five measures** (issue 35): *success* (tasks passed), *restraint* (no-tool tasks
//!   answered without any call, run or not), *unasked* (runs with a write, a command or
//!   a change to the folder nobody asked for), *calls per task* (calls made) and
//!   *seconds per task*. The first three are counts per repeat, the last two means per
//!   repeat.
//! - **Mean and spread over repeats**: a repeat is one pass over the tasks; a measure's
//!   figure is the mean of its per-repeat values, its spread the lowest and highest.
//!   Only complete repeats count (a repeat `--budget` cut short would skew the spread).
//! - **A change's spread is conservative**: repeats of two columns are independent, so
//!   there is no pairing; the change in a measure runs from the lowest value switched off
//!   minus the highest baseline to the highest minus the lowest. A change whose spread
//!   holds 0 is not resolved by the run.
//! - **A rule off run alone is still an ablation.** `--ablate` runs its own baseline, which
//!   costs a pass; a column `auto-without-RULE` run by itself is measured against the
//!   `auto` runs of the other files of the same model, part, sampling and ollm build (a
//!   different build is a different baseline), each file's repeats counted apart, and the
//!   row names those files.

use std::collections::{BTreeMap, BTreeSet};

use super::context::WITHOUT;
use super::results::{FORMAT, ResultFile, RunRecord};

/// A figure over repeats.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Stat {
    pub(super) mean: f64,
    pub(super) min: f64,
    pub(super) max: f64,
}

impl Stat {
    /// The mean and spread of `values`; `None` when empty.
    fn of(values: &[f64]) -> Option<Stat> {
        let min = values.iter().copied().reduce(f64::min)?;
        let max = values.iter().copied().reduce(f64::max)?;
        Some(Stat {
            mean: values.iter().sum::<f64>() / values.len() as f64,
            min,
            max,
        })
    }

    /// `off` minus `self`, with the conservative spread of the module docs.
    pub(super) fn change_to(&self, off: &Stat) -> Stat {
        Stat {
            mean: off.mean - self.mean,
            min: off.min - self.max,
            max: off.max - self.min,
        }
    }
}

/// A column's measures over its complete repeats.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Measures {
    pub(super) repeats: usize,
    /// Tasks per repeat, and of them the no-tool ones.
    pub(super) tasks: usize,
    pub(super) none_tasks: usize,
    pub(super) success: Stat,
    pub(super) restraint: Stat,
    pub(super) unasked: Stat,
    pub(super) calls: Stat,
    pub(super) seconds: Stat,
}

/// `column`'s measures from `runs`, over the tasks of `part` (every part when `None`),
/// from its complete repeats; `None` when it has none there.
pub(super) fn measure(runs: &[RunRecord], column: &str, part: Option<&str>) -> Option<Measures> {
    let mut size: BTreeMap<usize, usize> = BTreeMap::new();
    for r in runs.iter().filter(|r| r.column == column) {
        *size.entry(r.repeat).or_default() += 1;
    }
    let whole = size.values().copied().max()?;
    let mut by_repeat: BTreeMap<usize, Vec<&RunRecord>> = BTreeMap::new();
    for r in runs.iter().filter(|r| {
        r.column == column
            && size.get(&r.repeat) == Some(&whole)
            && part.is_none_or(|p| r.part == p)
    }) {
        by_repeat.entry(r.repeat).or_default().push(r);
    }
    let repeats: Vec<&Vec<&RunRecord>> = by_repeat.values().collect();
    let first = repeats.first()?;
    let per = |f: &dyn Fn(&[&RunRecord]) -> f64| -> Option<Stat> {
        Stat::of(&repeats.iter().map(|runs| f(runs)).collect::<Vec<_>>())
    };
    let count = |keep: fn(&RunRecord) -> bool| {
        move |runs: &[&RunRecord]| runs.iter().filter(|r| keep(r)).count() as f64
    };
    let mean = |value: fn(&RunRecord) -> f64| {
        move |runs: &[&RunRecord]| runs.iter().map(|r| value(r)).sum::<f64>() / runs.len() as f64
    };
    Some(Measures {
        repeats: repeats.len(),
        tasks: first.len(),
        none_tasks: first.iter().filter(|r| r.kind == "none").count(),
        success: per(&count(|r| r.pass))?,
        restraint: per(&count(|r| r.kind == "none" && r.calls_made == 0))?,
        unasked: per(&count(|r| !r.unasked.is_empty()))?,
        calls: per(&mean(|r| r.calls_made as f64))?,
        seconds: per(&mean(|r| r.seconds))?,
    })
}

/// A number with one decimal unless whole.
pub(super) fn number(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{value:.0}")
    } else {
        format!("{value:.1}")
    }
}

/// `31.5/54 (30-33)`, or `2 (1-3)` without `of`.
fn cell(stat: &Stat, of: Option<usize>) -> String {
    let of = of.map_or_else(String::new, |n| format!("/{n}"));
    if stat.min == stat.max {
        return format!("{}{of}", number(stat.mean));
    }
    format!(
        "{}{of} ({}-{})",
        number(stat.mean),
        number(stat.min),
        number(stat.max)
    )
}

/// The restraint cell: `—` where the part has no no-tool task.
fn restraint(m: &Measures) -> String {
    if m.none_tasks == 0 {
        return "—".into();
    }
    cell(&m.restraint, Some(m.none_tasks))
}

/// A change with its sign: `+1.5 (-1..+4)`.
fn change(stat: &Stat) -> String {
    let signed = |v: f64| {
        if v > 0.0 {
            format!("+{}", number(v))
        } else {
            number(v)
        }
    };
    format!(
        "{} ({}..{})",
        signed(stat.mean),
        signed(stat.min),
        signed(stat.max)
    )
}

/// The header of the columns table.
pub(super) fn header() -> String {
    "| model | column | sampling | success, tuning | success, held-out | restraint, tuning | \
     restraint, held-out | unasked, tuning | unasked, held-out | calls/task | s/task | \
     repeats | result file |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        .to_owned()
}

/// The rows of one result file, one per column, both parts side by side, citing `name`.
pub(super) fn rows(file: &ResultFile, name: &str) -> String {
    let mut out = String::new();
    for column in &file.columns {
        let Some(all) = measure(&file.runs, column, None) else {
            continue;
        };
        let parts = ["tuning", "held-out"].map(|p| measure(&file.runs, column, Some(p)));
        let each = |f: &dyn Fn(&Measures) -> String| {
            parts
                .each_ref()
                .map(|m| m.as_ref().map_or_else(|| "—".to_owned(), f))
        };
        let [s1, s2] = each(&|m| cell(&m.success, Some(m.tasks)));
        let [r1, r2] = each(&|m| restraint(m));
        let [u1, u2] = each(&|m| cell(&m.unasked, None));
        out.push_str(&format!(
            "| {} | {column} | {} | {s1} | {s2} | {r1} | {r2} | {u1} | {u2} | {} | {} | {} | `{name}` |\n",
            file.model,
            file.sampling,
            cell(&all.calls, None),
            cell(&round(all.seconds), None),
            all.repeats,
        ));
    }
    out
}

/// Seconds to whole numbers: their spread is wide and tenths are noise.
pub(super) fn round(s: Stat) -> Stat {
    Stat {
        mean: s.mean.round(),
        min: s.min.round(),
        max: s.max.round(),
    }
}

/// The baseline column of an ablation.
pub(super) const BASELINE: &str = "auto";

/// The header of the ablation table.
pub(super) fn ablation_header() -> String {
    "| model | rule off | acts in | part | success | change | restraint | change | unasked | \
     change | calls/task | repeats | result file |\n\
     |---|---|---|---|---|---|---|---|---|---|---|---|---|\n"
        .to_owned()
}

/// The ablation table from every committed file of the current format: an ablation
/// file's rules against its own baseline; a column with a rule off run alone, in a file
/// without a baseline, against [`pooled_baseline`].
pub(super) fn ablation_table(files: &[(ResultFile, String)]) -> String {
    let mut out = ablation_header();
    for (file, name) in files.iter().filter(|(f, _)| f.format >= FORMAT) {
        if !file.ablation.is_empty() {
            out.push_str(&ablation_rows(file, name));
        } else if file.columns.iter().any(|c| c.starts_with(WITHOUT)) {
            let (base, base_names) = pooled_baseline(file, files);
            let rules: Vec<String> = file
                .columns
                .iter()
                .filter_map(|c| c.strip_prefix(WITHOUT).map(str::to_owned))
                .collect();
            let names = Names {
                base: &base_names.join("`, `"),
                off: name,
            };
            out.push_str(&rows_against(file, &rules, &base, names));
        }
    }
    out
}

/// The baseline of a rule switched off alone in `file`: the `auto` runs of every other
/// file with the same model, part, sampling and ollm build (a different build is a
/// different baseline), each file's repeats counted apart; with the names of those files.
fn pooled_baseline(
    file: &ResultFile,
    files: &[(ResultFile, String)],
) -> (Vec<RunRecord>, Vec<String>) {
    let same = |f: &ResultFile| {
        f.format >= FORMAT
            && f.ablation.is_empty()
            && (&f.model, &f.part, &f.sampling, &f.ollm)
                == (&file.model, &file.part, &file.sampling, &file.ollm)
    };
    let mut runs: Vec<RunRecord> = Vec::new();
    let mut names = Vec::new();
    for (f, name) in files.iter().filter(|(f, _)| same(f)) {
        let offset = runs.iter().map(|r| r.repeat + 1).max().unwrap_or(0);
        let before = runs.len();
        runs.extend(
            f.runs
                .iter()
                .filter(|r| r.column == BASELINE)
                .map(|r| RunRecord {
                    repeat: r.repeat + offset,
                    ..r.clone()
                }),
        );
        if runs.len() > before {
            names.push(name.clone());
        }
    }
    (runs, names)
}

/// The ablation rows of one result file: the baseline, then each rule switched off with
/// its change against the baseline; nothing without a baseline.
pub(super) fn ablation_rows(file: &ResultFile, name: &str) -> String {
    let base: Vec<RunRecord> = file
        .runs
        .iter()
        .filter(|r| r.column == BASELINE)
        .cloned()
        .collect();
    if base.is_empty() {
        return String::new();
    }
    rows_against(
        file,
        &file.ablation,
        &base,
        Names {
            base: name,
            off: name,
        },
    )
}

/// The result files an ablation row cites: the baseline's, and the one with the rules off.
#[derive(Clone, Copy)]
struct Names<'a> {
    base: &'a str,
    off: &'a str,
}

/// In how many of the baseline's runs `rule` acted: `12/54`; `—` when the baseline's
/// runs recorded no rule at all (files from before the eval recorded them).
fn acts_in(base: &[RunRecord], rule: &str) -> String {
    if base.iter().all(|r| r.coached.is_empty()) {
        return "—".to_owned();
    }
    let acted = base.iter().filter(|r| r.coached.contains_key(rule)).count();
    format!("{acted}/{}", base.len())
}

/// The runs of `base` on the tasks `column` ran in `runs`.
fn same_tasks(base: &[RunRecord], runs: &[RunRecord], column: &str) -> Vec<RunRecord> {
    let ran: BTreeSet<&str> = runs
        .iter()
        .filter(|r| r.column == column)
        .map(|r| r.task.as_str())
        .collect();
    base.iter()
        .filter(|r| ran.contains(r.task.as_str()))
        .cloned()
        .collect()
}

/// The baseline row (when there are `base` runs), then a row per rule of `rules` that
/// `file` ran switched off, with its change against the baseline and how often it acted
/// there: a rule that never acts cannot show a change.
fn rows_against(file: &ResultFile, rules: &[String], base: &[RunRecord], names: Names) -> String {
    let measured = measure(base, BASELINE, None);
    let row = |rule: &str, acts: &str, m: &Measures, base: Option<&Measures>, name: &str| {
        let delta = |f: fn(&Measures) -> Stat| {
            base.map_or_else(|| "—".to_owned(), |b| change(&f(b).change_to(&f(m))))
        };
        format!(
            "| {} | {rule} | {acts} | {} | {} | {} | {} | {} | {} | {} | {} | {} | `{name}` |\n",
            file.model,
            file.part,
            cell(&m.success, Some(m.tasks)),
            delta(|m| m.success),
            restraint(m),
            delta(|m| m.restraint),
            cell(&m.unasked, None),
            delta(|m| m.unasked),
            cell(&m.calls, None),
            m.repeats,
        )
    };
    let mut out = measured.as_ref().map_or_else(String::new, |b| {
        row("none (baseline)", "", b, None, names.base)
    });
    for rule in rules {
        let column = format!("{WITHOUT}{rule}");
        let Some(m) = measure(&file.runs, &column, None) else {
            continue;
        };
        if let Some(all) = measured
            .as_ref()
            .map(|b| b.tasks)
            .filter(|&all| m.tasks < all)
        {
            // Cut short by `--budget`: against the baseline's runs of the same tasks.
            let same = same_tasks(base, &file.runs, &column);
            let label = format!("{rule} (cut short: {} of {all} tasks)", m.tasks);
            let b = measure(&same, BASELINE, None);
            out.push_str(&row(
                &label,
                &acts_in(&same, rule),
                &m,
                b.as_ref(),
                names.off,
            ));
            continue;
        }
        let acts = acts_in(base, rule);
        out.push_str(&row(rule, &acts, &m, measured.as_ref(), names.off));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of `column`, `part` and `repeat`, passing or not, with `calls` made and
    /// an unasked write when `unasked`.
    fn record(column: &str, part: &str, kind: &str, repeat: usize, pass: bool) -> RunRecord {
        RunRecord {
            task: format!("{kind}-task"),
            kind: kind.into(),
            plain_words: true,
            part: part.into(),
            workspace: "w".into(),
            column: column.into(),
            repeat,
            pass,
            failures: Vec::new(),
            unasked: Vec::new(),
            finish: Some("stop".into()),
            exit_code: Some(0),
            calls_made: 0,
            calls_run: 0,
            calls: Vec::new(),
            changed: BTreeMap::new(),
            seconds: 10.0,
            turns: 1,
            tokens: 0,
            answer: String::new(),
            coached: BTreeMap::new(),
        }
    }

    fn stat(mean: f64, min: f64, max: f64) -> Stat {
        Stat { mean, min, max }
    }

    /// Two repeats of one column: a tool task and two no-tool tasks per repeat, in the
    /// tuning part; repeat 0 passes all and calls nothing, repeat 1 calls on one no-tool
    /// task (an unasked write) and fails it.
    fn two_repeats(column: &str) -> Vec<RunRecord> {
        let mut runs = Vec::new();
        for repeat in 0..2 {
            let mut tool = record(column, "tuning", "tool", repeat, true);
            tool.calls_made = 2;
            tool.seconds = 20.0;
            runs.push(tool);
            runs.push(record(column, "tuning", "none", repeat, true));
            let mut none = record(column, "tuning", "none", repeat, repeat == 0);
            if repeat == 1 {
                none.calls_made = 1;
                none.unasked = vec!["write_file {}".into()];
            }
            runs.push(none);
        }
        runs
    }

    #[test]
    fn every_measure_is_a_mean_over_repeats_with_its_spread() {
        let runs = two_repeats("auto");
        let m = measure(&runs, "auto", None).unwrap();
        assert_eq!(
            m,
            Measures {
                repeats: 2,
                tasks: 3,
                none_tasks: 2,
                success: stat(2.5, 2.0, 3.0),
                restraint: stat(1.5, 1.0, 2.0),
                unasked: stat(0.5, 0.0, 1.0),
                calls: stat((2.0 / 3.0 + 1.0) / 2.0, 2.0 / 3.0, 1.0),
                seconds: stat(40.0 / 3.0, 40.0 / 3.0, 40.0 / 3.0),
            }
        );
        assert_eq!(measure(&runs, "auto", Some("held-out")), None);
        assert_eq!(measure(&runs, "plain", None), None);
    }

    #[test]
    fn a_repeat_cut_short_is_left_out() {
        let mut runs = two_repeats("auto");
        let whole = measure(&runs, "auto", None);
        runs.push(record("auto", "tuning", "tool", 2, false));
        assert_eq!(measure(&runs, "auto", None), whole);
    }

    #[test]
    fn parts_are_measured_apart_within_complete_repeats() {
        let mut runs = two_repeats("auto");
        runs.push(record("auto", "held-out", "tool", 0, false));
        runs.push(record("auto", "held-out", "tool", 1, true));
        let held_out = measure(&runs, "auto", Some("held-out")).unwrap();
        assert_eq!((held_out.tasks, held_out.success), (1, stat(0.5, 0.0, 1.0)));
        assert_eq!(measure(&runs, "auto", Some("tuning")).unwrap().tasks, 3);
    }

    #[test]
    fn a_change_spans_every_pairing_of_repeats() {
        let base = stat(30.0, 29.0, 31.0);
        assert_eq!(
            base.change_to(&stat(26.5, 25.0, 28.0)),
            stat(-3.5, -6.0, -1.0)
        );
        assert_eq!(change(&stat(-3.5, -6.0, -1.0)), "-3.5 (-6..-1)");
        assert_eq!(change(&stat(1.0, -1.0, 3.0)), "+1 (-1..+3)");
        assert_eq!(cell(&stat(31.5, 30.0, 33.0), Some(54)), "31.5/54 (30-33)");
        assert_eq!(cell(&stat(2.0, 2.0, 2.0), None), "2");
    }

    /// A synthetic ablation file: the baseline as [`two_repeats`], `answer-nudge` off
    /// passing every task, `all` off with the second repeat cut short.
    fn ablation_file() -> ResultFile {
        let mut runs = two_repeats(BASELINE);
        // The answer nudge acted in the first run of each baseline repeat.
        for (i, r) in runs.iter_mut().enumerate() {
            let rule = if i % 3 == 0 { "answer-nudge" } else { "other" };
            r.coached.insert(rule.into(), 1);
        }
        for mut r in two_repeats("auto-without-answer-nudge") {
            r.pass = true;
            runs.push(r);
        }
        runs.extend(two_repeats("auto-without-all").into_iter().take(4));
        ResultFile {
            model: "m".into(),
            part: "tuning".into(),
            ablation: vec!["answer-nudge".into(), "all".into(), "unrun".into()],
            columns: vec![BASELINE.into()],
            runs,
            ..ResultFile::default()
        }
    }

    #[test]
    fn the_ablation_reports_each_rule_against_the_baseline() {
        let rows = ablation_rows(&ablation_file(), "f.json");
        let lines: Vec<&str> = rows.lines().collect();
        assert_eq!(
            lines,
            [
                "| m | none (baseline) |  | tuning | 2.5/3 (2-3) | — | 1.5/2 (1-2) | — | 0.5 (0-1) | — | 0.8 (0.7-1) | 2 | `f.json` |",
                "| m | answer-nudge | 2/6 | tuning | 3/3 | +0.5 (0..+1) | 1.5/2 (1-2) | 0 (-1..+1) | 0.5 (0-1) | 0 (-1..+1) | 0.8 (0.7-1) | 2 | `f.json` |",
                "| m | all | 0/6 | tuning | 3/3 | +0.5 (0..+1) | 2/2 | +0.5 (0..+1) | 0 | -0.5 (-1..0) | 0.7 | 1 | `f.json` |",
            ]
        );
    }

    #[test]
    fn a_rule_cut_short_is_measured_against_the_baseline_on_its_own_tasks() {
        let mut runs = two_repeats(BASELINE);
        // The first task (a tool task, passed in both repeats) ran with `x` off, failing.
        runs.push(record("auto-without-x", "tuning", "tool", 0, false));
        let file = ResultFile {
            model: "m".into(),
            part: "tuning".into(),
            ablation: vec!["x".into()],
            runs,
            ..ResultFile::default()
        };
        let rows = ablation_rows(&file, "f.json");
        let cut = rows.lines().nth(1).expect("the rule's row");
        assert_eq!(
            cut,
            "| m | x (cut short: 1 of 3 tasks) | — | tuning | 0/1 | -1 (-1..-1) | — | 0 (0..0) | 0 | 0 (0..0) | 0 | 1 | `f.json` |"
        );
    }

    /// A file of the current format with `runs` of `columns`, made by the ollm `build`.
    fn alone(build: &str, columns: &[&str], runs: Vec<RunRecord>) -> ResultFile {
        ResultFile {
            format: FORMAT,
            model: "m".into(),
            part: "tuning".into(),
            ollm: build.into(),
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            runs,
            ..ResultFile::default()
        }
    }

    #[test]
    fn a_rule_off_alone_is_measured_against_the_same_builds_auto_runs() {
        let base =
            |repeat: usize, pass: bool| vec![record(BASELINE, "tuning", "tool", repeat, pass)];
        let off = vec![record("auto-without-x", "tuning", "tool", 0, false)];
        let files = [
            (alone("b1", &[BASELINE], base(0, true)), "a.json".to_owned()),
            (
                alone("b1", &[BASELINE], base(0, false)),
                "b.json".to_owned(),
            ),
            (
                alone("b2", &[BASELINE], base(0, true)),
                "other-build.json".to_owned(),
            ),
            (
                alone("b1", &["auto-without-x"], off.clone()),
                "off.json".to_owned(),
            ),
            (
                alone("b3", &["auto-without-x"], off),
                "no-base.json".to_owned(),
            ),
        ];
        let lines: Vec<String> = ablation_table(&files)
            .lines()
            .skip(2)
            .map(str::to_owned)
            .collect();
        assert_eq!(
            lines,
            [
                "| m | none (baseline) |  | tuning | 0.5/1 (0-1) | — | — | — | 0 | — | 0 | 2 | `a.json`, `b.json` |",
                "| m | x | — | tuning | 0/1 | -0.5 (-1..0) | — | 0 (0..0) | 0 | 0 (0..0) | 0 | 1 | `off.json` |",
                "| m | x | — | tuning | 0/1 | — | — | — | 0 | — | 0 | 1 | `no-base.json` |",
            ]
        );
    }

    #[test]
    fn the_columns_table_shows_both_parts_side_by_side() {
        let mut runs = two_repeats("auto");
        runs.push(record("auto", "held-out", "tool", 0, false));
        runs.push(record("auto", "held-out", "tool", 1, true));
        let file = ResultFile {
            model: "m".into(),
            sampling: "default".into(),
            columns: vec!["auto".into(), "plain".into()],
            runs,
            ..ResultFile::default()
        };
        assert_eq!(
            rows(&file, "f.json"),
            "| m | auto | default | 2.5/3 (2-3) | 0.5/1 (0-1) | 1.5/2 (1-2) | — | 0.5 (0-1) | 0 | 0.6 (0.5-0.8) | 13 | 2 | `f.json` |\n"
        );
    }
}
