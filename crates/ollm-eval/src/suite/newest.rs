//! The newest figures: for each model, sampling, column and part (tuning, held-out), the
//! measures of the newest committed result file that has them, as the table of
//! `docs/small-models.md`. The other tables list every file; this one answers "what
//! does ollm do for my model today", and the files keep the history.
//!
//! # Decisions
//!
//! - **Newest by the file's `started` stamp**, then by its name: the stamp is when the
//!   run began, written the same way in every file (`2026-11-26T14-33-55Z`), so it sorts
//!   as text.
//! - **The same files as the columns table** ([`counts`]): the current format only (the
//!   first format's 14 tasks are another eval; its figures stay in the history page),
//!   and no ablation file. The columns table in `docs/tool-calling.md` leaves ablation
//!   files out and shows their baseline `auto` rows only in the ablation table, so here
//!   too an ablation's baseline is not an `auto` figure: it answers what a rule changes,
//!   on the tuning part only.
//! - **Only files that ran a part's whole task set** give its figures: a run on a few
//!   of its tasks (`--tasks`, to measure a rule that acts only there) stays in the
//!   columns table, and its success is over those tasks only.
//! - **Sampling is part of the key**: a run at temperature 0 is not a newer figure of
//!   the default column, whose sampling is what a user of a stock server gets.
//! - **Per part, every measure**: calls and seconds per task too are over that part's
//!   tasks only, so a file run with `--part all` gives two rows per column.
//! - **The spread as `[low..high]`** over repeats whenever there is more than one, even
//!   when both ends are equal: one repeat has no spread, and an equal spread over three
//!   repeats is a finding.

use std::collections::BTreeMap;

use super::measures::{self, Measures, Stat};
use super::results::{FORMAT, ResultFile};

/// Whether a result file's columns are current figures: the current format, no ablation.
pub(super) fn counts(file: &ResultFile) -> bool {
    file.format >= FORMAT && file.ablation.is_empty()
}

/// The parts, in the table's order.
const PARTS: [&str; 2] = ["tuning", "held-out"];

/// Columns in the table's order; any other column follows them, by name.
const COLUMN_ORDER: [&str; 6] = ["plain", "native", "auto", "react", "constrained", "served"];

/// A row's place: model, sampling, the column's rank and name, the part's rank.
type Key = (String, String, usize, String, usize);

/// One row: the measures, and the file they come from with the name the docs cite.
#[derive(Debug)]
pub(super) struct Newest<'a> {
    pub(super) measures: Measures,
    pub(super) file: &'a ResultFile,
    pub(super) name: &'a str,
}

/// The most tasks any of `files` measured of each part: a part's whole task set.
fn whole_parts(files: &[(ResultFile, String)]) -> [usize; 2] {
    let mut most = [0; 2];
    for (file, _) in files.iter().filter(|(f, _)| counts(f)) {
        for column in &file.columns {
            for (rank, part) in PARTS.iter().enumerate() {
                if let Some(m) = measures::measure(&file.runs, column, Some(part)) {
                    most[rank] = most[rank].max(m.tasks);
                }
            }
        }
    }
    most
}

/// The newest measures for each model, sampling, column and part among `files`, over
/// the part's whole task set: a file run on some of its tasks (`--tasks`) measured a
/// change there, not what the column does on the part.
pub(super) fn select(files: &[(ResultFile, String)]) -> BTreeMap<Key, Newest<'_>> {
    let whole = whole_parts(files);
    let mut out: BTreeMap<Key, Newest<'_>> = BTreeMap::new();
    for (file, name) in files.iter().filter(|(f, _)| counts(f)) {
        for column in &file.columns {
            for (rank, part) in PARTS.iter().enumerate() {
                let Some(m) = measures::measure(&file.runs, column, Some(part)) else {
                    continue;
                };
                if m.tasks < whole[rank] {
                    continue;
                }
                let key = (
                    file.model.clone(),
                    file.sampling.clone(),
                    column_rank(column),
                    column.clone(),
                    rank,
                );
                let newer = out.get(&key).is_none_or(|old| {
                    (file.started.as_str(), name.as_str()) > (old.file.started.as_str(), old.name)
                });
                if newer {
                    let row = Newest {
                        measures: m,
                        file,
                        name,
                    };
                    out.insert(key, row);
                }
            }
        }
    }
    out
}

/// Where `column` goes among the columns.
fn column_rank(column: &str) -> usize {
    COLUMN_ORDER
        .iter()
        .position(|c| *c == column)
        .unwrap_or(COLUMN_ORDER.len())
}

/// The table: a header, then one row per model, sampling, column and part.
pub(super) fn table(files: &[(ResultFile, String)]) -> String {
    let mut out = "| model | sampling | column | part | success | restraint | unasked | \
                   calls/task | s/task | repeats | result file |\n\
                   |---|---|---|---|---|---|---|---|---|---|---|\n"
        .to_owned();
    for ((model, sampling, _, column, part), row) in select(files) {
        let m = &row.measures;
        let cell = |stat: Stat, of: Option<usize>| spread(stat, of, m.repeats);
        let restraint = if m.none_tasks == 0 {
            "—".to_owned()
        } else {
            cell(m.restraint, Some(m.none_tasks))
        };
        let file = row.name.rsplit('/').next().unwrap_or(row.name);
        // The table lives in docs/, the files in docs/eval/.
        let link = row.name.strip_prefix("docs/").unwrap_or(row.name);
        out.push_str(&format!(
            "| {model} | {sampling} | {column} | {} | {} | {restraint} | {} | {} | {} | {} | [{file}]({link}) |\n",
            PARTS[part],
            cell(m.success, Some(m.tasks)),
            cell(m.unasked, None),
            cell(m.calls, None),
            cell(measures::round(m.seconds), None),
            m.repeats,
        ));
    }
    out
}

/// `15.5/54 [14..17]` over several repeats, `16/54` over one; `2 [1..3]` without `of`.
fn spread(stat: Stat, of: Option<usize>, repeats: usize) -> String {
    let of = of.map_or_else(String::new, |n| format!("/{n}"));
    let mean = measures::number(stat.mean);
    if repeats < 2 {
        return format!("{mean}{of}");
    }
    format!(
        "{mean}{of} [{}..{}]",
        measures::number(stat.min),
        measures::number(stat.max)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::results::RunRecord;

    /// A run of `column` on a `kind` task of `part`, in `repeat`, passing or not.
    fn run(column: &str, part: &str, kind: &str, repeat: usize, pass: bool) -> RunRecord {
        RunRecord {
            task: format!("{part}-{kind}"),
            kind: kind.into(),
            part: part.into(),
            column: column.into(),
            repeat,
            pass,
            seconds: 10.0,
            ..RunRecord::default()
        }
    }

    /// A current-format file of model `m` at default sampling, started at `started`,
    /// with one tool task per part in `parts`, passed in every repeat when `pass`.
    fn file(started: &str, columns: &[&str], parts: &[&str], pass: bool) -> ResultFile {
        let mut runs = Vec::new();
        for column in columns {
            for part in parts {
                runs.push(run(column, part, "tool", 0, pass));
            }
        }
        ResultFile {
            format: FORMAT,
            model: "m".into(),
            sampling: "default".into(),
            started: started.into(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            runs,
            ..ResultFile::default()
        }
    }

    /// The file each (column, part) row comes from.
    fn check(files: Vec<(ResultFile, String)>, expected: &[(&str, &str, &str)]) {
        let got: Vec<(String, String, String)> = select(&files)
            .into_iter()
            .map(|((_, _, _, column, part), row)| {
                (column, PARTS[part].to_owned(), row.name.to_owned())
            })
            .collect();
        let expected: Vec<(String, String, String)> = expected
            .iter()
            .map(|(c, p, n)| (c.to_string(), p.to_string(), n.to_string()))
            .collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn the_newest_file_wins_per_column_and_part() {
        let all = file(
            "2026-11-26T10-00-00Z",
            &["plain", "auto"],
            &["tuning", "held-out"],
            false,
        );
        let tuning = file("2026-11-26T12-00-00Z", &["auto"], &["tuning"], true);
        let mut ablation = file("2026-11-26T13-00-00Z", &["auto"], &["tuning"], true);
        ablation.ablation = vec!["tool-or-none".into()];
        let mut legacy = file("2026-11-26T14-00-00Z", &["auto"], &["tuning"], true);
        legacy.format = 0;
        let mut cold = file("2026-11-26T15-00-00Z", &["auto"], &["held-out"], true);
        cold.sampling = "temperature 0".into();
        // Named out of time order: the stamp decides, not the name.
        let files = vec![
            (tuning, "docs/eval/a-tuning.json".into()),
            (all, "docs/eval/b-all.json".into()),
            (ablation, "docs/eval/c-ablation.json".into()),
            (legacy, "docs/eval/d-legacy.json".into()),
            (cold, "docs/eval/e-cold.json".into()),
        ];
        check(
            files,
            &[
                ("plain", "tuning", "docs/eval/b-all.json"),
                ("plain", "held-out", "docs/eval/b-all.json"),
                ("auto", "tuning", "docs/eval/a-tuning.json"),
                ("auto", "held-out", "docs/eval/b-all.json"),
                ("auto", "held-out", "docs/eval/e-cold.json"),
            ],
        );
    }

    #[test]
    fn a_file_run_on_some_of_a_parts_tasks_gives_no_figure_of_the_part() {
        let mut whole = file("2026-11-26T10-00-00Z", &["auto"], &["tuning"], true);
        let mut second = whole.runs[0].clone();
        second.task = "another.casual".into();
        whole.runs.push(second);
        let some = file(
            "2026-11-26T12-00-00Z",
            &["auto", "plain"],
            &["tuning"],
            true,
        );
        let files = vec![(whole, "whole".into()), (some, "some".into())];
        check(files, &[("auto", "tuning", "whole")]);
    }

    #[test]
    fn columns_follow_plain_native_auto_then_the_rest_by_name() {
        let f = file(
            "s",
            &[
                "served-with-tool-or-none",
                "auto",
                "served",
                "plain",
                "native",
            ],
            &["tuning"],
            true,
        );
        check(
            vec![(f, "f".into())],
            &[
                ("plain", "tuning", "f"),
                ("native", "tuning", "f"),
                ("auto", "tuning", "f"),
                ("served", "tuning", "f"),
                ("served-with-tool-or-none", "tuning", "f"),
            ],
        );
    }

    #[test]
    fn rows_give_each_part_its_own_measures_and_a_spread_over_repeats() {
        let mut f = file("s", &["auto"], &[], true);
        for repeat in 0..3 {
            f.runs
                .push(run("auto", "tuning", "tool", repeat, repeat > 0));
            let mut none = run("auto", "tuning", "none", repeat, true);
            none.calls_made = repeat;
            f.runs.push(none);
            f.runs.push(run("auto", "held-out", "tool", repeat, true));
        }
        assert_eq!(
            table(&[(f, "docs/eval/f.json".into())]),
            "| model | sampling | column | part | success | restraint | unasked | calls/task | s/task | repeats | result file |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n\
             | m | default | auto | tuning | 1.7/2 [1..2] | 0.3/1 [0..1] | 0 [0..0] | 0.5 [0..1] | 10 [10..10] | 3 | [f.json](eval/f.json) |\n\
             | m | default | auto | held-out | 1/1 [1..1] | — | 0 [0..0] | 0 [0..0] | 10 [10..10] | 3 | [f.json](eval/f.json) |\n"
        );
    }

    #[test]
    fn one_repeat_has_no_spread() {
        let stat = Stat {
            mean: 16.0,
            min: 16.0,
            max: 16.0,
        };
        assert_eq!(spread(stat, Some(54), 1), "16/54");
        assert_eq!(spread(stat, None, 3), "16 [16..16]");
    }
}
