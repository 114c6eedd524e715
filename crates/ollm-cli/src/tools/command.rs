//! `run_command`: a program and an argument list, never a shell.
//!
//! A call must name an allowed program (or an allowed `program subcommand` pair), contain
//! no shell metacharacters anywhere (they would mean the model expects a shell), and be
//! approved. It runs in the working directory with stdin closed, a timeout and an output
//! cap, and dies with the chat (`kill_on_drop`). Every execution is appended to the audit
//! log as one JSON line.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ollm_core::{Tool, ToolError};
use ollm_types::ToolSchema;
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;

use super::approval::Approver;
use super::cap_output;
use super::workspace::Workspace;
use crate::config::ToolSettings;

/// What `run_command` may do.
#[derive(Debug, Clone)]
pub(crate) struct CommandPolicy {
    /// Entries such as `ls` (any arguments) or `git status` (that subcommand only).
    pub(crate) allowed: Vec<String>,
    /// How long a command may run.
    pub(crate) timeout: Duration,
    /// Bytes of output kept.
    pub(crate) output_limit: usize,
    /// The audit log.
    pub(crate) audit_log: PathBuf,
}

impl CommandPolicy {
    /// The policy the settings describe.
    pub(crate) fn from_settings(s: &ToolSettings) -> Self {
        CommandPolicy {
            allowed: s.allowed_commands.clone(),
            timeout: s.command_timeout,
            output_limit: s.output_limit,
            audit_log: s.audit_log.clone(),
        }
    }
}

/// Why a command line was refused before anything ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refusal {
    /// The program name was empty.
    #[error("no program given")]
    Empty,
    /// A shell metacharacter appeared.
    #[error(
        "{0:?} contains {1:?}: commands run without a shell, so chaining, pipes, redirection and substitution are refused"
    )]
    Metacharacter(String, &'static str),
    /// The program is not on the allowlist.
    #[error("{0:?} is not an allowed command (allowed: {1})")]
    NotAllowed(String, String),
    /// An allowed read-only program was asked to change something.
    #[error("{0} {1}: refused, only read-only uses of {0} are allowed")]
    Writes(String, String),
}

/// Sequences that only mean something to a shell.
const METACHARACTERS: &[&str] = &[";", "&&", "||", "|", ">", "<", "`", "$(", "&", "\n"];

/// `find` actions that delete, run programs or write files.
const FIND_WRITES: &[&str] = &["-delete", "-exec", "-execdir", "-ok", "-okdir", "-fls"];

/// `git branch` options that create, delete, rename or reconfigure branches.
const GIT_BRANCH_WRITES: &[&str] = &[
    "-d",
    "-D",
    "--delete",
    "-m",
    "-M",
    "--move",
    "-c",
    "-C",
    "--copy",
    "-f",
    "--force",
    "-u",
    "--set-upstream-to",
    "--unset-upstream",
    "--edit-description",
    "-t",
    "--track",
    "--no-track",
    "--create-reflog",
];

/// Checks a command line against the allowlist, the metacharacter rule and the rules
/// that keep the read-only programs read-only; returns the allowlist entry that allows
/// it (what "always allow" is keyed on).
pub(crate) fn check_command(
    allowed: &[String],
    program: &str,
    args: &[String],
) -> Result<String, Refusal> {
    if program.trim().is_empty() {
        return Err(Refusal::Empty);
    }
    for word in std::iter::once(program).chain(args.iter().map(String::as_str)) {
        if let Some(m) = METACHARACTERS.iter().find(|m| word.contains(**m)) {
            return Err(Refusal::Metacharacter(word.to_owned(), m));
        }
    }
    // A path to a program is not the program: `./ls` or `/tmp/ls` are refused. The most
    // specific entry wins (`git status` over `git`).
    let entry = allowed
        .iter()
        .filter(|entry| {
            let mut words = entry.split_whitespace();
            let Some(prog) = words.next() else {
                return false;
            };
            let rest: Vec<&str> = words.collect();
            prog == program
                && rest.len() <= args.len()
                && rest.iter().zip(args).all(|(want, got)| *want == got)
        })
        .max_by_key(|entry| entry.split_whitespace().count())
        .ok_or_else(|| Refusal::NotAllowed(program.to_owned(), allowed.join(", ")))?;
    let writes = |why: &str| Err(Refusal::Writes(program.to_owned(), why.to_owned()));
    match program {
        "find" => {
            if let Some(a) = args
                .iter()
                .find(|a| FIND_WRITES.contains(&a.as_str()) || a.starts_with("-fprint"))
            {
                return writes(a);
            }
        }
        "git" => {
            if let Some(a) = args
                .iter()
                .find(|a| *a == "-o" || a.starts_with("--output") || a.starts_with("--ext-diff"))
            {
                return writes(a);
            }
            if args.first().is_some_and(|a| a == "branch") {
                let rest = &args[1..];
                if let Some(a) = rest.iter().find(|a| {
                    GIT_BRANCH_WRITES.contains(&a.as_str())
                        || GIT_BRANCH_WRITES
                            .iter()
                            .any(|w| w.starts_with("--") && a.starts_with(&format!("{w}=")))
                }) {
                    return writes(a);
                }
                let listing = rest.iter().any(|a| a == "-l" || a == "--list");
                if let Some(a) = rest.iter().find(|a| !a.starts_with('-')) {
                    if !listing {
                        return writes(&format!("{a} (a branch name creates a branch)"));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(entry.clone())
}

/// Refuses arguments that name paths outside the workspace: absolute paths, `..`,
/// `~`, and existing relative paths (or symlinks) that resolve outside; for `--opt=value`
/// the value is checked.
pub(crate) fn confine_args(ws: &Workspace, args: &[String]) -> Result<(), ToolError> {
    for arg in args {
        let value = match arg.strip_prefix('-') {
            Some(opt) => match opt.split_once('=') {
                Some((_, v)) => v,
                None => continue,
            },
            None => arg.as_str(),
        };
        if value.is_empty() {
            continue;
        }
        if value.starts_with('~') {
            return Err(ToolError::Failed(format!(
                "{arg}: paths outside the working directory are refused"
            )));
        }
        let path = std::path::Path::new(value);
        let suspicious = path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir));
        let exists = std::fs::symlink_metadata(ws.root().join(path)).is_ok();
        if suspicious || exists {
            ws.resolve_existing(value)?;
        }
    }
    Ok(())
}

/// The `run_command` tool.
pub(crate) struct RunCommand {
    ws: Workspace,
    policy: CommandPolicy,
    approver: Arc<Approver>,
}

impl RunCommand {
    /// The tool.
    pub(crate) fn new(ws: Workspace, policy: CommandPolicy, approver: Arc<Approver>) -> Self {
        RunCommand {
            ws,
            policy,
            approver,
        }
    }
}

#[async_trait]
impl Tool for RunCommand {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "run_command",
            format!(
                "Run a program (no shell) in the working directory and return its exit status and output. \
                 The user must approve. Allowed: {}.",
                self.policy.allowed.join(", ")
            ),
            json!({
                "type": "object",
                "properties": {
                    "program": {"type": "string", "description": "The program, for example \"git\"."},
                    "args": {"type": "array", "items": {"type": "string"}, "description": "Its arguments, one per item."}
                },
                "required": ["program"]
            }),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let program = arguments
            .get("program")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::Failed("missing string argument `program`".into()))?
            .to_owned();
        let args: Vec<String> = match arguments.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| ToolError::Failed("`args` must be strings".into()))
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(ToolError::Failed("`args` must be an array".into())),
        };
        let entry = check_command(&self.policy.allowed, &program, &args)
            .map_err(|r| ToolError::Failed(r.to_string()))?;
        confine_args(&self.ws, &args)?;
        let line = std::iter::once(program.as_str())
            .chain(args.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(" ");
        if !self
            .approver
            .approve("run_command", &entry, format!("run_command: {line}"))
            .await
        {
            audit(&self.policy.audit_log, &program, &args, "denied", "");
            return Err(ToolError::Denied(None));
        }
        let outcome = run(&self.ws, &self.policy, &program, &args).await;
        let (status, output) = match &outcome {
            Ok((status, output)) => (status.clone(), output.clone()),
            Err(e) => (format!("failed: {e}"), String::new()),
        };
        audit(&self.policy.audit_log, &program, &args, &status, &output);
        let (status, output) = outcome?;
        Ok(Value::String(format!("{status}\n{output}")))
    }
}

async fn run(
    ws: &Workspace,
    policy: &CommandPolicy,
    program: &str,
    args: &[String],
) -> Result<(String, String), ToolError> {
    let mut child = tokio::process::Command::new(program)
        .args(args)
        .current_dir(ws.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| ToolError::Failed(format!("cannot start {program}: {e}")))?;
    let cap = policy.output_limit;
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let collect = async {
        // Both pipes are read to the end, concurrently, whatever their size: a child
        // whose pipe is full blocks and never exits.
        let ((out, out_total), (err, err_total)) = tokio::join!(
            drain_capped(stdout.as_mut(), cap),
            drain_capped(stderr.as_mut(), cap)
        );
        let status = child.wait().await;
        (status, out, err, out_total + err_total)
    };
    match tokio::time::timeout(policy.timeout, collect).await {
        Err(_) => Err(ToolError::Failed(format!(
            "{program} did not finish within {} s and was killed",
            policy.timeout.as_secs()
        ))),
        Ok((status, out, err, total)) => {
            let status = status.map_err(|e| ToolError::Failed(e.to_string()))?;
            let kept = (out.len() + err.len()) as u64;
            let mut text = String::from_utf8_lossy(&out).into_owned();
            if !err.is_empty() {
                text.push_str("\n[stderr]\n");
                text.push_str(&String::from_utf8_lossy(&err));
            }
            let status = match status.code() {
                Some(c) => format!("exit status {c}"),
                None => "killed by a signal".to_owned(),
            };
            let output = if kept < total || text.len() > cap {
                let mut end = cap.min(text.len());
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                format!(
                    "{}\n[output truncated: {end} of {total} bytes shown]",
                    &text[..end]
                )
            } else {
                text
            };
            Ok((status, output))
        }
    }
}

/// Reads `reader` to its end, keeping the first `cap` bytes and discarding the rest;
/// returns what was kept and how many bytes were read in all.
async fn drain_capped<R: tokio::io::AsyncRead + Unpin>(
    reader: Option<&mut R>,
    cap: usize,
) -> (Vec<u8>, u64) {
    let mut kept = Vec::new();
    let mut total = 0u64;
    let Some(reader) = reader else {
        return (kept, total);
    };
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                let room = cap.saturating_sub(kept.len());
                kept.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (kept, total)
}

/// Appends one JSON line to the audit log; failures to log are reported on stderr but do
/// not fail the call (the command has already run).
fn audit(path: &std::path::Path, program: &str, args: &[String], status: &str, output: &str) {
    let record = json!({
        "time_unix": std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        "program": program,
        "args": args,
        "status": status,
        "output": cap_output(output, 2048),
    });
    let write = || -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        f.write_all(format!("{record}\n").as_bytes())
    };
    if let Err(e) = write() {
        crate::render::warn(&format!(
            "could not write the audit log {}: {e}",
            path.display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::super::approval::{Mode, tests::Scripted};
    use super::*;

    fn allowed() -> Vec<String> {
        crate::config::DEFAULT_ALLOWED_COMMANDS
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    }

    fn check(program: &str, args: &[&str]) -> Result<String, Refusal> {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        check_command(&allowed(), program, &args)
    }

    #[test]
    fn allowlist_and_subcommands() {
        assert_eq!(check("ls", &["-la"]), Ok("ls".into()));
        assert_eq!(
            check("git", &["status", "--short"]),
            Ok("git status".into())
        );
        assert!(matches!(
            check("git", &["push"]),
            Err(Refusal::NotAllowed(..))
        ));
        assert!(matches!(check("git", &[]), Err(Refusal::NotAllowed(..))));
        assert!(matches!(
            check("rm", &["-rf"]),
            Err(Refusal::NotAllowed(..))
        ));
        assert!(matches!(
            check("/bin/ls", &[]),
            Err(Refusal::NotAllowed(..))
        ));
        assert_eq!(check(" ", &[]), Err(Refusal::Empty));
    }

    #[test]
    fn read_only_programs_stay_read_only() {
        for bad in [
            &["find", ".", "-delete"][..],
            &["find", ".", "-exec", "rm", "{}", "+"],
            &["find", ".", "-execdir", "sh"],
            &["find", ".", "-ok", "rm"],
            &["find", ".", "-fprint", "out"],
            &["find", ".", "-fprintf", "out", "%p"],
            &["find", ".", "-fls", "out"],
            &["git", "log", "--output=x.patch"],
            &["git", "diff", "--output", "x"],
            &["git", "show", "-o", "x"],
            &["git", "branch", "-D", "main"],
            &["git", "branch", "--delete", "main"],
            &["git", "branch", "--set-upstream-to=origin/x"],
            &["git", "branch", "newbranch"],
            &["git", "branch", "-m", "a", "b"],
        ] {
            assert!(
                matches!(check(bad[0], &bad[1..]), Err(Refusal::Writes(..))),
                "{bad:?}"
            );
        }
        for good in [
            &["find", ".", "-name", "*.rs"][..],
            &["git", "branch", "-a"],
            &["git", "branch", "--list", "feat*"],
            &["git", "log", "--oneline"],
        ] {
            assert!(check(good[0], &good[1..]).is_ok(), "{good:?}");
        }
        // Each git entry allows only its own subcommand.
        for sub in ["push", "reset", "checkout", "commit", "clean", "rm", "-C"] {
            assert!(
                matches!(check("git", &[sub]), Err(Refusal::NotAllowed(..))),
                "{sub}"
            );
        }
    }

    #[test]
    fn path_arguments_stay_in_the_workspace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let confine = |args: &[&str]| {
            let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
            confine_args(&ws, &args)
        };
        assert!(confine(&["a.txt", "-n", "pattern", "."]).is_ok());
        let inside = dir.path().join("a.txt");
        assert!(confine(&[inside.to_str().unwrap()]).is_ok());
        for bad in [
            "/etc/passwd",
            "../x",
            "~/.ssh/id_rsa",
            "--file=/etc/passwd",
            "sub/../../x",
        ] {
            assert!(confine(&[bad]).is_err(), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
            assert!(confine(&["link"]).is_err());
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn cat_outside_the_workspace_is_refused_before_asking() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(dir.path(), Mode::Yes, Duration::from_secs(20));
        let err = t
            .execute(args(json!({"program": "cat", "args": ["/etc/passwd"]})))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    }

    #[tokio::test]
    async fn always_is_keyed_on_the_allowlist_entry() {
        use super::super::approval::Answer;
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let prompter = Scripted::new(&[Answer::Always, Answer::Deny]);
        let policy = CommandPolicy {
            allowed: allowed(),
            timeout: Duration::from_secs(20),
            output_limit: 100,
            audit_log: dir.path().join("audit.log"),
        };
        let t = RunCommand::new(
            ws,
            policy,
            Arc::new(Approver::new(Mode::Ask, &[], prompter.clone())),
        );
        // "always" for `git status` does not cover `git log`.
        let _ = t
            .execute(args(json!({"program": "git", "args": ["status"]})))
            .await;
        let err = t
            .execute(args(json!({"program": "git", "args": ["log"]})))
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::Denied(None));
        assert_eq!(prompter.asked.load(std::sync::atomic::Ordering::SeqCst), 2);
    }

    #[test]
    fn shell_syntax_is_refused_everywhere() {
        for bad in [";", "&&", "||", "|", ">", "<", "`", "$(", "&"] {
            let word = format!("a{bad}b");
            assert!(
                matches!(check("ls", &[&word]), Err(Refusal::Metacharacter(..))),
                "{bad}"
            );
            assert!(
                matches!(check(&word, &[]), Err(Refusal::Metacharacter(..))),
                "{bad}"
            );
        }
        assert!(matches!(
            check("ls", &["; rm -rf /"]),
            Err(Refusal::Metacharacter(..))
        ));
    }

    fn tool(dir: &std::path::Path, mode: Mode, timeout: Duration) -> RunCommand {
        let ws = Workspace::new(dir).unwrap();
        let mut allowed = allowed();
        allowed.push("sleep".into());
        let policy = CommandPolicy {
            allowed,
            timeout,
            output_limit: 100,
            audit_log: dir.join("audit/audit.log"),
        };
        RunCommand::new(
            ws,
            policy,
            Arc::new(Approver::new(mode, &[], Scripted::new(&[]))),
        )
    }

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn runs_in_the_workspace_caps_and_audits() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.txt"), "x".repeat(500)).unwrap();
        let t = tool(dir.path(), Mode::Yes, Duration::from_secs(20));
        let out = t
            .execute(args(json!({"program": "cat", "args": ["big.txt"]})))
            .await
            .unwrap();
        let out = out.as_str().unwrap();
        assert!(out.starts_with("exit status 0\n"), "{out}");
        assert!(out.contains("[output truncated"), "{out}");
        let log = std::fs::read_to_string(dir.path().join("audit/audit.log")).unwrap();
        let rec: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
        assert_eq!(rec["program"], "cat");
        assert_eq!(rec["args"], json!(["big.txt"]));
        assert_eq!(rec["status"], "exit status 0");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn output_far_over_the_cap_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("huge.txt"), "y".repeat(300 * 1024)).unwrap();
        // Far longer than `cat` needs; a full pipe would block it until this fires.
        let t = tool(dir.path(), Mode::Yes, Duration::from_secs(10));
        let out = t
            .execute(args(json!({"program": "cat", "args": ["huge.txt"]})))
            .await
            .unwrap();
        let out = out.as_str().unwrap();
        assert!(out.starts_with("exit status 0\n"), "{out}");
        assert!(
            out.ends_with(&format!(
                "[output truncated: 100 of {} bytes shown]",
                300 * 1024
            )),
            "{out}"
        );
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn denied_calls_do_not_run_but_are_audited() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(dir.path(), Mode::Headless, Duration::from_secs(20));
        let err = t.execute(args(json!({"program": "ls"}))).await.unwrap_err();
        assert_eq!(err, ToolError::Denied(None));
        assert_eq!(err.to_string(), "denied by the user");
        let log = std::fs::read_to_string(dir.path().join("audit/audit.log")).unwrap();
        assert!(log.contains("\"denied\""));
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn commands_time_out() {
        let dir = tempfile::tempdir().unwrap();
        let t = tool(dir.path(), Mode::Yes, Duration::from_millis(200));
        let err = t
            .execute(args(json!({"program": "sleep", "args": ["30"]})))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Failed(_)));
    }
}
