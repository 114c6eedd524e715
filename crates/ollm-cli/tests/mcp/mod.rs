//! `ollm run` with a real MCP server (`@modelcontextprotocol/server-filesystem`, installed
//! by `cargo xtask mcp-servers`) and the mock Ollama scripting the model's tool calls; and
//! `ollm mcp add/remove` on the config file.

use super::*;
use crate::servers::{Ollama, answer, chunk, tool_call};
use serde_json::{Value, json};
use std::io::{BufReader, Read};
use std::time::{Duration, Instant};
use test_utils::mock_ollama::Reply;

/// The filesystem server's entry point, from `$OLLM_MCP_SERVERS` or the cache.
fn filesystem_server() -> PathBuf {
    let dir = std::env::var_os("OLLM_MCP_SERVERS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ollm/mcp")))
        .expect("no HOME to find the MCP servers under");
    let entry = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        entry.is_file(),
        "the MCP test servers are not installed in {}: run `cargo xtask mcp-servers`",
        dir.display()
    );
    entry
}

/// A run's setup: an isolated `ollm`, a folder holding `notes.txt` for the server, and a
/// config with `[mcp_servers.fs]` (plus `extra` config text).
struct Setup {
    ollm: Ollm,
    root: tempfile::TempDir,
}

impl Setup {
    fn new(approve: &str, extra: &str) -> Self {
        let ollm = Ollm::new();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("notes.txt"), "port = 8080\n").unwrap();
        ollm.write_config(&format!(
            "[mcp_servers.fs]\ncommand = \"node\"\nargs = [{:?}, {:?}]\n{approve}\n{extra}",
            filesystem_server().display().to_string(),
            root.path().display().to_string(),
        ));
        Setup { ollm, root }
    }

    fn notes(&self) -> String {
        self.root.path().join("notes.txt").display().to_string()
    }

    /// Processes whose command line names this setup's folder (its MCP server).
    fn server_processes(&self) -> Vec<u32> {
        let marker = self.root.path().display().to_string();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&marker) {
                found.push(pid);
            }
        }
        found
    }

    /// Checks that the server's processes are gone (within a bound: a killed process
    /// takes a moment to be torn down).
    fn assert_no_orphans(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.server_processes().is_empty() {
            assert!(
                Instant::now() < deadline,
                "MCP server processes outlived ollm: {:?}",
                self.server_processes()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The tool message of the `n`th `/api/chat` request.
fn tool_message(s: &Ollama, n: usize) -> Value {
    let chats = s.mock.requests_to("/api/chat");
    let messages = chats[n].body["messages"].as_array().unwrap().clone();
    messages
        .into_iter()
        .rfind(|m| m["role"] == "tool")
        .expect("a tool message")
}

fn script_read(s: &Ollama, path: &str) {
    s.mock.script(
        "/api/chat",
        tool_call("fs__read_text_file", json!({"path": path})),
    );
    s.mock.script("/api/chat", answer(&["the port is 8080"]));
}

#[test]
fn a_call_reaches_the_server_and_its_result_the_next_request() {
    let setup = Setup::new("approve = [\"read_text_file\"]", "");
    let s = Ollama::start();
    script_read(&s, &setup.notes());
    let out = setup
        .ollm
        .run(&["--host", &s.mock.url(), "run", "qwen3:8b", "read notes"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "the port is 8080\n");
    let first = &s.mock.requests_to("/api/chat")[0].body;
    let offered: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(offered.contains(&"fs__read_text_file"), "{offered:?}");
    assert!(
        offered.contains(&"read_file"),
        "built-ins stay: {offered:?}"
    );
    assert_eq!(tool_message(&s, 1)["content"], "port = 8080\n");
    setup.assert_no_orphans();
}

#[test]
fn a_headless_run_denies_an_unapproved_mcp_tool() {
    let setup = Setup::new("", "");
    let s = Ollama::start();
    script_read(&s, &setup.notes());
    let out = setup
        .ollm
        .run(&["--host", &s.mock.url(), "run", "qwen3:8b", "read notes"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let content = tool_message(&s, 1)["content"].as_str().unwrap().to_owned();
    assert!(content.contains("denied"), "{content}");
    assert!(!content.contains("8080"), "{content}");
    let err = stderr(&out);
    assert_eq!(
        err.matches("fs__read_text_file needs approval").count(),
        1,
        "{err}"
    );
    // `--yes` approves it like any tool.
    let s = Ollama::start();
    script_read(&s, &setup.notes());
    let out = setup.ollm.run(&[
        "--host",
        &s.mock.url(),
        "run",
        "qwen3:8b",
        "--yes",
        "read notes",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(tool_message(&s, 1)["content"], "port = 8080\n");
}

#[test]
fn a_server_that_never_starts_is_reported_once_and_the_run_goes_on() {
    let setup = Setup::new(
        "approve = \"always\"",
        "[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );
    let s = Ollama::start();
    script_read(&s, &setup.notes());
    let out = setup
        .ollm
        .run(&["--host", &s.mock.url(), "run", "qwen3:8b", "read notes"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "the port is 8080\n", "stdout stays clean");
    let err = stderr(&out);
    assert_eq!(err.matches("\"broken\"").count(), 1, "{err}");
    assert_eq!(tool_message(&s, 1)["content"], "port = 8080\n");
    // `--no-tools` starts no server at all.
    let s = Ollama::start();
    let out = setup.ollm.run(&[
        "--host",
        &s.mock.url(),
        "run",
        "qwen3:8b",
        "--no-tools",
        "hi",
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(!stderr(&out).contains("broken"), "{}", stderr(&out));
}

#[test]
fn ctrl_c_mid_answer_stops_the_server_too() {
    let setup = Setup::new("", "");
    let s = Ollama::start();
    s.mock.script(
        "/api/chat",
        Reply::ndjson(&[chunk("first words")]).then_stall(),
    );
    let url = s.mock.url();
    let mut child = setup
        .ollm
        .command(&["--host", &url, "run", "qwen3:8b", "hi"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = [0u8; 5];
    out.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"first");
    assert!(
        !setup.server_processes().is_empty(),
        "the MCP server runs during the answer"
    );
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "ollm did not exit on SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    setup.assert_no_orphans();
}

/// Ctrl-C while a server is still starting: before, the default SIGINT action killed
/// `ollm` and left the server (its own process group) running.
#[test]
fn ctrl_c_while_a_server_starts_stops_it_and_exits_130() {
    let setup = Setup::new("", "");
    let root = setup.root.path().display().to_string();
    setup.ollm.write_config(&format!(
        "[mcp_servers.slow]\ncommand = \"node\"\nargs = [\"-e\", \"setTimeout(() => {{}}, 60000)\", {root:?}]\nstartup_timeout_secs = 60\n"
    ));
    let s = Ollama::start();
    let url = s.mock.url();
    let mut child = setup
        .ollm
        .command(&["--host", &url, "run", "qwen3:8b", "hi"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while setup.server_processes().is_empty() {
        assert!(Instant::now() < deadline, "the slow server never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "ollm did not exit on SIGINT");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    setup.assert_no_orphans();
    assert!(
        s.mock.requests_to("/api/chat").is_empty(),
        "the run did not go on"
    );
}

#[test]
fn add_and_remove_edit_the_config_file() {
    let o = Ollm::new();
    o.write_config("# mine\ndefault_provider = \"ollama\"\n");
    let out = o.run(&["mcp", "add", "fs", "--", "npx", "-y", "pkg", "/tmp"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = std::fs::read_to_string(o.config_path()).unwrap();
    assert!(text.starts_with("# mine\n"), "{text}");
    assert!(
        text.contains("[mcp_servers.fs]\ncommand = \"npx\""),
        "{text}"
    );
    // A second add of the same name is refused with exit 2.
    let out = o.run(&["mcp", "add", "fs", "--url", "http://127.0.0.1:1/mcp"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let out = o.run(&["mcp", "remove", "fs"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(o.config_path()).unwrap(),
        "# mine\ndefault_provider = \"ollama\"\n"
    );
    let out = o.run(&["mcp", "remove", "fs"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}
