//! What the task eval and BFCL share: the server a run measures, the workspace's folders,
//! the cache, running a command, a section header. A leaf: it imports no other module of
//! the crate.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The workspace root: two folders above this crate's manifest, fixed at compile time, so
/// the task files and `docs/eval/` are found from any current directory.
pub(crate) fn workspace_root() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    dir.ancestors().nth(2).unwrap_or(dir).to_path_buf()
}

/// Cargo's target folder: `CARGO_TARGET_DIR`, else `target/` under the root.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// ollm's cache (`OLLM_CACHE_DIR`, else `$XDG_CACHE_HOME/ollm`, else `~/.cache/ollm`), the
/// same folder xtask keeps the server and the models in; BFCL's data goes under it.
pub(crate) fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = env::var_os("OLLM_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("ollm"));
    }
    let home = env::var_os("HOME").context("neither OLLM_CACHE_DIR nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache").join("ollm"))
}

/// The cargo that runs us when cargo does (it sets `CARGO`), so a pinned toolchain stays
/// pinned.
pub(crate) fn cargo() -> Command {
    Command::new(env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo")))
}

/// Runs a command with inherited stdio and fails unless it exits with success.
pub(crate) fn run_cmd(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// Prints a section header that stands out in a long log.
pub(crate) fn section(title: &str) {
    println!("\n==> {title}");
}

/// The server a run measures, from the flags: its OpenAI base URL and the model it serves.
pub(crate) struct Server<'a> {
    /// `http://HOST:PORT/v1`, without a trailing `/`.
    pub(crate) url: &'a str,
    /// Sent in every request; it names the result file.
    pub(crate) model: &'a str,
}

impl<'a> Server<'a> {
    /// `--url` and `--model`, both needed for a run.
    pub(crate) fn from_options(url: Option<&'a str>, model: Option<&'a str>) -> Result<Self> {
        let url = url.context(
            "a run needs --url URL, the server's OpenAI base URL (http://HOST:PORT/v1); \
             `cargo xtask eval` starts a llama-server and passes it",
        )?;
        let model = model.context("a run needs --model NAME, the model the server serves")?;
        Ok(Server {
            url: url.trim_end_matches('/'),
            model,
        })
    }

    /// What the result file says of the server: `--server-note`, else its URL.
    pub(crate) fn note(&self, given: Option<&str>) -> String {
        given.map_or_else(|| format!("the server at {}", self.url), str::to_owned)
    }
}
