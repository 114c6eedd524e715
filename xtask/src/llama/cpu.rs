//! What CPU code a llama-server's ggml CPU backend holds, and whether this machine runs it.
//!
//! # Why
//!
//! A llama.cpp built with `-march=native` on a VM whose CPUID reports AMX, but whose kernel
//! never grants the AMX tile state, dies of SIGILL at the first matrix product
//! (`tilezero` in `tinygemm_kernel_amx`). What passes on the build machine crashes on the
//! next one. So before a server runs, its CPU libraries (`libggml-cpu*.so*`) are read:
//!
//! - **Declared features.** ggml's CPU backend reports the instruction sets it was compiled
//!   for (`ggml_backend_cpu_get_features`) from a table of string literals that only holds
//!   the enabled ones: `AVX2`, `AVX512`, `AVX512_BF16`, `AMX_INT8`, ... Those names are
//!   read straight from the library's bytes (NUL-delimited strings) and mapped to the
//!   `/proc/cpuinfo` flags each needs; a flag this CPU lacks means SIGILL.
//! - **Instructions.** `objdump -d` counts AMX tile instructions (`%tmm` registers,
//!   `ldtilecfg`, `tilezero`, ...) and AVX-512 registers (`%zmm`). The portable source
//!   build must hold neither. A prebuilt library may hold AMX only behind ggml's run-time
//!   gate: `ggml_amx_init` asks the kernel for the tile state (`arch_prctl
//!   ARCH_REQ_XCOMP_PERM`) and prints "AMX is not ready to be used!" when refused, so the
//!   AMX code runs only where the kernel grants it. Its message is the gate's witness.
//!
//! # Decisions
//!
//! - Strings, not symbols: the feature names are data in `.rodata`, the one record of the
//!   compile flags that survives in a stripped library. A linker may merge a name into a
//!   longer one that ends with it (`SSE3` into `SSSE3`); such a name is then simply not
//!   seen, which only loses a requirement every x86-64 CPU with AVX meets anyway.
//! - `AVX512` (ggml's `__AVX512F__`) is taken to need the foundation plus the BW, VL, DQ
//!   and CD subsets: a native build on an AVX-512 machine enables them all, and every
//!   AVX-512 CPU since Skylake-SP has them.
//! - The check that matters last is the server answering a completion (see `server.rs`):
//!   a compiler may emit instructions no ggml name declares, and a crash there is reported
//!   with its signal.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// ggml's feature names for x86 and the `/proc/cpuinfo` flags each one needs. `AMX_INT8`
/// needs none here: its code is gated at run time (see the module docs).
const FEATURES: &[(&str, &[&str])] = &[
    ("SSE3", &["pni"]),
    ("SSSE3", &["ssse3"]),
    ("AVX", &["avx"]),
    ("AVX_VNNI", &["avx_vnni"]),
    ("AVX2", &["avx2"]),
    ("F16C", &["f16c"]),
    ("FMA", &["fma"]),
    ("BMI2", &["bmi2"]),
    (
        "AVX512",
        &["avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"],
    ),
    ("AVX512_VBMI", &["avx512vbmi"]),
    ("AVX512_VNNI", &["avx512_vnni"]),
    ("AVX512_BF16", &["avx512_bf16"]),
    ("AMX_INT8", &[]),
];

/// What ggml prints when the kernel refuses the AMX tile state: proof of the gate.
const AMX_GATE_MESSAGE: &[u8] = b"AMX is not ready to be used";

/// What one CPU library holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Library {
    /// The file.
    pub(crate) path: PathBuf,
    /// ggml's declared features, in [`FEATURES`] order.
    pub(crate) features: Vec<&'static str>,
    /// Whether ggml's AMX gate is compiled in.
    pub(crate) amx_gate: bool,
    /// Instruction counts from the disassembly, when objdump is installed.
    pub(crate) code: Option<Code>,
}

/// Counts of the instructions that decide where a library can run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Code {
    /// AMX tile instructions.
    pub(crate) tile: usize,
    /// Instructions on AVX-512's `zmm` registers.
    pub(crate) zmm: usize,
}

/// What the libraries must not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The portable build: no AMX and no AVX-512 code at all.
    Portable,
    /// A prebuilt server: AMX code only behind ggml's run-time gate.
    Gated,
}

/// The ggml feature names declared in a library's bytes.
pub(crate) fn declared_features(bytes: &[u8]) -> Vec<&'static str> {
    let strings: BTreeSet<&[u8]> = bytes.split(|b| *b == 0).collect();
    FEATURES
        .iter()
        .map(|(name, _)| *name)
        .filter(|name| strings.contains(name.as_bytes()))
        .collect()
}

/// The `/proc/cpuinfo` flags the declared features need and `flags` lacks.
pub(crate) fn missing_flags(features: &[&str], flags: &BTreeSet<String>) -> Vec<&'static str> {
    let mut missing: Vec<&'static str> = FEATURES
        .iter()
        .filter(|(name, _)| features.contains(name))
        .flat_map(|(_, needs)| needs.iter().copied())
        .filter(|flag| !flags.contains(*flag))
        .collect();
    missing.dedup();
    missing
}

/// This machine's CPU flags (the first `flags` line of `/proc/cpuinfo`); empty where the
/// file has none (not x86, or not Linux).
pub(crate) fn cpu_flags() -> BTreeSet<String> {
    let text = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    parse_cpu_flags(&text)
}

fn parse_cpu_flags(cpuinfo: &str) -> BTreeSet<String> {
    cpuinfo
        .lines()
        .find_map(|line| {
            let (key, value) = line.split_once(':')?;
            (key.trim() == "flags").then(|| value.split_whitespace().map(str::to_owned).collect())
        })
        .unwrap_or_default()
}

/// Counts AMX tile and AVX-512 instructions in `objdump -d` output.
pub(crate) fn count_code(disassembly: &str) -> Code {
    const TILE_MNEMONICS: &[&str] = &[
        "ldtilecfg",
        "sttilecfg",
        "tilerelease",
        "tilezero",
        "tileloadd",
        "tilestored",
        "tdpb",
    ];
    let mut code = Code::default();
    for line in disassembly.lines() {
        // An instruction line: "  4004d6:\tc4 e2 ...\ttilezero %tmm4" (raw bytes optional).
        let Some(instruction) = line.rsplit('\t').next().filter(|_| line.contains(":\t")) else {
            continue;
        };
        let mnemonic = instruction.split_whitespace().next().unwrap_or_default();
        if instruction.contains("%tmm") || TILE_MNEMONICS.iter().any(|m| mnemonic.starts_with(m)) {
            code.tile += 1;
        }
        if instruction.contains("%zmm") {
            code.zmm += 1;
        }
    }
    code
}

/// The regular files `libggml-cpu*.so*` in `dir`, one per distinct content (packages ship
/// `libggml-cpu.so`, `.so.0` and `.so.0.x.y` as copies or links of one library).
pub(crate) fn cpu_libraries(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut seen = BTreeSet::new();
    let mut found = Vec::new();
    let mut entries: Vec<PathBuf> = fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            name.starts_with("libggml-cpu") && name.contains(".so")
        })
        .collect();
    entries.sort();
    for path in entries {
        let bytes = fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if seen.insert(Sha256::digest(&bytes).to_vec()) {
            found.push(path);
        }
    }
    Ok(found)
}

/// Reads one library: its declared features, the AMX gate and, with objdump, its code.
pub(crate) fn inspect(path: &Path) -> Result<Library> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let amx_gate = bytes
        .windows(AMX_GATE_MESSAGE.len())
        .any(|window| window == AMX_GATE_MESSAGE);
    let code = disassemble(path)?.map(|text| count_code(&text));
    Ok(Library {
        path: path.to_owned(),
        features: declared_features(&bytes),
        amx_gate,
        code,
    })
}

/// `objdump -d` of `path`, or `None` when objdump is not installed.
fn disassemble(path: &Path) -> Result<Option<String>> {
    let output = match Command::new("objdump")
        .args(["-d", "--no-show-raw-insn"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
    {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(err).context("running objdump"),
    };
    if !output.status.success() {
        bail!(
            "objdump -d {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(Some(String::from_utf8_lossy(&output.stdout).into_owned()))
}

/// Fails when `library` breaks `rule`; otherwise returns one line saying what it holds.
pub(crate) fn judge(library: &Library, rule: Rule) -> Result<String> {
    let name = library.path.display();
    let code = library.code.unwrap_or_default();
    match rule {
        Rule::Portable if code.tile > 0 || code.zmm > 0 => bail!(
            "{name} is not portable: {} AMX tile and {} AVX-512 instructions \
             (a build tuned for the machine it was built on)",
            code.tile,
            code.zmm
        ),
        Rule::Gated if code.tile > 0 && !library.amx_gate => bail!(
            "{name} holds {} AMX tile instructions without ggml's run-time AMX gate",
            code.tile
        ),
        _ => {}
    }
    let features = if library.features.is_empty() {
        "no x86 extensions declared".to_owned()
    } else {
        library.features.join(" ")
    };
    let amx = match (library.code, library.amx_gate) {
        (None, true) => "AMX gate present (objdump not installed: code not counted)".to_owned(),
        (None, false) => "objdump not installed: code not counted".to_owned(),
        (Some(code), _) if code.tile == 0 => "no AMX code".to_owned(),
        (Some(code), _) => format!(
            "{} AMX instructions, run only where the kernel grants AMX",
            code.tile
        ),
    };
    Ok(format!("{name}: compiled for {features}; {amx}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_features_are_whole_nul_delimited_names() {
        let bytes = b"\x7fELF\0AVX2\0AVX512_BF16\0F16C\0xAVX\0AMX_INT8\0AVX512_VNNIx\0";
        assert_eq!(
            declared_features(bytes),
            ["AVX2", "F16C", "AVX512_BF16", "AMX_INT8"]
        );
        assert!(declared_features(b"no names here").is_empty());
    }

    #[test]
    fn missing_flags_name_what_the_cpu_lacks_and_amx_needs_nothing() {
        let flags: BTreeSet<String> = ["avx", "avx2", "fma", "f16c", "bmi2"]
            .map(str::to_owned)
            .into();
        let check = |features: &[&str], expected: &[&str]| {
            assert_eq!(missing_flags(features, &flags), expected, "{features:?}");
        };
        check(&["AVX", "AVX2", "FMA", "F16C", "BMI2"], &[]);
        check(&["AVX2", "AMX_INT8"], &[]);
        check(
            &["AVX2", "AVX512", "AVX512_BF16"],
            &[
                "avx512f",
                "avx512bw",
                "avx512vl",
                "avx512dq",
                "avx512cd",
                "avx512_bf16",
            ],
        );
        check(&["AVX_VNNI"], &["avx_vnni"]);
    }

    #[test]
    fn cpu_flags_come_from_the_first_flags_line() {
        let cpuinfo = "processor\t: 0\nflags\t\t: fpu avx2 amx_tile\nbugs\t: x\n\
                       processor\t: 1\nflags\t\t: other\n";
        let flags = parse_cpu_flags(cpuinfo);
        assert_eq!(flags, ["amx_tile", "avx2", "fpu"].map(str::to_owned).into());
        assert!(parse_cpu_flags("Features\t: neon asimd\n").is_empty());
    }

    #[test]
    fn tile_and_zmm_instructions_are_counted_on_instruction_lines_only() {
        let disassembly = "\
0000000000053500 <tinygemm_kernel_amx>:
   53511:\ttileloadd (%rdx,%rax,1),%tmm0
   53517:\ttilezero %tmm4
   8afd0:\tldtilecfg 0x140(%rsp)
   8b000:\ttdpbssd %tmm2,%tmm1,%tmm0
   8b010:\tvmovups (%rax),%zmm1
   8b020:\tvfmadd231ps %ymm1,%ymm2,%ymm3
   8b030:\tcall 1234 <tilezero_helper@plt>
Disassembly of section .text: %zmm in a heading is not code
";
        assert_eq!(count_code(disassembly), Code { tile: 4, zmm: 1 });
        assert_eq!(count_code(""), Code::default());
    }

    fn library(features: &[&'static str], gate: bool, code: Option<Code>) -> Library {
        Library {
            path: PathBuf::from("libggml-cpu.so"),
            features: features.to_vec(),
            amx_gate: gate,
            code,
        }
    }

    #[test]
    fn the_portable_rule_refuses_amx_and_avx512_and_the_gated_rule_wants_the_gate() {
        let clean = Some(Code::default());
        let amx = Some(Code { tile: 3, zmm: 9 });
        let zmm = Some(Code { tile: 0, zmm: 2 });
        let cases = [
            (library(&["AVX2"], false, clean), Rule::Portable, true),
            (library(&["AVX2"], true, zmm), Rule::Portable, false),
            (
                library(&["AVX2", "AMX_INT8"], true, amx),
                Rule::Portable,
                false,
            ),
            (library(&["AMX_INT8"], true, amx), Rule::Gated, true),
            (library(&["AMX_INT8"], false, amx), Rule::Gated, false),
            (library(&["AVX512"], false, zmm), Rule::Gated, true),
        ];
        for (lib, rule, ok) in cases {
            assert_eq!(judge(&lib, rule).is_ok(), ok, "{lib:?} under {rule:?}");
        }
        let line = judge(&library(&["AVX2", "FMA"], false, clean), Rule::Portable).unwrap();
        assert!(
            line.ends_with("compiled for AVX2 FMA; no AMX code"),
            "{line}"
        );
    }

    #[test]
    fn copies_of_one_library_are_inspected_once() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        fs::write(dir.join("libggml-cpu.so"), b"one").unwrap();
        fs::write(dir.join("libggml-cpu.so.0"), b"one").unwrap();
        fs::write(dir.join("libggml-cpu-haswell.so"), b"two").unwrap();
        fs::write(dir.join("libggml-base.so"), b"three").unwrap();
        let names: Vec<String> = cpu_libraries(dir)
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["libggml-cpu-haswell.so", "libggml-cpu.so"]);
    }
}
