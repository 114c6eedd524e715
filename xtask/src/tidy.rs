//! `cargo xtask tidy`: the checks that keep the architecture honest.
//!
//! - **Dependency direction.** `ollm-types` is plain data: it must not reach tokio, reqwest
//!   or hyper, directly or through any normal (non-dev, non-build) dependency. `ollm-core`
//!   is the runtime without HTTP: it must not reach reqwest or hyper. `ollm-tools` must
//!   not reach the CLI or anything CLI-ish (clap, rustyline, indicatif), and neither may
//!   `ollm-mcp` (ARCHITECTURE.md: it never depends on the CLI). `ollm-serve` may reach
//!   only the types, core and the bridge among ours: not the CLI, the tools or MCP
//!   (serve runs no tool), nor anything CLI-ish. `ollm-eval` runs `ollm`
//!   as a binary and never links the CLI; xtask reaches none of ollm's crates nor tokio
//!   (it runs the eval as a binary, so a runtime change never rebuilds xtask). The check
//!   walks the resolved graph from `cargo metadata` (all features, all targets), so a
//!   dependency pulled in behind a feature or a platform still counts, and it prints the
//!   chain that leads to a banned crate.
//! - **`ollm-types` stays plain data.** Its normal and build dependencies are exactly an
//!   allowlist (serde, serde_json, thiserror): a new one is a design decision, not a
//!   convenience, so adding it means editing [`TYPES_ALLOWED`] in review. Dev-dependencies
//!   (test tools) are free.
//! - **No module cycles.** No two modules of one crate reach into each other (`use
//!   crate::`, `use super::`, inline paths, re-exports), directly or around a loop (see
//!   [`crate::cycles`] for what counts; there are no exceptions).
//! - **The turn loop never branches on the strategy.** No code in core's `chat/` names a
//!   `Strategy` variant (see [`crate::shape`]).
//! - **Short functions.** No non-test function over 60 lines in any crate; the longest of
//!   each crate is printed (see [`crate::shape`]).
//! - **Module docs.** Every `.rs` file under `crates/`, `examples/`, `test-utils/` and
//!   `xtask/` starts with a `//!` comment (blank lines before it are allowed, nothing else).
//! - **Crate READMEs.** Every workspace member has a `README.md` next to its manifest.
//!
//! All problems are collected and reported together; the task fails if there is any.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde_json::Value;

use crate::{cargo, collect_rs_files, cycles, section, shape};

/// Which crates each crate must never depend on, directly or transitively.
const BANS: &[(&str, &[&str])] = &[
    ("ollm-types", &["tokio", "reqwest", "hyper"]),
    ("ollm-core", &["reqwest", "hyper"]),
    // The tools are a library: terminals and argument parsing belong to the CLI.
    (
        "ollm-tools",
        &["ollm-cli", "clap", "rustyline", "indicatif"],
    ),
    // MCP servers' tools are a library too: the CLI wraps them, never the other way.
    ("ollm-mcp", &["ollm-cli", "clap", "rustyline", "indicatif"]),
    // The gateway is a library over core and the pool: it runs no tool and knows no CLI.
    (
        "ollm-serve",
        &[
            "ollm-cli",
            "ollm-tools",
            "ollm-mcp",
            "clap",
            "rustyline",
            "indicatif",
        ],
    ),
    // The eval runs `ollm` as a user does, as a binary: it links the runtime, never the CLI.
    ("ollm-eval", &["ollm-cli"]),
    // xtask orchestrates: it runs the eval as a binary, so no runtime change rebuilds it.
    (
        "xtask",
        &[
            "ollm-types",
            "ollm-core",
            "ollm-bridge",
            "ollm-eval",
            "ollm-serve",
            "tokio",
        ],
    ),
];

/// The only crates `ollm-types` may depend on (normal and build dependencies).
const TYPES_ALLOWED: &[&str] = &["serde", "serde_json", "thiserror"];

/// The folders whose `.rs` files must open with a `//!` module doc.
const DOC_ROOTS: &[&str] = &["crates", "examples", "test-utils", "xtask"];

pub(crate) fn run(root: &Path) -> Result<()> {
    section("tidy");
    let metadata = cargo_metadata(root, &[])?;
    let mut problems = banned_dependencies(&metadata)?;
    problems.extend(types_dependencies(&metadata)?);
    problems.extend(cycles::check(&metadata)?);
    problems.extend(shape::strategy_branches(root)?);
    let (long, longest) = shape::long_functions(&metadata)?;
    for line in &longest {
        println!("tidy: {line}");
    }
    problems.extend(long);
    problems.extend(missing_readmes(&metadata)?);
    problems.extend(missing_module_docs(root)?);
    if problems.is_empty() {
        println!("tidy: ok");
        return Ok(());
    }
    for problem in &problems {
        println!("tidy: {problem}");
    }
    bail!("tidy found {} problem(s)", problems.len())
}

/// `cargo metadata --format-version 1 EXTRA...`, parsed.
pub(crate) fn cargo_metadata(root: &Path, extra: &[&str]) -> Result<Value> {
    let output = cargo()
        .current_dir(root)
        .args(["metadata", "--format-version", "1"])
        .args(extra)
        .output()
        .context("could not run `cargo metadata`")?;
    if !output.status.success() {
        bail!(
            "`cargo metadata` failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    serde_json::from_slice(&output.stdout).context("`cargo metadata` printed invalid JSON")
}

/// Returns one message per banned crate reachable from a guarded crate.
fn banned_dependencies(metadata: &Value) -> Result<Vec<String>> {
    let graph = Graph::from_metadata(metadata)?;
    let mut problems = Vec::new();
    for (krate, banned) in BANS {
        let Some(start) = graph.id_of(krate) else {
            problems.push(format!("crate `{krate}` is not in the workspace"));
            continue;
        };
        for (name, chain) in graph.reachable_by_normal_deps(start) {
            if banned.contains(&name.as_str()) {
                problems.push(format!(
                    "`{krate}` must not depend on `{name}`: {}",
                    chain.join(" -> ")
                ));
            }
        }
    }
    Ok(problems)
}

/// One message per dependency of `ollm-types` outside [`TYPES_ALLOWED`]. Reads the
/// manifest's declared dependencies, so a renamed one shows under its package name.
fn types_dependencies(metadata: &Value) -> Result<Vec<String>> {
    let package = array(metadata, "packages")?
        .iter()
        .find(|p| p["name"] == "ollm-types")
        .context("crate `ollm-types` is not in the workspace")?;
    let mut problems = Vec::new();
    for dep in array(package, "dependencies")? {
        let kind = dep["kind"].as_str().unwrap_or("normal");
        let name = string(dep, "name")?;
        if kind != "dev" && !TYPES_ALLOWED.contains(&name.as_str()) {
            problems.push(format!(
                "`ollm-types` depends on `{name}` ({kind}), outside its allowlist \
                 {TYPES_ALLOWED:?}: it is plain data"
            ));
        }
    }
    Ok(problems)
}

/// The resolved dependency graph, keeping only normal-dependency edges.
struct Graph {
    names: HashMap<String, String>,
    normal_deps: HashMap<String, Vec<String>>,
}

impl Graph {
    fn from_metadata(metadata: &Value) -> Result<Self> {
        let mut names = HashMap::new();
        for package in array(metadata, "packages")? {
            names.insert(string(package, "id")?, string(package, "name")?);
        }
        let resolve = metadata
            .get("resolve")
            .context("`cargo metadata` has no `resolve`")?;
        let mut normal_deps = HashMap::new();
        for node in array(resolve, "nodes")? {
            let mut deps = Vec::new();
            for dep in array(node, "deps")? {
                // `kind` is null for normal dependencies, "dev" or "build" otherwise.
                let is_normal = array(dep, "dep_kinds")?
                    .iter()
                    .any(|kind| kind.get("kind").is_none_or(Value::is_null));
                if is_normal {
                    deps.push(string(dep, "pkg")?);
                }
            }
            normal_deps.insert(string(node, "id")?, deps);
        }
        Ok(Self { names, normal_deps })
    }

    fn id_of(&self, name: &str) -> Option<&str> {
        self.names
            .iter()
            .find(|(_, n)| n.as_str() == name)
            .map(|(id, _)| id.as_str())
    }

    fn name_of<'a>(&'a self, id: &'a str) -> &'a str {
        self.names.get(id).map_or(id, String::as_str)
    }

    /// Every crate reachable from `start`, each with the shortest chain of names to it.
    fn reachable_by_normal_deps(&self, start: &str) -> Vec<(String, Vec<String>)> {
        let mut parent: HashMap<&str, &str> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        let mut found = Vec::new();
        while let Some(id) = queue.pop_front() {
            for dep in self.normal_deps.get(id).into_iter().flatten() {
                if dep == start || parent.contains_key(dep.as_str()) {
                    continue;
                }
                parent.insert(dep, id);
                queue.push_back(dep);
                found.push(dep.as_str());
            }
        }
        found
            .into_iter()
            .map(|id| {
                let mut chain = vec![self.name_of(id).to_owned()];
                let mut at = id;
                while let Some(&up) = parent.get(at) {
                    chain.push(self.name_of(up).to_owned());
                    at = up;
                }
                chain.reverse();
                (self.name_of(id).to_owned(), chain)
            })
            .collect()
    }
}

fn array<'a>(value: &'a Value, key: &str) -> Result<&'a Vec<Value>> {
    value
        .get(key)
        .and_then(Value::as_array)
        .with_context(|| format!("no array `{key}` in `cargo metadata`"))
}

fn string(value: &Value, key: &str) -> Result<String> {
    value
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_owned)
        .with_context(|| format!("no string `{key}` in `cargo metadata`"))
}

fn missing_readmes(metadata: &Value) -> Result<Vec<String>> {
    let members = array(metadata, "workspace_members")?;
    let mut problems = Vec::new();
    for package in array(metadata, "packages")? {
        if !members.contains(&package["id"]) {
            continue;
        }
        let manifest = PathBuf::from(string(package, "manifest_path")?);
        let dir = manifest.parent().context("manifest path has no parent")?;
        if !dir.join("README.md").is_file() {
            problems.push(format!(
                "crate `{}` has no README.md in {}",
                string(package, "name")?,
                dir.display()
            ));
        }
    }
    Ok(problems)
}

fn missing_module_docs(root: &Path) -> Result<Vec<String>> {
    let mut files = Vec::new();
    for dir in DOC_ROOTS {
        collect_rs_files(&root.join(dir), &mut files)?;
    }
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        if !starts_with_module_doc(&text) {
            let shown = file.strip_prefix(root).unwrap_or(&file);
            problems.push(format!(
                "{} does not start with a `//!` module doc",
                shown.display()
            ));
        }
    }
    Ok(problems)
}

/// Whether the first non-blank line of a source file is a `//!` comment.
fn starts_with_module_doc(text: &str) -> bool {
    text.lines()
        .find(|line| !line.trim().is_empty())
        .is_some_and(|line| line.trim_start().starts_with("//!"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn module_doc_must_come_first() {
        let cases = [
            ("//! Docs.\nfn main() {}\n", true),
            ("\n\n  //! Indented docs after blank lines.\n", true),
            ("// A plain comment.\n//! Docs.\n", false),
            ("/// An item doc.\nfn f() {}\n", false),
            ("#![allow(dead_code)]\n//! Docs.\n", false),
            ("fn main() {}\n", false),
            ("", false),
        ];
        for (text, expected) in cases {
            assert_eq!(starts_with_module_doc(text), expected, "{text:?}");
        }
    }

    fn dep(pkg: &str, kind: Value) -> Value {
        json!({ "pkg": pkg, "dep_kinds": [{ "kind": kind }] })
    }

    /// A small graph: types -> serde; core -> types, tokio (normal), reqwest (dev);
    /// tokio -> mio; reqwest -> hyper; eval -> core; xtask -> eval (dev); cli -> core;
    /// tools, mcp and serve -> core.
    fn metadata() -> Value {
        let package = |name: &str| json!({ "id": format!("{name}-id"), "name": name });
        let packages = [
            "ollm-types",
            "ollm-core",
            "ollm-tools",
            "ollm-mcp",
            "clap",
            "serde",
            "tokio",
            "mio",
            "reqwest",
            "hyper",
            "ollm-eval",
            "xtask",
            "ollm-cli",
            "ollm-serve",
        ]
        .map(package);
        json!({
            "packages": packages,
            "resolve": { "nodes": [
                { "id": "ollm-types-id", "deps": [dep("serde-id", Value::Null)] },
                { "id": "ollm-core-id", "deps": [
                    dep("ollm-types-id", Value::Null),
                    dep("tokio-id", Value::Null),
                    dep("reqwest-id", json!("dev")),
                ] },
                { "id": "tokio-id", "deps": [dep("mio-id", Value::Null)] },
                { "id": "reqwest-id", "deps": [dep("hyper-id", Value::Null)] },
                { "id": "serde-id", "deps": [] },
                { "id": "mio-id", "deps": [] },
                { "id": "hyper-id", "deps": [] },
                { "id": "ollm-tools-id", "deps": [dep("ollm-core-id", Value::Null)] },
                { "id": "clap-id", "deps": [] },
                { "id": "ollm-mcp-id", "deps": [dep("ollm-core-id", Value::Null)] },
                { "id": "ollm-eval-id", "deps": [dep("ollm-core-id", Value::Null)] },
                { "id": "xtask-id", "deps": [dep("ollm-eval-id", json!("dev"))] },
                { "id": "ollm-cli-id", "deps": [dep("ollm-core-id", Value::Null)] },
                { "id": "ollm-serve-id", "deps": [dep("ollm-core-id", Value::Null)] },
            ] },
        })
    }

    /// `ollm-types` declaring `deps` as (name, kind) pairs.
    fn types_with(deps: &[(&str, Option<&str>)]) -> Value {
        let deps: Vec<Value> = deps
            .iter()
            .map(|(name, kind)| json!({ "name": name, "kind": kind }))
            .collect();
        json!({ "packages": [{ "id": "t", "name": "ollm-types", "dependencies": deps }] })
    }

    #[test]
    fn types_may_depend_only_on_the_allowlist() {
        let allowed = types_with(&[
            ("serde", None),
            ("serde_json", None),
            ("thiserror", None),
            ("proptest", Some("dev")),
        ]);
        assert_eq!(types_dependencies(&allowed).ok(), Some(vec![]));
        // A deliberate violation: one normal and one build dependency.
        let violating = types_with(&[("serde", None), ("tokio", None), ("cc", Some("build"))]);
        assert_eq!(
            types_dependencies(&violating).ok(),
            Some(vec![
                "`ollm-types` depends on `tokio` (normal), outside its allowlist \
                 [\"serde\", \"serde_json\", \"thiserror\"]: it is plain data"
                    .to_owned(),
                "`ollm-types` depends on `cc` (build), outside its allowlist \
                 [\"serde\", \"serde_json\", \"thiserror\"]: it is plain data"
                    .to_owned(),
            ])
        );
    }

    #[test]
    fn dev_dependencies_are_not_followed() {
        assert_eq!(banned_dependencies(&metadata()).ok(), Some(vec![]));
    }

    #[test]
    fn a_transitive_normal_dependency_is_reported_with_its_chain() {
        let mut metadata = metadata();
        // types -> serde -> tokio: tokio is now reachable from types through serde.
        metadata["resolve"]["nodes"][4]["deps"] = json!([dep("tokio-id", Value::Null)]);
        assert_eq!(
            banned_dependencies(&metadata).ok(),
            Some(vec![
                "`ollm-types` must not depend on `tokio`: ollm-types -> serde -> tokio".to_owned()
            ])
        );
    }

    #[test]
    fn a_dependency_that_is_both_dev_and_normal_counts() {
        let mut metadata = metadata();
        metadata["resolve"]["nodes"][1]["deps"][2] =
            json!({ "pkg": "reqwest-id", "dep_kinds": [{ "kind": "dev" }, { "kind": null }] });
        assert_eq!(
            banned_dependencies(&metadata).ok(),
            Some(vec![
                "`ollm-core` must not depend on `reqwest`: ollm-core -> reqwest".to_owned(),
                "`ollm-core` must not depend on `hyper`: ollm-core -> reqwest -> hyper".to_owned(),
            ])
        );
    }

    #[test]
    fn the_mcp_crate_must_not_depend_on_the_cli() {
        let mut metadata = metadata();
        metadata["resolve"]["nodes"][9]["deps"] = json!([
            dep("ollm-core-id", Value::Null),
            dep("ollm-tools-id", Value::Null),
        ]);
        metadata["resolve"]["nodes"][7]["deps"] = json!([dep("clap-id", Value::Null)]);
        assert_eq!(
            banned_dependencies(&metadata).ok(),
            Some(vec![
                "`ollm-tools` must not depend on `clap`: ollm-tools -> clap".to_owned(),
                "`ollm-mcp` must not depend on `clap`: ollm-mcp -> ollm-tools -> clap".to_owned(),
            ])
        );
    }

    #[test]
    fn the_gateway_must_not_depend_on_the_tools() {
        let mut metadata = metadata();
        // Node 13 is the gateway.
        metadata["resolve"]["nodes"][13]["deps"] = json!([
            dep("ollm-core-id", Value::Null),
            dep("ollm-tools-id", Value::Null),
        ]);
        assert_eq!(
            banned_dependencies(&metadata).ok(),
            Some(vec![
                "`ollm-serve` must not depend on `ollm-tools`: ollm-serve -> ollm-tools".to_owned(),
            ])
        );
    }

    #[test]
    fn the_tools_crate_must_not_depend_on_cli_crates() {
        let mut metadata = metadata();
        metadata["resolve"]["nodes"][7]["deps"] = json!([
            dep("ollm-core-id", Value::Null),
            dep("clap-id", Value::Null),
        ]);
        assert_eq!(
            banned_dependencies(&metadata).ok(),
            Some(vec![
                "`ollm-tools` must not depend on `clap`: ollm-tools -> clap".to_owned()
            ])
        );
    }

    #[test]
    fn xtask_reaches_none_of_ollm_and_the_eval_never_links_the_cli() {
        let mut metadata = metadata();
        // Node 11 is xtask, node 10 the eval.
        metadata["resolve"]["nodes"][11]["deps"] = json!([dep("ollm-eval-id", Value::Null)]);
        metadata["resolve"]["nodes"][10]["deps"] = json!([
            dep("ollm-core-id", Value::Null),
            dep("ollm-cli-id", Value::Null),
        ]);
        assert_eq!(
            banned_dependencies(&metadata).ok(),
            Some(vec![
                "`ollm-eval` must not depend on `ollm-cli`: ollm-eval -> ollm-cli".to_owned(),
                "`xtask` must not depend on `ollm-eval`: xtask -> ollm-eval".to_owned(),
                "`xtask` must not depend on `ollm-core`: xtask -> ollm-eval -> ollm-core"
                    .to_owned(),
                "`xtask` must not depend on `ollm-types`: \
                 xtask -> ollm-eval -> ollm-core -> ollm-types"
                    .to_owned(),
                "`xtask` must not depend on `tokio`: xtask -> ollm-eval -> ollm-core -> tokio"
                    .to_owned(),
            ])
        );
    }
}
