//! BFCL's result files (`docs/eval/bfcl/bfcl-<model>-<stamp>.json`) and the section of
//! `docs/tool-calling.md` made from them, between [`BEGIN`] and [`END`] at the file's end.
//!
//! # Decisions
//!
//! - **A folder of their own** under `docs/eval/`: the eval's table and `--regrade` read
//!   every `.json` directly in `docs/eval/` as one of its own result files.
//! - **The section is made only from committed result files**: the newest file per model
//!   gives that model's rows, so a re-run replaces its figures and a model not re-run
//!   keeps its own.
//! - **The published figures stand beside ours**, with what differs said in words: the
//!   model (BFCL's Qwen2.5-Instruct, ours Qwen2.5-Coder-Instruct), the weights (theirs
//!   full precision served by vLLM, ours Q4_K_M on llama.cpp), the prompt (theirs the
//!   model's own template with BFCL's function docs, ours the server's template with the
//!   tools converted to JSON Schema), and our subset.
//! - A category's score is passes over questions run; a question that did not run (the
//!   budget ran out) is not counted, and the file says how many ran.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where result files go, beside the eval's.
pub(crate) const RESULTS_DIR: &str = "docs/eval/bfcl";
const DOC: &str = "docs/tool-calling.md";
/// The section's markers; the section is the end of the doc.
pub(crate) const BEGIN: &str = "<!-- bfcl:begin -->";
pub(crate) const END: &str = "<!-- bfcl:end -->";
/// The categories in the order columns of the table show them.
const CATEGORIES: [&str; 4] = ["simple", "multiple", "parallel", "irrelevance"];

/// The BFCL paper's figures (FC mode) for the models we run: (our alias, their model,
/// simple, irrelevance).
const PUBLISHED: &[(&str, &str, f64, f64)] = &[
    (
        "qwen2.5-coder-0.5b",
        "Qwen2.5-0.5B-Instruct (FC)",
        61.2,
        46.2,
    ),
    (
        "qwen2.5-coder-1.5b",
        "Qwen2.5-1.5B-Instruct (FC)",
        72.4,
        62.7,
    ),
];

/// One result file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ResultFile {
    pub(crate) benchmark: String,
    pub(crate) model: String,
    pub(crate) server: String,
    /// Which ollm was measured (the library at this commit).
    pub(crate) ollm: String,
    /// Where the data came from: package, wheel sha256, gorilla commit.
    pub(crate) data: Value,
    /// What was sent: temperature and generation cap.
    pub(crate) sampling: String,
    /// The subset rule and the ids run per category.
    pub(crate) subset: Value,
    pub(crate) columns: Vec<String>,
    pub(crate) started: String,
    pub(crate) wall_s: f64,
    pub(crate) planned: usize,
    pub(crate) runs: Vec<RunRecord>,
}

/// One question in one column.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunRecord {
    pub(crate) id: String,
    pub(crate) category: String,
    pub(crate) column: String,
    pub(crate) pass: bool,
    /// Why it failed, in the checker's words (empty on a pass).
    pub(crate) why: String,
    pub(crate) finish: String,
    pub(crate) strategy: Option<String>,
    /// The calls made: `{name, arguments}`.
    pub(crate) calls: Vec<Value>,
    /// How many of them the library answered with an error (ollm columns; `None` in
    /// files written before it was recorded).
    #[serde(default)]
    pub(crate) refused: Option<usize>,
    /// The reply's text, cut to 400 characters.
    pub(crate) text: String,
    pub(crate) seconds: f64,
}

/// Passes and runs of `column` in `category`.
pub(crate) fn score(file: &ResultFile, column: &str, category: &str) -> (usize, usize) {
    let runs = file
        .runs
        .iter()
        .filter(|r| r.column == column && r.category == category);
    runs.fold((0, 0), |(p, n), r| (p + usize::from(r.pass), n + 1))
}

fn cell((pass, of): (usize, usize)) -> String {
    if of == 0 {
        return "–".into();
    }
    #[allow(clippy::cast_precision_loss, reason = "counts of a few hundred")]
    let pct = 100.0 * pass as f64 / of as f64;
    format!("{pct:.0}% ({pass}/{of})")
}

/// The table rows of one result file.
fn rows(file: &ResultFile, name: &str) -> String {
    let mut out = String::new();
    for column in &file.columns {
        let mut line = format!("| {} | {column} |", file.model);
        for category in CATEGORIES {
            let _ = write!(line, " {} |", cell(score(file, column, category)));
        }
        let _ = writeln!(line, " [{name}](eval/bfcl/{name}) |");
        out.push_str(&line);
    }
    if let Some((_, theirs, simple, irrelevance)) =
        PUBLISHED.iter().find(|(alias, ..)| *alias == file.model)
    {
        let _ = writeln!(
            out,
            "| {theirs} | BFCL paper | {simple} | – | – | {irrelevance} | published |"
        );
    }
    out
}

/// The section from `files` (name, file), newest per model, without the markers.
pub(crate) fn section(files: &[(String, ResultFile)]) -> String {
    let mut newest: BTreeMap<&str, (&str, &ResultFile)> = BTreeMap::new();
    for (name, file) in files {
        let keep = newest
            .get(file.model.as_str())
            .is_none_or(|(_, old)| old.started < file.started);
        if keep {
            newest.insert(&file.model, (name, file));
        }
    }
    let mut out = String::from(
        "## BFCL: a public benchmark\n\n\
         The Berkeley Function-Calling Leaderboard's simple, multiple, parallel and irrelevance \
         questions, run with `cargo xtask eval --bfcl` (one model turn, the functions declared \
         as tools that record calls and never run, scored with an AST checker written from \
         BFCL's rules), on this project's llama-server and models. Scores are passes over \
         questions run. Generated from the result files by `cargo xtask eval --bfcl --table`; \
         to measure again:\n\n\
         ```sh\n\
         cargo xtask eval --bfcl                                        # the 0.5B, 15 per category\n\
         cargo xtask eval --bfcl --model qwen2.5-coder-1.5b --limit 8   # the 1.5B, 8 per category\n\
         ```\n\n\
         | model | column | simple | multiple | parallel | irrelevance | data |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for (name, file) in newest.values() {
        out.push_str(&rows(file, name));
    }
    out.push('\n');
    for (name, file) in newest.values() {
        let _ = writeln!(
            out,
            "- `{name}`: {}; {}; {}. Questions answered with at least one call: {}.",
            subset_note(file),
            file.sampling,
            file.ollm,
            calling(file)
        );
    }
    out.push_str(DIFFERENCES);
    out
}

/// What differs from the published runs, for the section's end.
const DIFFERENCES: &str = "\nWhat differs from the published figures:\n\n\
- **The model**: BFCL's are Qwen2.5-Instruct; ours are Qwen2.5-Coder-Instruct of the same \
size, the models this project runs.\n\
- **The weights**: ours are Q4_K_M GGUF on llama.cpp's `llama-server`, on 2 CPU cores; \
BFCL serves full-precision weights.\n\
- **The prompt**: BFCL's Qwen (FC) handler renders the model's own chat template with \
BFCL's function documents (dotted names, BFCL's types); ours go through the server's \
OpenAI endpoint and its Jinja template, with the types mapped to JSON Schema and `.` in \
names as `_` (as BFCL's OpenAI-style handlers send them).\n\
- **A subset**: an evenly spread, fixed subset of each category (named in each result \
file), not every question. With 15 questions a category one question is 7 points, and \
sampling error alone is about ±25 points (95%): read these scores as coarse, and compare \
columns question by question in the result files.\n\
- **Irrelevance** passes when no call is made, so a column that never calls scores 100% \
there: read it beside the line on how many questions got a call at all.\n\
- **The data**: BFCL v4's files at gorilla commit `6ea57973c7a6` (the `bfcl-eval` \
2026.3.23 release); the paper's figures are from an earlier release of the same \
categories.\n";

/// Per column, how many questions got a call at all (a column that never calls passes
/// every irrelevance question, so this reads beside that score).
fn calling(file: &ResultFile) -> String {
    let per: Vec<String> = file
        .columns
        .iter()
        .map(|column| {
            let runs = file.runs.iter().filter(|r| &r.column == column);
            let (with, of) = runs.fold((0, 0), |(w, n), r| {
                (w + usize::from(!r.calls.is_empty()), n + 1)
            });
            format!("{column} {with}/{of}")
        })
        .collect();
    per.join(", ")
}

fn subset_note(file: &ResultFile) -> String {
    let counts: Vec<String> = CATEGORIES
        .iter()
        .map(|c| {
            let n = file.subset["ids"][c].as_array().map_or(0, Vec::len);
            format!("{c} {n}")
        })
        .collect();
    format!(
        "{} ({}), {} of {} runs done",
        file.subset["rule"].as_str().unwrap_or_default(),
        counts.join(", "),
        file.runs.len(),
        file.planned
    )
}

/// Writes `file` as `bfcl-<model>-<started>.json` in `dir`.
pub(crate) fn write(dir: &Path, file: &ResultFile) -> Result<PathBuf> {
    fs::create_dir_all(dir)?;
    let path = dir.join(format!("bfcl-{}-{}.json", file.model, file.started));
    let text = serde_json::to_string_pretty(file)? + "\n";
    fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The committed result files, by name.
pub(crate) fn committed(root: &Path) -> Result<Vec<(String, ResultFile)>> {
    let mut out = Vec::new();
    let dir = root.join(RESULTS_DIR);
    if !dir.is_dir() {
        return Ok(out);
    }
    for entry in fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with("bfcl-") && name.ends_with(".json") {
            let text = fs::read_to_string(&path)?;
            let file = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            out.push((name, file));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// `doc` with its BFCL section replaced by `section`, or appended at its end.
pub(crate) fn splice(doc: &str, section: &str) -> Result<String> {
    let block = format!("{BEGIN}\n{section}{END}\n");
    match (doc.find(BEGIN), doc.find(END)) {
        (Some(b), Some(e)) if b < e => {
            let after = doc[e + END.len()..].trim_start_matches('\n');
            Ok(format!("{}{block}{after}", &doc[..b]))
        }
        (None, None) => Ok(format!("{}\n\n{block}", doc.trim_end())),
        _ => bail!("{DOC}: the BFCL markers are out of order or one is missing"),
    }
}

/// Rewrites the doc's BFCL section from the committed result files.
pub(crate) fn regenerate(root: &Path) -> Result<()> {
    let files = committed(root)?;
    let path = root.join(DOC);
    let doc = fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    fs::write(&path, splice(&doc, &section(&files))?)?;
    println!(
        "bfcl: regenerated the BFCL section of {DOC} from {} result files",
        files.len()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_docs_section_is_what_the_committed_files_give() {
        let root = crate::util::workspace_root();
        let doc = fs::read_to_string(root.join(DOC)).unwrap();
        let fresh = splice(&doc, &section(&committed(&root).unwrap())).unwrap();
        assert!(
            fresh == doc,
            "{DOC}'s BFCL section is stale: run `cargo xtask eval --bfcl --table`"
        );
    }

    fn record(column: &str, category: &str, pass: bool) -> RunRecord {
        RunRecord {
            id: format!("{category}_0"),
            category: category.into(),
            column: column.into(),
            pass,
            why: String::new(),
            finish: "stop".into(),
            strategy: None,
            calls: Vec::new(),
            refused: None,
            text: String::new(),
            seconds: 1.0,
        }
    }

    fn file(model: &str, started: &str, runs: Vec<RunRecord>) -> ResultFile {
        ResultFile {
            benchmark: "BFCL".into(),
            model: model.into(),
            server: String::new(),
            ollm: "ollm".into(),
            data: json!({}),
            sampling: "temperature 0".into(),
            subset: json!({"rule": "every k-th", "ids": {"simple": ["simple_0"]}}),
            columns: vec!["plain".into()],
            started: started.into(),
            wall_s: 1.0,
            planned: runs.len(),
            runs,
        }
    }

    #[test]
    fn scores_count_passes_per_column_and_category() {
        let f = file(
            "m",
            "t",
            vec![
                record("plain", "simple", true),
                record("plain", "simple", false),
                record("auto", "simple", true),
            ],
        );
        assert_eq!(score(&f, "plain", "simple"), (1, 2));
        assert_eq!(score(&f, "auto", "simple"), (1, 1));
        assert_eq!(score(&f, "plain", "parallel"), (0, 0));
        assert_eq!(cell((1, 2)), "50% (1/2)");
        assert_eq!(cell((0, 0)), "–");
    }

    #[test]
    fn the_section_takes_the_newest_file_per_model_and_the_published_figures() {
        let old = file(
            "qwen2.5-coder-0.5b",
            "2026-01-01T00-00-00Z",
            vec![record("plain", "simple", false)],
        );
        let new = file(
            "qwen2.5-coder-0.5b",
            "2026-02-01T00-00-00Z",
            vec![record("plain", "simple", true)],
        );
        let text = section(&[("old.json".into(), old), ("new.json".into(), new)]);
        assert!(text.contains("100% (1/1)"), "{text}");
        assert!(!text.contains("old.json"), "{text}");
        assert!(
            text.contains("| Qwen2.5-0.5B-Instruct (FC) | BFCL paper | 61.2 | – | – | 46.2 |"),
            "{text}"
        );
    }

    #[test]
    fn splicing_replaces_the_section_or_appends_it() {
        let appended = splice("# Doc\n\ntext\n", "S1\n").unwrap();
        assert_eq!(appended, format!("# Doc\n\ntext\n\n{BEGIN}\nS1\n{END}\n"));
        let replaced = splice(&appended, "S2\n").unwrap();
        assert_eq!(replaced, format!("# Doc\n\ntext\n\n{BEGIN}\nS2\n{END}\n"));
        assert!(splice(&format!("{END}\n{BEGIN}\n"), "S").is_err());
        assert!(splice(&format!("x {BEGIN}\n"), "S").is_err());
    }
}
