//! Kernel confinement of `run_command` with Landlock (Linux): the allowlist and the
//! argument rules stop being the only wall.
//!
//! # Decisions
//! - The child may read and execute anywhere, write only beneath the working directory's
//!   entries (not `.git`) and its private temporary folder (and `/dev/null`), and make no
//!   TCP connection or bind where the kernel's ABI can say so (v4 and later).
//! - Landlock rules only grant, and a grant covers a whole tree, so `.git` stays
//!   read-only by granting writes on every other top-level entry of the folder instead of
//!   on the folder itself. The price: a command cannot create a new file at the top of
//!   the folder (the default allowlist is read-only anyway).
//! - The rules are applied to a short-lived thread that only spawns the child, which
//!   inherits them; the rest of the process stays unconfined, and no `unsafe` is needed.
//! - Where the kernel lacks Landlock, [`Sandbox::Auto`] runs the command under the other
//!   rules and the caller says so once; [`Sandbox::Required`] refuses to run it.

use std::path::{Path, PathBuf};

/// Whether commands run under kernel confinement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Sandbox {
    /// Use it where the kernel has it; otherwise warn once and run without.
    #[default]
    Auto,
    /// Refuse to run commands where the kernel lacks it.
    Required,
    /// Never use it.
    Off,
}

/// What the sandbox allows one command to write.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Folders and files writable, with everything beneath them.
    pub writable: Vec<PathBuf>,
}

impl Plan {
    /// Writable: every top-level entry of `root` except `.git`, and `tmp`.
    pub fn for_workspace(root: &Path, tmp: &Path) -> Self {
        let mut writable: Vec<PathBuf> = std::fs::read_dir(root)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| !crate::workspace::names_git(Path::new(&e.file_name())))
                    .filter(|e| e.file_type().is_ok_and(|t| !t.is_symlink()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default();
        writable.push(tmp.to_path_buf());
        Plan { writable }
    }
}

/// Whether the rules took hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The kernel enforces them (fully or in part, per its ABI).
    Enforced,
    /// The kernel has no Landlock.
    Unsupported,
}

/// Confines the calling thread (and so the children it starts) to `plan`.
#[cfg(target_os = "linux")]
pub fn restrict_thread(plan: &Plan) -> Result<Applied, String> {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus,
        path_beneath_rules,
    };
    let abi = ABI::V5;
    let fail = |e: landlock::RulesetError| e.to_string();
    let dirs: Vec<&PathBuf> = plan.writable.iter().filter(|p| p.is_dir()).collect();
    let files: Vec<&PathBuf> = plan.writable.iter().filter(|p| !p.is_dir()).collect();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
        .map_err(fail)?
        .create()
        .map_err(fail)?
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(dirs, AccessFs::from_all(abi)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(
            files.into_iter().chain([&PathBuf::from("/dev/null")]),
            AccessFs::from_file(abi),
        ))
        .map_err(fail)?
        .restrict_self()
        .map_err(fail)?;
    Ok(match status.ruleset {
        RulesetStatus::NotEnforced => Applied::Unsupported,
        _ => Applied::Enforced,
    })
}

/// Without Linux there is no Landlock.
#[cfg(not(target_os = "linux"))]
pub fn restrict_thread(_plan: &Plan) -> Result<Applied, String> {
    Ok(Applied::Unsupported)
}
