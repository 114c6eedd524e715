//! `cargo xtask`: ollm's chores, written in Rust so they run wherever cargo does.
//!
//! The alias in `.cargo/config.toml` makes `cargo xtask <task>` run this binary. Tasks:
//!
//! - `tidy`: architecture and documentation checks (see [`tidy`] and [`cycles`]).
//! - `ci`: everything CI runs, in order, stopping at the first failure (see [`ci`]).
//! - `e2e`: the end-to-end suite against a real `llama-server` (see [`llama`]); with
//!   `--engine vllm`, against a real vLLM (see [`vllm`]).
//! - `demo`: the README's main job: `ollm run` against a real `llama-server`.
//! - `server`: start the real server (llama-server, or vLLM with `--engine vllm`) and keep
//!   it running until Ctrl-C, for development.
//! - `portable`: the portable source build, inspected and run on an emulated older CPU
//!   (see `xtask/src/llama/portable.rs`).
//! - `mcp-servers`: install the real MCP servers the `ollm-mcp` tests run (see [`mcp`]).
//! - `eval`: the tool-calling eval and BFCL on the real model: starts the server and runs
//!   the `ollm-eval` binary (see [`eval`]).
//! - `bench`: the adapters against the floor over loopback HTTP (`cargo bench -p
//!   ollm-bridge --bench floor`, see `docs/performance.md`), passing any further arguments
//!   through; `bench --decoders` runs the in-memory decoder benchmarks instead, and
//!   `bench --real URL MODEL` compares `ollm run` with curl on a real server (see
//!   [`mod@bench`]); `bench --serve` measures `ollm serve` against its upstream (see
//!   [`bench_serve`]).
//! - `fuzz`: the long-running randomized check of the decoders and parsers (see [`fuzz`]).
//! - `dist`: the release tarball of the CLI (see [`dist`]).
//! - `release`: bump, date the changelog, package, commit and tag (see [`release`]).
//!
//! Plain `std::process` and `anyhow`, with serde_json, sha2, toml and tempfile for what
//! the chores read and check: the chores are sequences of commands, and a reader should
//! not have to learn a shell DSL to follow them. No async runtime and none of ollm's
//! crates: what measures ollm (`crates/ollm-eval`) is run as a binary, so `cargo xtask
//! tidy` never waits for the runtime to build.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "xtask is a command-line tool: its output is the point"
)]

mod bench;
mod bench_serve;
mod ci;
mod cycles;
mod dist;
mod eval;
mod examples;
mod fuzz;
mod llama;
mod mcp;
mod release;
mod shape;
mod tidy;
mod vllm;

use std::env;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use anyhow::{Context, Result, bail};

const HELP: &str = "\
cargo xtask <task> [options]

Tasks:
  tidy                 check dependency direction, `//!` docs and crate READMEs
  ci [--no-e2e]        fmt, clippy, tidy, tests, rustdoc, per-crate check, e2e
  e2e [--pending] [-- ARGS]
                       run the end-to-end suite against a real llama-server
                       (--pending: also the tests today's core fails)
  e2e --engine vllm [-- ARGS]
                       the same against a real vLLM on the CPU, then ollm run, the
                       openai client and a pool of llama-server and vLLM (installs
                       vLLM, 2.9 GB, and converts the model on first use)
  demo [--model ALIAS] [--server-sampling pinned|default] [PROMPT]
                       the main job: `ollm run` answers 'Which port does config.toml
                       set?' against a real llama-server (default model
                       qwen2.5-coder-1.5b; `default` sampling: llama.cpp's own, not
                       --temp 0); fails unless the answer gives 8123
  server [--engine llama|vllm] [--model ALIAS]
                       start llama-server (or vLLM) and keep it running until
                       Ctrl-C (qwen2.5-coder-0.5b, the default, or qwen2.5-coder-1.5b)
  portable             build llama-server from source for a baseline CPU, check its
                       libraries hold no AMX or AVX-512 code, run it on an emulated
                       Haswell (qemu-user) where the prebuilt server must die of SIGILL
  eval [--model ALIAS] [ARGS]
                       start llama-server with the model (default qwen2.5-coder-0.5b;
                       llama.cpp's own sampling, or temperature 0 for --smoke,
                       --temperature and --bfcl) and run the ollm-eval binary
                       (crates/ollm-eval) against it with ARGS: the tool-calling eval
                       (--smoke: 3 tasks, plain and auto, temperature 0), the
                       ablation (--ablate), BFCL (--bfcl), --list, --table,
                       --regrade; `cargo run -p ollm-eval -- --help` lists ARGS
  mcp-servers          install the MCP servers the ollm-mcp tests run (npm ci)
  bench [--quick] [--only TEXT] [--instructions]
                       ollm's adapters against a bare reqwest + serde client: CPU
                       (user and system apart) and memory per stream as ratios,
                       paired child processes (docs/performance.md); --quick:
                       smaller cases, ~10 s; --instructions: callgrind instruction
                       counts beside the CPU ratios (deterministic)
  bench --decoders     the in-memory decoder benchmarks (benches/stream.rs, sse.rs)
  bench --serve [--ollm PATH] [--requests N] [--streams N] [--tokens N]
                       ollm serve against its upstream (a mock): added latency,
                       CPU per streamed token, throughput at 1,000 streams
  bench --real URL MODEL [--pairs N] [--max-tokens N] [--ollm PATH]
                       the release `ollm run` against curl with the same body on a
                       real OpenAI-compatible server, alternating pairs: the ratio
                       of median wall times (default 9 pairs, 128 tokens)
  fuzz [--cases N] [--minutes M]
                       randomized check of both stream decoders, the line splitter,
                       the text-call parsers and the session loader: no panic, caps
                       held, same result however the bytes are cut (N cases per
                       target, default 2000; rounds with fresh seeds for M minutes)
  dist                 release binary, completions, man page, README, licences: a tarball
                       and its SHA-256 in target/dist/
  release X.Y.Z [--no-tag]
                       bump every crate, date the changelog, package, commit and tag
  release --dry-run [X.Y.Z]
                       the same in a throwaway clone of HEAD: no commit, no tag

Environment:
  OLLM_CACHE_DIR       where the server and model are cached (default ~/.cache/ollm)
  OLLM_PYTHON          the Python used to create the cache's venv (default python3)
  OLLM_LLAMA_SERVER    run this llama-server instead of installing one (also the key
                       `llama_server` in ollm's config file)
  OLLM_LLAMA_BUILD     `prebuilt` or `source`: force that path (default: prebuilt
                       where the platform fits, else the portable source build)
";

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("\nxtask: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    let mut args = env::args().skip(1);
    let Some(task) = args.next() else {
        print!("{HELP}");
        return Ok(());
    };
    let rest: Vec<String> = args.collect();
    let root = workspace_root();
    match task.as_str() {
        "tidy" => {
            no_more_args(&task, &rest)?;
            tidy::run(&root)
        }
        "ci" => ci::run(&root, ci_options(&rest)?),
        "e2e" => run_e2e(&root, &rest),
        "demo" => llama::demo::run(&root, &llama::demo::Options::parse(&rest)?),
        "eval" => eval::run(&root, &rest),
        "server" => run_server(&root, &rest),
        "portable" => {
            no_more_args(&task, &rest)?;
            llama::check_portable()
        }
        "mcp-servers" => {
            no_more_args(&task, &rest)?;
            mcp::install(&root, &llama::cache_dir()?).map(drop)
        }
        "bench" => run_bench(&root, &rest),
        "fuzz" => fuzz::run(&root, &fuzz::Options::parse(&rest)?),
        "dist" => {
            no_more_args(&task, &rest)?;
            dist::run(&root).map(drop)
        }
        "release" => release::run(&root, &release::parse_args(&rest)?),
        "help" | "-h" | "--help" => {
            print!("{HELP}");
            Ok(())
        }
        other => bail!("unknown task `{other}`\n\n{HELP}"),
    }
}

/// `cargo xtask ci [--no-e2e]`.
fn ci_options(rest: &[String]) -> Result<ci::Options> {
    let e2e = match rest {
        [] => true,
        [flag] if flag == "--no-e2e" => false,
        _ => bail!("`ci` takes only `--no-e2e`\n\n{HELP}"),
    };
    Ok(ci::Options { e2e })
}

/// `cargo xtask server [--engine llama|vllm] [--model ALIAS]`, in any order.
fn run_server(root: &Path, rest: &[String]) -> Result<()> {
    let (mut engine, mut alias) = ("llama", None);
    for pair in rest.chunks(2) {
        match pair {
            [flag, value] if flag == "--engine" => engine = value.as_str(),
            [flag, value] if flag == "--model" => alias = Some(value.as_str()),
            _ => bail!("`server` takes only `--engine ENGINE` and `--model ALIAS`\n\n{HELP}"),
        }
    }
    let model = llama::model_or_default(alias)?;
    match engine {
        "llama" => llama::serve(model),
        "vllm" => vllm::serve(root, model),
        other => bail!("no engine `{other}`: `llama` or `vllm`\n\n{HELP}"),
    }
}

/// `cargo xtask e2e [--pending | --engine vllm] [-- ARGS]`.
fn run_e2e(root: &Path, rest: &[String]) -> Result<()> {
    let (vllm, rest) = match rest {
        [flag, engine, tail @ ..] if flag == "--engine" && engine == "vllm" => (true, tail),
        [flag, engine, ..] if flag == "--engine" && engine != "llama" => {
            bail!("no engine `{engine}`: `llama` or `vllm`\n\n{HELP}")
        }
        [flag, _, tail @ ..] if flag == "--engine" => (false, tail),
        _ => (false, rest),
    };
    let (pending, rest) = match rest.split_first() {
        Some((flag, tail)) if flag == "--pending" => (true, tail),
        _ => (false, rest),
    };
    let passthrough = match rest.split_first() {
        None => &[][..],
        Some((sep, tail)) if sep == "--" => tail,
        Some(_) => bail!("`e2e` passes arguments to the test binary after `--`\n\n{HELP}"),
    };
    if vllm {
        if pending {
            bail!("`e2e --engine vllm` has no pending tests\n\n{HELP}");
        }
        return vllm::checks::e2e(root, passthrough);
    }
    // The MCP test runs the real npm servers: installed first, as `ci` does.
    llama::e2e(
        root,
        &mcp::install(root, &llama::cache_dir()?)?,
        pending,
        passthrough,
    )
}

/// `cargo xtask bench [--real ... | --serve ... | --decoders | ARGS]`.
fn run_bench(root: &Path, rest: &[String]) -> Result<()> {
    if rest.first().is_some_and(|a| a == "--real") {
        return bench::real(root, &bench::Real::parse(&rest[1..])?);
    }
    if rest.first().is_some_and(|a| a == "--serve") {
        return bench_serve::run(root, &bench_serve::Options::parse(&rest[1..])?);
    }
    let mut cmd = cargo();
    cmd.current_dir(root).args(["bench", "-p", "ollm-bridge"]);
    if rest.iter().any(|a| a == "--decoders") {
        cmd.args(["--bench", "stream", "--bench", "sse"]);
    } else {
        cmd.args(["--bench", "floor", "--"]).args(rest);
    }
    run_cmd(&mut cmd)
}

fn no_more_args(task: &str, rest: &[String]) -> Result<()> {
    if rest.is_empty() {
        Ok(())
    } else {
        bail!("`{task}` takes no arguments, got {rest:?}\n\n{HELP}")
    }
}

/// The workspace root: the parent of this crate's directory, fixed at compile time so
/// that tasks work from any current directory.
fn workspace_root() -> PathBuf {
    let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    xtask_dir.parent().unwrap_or(xtask_dir).to_path_buf()
}

/// The cargo that runs us (cargo sets `CARGO`), so a pinned toolchain stays pinned.
fn cargo() -> Command {
    Command::new(env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo")))
}

/// Runs a command with inherited stdio and fails unless it exits with success.
fn run_cmd(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed ({status})");
    }
    Ok(())
}

/// Prints a section header that stands out in a long CI log.
fn section(title: &str) {
    println!("\n==> {title}");
}

/// Seconds since `start`, for progress lines.
fn secs(start: Instant) -> String {
    format!("{:.1}s", start.elapsed().as_secs_f64())
}

/// Every `.rs` file under `dir` (none if it does not exist), skipping build output and
/// hidden folders.
fn collect_rs_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if path.is_dir() {
            // Build output and hidden folders are not sources.
            if name != "target" && !name.starts_with('.') {
                collect_rs_files(&path, out)?;
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
    Ok(())
}
