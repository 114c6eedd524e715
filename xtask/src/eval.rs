//! `cargo xtask eval`: starts the real llama-server and runs `ollm-eval` against it.
//!
//! The eval itself, its tasks, grading, columns, ablation, report and BFCL, is the
//! `ollm-eval` crate (`crates/ollm-eval`, issue 36). xtask reads only what decides the
//! server: the model (`--model ALIAS`, the 0.5B by default) and its sampling. It builds
//! the binary with cargo, starts the server, runs the binary with every argument as given
//! plus `--url`, `--server-note` and (unless given) `--model`, and stops the server when
//! the binary exits.
//!
//! # Decisions
//!
//! - **The server's sampling follows the eval's**: llama.cpp's own (a user's server) for
//!   the default column, the pinned temperature 0 for `--smoke`, a set `--temperature`
//!   and `--bfcl`, as when the eval started the server itself.
//! - **Built before the server starts**: `cargo build -p ollm-eval`, and `-p ollm-cli` on
//!   its own (as the binary builds it, so the features match and its own build finds
//!   nothing to do) when the ollm columns run this workspace's `ollm`; then the binary
//!   from the target folder. A compile error costs no server start, and the server does
//!   not sit idle through a build.
//! - **The arguments are checked first** (`ollm-eval ARGS --check`), so a wrong flag
//!   fails before a server starts.
//! - **No server** for `--list`, `--table`, `--regrade` and `--help`, nor when `--url`
//!   points at one already running.

use std::path::Path;
use std::process::Command;

use anyhow::Result;

use crate::llama::{self, Sampling, target_dir};
use crate::{cargo, run_cmd, section};

/// What xtask reads of the eval's arguments; all of them pass through.
#[derive(Debug, PartialEq)]
struct Plan<'a> {
    /// The sampling of the server to start; `None`: start none.
    server: Option<Sampling>,
    /// `--model`'s alias, if given.
    model: Option<&'a str>,
    /// Whether the run measures this workspace's `ollm` (task columns, no `--ollm`).
    ollm: bool,
}

impl<'a> Plan<'a> {
    fn read(args: &'a [String]) -> Self {
        let has = |flag: &str| args.iter().any(|a| a == flag);
        let no_server = ["--list", "--table", "--regrade", "--url", "--help", "-h"];
        let server = if no_server.into_iter().any(has) {
            None
        } else if ["--bfcl", "--smoke", "--temperature"].into_iter().any(has) {
            Some(Sampling::Pinned)
        } else {
            Some(Sampling::Stock)
        };
        let model = args
            .iter()
            .position(|a| a == "--model")
            .and_then(|i| args.get(i + 1))
            .map(String::as_str);
        let ollm = server.is_some() && !has("--bfcl") && !has("--ollm");
        Plan {
            server,
            model,
            ollm,
        }
    }
}

/// `cargo xtask eval ARGS`.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<()> {
    let plan = Plan::read(args);
    let model = match plan.server {
        Some(_) => Some(llama::model_or_default(plan.model)?),
        None => None,
    };
    build(root, "ollm-eval")?;
    let binary = target_dir(root).join("debug/ollm-eval");
    let mut cmd = Command::new(&binary);
    cmd.current_dir(root).args(args);
    let (Some(sampling), Some(model)) = (plan.server, model) else {
        return run_cmd(&mut cmd);
    };
    // Wrong flags fail here, before a build of ollm or a server start.
    run_cmd(Command::new(&binary).args(args).arg("--check"))?;
    if plan.ollm {
        build(root, "ollm-cli")?;
    }
    let server = llama::start_with(model, sampling)?;
    let note = format!(
        "llama-server: {} --jinja -c 16384 -np 2, via xtask's llama::start",
        server.origin
    );
    cmd.args(["--url", &server.base_url(), "--server-note", &note]);
    if plan.model.is_none() {
        cmd.args(["--model", model.alias]);
    }
    // The server stops when `server` drops, after the binary exits either way.
    run_cmd(&mut cmd)
}

/// `cargo build -q -p KRATE`, the debug build.
fn build(root: &Path, krate: &str) -> Result<()> {
    section(&format!("eval: build {krate}"));
    run_cmd(cargo().current_dir(root).args(["build", "-q", "-p", krate]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Sampling::{Pinned, Stock};

    fn check(args: &[&str], server: Option<Sampling>, model: Option<&str>, ollm: bool) {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let want = Plan {
            server,
            model,
            ollm,
        };
        assert_eq!(Plan::read(&args), want, "{args:?}");
    }

    #[test]
    fn the_server_sampling_follows_the_eval() {
        check(&[], Some(Stock), None, true);
        check(
            &["--columns", "auto", "--repeats", "3"],
            Some(Stock),
            None,
            true,
        );
        check(&["--smoke"], Some(Pinned), None, true);
        check(&["--temperature", "0"], Some(Pinned), None, true);
        check(&["--ablate", "--rules", "all"], Some(Stock), None, true);
    }

    #[test]
    fn bfcl_and_a_given_ollm_build_no_ollm() {
        let bfcl = ["--bfcl", "--model", "qwen2.5-coder-1.5b"];
        check(&bfcl, Some(Pinned), Some("qwen2.5-coder-1.5b"), false);
        check(&["--ollm", "/usr/bin/ollm"], Some(Stock), None, false);
    }

    #[test]
    fn lists_tables_regrades_and_a_given_url_start_no_server() {
        check(&["--list"], None, None, false);
        check(&["--table"], None, None, false);
        check(&["--bfcl", "--regrade"], None, None, false);
        let url = ["--url", "http://127.0.0.1:9/v1", "--model", "m"];
        check(&url, None, Some("m"), false);
        check(&["--help"], None, None, false);
    }
}
