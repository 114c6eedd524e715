//! `cargo xtask ci`: everything CI checks, in the order that fails fastest.
//!
//! 1. `cargo fmt --all -- --check`
//! 2. `cargo clippy --workspace --all-targets -- -D warnings`
//! 3. `cargo xtask tidy`
//! 4. the tests (after `cargo xtask mcp-servers`, whose install they use): `cargo nextest run --workspace` when nextest is installed (plus
//!    `cargo test --workspace --doc`, which nextest does not run), else `cargo test --workspace`
//! 5. `RUSTDOCFLAGS=-Dwarnings cargo doc --workspace --no-deps`
//! 6. `cargo check -p <crate>` for each workspace member on its own, because a workspace
//!    build unifies features and can hide a crate that forgot to ask for one (the
//!    examples are built on their own in step 9 instead)
//! 7. `cargo check -p ollm-bridge --features e2e-pending --tests`: the end-to-end tests,
//!    pending ones included, compile (they run only against a real server, in step 11)
//! 8. `cargo machete`: no crate declares a dependency it does not use (`.ci/run` installs
//!    it; a developer without it is told how to get it and the step is skipped)
//! 9. the downstream examples: `cargo tree` shows no HTTP stack under the one built on
//!    `ollm-types` and `ollm-core` only, which is then run; the Ollama agent is built, and
//!    run when `OLLAMA_HOST` is set (see [`examples`])
//! 10. `cargo xtask release --dry-run`: the next patch release rehearsed in a clone of
//!     `HEAD`, packaging every publishable crate offline, no commit, no tag (see [`release`])
//! 11. `cargo xtask e2e` (skipped with `--no-e2e`): on the prebuilt server where it fits
//! 12. `cargo xtask demo` (skipped with `--no-e2e`): the README's main job on the path
//!     this machine takes (the prebuilt server where it fits), strict about the answer;
//!     then `examples/openai-tools` against a real llama-server (0.5B, temperature 0): a
//!     downstream crate's recovery and one-shot reply (issue 36; 6-19 s a run by hand)
//! 13. `cargo xtask eval --smoke` (skipped with `--no-e2e`): 3 tasks in the plain and
//!     auto columns, 1 repeat at temperature 0 (see [`eval`] and `crates/ollm-eval`). It reports the scores and
//!     never fails on them; it fails only when the harness breaks (no server, no `ollm`
//!     binary, a refused connection). Measured on the shared 2-core machine: 29 s with a
//!     warm cache, 44 s from an empty one (server 8 s, model 10 s). Since the eval became
//!     `crates/ollm-eval`, xtask builds that binary, checks the flags with it and builds
//!     `ollm` before the server starts: 3.8 minutes with both built, at a load average
//!     of 8-10 from other work (the runs 3.6 of them).
//! 14. `OLLM_LLAMA_BUILD=baseline cargo xtask demo --server-sampling default` (skipped
//!     with `--no-e2e`): the baseline prebuilt server (x86-64-v3 code, the path an AMD
//!     EPYC or any AVX2 machine without AVX-VNNI takes) answers at llama.cpp's own
//!     sampling, on any CI machine, since its code runs on every x86-64-v3 CPU. Cost,
//!     measured on the shared 2-core machine: from an empty cache 4.3 minutes with the load
//!     average at 7-9 (server 48 s: venv, a 34 MB wheel and the objdump inspection; model
//!     50 s; load 6 s; the answer 2.5 minutes). In CI the venv and model are cached by
//!     then, so it adds the wheel, its inspection and one demo: five warm runs took 141-378
//!     s with the load at 5-14 (the answer 130-347 s of them, one model turn of it a
//!     repeated call), so 3-7 minutes with the install, about 2 on idle cores
//! 15. `cargo xtask portable` (skipped with `--no-e2e`): the source-build path still
//!     builds, holds no AMX or AVX-512 code and runs on an emulated Haswell (see
//!     `xtask/src/llama/portable.rs`); the build is about 6.5 minutes on 2 idle cores (776
//!     CPU-seconds) from an empty cache, and the emulated run up to 30 minutes under load
//! 16. `OLLM_LLAMA_BUILD=source cargo xtask demo`, pinned and at the server's own
//!     sampling (skipped with `--no-e2e`): the source build, the path of other
//!     architectures and of x86_64 machines with an old glibc or Python, answers too; its
//!     greedy outputs differ from the prebuilt server's (issue 34). The build is step 15's,
//!     so each adds one server start and one answer: like step 14's warm runs (the same
//!     x86-64-v3 code), 1.5-6 minutes each as the load goes
//! 17. `cargo xtask e2e --engine vllm` (skipped with `--no-e2e`, and skipped with a
//!     message on a machine with less than 10 GB of free disk or 8 GB of available
//!     memory): the suite against a real vLLM on the CPU (see `xtask/src/vllm/`).
//!     Measured on the shared 2-core machine (load average about 12 from other work):
//!     12.5 minutes from an empty cache (vLLM's install 5.7 of them, the conversion 1.8,
//!     the start 1.3, the tests 3.1), 5.0 minutes with a warm one (start 1.4, tests 3.2)
//!
//! Each step prints a header and its time; the first failure stops the run with a
//! non-zero exit.

use std::path::Path;
use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::{cargo, eval, examples, llama, release, run_cmd, secs, section, tidy, vllm};

/// What `ci` runs beyond the fixed steps.
pub(crate) struct Options {
    /// Whether to finish with the end-to-end suite against a real server.
    pub(crate) e2e: bool,
}

type Step<'a> = (String, Box<dyn FnOnce() -> Result<()> + 'a>);

pub(crate) fn run(root: &Path, options: Options) -> Result<()> {
    let started = Instant::now();
    let mut steps = checks(root);
    // The examples are built on their own by the `examples` step below.
    let members = workspace_members(root)?;
    for krate in members.into_iter().filter(|k| !k.starts_with("example-")) {
        let name = format!("check -p {krate}");
        let step = move || run_cmd(cargo().current_dir(root).args(["check", "-p", &krate]));
        steps.push((name, Box::new(step)));
    }
    steps.extend(builds(root));
    if options.e2e {
        steps.extend(real_server(root));
    }
    let total = steps.len();
    for (index, (name, step)) in steps.into_iter().enumerate() {
        section(&format!("[{}/{total}] {name}", index + 1));
        let start = Instant::now();
        step().with_context(|| format!("ci step `{name}` failed after {}", secs(start)))?;
        println!("<== {name}: ok in {}", secs(start));
    }
    println!("\nci: all {total} steps passed in {}", secs(started));
    Ok(())
}

/// The first steps: format, lints, tidy, the tests and the docs.
fn checks(root: &Path) -> Vec<Step<'_>> {
    vec![
        (
            "fmt".into(),
            Box::new(move || {
                run_cmd(
                    cargo()
                        .current_dir(root)
                        .args(["fmt", "--all", "--", "--check"]),
                )
            }),
        ),
        (
            "clippy".into(),
            Box::new(move || {
                run_cmd(cargo().current_dir(root).args([
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--",
                    "-D",
                    "warnings",
                ]))
            }),
        ),
        ("tidy".into(), Box::new(move || tidy::run(root))),
        ("tests".into(), Box::new(move || tests(root))),
        (
            "rustdoc".into(),
            Box::new(move || {
                run_cmd(
                    cargo()
                        .current_dir(root)
                        .env("RUSTDOCFLAGS", "-Dwarnings")
                        .args(["doc", "--workspace", "--no-deps"]),
                )
            }),
        ),
    ]
}

/// The steps after each crate's own check: the e2e tests' code, unused dependencies, the
/// examples and a release dry run.
fn builds(root: &Path) -> Vec<Step<'_>> {
    let mut steps: Vec<Step<'_>> = Vec::new();
    // The end-to-end tests need a real server, so `tests` never builds them; a change that
    // breaks their code (the pending ones most of all) would otherwise go unseen until
    // someone runs `cargo xtask e2e --pending`.
    steps.push((
        "check the e2e tests".into(),
        Box::new(move || {
            run_cmd(cargo().current_dir(root).args([
                "check",
                "-p",
                "ollm-bridge",
                "--features",
                "e2e-pending",
                "--tests",
            ]))
        }),
    ));
    steps.push((
        "unused dependencies".into(),
        Box::new(move || unused_dependencies(root)),
    ));
    steps.push(("examples".into(), Box::new(move || examples::check(root))));
    steps.push((
        "release dry run".into(),
        Box::new(move || release::dry_run(root, None)),
    ));
    steps
}

/// The steps against a real server (`ci --e2e`).
fn real_server(root: &Path) -> Vec<Step<'_>> {
    let smoke = move || eval::run(root, &["--smoke".to_owned()]);
    vec![
        (
            "e2e".into(),
            Box::new(move || {
                llama::e2e(
                    root,
                    &crate::mcp::install(root, &llama::cache_dir()?)?,
                    false,
                    &[],
                )
            }),
        ),
        ("demo".into(), Box::new(|| demo(None, "pinned"))),
        (
            "example openai-tools on llama-server".into(),
            Box::new(move || examples::openai_tools_on_llama(root)),
        ),
        ("eval --smoke".into(), Box::new(smoke)),
        (
            "demo on the baseline prebuilt server, the server's own sampling".into(),
            Box::new(|| demo(Some("baseline"), "default")),
        ),
        (
            "portable source build".into(),
            Box::new(llama::check_portable),
        ),
        (
            "demo on the portable build".into(),
            Box::new(|| demo(Some("source"), "pinned")),
        ),
        (
            "demo on the portable build, the server's own sampling".into(),
            Box::new(|| demo(Some("source"), "default")),
        ),
        (
            "e2e --engine vllm".into(),
            Box::new(move || vllm::checks::ci(root)),
        ),
    ]
}

/// `cargo xtask demo --server-sampling SAMPLING`, as a user runs it (a child process, so
/// `OLLM_LLAMA_BUILD` forces the server path exactly as it does for them).
fn demo(build: Option<&str>, sampling: &str) -> Result<()> {
    let xtask = std::env::current_exe().context("finding xtask's own binary")?;
    let mut cmd = std::process::Command::new(xtask);
    cmd.args(["demo", "--server-sampling", sampling]);
    if let Some(build) = build {
        cmd.env("OLLM_LLAMA_BUILD", build);
    }
    run_cmd(&mut cmd)
}

fn tests(root: &Path) -> Result<()> {
    let mcp_servers = crate::mcp::install(root, &llama::cache_dir()?)?;
    if has_nextest(root) {
        run_cmd(
            cargo()
                .current_dir(root)
                .env(crate::mcp::ENV, &mcp_servers)
                .args(["nextest", "run", "--workspace"]),
        )?;
        run_cmd(
            cargo()
                .current_dir(root)
                .args(["test", "--workspace", "--doc"]),
        )
    } else {
        println!("cargo-nextest is not installed; using cargo test");
        run_cmd(
            cargo()
                .current_dir(root)
                .env(crate::mcp::ENV, &mcp_servers)
                .args(["test", "--workspace"]),
        )
    }
}

fn has_nextest(root: &Path) -> bool {
    cargo()
        .current_dir(root)
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// The names of the workspace's packages, in manifest order.
fn workspace_members(root: &Path) -> Result<Vec<String>> {
    let metadata = tidy::cargo_metadata(root, &["--no-deps"])?;
    let names = metadata["packages"]
        .as_array()
        .context("no `packages` in `cargo metadata`")?
        .iter()
        .filter_map(|package| package["name"].as_str().map(str::to_owned))
        .collect();
    Ok(names)
}

/// `cargo machete`, when it is installed. The `cargo-machete` binary is run directly:
/// launched as `$CARGO machete` (the toolchain's cargo, as inside xtask) it takes its own
/// subcommand name for a path.
fn unused_dependencies(root: &Path) -> Result<()> {
    let installed = std::process::Command::new("cargo-machete")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        if std::env::var_os("CI").is_some() {
            bail!("cargo-machete is not installed (.ci/run installs it)");
        }
        println!("skipped: cargo-machete is not installed (cargo install cargo-machete --locked)");
        return Ok(());
    }
    run_cmd(std::process::Command::new("cargo-machete").current_dir(root))
}
