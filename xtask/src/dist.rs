//! `cargo xtask dist`: the `ollm` release tarball.
//!
//! Builds `ollm` with the release profile and lays out
//! `target/dist/ollm-X.Y.Z-<target>/`:
//!
//! ```text
//! bin/ollm                      the binary
//! completions/ollm.bash, _ollm, ollm.fish, ollm.elv, _ollm.ps1
//! man/man1/ollm.1               the man page
//! README.md CHANGELOG.md LICENSE-MIT LICENSE-APACHE
//! ```
//!
//! then packs it into `target/dist/ollm-X.Y.Z-<target>.tar.gz` with a
//! `ollm-X.Y.Z-<target>.tar.gz.sha256` beside it, in the format `sha256sum -c` reads.
//!
//! # Decisions
//! - Completions and the man page come from the binary just built (`ollm completions
//!   SHELL`, `ollm man`), which generates them from its clap definition: they cannot
//!   describe another version's flags.
//! - The version is the CLI crate's, from `cargo metadata`; the target is rustc's host
//!   triple (`rustc -vV`), since the build is native.
//! - `tar` and `sha256sum` (or `shasum -a 256` on macOS) do the packing and hashing: every
//!   machine that builds a release has them, and xtask stays free of archive crates.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{cargo, run_cmd, section, tidy};

/// The completion scripts shipped, as (shell, file name).
const COMPLETIONS: &[(&str, &str)] = &[
    ("bash", "ollm.bash"),
    ("zsh", "_ollm"),
    ("fish", "ollm.fish"),
    ("elvish", "ollm.elv"),
    ("powershell", "_ollm.ps1"),
];

/// The files copied from the repository root.
const DOCS: &[&str] = &["README.md", "CHANGELOG.md", "LICENSE-MIT", "LICENSE-APACHE"];

/// Builds the tarball; returns its path.
pub(crate) fn run(root: &Path) -> Result<PathBuf> {
    section("dist");
    let version = cli_version(root)?;
    let target = host_triple()?;
    run_cmd(
        cargo()
            .current_dir(root)
            .args(["build", "--release", "--locked", "-p", "ollm-cli"]),
    )?;
    let binary = root
        .join("target/release")
        .join(format!("ollm{}", std::env::consts::EXE_SUFFIX));
    let path = pack(
        root,
        &binary,
        &root.join("target/dist"),
        &archive_name(&version, &target),
    )?;
    println!("dist: {}", path.display());
    Ok(path)
}

/// Lays out `dist/NAME/` from `binary` and `root`'s docs, packs it into `dist/NAME.tar.gz`
/// and writes its `.sha256`; returns the tarball's path.
fn pack(root: &Path, binary: &Path, dist: &Path, name: &str) -> Result<PathBuf> {
    let stage = dist.join(name);
    if stage.exists() {
        fs::remove_dir_all(&stage).with_context(|| format!("could not remove {stage:?}"))?;
    }
    lay_out(root, binary, &stage)?;
    let tarball = format!("{name}.tar.gz");
    run_cmd(
        Command::new("tar")
            .current_dir(dist)
            .args(["-czf", &tarball, name]),
    )?;
    let sum = sha256(dist, &tarball)?;
    fs::write(dist.join(format!("{tarball}.sha256")), sum)?;
    Ok(dist.join(&tarball))
}

/// `ollm-X.Y.Z-<target>`: the folder inside the tarball and the tarball's stem.
fn archive_name(version: &str, target: &str) -> String {
    format!("ollm-{version}-{target}")
}

/// Copies the binary and docs into `stage` and writes the generated files.
fn lay_out(root: &Path, binary: &Path, stage: &Path) -> Result<()> {
    let exe = format!("ollm{}", std::env::consts::EXE_SUFFIX);
    for folder in ["bin", "completions", "man/man1"] {
        fs::create_dir_all(stage.join(folder))?;
    }
    fs::copy(binary, stage.join("bin").join(&exe))
        .with_context(|| format!("could not copy {binary:?}"))?;
    for doc in DOCS {
        fs::copy(root.join(doc), stage.join(doc))
            .with_context(|| format!("could not copy {doc}"))?;
    }
    for (shell, file) in COMPLETIONS {
        let script = output_of(Command::new(binary).args(["completions", shell]))?;
        fs::write(stage.join("completions").join(file), script)?;
    }
    let page = output_of(Command::new(binary).arg("man"))?;
    fs::write(stage.join("man/man1/ollm.1"), page)?;
    Ok(())
}

/// The CLI crate's version.
fn cli_version(root: &Path) -> Result<String> {
    let metadata = tidy::cargo_metadata(root, &["--no-deps"])?;
    metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "ollm-cli")
        .and_then(|p| p["version"].as_str())
        .map(str::to_owned)
        .context("`cargo metadata` lists no ollm-cli")
}

/// rustc's host triple.
fn host_triple() -> Result<String> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let text = String::from_utf8(output_of(Command::new(rustc).arg("-vV"))?)?;
    host_of(&text).context("`rustc -vV` printed no `host:` line")
}

/// The `host:` value of `rustc -vV`'s output.
fn host_of(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("host:"))
        .map(|host| host.trim().to_owned())
}

/// `<hex>  <file>\n` for `file` in `dir`.
fn sha256(dir: &Path, file: &str) -> Result<Vec<u8>> {
    let mut sha256sum = Command::new("sha256sum");
    sha256sum.current_dir(dir).arg(file);
    if let Ok(sum) = output_of(&mut sha256sum) {
        return Ok(sum);
    }
    let mut shasum = Command::new("shasum");
    shasum.current_dir(dir).args(["-a", "256", file]);
    output_of(&mut shasum).context("neither `sha256sum` nor `shasum` could hash the tarball")
}

/// A command's standard output; fails unless it succeeds.
fn output_of(cmd: &mut Command) -> Result<Vec<u8>> {
    let output = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !output.status.success() {
        bail!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(output.stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_archive_is_named_by_version_and_target() {
        assert_eq!(
            archive_name("0.2.0", "x86_64-unknown-linux-gnu"),
            "ollm-0.2.0-x86_64-unknown-linux-gnu"
        );
    }

    /// A stand-in for `ollm` that prints its arguments, as `completions` and `man` print.
    #[cfg(unix)]
    fn fake_binary(dir: &Path) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join("ollm");
        fs::write(&path, "#!/bin/sh\necho \"generated by: $*\"\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn the_tarball_holds_binary_completions_man_page_and_docs_with_a_checksum() {
        let root = tempfile::tempdir().unwrap();
        for doc in DOCS {
            fs::write(root.path().join(doc), format!("{doc} text")).unwrap();
        }
        let binary = fake_binary(root.path());
        let dist = root.path().join("dist");
        fs::create_dir_all(&dist).unwrap();
        let tarball = pack(root.path(), &binary, &dist, "ollm-1.2.3-test").unwrap();
        assert_eq!(tarball, dist.join("ollm-1.2.3-test.tar.gz"));

        let listing = output_of(Command::new("tar").arg("-tzf").arg(&tarball)).unwrap();
        let listing = String::from_utf8(listing).unwrap();
        let mut expected = vec!["bin/ollm".to_owned(), "man/man1/ollm.1".to_owned()];
        expected.extend(COMPLETIONS.iter().map(|(_, f)| format!("completions/{f}")));
        expected.extend(DOCS.iter().map(|d| (*d).to_owned()));
        for file in expected {
            let entry = format!("ollm-1.2.3-test/{file}");
            assert!(listing.lines().any(|l| l == entry), "{entry} in {listing}");
        }
        let stage = dist.join("ollm-1.2.3-test");
        let zsh = fs::read_to_string(stage.join("completions/_ollm")).unwrap();
        assert_eq!(zsh, "generated by: completions zsh\n");
        let man = fs::read_to_string(stage.join("man/man1/ollm.1")).unwrap();
        assert_eq!(man, "generated by: man\n");

        let sum = fs::read_to_string(dist.join("ollm-1.2.3-test.tar.gz.sha256")).unwrap();
        let (hex, file) = sum.trim_end().split_once("  ").unwrap();
        assert_eq!(file, "ollm-1.2.3-test.tar.gz");
        assert_eq!(hex.len(), 64);
        assert!(hex.chars().all(|c| c.is_ascii_hexdigit()));
    }

    #[test]
    fn the_host_triple_is_read_from_rustc() {
        let text = "rustc 1.95.0\nbinary: rustc\nhost: aarch64-apple-darwin\nrelease: 1.95.0\n";
        assert_eq!(host_of(text).as_deref(), Some("aarch64-apple-darwin"));
        assert_eq!(host_of("rustc 1.95.0\n"), None);
    }
}
