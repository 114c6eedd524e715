//! The cached GGUF model, turned once into the folder vLLM loads.
//!
//! # Decisions
//! - vLLM's CPU path cannot run the Q4_K_M GGUF that llama-server uses (its dequantize
//!   kernel is CUDA-only; the first request kills the engine), so `xtask/vllm/convert.py`
//!   dequantizes it with transformers into bfloat16 safetensors, with the tokenizer and
//!   the model's chat template (see the script's docs). The weights are the same as
//!   llama-server's, less the 4-bit rounding.
//! - The folder is `vllm/models/<alias>` in the cache. The script writes
//!   `<alias>.partial`, and only a finished folder is renamed into place, with a stamp
//!   naming the GGUF's sha256 and the script's; a folder whose stamp differs (another
//!   model file, a changed script) is made again.
//! - Measured on the shared 2-core VM: 0.5B in 1.9 minutes (about a minute of it is
//!   importing torch and transformers), 1.2 GB; the spike measured the 1.5B at 127 s,
//!   3.4 GB.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};

use crate::llama::Model;
use crate::llama::model::hex;
use crate::llama::venv::remove_dir_if_present;
use crate::{run_cmd, secs, section};

/// The conversion script, relative to the workspace root.
const SCRIPT: &str = "xtask/vllm/convert.py";
/// The stamp in a finished folder.
const STAMP: &str = "ollm-source.txt";

/// The model folder for `model`, converted from `gguf` with the venv's `python` unless a
/// folder from the same GGUF and script is cached. The caller holds the install lock.
pub(crate) fn convert(
    python: &Path,
    root: &Path,
    model: &Model,
    gguf: &Path,
    cache: &Path,
) -> Result<PathBuf> {
    let script = root.join(SCRIPT);
    let code = fs::read(&script).with_context(|| format!("reading {}", script.display()))?;
    let stamp = format!(
        "gguf sha256 {}\nconvert.py sha256 {}\n",
        model.sha256,
        hex(&Sha256::digest(&code))
    );
    let models = cache.join("vllm").join("models");
    let folder = models.join(model.alias);
    if fs::read_to_string(folder.join(STAMP)).is_ok_and(|s| s == stamp) {
        println!("reusing the converted model {}", folder.display());
        return Ok(folder);
    }
    let partial = models.join(format!("{}.partial", model.alias));
    remove_dir_if_present(&partial)?;
    fs::create_dir_all(&models).with_context(|| format!("creating {}", models.display()))?;
    section(&format!(
        "convert {} into a model folder for vLLM (once; about 2 minutes)",
        gguf.display()
    ));
    let started = Instant::now();
    run_cmd(
        Command::new(python)
            .arg(&script)
            .arg(gguf)
            .arg(&partial)
            // No progress bars in logs, and nothing fetched from a model hub.
            .env("TQDM_DISABLE", "1")
            .env("HF_HUB_OFFLINE", "1")
            .stdin(Stdio::null()),
    )?;
    fs::write(partial.join(STAMP), &stamp)
        .with_context(|| format!("writing the stamp in {}", partial.display()))?;
    remove_dir_if_present(&folder)?;
    fs::rename(&partial, &folder)
        .with_context(|| format!("renaming {} into place", partial.display()))?;
    println!("converted into {} in {}", folder.display(), secs(started));
    Ok(folder)
}
