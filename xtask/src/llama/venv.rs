//! The cache's Python virtual environment and the folder chores of installing into it.
//!
//! A leaf: `install.rs` and `model.rs` both install with the venv's pip.

use std::path::Path;
use std::process::{Command, Stdio};
use std::{env, fs, io};

use anyhow::{Context, Result};

use crate::{run_cmd, section};

/// Creates the venv, or recreates it when its interpreter no longer runs (a cache restored
/// onto a machine whose Python lives elsewhere).
pub(crate) fn ensure_venv(venv: &Path) -> Result<()> {
    let works = Command::new(venv.join("bin/python"))
        .args(["-m", "pip", "--version"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if works {
        return Ok(());
    }
    let python = env::var_os("OLLM_PYTHON").unwrap_or_else(|| "python3".into());
    section(&format!("create the venv {}", venv.display()));
    run_cmd(
        Command::new(python)
            .args(["-m", "venv", "--clear"])
            .arg(venv)
            .stdin(Stdio::null()),
    )
}

/// Removes `dir` and everything in it; a missing folder is fine.
pub(crate) fn remove_dir_if_present(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => {
            Err(err).with_context(|| format!("removing {}", dir.display()))
        }
        _ => Ok(()),
    }
}
