//! Kernel confinement of `run_command` with Landlock (Linux): the allowlist and the
//! argument rules stop being the only wall.
//!
//! # Decisions
//! - The child may read and execute anywhere, write only beneath the working directory's
//!   entries (not `.git`) and its private temporary folder (and `/dev/null`), and make no
//!   TCP connection or bind where the kernel's ABI can say so (v4 and later).
//! - Landlock's network rules cover TCP only, so a seccomp filter (the `seccompiler`
//!   crate, on x86_64 and aarch64) fails `socket(2)` for every IPv4/IPv6 socket that is not
//!   a stream (UDP, raw IP, SCTP) and `io_uring_setup` (io_uring opens sockets without
//!   `socket(2)`) with `EACCES`: no DNS query or datagram leaves a command. Unix sockets
//!   stay open (local, and under Landlock's file rules). The filter is installed only
//!   when Landlock took hold, on the same spawning thread. Known gaps: on other
//!   architectures UDP stays open; before ABI 4 so does TCP.
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
    if status.ruleset == RulesetStatus::NotEnforced {
        return Ok(Applied::Unsupported);
    }
    refuse_datagram_sockets()?;
    Ok(Applied::Enforced)
}

/// The `socket(2)` calls the filter refuses: IPv4 and IPv6 sockets of every type but a
/// stream (TCP is Landlock's), so UDP, raw IP and SCTP.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
const REFUSED_SOCKETS: [(i32, i32); 6] = [
    (libc::AF_INET, libc::SOCK_DGRAM),
    (libc::AF_INET, libc::SOCK_RAW),
    (libc::AF_INET, libc::SOCK_SEQPACKET),
    (libc::AF_INET6, libc::SOCK_DGRAM),
    (libc::AF_INET6, libc::SOCK_RAW),
    (libc::AF_INET6, libc::SOCK_SEQPACKET),
];

/// Installs a seccomp filter on the calling thread (inherited by its children) that
/// fails [`REFUSED_SOCKETS`] and `io_uring_setup` (io_uring can open sockets without
/// `socket(2)`) with `EACCES`; everything else is allowed.
#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]
fn refuse_datagram_sockets() -> Result<(), String> {
    use seccompiler::{
        BackendError, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
        SeccompFilter, SeccompRule,
    };
    // The type argument also carries SOCK_NONBLOCK and SOCK_CLOEXEC: compare the low bits.
    const SOCK_TYPE_MASK: u64 = 0xf;
    let arg = |index, op, value: i32| {
        SeccompCondition::new(
            index,
            SeccompCmpArgLen::Dword,
            op,
            u64::from(value.unsigned_abs()),
        )
    };
    let compile = || -> Result<BpfProgram, BackendError> {
        let mut socket_rules = Vec::new();
        for (domain, kind) in REFUSED_SOCKETS {
            socket_rules.push(SeccompRule::new(vec![
                arg(0, SeccompCmpOp::Eq, domain)?,
                arg(1, SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK), kind)?,
            ])?);
        }
        let rules = [
            (libc::SYS_socket, socket_rules),
            (libc::SYS_io_uring_setup, Vec::new()),
        ];
        SeccompFilter::new(
            rules.into_iter().collect(),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EACCES.unsigned_abs()),
            std::env::consts::ARCH.try_into()?,
        )?
        .try_into()
    };
    let program = compile().map_err(|e| format!("the network filter: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("the network filter: {e}"))
}

/// Where seccompiler has no backend, UDP stays open (the module docs say so).
#[cfg(all(
    target_os = "linux",
    not(any(target_arch = "x86_64", target_arch = "aarch64"))
))]
fn refuse_datagram_sockets() -> Result<(), String> {
    Ok(())
}

/// Without Linux there is no Landlock.
#[cfg(not(target_os = "linux"))]
pub fn restrict_thread(_plan: &Plan) -> Result<Applied, String> {
    Ok(Applied::Unsupported)
}
