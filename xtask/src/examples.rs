//! The downstream examples (`examples/`) in `cargo xtask ci`.
//!
//! - `example-custom-provider` depends on `ollm-types` and `ollm-core` only: `cargo tree`
//!   must show no HTTP stack under it (the proof a program that brings its own backend
//!   pays for none), and it is run: it exits non-zero unless its model called the tool
//!   and answered with the result.
//! - `example-ollama-agent` needs a real Ollama server: it is always built, and run only
//!   when `OLLAMA_HOST` is set (with the model in `OLLM_EXAMPLE_MODEL`, default `qwen3`).
//! - `example-openai-tools` needs an OpenAI-compatible server (llama-server, vLLM): it is
//!   always built (its recovery half is a unit test of the workspace's tests), and run
//!   only when `OLLM_OPENAI_URL` is set (the base URL with `/v1`; the model in
//!   `OLLM_EXAMPLE_MODEL`, default `default`).
//!
//! # Decisions
//! - The examples are workspace members, not a separate workspace: they share `Cargo.lock`
//!   and `target/`, so CI pays for two small binaries instead of a second build of every
//!   dependency, and fmt, clippy, tidy and machete cover them like any crate.
//! - `cargo tree` (rather than tidy's walk of `cargo metadata`) is what a downstream user
//!   would run to check the same thing; normal and build edges on every target count.

use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::{cargo, run_cmd};

/// The example that must build without HTTP.
const OFFLINE: &str = "example-custom-provider";
/// The example that talks to Ollama.
const AGENT: &str = "example-ollama-agent";
/// The example that talks to an OpenAI-compatible server.
const OPENAI: &str = "example-openai-tools";
/// Crates that mean an HTTP stack (clients, servers, HTTP/2).
const HTTP_CRATES: &[&str] = &["reqwest", "hyper", "h2", "ureq", "curl", "isahc", "surf"];

pub(crate) fn check(root: &Path) -> Result<()> {
    let tree = cargo()
        .current_dir(root)
        .args(["tree", "--locked", "-p", OFFLINE, "-e", "normal,build"])
        .args(["--target", "all", "--prefix", "none", "--format", "{p}"])
        .output()
        .context("could not run `cargo tree`")?;
    if !tree.status.success() {
        bail!(
            "`cargo tree` failed: {}",
            String::from_utf8_lossy(&tree.stderr)
        );
    }
    let found = http_crates(&String::from_utf8_lossy(&tree.stdout));
    if !found.is_empty() {
        bail!("{OFFLINE} must not pull an HTTP stack, but its tree has {found:?}");
    }
    println!("{OFFLINE}: no HTTP crate in its dependency tree");
    run_cmd(
        cargo()
            .current_dir(root)
            .args(["run", "--quiet", "--locked", "-p", OFFLINE]),
    )?;
    run_cmd(
        cargo()
            .current_dir(root)
            .args(["build", "--quiet", "--locked", "-p", AGENT, "-p", OPENAI]),
    )?;
    openai_tools(root)?;
    if std::env::var_os("OLLAMA_HOST").is_none() {
        println!("{AGENT}: built; not run (set OLLAMA_HOST to run it against a server)");
        return Ok(());
    }
    let model = std::env::var("OLLM_EXAMPLE_MODEL").unwrap_or_else(|_| "qwen3".into());
    run_cmd(cargo().current_dir(root).args([
        "run",
        "--quiet",
        "--locked",
        "-p",
        AGENT,
        "--",
        &model,
        "Which files are in this folder? Use a tool.",
    ]))
}

/// Runs `example-openai-tools` against the server at `OLLM_OPENAI_URL`, when it is set.
fn openai_tools(root: &Path) -> Result<()> {
    let Some(url) = std::env::var_os("OLLM_OPENAI_URL") else {
        println!("{OPENAI}: built; not run (set OLLM_OPENAI_URL to run it against a server)");
        return Ok(());
    };
    let model = std::env::var("OLLM_EXAMPLE_MODEL").unwrap_or_else(|_| "default".into());
    run_openai_tools(root, &url, &model)
}

/// `ci`'s real-server step: `example-openai-tools` against a real llama-server with the
/// 0.5B model at temperature 0, started for it and stopped when it ends.
pub(crate) fn openai_tools_on_llama(root: &Path) -> Result<()> {
    let model = crate::llama::model_or_default(None)?;
    let server = crate::llama::start_with(model, crate::llama::Sampling::Pinned)?;
    run_openai_tools(root, std::ffi::OsStr::new(&server.base_url()), model.alias)
}

fn run_openai_tools(root: &Path, url: &std::ffi::OsStr, model: &str) -> Result<()> {
    run_cmd(
        cargo()
            .current_dir(root)
            .args(["run", "--quiet", "--locked", "-p", OPENAI, "--"])
            .arg(url)
            .arg(model),
    )
}

/// The HTTP crates named in `cargo tree --prefix none --format {p}` output, sorted and
/// without repeats.
fn http_crates(tree: &str) -> Vec<String> {
    let mut found: Vec<String> = tree
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| {
            HTTP_CRATES
                .iter()
                .any(|banned| *name == *banned || name.starts_with(&format!("{banned}-")))
        })
        .map(str::to_owned)
        .collect();
    found.sort();
    found.dedup();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_crates_are_found_by_name_and_family() {
        let tree = "example v0.1.0 (/x)\nollm-core v0.1.0 (/y)\nhyper-util v0.1.21\n\
                    reqwest v0.13.5\nhyper v1.12.0\nhyper v1.12.0 (*)\nhttparse v1.9\n\
                    h2o-sim v1\nserde v1.0.229\n";
        assert_eq!(http_crates(tree), ["hyper", "hyper-util", "reqwest"]);
        assert!(http_crates("example v0.1.0 (/x)\ntokio v1.54.1\n").is_empty());
    }
}
