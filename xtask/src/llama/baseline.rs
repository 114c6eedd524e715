//! The baseline prebuilt server: llama.cpp's server embedded in the `xllamacpp` wheel,
//! compiled for x86-64-v3, for the x86_64 machines the prebuilt server refuses.
//!
//! The wheel (`xllamacpp==2026.10.11549` from PyPI, one `manylinux_2_17_x86_64` wheel of
//! 33,827,498 bytes) is installed by pip in hash-checking mode ([`SHA256`]) into
//! `servers/` in the cache, with `xtask/llama/baseline_server.py` beside it as
//! `llama-server`: a launcher that reads llama-server's flags and starts the wheel's
//! embedded llama.cpp server (the same HTTP code as `llama-server`). Its one library
//! holds all of ggml and llama.cpp; its code is inspected as the source build's (no AMX,
//! no AVX-512) and must need no flag beyond [`FLAGS`]. The inspection is kept beside the
//! install with the library's sha256, since objdump of 106 MB takes 5-20 s.
//!
//! # Decisions
//!
//! - Trusted as far as the prebuilt server is (docs/llama-server.md): a pinned hash, a
//!   publisher with a track record (Xorbits, whose Xinference uses it as its llama.cpp
//!   backend; over fifty releases on PyPI), a build documented as "compiled for
//!   maximum compatibility ... AVX-512, SVE, AMX disabled", and that claim checked on the
//!   bytes: its code needs AVX, AVX2, BMI2, F16C and FMA, nothing more.
//! - A launcher rather than the wheel's Python API in xtask: every other part of xtask
//!   (readiness, logs, crash reports, `ollm serve` pools) starts a `llama-server` with
//!   flags, and keeps doing so.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

use super::cpu::{self, Rule};
use super::installed::{Binary, Unusable, Wheel, pip_install_wheel, version_of};
use super::venv::ensure_venv;

/// The wheel, pinned.
pub(crate) const WHEEL: Wheel = Wheel {
    package: "xllamacpp==2026.10.11549",
    sha256: SHA256,
    dir: "xllamacpp-2026.10.11549",
    what: "the baseline prebuilt llama-server, 34 MB",
};
/// The sha256 of its one Linux x86_64 wheel.
const SHA256: &str = "c54e7d13520ecc989c63dc99d55de3065e2f343a91f43f053d16b5e62077c261";
/// The oldest glibc it runs on (its `manylinux_2_17` tag).
pub(crate) const GLIBC: (u32, u32) = (2, 17);
/// The oldest Python it runs on (its `cp310-abi3` tag).
pub(crate) const PYTHON: (u32, u32) = (3, 10);
/// The CPU flags its code needs, read from its instructions (the check after install
/// keeps this list honest).
pub(crate) const FLAGS: &[&str] = &["avx", "avx2", "bmi2", "f16c", "fma"];
/// The library that holds its CPU code.
const LIBRARY: &str = "xllamacpp/xllamacpp.abi3.so";
/// The launcher, installed as `llama-server`.
const LAUNCHER: &str = include_str!("../../llama/baseline_server.py");
/// The inspection of [`LIBRARY`], kept with its sha256.
const REPORT: &str = "ollm-cpu-report";

/// Installs or reuses the baseline server, and checks its CPU code.
pub(crate) fn install(cache: &Path) -> Result<Binary> {
    let target = cache.join("servers").join(WHEEL.dir);
    let binary = target.join("llama-server");
    if let Some(version) = version_of(&binary, None)? {
        println!("reusing {} ({version})", binary.display());
    } else {
        let venv = cache.join("venv");
        ensure_venv(&venv)?;
        pip_install_wheel(cache, &WHEEL, &target)?;
        write_launcher(&venv.join("bin/python"), &binary)?;
        let version = version_of(&binary, None)?.ok_or(Unusable)?;
        println!("installed {} ({version})", binary.display());
    }
    let cpu_report = vec![report(&target)?];
    Ok(Binary {
        path: binary,
        lib_dir: None,
        cpu_report,
    })
}

/// The launcher, run by `python`.
fn write_launcher(python: &Path, binary: &Path) -> Result<()> {
    let text = format!("#!{}\n{LAUNCHER}", python.display());
    fs::write(binary, text).with_context(|| format!("writing {}", binary.display()))?;
    fs::set_permissions(binary, fs::Permissions::from_mode(0o755))
        .with_context(|| format!("making {} executable", binary.display()))
}

/// The line saying what the library's code needs, from the kept inspection when the
/// library's bytes are the ones inspected; fails where the code breaks the portable rule
/// or needs a flag [`FLAGS`] does not list.
fn report(target: &Path) -> Result<String> {
    let library = target.join(LIBRARY);
    let bytes = fs::read(&library).with_context(|| format!("reading {}", library.display()))?;
    let digest = format!("{:x}", Sha256::digest(&bytes));
    drop(bytes);
    let kept = target.join(REPORT);
    if let Some(line) = kept_report(&fs::read_to_string(&kept).unwrap_or_default(), &digest) {
        return Ok(line);
    }
    let inspected = cpu::inspect(&library)?;
    let needs = inspected.needs.iter().flatten().copied();
    let flags = FLAGS.iter().map(|f| (*f).to_owned()).collect();
    let unknown = cpu::missing_flags(needs, &flags);
    if !unknown.is_empty() {
        bail!(
            "{} needs {}, which the baseline server's FLAGS do not list",
            library.display(),
            unknown.join(" ")
        );
    }
    let line = cpu::judge(&inspected, Rule::Portable)?;
    if inspected.needs.is_some() {
        fs::write(&kept, format!("{digest}\n{line}\n"))
            .with_context(|| format!("writing {}", kept.display()))?;
    }
    Ok(line)
}

/// The kept line, if `text` records the inspection of the bytes whose sha256 is `digest`.
fn kept_report(text: &str, digest: &str) -> Option<String> {
    let (hash, line) = text.split_once('\n')?;
    (hash == digest && !line.trim().is_empty()).then(|| line.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_inspection_counts_only_for_the_bytes_it_was_made_of() {
        let text = "abc123\n/x/xllamacpp.abi3.so: its code needs avx2 fma; no AMX code\n";
        assert_eq!(
            kept_report(text, "abc123").as_deref(),
            Some("/x/xllamacpp.abi3.so: its code needs avx2 fma; no AMX code")
        );
        assert_eq!(kept_report(text, "other"), None);
        assert_eq!(kept_report("abc123\n\n", "abc123"), None);
        assert_eq!(kept_report("", "abc123"), None);
    }

    #[test]
    fn the_launcher_knows_every_flag_xtask_passes() {
        for flag in [
            "--host",
            "--port",
            "-m",
            "--alias",
            "--jinja",
            "-c",
            "-np",
            "--temp",
            "--no-webui",
        ] {
            assert!(LAUNCHER.contains(&format!("\"{flag}\"")), "{flag}");
        }
    }
}
