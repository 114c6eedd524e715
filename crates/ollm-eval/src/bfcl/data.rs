//! BFCL's questions and possible answers: fetched at run time, pinned, never in the tree.
//!
//! # Where the data comes from
//!
//! The Berkeley Function-Calling Leaderboard's data lives in the gorilla repository
//! (`berkeley-function-call-leaderboard/bfcl_eval/data/`). Machines here reach package
//! registries and nothing else, so the files are taken from the same project's PyPI
//! release, `bfcl-eval==2026.3.23` (`pip download --no-deps`), whose wheel ships them.
//! The wheel's sha256 is pinned, and so is every file's; the files' hashes are those of
//! gorilla commit [`GORILLA_COMMIT`] (compared file by file when this was written), so
//! the data is exactly that commit's. BFCL v4 names the "simple" category
//! `simple_python` (the v3 `simple` of the paper's era, the same 400 questions).
//!
//! The verified files are kept in the cache (`<ollm cache>/bfcl/2026.3.23/`); a cached
//! file is hashed again on every load, so a changed file is never used. The wheel is
//! unpacked with Python's own `zipfile` (no zip reader in the tree; the cache's server path
//! needs Python already), into a scratch folder removed afterwards.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::checker::Category;

/// The PyPI release the data is taken from.
pub(crate) const PACKAGE: &str = "bfcl-eval==2026.3.23";
/// The wheel's file name and sha256.
const WHEEL: &str = "bfcl_eval-2026.3.23-py3-none-any.whl";
const WHEEL_SHA256: &str = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a";
/// The gorilla commit whose data files the wheel's are, byte for byte.
pub(crate) const GORILLA_COMMIT: &str = "6ea57973c7a6097fd7c5915698c54c17c5b1b6c8";
/// Where the files are inside the wheel (and under the gorilla repository's
/// `berkeley-function-call-leaderboard/`).
const DATA_DIR: &str = "bfcl_eval/data";

/// The data files used, with their sha256: (path under [`DATA_DIR`], sha256).
const FILES: &[(&str, &str)] = &[
    (
        "BFCL_v4_simple_python.json",
        "82dd63ba502eb2520c6b5d1d9a5c4b590e03ff261565175561f6228a367d1991",
    ),
    (
        "possible_answer/BFCL_v4_simple_python.json",
        "90cd5bc653690ee8e459b5b3f3fc9458606f7f3fcbf795bb51b7dc581f8c86dc",
    ),
    (
        "BFCL_v4_multiple.json",
        "aef168155ebd74b7ac2401198b201343bc7d16d7a3d7e0d4e6d8ee82c6969b2a",
    ),
    (
        "possible_answer/BFCL_v4_multiple.json",
        "244e00ce9395df948bcafc7bee64e8f9c87ef70887587d83cae45b13699f3047",
    ),
    (
        "BFCL_v4_parallel.json",
        "19f51a82eff42e5d62541aa500115a056eb78f437c2ba1f10415fd7c8e5dda84",
    ),
    (
        "possible_answer/BFCL_v4_parallel.json",
        "8a6aa19c1adddc6a5a2f7e40f9dbf30cc7e95815e7b830c90589ab318229e0f0",
    ),
    (
        "BFCL_v4_irrelevance.json",
        "2b6ed4c2e992cdcf5f1678a701851f944bef7550ee026ed1ddb89efed5be01a6",
    ),
];

/// One question with what it offers and what answers it.
#[derive(Debug, Clone)]
pub(crate) struct Item {
    /// BFCL's id (`simple_python_12`).
    pub(crate) id: String,
    /// Its category.
    pub(crate) category: Category,
    /// The user's message.
    pub(crate) question: String,
    /// The functions offered, as BFCL declares them.
    pub(crate) functions: Vec<Value>,
    /// The possible answers (empty for irrelevance).
    pub(crate) answers: Vec<Value>,
}

/// A category's name as BFCL's files and our result files write it.
pub(crate) fn name(category: Category) -> &'static str {
    match category {
        Category::Simple => "simple",
        Category::Multiple => "multiple",
        Category::Parallel => "parallel",
        Category::Irrelevance => "irrelevance",
    }
}

/// The four categories, in the order they run and are reported.
pub(crate) const CATEGORIES: [Category; 4] = [
    Category::Simple,
    Category::Multiple,
    Category::Parallel,
    Category::Irrelevance,
];

fn file_stem(category: Category) -> &'static str {
    match category {
        Category::Simple => "BFCL_v4_simple_python",
        Category::Multiple => "BFCL_v4_multiple",
        Category::Parallel => "BFCL_v4_parallel",
        Category::Irrelevance => "BFCL_v4_irrelevance",
    }
}

/// Every question of `category`, in file order, from the verified files in `dir`.
pub(crate) fn load(dir: &Path, category: Category) -> Result<Vec<Item>> {
    let stem = file_stem(category);
    let questions = read_verified(dir, &format!("{stem}.json"))?;
    let answers = if category == Category::Irrelevance {
        String::new()
    } else {
        read_verified(dir, &format!("possible_answer/{stem}.json"))?
    };
    parse(category, &questions, &answers)
}

/// Items from BFCL's JSON-lines texts; answers are joined by id.
pub(crate) fn parse(category: Category, questions: &str, answers: &str) -> Result<Vec<Item>> {
    let mut truths = std::collections::HashMap::new();
    for line in answers.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).context("a possible-answer line")?;
        let id = v["id"]
            .as_str()
            .context("a possible answer without an id")?;
        truths.insert(
            id.to_owned(),
            v["ground_truth"].as_array().cloned().unwrap_or_default(),
        );
    }
    let mut items = Vec::new();
    for line in questions.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).context("a question line")?;
        let id = v["id"]
            .as_str()
            .context("a question without an id")?
            .to_owned();
        let question = v["question"][0]
            .as_array()
            .and_then(|turn| turn.iter().rev().find(|m| m["role"] == "user"))
            .and_then(|m| m["content"].as_str())
            .with_context(|| format!("{id}: no user message"))?
            .to_owned();
        let functions = v["function"].as_array().cloned().unwrap_or_default();
        let answers = match category {
            Category::Irrelevance => Vec::new(),
            _ => truths
                .remove(&id)
                .with_context(|| format!("{id}: no possible answer"))?,
        };
        items.push(Item {
            id,
            category,
            question,
            functions,
            answers,
        });
    }
    Ok(items)
}

/// `limit` items spread evenly over `items` (the `i * len / limit`-th, by file order), or
/// all of them when `limit` is `None` or not smaller.
pub(crate) fn subset(items: Vec<Item>, limit: Option<usize>) -> Vec<Item> {
    let len = items.len();
    match limit {
        Some(n) if n < len => {
            let picks: Vec<usize> = (0..n).map(|i| i * len / n).collect();
            items
                .into_iter()
                .enumerate()
                .filter(|(i, _)| picks.contains(i))
                .map(|(_, item)| item)
                .collect()
        }
        _ => items,
    }
}

fn read_verified(dir: &Path, file: &str) -> Result<String> {
    let path = dir.join(file);
    let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    let want = pinned(file)?;
    let got = sha256_hex(&bytes);
    if got != want {
        bail!("{}: sha256 {got}, expected {want}", path.display());
    }
    String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))
}

fn pinned(file: &str) -> Result<&'static str> {
    FILES
        .iter()
        .find(|(f, _)| *f == file)
        .map(|(_, sha)| *sha)
        .with_context(|| format!("{file} is not a pinned BFCL file"))
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The folder holding the verified data files, fetched into `cache` when missing or
/// changed.
pub(crate) fn ensure(cache: &Path) -> Result<PathBuf> {
    let dir = cache.join("bfcl").join("2026.3.23");
    if FILES.iter().all(|(f, _)| read_verified(&dir, f).is_ok()) {
        println!("bfcl: reusing the verified data in {}", dir.display());
        return Ok(dir);
    }
    let scratch = tempfile::Builder::new()
        .prefix("ollm-bfcl-")
        .tempdir()
        .context("creating a scratch folder")?;
    let python = std::env::var_os("OLLM_PYTHON").unwrap_or_else(|| "python3".into());
    crate::util::section(&format!(
        "bfcl: pip download {PACKAGE} (the data, about 2 MB)"
    ));
    crate::util::run_cmd(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "--no-deps",
            ])
            .args(["--no-cache-dir", "--progress-bar", "off", "-d"])
            .arg(scratch.path())
            .arg(PACKAGE)
            .stdin(Stdio::null()),
    )?;
    let wheel = scratch.path().join(WHEEL);
    let got =
        sha256_hex(&fs::read(&wheel).with_context(|| format!("reading {}", wheel.display()))?);
    if got != WHEEL_SHA256 {
        bail!("{WHEEL}: sha256 {got}, expected {WHEEL_SHA256} (nothing was kept)");
    }
    let unpacked = scratch.path().join("unpacked");
    crate::util::run_cmd(
        Command::new(&python)
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked)
            .stdin(Stdio::null()),
    )?;
    for (file, _) in FILES {
        read_verified(&unpacked.join(DATA_DIR), file)?;
        let to = dir.join(file);
        if let Some(parent) = to.parent() {
            fs::create_dir_all(parent)?;
        }
        fs::copy(unpacked.join(DATA_DIR).join(file), &to)
            .with_context(|| format!("copying {file} to {}", to.display()))?;
    }
    println!("bfcl: verified data in {}", dir.display());
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: usize) -> Vec<Item> {
        (0..n)
            .map(|i| Item {
                id: format!("simple_python_{i}"),
                category: Category::Simple,
                question: String::new(),
                functions: Vec::new(),
                answers: Vec::new(),
            })
            .collect()
    }

    fn ids(items: &[Item]) -> Vec<&str> {
        items.iter().map(|i| i.id.as_str()).collect()
    }

    #[test]
    fn the_subset_is_spread_evenly_and_the_same_every_time() {
        let picked = subset(items(10), Some(4));
        assert_eq!(
            ids(&picked),
            [
                "simple_python_0",
                "simple_python_2",
                "simple_python_5",
                "simple_python_7"
            ]
        );
        assert_eq!(subset(items(3), Some(5)).len(), 3);
        assert_eq!(subset(items(3), None).len(), 3);
    }

    #[test]
    fn questions_join_their_answers_by_id() {
        let q = r#"{"id": "a_1", "question": [[{"role": "user", "content": "hi"}]], "function": [{"name": "f"}]}
{"id": "a_0", "question": [[{"role": "user", "content": "yo"}]], "function": []}"#;
        let a = r#"{"id": "a_0", "ground_truth": [{"f": {}}]}
{"id": "a_1", "ground_truth": [{"f": {"x": [1]}}, {"f": {"x": [2]}}]}"#;
        let items = parse(Category::Parallel, q, a).unwrap();
        assert_eq!(ids(&items), ["a_1", "a_0"]);
        assert_eq!(
            (items[0].question.as_str(), items[0].answers.len()),
            ("hi", 2)
        );
        assert!(
            parse(Category::Simple, q, "").is_err(),
            "a question without an answer"
        );
        assert!(parse(Category::Irrelevance, q, "").is_ok());
        assert!(parse(Category::Simple, "not json", a).is_err());
    }

    #[test]
    fn only_a_file_with_its_pinned_hash_is_read() {
        let tmp = tempfile::tempdir().unwrap();
        fs::write(tmp.path().join("BFCL_v4_irrelevance.json"), "{}").unwrap();
        let err = read_verified(tmp.path(), "BFCL_v4_irrelevance.json").unwrap_err();
        assert!(err.to_string().contains("sha256"), "{err}");
        assert!(read_verified(tmp.path(), "unpinned.json").is_err());
    }
}
