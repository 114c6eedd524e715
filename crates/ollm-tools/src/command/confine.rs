//! Argument confinement: every argument that may name a path stays inside the folder,
//! and git's own path syntax (`REV:path`, pathspecs) is held to the same rule.
//!
//! # Decisions
//! - An argument is treated as a path wherever a program could read it as one: an
//!   operand, every word after `--` (even one starting with `-`), the value of
//!   `--opt=value`, and the tail of a short option that looks like a path (`-f/etc/x`).
//!   Such a value is refused when it starts with `~`, is absolute or holds `..` and does
//!   not resolve inside, or exists and resolves (through symlinks) outside.
//! - git reads `REV:path` relative to the top of the repository, which may be above the
//!   folder: the path is resolved from there and must land inside. In a subfolder of a
//!   repository, `log`, `diff` and `show` are limited to the folder with a `.` pathspec,
//!   and pathspec magic (`:/`, `:(top)`) is refused.
//! - git runs with hooks, fsmonitor, external diff, textconv and the pager off, whatever
//!   any config says (`-c` options and `--no-ext-diff --no-textconv`).

use std::path::{Component, Path};

use ollm_core::ToolError;

use crate::workspace::Workspace;

/// The git subcommands that print file contents or diffs.
const GIT_CONTENT: &[&str] = &["log", "diff", "show"];

/// Refuses arguments of `program` that name paths outside the workspace.
pub fn confine_args(ws: &Workspace, program: &str, args: &[String]) -> Result<(), ToolError> {
    let mut operands_only = false;
    for arg in args {
        if arg == "--" && !operands_only {
            operands_only = true;
            continue;
        }
        if operands_only {
            if program == "git" && arg.starts_with(':') {
                return Err(outside(arg, "pathspec magic is refused"));
            }
            check_path(ws, arg, arg)?;
        } else if let Some(long) = arg.strip_prefix("--") {
            if let Some((_, value)) = long.split_once('=') {
                check_path(ws, arg, value)?;
            }
        } else if arg.len() > 1 && arg.starts_with('-') {
            if let Some((_, value)) = arg.split_once('=') {
                check_path(ws, arg, value)?;
            }
            let tail = &arg[2.min(arg.len())..];
            if looks_like_path(tail) {
                check_path(ws, arg, tail)?;
            }
        } else if program == "git" && arg.contains(':') {
            check_git_object(ws, arg)?;
        } else {
            check_path(ws, arg, arg)?;
        }
    }
    Ok(())
}

fn looks_like_path(text: &str) -> bool {
    text.contains('/') || text.starts_with('~') || text.starts_with('.')
}

fn outside(arg: &str, why: &str) -> ToolError {
    ToolError::Failed(format!(
        "{arg}: {why}; paths stay inside the working directory"
    ))
}

/// Checks `value` (part of `arg`) as a path.
fn check_path(ws: &Workspace, arg: &str, value: &str) -> Result<(), ToolError> {
    if value.is_empty() {
        return Ok(());
    }
    if value.starts_with('~') {
        return Err(outside(arg, "home-relative paths are refused"));
    }
    let path = Path::new(value);
    let suspicious =
        path.is_absolute() || path.components().any(|c| matches!(c, Component::ParentDir));
    let exists = std::fs::symlink_metadata(ws.root().join(path)).is_ok();
    if suspicious || exists {
        ws.resolve_existing(value)
            .map_err(|e| ToolError::Failed(format!("{arg}: {e}")))?;
    }
    Ok(())
}

/// Checks git's `REV:path` (and `:path`, `:N:path`): the path is read from the top of
/// the repository unless it starts with `./`.
fn check_git_object(ws: &Workspace, arg: &str) -> Result<(), ToolError> {
    let Some((_, path)) = arg.rsplit_once(':') else {
        return Ok(());
    };
    if path.starts_with('/') || path.starts_with('~') {
        return Err(outside(arg, "that path is outside"));
    }
    if Path::new(path)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        return Err(outside(arg, "`..` is not allowed"));
    }
    let base = if path.starts_with("./") {
        ws.root()
    } else {
        ws.git_toplevel().unwrap_or(ws.root())
    };
    if base.join(path).starts_with(ws.root()) {
        Ok(())
    } else {
        Err(outside(
            arg,
            "that path is outside (git reads it from the repository top)",
        ))
    }
}

/// The argv that actually runs: for git, safety options first, and in a subfolder of a
/// repository a `.` pathspec for the subcommands that print contents.
pub fn harden(ws: &Workspace, program: &str, args: &[String]) -> Vec<String> {
    let mut argv = vec![program.to_owned()];
    if program != "git" {
        argv.extend_from_slice(args);
        return argv;
    }
    for setting in [
        "core.fsmonitor=",
        "core.hooksPath=/dev/null",
        "core.pager=cat",
    ] {
        argv.push("-c".into());
        argv.push(setting.into());
    }
    let Some((sub, rest)) = args.split_first() else {
        return argv;
    };
    argv.push(sub.clone());
    let content = GIT_CONTENT.contains(&sub.as_str());
    if content {
        argv.push("--no-ext-diff".into());
        argv.push("--no-textconv".into());
    }
    argv.extend_from_slice(rest);
    let subfolder = ws.git_toplevel().is_some_and(|top| top != ws.root());
    if content && subfolder {
        match rest.iter().position(|a| a == "--") {
            None => argv.extend(["--".to_owned(), ".".to_owned()]),
            Some(i) if i + 1 == rest.len() => argv.push(".".into()),
            Some(_) => {}
        }
    }
    argv
}
