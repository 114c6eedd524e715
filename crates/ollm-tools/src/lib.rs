//! Built-in tools for ollm and the rules they run under.
//!
//! ```
//! use std::sync::Arc;
//!
//! use ollm_tools::{Answer, Approver, Mode, Prompter, Request, ToolConfig, Workspace};
//! use ollm_types::ToolCall;
//! use serde_json::json;
//!
//! /// The front end's part: asking the user and showing warnings (here: nobody to ask).
//! struct Nobody;
//!
//! #[async_trait::async_trait]
//! impl Prompter for Nobody {
//!     async fn ask(&self, _request: &Request) -> Answer {
//!         Answer::Deny
//!     }
//!     fn warn(&self, _message: &str) {}
//! }
//!
//! let folder = tempfile::tempdir()?;
//! std::fs::write(folder.path().join("notes.txt"), "port = 8080\n")?;
//! let workspace = Workspace::new(folder.path())?;
//! let config = ToolConfig { audit_log: folder.path().join("audit.log"), ..ToolConfig::default() };
//! let approver = Arc::new(Approver::new(Mode::Headless, &[], Arc::new(Nobody)));
//! let tools = ollm_tools::builtin(&workspace, &config, &approver)?;
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let read = ToolCall::new("1", "read_file", json!({ "path": "notes.txt" }))?;
//! assert!(runtime.block_on(tools.execute(&read)).content.contains("port = 8080"));
//!
//! // Outside the folder is refused, whatever the model asks.
//! let escape = ToolCall::new("2", "read_file", json!({ "path": "../../etc/passwd" }))?;
//! assert!(runtime.block_on(tools.execute(&escape)).is_error);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Hand the registry to a `ChatClient` (see `ollm-core`) and the model can call these tools.
//!
//! - [`workspace`]: every path a tool touches is resolved inside one working directory;
//!   `..` is refused outright, symlinks are followed only when they stay inside, and no
//!   write ever lands in a `.git` file or folder.
//! - [`fs`]: `read_file`, `list_dir`, `search_text` (read-only) and `write_file` (needs
//!   approval; atomic; keeps the replaced file's mode).
//! - [`command`]: `run_command`, a program and an argument list (never a shell), against
//!   an allowlist and per-program argument rules, with a scrubbed environment, its own
//!   process group, a timeout, an output cap and an audit log.
//! - [`approval`]: the policy deciding who says yes, and the [`Prompter`] trait through
//!   which a front end asks the user and shows warnings.
//! - `map`: what the model is told about the folder ([`Workspace::overview`] for the
//!   system prompt) and, for a path that does not exist, the nearest existing ones.
//! - [`private`]: files only their owner may read (the audit log; the CLI's sessions).
//! - [`command::sandbox`]: Landlock confinement of every command on Linux (writes only
//!   inside the folder but not `.git`, no TCP), falling back with one warning, or refusing
//!   when [`Sandbox::Required`].
//!
//! # Decisions
//! - Every tool is a core [`TypedTool`](ollm_core::TypedTool): the argument schema is
//!   derived from a Rust struct, so the schema the model sees and the parsing cannot
//!   drift apart.
//! - This crate prints nothing and reads no configuration: settings arrive as a plain
//!   [`ToolConfig`], and everything the user should see goes through [`Prompter`].
//! - Assume the model is hostile: a tool never reaches outside its folder, never sees the
//!   caller's secrets and never outlives its call.

pub mod approval;
pub mod command;
pub mod fs;
mod map;
pub use map::{PATH_CHOICES, Paths};
pub mod private;
pub mod workspace;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub use approval::{Answer, Approver, Mode, Prompter, Request};
pub use command::sandbox::Sandbox;
pub use workspace::Workspace;

use ollm_core::{CoreError, ToolRegistry};

/// What can go wrong building the tools (running them never fails: a tool's failure is
/// its call's result text).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolsError {
    /// The working directory cannot be used.
    #[error("the working directory {path} is unusable: {source}")]
    Workspace {
        /// The directory asked for.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Registering a tool failed (a duplicate name or a bad schema).
    #[error(transparent)]
    Registry(#[from] CoreError),
}

/// The programs `run_command` may start unless configured otherwise: read-only ones.
pub const DEFAULT_ALLOWED_COMMANDS: &[&str] = &[
    "ls",
    "cat",
    "head",
    "tail",
    "wc",
    "pwd",
    "echo",
    "grep",
    "find",
    "git status",
    "git log",
    "git diff",
    "git show",
    "git branch",
];

/// Settings of the built-in tools, already validated by the caller.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolConfig {
    /// Programs (`git status` style entries allow one subcommand) `run_command` may start.
    pub allowed_commands: Vec<String>,
    /// How long a command may run.
    pub command_timeout: Duration,
    /// Bytes of output a tool returns at most.
    pub output_limit: usize,
    /// The audit log of `run_command`.
    pub audit_log: PathBuf,
    /// Environment variables passed to commands besides the built-in allowlist.
    pub pass_env: Vec<String>,
    /// Variables never passed to commands, whatever else says so (the provider's key).
    pub secret_env: Vec<String>,
    /// Kernel confinement of commands (Landlock on Linux).
    pub sandbox: Sandbox,
}

impl Default for ToolConfig {
    fn default() -> Self {
        ToolConfig {
            allowed_commands: DEFAULT_ALLOWED_COMMANDS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            command_timeout: Duration::from_secs(30),
            output_limit: 16 * 1024,
            audit_log: PathBuf::from("audit.log"),
            pass_env: Vec::new(),
            secret_env: Vec::new(),
            sandbox: Sandbox::Auto,
        }
    }
}

/// The built-in tools that only read the workspace: they need no approval, and the
/// coach's `routed-call` may oblige a call to them (core's `CoachConfig::read_only`).
pub const READ_ONLY_TOOLS: &[&str] = &["read_file", "list_dir", "search_text"];

/// The built-in tool that runs programs.
pub const COMMAND_TOOL: &str = "run_command";

/// The programs `allowed` (entries of [`ToolConfig::allowed_commands`]) lets
/// [`COMMAND_TOOL`] start: each entry's first word (its file name, for a path), once each (`git status` and
/// `git log` allow `git`). What a message names to ask for a command (core's
/// `CoachConfig::programs`, the coach's `named-command`).
pub fn programs(allowed: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let words = allowed.iter().filter_map(|e| e.split_whitespace().next());
    for program in words.filter_map(|w| w.rsplit('/').next()) {
        if !out.iter().any(|p| p == program) {
            out.push(program.to_owned());
        }
    }
    out
}

/// A registry holding the built-in tools, in the order `/tools` lists them.
pub fn builtin(
    workspace: &Workspace,
    config: &ToolConfig,
    approver: &Arc<Approver>,
) -> Result<ToolRegistry, ToolsError> {
    let limit = config.output_limit;
    let mut registry = ToolRegistry::new();
    registry.register_typed(fs::ReadFile::new(workspace.clone(), limit))?;
    registry.register_typed(fs::ListDir::new(workspace.clone(), limit))?;
    registry.register_typed(fs::SearchText::new(workspace.clone(), limit))?;
    registry.register_typed(fs::WriteFile::new(workspace.clone(), Arc::clone(approver)))?;
    registry.register_typed(command::RunCommand::new(
        workspace.clone(),
        command::CommandPolicy::from_config(config),
        Arc::clone(approver),
    ))?;
    Ok(registry)
}

/// Cuts `text` to at most `limit` bytes on a character boundary, saying so when it did.
pub fn cap_output(text: &str, limit: usize) -> String {
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

/// Runs blocking file work off the async threads.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ollm_core::ToolError> + Send + 'static,
) -> Result<T, ollm_core::ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ollm_core::ToolError::Failed(format!("the tool task failed: {e}")))?
}

#[cfg(test)]
pub(crate) mod testing;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_programs_are_the_allowed_commands_first_words_once_each() {
        let allowed: Vec<String> = ["ls", "git status", "git log", "/usr/bin/wc", " "]
            .map(str::to_owned)
            .to_vec();
        assert_eq!(programs(&allowed), ["ls", "git", "wc"]);
        let defaults = programs(&ToolConfig::default().allowed_commands);
        assert!(defaults.contains(&"git".to_owned()) && defaults.contains(&"wc".to_owned()));
        assert_eq!(defaults.iter().filter(|p| *p == "git").count(), 1);
    }

    #[test]
    fn builtin_tools_have_unique_names_and_object_schemas() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let approver = Arc::new(Approver::new(
            Mode::Headless,
            &[],
            testing::Scripted::new(&[]),
        ));
        let registry = builtin(&ws, &ToolConfig::default(), &approver).unwrap();
        assert_eq!(
            registry.names(),
            [
                "read_file",
                "list_dir",
                "search_text",
                "write_file",
                "run_command"
            ]
        );
        for s in registry.schemas() {
            assert_eq!(s.parameters["type"], "object", "{}", s.name);
            assert!(!s.description.is_empty());
        }
    }

    /// What `routed-call` may oblige runs with no one to approve it; what it may not
    /// asks first.
    #[tokio::test]
    async fn the_read_only_tools_need_no_approval_and_the_others_do() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "port = 1\n").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let approver = Arc::new(Approver::new(
            Mode::Headless,
            &[],
            testing::Scripted::new(&[]),
        ));
        // The audit log goes to the test's own folder: the default, `audit.log`, is
        // relative to the working directory, and the test's was the crate's source tree.
        let config = ToolConfig {
            audit_log: dir.path().join("audit/audit.log"),
            ..ToolConfig::default()
        };
        let registry = builtin(&ws, &config, &approver).unwrap();
        let args = |name: &str| match name {
            "read_file" => serde_json::json!({"path": "a.txt"}),
            "search_text" => serde_json::json!({"pattern": "port"}),
            "write_file" => serde_json::json!({"path": "b.txt", "content": "x"}),
            "run_command" => serde_json::json!({"program": "ls"}),
            _ => serde_json::json!({}),
        };
        for name in registry.names() {
            let tool = registry.get(&name).unwrap();
            let serde_json::Value::Object(arguments) = args(&name) else {
                unreachable!()
            };
            let ran = tool.execute(arguments).await;
            let read_only = READ_ONLY_TOOLS.contains(&name.as_str());
            assert_eq!(ran.is_ok(), read_only, "{name}: {ran:?}");
        }
        assert!(!dir.path().join("b.txt").exists());
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
