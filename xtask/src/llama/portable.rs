//! `cargo xtask portable`: proof that the source build is not tuned to the machine that
//! built it, and that the check could tell if it were.
//!
//! 1. The portable source build is built (or reused); installing it inspects its ggml CPU
//!    libraries and fails on any AMX tile or AVX-512 instruction (see `cpu.rs`).
//! 2. On x86_64, it runs under qemu-user emulating a Haswell CPU (`-cpu Haswell-v4`:
//!    AVX2, FMA, F16C, BMI2; no AVX-512, no AMX) and must answer a completion. qemu's
//!    TCG implements AVX2 but no AVX-512, so a CPU-tuned build traps there as it would on
//!    an older or differently-featured machine.
//! 3. The prebuilt server (compiled for AVX-512 and AMX) runs under the same emulated CPU
//!    and must die of SIGILL, reported as such. This is what makes step 2 mean something:
//!    the emulation does catch code for a CPU it is not.
//!
//! # Measured here (2-core x86_64, AMD EPYC with AVX-512, no AMX)
//!
//! The source build (now `ninja llama-server`, see `build.rs`) takes 776 CPU-seconds:
//! about 6.5 minutes on 2 idle cores, 76 minutes with the load average at 9-12 from other
//! jobs. Emulated, the portable server loaded in 26-63 s and answered its one-token
//! completion in 42-150 s with the machine lightly to moderately used; with the load at
//! 10-13 it loaded in 191-384 s and answered in 637 s, and once passed the old 900 s
//! deadline. The prebuilt one died of SIGILL while loading the model.

use std::env;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Result, bail};

use super::install::{self, Binary, Origin};
use super::model::{self, QWEN_05B};
use super::server::{Launch, Server, StartError};
use crate::section;

/// The emulated CPU: x86-64-v3 without AVX-512 or AMX.
const EMULATED_CPU: &str = "Haswell-v4";
/// Emulation is slow: loading and one completion took about 70 s here on a quiet machine,
/// 830 s with the load at 10-13 (and once more than 900 s, the old deadline).
const EMULATED_TIMEOUT: Duration = Duration::from_secs(1800);

/// Runs the three steps in the module docs.
pub(crate) fn run(cache: &Path) -> Result<()> {
    let lock = install::lock(cache)?;
    section(&format!(
        "portable: install or reuse {}",
        Origin::Source.label()
    ));
    let source = install::install(&Origin::Source, cache)?;
    for line in &source.cpu_report {
        println!("  CPU code: {line}");
    }
    let model = model::fetch(&QWEN_05B, cache, &cache.join("venv"))?;
    let prebuilt = if env::consts::ARCH == "x86_64" {
        Some(install::install(&Origin::Prebuilt, cache)?)
    } else {
        None
    };
    drop(lock);
    let Some(prebuilt) = prebuilt else {
        println!("portable: not x86_64: the emulated-CPU run is for x86_64 only");
        return Ok(());
    };
    if !has_qemu() {
        if env::var_os("CI").is_some() {
            bail!("qemu-x86_64 is not installed (.ci/run installs qemu-user)");
        }
        println!("portable: qemu-x86_64 not installed (apt-get install qemu-user): skipped");
        return Ok(());
    }
    let model = model.display().to_string();
    section(&format!(
        "portable: the source build on an emulated {EMULATED_CPU}"
    ));
    let server = emulated(&source, &model, cache)?;
    println!(
        "portable: ready on the emulated {EMULATED_CPU} (load {:.1}s, first answer {:.1}s)",
        server.load_time.as_secs_f64(),
        server.first_answer_time.as_secs_f64()
    );
    drop(server);
    section(&format!(
        "portable: the prebuilt server on an emulated {EMULATED_CPU}"
    ));
    match emulated(&prebuilt, &model, cache) {
        Ok(_) => bail!(
            "the prebuilt server ran on the emulated {EMULATED_CPU}: the emulation did not \
             catch its AVX-512 code, so the run above proves nothing"
        ),
        Err(err) => match err.downcast_ref::<StartError>() {
            Some(start) if start.is_illegal_instruction() => {
                let first = start.to_string();
                let first = first.lines().next().unwrap_or_default();
                println!("portable: as expected, {first}");
                Ok(())
            }
            _ => Err(err.context("the prebuilt server failed in another way than SIGILL")),
        },
    }
}

/// Starts `binary` under qemu-user emulating [`EMULATED_CPU`], with a small context.
fn emulated(binary: &Binary, model: &str, cache: &Path) -> Result<Server> {
    let logs = cache.join("logs");
    let args = ["-m", model, "-c", "512", "-np", "1", "--no-webui"];
    Server::launch(&Launch {
        binary,
        args: args.map(str::to_owned).to_vec(),
        logs: &logs,
        timeout: EMULATED_TIMEOUT,
        wrapper: ["qemu-x86_64", "-cpu", EMULATED_CPU]
            .map(str::to_owned)
            .to_vec(),
    })
}

fn has_qemu() -> bool {
    Command::new("qemu-x86_64")
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
