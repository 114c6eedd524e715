//! The served columns: the plain loop ([`super::plain`]) pointed at an `ollm serve` that
//! the eval starts in front of `--url`, so a plain OpenAI client's score through serve
//! stands beside `ollm run`'s on the same server and tasks (issue 37).
//!
//! # Decisions
//!
//! - **One `ollm serve` per served column, for the whole eval**, from the same `ollm`
//!   the ollm columns run (`--ollm`, else this worktree's build; the eval's own copy of
//!   it): `ollm --config FILE --provider openai serve --listen 127.0.0.1:0 --upstream
//!   URL`. Port 0 and the `listening on http://ADDR` line serve prints once bound give a
//!   free loopback port without guessing one (as `cargo xtask bench --serve` does).
//! - **Its own config file**, written for the column: empty for `served` (serve as it
//!   ships), `[serve] tool_or_none = true` for `served-with-tool-or-none` (each rule of
//!   `served-with-A+B` its own line: `greedy_tool_turns = true`; `changes-on-request`
//!   names the plain loop's tools that only read, `read_only = [...]`), `[coach] off`
//!   for `served-without-RULE`. A config file the user has does not leak into the
//!   measurement.
//! - **Stopped when the eval ends**, on success, error or panic: [`Served`] kills and
//!   reaps its process when dropped. Ctrl-C reaches it with the eval (same process
//!   group), and serve stops on it. Where util-linux's `setpriv` exists, serve runs under
//!   `--pdeathsig TERM`, so it also stops when the eval is killed outright: on
//!   2026-11-26 an eval was killed from outside (no message, its llama-server stopped by
//!   its own death signal) and both of its serves were left running.
//! - Serve's log (warnings and errors: every error a client receives is logged with its
//!   cause) goes to `serve.COLUMN.log` beside the runs' traces.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};

use super::context::Column;

/// An `ollm serve` the eval started, killed and reaped when dropped.
pub(super) struct Served {
    child: Child,
    /// Its OpenAI base URL: `http://127.0.0.1:PORT/v1`.
    pub(super) url: String,
    _config: tempfile::NamedTempFile,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A serve for each served column of `columns`, in front of `upstream`, and their base
/// URLs by column name. The servers run until the first value drops.
pub(super) fn start_all(
    ollm: &Path,
    upstream: &str,
    columns: &[Column],
    logs: &Path,
) -> Result<(Vec<Served>, BTreeMap<String, String>)> {
    let mut servers = Vec::new();
    let mut urls = BTreeMap::new();
    for column in columns.iter().filter(|c| c.is_served()) {
        let log = logs.join(format!("serve.{}.log", column.name()));
        let served = start(ollm, upstream, &config_text(column), &log)?;
        println!(
            "eval: column {} goes through ollm serve at {} (log {})",
            column.name(),
            served.url,
            log.display()
        );
        urls.insert(column.name(), served.url.clone());
        servers.push(served);
    }
    Ok((servers, urls))
}

/// The plain loop's tools that only read, as `ollm run` names its own (the schemas are
/// its built-ins', `data/tools.json`): what `served-with-changes-on-request` writes as
/// `[serve] read_only`.
const READ_ONLY: &str = r#"["read_file", "list_dir", "search_text"]"#;

/// The config file of a served column (see the module docs).
pub(super) fn config_text(column: &Column) -> String {
    let mut text = String::new();
    if let Some(rules) = &column.on {
        text.push_str("[serve]\n");
        for rule in rules.split('+') {
            let line = match rule {
                "changes-on-request" => format!("read_only = {READ_ONLY}\n"),
                rule => format!("{} = true\n", rule.replace('-', "_")),
            };
            text.push_str(&line);
        }
    }
    let off = column.rules_off();
    if !off.is_empty() {
        let quoted: Vec<String> = off.iter().map(|r| format!("\"{r}\"")).collect();
        text.push_str(&format!("[coach]\noff = [{}]\n", quoted.join(", ")));
    }
    text
}

/// `ollm serve` with `config` in front of `upstream` on a free loopback port, its
/// stderr to `log`; returns once it listens.
fn start(ollm: &Path, upstream: &str, config: &str, log: &Path) -> Result<Served> {
    let file = tempfile::NamedTempFile::new().context("a config file for ollm serve")?;
    std::fs::write(file.path(), config)?;
    let mut child = serve_command(ollm)
        .arg("--config")
        .arg(file.path())
        .args(["--provider", "openai", "serve", "--listen", "127.0.0.1:0"])
        .args(["--upstream", upstream])
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(File::create(log).with_context(|| format!("creating {}", log.display()))?)
        .spawn()
        .with_context(|| format!("starting {} serve", ollm.display()))?;
    let mut line = String::new();
    let read = match child.stdout.take() {
        Some(out) => BufReader::new(out).read_line(&mut line).map(drop),
        None => Ok(()),
    };
    let addr = line.trim().strip_prefix("listening on http://");
    match (read, addr) {
        (Ok(()), Some(addr)) => Ok(Served {
            url: format!("http://{addr}/v1"),
            child,
            _config: file,
        }),
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "ollm serve did not start (it said {line:?}; its log: {})",
                log.display()
            )
        }
    }
}

/// The command that runs `ollm`: through `setpriv --pdeathsig TERM` where that works
/// (it execs `ollm`, so the child's id is serve's), else `ollm` itself.
fn serve_command(ollm: &Path) -> Command {
    let setpriv = Command::new("setpriv")
        .args(["--pdeathsig", "TERM", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if !setpriv {
        return Command::new(ollm);
    }
    let mut cmd = Command::new("setpriv");
    cmd.args(["--pdeathsig", "TERM"]).arg(ollm);
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_served_column_configures_serve_its_way() {
        let config = |name: &str| config_text(&Column::parse(name).unwrap());
        assert_eq!(config("served"), "");
        assert_eq!(
            config("served-with-tool-or-none"),
            "[serve]\ntool_or_none = true\n"
        );
        assert_eq!(
            config("served-with-tool-or-none+greedy-tool-turns"),
            "[serve]\ntool_or_none = true\ngreedy_tool_turns = true\n"
        );
        assert_eq!(
            config("served-with-tool-or-none+changes-on-request"),
            "[serve]\ntool_or_none = true\nread_only = [\"read_file\", \"list_dir\", \"search_text\"]\n"
        );
        assert_eq!(
            config("served-with-tool-or-none+routed-call"),
            "[serve]\ntool_or_none = true\nrouted_call = true\n"
        );
        assert!(Column::parse("served-with-tool-or-none+made-up").is_none());
        assert_eq!(
            config("served-without-repeat-guard"),
            "[coach]\noff = [\"repeat-guard\"]\n"
        );
        assert_eq!(
            config("served-without-key-hint+tools-hint"),
            "[coach]\noff = [\"key-hint\", \"tools-hint\"]\n"
        );
    }

    /// An executable script at `dir/name` with `body`.
    #[cfg(unix)]
    fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[cfg(unix)]
    #[test]
    fn a_serve_that_does_not_listen_is_a_harness_error_and_one_that_does_is_reached() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("serve.log");
        let broken = script(dir.path(), "broken", "echo 'no such provider' >&2; exit 2");
        let listening = script(
            dir.path(),
            "listening",
            "echo 'listening on http://127.0.0.1:4242'; exec sleep 60",
        );
        // A thread of another test that forks while a script is being written holds its
        // file open until it execs: starting the script may then fail with ETXTBSY.
        let retry = |path: &Path| {
            (0..5)
                .map(|_| start(path, "http://127.0.0.1:1/v1", "", &log))
                .find(|r| !r.as_ref().is_err_and(|e| format!("{e:#}").contains("busy")))
                .unwrap()
        };
        let err = retry(&broken).err().unwrap();
        assert!(format!("{err:#}").contains("did not start"), "{err:#}");
        let served = retry(&listening).unwrap();
        assert_eq!(served.url, "http://127.0.0.1:4242/v1");
        let pid = served.child.id();
        drop(served);
        let alive = Path::new(&format!("/proc/{pid}/status")).exists();
        assert!(!alive, "the serve process outlived its handle");
    }
}
