//! The built-in tools and the rules they run under.
//!
//! - [`workspace`]: every path a tool touches is resolved inside the working directory;
//!   `..` components are refused outright and symlinks are followed only when they stay
//!   inside.
//! - [`fs`]: `read_file`, `list_dir`, `search_text` (read-only) and `write_file` (needs
//!   approval).
//! - [`command`]: `run_command`, a program and an argument list (never a shell), against an
//!   allowlist, with a timeout, an output cap and an audit log.
//! - [`approval`]: who says yes: the user on a terminal, the config or `--yes` headless.

pub(crate) mod approval;
pub(crate) mod command;
pub(crate) mod fs;
pub(crate) mod workspace;

use std::sync::Arc;

use ollm_core::{CoreError, Tool, ToolRegistry};

use crate::config::ToolSettings;
use approval::Approver;
use workspace::Workspace;

/// The built-in tools, in the order `/tools` lists them.
pub(crate) fn builtin(
    workspace: &Workspace,
    settings: &ToolSettings,
    approver: &Arc<Approver>,
) -> Vec<Arc<dyn Tool>> {
    let limit = settings.output_limit;
    vec![
        Arc::new(fs::ReadFile::new(workspace.clone(), limit)),
        Arc::new(fs::ListDir::new(workspace.clone(), limit)),
        Arc::new(fs::SearchText::new(workspace.clone(), limit)),
        Arc::new(fs::WriteFile::new(workspace.clone(), Arc::clone(approver))),
        Arc::new(command::RunCommand::new(
            workspace.clone(),
            command::CommandPolicy::from_settings(settings),
            Arc::clone(approver),
        )),
    ]
}

/// A registry holding `tools`.
pub(crate) fn registry(tools: &[Arc<dyn Tool>]) -> Result<ToolRegistry, CoreError> {
    let mut registry = ToolRegistry::default();
    for tool in tools {
        registry.register(Arc::clone(tool))?;
    }
    Ok(registry)
}

/// Cuts `text` to at most `limit` bytes on a character boundary, saying so when it did.
pub(crate) fn cap_output(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[output truncated: {} of {} bytes shown]",
        &text[..end],
        end,
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn builtin_tools_have_unique_names_and_object_schemas() {
        use crate::config::{Env, settle};
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let settings = settle(&Default::default(), &Env::default(), "c".into(), None).unwrap();
        let approver = Arc::new(Approver::new(
            approval::Mode::Headless,
            &[],
            Arc::new(approval::TerminalPrompter),
        ));
        let tools = builtin(&ws, &settings.tools, &approver);
        let names: Vec<String> = tools.iter().map(|t| t.schema().name).collect();
        assert_eq!(
            names,
            [
                "read_file",
                "list_dir",
                "search_text",
                "write_file",
                "run_command"
            ]
        );
        for t in &tools {
            let s = t.schema();
            assert_eq!(s.parameters["type"], "object", "{}", s.name);
            assert!(!s.description.is_empty());
        }
        assert!(registry(&tools).is_ok());
    }

    proptest! {
        #[test]
        fn capped_output_is_bounded_and_a_prefix(text in ".{0,300}", limit in 0usize..200) {
            let out = cap_output(&text, limit);
            if text.len() <= limit {
                prop_assert_eq!(out, text);
            } else {
                let body = out.split("\n[output truncated").next().unwrap_or_default();
                prop_assert!(body.len() <= limit);
                prop_assert!(text.starts_with(body));
            }
        }
    }
}
