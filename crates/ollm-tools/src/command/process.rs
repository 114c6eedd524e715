//! Running one command: a scrubbed environment, its own process group, bounded waits.
//!
//! # Decisions
//! - The child gets only an allowlist of the caller's environment (`PATH`, `HOME`,
//!   `LANG`, `LC_*`, `TERM`, `TZ`, `USER`) plus configured additions, and never a variable
//!   named as a secret or whose name looks like one (`*_KEY`, `*_TOKEN`, `*SECRET*`,
//!   `*PASSWORD*`, ...), even if configured. `TMPDIR` points at a private temporary folder
//!   removed afterwards; git gets no system or global config.
//! - Each command leads its own process group. When it times out, is cancelled (the
//!   future dropped) or its direct child has exited, the whole group gets `SIGTERM` and,
//!   after [`GRACE`], `SIGKILL`: nothing it started outlives the call.
//! - After the direct child exits, the pipes are read for at most [`PIPE_GRACE`] more: a
//!   background child holding them open does not turn a finished command into a timeout,
//!   and the output read so far is kept.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use ollm_core::ToolError;
use tokio::io::{AsyncRead, AsyncReadExt};

/// How long a process group has between `SIGTERM` and `SIGKILL`.
pub const GRACE: Duration = Duration::from_millis(500);
/// How long the pipes are read after the direct child exited.
pub const PIPE_GRACE: Duration = Duration::from_millis(300);

/// Variables passed through when the caller has them.
const PASSED: &[&str] = &["PATH", "HOME", "LANG", "TERM", "TZ", "USER"];

/// Name fragments that mark a variable as a secret (compared in upper case).
const SECRET_MARKS: &[&str] = &[
    "_KEY",
    "KEY_",
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "_AUTH",
    "AUTH_",
    "COOKIE",
    "SESSION",
];

/// Whether a variable name looks like it holds a secret.
pub fn looks_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    upper.ends_with("KEY") || SECRET_MARKS.iter().any(|m| upper.contains(m))
}

/// The environment of a child, from the caller's `parent` environment.
pub fn child_env(
    parent: impl IntoIterator<Item = (OsString, OsString)>,
    pass: &[String],
    secrets: &[String],
    tmpdir: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = parent
        .into_iter()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            let wanted =
                PASSED.contains(&name) || name.starts_with("LC_") || pass.iter().any(|p| p == name);
            wanted && !looks_secret(name) && !secrets.iter().any(|s| s == name)
        })
        .collect();
    env.push(("TMPDIR".into(), tmpdir.as_os_str().to_owned()));
    env.push(("GIT_CONFIG_NOSYSTEM".into(), "1".into()));
    env.push(("GIT_CONFIG_GLOBAL".into(), "/dev/null".into()));
    env.push(("GIT_TERMINAL_PROMPT".into(), "0".into()));
    env
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finished {
    /// `exit status N`, or `killed by a signal`.
    pub status: String,
    /// Stdout, then stderr after a `[stderr]` line, capped.
    pub output: String,
    /// Whether the kernel confined it.
    pub confined: bool,
}

/// What to run and under which limits.
#[derive(Debug)]
pub struct Spawn<'a> {
    /// The program and its arguments.
    pub argv: &'a [String],
    /// The working directory.
    pub cwd: &'a Path,
    /// The whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// How long it may run.
    pub timeout: Duration,
    /// Bytes of output kept.
    pub cap: usize,
    /// Kernel confinement to apply, if any.
    pub sandbox: Option<super::sandbox::Plan>,
    /// Refuse to run when the kernel cannot confine the command.
    pub require_sandbox: bool,
}

/// Kills a process group when dropped: `SIGTERM`, then `SIGKILL` after [`GRACE`].
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0.take() {
            stop_group(pgid);
        }
    }
}

#[cfg(unix)]
fn stop_group(pgid: i32) {
    use nix::sys::signal::{Signal, killpg};
    use nix::unistd::Pid;
    let group = Pid::from_raw(pgid);
    if killpg(group, Signal::SIGTERM).is_err() {
        return; // The group is gone already.
    }
    let kill = move || {
        let _ = killpg(group, Signal::SIGKILL);
    };
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => {
            handle.spawn(async move {
                tokio::time::sleep(GRACE).await;
                kill();
            });
        }
        Err(_) => kill(),
    }
}

#[cfg(not(unix))]
fn stop_group(_pgid: i32) {}

/// Runs the command to its end, its timeout, or until the future is dropped.
pub async fn run(spawn: Spawn<'_>) -> Result<Finished, ToolError> {
    run_confined_by(spawn, super::sandbox::restrict_thread).await
}

/// How the spawning thread is confined: [`super::sandbox::restrict_thread`], or in tests
/// a stand-in that reports what a kernel without Landlock would.
pub(crate) type Restrict = fn(&super::sandbox::Plan) -> Result<super::sandbox::Applied, String>;

/// [`run`] with the function that confines the spawning thread (the seam through which
/// tests simulate a kernel without Landlock).
pub(crate) async fn run_confined_by(
    spawn: Spawn<'_>,
    restrict: Restrict,
) -> Result<Finished, ToolError> {
    let (program, args) = spawn
        .argv
        .split_first()
        .ok_or_else(|| ToolError::Failed("no program given".into()))?;
    let mut command = command(program, args, &spawn);
    let (mut child, confined) = spawn_child(
        &mut command,
        spawn.sandbox.as_ref(),
        spawn.require_sandbox,
        restrict,
    )
    .map_err(|e| match e {
        ToolError::Failed(m) => ToolError::Failed(format!("cannot start {program}: {m}")),
        other => other,
    })?;
    let _group = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
    let mut out = Capture::new(child.stdout.take(), spawn.cap);
    let mut err = Capture::new(child.stderr.take(), spawn.cap);
    let deadline = tokio::time::Instant::now() + spawn.timeout;
    let mut status = None;
    let mut pipes_until = None;
    loop {
        if status.is_some() && out.done && err.done {
            break;
        }
        let pipe_wait = pipes_until.unwrap_or(deadline);
        tokio::select! {
            s = child.wait(), if status.is_none() => {
                status = Some(s.map_err(|e| ToolError::Failed(e.to_string()))?);
                pipes_until = Some(tokio::time::Instant::now() + PIPE_GRACE);
            }
            () = out.read(), if !out.done => {}
            () = err.read(), if !err.done => {}
            () = tokio::time::sleep_until(pipe_wait), if pipes_until.is_some() => break,
            () = tokio::time::sleep_until(deadline) => {
                let so_far = combine(&out, &err, spawn.cap);
                return Err(ToolError::Failed(format!(
                    "{program} did not finish within {} s and was killed; output so far:\n{so_far}",
                    spawn.timeout.as_secs_f32()
                )));
            }
        }
    }
    let status = match status.and_then(|s| s.code()) {
        Some(c) => format!("exit status {c}"),
        None => "killed by a signal".to_owned(),
    };
    Ok(Finished {
        status,
        output: combine(&out, &err, spawn.cap),
        confined,
    })
}

/// The command for `program` with `args` as `spawn` says: its folder, only its
/// environment, no stdin, both outputs piped, in a process group of its own (on Unix),
/// killed when dropped.
fn command(program: &str, args: &[String], spawn: &Spawn<'_>) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(spawn.cwd)
        .env_clear()
        .envs(
            spawn
                .env
                .iter()
                .map(|(k, v)| (k.as_os_str(), v.as_os_str())),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    command
}

/// Starts the child, under `plan` when given: the rules are applied to a thread that
/// only spawns, so the child inherits them and this process does not.
fn spawn_child(
    command: &mut tokio::process::Command,
    plan: Option<&super::sandbox::Plan>,
    required: bool,
    restrict: Restrict,
) -> Result<(tokio::process::Child, bool), ToolError> {
    use super::sandbox::Applied;
    let failed = |e: std::io::Error| ToolError::Failed(e.to_string());
    let Some(plan) = plan else {
        return Ok((command.spawn().map_err(failed)?, false));
    };
    let handle = tokio::runtime::Handle::current();
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _runtime = handle.enter();
                let applied = restrict(plan).map_err(ToolError::Failed)?;
                if applied == Applied::Unsupported && required {
                    return Err(ToolError::Failed(
                        "this kernel has no Landlock and the sandbox is required; not run".into(),
                    ));
                }
                let child = command.spawn().map_err(failed)?;
                Ok((child, applied == Applied::Enforced))
            })
            .join()
            .map_err(|_| ToolError::Failed("the sandbox thread panicked".into()))?
    })
}

/// One pipe read up to its end, keeping the first `cap` bytes.
struct Capture<R> {
    reader: Option<R>,
    kept: Vec<u8>,
    total: u64,
    cap: usize,
    done: bool,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin> Capture<R> {
    fn new(reader: Option<R>, cap: usize) -> Self {
        let done = reader.is_none();
        Capture {
            reader,
            kept: Vec::new(),
            total: 0,
            cap,
            done,
            buf: vec![0; 16 * 1024],
        }
    }

    /// Reads one chunk (cancel-safe: a read that did not complete consumed nothing).
    async fn read(&mut self) {
        let Some(reader) = self.reader.as_mut() else {
            self.done = true;
            return;
        };
        match reader.read(&mut self.buf).await {
            Ok(0) | Err(_) => self.done = true,
            Ok(n) => {
                self.total += n as u64;
                let room = self.cap.saturating_sub(self.kept.len());
                self.kept.extend_from_slice(&self.buf[..n.min(room)]);
            }
        }
    }
}

/// Stdout, then stderr, cut to `cap` with a note when anything was dropped.
fn combine<R, S>(out: &Capture<R>, err: &Capture<S>, cap: usize) -> String {
    let total = out.total + err.total;
    let kept = (out.kept.len() + err.kept.len()) as u64;
    let mut text = String::from_utf8_lossy(&out.kept).into_owned();
    if !err.kept.is_empty() {
        text.push_str("\n[stderr]\n");
        text.push_str(&String::from_utf8_lossy(&err.kept));
    }
    if kept < total || text.len() > cap {
        let mut end = cap.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!(
            "{}\n[output truncated: {end} of {total} bytes shown]",
            &text[..end]
        )
    } else {
        text
    }
}

/// Whether an environment variable name is in `env`.
#[cfg(test)]
pub(crate) fn has(env: &[(OsString, OsString)], name: &str) -> bool {
    env.iter()
        .any(|(k, _)| k.as_os_str() == std::ffi::OsStr::new(name))
}
