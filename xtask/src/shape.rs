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

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use crate::collect_rs_files;
use crate::cycles::code_tokens;

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

    #[test]
    fn the_chat_module_names_no_strategy() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .parent()
            .expect("xtask sits in the workspace");
        let problems = strategy_branches(root).expect("the chat module reads");
        assert!(problems.is_empty(), "{problems:#?}");
    }
}
