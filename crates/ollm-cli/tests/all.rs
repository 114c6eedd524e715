//! End-to-end tests of the `ollm` binary: one test binary, one module per area.
//!
//! Every run is isolated: `OLLM_CONFIG` and `OLLM_DATA_DIR` point into a temporary
//! directory and the address variables are cleared, so nothing on the machine leaks in.
//! Tests against a server pass `--host http://127.0.0.1:PORT` to [`Ollm::run`], which is
//! all a loopback mock needs.

// Setup helpers outside `#[test]` functions panic on a broken test environment by design.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// A prompt as the user typed it: the content sent, without the working-folder line the
/// CLI puts before the conversation's first prompt in runs with tools.
fn typed(content: &str) -> &str {
    match content.strip_prefix("[Working folder: ") {
        Some(rest) => rest.split_once("]\n\n").map_or(content, |(_, typed)| typed),
        None => content,
    }
}

/// Put first after `run` in [`Ollm::run`]'s arguments: the run keeps the CLI's default
/// `tool-or-none` choice (see [`Ollm::command`]).
const ROUTED: &str = "(routed)";

/// `args`, with `--coach-off tool-or-none` after an `ollm run`'s `run`: the tests script
/// the model's replies request by request, and that rule's choice is a request of its
/// own. A run whose first argument after `run` is [`ROUTED`] keeps the rule.
fn unrouted<'a>(args: &[&'a str]) -> Vec<&'a str> {
    let Some(at) = args.iter().position(|a| *a == "run") else {
        return args.to_vec();
    };
    let (head, rest) = args.split_at(at + 1);
    match rest {
        [first, rest @ ..] if *first == ROUTED => [head, rest].concat(),
        _ => [head, &["--coach-off", "tool-or-none"], rest].concat(),
    }
}

/// An isolated environment to run the binary in.
struct Ollm {
    dir: tempfile::TempDir,
}

impl Ollm {
    fn new() -> Self {
        Ollm {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn config_path(&self) -> PathBuf {
        self.dir.path().join("config.toml")
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn write_config(&self, text: &str) {
        std::fs::write(self.config_path(), text).unwrap();
    }

    /// The environment of every run, piped or in tmux: (name, value), an empty value
    /// clearing the variable (ollm reads an empty variable as unset). One list, so the
    /// server tests and the terminal tests isolate a run the same way.
    fn environment(&self) -> Vec<(&'static str, String)> {
        let cleared = [
            "OLLAMA_HOST",
            "OLLM_HOST",
            "OLLM_PROVIDER",
            "OLLM_MODEL",
            "RUST_LOG",
        ];
        let mut vars = vec![
            ("OLLM_CONFIG", self.config_path().display().to_string()),
            ("OLLM_DATA_DIR", self.data_dir().display().to_string()),
            ("NO_COLOR", "1".to_owned()),
        ];
        vars.extend(cleared.map(|name| (name, String::new())));
        vars
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ollm"));
        cmd.args(unrouted(args));
        cmd.current_dir(self.dir.path());
        for (name, value) in self.environment() {
            if value.is_empty() {
                cmd.env_remove(name);
            } else {
                cmd.env(name, value);
            }
        }
        cmd
    }

    /// Runs `ollm ARGS` with `stdin` piped in (empty when `None`).
    fn run_with(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap();
        {
            let mut input = child.stdin.take().unwrap();
            if let Some(text) = stdin {
                input.write_all(text.as_bytes()).unwrap();
            }
        }
        child.wait_with_output().unwrap()
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with(args, &[], None)
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// A loopback port with nothing listening (so no test ever reaches a real local server).
/// A loopback port nothing listens on. A port bound and released (as this once was) is
/// free for the next test's mock to take, and a test expecting a refusal then reached
/// another test's mock and used up its replies (seen once under load): the ports below
/// 1024 are never handed out for port 0, so the discard port is tried first.
fn closed_port() -> u16 {
    let refused = |port: u16| std::net::TcpStream::connect(("127.0.0.1", port)).is_err();
    if refused(9) {
        return 9;
    }
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

mod usage {
    use super::*;

    #[test]
    fn bad_flags_and_unknown_commands_exit_2() {
        let o = Ollm::new();
        assert_eq!(code(&o.run(&["frobnicate"])), 2);
        assert_eq!(
            code(&o.run(&["run", "m", "--output-format", "yaml", "x"])),
            2
        );
        assert_eq!(code(&o.run(&["run", "m", "--max-turns", "0", "x"])), 2);
    }

    #[test]
    fn help_and_version_exit_0() {
        let o = Ollm::new();
        let out = o.run(&["--help"]);
        assert_eq!(code(&out), 0);
        assert!(stdout(&out).contains("run"));
        let out = o.run(&["--version"]);
        assert_eq!(code(&out), 0);
        assert_eq!(
            stdout(&out).trim(),
            format!("ollm {}", env!("CARGO_PKG_VERSION"))
        );
    }

    #[test]
    fn run_without_a_model_or_a_prompt_is_a_usage_error() {
        let o = Ollm::new();
        let out = o.run(&["run"]);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        // Piped but empty stdin: no prompt, and no terminal to chat on.
        let out = o.run_with(&["run", "m"], &[], Some(""));
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        let out = o.run(&["run", "m", "--session", "../escape", "hi"]);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
    }

    /// Issue 17: a quoted prompt in the model's place says what happened.
    #[test]
    fn a_prompt_taken_as_the_model_name_is_explained() {
        let o = Ollm::new();
        let out = o.run(&["run", "hello there"]);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("\"hello there\" was taken as the model name"),
            "{}",
            stderr(&out)
        );
    }

    #[test]
    fn unknown_provider_and_broken_config_exit_2() {
        let o = Ollm::new();
        let out = o.run(&["--provider", "nope", "list"]);
        assert_eq!(code(&out), 2);
        assert!(stderr(&out).contains("nope"));
        o.write_config("[providers.x]\nkind = \"grpc\"\n");
        let out = o.run(&["list"]);
        assert_eq!(code(&out), 2);
        assert!(stderr(&out).contains("config.toml"), "{}", stderr(&out));
    }
}

mod config {
    use super::*;

    #[test]
    fn path_honours_ollm_config_and_the_flag() {
        let o = Ollm::new();
        let out = o.run(&["config", "path"]);
        assert_eq!(stdout(&out).trim(), o.config_path().display().to_string());
        let out = o.run(&["--config", "/x/y.toml", "config", "path"]);
        assert_eq!(stdout(&out).trim(), "/x/y.toml");
    }

    #[test]
    fn show_settles_precedence_and_masks_secrets() {
        let o = Ollm::new();
        o.write_config(
            r#"
default_provider = "lab"
[providers.lab]
kind = "openai"
base_url = "http://127.0.0.1:8000/v1"
api_key_env = "OLLM_E2E_KEY"
default_model = "small"
"#,
        );
        let out = o.run_with(
            &["config", "show"],
            &[("OLLM_E2E_KEY", "sk-very-secret")],
            None,
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("provider = \"lab\""), "{text}");
        assert!(
            text.contains("base_url = \"http://127.0.0.1:8000/v1\""),
            "{text}"
        );
        assert!(text.contains("model = \"small\""), "{text}");
        assert!(!text.contains("sk-very-secret"), "{text}");
        // Environment over file, flag over environment.
        let out = o.run_with(
            &["--host", "127.0.0.1:9001", "config", "show"],
            &[
                ("OLLM_PROVIDER", "ollama"),
                ("OLLAMA_HOST", "127.0.0.1:9000"),
            ],
            None,
        );
        let text = stdout(&out);
        assert!(text.contains("provider = \"ollama\""), "{text}");
        assert!(
            text.contains("base_url = \"http://127.0.0.1:9001\""),
            "{text}"
        );
    }
}

mod generated {
    use super::*;

    #[test]
    fn completions_and_man_page() {
        let o = Ollm::new();
        for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
            let out = o.run(&["completions", shell]);
            assert_eq!(code(&out), 0, "{shell}");
            assert!(stdout(&out).contains("ollm"), "{shell}");
        }
        let out = o.run(&["man"]);
        assert_eq!(code(&out), 0);
        assert!(stdout(&out).starts_with(".ie"), "{}", stdout(&out));
        assert!(stdout(&out).contains("ollm"));
        // Issue 17: the page covers running, the chat's commands, the environment and the
        // exit codes.
        for want in [
            "ollm run MODEL",
            "/set parameter",
            "OLLAMA_HOST",
            "Exit codes",
            "130",
        ] {
            assert!(stdout(&out).contains(want), "{want}: {}", stdout(&out));
        }
    }
}

mod sessions {
    use super::*;

    fn write_session(data: &Path, name: &str, text: &str) -> PathBuf {
        let dir = data.join("sessions");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.jsonl"));
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn list_shows_saved_sessions() {
        let o = Ollm::new();
        let out = o.run(&["sessions", "list"]);
        assert_eq!(code(&out), 0);
        assert!(stdout(&out).starts_with("no sessions"));
        write_session(&o.data_dir(), "alpha", "");
        write_session(&o.data_dir(), "beta", "");
        let out = o.run(&["sessions", "list"]);
        let names: Vec<String> = stdout(&out)
            .lines()
            .map(|l| l.split('\t').next().unwrap().to_owned())
            .collect();
        assert_eq!(names, vec!["alpha", "beta"]);
    }

    #[test]
    fn a_damaged_session_is_moved_aside_and_reported() {
        let o = Ollm::new();
        let path = write_session(&o.data_dir(), "bad", "not json\n{}\n");
        let host = format!("127.0.0.1:{}", closed_port());
        let out = o.run(&["--host", &host, "run", "m", "--session", "bad", "hello"]);
        assert!(stderr(&out).contains("damaged"), "{}", stderr(&out));
        let kept: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("bad.jsonl.damaged-"))
            .collect();
        assert_eq!(kept.len(), 1);
        let aside = path.parent().unwrap().join(&kept[0]);
        assert_eq!(std::fs::read_to_string(aside).unwrap(), "not json\n{}\n");
    }
}

mod server {
    use super::*;

    #[test]
    fn version_prints_the_client_even_without_a_server() {
        let o = Ollm::new();
        let host = format!("127.0.0.1:{}", closed_port());
        let out = o.run(&["--host", &host, "version"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(
            stdout(&out).lines().next().unwrap(),
            format!("ollm version {}", env!("CARGO_PKG_VERSION"))
        );
        assert!(stderr(&out).contains("warning"), "{}", stderr(&out));
    }
}

mod servers;

mod mcp;

mod terminal {
    //! The interactive chat through a real pseudo-terminal (tmux on a private socket).
    use super::*;
    use std::time::{Duration, Instant};

    struct Tmux {
        socket: String,
    }

    impl Tmux {
        fn start(o: &Ollm, args: &[&str]) -> Self {
            let socket = format!(
                "ollm-test-{}-{}",
                std::process::id(),
                o.dir.path().file_name().unwrap().to_string_lossy()
            );
            let mut line = vec![env!("CARGO_BIN_EXE_ollm").to_owned()];
            line.extend(unrouted(args).iter().map(|a| (*a).to_owned()));
            let mut tmux = Command::new("tmux");
            tmux.args(["-L", &socket, "-f", "/dev/null", "new-session", "-d"])
                .args(["-x", "120", "-y", "40", "-c"])
                .arg(o.dir.path());
            for (name, value) in o.environment() {
                // A chat without `--host` must not find a server by chance.
                let value = match name {
                    "OLLM_HOST" => format!("127.0.0.1:{}", closed_port()),
                    _ => value,
                };
                tmux.args(["-e", &format!("{name}={value}")]);
            }
            let status = tmux
                .args(line)
                .status()
                .expect("tmux must be installed for the terminal tests");
            assert!(status.success());
            Tmux { socket }
        }

        fn screen(&self) -> String {
            let out = Command::new("tmux")
                .args(["-L", &self.socket, "capture-pane", "-p", "-S", "-200"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        }

        /// The screen with its styling as escape sequences (`capture-pane -e`).
        fn styled_screen(&self) -> String {
            let out = Command::new("tmux")
                .args(["-L", &self.socket, "capture-pane", "-p", "-e", "-S", "-200"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        }

        fn send(&self, keys: &[&str]) {
            let status = Command::new("tmux")
                .args(["-L", &self.socket, "send-keys"])
                .args(keys)
                .status()
                .unwrap();
            assert!(status.success());
        }

        /// Waits until the screen satisfies `pred` (polling; fails after 20 s).
        fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let screen = self.screen();
                if pred(&screen) {
                    return screen;
                }
                assert!(
                    Instant::now() < deadline,
                    "timed out waiting for {what}; screen:\n{screen}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }

        /// Waits until `pred` holds and the editor shows a fresh prompt again, so the next
        /// keys are read by the line editor rather than dropped while it resets the terminal.
        fn wait_for_prompt(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
            self.wait_for(what, |s| {
                pred(s) && s.lines().rev().find(|l| !l.trim().is_empty()) == Some(">>>")
            })
        }

        fn alive(&self) -> bool {
            Command::new("tmux")
                .args(["-L", &self.socket, "has-session"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        }
    }

    impl Drop for Tmux {
        fn drop(&mut self) {
            let _ = Command::new("tmux")
                .args(["-L", &self.socket, "kill-server"])
                .stderr(Stdio::null())
                .status();
        }
    }

    #[test]
    fn slash_commands_work_and_bye_leaves() {
        let o = Ollm::new();
        let t = Tmux::start(&o, &["run", "tiny-model"]);
        t.wait_for_prompt("the banner and prompt", |s| {
            s.contains("ollm chat with tiny-model") && s.contains(">>>")
        });
        t.send(&["/help", "Enter"]);
        t.wait_for_prompt("the help", |s| {
            s.contains("/clear") && s.contains("Commands:")
        });
        t.send(&["/think high", "Enter"]);
        t.wait_for_prompt("the think level", |s| s.contains("thinking: high"));
        t.send(&["/status", "Enter"]);
        t.wait_for_prompt("the status", |s| {
            s.contains("model:    tiny-model") && s.contains("messages: 0")
        });
        // Ctrl-C at the prompt drops the line and keeps the chat.
        t.send(&["half a thought"]);
        t.wait_for("the typed text", |s| s.contains("half a thought"));
        t.send(&["C-c"]);
        t.wait_for_prompt("a fresh prompt", |s| s.contains("half a thought"));
        t.send(&["/status", "Enter"]);
        t.wait_for_prompt("the chat to survive Ctrl-C", |s| {
            s.matches("messages: 0").count() == 2
        });
        t.send(&["/clear", "Enter"]);
        t.wait_for_prompt("the clear", |s| s.contains("conversation cleared"));
        t.send(&["/model other", "Enter"]);
        t.wait_for_prompt("the model switch", |s| s.contains("model: other"));
        t.send(&["/bye", "Enter"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while t.alive() {
            assert!(Instant::now() < deadline, "ollm did not exit on /bye");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Issue 35: in a chat, a question that needed the coach's answer nudge (a call, then
    /// the same call again, answered from the earlier result) leaves no nudge behind: the
    /// later questions' requests carry none, still offer the tools, and the model's call
    /// runs. Against the mock OpenAI-compatible server, which checks every request.
    #[test]
    fn a_nudge_stays_with_the_question_that_needed_it() {
        use serde_json::{Value, json};
        use servers::OpenAi;
        use test_utils::mock_openai::Reply;
        let s = OpenAi::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("notes.txt"), "port = 8088\n").unwrap();
        let call = |id: &str, name: &str, args: &str| {
            let delta = json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id,
                "type": "function", "function": {"name": name, "arguments": args}}]});
            let chunk = json!({"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}]});
            Reply::sse()
                .data(chunk)
                .finish("tool_calls")
                .usage(10, 5)
                .done()
                .reply()
        };
        let say = |text: &str| {
            Reply::sse()
                .content(text)
                .finish("stop")
                .usage(10, 5)
                .done()
                .reply()
        };
        s.mock.push_reply(call("c1", "list_dir", r#"{"path":"."}"#));
        s.mock.push_reply(call("c2", "list_dir", r#"{"path":"."}"#));
        s.mock.push_reply(say("There is a notes file."));
        s.mock
            .push_reply(call("c3", "read_file", r#"{"path":"notes.txt"}"#));
        s.mock.push_reply(say("The app uses port 8088."));
        s.mock.push_reply(say("You are welcome."));
        let url = s.mock.base_url();
        let t = Tmux::start(
            &o,
            &["--provider", "openai", "--host", &url, "run", "mock-model"],
        );
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with mock-model"));
        let asked = [
            ("hi! what's in this folder?", "There is a notes file."),
            ("which port does the app use?", "The app uses port 8088."),
            ("thanks", "You are welcome."),
        ];
        for (question, answer) in asked {
            t.send(&[question, "Enter"]);
            t.wait_for_prompt(answer, |s| s.contains(answer));
        }
        let screen = t.screen();
        assert!(
            screen.contains("warning: the model repeated a call; answered from the earlier result"),
            "{screen}"
        );
        let requests = s.mock.requests();
        assert_eq!(requests.len(), 6, "{requests:#?}");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
        // After the listing, the answer nudge asks from the results above.
        let config = ollm_core::CoachConfig::default();
        let nudges = [
            ollm_core::Nudge::AnswerFromResults,
            ollm_core::Nudge::Answer,
        ];
        let nudges = nudges.map(|n| n.text(&config));
        let carries = |body: &Value| {
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| nudges.iter().any(|n| m["content"] == n.as_str()))
        };
        let offers = |body: &Value| {
            body.get("tools")
                .is_some_and(|t| !t.as_array().unwrap().is_empty())
        };
        // The question that needed it: its third request asks for the answer from the
        // listing, no tools.
        let said = requests[2]["messages"].as_array().unwrap();
        assert!(
            said.iter().any(|m| m["content"] == nudges[0].as_str()),
            "{said:?}"
        );
        assert!(
            carries(&requests[2]) && !offers(&requests[2]),
            "{}",
            requests[2]
        );
        // Every later request: no nudge, the tools on offer; the model's call ran.
        for body in &requests[3..] {
            assert!(!carries(body), "{body}");
            assert!(offers(body), "{body}");
        }
        let last = requests[5]["messages"].as_array().unwrap();
        assert!(
            last.iter()
                .any(|m| m["role"] == "tool" && m["content"].as_str().unwrap().contains("8088")),
            "{last:#?}"
        );
    }

    /// A prompt and its answer, `/clear`, and Ctrl-C while an answer streams, against the
    /// mock Ollama: the chat survives the cancellation and answers the next prompt.
    #[test]
    fn answers_clear_and_ctrl_c_during_an_answer() {
        use servers::{Ollama, answer, chunk};
        use test_utils::mock_ollama::Reply;
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        s.mock
            .script("/api/chat", answer(&["the first", " answer"]));
        t.send(&["first question", "Enter"]);
        t.wait_for_prompt("the first answer", |s| s.contains("the first answer"));
        t.send(&["/status", "Enter"]);
        t.wait_for_prompt("two messages", |s| s.contains("messages: 2"));
        t.send(&["/clear", "Enter"]);
        t.wait_for_prompt("the clear", |s| s.contains("conversation cleared"));

        // An answer that streams a little and then stalls until the client hangs up.
        s.mock.script(
            "/api/chat",
            Reply::ndjson(&[chunk("streaming words")]).then_stall(),
        );
        t.send(&["second question", "Enter"]);
        t.wait_for("the answer to start", |s| s.contains("streaming words"));
        t.send(&["C-c"]);
        t.wait_for_prompt("the prompt after Ctrl-C", |s| s.contains("cancelled"));
        let chats: Vec<usize> = s
            .mock
            .requests()
            .iter()
            .enumerate()
            .filter(|(_, r)| r.path == "/api/chat")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(chats.len(), 2);
        s.rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), s.mock.wait_closed_early(chats[1]))
                .await
                .expect("the cancelled stream's connection is closed");
        });

        s.mock.script("/api/chat", answer(&["still here"]));
        t.send(&["third question", "Enter"]);
        t.wait_for_prompt("the answer after Ctrl-C", |s| s.contains("still here"));
        assert!(t.alive());
        let third = s.mock.requests_to("/api/chat")[2].body["messages"].clone();
        let users: Vec<&str> = third
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        // `/clear` forgot the first exchange.
        assert!(!users.contains(&"first question"), "{third}");
        assert_eq!(users.last(), Some(&"third question"), "{third}");
        // NO_COLOR: answers, usage lines and the cancellation mark are unstyled.
        let styled = t.styled_screen();
        assert!(!styled.contains('\x1b'), "{styled:?}");
        t.send(&["/bye", "Enter"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while t.alive() {
            assert!(Instant::now() < deadline, "ollm did not exit on /bye");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Issue 11: `/status` says the window and where it came from; `/compact` summarises
    /// the older turns now, the next request carries the summary, and the session
    /// records it.
    #[test]
    fn compact_summarises_now_and_status_shows_the_window() {
        use servers::{Ollama, answer};
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let args = ["--host", &url, "run", "qwen3:8b", "--no-tools"];
        let t = Tmux::start(
            &o,
            &[&args[..], &["--context-length", "240", "--session", "c"]].concat(),
        );
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        t.send(&["/compact", "Enter"]);
        t.wait_for_prompt("nothing to compact", |s| s.contains("nothing to compact"));
        let blah = "blah ".repeat(80);
        for n in 1..=2 {
            s.mock
                .script("/api/chat", answer(&[&format!("answer {n} {blah}")]));
            t.send(&[&format!("question {n}"), "Enter"]);
            t.wait_for_prompt("an answer", |s| s.contains(&format!("answer {n} blah")));
        }
        t.send(&["/status", "Enter"]);
        t.wait_for_prompt("the status", |s| {
            s.contains("window:   240 tokens (--context-length)")
                && s.contains("compact:  at 80% of the window")
        });
        s.mock
            .script("/api/chat", answer(&["The user asked two questions."]));
        t.send(&["/compact", "Enter"]);
        t.wait_for_prompt("the compaction", |s| {
            s.contains("compacted: 2 turns summarised")
        });
        s.mock.script("/api/chat", answer(&["third answer"]));
        t.send(&["question 3", "Enter"]);
        t.wait_for_prompt("the third answer", |s| s.contains("third answer"));
        let chats = s.mock.requests_to("/api/chat");
        assert_eq!(chats.len(), 4);
        let third = chats[3].body["messages"].to_string();
        assert!(third.contains("The user asked two questions."), "{third}");
        assert!(!third.contains("answer 1"), "{third}");
        let session = std::fs::read_to_string(o.data_dir().join("sessions/c.jsonl")).unwrap();
        assert!(session.contains(r#""type":"compact""#), "{session}");
        t.send(&["/bye", "Enter"]);
    }

    /// A tool call that needs approval asks on the terminal: `y` runs it, `n` denies it.
    #[test]
    fn approval_is_asked_on_the_terminal() {
        use servers::{Ollama, answer, tool_call};
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        let call = |name: &str| {
            tool_call(
                "write_file",
                serde_json::json!({"path": name, "content": "from the model"}),
            )
        };
        s.mock.script("/api/chat", call("yes.txt"));
        s.mock.script("/api/chat", answer(&["wrote it"]));
        t.send(&["write yes", "Enter"]);
        t.wait_for("the approval question", |s| s.contains("[y] allow once"));
        // NO_COLOR (set for every terminal test) keeps the question unstyled too.
        let styled = t.styled_screen();
        let question = styled.lines().find(|l| l.contains("? write_file")).unwrap();
        assert!(!question.contains('\x1b'), "{question:?}");
        t.send(&["y", "Enter"]);
        t.wait_for_prompt("the answer after approval", |s| s.contains("wrote it"));
        assert_eq!(
            std::fs::read_to_string(o.dir.path().join("yes.txt")).unwrap(),
            "from the model"
        );

        s.mock.script("/api/chat", call("no.txt"));
        s.mock.script("/api/chat", answer(&["did not write"]));
        t.send(&["write no", "Enter"]);
        t.wait_for("the second question", |s| {
            s.matches("[y] allow once").count() == 2
        });
        t.send(&["n", "Enter"]);
        t.wait_for_prompt("the answer after denial", |s| s.contains("did not write"));
        assert!(!o.dir.path().join("no.txt").exists());
        let chats = s.mock.requests_to("/api/chat");
        let last = chats.last().unwrap().body["messages"].as_array().unwrap();
        assert_eq!(
            last.last().unwrap()["content"],
            "Error: denied by the user",
            "{last:?}"
        );
        t.send(&["/bye", "Enter"]);
    }

    /// `/save` writes the conversation as a session, `/load` brings it back into the chat.
    #[test]
    fn save_and_load_a_session_in_the_chat() {
        use servers::{Ollama, answer};
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        s.mock.script("/api/chat", answer(&["remembered"]));
        t.send(&["keep this", "Enter"]);
        t.wait_for_prompt("the answer", |s| s.contains("remembered"));
        t.send(&["/save kept", "Enter"]);
        t.wait_for_prompt("the save", |s| s.contains("kept.jsonl"));
        assert!(o.data_dir().join("sessions/kept.jsonl").exists());
        // The chat continues in the saved session, so a `/clear` now would be recorded in
        // `kept`; move on to another session first.
        t.send(&["/save scratch", "Enter"]);
        t.wait_for_prompt("the second save", |s| s.contains("scratch.jsonl"));
        t.send(&["/clear", "Enter"]);
        t.wait_for_prompt("the clear", |s| s.contains("conversation cleared"));
        t.send(&["/load kept", "Enter"]);
        t.wait_for_prompt("the load", |s| s.contains("loaded session \"kept\""));
        t.send(&["/status", "Enter"]);
        t.wait_for_prompt("the loaded messages", |s| s.contains("messages: 2"));
        t.send(&["and then?", "Enter"]);
        t.wait_for_prompt("the next answer", |s| s.contains("Hello from mock"));
        let chats = s.mock.requests_to("/api/chat");
        let users: Vec<&str> = chats[1].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| typed(m["content"].as_str().unwrap()))
            .collect();
        assert_eq!(users, ["keep this", "and then?"]);
        t.send(&["/bye", "Enter"]);
        let out = o.run(&["sessions", "list"]);
        let listed = stdout(&out);
        let names: Vec<&str> = listed
            .lines()
            .map(|l| l.split('\t').next().unwrap())
            .collect();
        assert_eq!(names, ["kept", "scratch"], "{listed}");
    }

    /// Issue 17: `/save` is a snapshot (a later `/clear` does not reach it), `/save` over an
    /// existing session refuses without `--force`, and `/load` of an unknown name is an error.
    #[test]
    fn save_is_a_snapshot_and_load_refuses_unknown_names() {
        use servers::{Ollama, answer};
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        s.mock.script("/api/chat", answer(&["remembered"]));
        t.send(&["keep this", "Enter"]);
        t.wait_for_prompt("the answer", |s| s.contains("remembered"));
        t.send(&["/save first", "Enter"]);
        t.wait_for_prompt("the save", |s| s.contains("first.jsonl"));
        t.send(&["/clear", "Enter"]);
        t.wait_for_prompt("the clear", |s| s.contains("conversation cleared"));
        t.send(&["/save first", "Enter"]);
        t.wait_for_prompt("the refusal", |s| {
            s.contains("`/save first --force` replaces it")
        });
        t.send(&["/load first", "Enter"]);
        t.wait_for_prompt("the load", |s| {
            s.contains("loaded session \"first\" (2 messages)")
        });
        // Loading shows the last exchange.
        t.wait_for_prompt("the last exchange", |s| s.contains(">>> keep this"));
        t.send(&["/load nosuch", "Enter"]);
        t.wait_for_prompt("the unknown session", |s| {
            s.contains("error: no session named \"nosuch\"")
        });
        assert!(!o.data_dir().join("sessions/nosuch.jsonl").exists());
        t.send(&["/status", "Enter"]);
        t.wait_for_prompt("the loaded messages kept", |s| s.contains("messages: 2"));
        t.send(&["/bye", "Enter"]);
    }

    /// Issue 17: `/set parameter` reaches the wire, `/set system` leads the messages, and
    /// `/show` reads them back, as in `ollama run`.
    #[test]
    fn set_parameter_and_system_reach_the_wire() {
        use servers::{Ollama, answer};
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        t.send(&["/set parameter temperature 0.2", "Enter"]);
        t.wait_for_prompt("the parameter", |s| {
            s.contains("set parameter temperature to 0.2")
        });
        t.send(&["/set parameter top_k 7", "Enter"]);
        t.wait_for_prompt("the second parameter", |s| s.contains("top_k to 7"));
        t.send(&["/set system answer in French", "Enter"]);
        t.wait_for_prompt("the system", |s| s.contains("set system message"));
        t.send(&["/show parameters", "Enter"]);
        t.wait_for_prompt("the parameters", |s| s.contains("temperature     0.2"));
        s.mock.script("/api/chat", answer(&["bonjour"]));
        t.send(&["hello", "Enter"]);
        t.wait_for_prompt("the answer", |s| s.contains("bonjour"));
        let body = &s.mock.requests_to("/api/chat")[0].body;
        assert_eq!(body["options"]["temperature"], 0.2, "{body}");
        assert_eq!(body["options"]["top_k"], 7, "{body}");
        assert_eq!(
            body["messages"][0],
            serde_json::json!({"role": "system", "content": "answer in French"})
        );
        // `/model NAME` asks the server first: a model it lacks is refused.
        t.send(&["/model nosuch", "Enter"]);
        t.wait_for_prompt("the refused model", |s| {
            s.contains("the model stays qwen3:8b")
        });
        t.send(&["/model", "Enter"]);
        t.wait_for_prompt("the model kept", |s| s.contains("model: qwen3:8b"));
        t.send(&["/bye", "Enter"]);
    }

    /// Issue 17: the chat checks the server before the first prompt, and an OpenAI-style
    /// address with the default provider says which flag is missing.
    #[test]
    fn a_v1_address_with_the_ollama_provider_names_the_fix() {
        use servers::Ollama;
        let s = Ollama::start();
        let o = Ollm::new();
        let url = format!("{}/v1", s.mock.url());
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the hint before the prompt", |s| {
            s.contains("this looks like an OpenAI-compatible server: add --provider openai")
        });
        t.send(&["/bye", "Enter"]);
    }

    /// Issue 17: a transient status line says what the chat waits for, with the seconds,
    /// and is erased when the wait ends.
    #[test]
    fn the_status_line_appears_and_clears() {
        use servers::{Ollama, chunk};
        use test_utils::mock_ollama::Reply;
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        // A server that accepts the request and then says nothing.
        s.mock.script("/api/chat", Reply::ndjson(&[]).then_stall());
        t.send(&["slow one", "Enter"]);
        t.wait_for("the status line", |s| {
            s.lines()
                .any(|l| l.contains("waiting for qwen3:8b…") && l.trim_end().ends_with('s'))
        });
        t.send(&["C-c"]);
        let screen = t.wait_for_prompt("the prompt after Ctrl-C", |s| s.contains("cancelled"));
        assert!(!screen.contains("waiting for"), "{screen}");
        // Text that starts to stream erases the line too.
        s.mock.script(
            "/api/chat",
            Reply::ndjson(&[chunk("first words")]).then_stall(),
        );
        t.send(&["again", "Enter"]);
        let screen = t.wait_for("the answer", |s| s.contains("first words"));
        assert!(!screen.contains("waiting for"), "{screen}");
        t.send(&["C-c"]);
        t.wait_for_prompt("the prompt", |s| s.matches("cancelled").count() == 2);
        t.send(&["/bye", "Enter"]);
    }

    /// Issue 17: the tool line, then the question, then the answer on the question's line,
    /// every time (20 approvals in a row).
    #[test]
    fn the_approval_order_is_always_the_same() {
        use servers::{Ollama, answer, tool_call};
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        for i in 0..20 {
            let file = format!("f{i}.txt");
            s.mock.script(
                "/api/chat",
                tool_call(
                    "write_file",
                    serde_json::json!({"path": file, "content": "x"}),
                ),
            );
            s.mock.script("/api/chat", answer(&[&format!("done {i}")]));
            t.send(&["/clear", "Enter"]);
            t.wait_for_prompt("the clear", |s| {
                s.matches("conversation cleared").count() == i + 1
            });
            t.send(&[&format!("write {i}"), "Enter"]);
            t.wait_for("the question", |s| {
                s.contains(&format!("? write_file {file}"))
            });
            t.send(&["y", "Enter"]);
            let screen = t.wait_for_prompt("the answer", |s| s.contains(&format!("done {i}")));
            let lines: Vec<&str> = screen.lines().collect();
            let at = |pred: &dyn Fn(&str) -> bool| lines.iter().rposition(|l| pred(l));
            let tool = at(&|l| l.starts_with("⚙ write_file") && l.contains(&file)).unwrap();
            let question = at(&|l| l.starts_with(&format!("? write_file {file}"))).unwrap();
            let answer = at(&|l| l.contains("[N] deny:")).unwrap();
            assert!(tool < question && question < answer, "round {i}:\n{screen}");
            assert!(
                lines[answer].trim_end().ends_with("deny: y"),
                "round {i}:\n{screen}"
            );
        }
        t.send(&["/bye", "Enter"]);
    }

    /// Issue 17: an answer of thousands of backticks streams as it arrives.
    #[test]
    fn a_backtick_flood_still_streams() {
        use servers::{Ollama, chunk};
        use test_utils::mock_ollama::Reply;
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        // Numbered runs, so the flood is no loop the runaway guard would stop (a run of
        // 512 identical characters is one: see ollm-core's chat/runaway.rs).
        let mut parts = vec![chunk("ticks: ")];
        parts.extend((10..70).map(|i| chunk(&format!("{i}{}", "`".repeat(50)))));
        // The stream never ends: what shows was released while it was still running.
        s.mock
            .script("/api/chat", Reply::ndjson(&parts).then_stall());
        t.send(&["flood", "Enter"]);
        t.wait_for("the flood on screen", |s| s.matches('`').count() >= 3000);
        t.send(&["C-c"]);
        t.wait_for_prompt("the prompt", |s| s.contains("cancelled"));
        t.send(&["/bye", "Enter"]);
    }

    /// Issue 14: `/image` refuses a model without `vision` and a file that is no image,
    /// says what it attached, and the image goes with the next prompt only.
    #[test]
    fn image_attaches_to_the_next_prompt_for_vision_models() {
        use servers::{Ollama, answer};
        use test_utils::mock_ollama::MockModel;
        let s = Ollama::start();
        s.mock
            .add_model(MockModel::new("llava:7b").with(&["vision"]));
        let o = Ollm::new();
        std::fs::write(
            o.dir.path().join("my photo.png"),
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        )
        .unwrap();
        std::fs::write(o.dir.path().join("notes.png"), "text").unwrap();
        let url = s.mock.url();
        let t = Tmux::start(&o, &["--host", &url, "run", "qwen3:8b", "--no-tools"]);
        t.wait_for_prompt("the prompt", |s| s.contains("ollm chat with qwen3:8b"));
        t.send(&["/image 'my photo.png'", "Enter"]);
        t.wait_for_prompt("the refusal", |s| {
            s.contains("error: qwen3:8b cannot read images")
        });
        t.send(&["/model llava:7b", "Enter"]);
        t.wait_for_prompt("the switch", |s| s.contains("model: llava:7b"));
        t.send(&["/image notes.png", "Enter"]);
        t.wait_for_prompt("the bad file", |s| {
            s.contains("notes.png is not a PNG, JPEG, GIF or WebP image")
        });
        t.send(&["/image my\\ photo.png", "Enter"]);
        t.wait_for_prompt("the attachment", |s| {
            s.contains("attached my photo.png (image/png, 16 B) to your next prompt")
        });
        s.mock.script("/api/chat", answer(&["a tiny png"]));
        t.send(&["what is it?", "Enter"]);
        t.wait_for_prompt("the answer", |s| s.contains("a tiny png"));
        t.send(&["and now?", "Enter"]);
        t.wait_for_prompt("the second answer", |s| s.contains("Hello from mock"));
        let chats = s.mock.requests_to("/api/chat");
        let images = |n: usize| -> Vec<serde_json::Value> {
            chats[n].body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m.get("images").cloned().unwrap_or_default())
                .collect()
        };
        let png = serde_json::json!(["iVBORw0KGgoAAAANSUhEUg=="]);
        assert_eq!(images(0), std::slice::from_ref(&png));
        // The chat's history keeps the image on its prompt; the new prompt has none.
        assert_eq!(
            images(1),
            [png, serde_json::Value::Null, serde_json::Value::Null]
        );
        t.send(&["/bye", "Enter"]);
    }

    #[test]
    fn ctrl_d_leaves_and_history_is_saved() {
        let o = Ollm::new();
        let t = Tmux::start(&o, &["run", "tiny-model"]);
        t.wait_for_prompt("the prompt", |s| s.contains(">>>"));
        t.send(&["/tools", "Enter"]);
        t.wait_for_prompt("the tool list", |s| {
            s.contains("read_file") && s.contains("run_command") && s.contains("approval: ")
        });
        t.send(&["C-d"]);
        let deadline = Instant::now() + Duration::from_secs(20);
        while t.alive() {
            assert!(Instant::now() < deadline, "ollm did not exit on Ctrl-D");
            std::thread::sleep(Duration::from_millis(50));
        }
        let history = std::fs::read_to_string(o.data_dir().join("history.txt")).unwrap();
        assert!(history.contains("/tools"), "{history}");
    }
}
