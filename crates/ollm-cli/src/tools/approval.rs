//! Approval of tool calls that change things or run programs.
//!
//! On a terminal the user is asked (allow once, always for this allowlist entry, deny); headless,
//! a call is denied unless `--yes` or the config's `tools.auto_approve` allows it. Asking
//! goes through the [`Prompter`] trait so the policy is tested without a terminal.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// How calls are approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Ask the user.
    Ask,
    /// Approve everything (`--yes`).
    Yes,
    /// Deny what the config does not allow (no terminal to ask on).
    Headless,
}

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Run it this time.
    Once,
    /// Run it, and every later call with the same key, without asking.
    Always,
    /// Do not run it.
    Deny,
}

/// Asks the user a question and reads the answer.
pub(crate) trait Prompter: Send + Sync {
    /// Shows `request` and returns the answer.
    fn ask(&self, request: &str) -> Answer;
}

/// Asks on stderr and reads a line from stdin.
#[derive(Debug, Default)]
pub(crate) struct TerminalPrompter;

impl Prompter for TerminalPrompter {
    fn ask(&self, request: &str) -> Answer {
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\n\x1b[1;33m? {request}\x1b[0m\n  [y] allow once  [a] always for this  [N] deny: "
        );
        let _ = err.flush();
        let mut line = String::new();
        if std::io::stdin().lock().read_line(&mut line).is_err() {
            return Answer::Deny;
        }
        parse_answer(&line)
    }
}

/// Reads an answer; anything unclear is a denial.
pub(crate) fn parse_answer(line: &str) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "o" | "once" => Answer::Once,
        "a" | "always" => Answer::Always,
        _ => Answer::Deny,
    }
}

/// The approval policy of a run.
pub(crate) struct Approver {
    mode: Mutex<Mode>,
    auto_approve: BTreeSet<String>,
    always: Mutex<BTreeSet<String>>,
    prompter: Arc<dyn Prompter>,
    asking: Mutex<()>,
    told_headless: AtomicBool,
}

impl std::fmt::Debug for Approver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approver")
            .field("auto_approve", &self.auto_approve)
            .finish_non_exhaustive()
    }
}

impl Approver {
    /// A policy; `auto_approve` names tools (or `tool:key`) approved without asking.
    pub(crate) fn new(mode: Mode, auto_approve: &[String], prompter: Arc<dyn Prompter>) -> Self {
        Approver {
            mode: Mutex::new(mode),
            auto_approve: auto_approve.iter().cloned().collect(),
            always: Mutex::new(BTreeSet::new()),
            prompter,
            asking: Mutex::new(()),
            told_headless: AtomicBool::new(false),
        }
    }

    /// Switches the mode (for `--yes` toggled in a chat).
    pub(crate) fn set_mode(&self, mode: Mode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }

    /// Whether `tool` may run the call described by `request`; `key` groups calls that
    /// "always" covers (the allowlist entry, such as `git status`, for `run_command`). Blocks while asking, so call it
    /// from a blocking context ([`Approver::approve`] does that).
    pub(crate) fn decide(&self, tool: &str, key: &str, request: &str) -> bool {
        let keyed = format!("{tool}:{key}");
        if self.auto_approve.contains(tool) || self.auto_approve.contains(&keyed) {
            return true;
        }
        if self.always.lock().is_ok_and(|a| a.contains(&keyed)) {
            return true;
        }
        let mode = self.mode.lock().map_or(Mode::Headless, |m| *m);
        match mode {
            Mode::Yes => true,
            Mode::Headless => {
                if !self.told_headless.swap(true, Ordering::Relaxed) {
                    crate::render::warn(&format!(
                        "{tool} needs approval and there is no terminal to ask on; denied \
                         (pass --yes, or list it in tools.auto_approve in the config)"
                    ));
                }
                false
            }
            Mode::Ask => {
                // One question at a time, even when calls run concurrently.
                let _turn = self.asking.lock();
                if self.always.lock().is_ok_and(|a| a.contains(&keyed)) {
                    return true;
                }
                match self.prompter.ask(request) {
                    Answer::Once => true,
                    Answer::Always => {
                        if let Ok(mut a) = self.always.lock() {
                            a.insert(keyed);
                        }
                        true
                    }
                    Answer::Deny => false,
                }
            }
        }
    }

    /// [`Approver::decide`] off the async threads.
    pub(crate) async fn approve(self: &Arc<Self>, tool: &str, key: &str, request: String) -> bool {
        let this = Arc::clone(self);
        let (tool, key) = (tool.to_owned(), key.to_owned());
        tokio::task::spawn_blocking(move || this.decide(&tool, &key, &request))
            .await
            .unwrap_or(false)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Answers from a script and counts the questions.
    pub(crate) struct Scripted {
        answers: Mutex<Vec<Answer>>,
        pub(crate) asked: AtomicUsize,
    }

    impl Scripted {
        pub(crate) fn new(answers: &[Answer]) -> Arc<Self> {
            Arc::new(Scripted {
                answers: Mutex::new(answers.iter().rev().copied().collect()),
                asked: AtomicUsize::new(0),
            })
        }
    }

    impl Prompter for Scripted {
        fn ask(&self, _request: &str) -> Answer {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.answers.lock().unwrap().pop().unwrap_or(Answer::Deny)
        }
    }

    #[test]
    fn headless_denies_unless_configured() {
        let p = Scripted::new(&[]);
        let a = Approver::new(Mode::Headless, &["write_file".into()], p.clone());
        assert!(!a.decide("run_command", "ls", "run ls"));
        assert!(a.decide("write_file", "x", "write x"));
        let a = Approver::new(Mode::Headless, &["run_command:git".into()], p.clone());
        assert!(a.decide("run_command", "git", "git status"));
        assert!(!a.decide("run_command", "ls", "ls"));
        assert_eq!(p.asked.load(Ordering::SeqCst), 0, "headless never asks");
    }

    #[test]
    fn yes_approves_everything() {
        let p = Scripted::new(&[]);
        let a = Approver::new(Mode::Yes, &[], p.clone());
        assert!(a.decide("run_command", "ls", "ls"));
        assert_eq!(p.asked.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn asking_honours_once_always_and_deny() {
        let p = Scripted::new(&[Answer::Once, Answer::Always, Answer::Deny]);
        let a = Approver::new(Mode::Ask, &[], p.clone());
        assert!(a.decide("run_command", "ls", "ls"));
        assert!(a.decide("run_command", "git", "git log"));
        // "always" covers git from now on without asking.
        assert!(a.decide("run_command", "git", "git diff"));
        assert!(!a.decide("run_command", "ls", "ls"));
        assert_eq!(p.asked.load(Ordering::SeqCst), 3);
    }

    #[test]
    fn answers_parse_strictly() {
        assert_eq!(parse_answer("y\n"), Answer::Once);
        assert_eq!(parse_answer(" A "), Answer::Always);
        assert_eq!(parse_answer(""), Answer::Deny);
        assert_eq!(parse_answer("maybe"), Answer::Deny);
    }
}
