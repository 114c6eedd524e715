//! Tidy's module-cycle rule: no two modules of one crate reach into each other, directly
//! or around a longer loop.
//!
//! # What counts
//!
//! - **Modules are files.** `src/lib.rs` (or `src/main.rs`) is the root, `src/a.rs` and
//!   `src/a/mod.rs` are `a`, `src/a/b.rs` is `a::b`. `src/bin/` holds other crates and is
//!   skipped. Inline `mod x { ... }` blocks belong to their file (their edges are the
//!   file's), though `self::` and `super::` inside one start from the inline module.
//! - **Edges are every path into the crate**, wherever it is written: each path of each
//!   `use` tree (any visibility, any depth, so `pub use` re-exports and a `use` inside a
//!   function count) and each inline path (`crate::a::f()`, `super::X`). Paths start at
//!   `crate::`, `self::` or `super::` (any number), or at a child module of the file's own
//!   module (`pub use client::ChatClient` in `chat/mod.rs`), as Rust 2018 reads them.
//!   Items under `#[cfg(test)]` do not count: a test module importing its neighbour is not
//!   a design cycle. Comments and literals are blanked before reading. Issue 26 found the
//!   old rule (top-level `use crate::` lines only) blind to every circle in core's `chat/`
//!   and `recover/`, which all went through `use super::`.
//! - **Targets** are the longest path prefix that names a module. When the next segment is
//!   a name that module imports (`pub use`, or a parent's import a child reads through
//!   `super::`), the path is followed to where the name comes from, so importing through a
//!   re-export is an edge to the module that defines the item. Paths that end at the root
//!   are not edges: the root declares and re-exports. Edges from the root do not count
//!   either, and neither do edges to the importing file's own module.
//!
//! **Leaves.** Some modules are leaves by design ([`LEAVES`]): neither the module nor
//! any module under it imports a module of its crate outside it (the CLI's `ui`, whose
//! warnings, hints and status line every part prints through, and `sampling`). A leaf
//! cannot be on a cycle, and tidy says so at the first import out, before a cycle forms.
//! A leaf that no longer exists is a problem too, so a rename cannot switch the rule off.
//!
//! A cycle is reported as the shortest loop through its first module in name order, with
//! the line of every import on the way; the modules of a reported loop start no further
//! report. Deliberately a token reader, not a Rust parser: the path syntax is small and
//! the workspace's own files are the input.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde_json::Value;

use crate::collect_rs_files;

/// The rule over every workspace member: one problem per cycle. There are no exceptions:
/// issue 26 emptied the list of allowed cycles (core's `chat/` and `recover/`) and
/// removed it, so a new cycle fails tidy at once.
pub(crate) fn check(metadata: &Value) -> Result<Vec<String>> {
    let root = Path::new(
        metadata["workspace_root"]
            .as_str()
            .context("no `workspace_root` in `cargo metadata`")?,
    );
    let mut problems = Vec::new();
    for (krate, src) in member_sources(metadata)? {
        let sources = read_sources(root, &src)?;
        problems.extend(use_cycles(&krate, &sources).into_iter().map(|c| c.message));
        for (_, leaf) in LEAVES.iter().filter(|(k, _)| *k == krate) {
            problems.extend(leaf_breaches(&krate, &sources, leaf));
        }
    }
    Ok(problems)
}

/// The modules that must stay leaves: (crate, module). See the module docs.
pub(crate) const LEAVES: &[(&str, &str)] = &[("ollm-cli", "ui"), ("ollm-cli", "sampling")];

/// Each import from inside `leaf` (the module or one under it) to a module of `krate`
/// outside it, as problems; one problem when `leaf` is not a module of `krate`.
pub(crate) fn leaf_breaches(krate: &str, sources: &[Source], leaf: &str) -> Vec<String> {
    let inside = |module: &str| {
        module == leaf
            || module
                .strip_prefix(leaf)
                .is_some_and(|rest| rest.starts_with("::"))
    };
    if !sources.iter().any(|s| s.module == leaf) {
        return vec![format!(
            "`{krate}` has no module `{leaf}`, which tidy keeps a leaf \
             (xtask/src/cycles.rs `LEAVES`)"
        )];
    }
    let mut problems = Vec::new();
    for (from, to) in import_edges(sources) {
        if !inside(from) {
            continue;
        }
        for (to, edge) in to.iter().filter(|(to, _)| !inside(to)) {
            problems.push(format!(
                "`{krate}`'s `{leaf}` is a leaf but {from} imports {to} ({}:{})",
                edge.file, edge.line
            ));
        }
    }
    problems
}

/// Each workspace member's name and `src/` folder.
pub(crate) fn member_sources(metadata: &Value) -> Result<Vec<(String, PathBuf)>> {
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
pub(crate) fn read_sources(root: &Path, src: &Path) -> Result<Vec<Source>> {
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
            message: format!("`{krate}` has an import cycle: {}", steps.join(", ")),
        });
    }
    cycles
}

/// Module -> imported module -> the first import that says so.
fn import_edges(sources: &[Source]) -> BTreeMap<&str, BTreeMap<String, Edge>> {
    let modules: BTreeSet<&str> = sources.iter().map(|s| s.module.as_str()).collect();
    let imports: Vec<Vec<Import>> = sources
        .iter()
        .map(|s| imports(&s.module, &s.text, &modules))
        .collect();
    let names = imported_names(sources, &imports);
    let mut edges: BTreeMap<&str, BTreeMap<String, Edge>> = BTreeMap::new();
    for (source, found) in sources.iter().zip(&imports) {
        let from = source.module.as_str();
        if from.is_empty() {
            continue;
        }
        for import in found {
            let Some(to) = target(&import.path, &modules, &names, 0) else {
                continue;
            };
            if to != from {
                let edge = Edge {
                    file: source.file.clone(),
                    line: import.line,
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

/// How many re-exports [`target`] follows before it gives up (a loop of re-exports is a
/// compile error, so this only bounds a misread).
const MAX_REEXPORT_HOPS: usize = 8;

/// Which module an imported path lands in, if any other than the root: the longest prefix
/// of `path` that names a module, unless the next segment is a name that module imports
/// (re-exported or not), which is followed to where it comes from.
fn target(
    path: &[String],
    modules: &BTreeSet<&str>,
    names: &BTreeMap<String, BTreeMap<String, Vec<String>>>,
    hops: usize,
) -> Option<String> {
    for len in (0..=path.len()).rev() {
        let candidate = path[..len].join("::");
        if !modules.contains(candidate.as_str()) {
            continue;
        }
        let origin = path
            .get(len)
            .and_then(|name| names.get(&candidate)?.get(name));
        if let Some(origin) = origin.filter(|_| hops < MAX_REEXPORT_HOPS) {
            let mut followed = origin.clone();
            followed.extend_from_slice(&path[(len + 1).min(path.len())..]);
            return target(&followed, modules, names, hops + 1);
        }
        return (!candidate.is_empty()).then_some(candidate);
    }
    None
}

/// Module -> name it brings into scope with `use` (its last segment or its `as` rename)
/// -> the absolute path it names. A name a module imports can be imported from that
/// module in turn (`pub use`, or a parent's private import read by a child), so a path
/// through it is followed to where the item lives.
fn imported_names(
    sources: &[Source],
    imports: &[Vec<Import>],
) -> BTreeMap<String, BTreeMap<String, Vec<String>>> {
    let mut names: BTreeMap<String, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (source, found) in sources.iter().zip(imports) {
        for import in found {
            if let Some(name) = &import.name {
                names
                    .entry(source.module.clone())
                    .or_default()
                    .insert(name.clone(), import.path.clone());
            }
        }
    }
    names
}

/// A path one module reaches into another module of its crate through.
#[derive(Debug, PartialEq)]
struct Import {
    /// The line the `use` keyword or the inline path is on.
    line: usize,
    /// The path from the crate root, without `crate`.
    path: Vec<String>,
    /// The name a `use` brings into scope; `None` for globs and inline paths.
    name: Option<String>,
}

/// Every path from `module`'s file into its crate: each path of each `use` tree (at any
/// depth, any visibility, `crate::`, `self::`, `super::` or relative to a child module)
/// and each inline path (`crate::a::f()`, `super::X`, `child::Y`), made absolute. Items
/// under `#[cfg(test)]` are left out.
fn imports(module: &str, text: &str, modules: &BTreeSet<&str>) -> Vec<Import> {
    let tokens = code_tokens(text);
    let file: Vec<String> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").map(str::to_owned).collect()
    };
    // Inline `mod name { ... }` blocks open at this point, with the brace depth outside
    // each: `self::` and `super::` inside one start from it, not from the file's module.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0_usize;
    let mut found = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = &tokens[i];
        let after_path = i > 0 && tokens[i - 1].text == "::";
        let here: Vec<String> = file
            .iter()
            .cloned()
            .chain(inline.iter().map(|(name, _)| name.clone()))
            .collect();
        let mut push = |path: Vec<String>, name: Option<String>| {
            if let Some(path) = absolute(&here, &path, modules) {
                found.push(Import {
                    line: token.line,
                    path,
                    name,
                });
            }
        };
        if token.text == "use" {
            let mut paths = Vec::new();
            let mut pos = i + 1;
            expand_tree(&tokens, &mut pos, Vec::new(), &mut paths);
            for (path, name) in paths {
                push(path, name.filter(|n| n != "_"));
            }
            i = pos.max(i + 1);
        } else if is_ident(&token.text)
            && !after_path
            && tokens.get(i + 1).is_some_and(|t| t.text == "::")
        {
            let (path, end) = inline_path(&tokens, i);
            push(path, None);
            i = end.max(i + 1);
        } else {
            track_inline_modules(&tokens, i, &mut inline, &mut depth);
            i += 1;
        }
    }
    found
}

/// The inline path starting at `tokens[i]` (`a::b::c`), and the index after it.
fn inline_path(tokens: &[Token], i: usize) -> (Vec<String>, usize) {
    let mut path = vec![tokens[i].text.clone()];
    let mut k = i + 1;
    while tokens.get(k).is_some_and(|t| t.text == "::")
        && tokens.get(k + 1).is_some_and(|t| is_ident(&t.text))
    {
        path.push(tokens[k + 1].text.clone());
        k += 2;
    }
    (path, k)
}

/// Follows the inline `mod name { ... }` blocks open at `tokens[i]` (each with the brace
/// depth outside it) through one token.
fn track_inline_modules(
    tokens: &[Token],
    i: usize,
    inline: &mut Vec<(String, usize)>,
    depth: &mut usize,
) {
    let text = |k: usize| tokens.get(k).map(|t| t.text.as_str());
    match tokens[i].text.as_str() {
        "mod" if text(i + 2) == Some("{") => {
            if let Some(name) = text(i + 1).filter(|n| is_ident(n)) {
                inline.push((name.to_owned(), *depth));
            }
        }
        "{" => *depth += 1,
        "}" => {
            *depth = depth.saturating_sub(1);
            if inline.last().is_some_and(|(_, at)| *at == *depth) {
                inline.pop();
            }
        }
        _ => {}
    }
}

/// `path` as written in module `here`, from the crate root: `crate::`, `self::` and
/// `super::` are resolved, and a path starting with a child module of `here` is relative.
/// Anything else (`std::`, another crate, a local name) is `None`.
fn absolute(here: &[String], path: &[String], modules: &BTreeSet<&str>) -> Option<Vec<String>> {
    let first = path.first()?;
    match first.as_str() {
        "crate" => Some(path[1..].to_vec()),
        "self" => Some([here, &path[1..]].concat()),
        "super" => {
            let ups = path.iter().take_while(|s| *s == "super").count();
            let base = here.get(..here.len().checked_sub(ups)?)?;
            Some([base, &path[ups..]].concat())
        }
        _ => {
            let child = [here, &path[..1]].concat().join("::");
            modules
                .contains(child.as_str())
                .then(|| [here, path].concat())
        }
    }
}

/// The tokens with every item under `#[cfg(test)]` left out: a test module importing
/// its neighbour is not a design cycle.
fn without_test_items(tokens: Vec<Token>) -> Vec<Token> {
    const TEST_ATTRIBUTE: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];
    let mut kept = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        let is_test = tokens.len() - i >= TEST_ATTRIBUTE.len()
            && TEST_ATTRIBUTE
                .iter()
                .zip(&tokens[i..])
                .all(|(want, t)| t.text == *want);
        if !is_test {
            kept.push(tokens[i].clone());
            i += 1;
            continue;
        }
        // Skip to the end of the item: a `;` or the brace closing its body, at depth 0.
        let mut depth = 0_usize;
        i += TEST_ATTRIBUTE.len();
        while let Some(t) = tokens.get(i) {
            i += 1;
            match t.text.as_str() {
                "(" | "[" | "{" => depth += 1,
                ")" | "]" => depth = depth.saturating_sub(1),
                "}" => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        break;
                    }
                }
                ";" if depth == 0 => break,
                _ => {}
            }
        }
    }
    kept
}

/// One token of blanked code: an identifier, `::`, or one other character.
#[derive(Clone, Debug)]
pub(crate) struct Token {
    pub(crate) text: String,
    pub(crate) line: usize,
}

/// The tokens of the code in `text`: comments and literals blanked, items under
/// `#[cfg(test)]` left out.
pub(crate) fn code_tokens(text: &str) -> Vec<Token> {
    without_test_items(tokenize(&blank_comments_and_literals(text)))
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// The tokens of blanked code, each with its line.
fn tokenize(code: &str) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut line = 1;
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        } else if c.is_alphanumeric() || c == '_' {
            let mut word = String::from(c);
            while let Some(&n) = chars.peek().filter(|n| n.is_alphanumeric() || **n == '_') {
                word.push(n);
                chars.next();
            }
            tokens.push(Token { text: word, line });
        } else if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            tokens.push(Token {
                text: "::".into(),
                line,
            });
        } else if !c.is_whitespace() {
            tokens.push(Token {
                text: c.to_string(),
                line,
            });
        }
    }
    tokens
}

/// Expands the use tree at `tokens[*pos]` into `out` as (path, name brought into scope),
/// `path` being the path so far. `self` inside a group names the group's prefix.
fn expand_tree(
    tokens: &[Token],
    pos: &mut usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, Option<String>)>,
) {
    let text = |k: usize| tokens.get(k).map(|t| t.text.as_str());
    let mut name = None;
    loop {
        match text(*pos) {
            Some("::") => *pos += 1,
            Some("{") => {
                *pos += 1;
                loop {
                    match text(*pos) {
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
                name = None;
                *pos += 1;
                break;
            }
            Some("as") => {
                name = text(*pos + 1).map(str::to_owned);
                *pos += 2;
                break;
            }
            // `a::{self, B}`: `self` names `a` itself.
            Some("self") if !path.is_empty() => {
                name = path.last().cloned();
                *pos += 1;
            }
            Some(segment) if is_ident(segment) => {
                path.push(segment.to_owned());
                name = Some(segment.to_owned());
                *pos += 1;
            }
            _ => break,
        }
    }
    if !path.is_empty() {
        out.push((path, name));
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
            &["`k` has an import cycle: react -> strategy (react.rs:2), \
               strategy -> react (strategy.rs:4)"],
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
            &["`k` has an import cycle: a -> b (a.rs:1), b -> c (b.rs:1), c -> a (c.rs:2)"],
        );
    }

    #[test]
    fn a_root_reexport_is_followed_to_its_module_under_its_exported_name() {
        check(
            &[
                ("", ROOT),
                ("a", "use crate::Renamed;\n"),
                ("b", "use crate::a::f;\n"),
            ],
            &["`k` has an import cycle: a -> b (a.rs:1), b -> a (b.rs:1)"],
        );
        // `Other` is exported as `Renamed`: `crate::Other` names nothing, so no edge.
        check(
            &[
                ("", ROOT),
                ("a", "use crate::Other;\n"),
                ("b", "use crate::a::f;\n"),
            ],
            &[],
        );
    }

    #[test]
    fn super_self_and_relative_paths_are_edges() {
        // The shape of core's chat/: a parent re-exporting its children, children reading
        // the parent's items through `super::`, siblings through `super::sibling`.
        let chat = "mod client;\nmod run;\npub use client::Client;\npub struct Event;\n";
        check(
            &[
                ("", "mod chat;\n"),
                ("chat", chat),
                ("chat::client", "use super::Event;\npub struct Client;\n"),
                ("chat::run", "use super::super::chat::client::Client;\n"),
            ],
            &[
                "`k` has an import cycle: chat -> chat::client (chat.rs:3), \
               chat::client -> chat (chat/client.rs:1)",
            ],
        );
        check(
            &[
                ("", "mod chat;\n"),
                ("chat", "mod run;\nmod turn;\nuse self::run::Sink;\n"),
                ("chat::run", "use super::turn::step;\n"),
                ("chat::turn", "pub fn step() {}\n"),
            ],
            &[],
        );
    }

    #[test]
    fn inline_paths_and_local_imports_are_edges() {
        let b = "pub fn g() {\n    let _ = crate::a::f(\n        super::a::X,\n    );\n}\n";
        check(
            &[("", ROOT), ("a", "use crate::b::g;\n"), ("b", b)],
            &["`k` has an import cycle: a -> b (a.rs:1), b -> a (b.rs:2)"],
        );
        let b = "fn g() {\n    use crate::a::f;\n}\n";
        check(
            &[("", ROOT), ("a", "use crate::b::g;\n"), ("b", b)],
            &["`k` has an import cycle: a -> b (a.rs:1), b -> a (b.rs:2)"],
        );
    }

    #[test]
    fn an_import_through_a_modules_reexport_lands_where_the_item_lives() {
        // `a` imports `Shown` through `b`, which re-exports it from `c`: the edge is a -> c.
        check(
            &[
                ("", ROOT),
                ("a", "pub fn f() {}\nuse crate::b::Shown;\n"),
                ("b", "pub use crate::c::Shown;\n"),
                ("c", "pub struct Shown;\nfn g() { crate::a::f() }\n"),
            ],
            &["`k` has an import cycle: a -> c (a.rs:2), c -> a (c.rs:2)"],
        );
    }

    #[test]
    fn comments_literals_and_tests_are_not_edges() {
        let b = "//! use crate::a;\n/* use crate::a; */\nconst S: &str = \"use crate::a;\";\n\
                 const R: &str = r#\"\n}\nuse crate::a;\n\"#;\nconst C: char = '{';\n\
                 fn f<'x>(_: &'x str) {}\n\
                 #[cfg(test)]\nmod tests {\n    use crate::a::h;\n    use super::super::a;\n}\n\
                 #[cfg(test)]\nuse crate::a::T;\n\
                 #[cfg(test)]\nfn helper() { crate::a::f(); }\n";
        check(&[("", ROOT), ("a", "use crate::b::B;\n"), ("b", b)], &[]);
    }

    #[test]
    fn a_leaf_imports_nothing_outside_itself() {
        let files = [
            ("", "mod ui;\nmod render;\nmod wrap;\n"),
            ("ui", "use self::status::Line;\nuse std::io;\n"),
            (
                "ui::status",
                "use super::wrap::shorten;\nuse crate::ui::Voice;\n",
            ),
            ("ui::wrap", "fn f() { crate::wrap::cut(); }\n"),
            ("render", "use crate::ui::status;\n"),
            ("wrap", "use crate::render::X;\n"),
        ];
        assert_eq!(
            leaf_breaches("k", &sources(&files), "ui"),
            ["`k`'s `ui` is a leaf but ui::wrap imports wrap (ui/wrap.rs:1)"]
        );
        // Imported from outside, or importing only within: fine.
        assert!(leaf_breaches("k", &sources(&files[..5]), "ui").is_empty());
        // A prefix of a name is not a module under it.
        assert_eq!(leaf_breaches("k", &sources(&files), "wrap").len(), 1);
        assert_eq!(
            leaf_breaches("k", &sources(&files), "gone"),
            ["`k` has no module `gone`, which tidy keeps a leaf (xtask/src/cycles.rs `LEAVES`)"]
        );
    }

    #[test]
    fn one_direction_only_is_fine_and_so_is_importing_yourself() {
        check(
            &[
                ("", ROOT),
                (
                    "a",
                    "use crate::b::B;\nuse crate::a::inner::X;\nuse self::inner::Y;\n",
                ),
                (
                    "a::inner",
                    "use crate::b;\nuse std::collections::BTreeMap;\n",
                ),
                (
                    "b",
                    "use crate::Thing;\nuse std::*;\nfn f() { Self::g(); b::h(); }\n",
                ),
            ],
            &[],
        );
    }

    #[test]
    fn super_inside_an_inline_module_is_the_file() {
        // `ev::` in test-utils' mock_provider.rs: `use super::*` there is the file itself.
        let a = "pub mod ev {\n    use super::Script;\n}\npub struct Script;\n";
        check(&[("", ROOT), ("a", a), ("b", "use crate::a::ev;\n")], &[]);
        let a = "mod inner {\n    use super::super::b::B;\n}\npub fn f() {}\n";
        check(
            &[("", ROOT), ("a", a), ("b", "use crate::a::f;\n")],
            &["`k` has an import cycle: a -> b (a.rs:2), b -> a (b.rs:1)"],
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
                "`k` has an import cycle: strategy -> strategy::react (strategy.rs:2), \
               strategy::react -> strategy (strategy/react.rs:1)",
            ],
        );
    }

    /// `files` as (path under `src/`, text) written into a temporary crate `k`, and the
    /// cargo metadata that names it.
    fn fixture(files: &[(&str, &str)]) -> (tempfile::TempDir, Value) {
        let dir = tempfile::tempdir().expect("temp dir");
        for (path, text) in files {
            let path = dir.path().join("src").join(path);
            fs::create_dir_all(path.parent().expect("parent")).expect("create src");
            fs::write(&path, text).expect("write fixture");
        }
        let root = dir.path().display().to_string();
        let metadata = serde_json::json!({
            "workspace_root": root,
            "workspace_members": ["k-id"],
            "packages": [{
                "id": "k-id",
                "name": "k",
                "manifest_path": format!("{root}/Cargo.toml"),
            }],
        });
        (dir, metadata)
    }

    #[test]
    fn tidy_fails_on_a_deliberate_super_cycle_in_a_tree_on_disk() {
        let files = [
            ("lib.rs", "//! Root.\nmod chat;\n"),
            ("chat/mod.rs", "//! Chat.\nmod run;\nmod turn;\n"),
            (
                "chat/run.rs",
                "//! Run.\nuse super::turn::step;\npub struct Sink;\n",
            ),
            (
                "chat/turn.rs",
                "//! Turn.\nuse super::run::Sink;\npub fn step() {}\n",
            ),
        ];
        let (dir, metadata) = fixture(&files);
        let problems = super::check(&metadata).expect("check");
        assert_eq!(
            problems,
            [
                "`k` has an import cycle: chat::run -> chat::turn (src/chat/run.rs:2), \
              chat::turn -> chat::run (src/chat/turn.rs:2)"
            ]
        );
        drop(dir);
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
