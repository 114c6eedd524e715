//! The e2e run of the official `openai` Python package against `ollm serve`: the venv it
//! lives in, `ollm serve` in front of the real server, and the tool-loop script.
//!
//! # Decisions
//! - The package and each of its dependencies are pinned by version and sha256
//!   (`xtask/e2e/openai-requirements.txt`, `pip install --require-hashes`), in a venv of
//!   their own (`openai-venv` in the cache directory) so they never mix with the
//!   llama.cpp build's venv. The venv is reused while its `openai` is the pinned version.
//! - `ollm serve` listens on port 0 and its first stdout line says where; the process is
//!   killed (by its own id) when the run ends, pass or fail.
//! - The script (`xtask/e2e/openai_tool_loop.py`) says what it asserts and why.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::{env, fs};

use anyhow::{Context, Result, bail};

use super::venv::ensure_venv;
use crate::{run_cmd, section};

/// The pinned version, checked in the venv before reuse.
const OPENAI_VERSION: &str = "3.51.0";

/// `ollm serve` as a child process, killed when dropped.
struct Served {
    child: Child,
    base_url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas in one pool, the one at `victim` (its process id) killed during 20
/// requests (`xtask/e2e/two_replicas.py` says what must hold).
pub(crate) fn two_replicas(
    root: &Path,
    cache: &Path,
    ollm: &Path,
    upstreams: [&str; 2],
    victim: u32,
    model: &str,
) -> Result<()> {
    section("e2e: two replicas in one pool, one killed during 20 requests");
    let python = venv_python(root, cache)?;
    let served = start_serve(ollm, &upstreams)?;
    println!(
        "ollm serve at {} in front of {upstreams:?}",
        served.base_url
    );
    let result = run_cmd(
        Command::new(&python)
            .arg(root.join("xtask/e2e/two_replicas.py"))
            .args([served.base_url.as_str(), model, &victim.to_string()])
            .stdin(Stdio::null()),
    );
    drop(served);
    result
}

/// Runs the tool loop with the `openai` package directly against `upstream` (the real
/// server's `/v1` URL) and through `ollm serve` (the binary `ollm`) in front of it.
pub(crate) fn run(
    root: &Path,
    cache: &Path,
    ollm: &Path,
    upstream: &str,
    model: &str,
) -> Result<()> {
    run_with(root, cache, ollm, upstream, model, &[])
}

/// [`run`], with further arguments for the script (`--direct-gets-no-calls`).
pub(crate) fn run_with(
    root: &Path,
    cache: &Path,
    ollm: &Path,
    upstream: &str,
    model: &str,
    extra: &[&str],
) -> Result<()> {
    section("e2e: the official openai client, directly and through ollm serve");
    let python = venv_python(root, cache)?;
    let served = start_serve(ollm, &[upstream])?;
    println!("ollm serve at {} in front of {upstream}", served.base_url);
    let script = root.join("xtask/e2e/openai_tool_loop.py");
    let result = run_cmd(
        Command::new(&python)
            .arg(&script)
            .args([upstream, served.base_url.as_str(), model])
            .args(extra)
            .stdin(Stdio::null()),
    );
    drop(served);
    result
}

/// The Python of the venv `openai-venv` in `cache`, with the pinned `openai`, installed
/// on first use.
fn venv_python(root: &Path, cache: &Path) -> Result<PathBuf> {
    let venv = cache.join("openai-venv");
    let python = venv.join("bin/python");
    let probe = format!("import openai, sys; sys.exit(openai.__version__ != {OPENAI_VERSION:?})");
    let ready = Command::new(&python)
        .args(["-c", &probe])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ready {
        return Ok(python);
    }
    fs::create_dir_all(venv.parent().unwrap_or(&venv))
        .with_context(|| format!("creating {}", venv.display()))?;
    ensure_venv(&venv)?;
    let requirements = env::var_os("OLLM_OPENAI_REQUIREMENTS").map_or_else(
        || root.join("xtask/e2e/openai-requirements.txt"),
        PathBuf::from,
    );
    section(&format!(
        "pip install openai=={OPENAI_VERSION} (hash-pinned)"
    ));
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--disable-pip-version-check",
                "--require-hashes",
                "-r",
            ])
            .arg(&requirements)
            .stdin(Stdio::null()),
    )?;
    Ok(python)
}

/// Starts `ollm serve` on a free loopback port in front of `upstreams`.
fn start_serve(ollm: &Path, upstreams: &[&str]) -> Result<Served> {
    let mut command = Command::new(ollm);
    command.args(["--provider", "openai", "serve", "--listen", "127.0.0.1:0"]);
    for upstream in upstreams {
        command.args(["--upstream", upstream]);
    }
    let mut child = command
        .args(["--health", "llama", "--health-interval", "1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", ollm.display()))?;
    let stdout = child.stdout.take().context("ollm serve's stdout")?;
    let mut line = String::new();
    let read = BufReader::new(stdout).read_line(&mut line);
    let mut served = Served {
        child,
        base_url: String::new(),
    };
    read.context("reading ollm serve's first line")?;
    let Some(address) = line.trim().strip_prefix("listening on ") else {
        bail!("ollm serve did not say where it listens (said {line:?})");
    };
    served.base_url = format!("{address}/v1");
    Ok(served)
}
