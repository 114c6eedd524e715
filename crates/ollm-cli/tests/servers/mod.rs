//! The binary end to end against the mock Ollama and the mock OpenAI-compatible server:
//! one-shot text, the JSON formats, tool approval, pull, errors and their exit codes,
//! Ctrl-C, sessions and the model commands.

use super::*;
use serde_json::{Value, json};
use std::io::{BufReader, Read};
use std::process::Output;
use std::time::{Duration, Instant};
use test_utils::mock_ollama::{MockOllama, Reply};
use test_utils::mock_openai::{self, MockOpenAi};

/// A mock Ollama served by its own runtime (the binary runs as a child process).
pub(crate) struct Ollama {
    pub(crate) mock: MockOllama,
    pub(crate) rt: tokio::runtime::Runtime,
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

impl Ollama {
    pub(crate) fn start() -> Self {
        let rt = runtime();
        let mock = rt.block_on(MockOllama::start()).unwrap();
        Ollama { mock, rt }
    }
}

/// A mock OpenAI-compatible server served by its own runtime.
pub(crate) struct OpenAi {
    pub(crate) mock: MockOpenAi,
    _rt: tokio::runtime::Runtime,
}

impl OpenAi {
    pub(crate) fn start() -> Self {
        let rt = runtime();
        let mock = rt.block_on(MockOpenAi::start()).unwrap();
        OpenAi { mock, _rt: rt }
    }
}

/// What one run of `ollm` printed and how it exited.
pub(crate) struct Ran {
    pub(crate) code: i32,
    pub(crate) out: String,
    pub(crate) err: String,
}

impl From<Output> for Ran {
    fn from(o: Output) -> Self {
        Ran {
            code: code(&o),
            out: stdout(&o),
            err: stderr(&o),
        }
    }
}

impl Ran {
    /// Asserts a zero exit, showing stderr when it is not.
    pub(crate) fn ok(&self) -> &Self {
        assert_eq!(self.code, 0, "{}", self.err);
        self
    }
}

/// The setup every test shares: a mock server `s`, an isolated environment `o`, and
/// `ollm` run against that server (the address flags added by [`Case::run`]).
pub(crate) struct Case<S> {
    pub(crate) s: S,
    pub(crate) o: Ollm,
}

impl<S> Case<S> {
    /// Runs `ollm ARGS` with no address added (commands that need no server).
    pub(crate) fn bare(&self, args: &[&str]) -> Ran {
        self.o.run(args).into()
    }
}

impl Case<Ollama> {
    pub(crate) fn ollama() -> Self {
        Case {
            s: Ollama::start(),
            o: Ollm::new(),
        }
    }

    pub(crate) fn mock(&self) -> &MockOllama {
        &self.s.mock
    }

    /// The flags that point `ollm` at the mock.
    fn address(&self) -> Vec<String> {
        vec!["--host".into(), self.s.mock.url()]
    }

    /// Runs `ollm --host MOCK ARGS`.
    pub(crate) fn run(&self, args: &[&str]) -> Ran {
        self.run_with(args, &[], None)
    }

    /// Runs `ollm --host MOCK ARGS` with extra environment and `stdin` piped in.
    pub(crate) fn run_with(&self, args: &[&str], env: &[(&str, &str)], stdin: Option<&str>) -> Ran {
        let address = self.address();
        let mut all: Vec<&str> = address.iter().map(String::as_str).collect();
        all.extend_from_slice(args);
        self.o.run_with(&all, env, stdin).into()
    }
}

/// Nothing listening: the address of a closed loopback port.
pub(crate) struct Closed(u16);

impl Case<Closed> {
    fn down() -> Self {
        Case {
            s: Closed(closed_port()),
            o: Ollm::new(),
        }
    }

    /// Runs `ollm --host 127.0.0.1:PORT ARGS` (the Ollama provider).
    fn run(&self, args: &[&str]) -> Ran {
        let host = format!("127.0.0.1:{}", self.s.0);
        let mut all = vec!["--host", host.as_str()];
        all.extend_from_slice(args);
        self.o.run(&all).into()
    }

    /// Runs `ollm --provider openai --host http://127.0.0.1:PORT/v1 ARGS`.
    fn run_openai(&self, args: &[&str]) -> Ran {
        let url = format!("http://127.0.0.1:{}/v1", self.s.0);
        let mut all = vec!["--provider", "openai", "--host", url.as_str()];
        all.extend_from_slice(args);
        self.o.run(&all).into()
    }
}

impl Case<OpenAi> {
    fn openai() -> Self {
        Case {
            s: OpenAi::start(),
            o: Ollm::new(),
        }
    }

    fn mock(&self) -> &MockOpenAi {
        &self.s.mock
    }

    /// The mock's base URL (ending in `/v1`).
    fn url(&self) -> String {
        self.s.mock.base_url()
    }

    /// Runs `ollm --provider openai --host MOCK ARGS`.
    fn run(&self, args: &[&str]) -> Ran {
        let url = self.url();
        let mut all = vec!["--provider", "openai", "--host", url.as_str()];
        all.extend_from_slice(args);
        self.o.run(&all).into()
    }
}

/// One NDJSON chat chunk with this text.
pub(crate) fn chunk(text: &str) -> Value {
    json!({"model": "qwen3:8b", "created_at": "2025-05-01T12:00:00Z",
        "message": {"role": "assistant", "content": text}, "done": false})
}

/// The final NDJSON chat chunk.
fn done(reason: &str) -> Value {
    json!({"model": "qwen3:8b", "created_at": "2025-05-01T12:00:01Z",
        "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": reason,
        "prompt_eval_count": 12, "eval_count": 4})
}

/// A reply whose message calls `name` with `arguments`. The prompt carried the tools'
/// schemas, so the server read far more than 12 tokens: a count that low on the first
/// request of a conversation is a silent truncation, and the adapter says so (issue 16).
pub(crate) fn tool_call(name: &str, arguments: Value) -> Reply {
    let mut last = done("stop");
    last["prompt_eval_count"] = json!(2000);
    Reply::ndjson(&[
        json!({"model": "qwen3:8b", "created_at": "2025-05-01T12:00:00Z",
            "message": {"role": "assistant", "content": "",
                "tool_calls": [{"function": {"name": name, "arguments": arguments}}]},
            "done": false}),
        last,
    ])
}

pub(crate) fn answer(parts: &[&str]) -> Reply {
    let mut lines: Vec<Value> = parts.iter().map(|p| chunk(p)).collect();
    lines.push(done("stop"));
    Reply::ndjson(&lines)
}

/// The messages of the `n`th recorded `/api/chat` body.
fn chat_messages(mock: &MockOllama, n: usize) -> Vec<Value> {
    let chats = mock.requests_to("/api/chat");
    chats[n].body["messages"].as_array().unwrap().clone()
}

mod context;
mod images;
mod sessions_commands;

mod defaults;

mod logging;

mod serve;

mod ollama_one_shot {
    use super::*;

    #[test]
    fn text_streams_the_answer_and_sends_the_prompt() {
        let c = Case::ollama();
        c.mock()
            .script("/api/chat", answer(&["Hel", "lo ", "there"]));
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        out.ok();
        assert_eq!(out.out, "Hello there\n");
        let msgs = chat_messages(c.mock(), 0);
        let last = msgs.last().unwrap();
        assert_eq!(last["role"], "user");
        assert_eq!(typed(last["content"].as_str().unwrap()), "hi");
        assert_eq!(
            c.mock().requests_to("/api/chat")[0].body["model"],
            "qwen3:8b"
        );
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );
    }

    #[test]
    fn piped_stdin_is_the_prompt() {
        let c = Case::ollama();
        let out = c.run_with(&["run", "qwen3:8b"], &[], Some("what is piped\n"));
        out.ok();
        // The mock's built-in answer.
        assert_eq!(out.out, "Hello from mock\n");
        let msgs = chat_messages(c.mock(), 0);
        let content = msgs.last().unwrap()["content"].as_str().unwrap();
        assert!(content.contains("what is piped"), "{content}");
    }

    #[test]
    fn stream_json_prints_one_event_per_line_ending_in_finish() {
        let c = Case::ollama();
        c.mock().script("/api/chat", answer(&["one", " two"]));
        let out = c.run(&["run", "qwen3:8b", "--output-format", "stream-json", "hi"]);
        out.ok();
        let events: Vec<Value> = out
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        let text: String = events
            .iter()
            .filter(|e| e["type"] == "text_delta")
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, "one two");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "finish", "{events:?}");
        assert_eq!(last["finish_reason"], "stop");
        assert_eq!(last["usage"]["prompt_tokens"], 12);
        assert_eq!(last["usage"]["completion_tokens"], 4);
        assert_eq!(events.iter().filter(|e| e["type"] == "finish").count(), 1);
    }

    #[test]
    fn json_prints_one_object_with_answer_reason_and_usage() {
        let c = Case::ollama();
        c.mock().script("/api/chat", answer(&["one", " two"]));
        let out = c.run(&["run", "qwen3:8b", "--output-format", "json", "hi"]);
        out.ok();
        let text = out.out;
        assert_eq!(text.trim_end().lines().count(), 1, "{text}");
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["model"], "qwen3:8b");
        assert_eq!(v["answer"], "one two");
        assert_eq!(v["finish_reason"], "stop");
        assert_eq!(v["usage"]["prompt_tokens"], 12);
        assert_eq!(v["usage"]["completion_tokens"], 4);
        assert_eq!(v["tool_calls"], json!([]));
        assert_eq!(v["error"], Value::Null);
    }
}

mod tools {
    use super::*;

    fn script_write(c: &Case<Ollama>) {
        c.mock().script(
            "/api/chat",
            tool_call(
                "write_file",
                json!({"path": "out.txt", "content": "written by the model"}),
            ),
        );
        c.mock().script("/api/chat", answer(&["all done"]));
    }

    /// The tool message the second request carries.
    fn tool_reply(c: &Case<Ollama>) -> String {
        let msgs = chat_messages(c.mock(), 1);
        let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
        tool["content"].as_str().unwrap().to_owned()
    }

    #[test]
    fn write_file_is_denied_headless_without_yes() {
        let c = Case::ollama();
        script_write(&c);
        let out = c.run(&["run", "qwen3:8b", "write it"]);
        out.ok();
        assert!(!c.o.dir.path().join("out.txt").exists());
        assert_eq!(c.mock().requests_to("/api/chat").len(), 2);
        let content = tool_reply(&c);
        // Issue 17: nobody was asked, and the text the model reads does not claim a user was.
        assert!(content.contains("no one could be asked"), "{content}");
        assert!(!content.contains("denied by the user"), "{content}");
        assert!(out.err.contains("--yes"), "{}", out.err);
        assert_eq!(out.out, "all done\n");
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );

        // The JSON output reports the denied call with the text the model read.
        script_write(&c);
        let out = c.run(&["run", "qwen3:8b", "--output-format", "json", "write it"]);
        out.ok();
        let v: Value = serde_json::from_str(&out.out).unwrap();
        assert_eq!(v["tool_calls"][0]["name"], "write_file");
        assert_eq!(
            v["tool_calls"][0]["result"],
            format!("Error: {}", ollm_tools::approval::HEADLESS_DENIAL)
        );
        assert_eq!(v["tool_calls"][0]["is_error"], true);
        assert!(!c.o.dir.path().join("out.txt").exists());
    }

    #[test]
    fn write_file_runs_with_yes() {
        let c = Case::ollama();
        script_write(&c);
        let out = c.run(&["run", "qwen3:8b", "--yes", "write it"]);
        out.ok();
        assert_eq!(
            std::fs::read_to_string(c.o.dir.path().join("out.txt")).unwrap(),
            "written by the model"
        );
        assert!(!tool_reply(&c).contains("denied"), "{}", tool_reply(&c));
        assert!(out.err.contains("write_file"), "{}", out.err);
        assert_eq!(out.out, "all done\n");
    }

    /// The user's words as the first request sent them.
    fn prompt_sent(c: &Case<Ollama>) -> String {
        let msgs = chat_messages(c.mock(), 0);
        let user = msgs.iter().rfind(|m| m["role"] == "user").unwrap();
        typed(user["content"].as_str().unwrap()).to_owned()
    }

    /// Issue 12: a flag after the prompt is a flag (as in `ollama run`), not prompt
    /// text; after `--` every word is prompt.
    #[test]
    fn a_flag_after_the_prompt_is_a_flag_and_double_dash_ends_flags() {
        let c = Case::ollama();
        script_write(&c);
        let out = c.run(&["run", "qwen3:8b", "write it", "--yes"]);
        out.ok();
        assert_eq!(prompt_sent(&c), "write it");
        assert_eq!(
            std::fs::read_to_string(c.o.dir.path().join("out.txt")).unwrap(),
            "written by the model"
        );

        let c = Case::ollama();
        script_write(&c);
        let out = c.run(&["run", "qwen3:8b", "--", "write it", "--yes"]);
        out.ok();
        assert_eq!(prompt_sent(&c), "write it --yes");
        assert!(!c.o.dir.path().join("out.txt").exists());
        assert!(
            tool_reply(&c).contains("no one could be asked"),
            "{}",
            tool_reply(&c)
        );
    }

    #[test]
    fn read_file_needs_no_approval() {
        let c = Case::ollama();
        std::fs::write(c.o.dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
        c.mock().script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        c.mock().script("/api/chat", answer(&["it says alpha"]));
        let out = c.run(&["run", "qwen3:8b", "--output-format", "json", "read it"]);
        out.ok();
        let content = tool_reply(&c);
        assert!(content.contains("alpha\nbeta"), "{content}");
        let v: Value = serde_json::from_str(&out.out).unwrap();
        assert_eq!(v["answer"], "it says alpha");
        assert_eq!(v["tool_calls"][0]["name"], "read_file");
        assert_eq!(v["tool_calls"][0]["is_error"], false);
    }
}

mod models {
    use super::*;

    #[test]
    fn pull_prints_plain_progress_and_list_shows_the_model() {
        let c = Case::ollama();
        let out = c.run(&["pull", "tinyllama:1b"]);
        out.ok();
        let all = format!("{}{}", out.out, out.err);
        assert!(all.contains("pulling manifest"), "{all}");
        assert!(all.contains("success"), "{all}");
        // Plain lines when piped: no carriage returns or escape sequences.
        assert!(!all.contains('\r') && !all.contains('\x1b'), "{all:?}");
        let out = c.run(&["list"]);
        out.ok();
        assert!(out.out.contains("tinyllama:1b"), "{}", out.out);
    }

    #[test]
    fn a_pull_error_line_fails_with_the_servers_text() {
        let c = Case::ollama();
        c.mock().script(
            "/api/pull",
            Reply::ndjson(&[
                json!({"status": "pulling manifest"}),
                json!({"error": "pull model manifest: file does not exist"}),
            ]),
        );
        let out = c.run(&["pull", "nosuch:1b"]);
        // Issue 16: model not found (exit 4), with a hint to check the name.
        assert_eq!(out.code, 4, "{}", out.err);
        assert!(
            out.err.contains("pull model manifest: file does not exist"),
            "{}",
            out.err
        );
        assert!(out.err.contains("ollm list"), "{}", out.err);
    }

    #[test]
    fn piped_pull_progress_prints_the_datas_percentages() {
        // Issue 16: 25% and 75% were printed as 20% and 70%.
        let c = Case::ollama();
        let digest = "sha256:0123456789abcdef";
        let step = |done: u64| {
            json!({"status": "pulling 0123456789ab", "digest": digest,
            "total": 400, "completed": done})
        };
        c.mock().script(
            "/api/pull",
            Reply::ndjson(&[
                json!({"status": "pulling manifest"}),
                step(100),
                step(300),
                step(400),
                json!({"status": "success"}),
            ]),
        );
        let out = c.run(&["pull", "tinyllama:1b"]);
        out.ok();
        let all = format!("{}{}", out.out, out.err);
        for want in [" 25% (", " 75% (", "100% ("] {
            assert!(all.contains(want), "{want:?} in {all}");
        }
        assert!(!all.contains(" 20% (") && !all.contains(" 70% ("), "{all}");
    }

    #[test]
    fn show_ps_and_version_print_the_key_fields() {
        let c = Case::ollama();
        let out = c.run(&["show", "qwen3:8b"]);
        out.ok();
        let text = out.out;
        for want in ["tools", "thinking", "40960", "temperature"] {
            assert!(text.contains(want), "{want} in {text}");
        }
        c.mock().set_running("qwen3:8b");
        let out = c.run(&["ps"]);
        out.ok();
        assert!(out.out.contains("qwen3:8b"), "{}", out.out);
        let out = c.run(&["version"]);
        out.ok();
        let text = out.out;
        assert!(
            text.contains(&format!("ollm version {}", env!("CARGO_PKG_VERSION"))),
            "{text}"
        );
        assert!(text.contains("0.12.6"), "{text}");
        let out = c.run(&["show", "nosuch:1b"]);
        assert_eq!(out.code, 4, "{}", out.err);
    }
}

mod failures {
    use super::*;

    #[test]
    fn ollama_model_not_found_exits_4_with_the_pull_hint() {
        let c = Case::ollama();
        let out = c.run(&["run", "nosuch:1b", "hi"]);
        assert_eq!(out.code, 4, "{}", out.err);
        assert!(out.err.contains("ollama pull nosuch:1b"), "{}", out.err);
    }

    #[test]
    fn ollama_server_down_exits_3_with_the_start_hint() {
        let c = Case::down();
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        assert_eq!(out.code, 3, "{}", out.err);
        assert!(out.err.contains("ollama serve"), "{}", out.err);
        let out = c.run(&["list"]);
        assert_eq!(out.code, 3, "{}", out.err);
    }

    /// Issue 17: a wrong host is one line of what happened and one hint, for `run`,
    /// `list` and the OpenAI provider alike; the transport's chain only with `--verbose`.
    #[test]
    fn a_wrong_host_is_one_line_and_a_hint() {
        let c = Case::down();
        for out in [
            c.run(&["run", "qwen3:8b", "hi"]),
            c.run(&["list"]),
            c.run_openai(&["run", "m", "hi"]),
        ] {
            assert_eq!(out.code, 3, "{}", out.err);
            let lines: Vec<&str> = out.err.lines().collect();
            let [retries @ .., error, hint] = &lines[..] else {
                panic!("{}", out.err);
            };
            assert_eq!(*error, "error: cannot reach the server", "{}", out.err);
            assert!(hint.starts_with("  hint: "), "{}", out.err);
            // A retry is one short line each, not the transport's chain again.
            for retry in retries {
                assert!(retry.starts_with("warning: retry "), "{}", out.err);
                assert!(retry.len() < 110, "{}", out.err);
            }
            assert!(!out.err.contains("error sending request"), "{}", out.err);
        }
        let out = c.run(&["run", "qwen3:8b", "--verbose", "hi"]);
        assert!(
            out.err.contains("ollm: detail: could not connect"),
            "{}",
            out.err
        );
        assert!(out.err.contains("error sending request"), "{}", out.err);
    }

    #[test]
    fn openai_model_not_found_exits_4() {
        let c = Case::openai();
        c.mock().push_reply(mock_openai::Reply::http_error(
            404,
            "The model `nosuch` does not exist.",
        ));
        let out = c.run(&["run", "nosuch", "hi"]);
        assert_eq!(out.code, 4, "{}", out.err);
        assert!(out.err.contains("nosuch"), "{}", out.err);
        // The hint names a command that exists, and that command lists the server's models.
        assert!(out.err.contains("`ollm list`"), "{}", out.err);
        let out = c.run(&["list"]);
        out.ok();
        assert!(out.out.contains("mock-model"), "{}", out.out);
    }

    #[test]
    fn openai_server_down_exits_3_with_a_hint() {
        let c = Case::down();
        let out = c.run_openai(&["run", "m", "hi"]);
        assert_eq!(out.code, 3, "{}", out.err);
        assert!(
            out.err.contains("is an OpenAI-compatible server running"),
            "{}",
            out.err
        );
    }
}

mod cancel {
    use super::*;

    /// Runs `ollm ARGS` against a reply that streams a little then stalls, sends SIGINT
    /// once stdout shows `marker`, and returns the exit code and all of stdout, after
    /// checking that the exit was prompt and the mock saw the stream closed early.
    fn interrupt(args: &[&str], marker: &str) -> (Option<i32>, String) {
        let c = Case::ollama();
        c.mock().script(
            "/api/chat",
            Reply::ndjson(&[chunk("first words"), chunk(" and more")]).then_stall(),
        );
        let url = c.mock().url();
        let mut all = vec!["--host", url.as_str(), "run", "qwen3:8b"];
        all.extend_from_slice(args);
        let mut child =
            c.o.command(&all)
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
        // Read stdout until the marker shows; the answer then stalls forever.
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        let marker = marker.as_bytes().to_vec();
        let reader = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut byte = [0u8; 1];
            while let Ok(1) = out.read(&mut byte) {
                seen.push(byte[0]);
                if seen.ends_with(&marker) {
                    let _ = tx.send(());
                }
            }
            seen
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the first text on stdout");
        let started = Instant::now();
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
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        let seen = String::from_utf8(reader.join().unwrap()).unwrap();
        let index = c
            .mock()
            .requests()
            .iter()
            .position(|r| r.path == "/api/chat")
            .unwrap();
        c.s.rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), c.mock().wait_closed_early(index))
                .await
                .expect("the mock saw the connection closed early");
        });
        (status.code(), seen)
    }

    #[test]
    fn sigint_mid_answer_exits_130_and_closes_the_stream() {
        let (code, seen) = interrupt(&["hi"], "first words");
        assert_eq!(code, Some(130));
        assert!(seen.starts_with("first words"), "{seen}");
    }

    #[test]
    fn sigint_in_stream_json_ends_with_a_cancelled_finish() {
        // Wait for the first text line (the strategy line comes before it).
        let (code, seen) = interrupt(&["--output-format", "stream-json", "hi"], "first words");
        assert_eq!(code, Some(130));
        let events: Vec<Value> = seen
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            // The strategy line is pinned by its own test.
            .filter(|e: &Value| e["type"] != "strategy_chosen")
            .collect();
        assert_eq!(events[0]["type"], "text_delta", "{seen}");
        let last = events.last().unwrap();
        assert_eq!(last["type"], "finish", "{seen}");
        assert_eq!(last["finish_reason"], "cancelled", "{seen}");
    }
}

mod sessions_resume {
    use super::*;

    #[test]
    fn the_second_prompt_carries_the_first_exchange() {
        let c = Case::ollama();
        c.mock().script("/api/chat", answer(&["first answer"]));
        c.mock().script("/api/chat", answer(&["second answer"]));
        let out = c.run(&["run", "qwen3:8b", "--session", "s1", "one"]);
        out.ok();
        let out = c.run(&["run", "qwen3:8b", "--session", "s1", "two"]);
        out.ok();
        assert_eq!(out.out, "second answer\n");
        let msgs = chat_messages(c.mock(), 1);
        let turns: Vec<(&str, &str)> = msgs
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| {
                (
                    m["role"].as_str().unwrap(),
                    typed(m["content"].as_str().unwrap()),
                )
            })
            .collect();
        assert_eq!(
            turns,
            vec![
                ("user", "one"),
                ("assistant", "first answer"),
                ("user", "two")
            ]
        );
        let out = c.bare(&["sessions", "list"]);
        out.ok();
        assert!(
            out.out.lines().any(|l| l.split('\t').next() == Some("s1")),
            "{}",
            out.out
        );
    }
}

mod openai_constrained {
    use super::*;

    #[test]
    fn a_constrained_tool_call_runs_and_the_final_answer_prints() {
        let c = Case::openai();
        std::fs::write(c.o.dir.path().join("notes.txt"), "gamma\n").unwrap();
        let call = json!({"tool": "read_file", "arguments": {"path": "notes.txt"}}).to_string();
        let fin = json!({"final_answer": "the notes say gamma"}).to_string();
        for text in [call, fin] {
            c.mock().push_reply(
                mock_openai::Reply::sse()
                    .content(&text)
                    .finish("stop")
                    .usage(10, 5)
                    .done()
                    .reply(),
            );
        }
        let out = c.run(&[
            "run",
            "mock-model",
            "--tool-mode",
            "constrained",
            "what do the notes say?",
        ]);
        out.ok();
        assert_eq!(out.out, "the notes say gamma\n");
        let reqs = c.mock().requests();
        assert_eq!(reqs.len(), 2, "{reqs:?}");
        let second = reqs[1]["messages"].to_string();
        assert!(second.contains("gamma"), "{second}");
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );
    }
}

mod more_output {
    use super::*;

    #[test]
    fn the_json_formats_report_a_failure_and_keep_the_exit_code() {
        let c = Case::ollama();
        let out = c.run(&["run", "nosuch:1b", "--output-format", "json", "hi"]);
        assert_eq!(out.code, 4, "{}", out.err);
        let v: Value = serde_json::from_str(&out.out).unwrap();
        assert_eq!(v["finish_reason"], "error");
        assert_eq!(v["error"]["kind"], "model_not_found");
        assert_eq!(v["error"]["status"], 404);
        assert_eq!(
            v["error"]["hint"],
            "ollama pull nosuch:1b; `ollm list` shows the models the server has"
        );
        let out = c.run(&["run", "nosuch:1b", "--output-format", "stream-json", "hi"]);
        assert_eq!(out.code, 4, "{}", out.err);
        let events: Vec<Value> = out
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            // The strategy line is pinned by its own test.
            .filter(|e: &Value| e["type"] != "strategy_chosen")
            .collect();
        assert_eq!(events.len(), 2, "{events:?}");
        assert_eq!(events[0]["type"], "error");
        assert_eq!(events[0]["error"]["kind"], "model_not_found");
        assert_eq!(events[1]["type"], "finish");
        assert_eq!(events[1]["finish_reason"], "error");
    }

    #[test]
    fn stream_json_shows_the_tool_call_its_result_and_each_turn() {
        let c = Case::ollama();
        std::fs::write(c.o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        c.mock().script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        c.mock().script("/api/chat", answer(&["ok"]));
        let out = c.run(&["run", "qwen3:8b", "--output-format", "stream-json", "hi"]);
        out.ok();
        let events: Vec<Value> = out
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            // The strategy line is pinned by its own test.
            .filter(|e: &Value| e["type"] != "strategy_chosen")
            .collect();
        let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
        assert_eq!(
            types,
            [
                "tool_call_started",
                "tool_result",
                "turn_complete",
                "text_delta",
                "turn_complete",
                "finish"
            ]
        );
        assert_eq!(events[0]["name"], "read_file");
        assert_eq!(events[0]["arguments"], json!({"path": "notes.txt"}));
        assert_eq!(events[1]["id"], events[0]["id"]);
        assert_eq!(
            events[1]["content"],
            "notes.txt:\nalpha\n[notes.txt ends: 1 line]"
        );
        assert_eq!(events[1]["is_error"], false);
        assert_eq!(events[2]["turn"], 1);
        assert_eq!(events[4]["turn"], 2);
        // The sum of both turns: 2000 (the tool-call turn) + 12.
        assert_eq!(events[5]["usage"]["prompt_tokens"], 2012);
    }

    fn thinking_reply() -> Reply {
        Reply::ndjson(&[
            json!({"model": "qwen3:8b", "created_at": "2025-05-01T12:00:00Z",
                "message": {"role": "assistant", "content": "", "thinking": "pondering"},
                "done": false}),
            chunk("the answer"),
            done("stop"),
        ])
    }

    #[test]
    fn thinking_goes_to_stderr_and_can_be_hidden() {
        let c = Case::ollama();
        c.mock().script("/api/chat", thinking_reply());
        let out = c.run(&["run", "qwen3:8b", "--think", "hi"]);
        out.ok();
        assert_eq!(out.out, "the answer\n");
        assert!(out.err.contains("pondering"), "{}", out.err);
        assert_eq!(c.mock().requests_to("/api/chat")[0].body["think"], true);
        c.mock().script("/api/chat", thinking_reply());
        let out = c.run(&["run", "qwen3:8b", "--think=high", "--hide-thinking", "hi"]);
        out.ok();
        assert_eq!(out.out, "the answer\n");
        assert!(!out.err.contains("pondering"), "{}", out.err);
        assert_eq!(c.mock().requests_to("/api/chat")[1].body["think"], "high");
    }

    #[test]
    fn a_server_that_sends_nothing_times_out_with_exit_3() {
        let c = Case::ollama();
        c.o.write_config("[providers.ollama]\nkind = \"ollama\"\nidle_timeout_secs = 1\n");
        c.mock()
            .script("/api/chat", Reply::ndjson(&[]).then_stall());
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        assert_eq!(out.code, 3, "{}", out.err);
        assert!(out.err.contains("1s"), "{}", out.err);
    }

    #[test]
    fn a_stall_after_partial_text_is_a_timeout_with_exit_3() {
        // Issue 16: `Hello` then nothing: the text is kept, and the error is a timeout
        // (exit 3), not an incomplete stream (exit 1), on both adapters.
        let c = Case::ollama();
        c.o.write_config("[providers.ollama]\nkind = \"ollama\"\nidle_timeout_secs = 1\n");
        c.mock().script(
            "/api/chat",
            Reply::ndjson(
                &[json!({"message": {"role": "assistant", "content": "Hello"},
                "done": false})],
            )
            .then_stall(),
        );
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        assert_eq!(out.code, 3, "{}", out.err);
        assert!(out.out.contains("Hello"), "{}", out.out);

        let c = Case::openai();
        c.o.write_config("[providers.openai]\nkind = \"openai\"\nidle_timeout_secs = 1\n");
        c.mock()
            .push_reply(mock_openai::Reply::sse().content("Hello").stall().reply());
        let out = c.run(&["run", "mock-model", "hi"]);
        assert_eq!(out.code, 3, "{}", out.err);
        assert!(out.out.contains("Hello"), "{}", out.out);
    }

    #[test]
    fn openai_interleaved_parallel_tool_calls_are_two_calls() {
        // Issue 16: fragments alternating between index 0 and 1 (no ids after the first)
        // became 12 calls; they are two, and the follow-up carries two results.
        let c = Case::openai();
        std::fs::write(c.o.dir.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::write(c.o.dir.path().join("b.txt"), "beta\n").unwrap();
        let frag = |index: u32, head: Option<(&str, &str)>, args: &str| {
            let mut call = json!({"index": index, "function": {"arguments": args}});
            if let Some((id, name)) = head {
                call["id"] = json!(id);
                call["type"] = json!("function");
                call["function"]["name"] = json!(name);
            }
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]})
        };
        let mut reply = mock_openai::Reply::sse()
            .data(frag(0, Some(("call_a", "read_file")), ""))
            .data(frag(1, Some(("call_b", "read_file")), ""));
        for piece in ["{\"pa", "th\": ", "\"", "a.txt", "\"}"] {
            reply = reply.data(frag(0, None, piece)).data(frag(
                1,
                None,
                &piece.replace("a.txt", "b.txt"),
            ));
        }
        c.mock()
            .push_reply(reply.finish("tool_calls").done().reply());
        c.mock().push_reply(
            mock_openai::Reply::sse()
                .content("ok")
                .finish("stop")
                .done()
                .reply(),
        );
        let out = c.run(&["run", "mock-model", "hi"]);
        out.ok();
        let second = &c.mock().requests()[1]["messages"];
        let tools: Vec<&Value> = second
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        assert_eq!(tools.len(), 2, "{second:#}");
        assert_eq!(tools[0]["tool_call_id"], "call_a");
        assert_eq!(tools[0]["content"], "a.txt:\nalpha\n[a.txt ends: 1 line]");
        assert_eq!(tools[1]["tool_call_id"], "call_b");
        assert_eq!(tools[1]["content"], "b.txt:\nbeta\n[b.txt ends: 1 line]");
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );
    }

    #[test]
    fn openai_auth_refused_exits_5_with_a_hint() {
        let c = Case::openai();
        c.mock()
            .push_reply(mock_openai::Reply::http_error(401, "invalid api key"));
        let out = c.run(&["run", "mock-model", "hi"]);
        assert_eq!(out.code, 5, "{}", out.err);
        assert!(out.err.contains("invalid api key"), "{}", out.err);
        assert!(out.err.contains("api_key_env"), "{}", out.err);
    }

    #[test]
    fn rm_deletes_and_a_second_rm_is_model_not_found() {
        let c = Case::ollama();
        let out = c.run(&["rm", "gemma:2b"]);
        out.ok();
        assert!(out.out.contains("gemma:2b"), "{}", out.out);
        let out = c.run(&["list"]);
        assert!(!out.out.contains("gemma:2b"), "{}", out.out);
        let out = c.run(&["rm", "gemma:2b"]);
        assert_eq!(out.code, 4, "{}", out.err);
    }
}

mod server_behaviour {
    use super::*;

    #[test]
    fn a_model_without_tools_or_thinking_still_answers() {
        let c = Case::ollama();
        let out = c.run(&["run", "gemma:2b", "--think", "hi"]);
        out.ok();
        assert_eq!(out.out, "Hello from mock\n");
        assert!(out.err.contains("thinking"), "{}", out.err);
        // The capabilities were read first; neither tools nor thinking were sent.
        let chat = &c.mock().requests_to("/api/chat")[0].body;
        assert!(chat["tools"].as_array().is_none_or(Vec::is_empty), "{chat}");
        assert!(chat["think"].is_null() || chat["think"] == false, "{chat}");
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );
    }

    #[test]
    fn ollama_host_from_the_environment_is_used() {
        let c = Case::ollama();
        let out: Ran =
            c.o.run_with(
                &["run", "qwen3:8b", "hi"],
                &[("OLLAMA_HOST", &c.mock().host_port())],
                None,
            )
            .into();
        out.ok();
        assert_eq!(out.out, "Hello from mock\n");
    }

    #[test]
    fn a_busy_server_is_retried_with_a_warning() {
        let c = Case::ollama();
        c.mock().script(
            "/api/chat",
            Reply::error(503, "server busy").header("Retry-After", "0"),
        );
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        out.ok();
        assert_eq!(out.out, "Hello from mock\n");
        assert!(out.err.contains("server busy"), "{}", out.err);
        assert_eq!(c.mock().requests_to("/api/chat").len(), 2);
    }

    #[test]
    fn a_broken_stream_keeps_the_partial_text_and_exits_1() {
        let c = Case::ollama();
        c.mock()
            .script("/api/chat", Reply::ndjson(&[chunk("half")]).then_abort());
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        assert_eq!(out.code, 1, "{}", out.err);
        assert_eq!(out.out, "half\n");
        // Issue 17: one line and no transport detail (that is behind `--verbose`).
        assert_eq!(
            out.err.trim_end(),
            "error: the reply ended early (what was shown of it is partial)"
        );
        c.mock().script(
            "/api/chat",
            Reply::ndjson(&[chunk("x"), json!({"error": "model runner crashed"})]),
        );
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        assert_eq!(out.code, 1, "{}", out.err);
        assert!(out.err.contains("model runner crashed"), "{}", out.err);
    }

    #[test]
    fn an_answer_cut_at_the_token_limit_warns() {
        let c = Case::ollama();
        c.mock().script(
            "/api/chat",
            Reply::ndjson(&[chunk("cut sh"), done("length")]),
        );
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        out.ok();
        assert_eq!(out.out, "cut sh\n");
        assert!(out.err.contains("token limit"), "{}", out.err);
    }
}

mod run_options {
    use super::*;

    #[test]
    fn a_prompt_argument_and_piped_stdin_are_joined() {
        let c = Case::ollama();
        let out = c.run_with(&["run", "qwen3:8b", "summarise:"], &[], Some("the notes\n"));
        out.ok();
        let msgs = chat_messages(c.mock(), 0);
        let content = typed(msgs.last().unwrap()["content"].as_str().unwrap());
        assert!(content.starts_with("summarise:"), "{content}");
        assert!(content.contains("the notes"), "{content}");
    }

    /// The CLI turns `tool-or-none` on: the run's first request asks for the choice under
    /// a schema (Ollama's `format`), with the typed prompt alone; on `none` the answer is
    /// asked with no tools and no working-folder line; on a tool's name the tools stay
    /// (`routed-call` is off in the CLI).
    #[test]
    fn the_cli_asks_tool_or_none_first_and_none_takes_the_tools_away() {
        for (choice, tools) in [("none", false), ("read_file", true)] {
            let c = Case::ollama();
            c.mock().script(
                "/api/chat",
                answer(&[&format!("{{\"tool\": \"{choice}\"}}")]),
            );
            c.mock().script("/api/chat", answer(&["42"]));
            let off = ["--coach-off", "routed-call"];
            let out = c.run(
                &[
                    &["run", ROUTED],
                    &off[..],
                    &["qwen3:8b", "what's 6 times 7?"],
                ]
                .concat(),
            );
            out.ok();
            let chats = c.mock().requests_to("/api/chat");
            assert_eq!(chats.len(), 2, "{choice}");
            let route = &chats[0].body;
            assert!(
                route["format"]["properties"]["tool"]["enum"].is_array(),
                "{route}"
            );
            assert_eq!(route["messages"].as_array().unwrap().len(), 2, "{route}");
            assert_eq!(
                route["messages"][1]["content"], "what's 6 times 7?",
                "{route}"
            );
            let asked = &chats[1].body;
            assert_eq!(asked.get("tools").is_some(), tools, "{choice}: {asked}");
            let first = asked["messages"][0]["content"].as_str().unwrap();
            assert_eq!(first.starts_with("[Working folder: "), tools, "{first}");
        }
    }

    #[test]
    fn tools_are_offered_unless_no_tools_and_the_system_prompt_leads() {
        let c = Case::ollama();
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        out.ok();
        // With the tools, the model is told its working folder and what is there.
        let first = &c.mock().requests_to("/api/chat")[0].body["messages"][0];
        assert_eq!(first["role"], "user", "{first}");
        let text = first["content"].as_str().unwrap();
        assert!(text.starts_with("[Working folder: /"), "{text}");
        assert!(text.ends_with("]\n\nhi"), "{text}");
        assert_eq!(typed(text), "hi");
        let tools: Vec<String> = c.mock().requests_to("/api/chat")[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect();
        for want in ["read_file", "list_dir", "search_text", "write_file"] {
            assert!(tools.iter().any(|t| t == want), "{want} in {tools:?}");
        }
        // `named-command`: "hi" names none of the programs `run_command` may start.
        assert!(!tools.iter().any(|t| t == "run_command"), "{tools:?}");
        let out = c.run(&[
            "run",
            "qwen3:8b",
            "--no-tools",
            "--system",
            "be brief",
            "hi",
        ]);
        out.ok();
        let body = &c.mock().requests_to("/api/chat")[1].body;
        assert!(body["tools"].as_array().is_none_or(Vec::is_empty), "{body}");
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
        // A message that names one of its programs is offered `run_command`.
        c.run(&["run", "qwen3:8b", "what does git status say?"])
            .ok();
        let body = &c.mock().requests_to("/api/chat")[2].body;
        let tools = body["tools"].as_array().unwrap();
        let named = |t: &Value| t["function"]["name"] == "run_command";
        assert!(tools.iter().any(named), "{body}");
    }

    #[test]
    fn auto_remembers_between_runs_that_the_server_refused_native_tools() {
        let c = Case::ollama();
        // The server cannot describe the model, then refuses native tools for it.
        c.mock()
            .script("/api/show", Reply::error(500, "show failed"));
        c.mock().script(
            "/api/chat",
            Reply::error(
                400,
                "registry.ollama.ai/library/qwen3:8b does not support tools",
            ),
        );
        let first = c.run(&["run", "qwen3:8b", "hi"]);
        first.ok();
        assert!(
            first.err.contains("refused native tool calls"),
            "{}",
            first.err
        );
        let learned = std::fs::read_to_string(c.o.data_dir().join("learned.json")).unwrap();
        assert!(learned.contains("\"native_refused\": true"), "{learned}");
        // The next process starts with ReAct: no native tools sent, no refusal met.
        c.mock()
            .script("/api/show", Reply::error(500, "show failed"));
        let before = c.mock().requests_to("/api/chat").len();
        let second = c.run(&["run", "qwen3:8b", "hi"]);
        second.ok();
        assert!(!second.err.contains("refused"), "{}", second.err);
        let chats = c.mock().requests_to("/api/chat");
        assert_eq!(chats.len(), before + 1);
        let body = &chats[before].body;
        assert!(body["tools"].as_array().is_none_or(Vec::is_empty), "{body}");
    }

    #[test]
    fn the_turn_limit_stops_the_run_with_a_warning() {
        let c = Case::ollama();
        std::fs::write(c.o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        c.mock().script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        let out = c.run(&["run", "qwen3:8b", "--max-turns", "1", "hi"]);
        out.ok();
        assert!(out.err.contains("--max-turns"), "{}", out.err);
        assert_eq!(c.mock().requests_to("/api/chat").len(), 1);
    }

    #[test]
    fn a_resumed_session_with_a_tool_call_replays_valid_history() {
        let c = Case::ollama();
        std::fs::write(c.o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        c.mock().script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        c.mock().script("/api/chat", answer(&["alpha it is"]));
        let out = c.run(&["run", "qwen3:8b", "--session", "t", "read"]);
        out.ok();
        let out = c.run(&["run", "qwen3:8b", "--session", "t", "again"]);
        out.ok();
        let msgs = chat_messages(c.mock(), 2);
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
        assert_eq!(msgs[1]["tool_calls"][0]["id"], msgs[2]["tool_call_id"]);
        assert_eq!(
            msgs[2]["content"],
            "notes.txt:\nalpha\n[notes.txt ends: 1 line]"
        );
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );
    }
}

mod openai_native {
    use super::*;

    fn chunk_of(delta: Value) -> Value {
        json!({"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    }

    /// Streams `text` as content in chunks of `n` bytes (on character boundaries).
    fn content_in_chunks(text: &str, n: usize) -> mock_openai::Reply {
        let mut sse = mock_openai::Reply::sse();
        let mut at = 0;
        while at < text.len() {
            let mut end = (at + n).min(text.len());
            while !text.is_char_boundary(end) {
                end += 1;
            }
            sse = sse.content(&text[at..end]);
            at = end;
        }
        sse.finish("stop").usage(10, 5).done().reply()
    }

    /// Runs `ollm run` on the mock with `format`, the reply to the first turn written as
    /// text and `answer` after; returns stdout and stderr.
    fn run_text_call(s: &OpenAi, o: &Ollm, reply: &str, format: &str) -> (String, String) {
        s.mock.push_reply(content_in_chunks(reply, 3));
        s.mock.push_reply(content_in_chunks("The port is 8080.", 4));
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &s.mock.base_url(),
            "run",
            "mock-model",
            "--output-format",
            format,
            "What port is in notes.txt?",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
        (stdout(&out), stderr(&out))
    }

    const FENCED_CALL: &str =
        "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```";

    #[test]
    fn a_fenced_call_written_as_text_runs_and_no_fence_leaks() {
        let s = OpenAi::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("notes.txt"), "port = 8080\n").unwrap();
        let (out, err) = run_text_call(&s, &o, FENCED_CALL, "text");
        assert_eq!(out, "The port is 8080.\n");
        assert!(
            err.contains("⚙ read_file {\"path\":\"notes.txt\"}"),
            "{err}"
        );
        assert!(err.contains("✓ read_file notes.txt:"), "{err}");
        assert!(!err.contains("```") && !err.contains("json\n"), "{err}");
        // The model reads its call back as a structured call, without the markup.
        let second = &s.mock.requests()[1]["messages"];
        let assistant = &second[second.as_array().unwrap().len() - 2];
        assert_eq!(assistant["role"], "assistant");
        assert!(
            assistant["content"].is_null() || assistant["content"] == "",
            "{assistant}"
        );
        assert_eq!(
            assistant["tool_calls"][0]["function"]["name"],
            json!("read_file")
        );
        let (out, _) = run_text_call(&s, &o, FENCED_CALL, "json");
        let summary: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(summary["answer"], "The port is 8080.");
        assert_eq!(summary["tool_calls"][0]["name"], "read_file");
    }

    #[test]
    fn a_text_call_to_an_unknown_tool_is_answered_without_running_then_the_answer_nudge() {
        let s = OpenAi::start();
        let o = Ollm::new();
        let reply =
            "```json\n{\"name\": \"launch_code\", \"arguments\": {\"file\": \"main.py\"}}\n```";
        let (out, err) = run_text_call(&s, &o, reply, "text");
        assert_eq!(out, "The port is 8080.\n");
        // The tools on offer are named only with `--coach-on tools-hint` (off by default).
        assert!(
            err.contains("✗ launch_code Error: Unknown tool \"launch_code\"\n"),
            "{err}"
        );
        // The unknown tool's result, then the answer nudge (no call ran), and no tools.
        let second = &s.mock.requests()[1];
        let messages = second["messages"].as_array().unwrap();
        let result = &messages[messages.len() - 2];
        assert_eq!(result["role"], "tool");
        let content = result["content"].as_str().unwrap();
        assert_eq!(content, "Error: Unknown tool \"launch_code\"");
        let nudge = &messages[messages.len() - 1];
        assert_eq!(nudge["role"], "user");
        let answer = ollm_core::Nudge::Answer.text(&ollm_core::CoachConfig::default());
        assert_eq!(nudge["content"], answer.as_str());
        assert!(second.get("tools").is_none(), "{second}");
    }

    #[test]
    fn a_streamed_native_tool_call_runs_and_the_answer_streams() {
        let c = Case::openai();
        std::fs::write(c.o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        // The call's arguments arrive split over two chunks, as servers stream them.
        c.mock().push_reply(
            mock_openai::Reply::sse()
                .data(chunk_of(
                    json!({"role": "assistant", "tool_calls": [{"index": 0,
                    "id": "c1", "type": "function",
                    "function": {"name": "read_file", "arguments": "{\"path\":"}}]}),
                ))
                .data(chunk_of(json!({"tool_calls": [{"index": 0,
                    "function": {"arguments": "\"notes.txt\"}"}}]})))
                .finish("tool_calls")
                .usage(10, 5)
                .done()
                .reply(),
        );
        c.mock().push_reply(
            mock_openai::Reply::sse()
                .content("it is ")
                .content("alpha")
                .finish("stop")
                .usage(20, 3)
                .done()
                .reply(),
        );
        let out = c.run(&["run", "mock-model", "--output-format", "stream-json", "hi"]);
        out.ok();
        let events: Vec<Value> = out
            .out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            // The strategy line is pinned by its own test.
            .filter(|e: &Value| e["type"] != "strategy_chosen")
            .collect();
        assert_eq!(events[0]["type"], "tool_call_started");
        assert_eq!(events[0]["arguments"], json!({"path": "notes.txt"}));
        assert_eq!(events[1]["type"], "tool_result");
        assert_eq!(
            events[1]["content"],
            "notes.txt:\nalpha\n[notes.txt ends: 1 line]"
        );
        let text: String = events
            .iter()
            .filter(|e| e["type"] == "text_delta")
            .map(|e| e["text"].as_str().unwrap())
            .collect();
        assert_eq!(text, "it is alpha");
        let last = events.last().unwrap();
        assert_eq!(last["finish_reason"], "stop");
        assert_eq!(last["usage"]["prompt_tokens"], 30);
        assert_eq!(last["usage"]["completion_tokens"], 8);
        let second = &c.mock().requests()[1]["messages"];
        assert_eq!(second[2]["role"], "tool");
        assert_eq!(second[2]["tool_call_id"], "c1");
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );
    }

    #[test]
    fn show_on_llama_server_reads_props() {
        // Issue 16: the window per slot, the template's tool support and the modalities.
        let c = Case::openai();
        c.mock().set_props(json!({
            "default_generation_settings": {"n_ctx": 4096},
            "total_slots": 2,
            "chat_template_caps": {"supports_tools": true, "supports_tool_calls": true},
            "modalities": {"vision": true, "audio": false},
            "chat_template": "{%- if tools %}<tool_call>{% endif %}"
        }));
        let out = c.run(&["show", "mock-model"]);
        out.ok();
        let text = out.out;
        for want in ["mock-model", "4096", "tools", "vision"] {
            assert!(text.contains(want), "{want} in {text}");
        }
    }

    #[test]
    fn ollama_only_commands_say_they_are_unsupported() {
        let c = Case::openai();
        // `show` works on these servers now (from `/props` or `/v1/models`; see the test
        // above), so only the commands with no such source are refused.
        for cmd in [&["pull", "x"][..], &["ps"], &["rm", "x"]] {
            let out = c.run(cmd);
            assert_eq!(out.code, 1, "{cmd:?}: {}", out.err);
            assert!(out.err.contains("does not support"), "{cmd:?}: {}", out.err);
            // Issue 16: and what the server offers instead.
            assert!(
                out.err.contains(&format!("{}/models", c.url())),
                "{cmd:?}: {}",
                out.err
            );
        }
        let out = c.run(&["version"]);
        out.ok();
    }
}

mod provider_mixups {
    use super::*;

    /// Issue 17: an OpenAI-style address with the default provider says which flag is
    /// missing, instead of "File Not Found" and a pull hint.
    #[test]
    fn a_v1_address_with_the_ollama_provider_names_the_fix() {
        let c = Case::ollama();
        let url = format!("{}/v1", c.mock().url());
        let out = c.bare(&["--host", &url, "run", "qwen3:8b", "hi"]);
        assert_eq!(out.code, 2, "{}", out.err);
        assert!(
            out.err
                .contains("this looks like an OpenAI-compatible server: add --provider openai"),
            "{}",
            out.err
        );
        assert!(c.mock().requests_to("/api/chat").is_empty());
    }

    /// Issue 17: a 404 that does not speak of a model (a server without `/api/*`) gets the
    /// same hint, not `ollama pull`.
    #[test]
    fn a_bare_404_names_the_openai_provider() {
        let c = Case::ollama();
        c.mock()
            .script("/api/chat", Reply::error(404, "File Not Found"));
        let out = c.run(&["run", "qwen3:8b", "hi"]);
        assert_eq!(out.code, 4, "{}", out.err);
        assert!(out.err.contains("add --provider openai"), "{}", out.err);
        assert!(!out.err.contains("ollama pull"), "{}", out.err);
    }
}

mod tool_choice_and_guards {
    //! `--tool-choice`, `--max-tokens` and `--verbose` reach the wire and the terminal.
    use super::*;

    /// Runs one prompt against a mock OpenAI-compatible server that answers `text`,
    /// with `flags`; the output and the first request's body.
    fn run_openai(flags: &[&str], text: &str) -> (Output, Value) {
        let s = OpenAi::start();
        let o = Ollm::new();
        s.mock.push_reply(
            mock_openai::Reply::sse()
                .content(text)
                .finish("stop")
                .done()
                .reply(),
        );
        let url = s.mock.base_url();
        let mut args = vec!["--provider", "openai", "--host", url.as_str(), "run"];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["mock-model", "hi"]);
        let out = o.run(&args);
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
        let first = s.mock.requests().first().cloned().unwrap_or(Value::Null);
        (out, first)
    }

    #[test]
    fn tool_choice_and_max_tokens_reach_the_wire() {
        let (out, body) = run_openai(&["--tool-choice", "required", "--max-tokens", "64"], "ok");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(body["tool_choice"], "required");
        assert_eq!(body["max_tokens"], 64);
        let (_, body) = run_openai(&["--tool-choice", "read_file"], "ok");
        let named = json!({"type": "function", "function": {"name": "read_file"}});
        assert_eq!(body["tool_choice"], named);
        // A cap is always sent: the default 4096, bounded by what the window (4096 when
        // the server reports none) leaves after the prompt.
        let cap = body["max_tokens"].as_u64().unwrap_or_default();
        assert!(cap > 3000 && cap < 4096, "{body}");
        // `none` under ReAct offers no tools at all.
        let (_, body) = run_openai(&["--tool-mode", "react", "--tool-choice", "none"], "ok");
        assert!(body.get("tools").is_none(), "{body}");
        assert!(
            !body["messages"].to_string().contains("Action Input"),
            "{body}"
        );
    }

    #[test]
    fn ollama_gets_the_named_tool_only_and_the_cap_as_num_predict() {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script("/api/chat", answer(&["ok"]));
        let url = s.mock.url();
        let args = [
            "--host",
            url.as_str(),
            "run",
            "qwen3:8b",
            "--tool-choice",
            "list_dir",
            "hi",
        ];
        let out = o.run(&args);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let body = s.mock.requests_to("/api/chat")[0].body.clone();
        let names: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["list_dir"], "{body}");
        assert_eq!(body["options"]["num_predict"], 4096, "{body}");
    }

    #[test]
    fn a_tool_choice_naming_no_offered_tool_is_refused() {
        let (out, body) = run_openai(&["--tool-choice", "launch_code"], "ok");
        assert_ne!(code(&out), 0);
        assert_eq!(body, Value::Null, "nothing was sent");
        assert!(stderr(&out).contains("launch_code"), "{}", stderr(&out));
    }

    #[test]
    fn verbose_explains_the_strategy_on_stderr_only() {
        let (out, _) = run_openai(&["-v"], "the answer");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "the answer\n");
        assert!(
            stderr(&out).contains("ollm: tool strategy: native (auto:"),
            "{}",
            stderr(&out)
        );
        let (out, _) = run_openai(&[], "the answer");
        assert!(!stderr(&out).contains("tool strategy"), "{}", stderr(&out));
        let (out, _) = run_openai(&["--output-format", "stream-json"], "x");
        let first: Value = serde_json::from_str(stdout(&out).lines().next().unwrap()).unwrap();
        assert_eq!(first["type"], "strategy_chosen");
        assert_eq!(first["strategy"], "native");
    }
}

/// Issue 14: each sampling flag of `ollm run` reaches the wire, on both adapters.
mod sampling {
    use super::*;

    /// Runs `ollm run FLAGS` against each adapter's mock and checks the first request:
    /// Ollama carries the value under `options.<ollama>`, OpenAI at `<openai>` in the body.
    fn check(flags: &[&str], ollama: (&str, Value), openai: (&str, Value)) {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script("/api/chat", answer(&["ok"]));
        let url = s.mock.url();
        let mut args = vec!["--host", url.as_str(), "run", "qwen3:8b"];
        args.extend_from_slice(flags);
        args.push("hi");
        let out = o.run(&args);
        assert_eq!(code(&out), 0, "{flags:?}: {}", stderr(&out));
        let body = &s.mock.requests_to("/api/chat")[0].body;
        assert_eq!(body["options"][ollama.0], ollama.1, "{flags:?}: {body:#}");

        let s = OpenAi::start();
        s.mock.push_reply(
            mock_openai::Reply::sse()
                .content("ok")
                .finish("stop")
                .done()
                .reply(),
        );
        let url = s.mock.base_url();
        let mut args = vec!["--provider", "openai", "--host", url.as_str(), "run", "m"];
        args.extend_from_slice(flags);
        args.push("hi");
        let out = o.run(&args);
        assert_eq!(code(&out), 0, "{flags:?}: {}", stderr(&out));
        let body = &s.mock.requests()[0];
        assert_eq!(body[openai.0], openai.1, "{flags:?}: {body:#}");
    }

    #[test]
    fn each_sampling_flag_reaches_both_wires() {
        check(
            &["--temperature", "0.5"],
            ("temperature", json!(0.5)),
            ("temperature", json!(0.5)),
        );
        check(
            &["--temperature", "0"],
            ("temperature", json!(0.0)),
            ("temperature", json!(0.0)),
        );
        check(
            &["--top-p", "0.25"],
            ("top_p", json!(0.25)),
            ("top_p", json!(0.25)),
        );
        check(&["--top-k", "7"], ("top_k", json!(7)), ("top_k", json!(7)));
        check(&["--seed", "42"], ("seed", json!(42)), ("seed", json!(42)));
        check(
            &["--stop", "END", "--stop", "###"],
            ("stop", json!(["END", "###"])),
            ("stop", json!(["END", "###"])),
        );
    }

    #[test]
    fn without_flags_no_sampling_option_is_sent() {
        let s = OpenAi::start();
        let o = Ollm::new();
        s.mock.push_reply(
            mock_openai::Reply::sse()
                .content("ok")
                .finish("stop")
                .done()
                .reply(),
        );
        let url = s.mock.base_url();
        let out = o.run(&["--provider", "openai", "--host", &url, "run", "m", "hi"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let body = &s.mock.requests()[0];
        for key in ["top_p", "top_k", "seed", "stop"] {
            assert!(body.get(key).is_none(), "{key} sent: {body:#}");
        }
        // The one default of ollm's own: a request that offers tools is greedy (core's
        // `ChatConfig::tool_temperature`); without tools, nothing.
        assert_eq!(body["temperature"], 0.0, "{body:#}");
        s.mock.push_reply(
            mock_openai::Reply::sse()
                .content("ok")
                .finish("stop")
                .done()
                .reply(),
        );
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &url,
            "run",
            "--no-tools",
            "m",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let body = &s.mock.requests()[1];
        assert!(
            body.get("temperature").is_none(),
            "temperature sent: {body:#}"
        );
    }

    #[test]
    fn a_bad_sampling_value_exits_2_before_any_request() {
        let o = Ollm::new();
        let port = closed_port().to_string();
        let host = format!("http://127.0.0.1:{port}");
        for bad in [["--temperature", "-0.1"], ["--top-p", "2"], ["--seed", "x"]] {
            let out = o.run(&["--host", &host, "run", "m", bad[0], bad[1], "hi"]);
            assert_eq!(code(&out), 2, "{bad:?}: {}", stderr(&out));
        }
    }
}
