//! `cargo xtask mcp-servers`: installs the real MCP servers the `ollm-mcp` tests run.
//!
//! The versions are pinned in `test-utils/mcp/package.json` and its `package-lock.json`;
//! `npm ci` installs exactly the locked tree into `<cache>/mcp` (the cache as for
//! `llama-server`: `$OLLM_CACHE_DIR`, else `$XDG_CACHE_HOME/ollm`, else `~/.cache/ollm`).
//! A copy of the lock file in the install marks it complete, so an unchanged lock is not
//! reinstalled and an interrupted install is redone. Scripts are not run (`--ignore-scripts`):
//! the servers are plain JavaScript and need none.
//!
//! The tests find the install through [`ENV`] (set by `cargo xtask ci`) or the default
//! cache path, and fail naming this task when it is missing.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

/// The variable that tells the tests where the servers are installed.
pub(crate) const ENV: &str = "OLLM_MCP_SERVERS";

/// Installs the servers into `<cache>/mcp` if the lock changed; returns that directory.
pub(crate) fn install(root: &Path, cache: &Path) -> Result<PathBuf> {
    let source = root.join("test-utils").join("mcp");
    let dir = cache.join("mcp");
    let lock = fs::read(source.join("package-lock.json")).context("reading the MCP lock file")?;
    let stamp = dir.join("node_modules").join(".ollm-lock.json");
    if fs::read(&stamp).is_ok_and(|installed| installed == lock) {
        println!("MCP servers are installed in {}", dir.display());
        return Ok(dir);
    }
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for file in ["package.json", "package-lock.json"] {
        fs::copy(source.join(file), dir.join(file)).with_context(|| format!("copying {file}"))?;
    }
    crate::run_cmd(Command::new("npm").current_dir(&dir).args([
        "ci",
        "--ignore-scripts",
        "--no-audit",
        "--no-fund",
    ]))
    .context("installing the MCP test servers (is node/npm installed?)")?;
    fs::write(&stamp, lock).context("marking the MCP install complete")?;
    println!("MCP servers installed in {}", dir.display());
    Ok(dir)
}
