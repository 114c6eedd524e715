//! One running vLLM API server: start on a free loopback port, readiness, stop with every
//! process it started.
//!
//! # Readiness means a completion
//!
//! `/health` answers 200 once the engine is up; then one completion of one token, asked
//! by the served name, must come back 200 with `choices` (the same rule as for
//! llama-server: a server counts as ready only once it has answered). Both happen within
//! one deadline. A server that exits first is reported with its exit status and the last
//! lines of its log.
//!
//! # Stopping
//!
//! Dropping a [`Vllm`] sends SIGTERM to the API server and waits; then every descendant
//! it had (the engine core, its worker, the resource tracker: remembered when it became
//! ready, and read again at the stop) that still runs gets SIGTERM, and SIGKILL after a
//! grace. Measured here: SIGTERM to the API server alone stops all four processes within
//! about 4 s; the descendants matter when the API server was killed outright (the pool
//! test does that), which leaves them running (see [`super::procs`]). The server runs
//! under `setpriv --pdeathsig TERM` where util-linux has it, so it also stops when xtask
//! is killed; on Ctrl-C the terminal signals the whole foreground group, vLLM included.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::procs::{self, Proc};
use crate::llama::server::{free_port, http, server_command, shorten};

/// How long the API server gets to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(20);
/// How long its leftover descendants get after their own SIGTERM.
const ORPHAN_GRACE: Duration = Duration::from_secs(15);
/// How many log lines a failure shows.
const LOG_TAIL: usize = 40;

/// What to start.
pub(crate) struct Launch<'a> {
    /// The venv's Python, which has vLLM.
    pub(crate) python: &'a Path,
    /// The server's arguments after host and port (model folder, name, flags).
    pub(crate) args: Vec<String>,
    /// The environment it needs beyond ours.
    pub(crate) env: Vec<(&'static str, String)>,
    /// The name requests use (`--served-model-name`), for the readiness completion.
    pub(crate) served_name: &'a str,
    /// Where `vllm-<port>.log` goes.
    pub(crate) logs: &'a Path,
    /// How long start-up and the first completion may take together.
    pub(crate) timeout: Duration,
}

/// A running vLLM, stopped with all its processes when dropped.
pub(crate) struct Vllm {
    child: Child,
    port: u16,
    /// Its processes when it became ready.
    family: Vec<Proc>,
    pub(crate) log: PathBuf,
    /// From start to `/health` answering 200.
    pub(crate) load_time: Duration,
    /// The readiness completion.
    pub(crate) first_answer_time: Duration,
}

impl Vllm {
    /// Starts vLLM on a free loopback port and waits until it is ready.
    pub(crate) fn launch(launch: &Launch<'_>) -> Result<Self> {
        let port = free_port()?;
        fs::create_dir_all(launch.logs)
            .with_context(|| format!("creating {}", launch.logs.display()))?;
        let log = launch.logs.join(format!("vllm-{port}.log"));
        let log_file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = server_command(&[], launch.python);
        cmd.args(["-m", "vllm.entrypoints.openai.api_server"])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(&launch.args)
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().context("duplicating the log handle")?)
            .stderr(log_file);
        println!("$ {cmd:?}");
        let child = cmd.spawn().context("could not start vLLM's API server")?;
        let mut server = Self {
            child,
            port,
            family: Vec::new(),
            log,
            load_time: Duration::ZERO,
            first_answer_time: Duration::ZERO,
        };
        println!(
            "vLLM pid {} on port {port}, log {}",
            server.child.id(),
            server.log.display()
        );
        server.wait_ready(launch.served_name, Instant::now() + launch.timeout)?;
        server.family = procs::descendants(server.child.id());
        Ok(server)
    }

    /// The API server's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The OpenAI-compatible base URL.
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Waits for the API server to exit (for `cargo xtask server --engine vllm`).
    pub(crate) fn wait(&mut self) -> Result<ExitStatus> {
        self.child.wait().context("waiting for vLLM")
    }

    /// `/health`, then one completion, before `deadline`.
    fn wait_ready(&mut self, served_name: &str, deadline: Instant) -> Result<()> {
        let started = Instant::now();
        loop {
            self.check_alive("while starting")?;
            if http(self.port, "GET", "/health", "", Duration::from_secs(2))
                .is_ok_and(|(status, _)| status == 200)
            {
                break;
            }
            if Instant::now() > deadline {
                bail!(
                    "vLLM was not healthy after {:.0?}; it was stopped\n{}",
                    started.elapsed(),
                    self.log_tail()
                );
            }
            sleep(Duration::from_millis(250));
        }
        self.load_time = started.elapsed();
        let asked = Instant::now();
        let body = serde_json::json!({
            "model": served_name,
            "messages": [{"role": "user", "content": "Say OK."}],
            "max_tokens": 1,
            "temperature": 0,
        })
        .to_string();
        let left = deadline.saturating_duration_since(asked);
        let reply = http(
            self.port,
            "POST",
            "/v1/chat/completions",
            &body,
            left.max(Duration::from_secs(1)),
        );
        match reply {
            Ok((200, text)) if text.contains("\"choices\"") => {
                self.first_answer_time = asked.elapsed();
                Ok(())
            }
            Ok((status, text)) => bail!(
                "vLLM answered /health but its first completion failed: HTTP {status}: {}\n{}",
                shorten(&text),
                self.log_tail()
            ),
            Err(err) => {
                self.check_alive("during its first completion")?;
                bail!(
                    "vLLM's first completion failed: {err:#}\n{}",
                    self.log_tail()
                )
            }
        }
    }

    fn check_alive(&mut self, when: &str) -> Result<()> {
        if let Ok(Some(status)) = self.child.try_wait() {
            bail!("vLLM exited {when} ({status})\n{}", self.log_tail());
        }
        Ok(())
    }

    /// The last lines of the log, with a heading.
    pub(crate) fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_TAIL)..].join("\n");
        format!("--- last lines of {} ---\n{tail}", self.log.display())
    }

    /// SIGTERM to the API server, then to each descendant still running, then SIGKILL
    /// for what is left; says how it went.
    fn stop(&mut self) {
        let pid = self.child.id();
        let started = Instant::now();
        let mut family = self.family.clone();
        for proc in procs::descendants(pid) {
            if !family.contains(&proc) {
                family.push(proc);
            }
        }
        let already = matches!(self.child.try_wait(), Ok(Some(_)));
        if !already {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
            let deadline = Instant::now() + STOP_GRACE;
            while Instant::now() < deadline && !matches!(self.child.try_wait(), Ok(Some(_))) {
                sleep(Duration::from_millis(100));
            }
        }
        let orphans: Vec<Proc> = family.iter().copied().filter(Proc::alive).collect();
        let stubborn = stop_all(&orphans, "TERM", ORPHAN_GRACE);
        let undead = stop_all(&stubborn, "KILL", Duration::from_secs(2));
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        println!(
            "vLLM (pid {pid}{}) stopped in {:.1}s; of its {} processes, {} outlived it and got \
             SIGTERM, {} then SIGKILL; {} still running",
            if already { ", already gone" } else { "" },
            started.elapsed().as_secs_f64(),
            family.len(),
            orphans.len(),
            stubborn.len(),
            undead.len(),
        );
    }
}

/// Sends `signal` to each of `procs` still running and waits up to `grace` for them; the
/// ones still running after it.
fn stop_all(procs: &[Proc], signal: &str, grace: Duration) -> Vec<Proc> {
    let alive: Vec<Proc> = procs.iter().copied().filter(Proc::alive).collect();
    for proc in &alive {
        proc.signal(signal);
    }
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline && alive.iter().any(Proc::alive) {
        sleep(Duration::from_millis(100));
    }
    alive.into_iter().filter(Proc::alive).collect()
}

impl Drop for Vllm {
    fn drop(&mut self) {
        self.stop();
    }
}
