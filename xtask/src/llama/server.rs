//! One running `llama-server`: start, readiness, crash reports, stop.
//!
//! # Readiness means a completion
//!
//! `/health` answers 200 once the model is loaded, but a server whose CPU code this
//! machine cannot run is "healthy" until its first matrix product kills it. So after
//! `/health`, one tiny completion (one token) must come back 200 with `choices` before the
//! server counts as ready. Both happen within one deadline.
//!
//! # A crash says what it means
//!
//! A server that exits before it is ready is reported with its real end: the signal from
//! the wait status (never a guess from the log), what that signal means for a llama.cpp
//! build and the remedy (SIGILL: built for a CPU feature this machine does not enable),
//! then the last lines of its log. [`StartError`] keeps that as data, so the caller can
//! fall back to the portable build on SIGILL and tests can match the variant.
//!
//! The server is stopped by its process id (SIGTERM, then SIGKILL after 5 s) when the
//! [`Server`] guard is dropped: on success, on error, and on panic. On Ctrl-C the terminal
//! signals the whole foreground process group, which includes the server, so it stops too.
//! And where util-linux's `setpriv` exists, the server runs under `--pdeathsig TERM`, so
//! it also stops when this process is killed outright.

use std::fmt;
use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::installed::{Binary, library_path};

/// How long the server gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// How long a server that dropped the readiness request gets to show that it died.
const DEATH_GRACE: Duration = Duration::from_secs(5);
/// How many log lines a failure shows.
const LOG_TAIL: usize = 40;
/// The readiness completion: one token, temperature 0.
const READY_BODY: &str =
    r#"{"messages":[{"role":"user","content":"Say OK."}],"max_tokens":1,"temperature":0}"#;

/// What to start.
pub(crate) struct Launch<'a> {
    pub(crate) binary: &'a Binary,
    /// The server's arguments (model, name, context, ...), without host and port.
    pub(crate) args: Vec<String>,
    /// Where `llama-server-<port>.log` goes.
    pub(crate) logs: &'a Path,
    /// How long loading and the first completion may take together.
    pub(crate) timeout: Duration,
    /// A program the server runs under (`qemu-x86_64 -cpu Haswell-v4` for the portability
    /// check), or empty.
    pub(crate) wrapper: Vec<String>,
}

/// Why a server did not become ready.
#[derive(Debug)]
pub(crate) enum StartError {
    /// It exited: `signal` when a signal ended it, else `code`.
    Died {
        signal: Option<i32>,
        code: Option<i32>,
        phase: Phase,
        log_tail: String,
    },
    /// It was still running but not ready at the deadline.
    NotReady {
        after: Duration,
        phase: Phase,
        log_tail: String,
    },
    /// It answered the readiness completion with something other than a completion.
    BadCompletion { reply: String, log_tail: String },
}

/// How far start-up got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Before `/health` answered 200.
    Loading,
    /// During the readiness completion.
    FirstCompletion,
}

impl StartError {
    /// Whether the server died of SIGILL: code for a CPU feature this machine lacks.
    pub(crate) fn is_illegal_instruction(&self) -> bool {
        matches!(
            self,
            Self::Died {
                signal: Some(4),
                ..
            }
        )
    }
}

impl fmt::Display for StartError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Died {
                signal,
                code,
                phase,
                log_tail,
            } => {
                let when = phase.describe();
                match (signal, code) {
                    (Some(signal), _) => {
                        let (name, meaning) = signal_meaning(*signal);
                        write!(f, "llama-server died of {name} {when}: {meaning}")?;
                    }
                    (None, code) => write!(
                        f,
                        "llama-server exited with code {} {when}: a bad argument, a missing \
                         library or an unreadable model; the log below says which",
                        code.map_or_else(|| "?".to_owned(), |c| c.to_string())
                    )?,
                }
                write!(f, "\n{log_tail}")
            }
            Self::NotReady {
                after,
                phase,
                log_tail,
            } => write!(
                f,
                "llama-server was still running but not ready after {after:?} ({}); it was \
                 stopped\n{log_tail}",
                phase.describe()
            ),
            Self::BadCompletion { reply, log_tail } => write!(
                f,
                "llama-server answered /health but its first completion failed: {reply}\n{log_tail}"
            ),
        }
    }
}

impl std::error::Error for StartError {}

impl Phase {
    fn describe(self) -> &'static str {
        match self {
            Self::Loading => "while loading the model",
            Self::FirstCompletion => "during its first completion",
        }
    }
}

/// A signal's name and what it means for a llama-server, with the remedy.
pub(crate) fn signal_meaning(signal: i32) -> (String, &'static str) {
    let (name, meaning) = match signal {
        4 => (
            "SIGILL",
            "illegal instruction: this llama-server was built for a CPU feature this \
             machine does not enable (AVX-512, or AMX on a VM whose kernel does not grant \
             it). Remedy: OLLM_LLAMA_BUILD=baseline runs a prebuilt server for any \
             x86-64-v3 CPU (AVX2), OLLM_LLAMA_BUILD=source builds one, or point \
             OLLM_LLAMA_SERVER at a llama-server built for this CPU",
        ),
        6 => (
            "SIGABRT",
            "aborted: an internal assertion (GGML_ASSERT) or an uncaught exception; the \
             log shows which",
        ),
        7 => (
            "SIGBUS",
            "bus error: the mapped model file changed or shrank, or the disk is full",
        ),
        9 => (
            "SIGKILL",
            "killed from outside, most often by the kernel's out-of-memory killer (see \
             dmesg): the model and context need more memory than is free",
        ),
        11 => (
            "SIGSEGV",
            "segmentation fault: a crash inside the server (a bug, or libraries from \
             another build); the log shows where it stopped",
        ),
        15 | 2 => ("SIGTERM/SIGINT", "stopped by a signal from outside"),
        _ => ("a signal", "see the log"),
    };
    let name = if name == "a signal" {
        format!("signal {signal}")
    } else {
        format!("{name} (signal {signal})")
    };
    (name, meaning)
}

/// A running `llama-server`, stopped by process id when dropped.
pub(crate) struct Server {
    child: Child,
    port: u16,
    pub(crate) log: PathBuf,
    /// From start to `/health` answering 200: loading the model.
    pub(crate) load_time: Duration,
    /// The readiness completion.
    pub(crate) first_answer_time: Duration,
    /// Which server this is, for records (set by `llama::start`: the path it came from).
    pub(crate) origin: String,
}

impl Server {
    /// Starts the server on a free loopback port and waits until it is ready.
    pub(crate) fn launch(launch: &Launch<'_>) -> Result<Self> {
        let port = free_port()?;
        fs::create_dir_all(launch.logs)
            .with_context(|| format!("creating {}", launch.logs.display()))?;
        let log = launch.logs.join(format!("llama-server-{port}.log"));
        let log_file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = server_command(&launch.wrapper, &launch.binary.path);
        cmd.args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(&launch.args)
            // llama.cpp's OpenMP threads spin while they wait; on a busy 2-core machine
            // that starved generation to 2 tokens/s, against 17-21 when they sleep.
            .env("OMP_WAIT_POLICY", "passive")
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().context("duplicating the log handle")?)
            .stderr(log_file);
        if let Some(dir) = &launch.binary.lib_dir {
            cmd.env("LD_LIBRARY_PATH", library_path(dir));
        }
        println!("$ {cmd:?}");
        let child = cmd
            .spawn()
            .with_context(|| format!("could not start {}", launch.binary.path.display()))?;
        let mut server = Self {
            child,
            port,
            log,
            load_time: Duration::ZERO,
            first_answer_time: Duration::ZERO,
            origin: launch.binary.path.display().to_string(),
        };
        println!(
            "llama-server pid {} on port {port}, log {}",
            server.child.id(),
            server.log.display()
        );
        server.wait_ready(Instant::now() + launch.timeout)?;
        Ok(server)
    }

    /// The server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The OpenAI-compatible base URL.
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Waits for the server to exit (for `cargo xtask server`).
    pub(crate) fn wait(&mut self) -> Result<ExitStatus> {
        self.child.wait().context("waiting for llama-server")
    }

    /// `/health`, then the readiness completion, before `deadline`.
    fn wait_ready(&mut self, deadline: Instant) -> Result<(), StartError> {
        let started = Instant::now();
        loop {
            self.check_alive(Phase::Loading)?;
            // 503 while the model loads, 200 once it can serve.
            if http(self.port, "GET", "/health", "", Duration::from_secs(2))
                .is_ok_and(|(status, _)| status == 200)
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(self.not_ready(started, Phase::Loading));
            }
            sleep(Duration::from_millis(100));
        }
        self.load_time = started.elapsed();
        let asked = Instant::now();
        let left = deadline.saturating_duration_since(Instant::now());
        let reply = http(
            self.port,
            "POST",
            "/v1/chat/completions",
            READY_BODY,
            left.max(Duration::from_secs(1)),
        );
        match reply {
            Ok((200, body)) if body.contains("\"choices\"") => {
                self.first_answer_time = asked.elapsed();
                Ok(())
            }
            Ok((status, body)) => Err(StartError::BadCompletion {
                reply: format!("HTTP {status}: {}", shorten(&body)),
                log_tail: self.log_tail(),
            }),
            Err(err) => {
                // A crash drops the connection; its exit status follows shortly.
                let grace = Instant::now() + DEATH_GRACE;
                while Instant::now() < grace {
                    self.check_alive(Phase::FirstCompletion)?;
                    sleep(Duration::from_millis(50));
                }
                if Instant::now() > deadline {
                    return Err(self.not_ready(started, Phase::FirstCompletion));
                }
                Err(StartError::BadCompletion {
                    reply: format!("{err:#}"),
                    log_tail: self.log_tail(),
                })
            }
        }
    }

    fn check_alive(&mut self, phase: Phase) -> Result<(), StartError> {
        match self.child.try_wait() {
            Ok(Some(status)) => Err(StartError::Died {
                signal: status.signal(),
                code: status.code(),
                phase,
                log_tail: self.log_tail(),
            }),
            _ => Ok(()),
        }
    }

    fn not_ready(&self, started: Instant, phase: Phase) -> StartError {
        StartError::NotReady {
            after: started.elapsed(),
            phase,
            log_tail: self.log_tail(),
        }
    }

    /// The last lines of the log, with a heading.
    pub(crate) fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL)..].join("\n");
        format!("--- last lines of {} ---\n{tail}", self.log.display())
    }

    /// Whether the server's log says ggml's AMX gate refused AMX (the kernel did not
    /// grant the tile state), so no AMX code runs.
    pub(crate) fn amx_refused(&self) -> bool {
        fs::read_to_string(&self.log).is_ok_and(|t| t.contains("AMX is not ready to be used"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id();
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        // SIGTERM first so the server can close its sockets, then SIGKILL.
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .stderr(Stdio::null())
            .status();
        let deadline = Instant::now() + STOP_GRACE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                println!("llama-server (pid {pid}) stopped");
                return;
            }
            sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        println!("llama-server (pid {pid}) killed after {STOP_GRACE:?}");
    }
}

/// The command that runs `binary` (under `wrapper`, if any): through `setpriv --pdeathsig
/// TERM` where util-linux has it, so the server also stops if this process is killed
/// without a chance to clean up. `setpriv` execs the program, so the child's process id
/// and wait status are the server's (qemu-user re-raises the guest's fatal signal).
pub(crate) fn server_command(wrapper: &[String], binary: &Path) -> Command {
    let has_setpriv = Command::new("setpriv")
        .args(["--pdeathsig", "TERM", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    let mut program: Vec<std::ffi::OsString> = wrapper.iter().map(Into::into).collect();
    program.push(binary.as_os_str().to_owned());
    if has_setpriv {
        program.splice(0..0, ["setpriv", "--pdeathsig", "TERM"].map(Into::into));
    }
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..]);
    cmd
}

/// A port that was free a moment ago on 127.0.0.1.
pub(crate) fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a loopback port")?;
    Ok(listener
        .local_addr()
        .context("reading the bound address")?
        .port())
}

/// One HTTP/1.1 request on the loopback port (`Connection: close`): the status and body.
pub(crate) fn http(
    port: u16,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, String)> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = Vec::new();
    // Bounded: a readiness reply is small; anything past 1 MiB is not what we asked for.
    stream.take(1 << 20).read_to_end(&mut reply)?;
    let text = String::from_utf8_lossy(&reply);
    let status = parse_status_line(text.as_bytes()).context("not an HTTP response")?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, body.to_owned()))
}

/// `HTTP/1.1 200 OK` -> 200.
fn parse_status_line(bytes: &[u8]) -> Option<u16> {
    let head = &bytes[..bytes.len().min(32)];
    let text = String::from_utf8_lossy(head);
    let mut parts = text.split_whitespace();
    parts.next().filter(|p| p.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

pub(crate) fn shorten(text: &str) -> String {
    let mut short: String = text.chars().take(300).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests;
