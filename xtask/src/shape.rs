//! Tidy's rules on the shape of the code itself, beyond imports ([`crate::cycles`]).
//!
//! - **The turn loop never branches on which strategy runs** (ARCHITECTURE.md). No
//!   non-test code under `crates/ollm-core/src/chat/` names a variant of `Strategy`
//!   (`Strategy::Native`, ...) or a fixed `ToolMode` (`ToolMode::React`, ...): whatever
//!   differs between strategies is a method of `Strategy` in `strategy/` (offering the
//!   tools, the display filter, reading and recording a turn, the fallback after a
//!   refusal, what a reply teaches). `ToolMode::Auto` is allowed: whether the strategy
//!   was chosen automatically is the user's setting, not a strategy. Issue 26 found three
//!   such branches in `chat/turn.rs`; this rule is what keeps them out. Read with the
//!   same token reader as the cycle rule (comments, literals and `#[cfg(test)]` items
//!   do not count).
//! - **No function over [`MAX_FUNCTION_LINES`] lines** in any workspace member's `src/`
//!   (issue 26; STYLE.md asks for about 60). A function's length is its lines from the
//!   `fn` keyword to its closing brace, both included; its docs and attributes do not
//!   count. Test code does not count: items under `#[cfg(test)]` and functions marked
//!   `#[test]` (or `#[tokio::test]`, any `...::test`). `cargo xtask tidy` prints the
//!   longest function of every crate, so the margin is visible, and fails on each one
//!   over the limit.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};
use serde_json::Value;

use crate::collect_rs_files;
use crate::cycles::{Token, code_tokens, member_sources, read_sources};

/// The most lines a non-test function may have.
pub(crate) const MAX_FUNCTION_LINES: usize = 60;

/// The folder of the turn loop.
const TURN_LOOP: &str = "crates/ollm-core/src/chat";

/// The `ToolMode` variants that name a strategy.
const FIXED_MODES: &[&str] = &["Native", "React", "Constrained"];

/// Every place the turn loop names a strategy, as problems.
pub(crate) fn strategy_branches(root: &Path) -> Result<Vec<String>> {
    let mut files = Vec::new();
    collect_rs_files(&root.join(TURN_LOOP), &mut files)?;
    files.sort();
    let mut problems = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let shown = file
            .strip_prefix(root)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (line, name) in strategy_names(&text) {
            problems.push(format!(
                "{shown}:{line} names `{name}`: the turn loop must not branch on the \
                 strategy; make it a method of `Strategy` (see xtask/src/shape.rs)"
            ));
        }
    }
    Ok(problems)
}

/// The strategy variants that `text` names outside tests, with their lines.
fn strategy_names(text: &str) -> Vec<(usize, String)> {
    let tokens = code_tokens(text);
    let mut found = Vec::new();
    for window in tokens.windows(3) {
        let [ty, sep, name] = window else { continue };
        if sep.text != "::" {
            continue;
        }
        let variant = name.text.starts_with(|c: char| c.is_ascii_uppercase());
        let banned = match ty.text.as_str() {
            "Strategy" => variant,
            "ToolMode" => FIXED_MODES.contains(&name.text.as_str()),
            _ => false,
        };
        if banned {
            found.push((ty.line, format!("{}::{}", ty.text, name.text)));
        }
    }
    found
}

/// A function: its name, first line and length in lines.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) line: usize,
    pub(crate) lines: usize,
}

/// The function-length rule over every workspace member: (problems, the longest function
/// of each crate as a line to print).
pub(crate) fn long_functions(metadata: &Value) -> Result<(Vec<String>, Vec<String>)> {
    let root = Path::new(
        metadata["workspace_root"]
            .as_str()
            .context("no `workspace_root` in `cargo metadata`")?,
    );
    let mut problems = Vec::new();
    let mut longest = Vec::new();
    for (krate, src) in member_sources(metadata)? {
        let mut top: Option<(String, Function)> = None;
        for source in read_sources(root, &src)? {
            for function in functions(&source.text) {
                if function.lines > MAX_FUNCTION_LINES {
                    problems.push(format!(
                        "{}:{} `{}` has {} lines (at most {MAX_FUNCTION_LINES}): split it",
                        source.file, function.line, function.name, function.lines
                    ));
                }
                if top.as_ref().is_none_or(|(_, f)| function.lines > f.lines) {
                    top = Some((source.file.clone(), function));
                }
            }
        }
        if let Some((file, f)) = top {
            longest.push(format!(
                "{krate}: longest function `{}` ({file}:{}), {} lines",
                f.name, f.line, f.lines
            ));
        }
    }
    Ok((problems, longest))
}

/// The non-test functions with a body in `text`, in order.
pub(crate) fn functions(text: &str) -> Vec<Function> {
    let tokens = code_tokens(text);
    let mut found = Vec::new();
    for (i, token) in tokens.iter().enumerate() {
        let Some(name) = tokens.get(i + 1) else { break };
        let named = name
            .text
            .starts_with(|c: char| c.is_alphabetic() || c == '_');
        if token.text != "fn" || !named || is_test(&tokens[..i]) {
            continue;
        }
        if let Some(end) = body_end(&tokens, i + 2) {
            found.push(Function {
                name: name.text.clone(),
                line: token.line,
                lines: end - token.line + 1,
            });
        }
    }
    found
}

/// Whether the attributes just before a function (`tokens` ends where the function's
/// qualifiers and attributes end) mark it as a test.
fn is_test(before: &[Token]) -> bool {
    let mut i = before.len();
    // Qualifiers: `pub(crate) async unsafe extern "C"` (the literal is blanked).
    while i > 0 && is_qualifier(&before[..i]) {
        i -= if before[i - 1].text == ")" { 4 } else { 1 };
    }
    // Attributes, each `# [ ... ]`, read backwards.
    while i > 0 && before[i - 1].text == "]" {
        let Some(open) = before[..i].iter().rposition(|t| t.text == "#") else {
            return false;
        };
        // The attribute's path: `test`, `tokio::test`, before any arguments.
        let path = before[open + 2..i - 1]
            .iter()
            .take_while(|t| t.text != "(" && t.text != "=");
        if path.last().is_some_and(|t| t.text == "test") {
            return true;
        }
        i = open;
    }
    false
}

/// Whether `before` ends with a function qualifier (`pub`, `pub(...)`, `async`, ...).
fn is_qualifier(before: &[Token]) -> bool {
    let last = before.last().map(|t| t.text.as_str());
    match last {
        Some("pub" | "async" | "const" | "unsafe" | "extern" | "default") => true,
        Some(")") => {
            before.len() >= 4
                && before[before.len() - 4].text == "pub"
                && before[before.len() - 3].text == "("
        }
        _ => false,
    }
}

/// The line of the brace closing the body of the function whose signature starts at
/// `tokens[from]`; `None` for a declaration without a body.
fn body_end(tokens: &[Token], from: usize) -> Option<usize> {
    let mut nesting = 0_usize;
    let mut i = from;
    while let Some(token) = tokens.get(i) {
        match token.text.as_str() {
            "(" | "[" | "<" => nesting += 1,
            ")" | "]" => nesting = nesting.saturating_sub(1),
            ">" if tokens.get(i - 1).is_none_or(|t| t.text != "-") => {
                nesting = nesting.saturating_sub(1);
            }
            ";" if nesting == 0 => return None,
            "{" if nesting == 0 => break,
            _ => {}
        }
        i += 1;
    }
    let mut depth = 0_usize;
    for token in &tokens[i..] {
        match token.text.as_str() {
            "{" => depth += 1,
            "}" => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(token.line);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: &[(usize, &str)]) {
        let got = strategy_names(text);
        let expected: Vec<(usize, String)> =
            expected.iter().map(|&(l, n)| (l, n.to_owned())).collect();
        assert_eq!(got, expected, "{text:?}");
    }

    #[test]
    fn naming_a_strategy_in_the_turn_loop_is_found() {
        check(
            "fn f(s: Strategy) -> bool { s == Strategy::Native }\n",
            &[(1, "Strategy::Native")],
        );
        check(
            "fn f() {\n    match s {\n        Strategy::React | Strategy::NoTools => {}\n    }\n}\n",
            &[(3, "Strategy::React"), (3, "Strategy::NoTools")],
        );
        check(
            "use crate::strategy::Strategy::Constrained;\n",
            &[(1, "Strategy::Constrained")],
        );
        check(
            "fn f() { let m = ToolMode::React; }\n",
            &[(1, "ToolMode::React")],
        );
    }

    #[test]
    fn methods_auto_comments_literals_and_tests_are_allowed() {
        check(
            "fn f() { s.strategy.record(t); Strategy::resolve(m) }\n",
            &[],
        );
        check("fn f() -> bool { mode == ToolMode::Auto }\n", &[]);
        check(
            "// Strategy::Native\nfn f() { \"Strategy::React\"; }\n",
            &[],
        );
        check(
            "#[cfg(test)]\nmod tests {\n    fn f() { Strategy::Native; }\n}\n",
            &[],
        );
    }

    /// The (name, first line, lines) of the functions `functions` finds in `text`.
    fn check_lengths(text: &str, expected: &[(&str, usize, usize)]) {
        let got: Vec<(String, usize, usize)> = functions(text)
            .into_iter()
            .map(|f| (f.name, f.line, f.lines))
            .collect();
        let expected: Vec<(String, usize, usize)> = expected
            .iter()
            .map(|&(n, l, c)| (n.to_owned(), l, c))
            .collect();
        assert_eq!(got, expected, "{text:?}");
    }

    #[test]
    fn function_lengths_run_from_fn_to_the_closing_brace() {
        check_lengths(
            "fn one() {}
",
            &[("one", 1, 1)],
        );
        check_lengths(
            "/// Docs.\n#[inline]\npub(crate) async fn f<T: Into<String>>(x: T) -> Vec<u8>\nwhere\n    T: Send,\n{\n    let _ = \"}\";\n    // }\n    vec![]\n}\n",
            &[("f", 3, 8)],
        );
        // Nested functions count on their own and in their parent.
        check_lengths(
            "fn outer() {\n    fn inner() {\n    }\n}\n",
            &[("outer", 1, 4), ("inner", 2, 2)],
        );
        // Declarations without a body and function pointer types are not functions.
        check_lengths(
            "trait T {\n    fn f(&self);\n    fn g(&self) -> fn(u8) -> u8 { h }\n}\n",
            &[("g", 3, 1)],
        );
        // Arrays and closures in the signature do not end it early.
        check_lengths(
            "fn f(a: [u8; 4], g: impl Fn() -> u8) -> [u8; 2] {\n    [a[0], g()]\n}\n",
            &[("f", 1, 3)],
        );
    }

    #[test]
    fn test_functions_do_not_count() {
        check_lengths("#[test]\nfn t() {\n}\nfn kept() {}\n", &[("kept", 4, 1)]);
        check_lengths(
            "#[tokio::test(flavor = \"multi_thread\")]\nasync fn t() {\n}\n",
            &[],
        );
        check_lengths("#[cfg(test)]\nmod tests {\n    fn helper() {}\n}\n", &[]);
        // `#[test_case]`-like names and other attributes are not tests.
        check_lengths(
            "#[must_use]\npub fn f() -> u8 {\n    1\n}\n",
            &[("f", 2, 3)],
        );
    }

    #[test]
    fn the_chat_module_names_no_strategy() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask sits in the workspace");
        let problems = strategy_branches(root).expect("the chat module reads");
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
