//! The process group of a stdio server: the one piece both the start (`connect.rs`, when a
//! start is given up) and the shutdown (`server.rs`) need.
//!
//! # Decisions
//! - A leaf module, importing nothing from the crate: `connect` and `server` both call it,
//!   and it lived in `server` before, which made `server` and `connect` import each other.

/// Kills what is left of a stdio server's process group (the server led its own group).
pub(crate) fn kill_group(pid: Option<u32>) {
    #[cfg(unix)]
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    #[cfg(not(unix))]
    let _ = pid;
}
