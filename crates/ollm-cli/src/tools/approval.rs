//! Approval of tool calls that change things or run programs.
//!
//! On a terminal the user is asked (allow once, always for this allowlist entry, deny); headless,
//! a call is denied unless `--yes` or the config's `tools.auto_approve` allows it. Asking
//! goes through the [`Prompter`] trait so the policy is tested without a terminal.

use std::collections::BTreeSet;
use std::io::Write;
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

/// Asks the user a question and reads the answer. Dropping the future stops asking: no
/// read is left behind to swallow the user's next line.
#[async_trait::async_trait]
pub(crate) trait Prompter: Send + Sync {
    /// Shows `request` and returns the answer.
    async fn ask(&self, request: &str) -> Answer;
}

/// Asks on stderr and reads a line from stdin.
#[derive(Debug, Default)]
pub(crate) struct TerminalPrompter;

#[async_trait::async_trait]
impl Prompter for TerminalPrompter {
    async fn ask(&self, request: &str) -> Answer {
        {
            let mut err = std::io::stderr().lock();
            // `NO_COLOR` turns styling off here too, as it does for the rest of the output.
            let (on, off) = if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
                ("", "")
            } else {
                ("\x1b[1;33m", "\x1b[0m")
            };
            let _ = write!(
                err,
                "\n{on}? {request}{off}\n  [y] allow once  [a] always for this  [N] deny: "
            );
            let _ = err.flush();
        }
        match read_answer_line().await {
            Some(line) => parse_answer(&line),
            None => Answer::Deny,
        }
    }
}

/// Reads one line from stdin (a terminal), waiting for it without a blocked read: the
/// wait is on the descriptor's readiness, so a cancelled question reads nothing.
#[cfg(unix)]
// `with_interest` is deprecated because the descriptor could be closed and reused while
// registered; fd 0 stays open for the life of the process, and the safe replacement
// needs `unsafe`, which this workspace forbids.
#[allow(deprecated)]
async fn read_answer_line() -> Option<String> {
    use std::io::BufRead;
    let Ok(fd) =
        tokio::io::unix::AsyncFd::with_interest(std::io::stdin(), tokio::io::Interest::READABLE)
    else {
        return read_answer_line_blocking().await;
    };
    loop {
        let mut guard = fd.readable().await.ok()?;
        let mut line = String::new();
        // A terminal in canonical mode is readable once a whole line was entered.
        match guard.try_io(|stdin| stdin.get_ref().lock().read_line(&mut line)) {
            Ok(Ok(_)) => return Some(line),
            Ok(Err(_)) => return None,
            Err(_would_block) => continue,
        }
    }
}

#[cfg(not(unix))]
async fn read_answer_line() -> Option<String> {
    read_answer_line_blocking().await
}

/// The fallback: a blocking read (which a cancel cannot take back).
async fn read_answer_line_blocking() -> Option<String> {
    tokio::task::spawn_blocking(|| {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .ok()
            .map(|_| line)
    })
    .await
    .ok()
    .flatten()
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
    asking: tokio::sync::Mutex<()>,
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
            asking: tokio::sync::Mutex::new(()),
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
    /// "always" covers (the allowlist entry, such as `git status`, for `run_command`).
    /// Asks the user in [`Mode::Ask`]; dropping the future withdraws the question.
    pub(crate) async fn approve(&self, tool: &str, key: &str, request: String) -> bool {
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
                let _turn = self.asking.lock().await;
                if self.always.lock().is_ok_and(|a| a.contains(&keyed)) {
                    return true;
                }
                match self.prompter.ask(&request).await {
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

    #[async_trait::async_trait]
    impl Prompter for Scripted {
        async fn ask(&self, _request: &str) -> Answer {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.answers.lock().unwrap().pop().unwrap_or(Answer::Deny)
        }
    }

    fn decide(a: &Approver, tool: &str, key: &str, request: &str) -> bool {
        futures::executor::block_on(a.approve(tool, key, request.to_owned()))
    }

    /// Never answers; records when the question is withdrawn.
    struct Unanswered {
        withdrawn: Arc<AtomicBool>,
    }

    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[async_trait::async_trait]
    impl Prompter for Unanswered {
        async fn ask(&self, _request: &str) -> Answer {
            let _guard = SetOnDrop(Arc::clone(&self.withdrawn));
            futures::future::pending::<Answer>().await
        }
    }

    #[tokio::test]
    async fn a_cancelled_question_is_withdrawn() {
        let withdrawn = Arc::new(AtomicBool::new(false));
        let a = Approver::new(
            Mode::Ask,
            &[],
            Arc::new(Unanswered {
                withdrawn: Arc::clone(&withdrawn),
            }),
        );
        {
            let asking = a.approve("run_command", "ls", "ls".into());
            futures::pin_mut!(asking);
            assert!(futures::poll!(asking.as_mut()).is_pending());
            assert!(!withdrawn.load(Ordering::SeqCst));
        }
        // Dropping the call (a cancelled run) leaves no question, or read, behind; the
        // next call may ask again.
        assert!(withdrawn.load(Ordering::SeqCst));
        let again = a.approve("run_command", "ls", "ls".into());
        futures::pin_mut!(again);
        assert!(futures::poll!(again.as_mut()).is_pending());
    }

    #[test]
    fn headless_denies_unless_configured() {
        let p = Scripted::new(&[]);
        let a = Approver::new(Mode::Headless, &["write_file".into()], p.clone());
        assert!(!decide(&a, "run_command", "ls", "run ls"));
        assert!(decide(&a, "write_file", "x", "write x"));
        let a = Approver::new(Mode::Headless, &["run_command:git".into()], p.clone());
        assert!(decide(&a, "run_command", "git", "git status"));
        assert!(!decide(&a, "run_command", "ls", "ls"));
        assert_eq!(p.asked.load(Ordering::SeqCst), 0, "headless never asks");
    }

    #[test]
    fn yes_approves_everything() {
        let p = Scripted::new(&[]);
        let a = Approver::new(Mode::Yes, &[], p.clone());
        assert!(decide(&a, "run_command", "ls", "ls"));
        assert_eq!(p.asked.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn asking_honours_once_always_and_deny() {
        let p = Scripted::new(&[Answer::Once, Answer::Always, Answer::Deny]);
        let a = Approver::new(Mode::Ask, &[], p.clone());
        assert!(decide(&a, "run_command", "ls", "ls"));
        assert!(decide(&a, "run_command", "git", "git log"));
        // "always" covers git from now on without asking.
        assert!(decide(&a, "run_command", "git", "git diff"));
        assert!(!decide(&a, "run_command", "ls", "ls"));
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
