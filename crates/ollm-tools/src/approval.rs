//! Approval of tool calls that change things or run programs.
//!
//! Asking the user, a call is allowed once, always (for its allowlist entry), or denied;
//! headless, a call is denied unless `--yes` or the configured auto-approve list allows
//! it. The front end implements [`Prompter`], so the policy is tested without a terminal.
//!
//! # Decisions
//! - The question carries what will happen, not a summary: [`Request::WriteFile`] has the
//!   path and a short diff (or the head of a new file), [`Request::RunCommand`] the exact
//!   argument vector. Its `Display` escapes control characters, so model-written text
//!   cannot move the cursor or restyle the terminal it is shown on.
//! - An auto-approve entry `tool:key` covers that key and every longer key starting with
//!   it and a space: `run_command:git` covers `git status` and `git log`.
//! - Questions are asked one at a time, even when calls run concurrently; dropping the
//!   future withdraws the question.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// How calls are approved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mode {
    /// Ask the user.
    Ask,
    /// Approve everything (`--yes`).
    Yes,
    /// Deny what the configuration does not allow (no one to ask).
    Headless,
}

/// The user's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Run it this time.
    Once,
    /// Run it, and every later call with the same key, without asking.
    Always,
    /// Do not run it.
    Deny,
}

/// What a call will do, as shown to whoever approves it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Request {
    /// `write_file` will create or replace `path`.
    WriteFile {
        /// The path, relative to the working directory.
        path: String,
        /// The size of the new content.
        bytes: usize,
        /// A short diff against the current file, or the head of a new file.
        preview: String,
    },
    /// `run_command` will run this argument vector (the program first).
    RunCommand {
        /// The exact argv.
        argv: Vec<String>,
    },
    /// A tool from elsewhere (an MCP server) will be called with these arguments.
    External {
        /// The tool's name as the model sees it.
        tool: String,
        /// Its arguments, as JSON.
        arguments: String,
    },
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::WriteFile {
                path,
                bytes,
                preview,
            } => {
                let unit = if *bytes == 1 { "byte" } else { "bytes" };
                write!(f, "write_file {} ({bytes} {unit})", escape(path))?;
                for line in preview.lines() {
                    write!(f, "\n    {}", escape(line))?;
                }
                Ok(())
            }
            Request::RunCommand { argv } => {
                let shown: Vec<String> = argv.iter().map(|a| quote(a)).collect();
                write!(f, "run_command: {}", shown.join(" "))
            }
            Request::External { tool, arguments } => {
                write!(f, "{} {}", escape(tool), escape(arguments))
            }
        }
    }
}

/// `text` with control characters (other than tabs) shown as escapes.
fn escape(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// An argument as a reader can retype it: quoted when empty or holding blanks, quotes or
/// control characters.
fn quote(arg: &str) -> String {
    let plain = !arg.is_empty()
        && !arg
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '"' || c == '\'' || c == '\\');
    if plain {
        arg.to_owned()
    } else {
        format!("{arg:?}")
    }
}

/// Asks the user and tells them things. Dropping the `ask` future stops asking: no read
/// is left behind to swallow the user's next line.
#[async_trait::async_trait]
pub trait Prompter: Send + Sync {
    /// Shows `request` and returns the answer.
    async fn ask(&self, request: &Request) -> Answer;
    /// Shows a warning (a denial nobody could be asked about, an unwritable audit log, a
    /// file readable by others).
    fn warn(&self, message: &str);
}

/// What the model reads when a call needing approval ran where no one could be asked.
pub const HEADLESS_DENIAL: &str = "not run: it needs approval and no one could be asked (pass --yes, or list it in tools.auto_approve)";

/// The approval policy of a run.
pub struct Approver {
    mode: Mutex<Mode>,
    auto_approve: BTreeSet<String>,
    always: Mutex<BTreeSet<String>>,
    prompter: Arc<dyn Prompter>,
    asking: tokio::sync::Mutex<()>,
    told_headless: AtomicBool,
}

impl fmt::Debug for Approver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approver")
            .field("auto_approve", &self.auto_approve)
            .finish_non_exhaustive()
    }
}

impl Approver {
    /// A policy; `auto_approve` names tools (or `tool:key`) approved without asking.
    pub fn new(mode: Mode, auto_approve: &[String], prompter: Arc<dyn Prompter>) -> Self {
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
    pub fn set_mode(&self, mode: Mode) {
        if let Ok(mut m) = self.mode.lock() {
            *m = mode;
        }
    }

    /// The error for a call this policy did not approve: in [`Mode::Headless`] nobody was
    /// asked, and the text says so rather than "denied by the user".
    pub fn denial(&self) -> ollm_core::ToolError {
        if self.mode() == Mode::Headless {
            ollm_core::ToolError::Denied(Some(HEADLESS_DENIAL.to_owned()))
        } else {
            ollm_core::ToolError::Denied(None)
        }
    }

    /// The current mode.
    pub fn mode(&self) -> Mode {
        self.mode.lock().map_or(Mode::Headless, |m| *m)
    }

    /// The configured auto-approval entries (tools, or `tool:key`), sorted.
    pub fn auto_approve(&self) -> Vec<String> {
        self.auto_approve.iter().cloned().collect()
    }

    /// Passes a warning to the front end.
    pub fn warn(&self, message: &str) {
        self.prompter.warn(message);
    }

    fn auto_approved(&self, tool: &str, key: &str) -> bool {
        self.auto_approve.iter().any(|entry| {
            if entry == tool {
                return true;
            }
            let Some((t, k)) = entry.split_once(':') else {
                return false;
            };
            t == tool
                && (key == k
                    || key
                        .strip_prefix(k)
                        .is_some_and(|rest| rest.starts_with(' ')))
        })
    }

    /// Whether `tool` may run the call described by `request`; `key` groups calls that
    /// "always" covers (the allowlist entry, such as `git status`, for `run_command`).
    /// Asks in [`Mode::Ask`]; dropping the future withdraws the question.
    pub async fn approve(&self, tool: &str, key: &str, request: Request) -> bool {
        let keyed = format!("{tool}:{key}");
        if self.auto_approved(tool, key) || self.always.lock().is_ok_and(|a| a.contains(&keyed)) {
            return true;
        }
        let mode = self.mode.lock().map_or(Mode::Headless, |m| *m);
        match mode {
            Mode::Yes => true,
            Mode::Headless => {
                if !self.told_headless.swap(true, Ordering::Relaxed) {
                    self.warn(&format!(
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
mod tests {
    use super::*;
    use crate::testing::Scripted;

    fn run(argv: &[&str]) -> Request {
        Request::RunCommand {
            argv: argv.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn decide(a: &Approver, tool: &str, key: &str, request: &str) -> bool {
        futures::executor::block_on(a.approve(tool, key, run(&[request])))
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
        async fn ask(&self, _request: &Request) -> Answer {
            let _guard = SetOnDrop(Arc::clone(&self.withdrawn));
            futures::future::pending::<Answer>().await
        }
        fn warn(&self, _message: &str) {}
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
            let asking = a.approve("run_command", "ls", run(&["ls"]));
            futures::pin_mut!(asking);
            assert!(futures::poll!(asking.as_mut()).is_pending());
            assert!(!withdrawn.load(Ordering::SeqCst));
        }
        // Dropping the call (a cancelled run) leaves no question, or read, behind; the
        // next call may ask again.
        assert!(withdrawn.load(Ordering::SeqCst));
        let again = a.approve("run_command", "ls", run(&["ls"]));
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
        assert_eq!(p.asked(), 0, "headless never asks");
        assert_eq!(
            p.warnings.lock().unwrap().len(),
            2,
            "one warning per policy"
        );
    }

    #[test]
    fn a_program_entry_covers_its_subcommand_keys() {
        // The documented `auto_approve = ["run_command:git"]` example: the real keys are
        // allowlist entries such as `git status`, which it never matched.
        let a = Approver::new(
            Mode::Headless,
            &["run_command:git".into()],
            Scripted::new(&[]),
        );
        assert!(decide(&a, "run_command", "git status", "git status"));
        assert!(decide(&a, "run_command", "git log", "git log"));
        assert!(!decide(&a, "run_command", "gitk", "gitk"));
        assert!(!decide(&a, "write_file", "git status", "x"));
    }

    #[test]
    fn yes_approves_everything() {
        let p = Scripted::new(&[]);
        let a = Approver::new(Mode::Yes, &[], p.clone());
        assert!(decide(&a, "run_command", "ls", "ls"));
        assert_eq!(p.asked(), 0);
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
        assert_eq!(p.asked(), 3);
    }

    #[test]
    fn requests_show_exactly_what_runs_and_escape_control_characters() {
        let check = |request: Request, expected: &str| assert_eq!(request.to_string(), expected);
        check(
            run(&["grep", "-n", "two words", ""]),
            r#"run_command: grep -n "two words" """#,
        );
        check(
            run(&["echo", "\x1b[2J"]),
            r#"run_command: echo "\u{1b}[2J""#,
        );
        check(
            Request::WriteFile {
                path: "a\x1b.txt".into(),
                bytes: 3,
                preview: "+ new\x07\n- old".into(),
            },
            "write_file a\\u{1b}.txt (3 bytes)\n    + new\\u{7}\n    - old",
        );
        check(
            Request::WriteFile {
                path: "one".into(),
                bytes: 1,
                preview: String::new(),
            },
            "write_file one (1 byte)",
        );
        check(
            Request::External {
                tool: "fs__read_text_file".into(),
                arguments: "{\"path\":\"a\u{1b}[2J\"}".into(),
            },
            r#"fs__read_text_file {"path":"a\u{1b}[2J"}"#,
        );
    }
}
