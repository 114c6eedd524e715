//! Results as data: the result file each eval run writes, and the tables in the docs
//! generated from the committed files.
//!
//! # Decisions
//!
//! - **One JSON file per eval run**, under `docs/eval/` (target/eval/ for `--smoke`, which
//!   CI runs and nobody commits): the model, the server, the ollm build, the sampling,
//!   the part, and per task, column and repeat the pass, the failures, the unasked
//!   actions, the finish, the calls made and run, the files changed, the seconds and the
//!   answer. The docs cite these files; a figure that is not in one is not a figure.
//! - **Each table is generated** from the files in `docs/eval/` by `cargo xtask eval
//!   --table`, between its own markers in the document it belongs to: the first format's
//!   ([`super::legacy`], files without `format`) in the history page
//!   `docs/eval/history.md`; the columns with both parts side by side and the ablations
//!   ([`super::measures`]) in `docs/tool-calling.md`; the newest figures per model,
//!   column and part ([`super::newest`]) in the user page `docs/small-models.md`. A test
//!   fails when a committed table differs from what the committed files give.
//! - **A table names its document**, so lab notes can move out of the user reference
//!   without the generator losing their tables; each document is read and written once
//!   per regeneration, with every table it holds.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use super::results::{FORMAT, ResultFile};
use super::{legacy, measures, newest};

/// Where committed result files live, relative to the workspace root.
pub(super) const RESULTS_DIR: &str = "docs/eval";
/// One of the generated tables: the document it lives in (relative to the workspace
/// root), its markers, and what goes between them.
struct Table {
    doc: &'static str,
    start: &'static str,
    end: &'static str,
    body: Body,
}

/// What a table holds.
enum Body {
    /// A header, then the rows of each file it `holds`, in name order.
    EachFile {
        header: fn() -> String,
        rows: fn(&ResultFile, &str) -> String,
        holds: fn(&ResultFile) -> bool,
    },
    /// A table made from every file at once.
    AllFiles(fn(&[(ResultFile, String)]) -> String),
}

impl Body {
    /// The table from the committed `files`.
    fn render(&self, files: &[(ResultFile, String)]) -> String {
        match self {
            Body::EachFile {
                header,
                rows,
                holds,
            } => {
                let mut table = header();
                for (file, name) in files.iter().filter(|(f, _)| holds(f)) {
                    table.push_str(&rows(file, name));
                }
                table
            }
            Body::AllFiles(all) => all(files),
        }
    }
}

/// The user reference, where the current eval's tables live.
const REFERENCE: &str = "docs/tool-calling.md";
/// The history page, where the first eval's table lives.
const HISTORY: &str = "docs/eval/history.md";
/// The user page, where the newest figures live.
const USER_PAGE: &str = "docs/small-models.md";

/// The generated tables, in the module docs' order.
const TABLES: [Table; 4] = [
    Table {
        doc: HISTORY,
        start: "<!-- eval-table:start (cargo xtask eval --table) -->",
        end: "<!-- eval-table:end -->",
        body: Body::EachFile {
            header: legacy::header,
            rows: legacy::rows,
            holds: |f| f.format < FORMAT,
        },
    },
    Table {
        doc: REFERENCE,
        start: "<!-- eval-columns:start (cargo xtask eval --table) -->",
        end: "<!-- eval-columns:end -->",
        body: Body::EachFile {
            header: measures::header,
            rows: measures::rows,
            holds: newest::counts,
        },
    },
    Table {
        doc: REFERENCE,
        start: "<!-- eval-ablation:start (cargo xtask eval --table) -->",
        end: "<!-- eval-ablation:end -->",
        body: Body::AllFiles(measures::ablation_table),
    },
    Table {
        doc: USER_PAGE,
        start: "<!-- eval-newest:start (cargo xtask eval --table) -->",
        end: "<!-- eval-newest:end -->",
        body: Body::AllFiles(newest::table),
    },
];

/// The table of one result file, for the console.
pub(super) fn table(file: &ResultFile, name: &str) -> String {
    if !file.ablation.is_empty() {
        return measures::ablation_header() + &measures::ablation_rows(file, name);
    }
    TABLES
        .iter()
        .find_map(|t| match t.body {
            Body::EachFile {
                header,
                rows,
                holds,
            } if holds(file) => Some(header() + &rows(file, name)),
            _ => None,
        })
        .unwrap_or_default()
}

/// Writes `file` as `<dir>/<model>-<sampling>-<part>[-ablation]-<stamp>.json`; returns
/// its path.
pub(super) fn write(dir: &Path, file: &ResultFile) -> Result<PathBuf> {
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let sampling = file.sampling.replace(' ', "-");
    let ablation = if file.ablation.is_empty() {
        ""
    } else {
        "-ablation"
    };
    let path = dir.join(format!(
        "{}-{sampling}-{}{ablation}-{}.json",
        file.model, file.part, file.started
    ));
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

/// Every committed result file, parsed, with the name the docs cite it by.
fn committed(root: &Path) -> Result<Vec<(ResultFile, String)>> {
    let mut out = Vec::new();
    for path in result_files(root)? {
        let text = fs::read_to_string(&path)?;
        let file: ResultFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        out.push((file, format!("{RESULTS_DIR}/{name}")));
    }
    Ok(out)
}

/// Every document that holds a table, once each, in the order of [`TABLES`].
fn docs() -> Vec<&'static str> {
    let mut docs: Vec<&'static str> = Vec::new();
    for t in &TABLES {
        if !docs.contains(&t.doc) {
            docs.push(t.doc);
        }
    }
    docs
}

/// `text`, the document `doc`, with each of its tables regenerated from `files`.
fn regenerated(doc: &str, text: &str, files: &[(ResultFile, String)]) -> Result<String> {
    let mut text = text.to_owned();
    for t in TABLES.iter().filter(|t| t.doc == doc) {
        let table = t.body.render(files);
        text = splice(&text, t.start, t.end, &table).with_context(|| format!("in {doc}"))?;
    }
    Ok(text)
}

/// `doc` with the text between `start` and `end` replaced by `table`.
fn splice(doc: &str, start: &str, end: &str, table: &str) -> Result<String> {
    let (head, rest) = doc
        .split_once(start)
        .with_context(|| format!("no marker {start}"))?;
    let (_, tail) = rest
        .split_once(end)
        .with_context(|| format!("no marker {end}"))?;
    Ok(format!("{head}{start}\n{table}{end}{tail}"))
}

/// `cargo xtask eval --table`: regenerates every table, each in its own document.
pub(super) fn regenerate(root: &Path) -> Result<()> {
    let files = committed(root)?;
    for doc in docs() {
        let path = root.join(doc);
        let text = fs::read_to_string(&path).with_context(|| format!("reading {doc}"))?;
        let new = regenerated(doc, &text, &files)?;
        if new == text {
            println!("{doc}: the tables are up to date");
        } else {
            fs::write(&path, new).with_context(|| format!("writing {doc}"))?;
            println!("{doc}: tables regenerated from {RESULTS_DIR}/");
        }
    }
    Ok(())
}

/// Fails when a document's tables are not what the committed files give.
#[cfg(test)]
pub(super) fn check_doc(root: &Path) -> Result<()> {
    let files = committed(root)?;
    for doc in docs() {
        let text = fs::read_to_string(root.join(doc))?;
        if regenerated(doc, &text, &files)? != text {
            anyhow::bail!("{doc}'s eval tables are stale: run `cargo xtask eval --table`");
        }
    }
    Ok(())
}

/// `2026-11-22T18-30-05Z` (no colons, so it is a portable file name).
pub(crate) fn utc_stamp(now: SystemTime) -> String {
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
    use super::super::results::RunRecord;
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_table_splices_between_the_markers_only() {
        let (start, end) = ("<!-- a -->", "<!-- b -->");
        let doc = format!("before\n{start}\nold\n{end}\nafter\n");
        assert_eq!(
            splice(&doc, start, end, "new\n").unwrap(),
            format!("before\n{start}\nnew\n{end}\nafter\n")
        );
        assert!(splice("no markers", start, end, "x").is_err());
    }

    /// `--table` in a workspace whose documents hold stale tables and whose
    /// `docs/eval/` holds a first-format file and a current one: every document is
    /// rewritten, each table between its own markers in its own document, and the text
    /// around them kept.
    #[test]
    fn every_table_is_regenerated_in_its_own_document() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join(RESULTS_DIR)).unwrap();
        let run = RunRecord {
            column: "auto".into(),
            kind: "tool".into(),
            part: "tuning".into(),
            pass: true,
            ..RunRecord::default()
        };
        let legacy = ResultFile {
            model: "m".into(),
            sampling: "default".into(),
            columns: vec!["auto".into()],
            runs: vec![run.clone()],
            ..ResultFile::default()
        };
        let current = ResultFile {
            format: FORMAT,
            ..legacy.clone()
        };
        rewrite(&root.join(RESULTS_DIR).join("m-old.json"), &legacy).unwrap();
        rewrite(&root.join(RESULTS_DIR).join("m-new.json"), &current).unwrap();
        for doc in docs() {
            let mut text = format!("# {doc}\n");
            for t in TABLES.iter().filter(|t| t.doc == doc) {
                text.push_str(&format!("{}\nstale\n{}\nafter\n", t.start, t.end));
            }
            fs::write(root.join(doc), text).unwrap();
        }
        regenerate(root).unwrap();
        for t in &TABLES {
            let text = fs::read_to_string(root.join(t.doc)).unwrap();
            let (_, rest) = text.split_once(t.start).unwrap();
            let (table, _) = rest.split_once(t.end).unwrap();
            assert_eq!(
                table,
                format!("\n{}", t.body.render(&committed(root).unwrap()))
            );
            assert!(!table.contains("stale"), "{}", t.start);
            assert!(text.starts_with(&format!("# {}\n", t.doc)) && text.contains("after"));
        }
        let read = |doc| fs::read_to_string(root.join(doc)).unwrap();
        assert!(read(HISTORY).contains("`docs/eval/m-old.json`"));
        assert!(!read(HISTORY).contains("m-new.json"));
        assert!(read(REFERENCE).contains("`docs/eval/m-new.json`"));
        assert!(read(USER_PAGE).contains("| m | default | auto | tuning | 1/1 |"));
        assert!(!read(USER_PAGE).contains("m-old.json"));
        check_doc(root).unwrap();
    }

    /// Each marker pair is in the document its table names and in no other, so a table
    /// cannot be generated twice or in the wrong page.
    #[test]
    fn each_committed_marker_pair_lives_in_one_document() {
        let root = crate::util::workspace_root();
        for t in &TABLES {
            for doc in docs() {
                let text = fs::read_to_string(root.join(doc)).unwrap();
                let holds = text.contains(t.start) && text.contains(t.end);
                assert_eq!(holds, doc == t.doc, "{} in {doc}", t.start);
            }
        }
    }

    #[test]
    fn the_committed_table_is_generated_from_the_committed_results() {
        check_doc(&crate::util::workspace_root()).unwrap();
    }

    #[test]
    fn utc_stamps() {
        let at = |secs| utc_stamp(UNIX_EPOCH + Duration::from_secs(secs));
        assert_eq!(at(0), "1970-01-01T00-00-00Z");
        assert_eq!(at(951_782_400), "2000-02-29T00-00-00Z");
        assert_eq!(at(1_795_372_205), "2026-11-22T18-30-05Z");
    }
}
