//! What CPU code a llama-server's ggml CPU backend holds, and whether this machine runs it.
//!
//! # Why
//!
//! A llama.cpp built with `-march=native` on a VM whose CPUID reports AMX, but whose kernel
//! never grants the AMX tile state, dies of SIGILL at the first matrix product
//! (`tilezero` in `tinygemm_kernel_amx`). What passes on the build machine crashes on the
//! next one. So before a server runs, its CPU libraries (`libggml-cpu*.so*`) are read:
//!
//! - **What the instructions need.** `objdump -d` lists every instruction; each is mapped
//!   to the `/proc/cpuinfo` flag it needs (`vfmadd231ps` FMA, `shlx` BMI2, `{vex}
//!   vpdpbusd` AVX-VNNI, any `%zmm` register AVX-512, `vdpbf16ps` AVX512-BF16, `%tmm` AMX,
//!   ...). A flag this CPU lacks means SIGILL.
//! - **AMX behind its gate.** ggml's `ggml_amx_init` asks the kernel for the tile state
//!   (`arch_prctl ARCH_REQ_XCOMP_PERM`) and prints "AMX is not ready to be used!" when
//!   refused, so its AMX code runs only where the kernel grants it. That message in the
//!   library is the gate's witness. The portable source build must hold no AMX and no
//!   AVX-512 instruction at all; a prebuilt library may hold AMX only with the gate.
//!
//! # Decisions
//!
//! - Instructions, not ggml's feature names: the names (`AVX2`, `AVX512_BF16`, ...) are
//!   string literals in every build, whatever it was compiled for (measured: the
//!   baseline build holds all of them), so only the code says what a library needs.
//! - Any AVX-512 instruction is taken to need the foundation plus the BW, VL, DQ and CD
//!   subsets: objdump does not say which subset an EVEX instruction belongs to, a build
//!   for an AVX-512 machine enables them all, and every AVX-512 CPU since Skylake-SP has
//!   them.
//! - The check that matters last is the server answering a completion (see `server.rs`):
//!   a compiler may emit instructions no ggml name declares, and a crash there is reported
//!   with its signal.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// The flags an AVX-512 instruction is taken to need (see the Decisions).
const AVX512: &[&str] = &["avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"];
/// The AMX flags: gated at run time, never required of the CPU.
const AMX: &[&str] = &["amx_tile", "amx_int8", "amx_bf16"];

/// What ggml prints when the kernel refuses the AMX tile state: proof of the gate.
const AMX_GATE_MESSAGE: &[u8] = b"AMX is not ready to be used";

/// What one CPU library holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Library {
    /// The file.
    pub(crate) path: PathBuf,
    /// The CPU flags its instructions need (AMX included), when objdump is installed.
    pub(crate) needs: Option<BTreeSet<&'static str>>,
    /// Whether ggml's AMX gate is compiled in.
    pub(crate) amx_gate: bool,
}

/// What the libraries must not hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rule {
    /// The portable build: no AMX and no AVX-512 code at all.
    Portable,
    /// A prebuilt server: AMX code only behind ggml's run-time gate.
    Gated,
}

/// The CPU flags one instruction line of `objdump -d --no-show-raw-insn` needs.
pub(crate) fn instruction_needs(instruction: &str) -> Vec<&'static str> {
    let mut words = instruction.split_whitespace();
    let mut mnemonic = words.next().unwrap_or_default();
    let vex = mnemonic == "{vex}";
    if mnemonic.starts_with('{') {
        mnemonic = words.next().unwrap_or_default();
    }
    let has = |register: &str| instruction.contains(register);
    let mut needs = Vec::new();
    if has("%tmm") || mnemonic.starts_with("tile") || mnemonic.ends_with("tilecfg") {
        needs.push("amx_tile");
    }
    if mnemonic.starts_with("tdpb") {
        needs.extend(["amx_tile", "amx_int8"]);
    }
    if has("%zmm") || has("%k") || instruction.starts_with("{evex}") || avx512_only(mnemonic) {
        needs.extend(AVX512);
    }
    match mnemonic {
        "vpdpbusd" | "vpdpbusds" | "vpdpwssd" | "vpdpwssds" => {
            needs.push(if vex { "avx_vnni" } else { "avx512_vnni" });
        }
        "vdpbf16ps" | "vcvtne2ps2bf16" => needs.push("avx512_bf16"),
        "vcvtneps2bf16" if !vex => needs.push("avx512_bf16"),
        "vpermb" | "vpermi2b" | "vpermt2b" | "vpmultishiftqb" => needs.push("avx512vbmi"),
        "vcvtph2ps" | "vcvtps2ph" => needs.push("f16c"),
        "shlx" | "shrx" | "sarx" | "rorx" | "pdep" | "pext" | "bzhi" | "mulx" => {
            needs.push("bmi2");
        }
        _ => {}
    }
    if ["vfmadd", "vfmsub", "vfnmadd", "vfnmsub"]
        .iter()
        .any(|p| mnemonic.starts_with(p))
    {
        needs.push("fma");
    }
    if mnemonic.starts_with('v') && (has("%ymm") || has("%xmm")) {
        needs.push("avx");
        if has("%ymm") && avx2_on_ymm(mnemonic) {
            needs.push("avx2");
        }
    }
    needs
}

/// EVEX-only mnemonics that may appear without a `zmm` register.
fn avx512_only(mnemonic: &str) -> bool {
    [
        "vpternlog",
        "vpermt2",
        "vpermi2",
        "vextractf32x",
        "vextractf64x",
        "vextracti32x",
    ]
    .iter()
    .chain(&[
        "vextracti64x",
        "vinsertf32x",
        "vinsertf64x",
        "vinserti32x",
        "vinserti64x",
    ])
    .chain(&[
        "vpcmpu",
        "vpmovm2",
        "vpmov",
        "vbroadcastf32x",
        "vbroadcasti32x",
    ])
    .any(|p| mnemonic.starts_with(p) && !matches!(mnemonic, "vpmovmskb" | "vpmovzxbw"))
        && !mnemonic.starts_with("vpmovsx")
        && !mnemonic.starts_with("vpmovzx")
}

/// Whether `mnemonic` on `ymm` registers is AVX2 (integer and cross-lane) rather than AVX.
fn avx2_on_ymm(mnemonic: &str) -> bool {
    let avx_on_ymm = [
        "vptest",
        "vpclmulqdq",
        "vpermilps",
        "vpermilpd",
        "vperm2f128",
    ];
    (mnemonic.starts_with("vp") && !avx_on_ymm.contains(&mnemonic))
        || [
            "vextracti128",
            "vinserti128",
            "vperm2i128",
            "vbroadcasti128",
            "vgather",
        ]
        .iter()
        .any(|p| mnemonic.starts_with(p))
}

/// The CPU flags the instructions of a disassembly need.
pub(crate) fn code_needs(disassembly: &str) -> BTreeSet<&'static str> {
    disassembly
        .lines()
        // An instruction line: "  4004d6:\ttilezero %tmm4".
        .filter_map(|line| line.split_once(":\t").map(|(_, rest)| rest))
        .flat_map(|instruction| {
            instruction_needs(instruction.rsplit('\t').next().unwrap_or_default())
        })
        .collect()
}

/// The flags in `needs` that `flags` lacks, AMX aside (it is gated at run time).
pub(crate) fn missing_flags<'a>(
    needs: impl IntoIterator<Item = &'a str>,
    flags: &BTreeSet<String>,
) -> Vec<&'a str> {
    needs
        .into_iter()
        .filter(|flag| !AMX.contains(flag) && !flags.contains(*flag))
        .collect()
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

/// Reads one library: the AMX gate and, with objdump, what its code needs.
pub(crate) fn inspect(path: &Path) -> Result<Library> {
    let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let amx_gate = bytes
        .windows(AMX_GATE_MESSAGE.len())
        .any(|window| window == AMX_GATE_MESSAGE);
    let needs = disassemble(path)?.map(|text| code_needs(&text));
    Ok(Library {
        path: path.to_owned(),
        needs,
        amx_gate,
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
    let Some(needs) = &library.needs else {
        return Ok(format!("{name}: objdump not installed, its code not read"));
    };
    let amx = needs.iter().any(|f| AMX.contains(f));
    let avx512 = needs.iter().any(|f| f.starts_with("avx512"));
    match rule {
        Rule::Portable if amx || avx512 => bail!(
            "{name} is not portable: its code needs {} (a build tuned for the machine it \
             was built on)",
            join(needs)
        ),
        Rule::Gated if amx && !library.amx_gate => {
            bail!("{name} holds AMX code without ggml's run-time AMX gate")
        }
        _ => {}
    }
    let plain: BTreeSet<&str> = needs.iter().copied().filter(|f| !AMX.contains(f)).collect();
    let amx = if amx {
        "; AMX code, run only where the kernel grants AMX"
    } else {
        "; no AMX code"
    };
    Ok(format!("{name}: its code needs {}{amx}", join(&plain)))
}

fn join(flags: &BTreeSet<&str>) -> String {
    if flags.is_empty() {
        return "no x86 extension".to_owned();
    }
    flags.iter().copied().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The flags one instruction needs, sorted.
    fn check(instruction: &str, expected: &[&str]) {
        let mut got = instruction_needs(instruction);
        got.sort_unstable();
        got.dedup();
        let mut expected = expected.to_vec();
        expected.sort_unstable();
        assert_eq!(got, expected, "{instruction}");
    }

    #[test]
    fn each_instruction_needs_the_flags_of_its_extension() {
        let avx512 = |extra: &[&'static str]| [AVX512, extra].concat();
        check("tilezero %tmm4", &["amx_tile"]);
        check("ldtilecfg 0x140(%rsp)", &["amx_tile"]);
        check("tdpbssd %tmm2,%tmm1,%tmm0", &["amx_tile", "amx_int8"]);
        check("vmovups (%rax),%zmm1", AVX512);
        check(
            "{vex} vpdpbusd %ymm4,%ymm6,%ymm1",
            &["avx", "avx2", "avx_vnni"],
        );
        check("vpdpbusd %zmm4,%zmm6,%zmm1", &avx512(&["avx512_vnni"]));
        check("vdpbf16ps %zmm1,%zmm2,%zmm3", &avx512(&["avx512_bf16"]));
        check("vpermt2b %zmm1,%zmm2,%zmm3", &avx512(&["avx512vbmi"]));
        check("vfmadd231ps %ymm1,%ymm2,%ymm3", &["avx", "fma"]);
        check("vaddps %ymm1,%ymm2,%ymm3", &["avx"]);
        check("vpaddd %ymm1,%ymm2,%ymm3", &["avx", "avx2"]);
        check("vpaddd %xmm1,%xmm2,%xmm3", &["avx"]);
        check("vcvtph2ps %xmm0,%ymm1", &["avx", "f16c"]);
        check("shlx %rax,%rbx,%rcx", &["bmi2"]);
        check("vextracti64x4 $0x1,%zmm0,%ymm1", &avx512(&["avx"]));
        check("addps %xmm1,%xmm2", &[]);
        check("call 1234 <tilezero_helper@plt>", &[]);
        check("mov %rax,%rbx", &[]);
    }

    #[test]
    fn a_disassembly_needs_the_union_of_its_instruction_lines() {
        let disassembly = "\
0000000000053500 <tinygemm_kernel_amx>:
   53517:\ttilezero %tmm4
   8b020:\tvfmadd231ps %ymm1,%ymm2,%ymm3
Disassembly of section .text: %zmm in a heading is not code
";
        let needs: Vec<&str> = code_needs(disassembly).into_iter().collect();
        assert_eq!(needs, ["amx_tile", "avx", "fma"]);
        assert!(code_needs("").is_empty());
    }

    #[test]
    fn missing_flags_leave_amx_to_its_gate() {
        let flags: BTreeSet<String> = ["avx", "avx2", "fma"].map(str::to_owned).into();
        let missing = missing_flags(["avx", "avx2", "amx_tile", "avx512f", "bmi2"], &flags);
        assert_eq!(missing, ["avx512f", "bmi2"]);
        assert!(missing_flags(["avx", "amx_int8"], &flags).is_empty());
    }

    #[test]
    fn cpu_flags_come_from_the_first_flags_line() {
        let cpuinfo = "processor\t: 0\nflags\t\t: fpu avx2 amx_tile\nbugs\t: x\n\
                       processor\t: 1\nflags\t\t: other\n";
        let flags = parse_cpu_flags(cpuinfo);
        assert_eq!(flags, ["amx_tile", "avx2", "fpu"].map(str::to_owned).into());
        assert!(parse_cpu_flags("Features\t: neon asimd\n").is_empty());
    }

    fn library(needs: &[&'static str], gate: bool) -> Library {
        Library {
            path: PathBuf::from("libggml-cpu.so"),
            needs: Some(needs.iter().copied().collect()),
            amx_gate: gate,
        }
    }

    #[test]
    fn the_portable_rule_refuses_amx_and_avx512_and_the_gated_rule_wants_the_gate() {
        let cases = [
            (
                library(&["avx", "avx2", "fma"], false),
                Rule::Portable,
                true,
            ),
            (library(&["avx2", "avx512f"], true), Rule::Portable, false),
            (library(&["avx2", "amx_tile"], true), Rule::Portable, false),
            (library(&["avx512f", "amx_tile"], true), Rule::Gated, true),
            (library(&["amx_tile"], false), Rule::Gated, false),
            (library(&["avx512f"], false), Rule::Gated, true),
        ];
        for (lib, rule, ok) in cases {
            assert_eq!(judge(&lib, rule).is_ok(), ok, "{lib:?} under {rule:?}");
        }
        let line = judge(&library(&["avx2", "fma"], false), Rule::Portable).unwrap();
        assert!(
            line.ends_with("its code needs avx2 fma; no AMX code"),
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
