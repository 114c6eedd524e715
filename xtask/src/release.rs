//! `cargo xtask release X.Y.Z [--no-tag]` and `cargo xtask release --dry-run [X.Y.Z]`:
//! cutting a release with one command.
//!
//! A release, in order:
//! 1. the working tree must be clean (`git status --porcelain` prints nothing), so the
//!    release commit holds the release and nothing else;
//! 2. every workspace manifest is bumped: the `[workspace.package]` version (which the
//!    crates inherit), any crate's own `version`, and every requirement on a workspace
//!    crate (`version = "..."` next to its `path`; crates.io needs it, the path is stripped
//!    when packaging); then `Cargo.lock` is refreshed;
//! 3. `CHANGELOG.md`'s `## [Unreleased]` section moves under `## [X.Y.Z] - YYYY-MM-DD`
//!    (today, UTC), leaving an empty `Unreleased` above it; an empty section is refused
//!    (the dry run accepts it, so CI stays green between a release and the next entry);
//! 4. every publishable crate (`publish` not `false`) is packaged, in dependency order;
//! 5. one commit `Release X.Y.Z`, and the annotated tag `vX.Y.Z` unless `--no-tag`.
//!
//! Publishing is left to the maintainer (`cargo publish --workspace`, printed at the end):
//! it cannot be undone, and it needs a crates.io token this task should never see.
//!
//! # Decisions
//! - **The crates come from `cargo metadata`**, not a fixed list: a crate added to the
//!   workspace is bumped and packaged without touching this file, in the order its
//!   dependencies require (a topological sort; a publishable crate depending on an
//!   unpublishable one is an error).
//! - **`cargo package`, not `cargo publish --dry-run`.** `cargo publish --dry-run -p
//!   ollm-core` resolves `ollm-types = "X.Y.Z"` against crates.io, where that version does
//!   not exist before the release, so it fails for every crate but the first (and it needs
//!   the network). `cargo package -p a -p b ...` with several packages (cargo 1.90 and
//!   later) writes the packaged crates into a local overlay registry
//!   (`target/package/tmp-registry`) and resolves the later crates against it, so our
//!   unpublished crates resolve offline while the others come from the lock file.
//! - **The dry run works on a clone.** `--dry-run` clones the repository at `HEAD` into
//!   `target/release-dry-run`, runs steps 2 to 4 there with `--offline --no-verify`, checks
//!   that `cargo metadata` reports the new version for every crate, and deletes the clone:
//!   the developer's tree, branch and tags are never touched, and what is checked is
//!   exactly what is committed. `--no-verify` skips rebuilding each packaged crate from
//!   scratch (minutes of compiling dependencies again in a fresh target folder); CI has
//!   already built and tested the same sources. A real release verifies.
//! - Manifests are edited line by line rather than re-serialised, so comments and layout
//!   survive; the lines understood are `version = "..."` in `[package]` and
//!   `[workspace.package]`, and `NAME = { ..., version = "..." }` or a
//!   `[...dependencies.NAME]` table naming a workspace crate.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{cargo, run_cmd, section, tidy};

/// What `release` was asked to do.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    /// The new version; `None` only for a dry run (the next patch version).
    pub(crate) version: Option<String>,
    /// Whether to create the tag.
    pub(crate) tag: bool,
    /// Rehearse in a throwaway clone: no commit, no tag, no change here.
    pub(crate) dry_run: bool,
}

/// Parses `release`'s arguments.
pub(crate) fn parse_args(args: &[String]) -> Result<Options> {
    let mut options = Options {
        version: None,
        tag: true,
        dry_run: false,
    };
    for arg in args {
        match arg.as_str() {
            "--no-tag" => options.tag = false,
            "--dry-run" => options.dry_run = true,
            flag if flag.starts_with('-') => bail!("unknown option `{flag}`"),
            version if options.version.is_none() => {
                parse_version(version)?;
                options.version = Some(version.to_owned());
            }
            extra => bail!("unexpected argument `{extra}`"),
        }
    }
    if options.version.is_none() && !options.dry_run {
        bail!("`release` needs the new version, for example `cargo xtask release 0.2.0`");
    }
    Ok(options)
}

pub(crate) fn run(root: &Path, options: &Options) -> Result<()> {
    if options.dry_run {
        return dry_run(root, options.version.as_deref());
    }
    let Some(version) = options.version.as_deref() else {
        bail!("no version given");
    };
    section(&format!("release {version}"));
    ensure_clean(root)?;
    let crates = prepare(root, version, Packaging::Verify)?;
    let message = format!("Release {version}");
    git(root, &["commit", "--quiet", "--all", "--message", &message])?;
    if options.tag {
        let tag = format!("v{version}");
        let message = format!("ollm {version}");
        git(root, &["tag", "--annotate", "--message", &message, &tag])?;
    }
    println!("release {version}: committed{}", tagged(options.tag));
    println!("next: git push --follow-tags && cargo publish --workspace");
    println!("      (publishes {} in this order)", crates.join(", "));
    Ok(())
}

fn tagged(tag: bool) -> &'static str {
    if tag { " and tagged" } else { " (no tag)" }
}

/// Runs steps 2 to 4 on a fresh clone of `HEAD` and deletes it.
pub(crate) fn dry_run(root: &Path, version: Option<&str>) -> Result<()> {
    let version = match version {
        Some(v) => v.to_owned(),
        None => next_patch(&workspace_version(root)?)?,
    };
    section(&format!("release --dry-run {version} (in a clone of HEAD)"));
    let clone = root.join("target").join("release-dry-run");
    if clone.exists() {
        fs::remove_dir_all(&clone).with_context(|| format!("could not remove {clone:?}"))?;
    }
    let head = git(root, &["rev-parse", "HEAD"])?;
    let into = clone
        .to_str()
        .context("the target folder's path is not UTF-8")?;
    git(root, &["clone", "--quiet", "--no-checkout", ".", into])?;
    git(&clone, &["checkout", "--quiet", "--detach", head.trim()])?;
    let result = rehearse(root, &clone, &version);
    fs::remove_dir_all(&clone).with_context(|| format!("could not remove {clone:?}"))?;
    let crates = result?;
    println!(
        "release dry run: {version} would package {}",
        crates.join(", ")
    );
    Ok(())
}

fn rehearse(root: &Path, clone: &Path, version: &str) -> Result<Vec<String>> {
    ensure_clean(clone)?;
    // The main target folder: packaging there leaves nothing behind in the clone.
    let target = root.join("target");
    let crates = prepare_in(clone, version, Packaging::Rehearse, Some(&target))?;
    let metadata = tidy::cargo_metadata(clone, &["--no-deps", "--offline"])?;
    for member in members(&metadata)? {
        if member.version != version {
            bail!(
                "after the bump, {} is still at {}",
                member.name,
                member.version
            );
        }
    }
    Ok(crates)
}

/// How thoroughly to package.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Packaging {
    /// Build every packaged crate from its package (a real release).
    Verify,
    /// Offline and without rebuilding (the dry run; see the module docs).
    Rehearse,
}

fn prepare(root: &Path, version: &str, packaging: Packaging) -> Result<Vec<String>> {
    prepare_in(root, version, packaging, None)
}

/// Steps 2 to 4 in `dir`; returns the publishable crates in dependency order.
fn prepare_in(
    dir: &Path,
    version: &str,
    packaging: Packaging,
    target: Option<&Path>,
) -> Result<Vec<String>> {
    let metadata = tidy::cargo_metadata(dir, &["--no-deps", "--offline"])?;
    let members = members(&metadata)?;
    let current = workspace_version_of(&members)?;
    check_newer(&current, version)?;
    let names: BTreeSet<String> = members.iter().map(|m| m.name.clone()).collect();
    let mut manifests = vec![dir.join("Cargo.toml")];
    manifests.extend(members.iter().map(|m| m.manifest.clone()));
    for manifest in manifests {
        let text =
            fs::read_to_string(&manifest).with_context(|| format!("reading {manifest:?}"))?;
        let bumped = bump_manifest(&text, &names, version);
        if bumped != text {
            fs::write(&manifest, bumped).with_context(|| format!("writing {manifest:?}"))?;
        }
    }
    let changelog = dir.join("CHANGELOG.md");
    let text = fs::read_to_string(&changelog).context("reading CHANGELOG.md")?;
    // Right after a release the section is empty; the rehearsal must not turn CI red then.
    let entries = match packaging {
        Packaging::Verify => Entries::Required,
        Packaging::Rehearse => Entries::MayBeEmpty,
    };
    fs::write(
        &changelog,
        release_changelog(&text, version, &today(), entries)?,
    )?;

    let order = publish_order(&members)?;
    let mut update = cargo();
    update
        .current_dir(dir)
        .args(["update", "--workspace", "--offline"]);
    run_cmd(&mut update)?;
    let mut package = cargo();
    package
        .current_dir(dir)
        .args(["package", "--allow-dirty", "--locked"]);
    if packaging == Packaging::Rehearse {
        package.args(["--offline", "--no-verify"]);
    }
    if let Some(target) = target {
        package.env("CARGO_TARGET_DIR", target);
    }
    for name in &order {
        package.args(["-p", name]);
    }
    run_cmd(&mut package)?;
    Ok(order)
}

/// A workspace member, as far as releasing cares.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    name: String,
    version: String,
    manifest: PathBuf,
    publish: bool,
    /// Workspace crates it needs at build or run time (dev-dependencies do not count:
    /// cargo strips path-only ones when packaging).
    needs: Vec<String>,
}

fn members(metadata: &Value) -> Result<Vec<Member>> {
    let packages = metadata["packages"]
        .as_array()
        .context("no `packages` in `cargo metadata`")?;
    let names: BTreeSet<&str> = packages.iter().filter_map(|p| p["name"].as_str()).collect();
    packages
        .iter()
        .map(|p| {
            let text = |key: &str| {
                p[key]
                    .as_str()
                    .map(str::to_owned)
                    .with_context(|| format!("a package without `{key}` in `cargo metadata`"))
            };
            let needs = p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .filter_map(|d| d["name"].as_str())
                .filter(|n| names.contains(n))
                .map(str::to_owned)
                .collect();
            Ok(Member {
                name: text("name")?,
                version: text("version")?,
                manifest: PathBuf::from(text("manifest_path")?),
                // `publish` is null (anywhere) or a list of registries (`[]` for `false`).
                publish: p["publish"].as_array().is_none_or(|r| !r.is_empty()),
                needs,
            })
        })
        .collect()
}

/// The version every publishable crate shares (the `[workspace.package]` one).
fn workspace_version_of(members: &[Member]) -> Result<String> {
    let versions: BTreeSet<&str> = members
        .iter()
        .filter(|m| m.publish)
        .map(|m| m.version.as_str())
        .collect();
    match versions.into_iter().collect::<Vec<_>>().as_slice() {
        [one] => Ok((*one).to_owned()),
        [] => bail!("no publishable crate in the workspace"),
        many => bail!("the publishable crates disagree on their version: {many:?}"),
    }
}

fn workspace_version(root: &Path) -> Result<String> {
    let metadata = tidy::cargo_metadata(root, &["--no-deps", "--offline"])?;
    workspace_version_of(&members(&metadata)?)
}

/// The publishable crates, each after the workspace crates it needs.
fn publish_order(members: &[Member]) -> Result<Vec<String>> {
    for m in members.iter().filter(|m| m.publish) {
        for need in &m.needs {
            if members.iter().any(|o| &o.name == need && !o.publish) {
                bail!(
                    "{} is published but needs {need}, which is not (`publish = false`)",
                    m.name
                );
            }
        }
    }
    let mut done: Vec<String> = Vec::new();
    let mut left: Vec<&Member> = members.iter().filter(|m| m.publish).collect();
    while !left.is_empty() {
        let before = left.len();
        let mut next = Vec::new();
        for m in left {
            if m.needs.iter().all(|n| done.contains(n)) {
                done.push(m.name.clone());
            } else {
                next.push(m);
            }
        }
        if next.len() == before {
            let stuck: Vec<&str> = next.iter().map(|m| m.name.as_str()).collect();
            bail!("the workspace crates {stuck:?} depend on each other in a cycle");
        }
        left = next;
    }
    Ok(done)
}

/// `text` (a `Cargo.toml`) with its package version and its requirements on the
/// workspace crates `names` set to `version`; other lines are kept byte for byte.
fn bump_manifest(text: &str, names: &BTreeSet<String>, version: &str) -> String {
    let mut section = String::new();
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            section = trimmed.trim_matches(['[', ']']).trim().to_owned();
            out.push_str(line);
            continue;
        }
        let key = trimmed.split('=').next().unwrap_or_default().trim();
        let own_version =
            matches!(section.as_str(), "package" | "workspace.package") && key == "version";
        let dep_table = section
            .rsplit_once('.')
            .is_some_and(|(head, name)| head.ends_with("dependencies") && names.contains(name))
            && key == "version";
        let dep_line = section.ends_with("dependencies") && names.contains(key);
        if own_version || dep_table || dep_line {
            out.push_str(&set_version(line, version));
        } else {
            out.push_str(line);
        }
    }
    out
}

/// `line` with the string after its `version = ` (if any) replaced by `version`.
fn set_version(line: &str, version: &str) -> String {
    let Some(at) = find_version_key(line) else {
        return line.to_owned();
    };
    let rest = &line[at..];
    let Some(open) = rest.find('"') else {
        return line.to_owned();
    };
    let Some(len) = rest[open + 1..].find('"') else {
        return line.to_owned();
    };
    let start = at + open + 1;
    format!("{}{version}{}", &line[..start], &line[start + len..])
}

/// Where the `version` key starts in `line`: at the start, or after `{` or `,`.
fn find_version_key(line: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = line[from..].find("version") {
        let at = from + found;
        let before = line[..at].trim_end();
        let after = line[at + "version".len()..].trim_start();
        if (before.is_empty() || before.ends_with('{') || before.ends_with(','))
            && after.starts_with('=')
        {
            return Some(at);
        }
        from = at + "version".len();
    }
    None
}

/// Whether a release needs changelog entries.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Entries {
    /// A real release: an empty `Unreleased` section means there is nothing to release.
    Required,
    /// The rehearsal: an empty section is moved as it is.
    MayBeEmpty,
}

/// `text` (a Keep a Changelog file) with its `Unreleased` entries under `version`.
fn release_changelog(text: &str, version: &str, date: &str, entries: Entries) -> Result<String> {
    const UNRELEASED: &str = "## [Unreleased]";
    let Some(start) = text.find(&format!("{UNRELEASED}\n")) else {
        bail!("CHANGELOG.md has no `{UNRELEASED}` heading");
    };
    if text.contains(&format!("## [{version}]")) {
        bail!("CHANGELOG.md already has a section for {version}");
    }
    let body_start = start + UNRELEASED.len() + 1;
    let tail = &text[body_start..];
    let body_end = if tail.starts_with("## ") {
        body_start
    } else {
        tail.find("\n## ")
            .map_or(text.len(), |i| body_start + i + 1)
    };
    let body = text[body_start..body_end].trim();
    if body.is_empty() && entries == Entries::Required {
        bail!("CHANGELOG.md's Unreleased section is empty: nothing to release");
    }
    let rest = &text[body_end..];
    let gap = if rest.is_empty() { "" } else { "\n" };
    let body = if body.is_empty() {
        String::new()
    } else {
        format!("\n{body}\n")
    };
    Ok(format!(
        "{}{UNRELEASED}\n\n## [{version}] - {date}\n{body}{gap}{rest}",
        &text[..start]
    ))
}

/// Fails unless `version` is a plain `X.Y.Z` (optionally `-pre`) above `current`.
fn check_newer(current: &str, version: &str) -> Result<()> {
    let new = parse_version(version)?;
    let old = parse_version(current)?;
    if new <= old {
        bail!("{version} is not above the current version {current}");
    }
    Ok(())
}

/// `X.Y.Z` or `X.Y.Z-pre` as numbers (a pre-release sorts before its release).
fn parse_version(version: &str) -> Result<(u64, u64, u64, bool)> {
    let (core, pre) = match version.split_once('-') {
        Some((core, pre)) if !pre.is_empty() && pre.chars().all(is_pre_char) => (core, true),
        Some(_) => bail!("`{version}` has an invalid pre-release part"),
        None => (version, false),
    };
    let parts: Vec<&str> = core.split('.').collect();
    let number = |s: &str| -> Result<u64> {
        let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        if !plain || (s.len() > 1 && s.starts_with('0')) {
            bail!("`{version}` is not a version like 1.2.3");
        }
        Ok(s.parse()?)
    };
    match parts.as_slice() {
        [major, minor, patch] => Ok((number(major)?, number(minor)?, number(patch)?, !pre)),
        _ => bail!("`{version}` is not a version like 1.2.3"),
    }
}

fn is_pre_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '-'
}

/// The next patch version after `current` (`0.1.0` gives `0.1.1`).
fn next_patch(current: &str) -> Result<String> {
    let (major, minor, patch, _) = parse_version(current)?;
    Ok(format!("{major}.{minor}.{}", patch + 1))
}

/// Today's date (UTC) as `YYYY-MM-DD`.
fn today() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_date(i64::try_from(secs / 86_400).unwrap_or(0));
    format!("{y:04}-{m:02}-{d:02}")
}

/// The proleptic Gregorian date `days` days after 1970-01-01 (the well-known
/// era-of-400-years conversion).
fn civil_date(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (
        year,
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

/// Fails unless `git status --porcelain` in `dir` prints nothing.
fn ensure_clean(dir: &Path) -> Result<()> {
    let status = git(dir, &["status", "--porcelain"])?;
    if !status.trim().is_empty() {
        bail!("the working tree is not clean; commit or stash first:\n{status}");
    }
    Ok(())
}

/// Runs `git ARGS` in `dir`; returns its standard output, failing unless it succeeds.
fn git(dir: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("git")
        .current_dir(dir)
        .args(args)
        .output()
        .with_context(|| format!("could not run git {args:?}"))?;
    if !output.status.success() {
        bail!(
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests;
