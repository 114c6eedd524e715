//! What every run of an eval shares: the context a column's runner gets, the columns and
//! the per-run timeout. A leaf, so that the runners (`ollm.rs`, `plain.rs`) and the scheduler
//! (`mod.rs`) import it without importing each other.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::tasks::Files;

/// How long one run may take before it is killed and counted as failed. On the shared
/// 2-core machine a first request with ~800 tokens of system prompt and tool schemas
/// took over 2 minutes of prompt processing alone under load.
pub(super) const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// What every run shares.
pub(super) struct RunContext {
    pub(super) ollm: PathBuf,
    pub(super) base_url: String,
    pub(super) model: String,
    /// The workspaces: name -> the folder's files.
    pub(super) workspaces: BTreeMap<String, Files>,
    /// The temperature sent, if any.
    pub(super) temperature: Option<f64>,
    pub(super) max_turns: u32,
    /// The plain loop's `tools`.
    pub(super) tools: Value,
    /// Where each ollm run's `stream-json` output is kept, as `TASK.COLUMN.REPEAT.jsonl`.
    pub(super) traces: PathBuf,
    /// After this, no new run starts.
    pub(super) deadline: Option<Instant>,
}

/// The columns `--columns` may name: the plain loop and ollm's tool modes.
pub(super) const COLUMNS: &[&str] = &["plain", "native", "react", "constrained", "auto"];
/// The prefix of a column running auto with one coach rule off: `auto-without-RULE`.
pub(super) const WITHOUT: &str = "auto-without-";

/// A column: who runs the tasks, and how. Its name is what result files hold, and
/// [`Column::parse`] reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Column {
    /// `plain`, or ollm's `--tool-mode`.
    pub(super) mode: String,
    /// A coach rule switched off (`ollm run --coach-off RULE`), for the ablation.
    pub(super) off: Option<String>,
}

impl Column {
    /// `plain`, a tool mode, or `auto-without-RULE`.
    pub(super) fn parse(name: &str) -> Option<Column> {
        if let Some(rule) = name.strip_prefix(WITHOUT) {
            return (!rule.is_empty()).then(|| Column::without(rule));
        }
        COLUMNS.contains(&name).then(|| Column {
            mode: name.to_owned(),
            off: None,
        })
    }

    /// The auto column with `rule` off.
    pub(super) fn without(rule: &str) -> Column {
        Column {
            mode: "auto".into(),
            off: Some(rule.to_owned()),
        }
    }

    /// The name in result files.
    pub(super) fn name(&self) -> String {
        match &self.off {
            Some(rule) => format!("{WITHOUT}{rule}"),
            None => self.mode.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_names_round_trip() {
        for name in [
            "plain",
            "auto",
            "native",
            "auto-without-answer-nudge",
            "auto-without-all",
        ] {
            assert_eq!(Column::parse(name).unwrap().name(), name);
        }
        let off = Column::parse("auto-without-repeat-guard").unwrap();
        assert_eq!(
            (off.mode.as_str(), off.off.as_deref()),
            ("auto", Some("repeat-guard"))
        );
        for bad in ["magic", "auto-without-", "native-without-x"] {
            assert_eq!(Column::parse(bad), None, "{bad}");
        }
    }
}
