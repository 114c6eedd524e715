//! The result file's data: what one eval run writes, and what one run of one task did.
//! A leaf, so the report ([`super::report`]) and the tables ([`super::measures`],
//! [`super::legacy`]) import it without importing each other.
//!
//! # Decisions
//!
//! - **Fields added later default** (`#[serde(default)]`), so the files of the first
//!   format still parse, and `format` tells the two apart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The result file format this eval writes: 2 since issue 35 (parts, workspaces,
/// unasked actions); files without the field are the first format.
pub(super) const FORMAT: u32 = 2;

/// One eval run's result file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct ResultFile {
    #[serde(default)]
    pub(super) format: u32,
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
    /// `tuning`, `held-out` or `all`.
    #[serde(default)]
    pub(super) part: String,
    /// The coach rules switched off one at a time (`--ablate`); empty otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) ablation: Vec<String>,
    pub(super) tasks: Vec<String>,
    pub(super) columns: Vec<String>,
    pub(super) started: String,
    pub(super) wall_s: f64,
    /// Runs planned; fewer in `runs` when the budget ran out.
    pub(super) planned: usize,
    pub(super) runs: Vec<RunRecord>,
}

/// One run of one task in one column.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(super) struct RunRecord {
    pub(super) task: String,
    pub(super) kind: String,
    /// The first format's flag; every task of the second is in plain words.
    #[serde(default)]
    pub(super) plain_words: bool,
    #[serde(default)]
    pub(super) part: String,
    #[serde(default)]
    pub(super) workspace: String,
    pub(super) column: String,
    pub(super) repeat: usize,
    pub(super) pass: bool,
    pub(super) failures: Vec<String>,
    /// Writes, commands and changes nobody asked for (also among `failures`).
    #[serde(default)]
    pub(super) unasked: Vec<String>,
    pub(super) finish: Option<String>,
    pub(super) exit_code: Option<i32>,
    pub(super) calls_made: usize,
    pub(super) calls_run: usize,
    pub(super) calls: Vec<Value>,
    /// Files added or changed (their text) or removed (`null`) in the folder.
    #[serde(default)]
    pub(super) changed: BTreeMap<String, Option<String>>,
    pub(super) seconds: f64,
    pub(super) turns: u32,
    pub(super) tokens: u64,
    pub(super) answer: String,
    /// The coach's rules that acted in the run, and how often (files since the ablation
    /// table's "acts in" column; empty in older ones and in columns without a coach).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) coached: BTreeMap<String, usize>,
}
