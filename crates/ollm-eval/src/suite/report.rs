//! Results as data: the result file each eval run writes, and the tables in
//! `docs/tool-calling.md` generated from the committed files.
//!
//! # Decisions
//!
//! - **One JSON file per eval run**, under `docs/eval/` (target/eval/ for `--smoke`, which
//!   CI runs and nobody commits): the model, the server, the ollm build, the sampling,
//!   the part, and per task, column and repeat the pass, the failures, the unasked
//!   actions, the finish, the calls made and run, the files changed, the seconds and the
//!   answer. The docs cite these files; a figure that is not in one is not a figure.
//! - **Three tables, each generated** from the files in `docs/eval/` by `cargo xtask eval
//!   --table`, between its own markers in `docs/tool-calling.md`: the first format's
//!   ([`super::legacy`], files without `format`), the columns with both parts side by
//!   side, and the ablations ([`super::measures`]). A test fails when a committed table
//!   differs from what the committed files give.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use super::results::{FORMAT, ResultFile};
use super::{legacy, measures};

/// Where committed result files live, relative to the workspace root.
pub(super) const RESULTS_DIR: &str = "docs/eval";
/// The document whose table is generated.
const DOC: &str = "docs/tool-calling.md";

/// One of the generated tables: its markers, and its header and rows for a file.
struct Table {
    start: &'static str,
    end: &'static str,
    header: fn() -> String,
    rows: fn(&ResultFile, &str) -> String,
    holds: fn(&ResultFile) -> bool,
}

/// The three tables of `docs/tool-calling.md`, in the module docs' order.
const TABLES: [Table; 3] = [
    Table {
        start: "<!-- eval-table:start (cargo xtask eval --table) -->",
        end: "<!-- eval-table:end -->",
        header: legacy::header,
        rows: legacy::rows,
        holds: |f| f.format < FORMAT,
    },
    Table {
        start: "<!-- eval-columns:start (cargo xtask eval --table) -->",
        end: "<!-- eval-columns:end -->",
        header: measures::header,
        rows: measures::rows,
        holds: |f| f.format >= FORMAT && f.ablation.is_empty(),
    },
    Table {
        start: "<!-- eval-ablation:start (cargo xtask eval --table) -->",
        end: "<!-- eval-ablation:end -->",
        header: measures::ablation_header,
        rows: measures::ablation_rows,
        holds: |f| f.format >= FORMAT && !f.ablation.is_empty(),
    },
];

/// The table of one result file, for the console.
pub(super) fn table(file: &ResultFile, name: &str) -> String {
    TABLES
        .iter()
        .find(|t| (t.holds)(file))
        .map_or_else(String::new, |t| (t.header)() + &(t.rows)(file, name))
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

/// `doc` with each table regenerated from `files`.
fn regenerated(doc: &str, files: &[(ResultFile, String)]) -> Result<String> {
    let mut doc = doc.to_owned();
    for t in &TABLES {
        let mut table = (t.header)();
        for (file, name) in files.iter().filter(|(f, _)| (t.holds)(f)) {
            table.push_str(&(t.rows)(file, name));
        }
        doc = splice(&doc, t.start, t.end, &table)?;
    }
    Ok(doc)
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

/// `cargo xtask eval --table`: regenerates the tables in `docs/tool-calling.md`.
pub(super) fn regenerate(root: &Path) -> Result<()> {
    let path = root.join(DOC);
    let doc = fs::read_to_string(&path)?;
    let new = regenerated(&doc, &committed(root)?)?;
    if new == doc {
        println!("{DOC}: the tables are up to date");
    } else {
        fs::write(&path, new)?;
        println!("{DOC}: tables regenerated from {RESULTS_DIR}/");
    }
    Ok(())
}

/// Fails when the doc's tables are not what the committed files give.
#[cfg(test)]
pub(super) fn check_doc(root: &Path) -> Result<()> {
    let doc = fs::read_to_string(root.join(DOC))?;
    if regenerated(&doc, &committed(root)?)? != doc {
        anyhow::bail!("{DOC}'s eval tables are stale: run `cargo xtask eval --table`");
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
