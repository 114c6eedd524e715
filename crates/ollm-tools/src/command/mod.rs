//! `run_command`: a program and an argument list, never a shell.
//!
//! A call must name an allowed program (or an allowed `program subcommand` pair), contain
//! no shell metacharacters anywhere, pass the per-program option table ([`rules`]) and
//! the argument confinement ([`confine`]), and be approved with the exact argv shown. It
//! runs in the working directory with stdin closed, a scrubbed environment, its own
//! process group, a timeout and an output cap ([`process`]). Every call, run or denied,
//! is appended to the audit log as one JSON line, in a file only its owner can read.

pub mod confine;
pub mod process;
pub mod rules;
pub mod sandbox;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use ollm_core::{ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::approval::{Approver, Request};
use crate::workspace::Workspace;
use crate::{ToolConfig, cap_output};

pub use rules::{Refusal, check_command};

/// What `run_command` may do.
#[derive(Debug, Clone)]
pub struct CommandPolicy {
    /// Entries such as `ls` (any arguments) or `git status` (that subcommand only).
    pub allowed: Vec<String>,
    /// How long a command may run.
    pub timeout: Duration,
    /// Bytes of output kept.
    pub output_limit: usize,
    /// The audit log.
    pub audit_log: PathBuf,
    /// Environment variables passed besides the built-in allowlist.
    pub pass_env: Vec<String>,
    /// Variables never passed.
    pub secret_env: Vec<String>,
    /// Kernel confinement.
    pub sandbox: sandbox::Sandbox,
}

impl CommandPolicy {
    /// The policy the configuration describes.
    pub fn from_config(c: &ToolConfig) -> Self {
        CommandPolicy {
            allowed: c.allowed_commands.clone(),
            timeout: c.command_timeout,
            output_limit: c.output_limit,
            audit_log: c.audit_log.clone(),
            pass_env: c.pass_env.clone(),
            secret_env: c.secret_env.clone(),
            sandbox: c.sandbox,
        }
    }
}

/// Arguments of `run_command`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RunCommandArgs {
    /// The program, for example "git".
    pub program: String,
    /// Its arguments, one per item.
    #[serde(default)]
    pub args: Option<Vec<String>>,
}

/// A whole command line written as the program (`"git show HEAD"`, no `args`), as the
/// Qwen2.5-Coder-1.5B wrote it (issue 24's eval), split into its words. Only without
/// `args` and quotes: a quoted line needs a shell's reading, which this tool never does,
/// so it is left to be refused as it stands. The words then pass every check as any
/// argument list does.
fn split_program(program: String, args: Vec<String>) -> (String, Vec<String>) {
    let quoted = program.contains(['"', '\'', '`', '\\']);
    let mut words = program.split_whitespace();
    match (words.next(), args.is_empty() && !quoted) {
        (Some(first), true) if first.len() < program.trim().len() => {
            let rest = words.map(str::to_owned).collect();
            (first.to_owned(), rest)
        }
        _ => {
            let args = without_program(&program, args);
            (program, args)
        }
    }
}

/// The arguments without a first one that repeats the program: the 1.5B wrote
/// `{"program": "wc", "args": ["wc", "-l", "sales.csv"]}` (the whole argv), `wc` read
/// its own name as a file, and the model answered "sales.csv doesn't exist" (eval
/// tuning part, 2026-11-27, 3 of 3 wordings). Only with more arguments after it, so a
/// lone repeated word (`echo echo`) is left as written.
fn without_program(program: &str, mut args: Vec<String>) -> Vec<String> {
    if args.len() > 1 && args[0] == program {
        args.remove(0);
    }
    args
}

/// The `run_command` tool.
#[derive(Debug)]
pub struct RunCommand {
    ws: Workspace,
    policy: CommandPolicy,
    approver: Arc<Approver>,
    description: String,
    warned_log: AtomicBool,
    warned_sandbox: AtomicBool,
}

impl RunCommand {
    /// The tool.
    pub fn new(ws: Workspace, policy: CommandPolicy, approver: Arc<Approver>) -> Self {
        let description = format!(
            "Run a program (no shell) in the working directory and return its exit status and output. \
             The user must approve. Allowed: {}.",
            policy.allowed.join(", ")
        );
        RunCommand {
            ws,
            policy,
            approver,
            description,
            warned_log: AtomicBool::new(false),
            warned_sandbox: AtomicBool::new(false),
        }
    }

    /// Appends one JSON line to the audit log; failing to log is a warning, not a failed
    /// call (the command has already run).
    fn audit(&self, argv: &[String], args: &[String], status: &str, output: &str) {
        let record = json!({
            "time_unix": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            "program": argv.first(),
            "args": args,
            "argv": argv,
            "status": status,
            "output": cap_output(output, 2048),
        });
        let path = &self.policy.audit_log;
        let written = crate::private::open_private_append(path).and_then(|mut opened| {
            use std::io::Write;
            opened.file.write_all(format!("{record}\n").as_bytes())?;
            Ok(opened.warnings)
        });
        let warnings = match written {
            Ok(warnings) => warnings,
            Err(e) => vec![format!(
                "could not write the audit log {}: {e}",
                path.display()
            )],
        };
        if !warnings.is_empty() && !self.warned_log.swap(true, Ordering::Relaxed) {
            for w in warnings {
                self.approver.warn(&w);
            }
        }
    }
}

#[async_trait]
impl TypedTool for RunCommand {
    type Args = RunCommandArgs;

    fn name(&self) -> &str {
        crate::COMMAND_TOOL
    }

    fn description(&self) -> &str {
        &self.description
    }

    async fn run(&self, call: RunCommandArgs) -> Result<Value, ToolError> {
        let (program, args) = split_program(call.program, call.args.unwrap_or_default());
        let entry = check_command(&self.policy.allowed, &program, &args)
            .map_err(|r| ToolError::Failed(r.to_string()))?;
        confine::confine_args(&self.ws, &program, &args)?;
        let argv = confine::harden(&self.ws, &program, &args);
        let request = Request::RunCommand { argv: argv.clone() };
        if !self.approver.approve("run_command", &entry, request).await {
            self.audit(&argv, &args, "denied", "");
            return Err(self.approver.denial());
        }
        let tmp = tempfile::Builder::new()
            .prefix("ollm-tool-")
            .tempdir()
            .map_err(|e| ToolError::Failed(format!("no private temporary folder: {e}")))?;
        let env = process::child_env(
            std::env::vars_os(),
            &self.policy.pass_env,
            &self.policy.secret_env,
            tmp.path(),
        );
        let outcome = process::run(process::Spawn {
            argv: &argv,
            cwd: self.ws.root(),
            env,
            timeout: self.policy.timeout,
            cap: self.policy.output_limit,
            sandbox: (self.policy.sandbox != sandbox::Sandbox::Off)
                .then(|| sandbox::Plan::for_workspace(self.ws.root(), tmp.path())),
            require_sandbox: self.policy.sandbox == sandbox::Sandbox::Required,
        })
        .await;
        if let Ok(f) = &outcome {
            let wanted = self.policy.sandbox != sandbox::Sandbox::Off;
            if wanted && !f.confined && !self.warned_sandbox.swap(true, Ordering::Relaxed) {
                self.approver.warn(
                    "this kernel has no Landlock: commands run under the allowlist and \
                     argument rules only (set tools.sandbox = \"required\" to refuse instead)",
                );
            }
        }
        match &outcome {
            Ok(f) => self.audit(&argv, &args, &f.status, &f.output),
            Err(e) => self.audit(&argv, &args, &format!("failed: {e}"), ""),
        }
        let finished = outcome?;
        Ok(Value::String(format!(
            "{}\n{}",
            finished.status, finished.output
        )))
    }
}

#[cfg(test)]
mod tests;
