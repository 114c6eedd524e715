//! Tidy's module-cycle rule: no two modules of one crate import each other through
//! `use crate::...`, directly or around a longer loop.
//!
//! # What counts
//!
//! - **Modules are files.** `src/lib.rs` (or `src/main.rs`) is the root, `src/a.rs` and
//!   `src/a/mod.rs` are `a`, `src/a/b.rs` is `a::b`. `src/bin/` holds other crates and is
//!   skipped. Inline `mod x { ... }` blocks belong to their file.
//! - **Edges are top-level `use crate::` imports** (any visibility, grouped trees included).
//!   Imports inside a function or an inline module (`#[cfg(test)] mod tests`) are local to
//!   that item, and a test module importing its neighbour is not a design cycle, so only a
//!   file's top level counts. Comments and string literals are blanked before reading.
//! - **Targets** are the longest imported path prefix that names a module. A path naming an
//!   item of the root (`crate::CoreError`) is followed through the root's own
//!   `pub use module::Item` re-exports; anything else at the root is not an edge, because
//!   the root only declares and re-exports. Edges to the importing file's own module do
//!   not count.
//!
//! A cycle is a strongly connected group of modules; each is reported once, as the
//! shortest loop through its first module in name order, with the line of every import on
//! the way. Deliberately a line reader, not a Rust parser: the import syntax is small and
//! the workspace's own files are the input.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::collect_rs_files;

/// Cycles that exist on purpose for now, as (crate, modules in name order): reported as a
/// note, not a failure. An entry that no longer matches a cycle is itself a problem, so
/// the list only shrinks.
const ALLOWED_CYCLES: &[(&str, &[&str])] = &[];

/// The rule over every workspace member: (problems, notes).
pub(crate) fn check(metadata: &Value) -> Result<(Vec<String>, Vec<String>)> {
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let mut allowed_seen = vec![false; ALLOWED_CYCLES.len()];
    let root = Path::new(
        metadata["workspace_root"]
            .as_str()
            .context("no `workspace_root` in `cargo metadata`")?,
    );
    for (krate, src) in member_sources(metadata)? {
        let sources = read_sources(root, &src)?;
        for cycle in use_cycles(&krate, &sources) {
            let allowed = ALLOWED_CYCLES
                .iter()
                .position(|(k, m)| *k == krate && *m == cycle.modules.as_slice());
            match allowed {
                Some(index) => {
                    allowed_seen[index] = true;
                    notes.push(format!(
                        "{} (allowed for now in ALLOWED_CYCLES)",
                        cycle.message
                    ));
                }
                None => problems.push(cycle.message),
            }
        }
    }
    for ((krate, modules), seen) in ALLOWED_CYCLES.iter().zip(allowed_seen) {
        if !seen {
            problems.push(format!(
                "the allowed cycle {modules:?} in `{krate}` no longer exists: remove it from \
                 ALLOWED_CYCLES in xtask/src/cycles.rs"
            ));
        }
    }
    Ok((problems, notes))
}

/// Each workspace member's name and `src/` folder.
fn member_sources(metadata: &Value) -> Result<Vec<(String, PathBuf)>> {
    let members = metadata["workspace_members"]
        .as_array()
        .context("no `workspace_members` in `cargo metadata`")?;
    let packages = metadata["packages"]
        .as_array()
        .context("no `packages` in `cargo metadata`")?;
    let mut found = Vec::new();
    for package in packages.iter().filter(|p| members.contains(&p["id"])) {
        let name = package["name"]
            .as_str()
            .context("a package without a name")?;
        let manifest = package["manifest_path"]
            .as_str()
            .context("a package without a manifest path")?;
        let dir = Path::new(manifest)
            .parent()
            .context("manifest path has no parent")?;
        found.push((name.to_owned(), dir.join("src")));
    }
    Ok(found)
}

/// The modules of the crate whose sources are in `src`, named relative to `root`.
fn read_sources(root: &Path, src: &Path) -> Result<Vec<Source>> {
    let mut files = Vec::new();
    collect_rs_files(src, &mut files)?;
    let mut sources = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).unwrap_or(&file);
        let Some(module) = module_of(&relative.to_string_lossy()) else {
            continue;
        };
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let shown = file.strip_prefix(root).unwrap_or(&file);
        sources.push(Source {
            module,
            file: shown.display().to_string(),
            text,
        });
    }
    Ok(sources)
}

/// One crate's source files: the module path (`""` for the root, `a::b`) and the text,
/// with the file name to show in messages.
pub(crate) struct Source {
    pub(crate) module: String,
    pub(crate) file: String,
    pub(crate) text: String,
}

/// An import of one module by another: where it is written.
#[derive(Clone, Debug)]
struct Edge {
    file: String,
    line: usize,
}

/// The module path of a file, relative to the crate's `src/`, or `None` for files that
/// are not modules of this crate (`bin/`).
pub(crate) fn module_of(relative: &str) -> Option<String> {
    let path = relative.strip_suffix(".rs")?;
    let mut parts: Vec<&str> = path.split('/').collect();
    if parts.first() == Some(&"bin") {
        return None;
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        return Some(String::new());
    }
    if parts.last() == Some(&"mod") {
        parts.pop();
    }
    Some(parts.join("::"))
}

/// An import loop between modules of one crate.
#[derive(Debug, PartialEq)]
pub(crate) struct Cycle {
    /// The modules on the loop, in name order.
    pub(crate) modules: Vec<String>,
    /// What to show: each import on the loop with its file and line.
    pub(crate) message: String,
}

/// The import cycles between the modules of `krate`, one per group of modules that
/// reach each other.
pub(crate) fn use_cycles(krate: &str, sources: &[Source]) -> Vec<Cycle> {
    let edges = import_edges(sources);
    let mut cycles = Vec::new();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let names: BTreeSet<&str> = sources.iter().map(|s| s.module.as_str()).collect();
    for start in names {
        if reported.contains(start) {
            continue;
        }
        let Some(path) = shortest_cycle(start, &edges) else {
            continue;
        };
        reported.extend(path.iter().cloned());
        let steps: Vec<String> = path
            .windows(2)
            .map(|pair| {
                let edge = &edges[pair[0].as_str()][&pair[1]];
                format!("{} -> {} ({}:{})", pair[0], pair[1], edge.file, edge.line)
            })
            .collect();
        let mut modules = path[1..].to_vec();
        modules.sort();
        cycles.push(Cycle {
            modules,
            message: format!("`{krate}` has a `use crate::` cycle: {}", steps.join(", ")),
        });
    }
    cycles
}

/// Module -> imported module -> the first import that says so.
fn import_edges(sources: &[Source]) -> BTreeMap<&str, BTreeMap<String, Edge>> {
    let modules: BTreeSet<&str> = sources.iter().map(|s| s.module.as_str()).collect();
    let reexports = root_reexports(sources, &modules);
    let mut edges: BTreeMap<&str, BTreeMap<String, Edge>> = BTreeMap::new();
    for source in sources.iter().filter(|s| !s.module.is_empty()) {
        let from = source.module.as_str();
        for (line, path) in crate_imports(&source.text) {
            let Some(to) = target(&path, &modules, &reexports) else {
                continue;
            };
            if to != from {
                let edge = Edge {
                    file: source.file.clone(),
                    line,
                };
                edges.entry(from).or_default().entry(to).or_insert(edge);
            }
        }
    }
    edges
}

/// The shortest loop from `start` back to itself, as module names (first = last).
fn shortest_cycle(
    start: &str,
    edges: &BTreeMap<&str, BTreeMap<String, Edge>>,
) -> Option<Vec<String>> {
    let mut parent: BTreeMap<String, String> = BTreeMap::new();
    let mut queue = VecDeque::from([start.to_owned()]);
    while let Some(at) = queue.pop_front() {
        for next in edges.get(at.as_str()).into_iter().flat_map(BTreeMap::keys) {
            if next == start {
                // Walk back from `at` to `start`, then close the loop.
                let mut cycle = vec![at.clone()];
                let mut walk = at.as_str();
                while let Some(up) = parent.get(walk) {
                    cycle.push(up.clone());
                    walk = up;
                }
                cycle.reverse();
                cycle.push(start.to_owned());
                return Some(cycle);
            }
            if !parent.contains_key(next) && next != start {
                parent.insert(next.clone(), at.clone());
                queue.push_back(next.clone());
            }
        }
    }
    None
}

/// Which module an imported path lands in, if any other than the root.
fn target(
    path: &[String],
    modules: &BTreeSet<&str>,
    reexports: &BTreeMap<String, String>,
) -> Option<String> {
    for len in (1..=path.len()).rev() {
        let candidate = path[..len].join("::");
        if modules.contains(candidate.as_str()) {
            return Some(candidate);
        }
    }
    path.first().and_then(|name| reexports.get(name)).cloned()
}

/// Names the root re-exports from its modules (`pub use chat::{ChatClient, ChatRun}`).
fn root_reexports(sources: &[Source], modules: &BTreeSet<&str>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for source in sources.iter().filter(|s| s.module.is_empty()) {
        for (_, path) in top_level_uses(&source.text) {
            let path = match path.first().map(String::as_str) {
                Some("crate" | "self") => path[1..].to_vec(),
                _ => path,
            };
            let (Some(module), Some(name)) =
                (target(&path, modules, &BTreeMap::new()), path.last())
            else {
                continue;
            };
            names.insert(name.clone(), module);
        }
    }
    names
}

/// The paths a file imports from `crate::` at its top level, with their line numbers,
/// without the leading `crate`.
fn crate_imports(text: &str) -> Vec<(usize, Vec<String>)> {
    top_level_uses(text)
        .into_iter()
        .filter(|(_, path)| path.first().is_some_and(|p| p == "crate"))
        .map(|(line, path)| (line, path[1..].to_vec()))
        .collect()
}

/// Every path of every top-level `use` statement, expanded from its tree; `self` inside a
/// group names the group's prefix; `as` renames are dropped.
fn top_level_uses(text: &str) -> Vec<(usize, Vec<String>)> {
    let code = blank_comments_and_literals(text);
    let mut found = Vec::new();
    for (line, statement) in top_level_statements(&code) {
        let tokens = tokenize(&statement);
        let Some(at) = use_keyword(&tokens) else {
            continue;
        };
        let mut paths = Vec::new();
        expand_tree(&tokens, &mut (at + 1), Vec::new(), &mut paths);
        // Attributes may come first: show the line of the `use` keyword itself.
        let line = line + newlines_before_word(&statement, "use");
        found.extend(paths.into_iter().map(|p| (line, p)));
    }
    found
}

/// The index of `use` when the statement is an import: only attributes (`#[...]`,
/// `#![...]`) and a visibility (`pub`, `pub(crate)`, `pub(in path)`) may come first.
fn use_keyword(tokens: &[String]) -> Option<usize> {
    let mut k = 0;
    while tokens.get(k).is_some_and(|t| t == "#") {
        k += 1;
        if tokens.get(k).is_some_and(|t| t == "!") {
            k += 1;
        }
        let mut depth = 0;
        while let Some(t) = tokens.get(k) {
            k += 1;
            match t.as_str() {
                "[" => depth += 1,
                "]" if depth == 1 => break,
                "]" => depth -= 1,
                _ => {}
            }
        }
    }
    if tokens.get(k).is_some_and(|t| t == "pub") {
        k += 1;
        if tokens.get(k).is_some_and(|t| t == "(") {
            k += tokens[k..].iter().position(|t| t == ")")? + 1;
        }
    }
    tokens.get(k).filter(|t| *t == "use").map(|_| k)
}

/// How many line breaks come before the first standalone `word` in `text`.
fn newlines_before_word(text: &str, word: &str) -> usize {
    let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let at = text.match_indices(word).find(|(i, _)| {
        !is_ident(text[..*i].chars().next_back())
            && !is_ident(text[i + word.len()..].chars().next())
    });
    at.map_or(0, |(i, _)| text[..i].matches('\n').count())
}

/// Top-level statements (text up to a `;` or a closing brace at depth 0) with the line
/// each one's first character (often the previous line's break) is on.
fn top_level_statements(code: &str) -> Vec<(usize, String)> {
    let mut statements = Vec::new();
    let mut depth = 0_usize;
    let mut current = String::new();
    let mut start_line = 1;
    let mut line = 1;
    for c in code.chars() {
        if current.is_empty() {
            start_line = line;
        }
        if c == '\n' {
            line += 1;
        }
        current.push(c);
        match c {
            '{' => depth += 1,
            '}' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    statements.push((start_line, std::mem::take(&mut current)));
                }
            }
            ';' if depth == 0 => statements.push((start_line, std::mem::take(&mut current))),
            _ => {}
        }
    }
    statements
}

/// Identifiers and the punctuation of use trees (`::`, `{`, `}`, `,`, `*`, `(`, `)`).
fn tokenize(statement: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut chars = statement.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || c == '_' {
            let mut word = String::from(c);
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                word.push(n);
                chars.next();
            }
            tokens.push(word);
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            tokens.push("::".into());
        } else if "{},*()#[]!".contains(c) {
            tokens.push(c.to_string());
        }
    }
    tokens
}

/// Expands the use tree at `tokens[*pos]` into `out`, `path` being the path so far.
fn expand_tree(
    tokens: &[String],
    pos: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    loop {
        match tokens.get(*pos).map(String::as_str) {
            Some("::") => *pos += 1,
            Some("{") => {
                *pos += 1;
                loop {
                    match tokens.get(*pos).map(String::as_str) {
                        None => return,
                        Some("}") => {
                            *pos += 1;
                            return;
                        }
                        Some(",") => *pos += 1,
                        Some(_) => expand_tree(tokens, pos, path.clone(), out),
                    }
                }
            }
            Some("*") => {
                *pos += 1;
                break;
            }
            Some("as") => {
                *pos += 2;
                break;
            }
            // `a::{self, B}`: `self` names `a` itself.
            Some("self") if !path.is_empty() => *pos += 1,
            Some("," | "}") | None => break,
            Some(name) => {
                path.push(name.to_owned());
                *pos += 1;
            }
        }
    }
    if !path.is_empty() {
        out.push(path);
    }
}

/// The text with comments, string literals and char literals replaced by spaces (newlines
/// kept), so braces and `use` inside them are not read as code.
pub(crate) fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let end = literal_end(&chars, i);
        if end > i {
            out.extend(chars[i..end].iter().map(|&c| blank(c)));
            i = end;
        } else {
            out.push(chars[i]);
            i += 1;
        }
    }
    out
}

/// Where a comment or literal starting at `i` ends (exclusive), or `i` if none starts.
fn literal_end(chars: &[char], i: usize) -> usize {
    let at = |k: usize| chars.get(k).copied();
    let after_ident = is_ident_char(i.checked_sub(1).and_then(at));
    match (at(i), at(i + 1)) {
        (Some('/'), Some('/')) => (i..chars.len())
            .find(|&k| chars[k] == '\n')
            .unwrap_or(chars.len()),
        (Some('/'), Some('*')) => block_comment_end(chars, i),
        (Some('"'), _) => quoted_end(chars, i + 1, '"'),
        (Some('r'), Some('"' | '#')) if !after_ident => raw_string_end(chars, i + 1).unwrap_or(i),
        (Some('b'), Some('"')) if !after_ident => quoted_end(chars, i + 2, '"'),
        (Some('\''), Some('\\')) => quoted_end(chars, i + 1, '\''),
        (Some('\''), Some(_)) if at(i + 2) == Some('\'') => i + 3,
        _ => i,
    }
}

fn is_ident_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// The end of a quoted literal whose body starts at `from`, honouring backslash escapes.
fn quoted_end(chars: &[char], from: usize, quote: char) -> usize {
    let mut k = from;
    while k < chars.len() {
        match chars[k] {
            '\\' => k += 2,
            c if c == quote => return k + 1,
            _ => k += 1,
        }
    }
    chars.len()
}

/// The end of `r#"..."#` whose hashes start at `from`; `None` if it is not a raw string.
fn raw_string_end(chars: &[char], from: usize) -> Option<usize> {
    let hashes = chars[from..].iter().take_while(|&&c| c == '#').count();
    if chars.get(from + hashes) != Some(&'"') {
        return None;
    }
    let mut k = from + hashes + 1;
    while k < chars.len() {
        if chars[k] == '"'
            && chars[k + 1..]
                .iter()
                .take(hashes)
                .filter(|&&c| c == '#')
                .count()
                == hashes
        {
            return Some(k + 1 + hashes);
        }
        k += 1;
    }
    Some(chars.len())
}

/// The end of a (nestable) block comment starting at `i`.
fn block_comment_end(chars: &[char], i: usize) -> usize {
    let mut depth = 0;
    let mut k = i;
    while k + 1 < chars.len() {
        match (chars[k], chars[k + 1]) {
            ('/', '*') => {
                depth += 1;
                k += 2;
            }
            ('*', '/') => {
                depth -= 1;
                k += 2;
                if depth == 0 {
                    return k;
                }
            }
            _ => k += 1,
        }
    }
    chars.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A crate from (module, text) pairs; files are named after their modules.
    fn sources(files: &[(&str, &str)]) -> Vec<Source> {
        files
            .iter()
            .map(|(module, text)| Source {
                module: (*module).to_owned(),
                file: if module.is_empty() {
                    "lib.rs".to_owned()
                } else {
                    format!("{}.rs", module.replace("::", "/"))
                },
                text: (*text).to_owned(),
            })
            .collect()
    }

    /// The cycle messages for a crate named `k`.
    fn check(files: &[(&str, &str)], expected: &[&str]) {
        let messages: Vec<String> = use_cycles("k", &sources(files))
            .into_iter()
            .map(|c| c.message)
            .collect();
        assert_eq!(messages, expected, "{files:?}");
    }

    const ROOT: &str = "//! Root.\nmod a;\nmod b;\nmod c;\npub use b::{Thing, Other as Renamed};\n";

    #[test]
    fn two_modules_importing_each_other_are_a_cycle() {
        // The shape of ollm-core's react.rs <-> strategy.rs before the strategy split.
        check(
            &[
                ("", "mod react;\nmod strategy;\n"),
                ("react", "//! ReAct.\nuse crate::strategy::Shown;\n"),
                (
                    "strategy",
                    "//! Seam.\nuse std::fmt;\n\nuse crate::{constrained, react, textcalls};\n",
                ),
            ],
            &[
                "`k` has a `use crate::` cycle: react -> strategy (react.rs:2), \
               strategy -> react (strategy.rs:4)",
            ],
        );
    }

    #[test]
    fn a_longer_loop_is_reported_once_with_every_step() {
        check(
            &[
                ("", ROOT),
                ("a", "use crate::b::X;\n"),
                ("b", "pub(crate) use crate::c::{self, Y};\n"),
                ("c", "#[allow(unused)]\nuse crate::a;\n"),
            ],
            &["`k` has a `use crate::` cycle: a -> b (a.rs:1), b -> c (b.rs:1), c -> a (c.rs:2)"],
        );
    }

    #[test]
    fn a_root_reexport_is_followed_to_its_module() {
        check(
            &[
                ("", ROOT),
                ("a", "use crate::Renamed;\n"),
                ("b", "use crate::a::f;\n"),
            ],
            &[],
        );
        check(
            &[
                ("", ROOT),
                ("a", "use crate::Other;\n"),
                ("b", "use crate::a::f;\n"),
            ],
            &["`k` has a `use crate::` cycle: a -> b (a.rs:1), b -> a (b.rs:1)"],
        );
    }

    #[test]
    fn imports_that_are_not_top_level_code_do_not_count() {
        let b = "//! use crate::a;\n/* use crate::a; */\nconst S: &str = \"use crate::a;\";\n\
                 const R: &str = r#\"\n}\nuse crate::a;\n\"#;\nconst C: char = '{';\n\
                 fn f<'x>(_: &'x str) {\n    use crate::a::g;\n}\n\
                 #[cfg(test)]\nmod tests {\n    use crate::a::h;\n}\n";
        check(&[("", ROOT), ("a", "use crate::b::B;\n"), ("b", b)], &[]);
    }

    #[test]
    fn one_direction_only_is_fine_and_so_is_importing_yourself() {
        check(
            &[
                ("", ROOT),
                ("a", "use crate::b::B;\nuse crate::a::inner::X;\n"),
                ("a::inner", "use crate::b;\n"),
                ("b", "use crate::Thing;\nuse std::*;\n"),
            ],
            &[],
        );
    }

    #[test]
    fn nested_modules_are_distinct_nodes() {
        check(
            &[
                ("", "mod strategy;\n"),
                (
                    "strategy",
                    "mod react;\nuse crate::strategy::react::parse;\n",
                ),
                ("strategy::react", "use crate::strategy::Shown;\n"),
            ],
            &[
                "`k` has a `use crate::` cycle: strategy -> strategy::react (strategy.rs:2), \
               strategy::react -> strategy (strategy/react.rs:1)",
            ],
        );
    }

    #[test]
    fn file_paths_name_modules() {
        let cases = [
            ("lib.rs", Some("")),
            ("main.rs", Some("")),
            ("chat.rs", Some("chat")),
            ("strategy/mod.rs", Some("strategy")),
            ("strategy/react.rs", Some("strategy::react")),
            ("bin/tool.rs", None),
            ("notes.txt", None),
        ];
        for (path, expected) in cases {
            assert_eq!(module_of(path).as_deref(), expected, "{path}");
        }
    }

    #[test]
    fn blanking_keeps_lines_and_code() {
        let text = "a // x {\nb /* y\n} */ c \"s}\" 'q' '\\'' r##\"t\"#}\"## d\n";
        let blanked = blank_comments_and_literals(text);
        assert_eq!(blanked.lines().count(), text.lines().count());
        let words: Vec<&str> = blanked.split_whitespace().collect();
        assert_eq!(words, ["a", "b", "c", "d"]);
    }
}
