//! ollm's built-in tools for the plain loop: the `ollm-tools:` columns
//! (`ollm-tools:served`, `ollm-tools:plain`) run the bare client's calls on `ollm-tools`
//! itself instead of the eval's own bare copies (`plain.rs`).
//!
//! # Decisions
//!
//! - **Why**: a plain client through `ollm serve` scored 11/33 on the 1.5B's held-out
//!   part against `ollm run`'s 18/33 on the same build (2026-11-27), nearly all of it
//!   on tool tasks. The two differ in two things: serve's repair against the CLI's, and
//!   the plain loop's bare tools against ollm's, whose results are written for small
//!   models (a listing's tally, a file's line count, a search's fallbacks, a checklist's
//!   count). These columns hold the tools equal, so what is left is serve's repair and
//!   what only the CLI sends (the working-folder line; issue 37). On 2026-11-27 the tools
//!   turned out not to be the gap: the 1.5B through serve scored 11/33 with either.
//! - **As the CLI builds them** for `ollm run --yes` in the eval: the default
//!   [`ToolConfig`] (its allowlist of programs, its output limit), every call approved.
//!   The audit log goes beside the project, never in it, where it would count as a
//!   change the task did not ask for.
//! - **The plain loop's calling convention**: a call runs the tool's own `execute` with
//!   the arguments as sent (no schema validation, no coach), an error is `Err` with its
//!   text, and an unknown tool is the same `Unknown tool` error as the bare tools give.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use ollm_core::ToolRegistry;
use ollm_tools::{Answer, Approver, Mode, Prompter, Request, ToolConfig, Workspace};
use serde_json::Value;

/// ollm's built-in tools on one project, and the runtime their calls run on.
pub(super) struct OllmTools {
    runtime: tokio::runtime::Runtime,
    tools: ToolRegistry,
}

/// Nobody to ask: every call is approved up front ([`Mode::Yes`]), as `--yes` does.
struct Approved;

#[async_trait::async_trait]
impl Prompter for Approved {
    async fn ask(&self, _request: &Request) -> Answer {
        Answer::Once
    }
    fn warn(&self, message: &str) {
        eprintln!("eval: ollm-tools: {message}");
    }
}

impl OllmTools {
    /// The built-in tools working in `project`.
    pub(super) fn new(project: &Path) -> Result<OllmTools> {
        let workspace = Workspace::new(project).context("the project as a workspace")?;
        let audit_log = project
            .parent()
            .context("the project has a parent folder")?
            .join("ollm-tools-audit.log");
        let config = ToolConfig {
            audit_log,
            ..ToolConfig::default()
        };
        let approver = Arc::new(Approver::new(Mode::Yes, &[], Arc::new(Approved)));
        let tools = ollm_tools::builtin(&workspace, &config, &approver)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(OllmTools { runtime, tools })
    }

    /// One call: the tool's text, or its error's.
    pub(super) fn execute(&self, name: &str, args: &Value) -> Result<String, String> {
        let tool = (self.tools.get(name)).ok_or_else(|| format!("Unknown tool \"{name}\""))?;
        let arguments = args.as_object().cloned().unwrap_or_default();
        match self.runtime.block_on(tool.execute(arguments)) {
            Ok(Value::String(text)) => Ok(text),
            Ok(other) => Ok(other.to_string()),
            Err(err) => Err(err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_built_in_tools_answer_as_ollm_run_gets_them() {
        let scratch = tempfile::tempdir().unwrap();
        let project = scratch.path().join("p");
        std::fs::create_dir(&project).unwrap();
        std::fs::write(project.join("todo.md"), "- [ ] a\n- [x] b\n").unwrap();
        let tools = OllmTools::new(&project).unwrap();
        let read = tools.execute("read_file", &json!({"path": "todo.md"}));
        assert!(read.unwrap().contains("[todo.md ends: 2 lines]"));
        let listed = tools.execute("list_dir", &json!({})).unwrap();
        assert!(listed.starts_with("[1 .md file]"), "{listed}");
        let wrote = tools.execute("write_file", &json!({"path": "x.txt", "content": "y"}));
        assert!(wrote.is_ok() && project.join("x.txt").is_file());
        assert!(
            tools
                .execute("read_file", &json!({"path": "../p"}))
                .is_err()
        );
        assert_eq!(
            tools.execute("nope", &json!({})),
            Err("Unknown tool \"nope\"".to_owned())
        );
        // The audit log is never written into the project.
        let _ = tools.execute("run_command", &json!({"program": "ls"}));
        assert!(!project.join("ollm-tools-audit.log").exists());
    }
}
