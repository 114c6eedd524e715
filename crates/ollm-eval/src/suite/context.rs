//! What every run of an eval shares: the context a column's runner gets, the columns and
//! the per-run timeout. A leaf, so that the runners (`ollm.rs`, `plain.rs`) and the scheduler
//! (`mod.rs`) import it without importing each other.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use ollm_core::Rule;
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
    /// The base URL of the `ollm serve` each served column goes through, by column name.
    pub(super) served: BTreeMap<String, String>,
}

/// The columns `--columns` may name: the plain loop, the plain loop through `ollm
/// serve`, and ollm's tool modes; besides these, `served-with-tool-or-none` and
/// `served-without-RULE` ([`Column::parse`]).
pub(super) const COLUMNS: &[&str] = &["plain", "served", "native", "react", "constrained", "auto"];
/// The prefix of a column running auto with one coach rule off: `auto-without-RULE`,
/// several joined by `+` (`auto-without-key-hint+tools-hint`) to screen a group of rules
/// in one pass: a group that shows no change says none of its rules does at this spread.
pub(super) const WITHOUT: &str = "auto-without-";
/// The prefix of a column running auto with rules on that are off unless asked for
/// (`ollm run --coach-on RULE`): `auto-with-choice-both-orders`, several joined by `+`.
const WITH: &str = "auto-with-";
/// The prefix of a served column with one coach rule off: `served-without-RULE`.
const SERVED_WITHOUT: &str = "served-without-";
/// The prefix of a served column with a rule turned on that serve leaves to its config
/// (`[serve] tool_or_none`, `greedy_tool_turns`): `served-with-tool-or-none`, several
/// joined by `+` (`served-with-tool-or-none+greedy-tool-turns`).
const SERVED_WITH: &str = "served-with-";
/// The prefix of a plain or served column whose calls run on ollm's built-in tools
/// (`ollm-tools:served`, `ollm-tools:served-with-tool-or-none`; `toolset.rs`).
const OLLM_TOOLS: &str = "ollm-tools:";
/// The rules serve's config turns on (`changes-on-request` by naming the tools that
/// only read, `[serve] read_only`).
pub(super) const SERVE_TURNS_ON: &[&str] = &[
    "tool-or-none",
    "greedy-tool-turns",
    "changes-on-request",
    "routed-call",
];

/// A column: who runs the tasks, and how. Its name is what result files hold, and
/// [`Column::parse`] reads it back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Column {
    /// `plain`, `served`, or ollm's `--tool-mode`.
    pub(super) mode: String,
    /// Coach rules switched off (`ollm run --coach-off RULE`, or serve's `[coach]
    /// off`), for the ablation; several joined by `+`.
    pub(super) off: Option<String>,
    /// Coach rules serve's config turns on (`[serve] tool_or_none = true`), or `ollm run
    /// --coach-on` for the auto column, joined by `+`.
    pub(super) on: Option<String>,
    /// Whether the plain loop's calls run on ollm's built-in tools (`ollm-tools:`
    /// before a plain or served column's name; `toolset.rs`).
    pub(super) ollm_tools: bool,
}

impl Column {
    /// `plain`, `served`, a tool mode, `auto-without-RULE`, `served-without-RULE` or
    /// `served-with-tool-or-none`.
    pub(super) fn parse(name: &str) -> Option<Column> {
        if let Some(rest) = name.strip_prefix(OLLM_TOOLS) {
            let plain = |c: &Column| (c.is_served() || c.mode == "plain") && !c.ollm_tools;
            let column = Column::parse(rest).filter(plain)?;
            return Some(Column {
                ollm_tools: true,
                ..column
            });
        }
        let rule = |prefix: &str| name.strip_prefix(prefix).filter(|r| !r.is_empty());
        if let Some(rule) = rule(WITHOUT) {
            return Some(Column::without(rule));
        }
        if let Some(rule) = rule(SERVED_WITHOUT) {
            return Some(Column {
                off: Some(rule.to_owned()),
                ..Column::of("served")
            });
        }
        if let Some(rule) = rule(WITH) {
            // The rules `ollm run --coach-on` turns on: those off by default but
            // `tool-or-none`, which the CLI turns on itself.
            let known = rule.split('+').all(|r| {
                (Rule::ON_REQUEST.iter()).any(|on| on.name() == r && *on != Rule::ToolOrNone)
            });
            return known.then(|| Column {
                on: Some(rule.to_owned()),
                ..Column::of("auto")
            });
        }
        if let Some(rule) = rule(SERVED_WITH) {
            let known = rule.split('+').all(|r| SERVE_TURNS_ON.contains(&r));
            return known.then(|| Column {
                on: Some(rule.to_owned()),
                ..Column::of("served")
            });
        }
        COLUMNS.contains(&name).then(|| Column::of(name))
    }

    /// The column `mode` with the coach as it comes.
    fn of(mode: &str) -> Column {
        Column {
            mode: mode.to_owned(),
            off: None,
            on: None,
            ollm_tools: false,
        }
    }

    /// The auto column with `rule` off.
    pub(super) fn without(rule: &str) -> Column {
        Column {
            off: Some(rule.to_owned()),
            ..Column::of("auto")
        }
    }

    /// Whether the column is the plain loop through `ollm serve`.
    pub(super) fn is_served(&self) -> bool {
        self.mode == "served"
    }

    /// The rules switched off, one by one.
    pub(super) fn rules_off(&self) -> Vec<&str> {
        self.off.iter().flat_map(|r| r.split('+')).collect()
    }

    /// The rules switched on, one by one.
    pub(super) fn rules_on(&self) -> Vec<&str> {
        self.on.iter().flat_map(|r| r.split('+')).collect()
    }

    /// The name in result files.
    pub(super) fn name(&self) -> String {
        let tools = if self.ollm_tools { OLLM_TOOLS } else { "" };
        let name = match (&self.off, &self.on) {
            (Some(rule), _) if self.is_served() => format!("{SERVED_WITHOUT}{rule}"),
            (Some(rule), _) => format!("{WITHOUT}{rule}"),
            (None, Some(rule)) if self.is_served() => format!("{SERVED_WITH}{rule}"),
            (None, Some(rule)) => format!("{WITH}{rule}"),
            (None, None) => self.mode.clone(),
        };
        format!("{tools}{name}")
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
            "served",
            "served-with-tool-or-none",
            "served-without-tool-or-none",
            "auto-with-choice-both-orders",
            "auto-with-routed-call+choice-both-orders",
            "auto-with-read-named+answer-at-limit",
            "ollm-tools:plain",
            "ollm-tools:served",
            "ollm-tools:served-with-tool-or-none",
        ] {
            assert_eq!(Column::parse(name).unwrap().name(), name);
        }
        let on = Column::parse("auto-with-routed-call+choice-both-orders").unwrap();
        assert_eq!(
            (on.mode.as_str(), on.rules_on()),
            ("auto", vec!["routed-call", "choice-both-orders"])
        );
        assert!(!on.is_served() && on.rules_off().is_empty());
        assert!(
            Column::parse("auto-with-tool-or-none").is_none(),
            "on already"
        );
        let off = Column::parse("auto-without-repeat-guard").unwrap();
        assert_eq!(
            (off.mode.as_str(), off.off.as_deref()),
            ("auto", Some("repeat-guard"))
        );
        assert_eq!(off.rules_off(), ["repeat-guard"]);
        let group = Column::parse("auto-without-key-hint+tools-hint").unwrap();
        assert_eq!(group.rules_off(), ["key-hint", "tools-hint"]);
        assert_eq!(group.name(), "auto-without-key-hint+tools-hint");
        assert!(Column::parse("auto").unwrap().rules_off().is_empty());
        let served = Column::parse("served-with-tool-or-none").unwrap();
        assert!(served.is_served());
        assert_eq!(
            (served.on.as_deref(), served.off.as_deref()),
            (Some("tool-or-none"), None)
        );
        assert!(!Column::parse("plain").unwrap().is_served());
        let tools = Column::parse("ollm-tools:served").unwrap();
        assert!(tools.ollm_tools && tools.is_served());
        assert!(!Column::parse("served").unwrap().ollm_tools);
        for bad in [
            "magic",
            "auto-without-",
            "native-without-x",
            "served-with-",
            "served-with-repeat-guard",
            "served-without-",
            "ollm-tools:",
            "ollm-tools:auto",
            "ollm-tools:ollm-tools:plain",
        ] {
            assert_eq!(Column::parse(bad), None, "{bad}");
        }
    }
}
