//! The binary end to end against the mock Ollama and the mock OpenAI-compatible server:
//! one-shot text, the JSON formats, tool approval, pull, errors and their exit codes,
//! Ctrl-C, sessions and the model commands.

use super::*;
use serde_json::{Value, json};
use std::io::{BufReader, Read};
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

struct OpenAi {
    mock: MockOpenAi,
    _rt: tokio::runtime::Runtime,
}

impl OpenAi {
    fn start() -> Self {
        let rt = runtime();
        let mock = rt.block_on(MockOpenAi::start()).unwrap();
        OpenAi { mock, _rt: rt }
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

mod ollama_one_shot {
    use super::*;

    #[test]
    fn text_streams_the_answer_and_sends_the_prompt() {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script("/api/chat", answer(&["Hel", "lo ", "there"]));
        let out = o.run(&["--host", &s.mock.url(), "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "Hello there\n");
        let msgs = chat_messages(&s.mock, 0);
        let last = msgs.last().unwrap();
        assert_eq!(last["role"], "user");
        assert_eq!(last["content"], "hi");
        assert_eq!(s.mock.requests_to("/api/chat")[0].body["model"], "qwen3:8b");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
    }

    #[test]
    fn piped_stdin_is_the_prompt() {
        let s = Ollama::start();
        let o = Ollm::new();
        let out = o.run_with(
            &["--host", &s.mock.url(), "run", "qwen3:8b"],
            &[],
            Some("what is piped\n"),
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        // The mock's built-in answer.
        assert_eq!(stdout(&out), "Hello from mock\n");
        let msgs = chat_messages(&s.mock, 0);
        let content = msgs.last().unwrap()["content"].as_str().unwrap();
        assert!(content.contains("what is piped"), "{content}");
    }

    #[test]
    fn stream_json_prints_one_event_per_line_ending_in_finish() {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script("/api/chat", answer(&["one", " two"]));
        let out = o.run(&[
            "--host",
            &s.mock.url(),
            "run",
            "qwen3:8b",
            "--output-format",
            "stream-json",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let events: Vec<Value> = stdout(&out)
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
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script("/api/chat", answer(&["one", " two"]));
        let out = o.run(&[
            "--host",
            &s.mock.url(),
            "run",
            "qwen3:8b",
            "--output-format",
            "json",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = stdout(&out);
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

    fn script_write(s: &Ollama) {
        s.mock.script(
            "/api/chat",
            tool_call(
                "write_file",
                json!({"path": "out.txt", "content": "written by the model"}),
            ),
        );
        s.mock.script("/api/chat", answer(&["all done"]));
    }

    /// The tool message the second request carries.
    fn tool_reply(s: &Ollama) -> String {
        let msgs = chat_messages(&s.mock, 1);
        let tool = msgs.iter().find(|m| m["role"] == "tool").unwrap();
        tool["content"].as_str().unwrap().to_owned()
    }

    #[test]
    fn write_file_is_denied_headless_without_yes() {
        let s = Ollama::start();
        let o = Ollm::new();
        script_write(&s);
        let out = o.run(&["--host", &s.mock.url(), "run", "qwen3:8b", "write it"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(!o.dir.path().join("out.txt").exists());
        assert_eq!(s.mock.requests_to("/api/chat").len(), 2);
        let content = tool_reply(&s);
        assert!(content.contains("denied by the user"), "{content}");
        assert!(stderr(&out).contains("--yes"), "{}", stderr(&out));
        assert_eq!(stdout(&out), "all done\n");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());

        // The JSON output reports the denied call with the text the model read.
        script_write(&s);
        let out = o.run(&[
            "--host",
            &s.mock.url(),
            "run",
            "qwen3:8b",
            "--output-format",
            "json",
            "write it",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["tool_calls"][0]["name"], "write_file");
        assert_eq!(v["tool_calls"][0]["result"], "Error: denied by the user");
        assert_eq!(v["tool_calls"][0]["is_error"], true);
        assert!(!o.dir.path().join("out.txt").exists());
    }

    #[test]
    fn write_file_runs_with_yes() {
        let s = Ollama::start();
        let o = Ollm::new();
        script_write(&s);
        let out = o.run(&[
            "--host",
            &s.mock.url(),
            "run",
            "qwen3:8b",
            "--yes",
            "write it",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(
            std::fs::read_to_string(o.dir.path().join("out.txt")).unwrap(),
            "written by the model"
        );
        assert!(!tool_reply(&s).contains("denied"), "{}", tool_reply(&s));
        assert!(stderr(&out).contains("write_file"), "{}", stderr(&out));
        assert_eq!(stdout(&out), "all done\n");
    }

    #[test]
    fn read_file_needs_no_approval() {
        let s = Ollama::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
        s.mock.script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        s.mock.script("/api/chat", answer(&["it says alpha"]));
        let out = o.run(&[
            "--host",
            &s.mock.url(),
            "run",
            "qwen3:8b",
            "--output-format",
            "json",
            "read it",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let content = tool_reply(&s);
        assert!(content.contains("alpha\nbeta"), "{content}");
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["answer"], "it says alpha");
        assert_eq!(v["tool_calls"][0]["name"], "read_file");
        assert_eq!(v["tool_calls"][0]["is_error"], false);
    }
}

mod models {
    use super::*;

    #[test]
    fn pull_prints_plain_progress_and_list_shows_the_model() {
        let s = Ollama::start();
        let o = Ollm::new();
        let out = o.run(&["--host", &s.mock.url(), "pull", "tinyllama:1b"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(all.contains("pulling manifest"), "{all}");
        assert!(all.contains("success"), "{all}");
        // Plain lines when piped: no carriage returns or escape sequences.
        assert!(!all.contains('\r') && !all.contains('\x1b'), "{all:?}");
        let out = o.run(&["--host", &s.mock.url(), "list"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(stdout(&out).contains("tinyllama:1b"), "{}", stdout(&out));
    }

    #[test]
    fn a_pull_error_line_fails_with_the_servers_text() {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script(
            "/api/pull",
            Reply::ndjson(&[
                json!({"status": "pulling manifest"}),
                json!({"error": "pull model manifest: file does not exist"}),
            ]),
        );
        let out = o.run(&["--host", &s.mock.url(), "pull", "nosuch:1b"]);
        // Issue 16: model not found (exit 4), with a hint to check the name.
        assert_eq!(code(&out), 4, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("pull model manifest: file does not exist"),
            "{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("ollm list"), "{}", stderr(&out));
    }

    #[test]
    fn piped_pull_progress_prints_the_datas_percentages() {
        // Issue 16: 25% and 75% were printed as 20% and 70%.
        let s = Ollama::start();
        let o = Ollm::new();
        let digest = "sha256:0123456789abcdef";
        let step = |done: u64| {
            json!({"status": "pulling 0123456789ab", "digest": digest,
            "total": 400, "completed": done})
        };
        s.mock.script(
            "/api/pull",
            Reply::ndjson(&[
                json!({"status": "pulling manifest"}),
                step(100),
                step(300),
                step(400),
                json!({"status": "success"}),
            ]),
        );
        let out = o.run(&["--host", &s.mock.url(), "pull", "tinyllama:1b"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let all = format!("{}{}", stdout(&out), stderr(&out));
        for want in [" 25% (", " 75% (", "100% ("] {
            assert!(all.contains(want), "{want:?} in {all}");
        }
        assert!(!all.contains(" 20% (") && !all.contains(" 70% ("), "{all}");
    }

    #[test]
    fn show_ps_and_version_print_the_key_fields() {
        let s = Ollama::start();
        let o = Ollm::new();
        let out = o.run(&["--host", &s.mock.url(), "show", "qwen3:8b"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = stdout(&out);
        for want in ["tools", "thinking", "40960", "temperature"] {
            assert!(text.contains(want), "{want} in {text}");
        }
        s.mock.set_running("qwen3:8b");
        let out = o.run(&["--host", &s.mock.url(), "ps"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(stdout(&out).contains("qwen3:8b"), "{}", stdout(&out));
        let out = o.run(&["--host", &s.mock.url(), "version"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = stdout(&out);
        assert!(
            text.contains(&format!("ollm version {}", env!("CARGO_PKG_VERSION"))),
            "{text}"
        );
        assert!(text.contains("0.12.6"), "{text}");
        let out = o.run(&["--host", &s.mock.url(), "show", "nosuch:1b"]);
        assert_eq!(code(&out), 4, "{}", stderr(&out));
    }
}

mod failures {
    use super::*;

    #[test]
    fn ollama_model_not_found_exits_4_with_the_pull_hint() {
        let s = Ollama::start();
        let o = Ollm::new();
        let out = o.run(&["--host", &s.mock.url(), "run", "nosuch:1b", "hi"]);
        assert_eq!(code(&out), 4, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("ollama pull nosuch:1b"),
            "{}",
            stderr(&out)
        );
    }

    #[test]
    fn ollama_server_down_exits_3_with_the_start_hint() {
        let o = Ollm::new();
        let host = format!("127.0.0.1:{}", closed_port());
        let out = o.run(&["--host", &host, "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 3, "{}", stderr(&out));
        assert!(stderr(&out).contains("ollama serve"), "{}", stderr(&out));
        let out = o.run(&["--host", &host, "list"]);
        assert_eq!(code(&out), 3, "{}", stderr(&out));
    }

    #[test]
    fn openai_model_not_found_exits_4() {
        let s = OpenAi::start();
        let o = Ollm::new();
        s.mock.push_reply(mock_openai::Reply::http_error(
            404,
            "The model `nosuch` does not exist.",
        ));
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &s.mock.base_url(),
            "run",
            "nosuch",
            "hi",
        ]);
        assert_eq!(code(&out), 4, "{}", stderr(&out));
        assert!(stderr(&out).contains("nosuch"), "{}", stderr(&out));
        // The hint names a command that exists, and that command lists the server's models.
        assert!(stderr(&out).contains("`ollm list`"), "{}", stderr(&out));
        let out = o.run(&["--provider", "openai", "--host", &s.mock.base_url(), "list"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(stdout(&out).contains("mock-model"), "{}", stdout(&out));
    }

    #[test]
    fn openai_server_down_exits_3_with_a_hint() {
        let o = Ollm::new();
        let url = format!("http://127.0.0.1:{}/v1", closed_port());
        let out = o.run(&["--provider", "openai", "--host", &url, "run", "m", "hi"]);
        assert_eq!(code(&out), 3, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("is an OpenAI-compatible server running"),
            "{}",
            stderr(&out)
        );
    }
}

mod cancel {
    use super::*;

    /// Runs `ollm ARGS` against a reply that streams a little then stalls, sends SIGINT
    /// once stdout shows `marker`, and returns the exit code and all of stdout, after
    /// checking that the exit was prompt and the mock saw the stream closed early.
    fn interrupt(args: &[&str], marker: &str) -> (Option<i32>, String) {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script(
            "/api/chat",
            Reply::ndjson(&[chunk("first words"), chunk(" and more")]).then_stall(),
        );
        let url = s.mock.url();
        let mut all = vec!["--host", url.as_str(), "run", "qwen3:8b"];
        all.extend_from_slice(args);
        let mut child = o
            .command(&all)
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
        let index = s
            .mock
            .requests()
            .iter()
            .position(|r| r.path == "/api/chat")
            .unwrap();
        s.rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), s.mock.wait_closed_early(index))
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
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script("/api/chat", answer(&["first answer"]));
        s.mock.script("/api/chat", answer(&["second answer"]));
        let url = s.mock.url();
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "--session", "s1", "one"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "--session", "s1", "two"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "second answer\n");
        let msgs = chat_messages(&s.mock, 1);
        let turns: Vec<(&str, &str)> = msgs
            .iter()
            .filter(|m| m["role"] != "system")
            .map(|m| (m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        assert_eq!(
            turns,
            vec![
                ("user", "one"),
                ("assistant", "first answer"),
                ("user", "two")
            ]
        );
        let out = o.run(&["sessions", "list"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(
            stdout(&out)
                .lines()
                .any(|l| l.split('\t').next() == Some("s1")),
            "{}",
            stdout(&out)
        );
    }
}

mod openai_constrained {
    use super::*;

    #[test]
    fn a_constrained_tool_call_runs_and_the_final_answer_prints() {
        let s = OpenAi::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("notes.txt"), "gamma\n").unwrap();
        let call = json!({"tool": "read_file", "arguments": {"path": "notes.txt"}}).to_string();
        let fin = json!({"final_answer": "the notes say gamma"}).to_string();
        for text in [call, fin] {
            s.mock.push_reply(
                mock_openai::Reply::sse()
                    .content(&text)
                    .finish("stop")
                    .usage(10, 5)
                    .done()
                    .reply(),
            );
        }
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &s.mock.base_url(),
            "run",
            "mock-model",
            "--tool-mode",
            "constrained",
            "what do the notes say?",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "the notes say gamma\n");
        let reqs = s.mock.requests();
        assert_eq!(reqs.len(), 2, "{reqs:?}");
        let second = reqs[1]["messages"].to_string();
        assert!(second.contains("gamma"), "{second}");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
    }
}

mod more_output {
    use super::*;

    #[test]
    fn the_json_formats_report_a_failure_and_keep_the_exit_code() {
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let out = o.run(&[
            "--host",
            &url,
            "run",
            "nosuch:1b",
            "--output-format",
            "json",
            "hi",
        ]);
        assert_eq!(code(&out), 4, "{}", stderr(&out));
        let v: Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(v["finish_reason"], "error");
        assert_eq!(v["error"]["kind"], "model_not_found");
        assert_eq!(v["error"]["status"], 404);
        assert_eq!(
            v["error"]["hint"],
            "ollama pull nosuch:1b; `ollm list` shows the models the server has"
        );
        let out = o.run(&[
            "--host",
            &url,
            "run",
            "nosuch:1b",
            "--output-format",
            "stream-json",
            "hi",
        ]);
        assert_eq!(code(&out), 4, "{}", stderr(&out));
        let events: Vec<Value> = stdout(&out)
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
        let s = Ollama::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        s.mock.script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        s.mock.script("/api/chat", answer(&["ok"]));
        let out = o.run(&[
            "--host",
            &s.mock.url(),
            "run",
            "qwen3:8b",
            "--output-format",
            "stream-json",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let events: Vec<Value> = stdout(&out)
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
        assert_eq!(events[1]["content"], "alpha\n");
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
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        s.mock.script("/api/chat", thinking_reply());
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "--think", "hi"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "the answer\n");
        assert!(stderr(&out).contains("pondering"), "{}", stderr(&out));
        assert_eq!(s.mock.requests_to("/api/chat")[0].body["think"], true);
        s.mock.script("/api/chat", thinking_reply());
        let out = o.run(&[
            "--host",
            &url,
            "run",
            "qwen3:8b",
            "--think=high",
            "--hide-thinking",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "the answer\n");
        assert!(!stderr(&out).contains("pondering"), "{}", stderr(&out));
        assert_eq!(s.mock.requests_to("/api/chat")[1].body["think"], "high");
    }

    #[test]
    fn a_server_that_sends_nothing_times_out_with_exit_3() {
        let s = Ollama::start();
        let o = Ollm::new();
        o.write_config("[providers.ollama]\nkind = \"ollama\"\nidle_timeout_secs = 1\n");
        s.mock.script("/api/chat", Reply::ndjson(&[]).then_stall());
        let out = o.run(&["--host", &s.mock.url(), "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 3, "{}", stderr(&out));
        assert!(stderr(&out).contains("1s"), "{}", stderr(&out));
    }

    #[test]
    fn a_stall_after_partial_text_is_a_timeout_with_exit_3() {
        // Issue 16: `Hello` then nothing: the text is kept, and the error is a timeout
        // (exit 3), not an incomplete stream (exit 1), on both adapters.
        let s = Ollama::start();
        let o = Ollm::new();
        o.write_config("[providers.ollama]\nkind = \"ollama\"\nidle_timeout_secs = 1\n");
        s.mock.script(
            "/api/chat",
            Reply::ndjson(
                &[json!({"message": {"role": "assistant", "content": "Hello"},
                "done": false})],
            )
            .then_stall(),
        );
        let out = o.run(&["--host", &s.mock.url(), "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 3, "{}", stderr(&out));
        assert!(stdout(&out).contains("Hello"), "{}", stdout(&out));

        let s = OpenAi::start();
        let o = Ollm::new();
        o.write_config("[providers.openai]\nkind = \"openai\"\nidle_timeout_secs = 1\n");
        s.mock
            .push_reply(mock_openai::Reply::sse().content("Hello").stall().reply());
        let url = s.mock.base_url();
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &url,
            "run",
            "mock-model",
            "hi",
        ]);
        assert_eq!(code(&out), 3, "{}", stderr(&out));
        assert!(stdout(&out).contains("Hello"), "{}", stdout(&out));
    }

    #[test]
    fn openai_interleaved_parallel_tool_calls_are_two_calls() {
        // Issue 16: fragments alternating between index 0 and 1 (no ids after the first)
        // became 12 calls; they are two, and the follow-up carries two results.
        let s = OpenAi::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("a.txt"), "alpha\n").unwrap();
        std::fs::write(o.dir.path().join("b.txt"), "beta\n").unwrap();
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
        s.mock.push_reply(reply.finish("tool_calls").done().reply());
        s.mock.push_reply(
            mock_openai::Reply::sse()
                .content("ok")
                .finish("stop")
                .done()
                .reply(),
        );
        let url = s.mock.base_url();
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &url,
            "run",
            "mock-model",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let second = &s.mock.requests()[1]["messages"];
        let tools: Vec<&Value> = second
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .collect();
        assert_eq!(tools.len(), 2, "{second:#}");
        assert_eq!(tools[0]["tool_call_id"], "call_a");
        assert_eq!(tools[0]["content"], "alpha\n");
        assert_eq!(tools[1]["tool_call_id"], "call_b");
        assert_eq!(tools[1]["content"], "beta\n");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
    }

    #[test]
    fn openai_auth_refused_exits_5_with_a_hint() {
        let s = OpenAi::start();
        let o = Ollm::new();
        s.mock
            .push_reply(mock_openai::Reply::http_error(401, "invalid api key"));
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &s.mock.base_url(),
            "run",
            "mock-model",
            "hi",
        ]);
        assert_eq!(code(&out), 5, "{}", stderr(&out));
        assert!(stderr(&out).contains("invalid api key"), "{}", stderr(&out));
        assert!(stderr(&out).contains("api_key_env"), "{}", stderr(&out));
    }

    #[test]
    fn rm_deletes_and_a_second_rm_is_model_not_found() {
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let out = o.run(&["--host", &url, "rm", "gemma:2b"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(stdout(&out).contains("gemma:2b"), "{}", stdout(&out));
        let out = o.run(&["--host", &url, "list"]);
        assert!(!stdout(&out).contains("gemma:2b"), "{}", stdout(&out));
        let out = o.run(&["--host", &url, "rm", "gemma:2b"]);
        assert_eq!(code(&out), 4, "{}", stderr(&out));
    }
}

mod server_behaviour {
    use super::*;

    #[test]
    fn a_model_without_tools_or_thinking_still_answers() {
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let out = o.run(&["--host", &url, "run", "gemma:2b", "--think", "hi"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "Hello from mock\n");
        assert!(stderr(&out).contains("thinking"), "{}", stderr(&out));
        // The capabilities were read first; neither tools nor thinking were sent.
        let chat = &s.mock.requests_to("/api/chat")[0].body;
        assert!(chat["tools"].as_array().is_none_or(Vec::is_empty), "{chat}");
        assert!(chat["think"].is_null() || chat["think"] == false, "{chat}");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
    }

    #[test]
    fn ollama_host_from_the_environment_is_used() {
        let s = Ollama::start();
        let o = Ollm::new();
        let out = o.run_with(
            &["run", "qwen3:8b", "hi"],
            &[("OLLAMA_HOST", &s.mock.host_port())],
            None,
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "Hello from mock\n");
    }

    #[test]
    fn a_busy_server_is_retried_with_a_warning() {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script(
            "/api/chat",
            Reply::error(503, "server busy").header("Retry-After", "0"),
        );
        let out = o.run(&["--host", &s.mock.url(), "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "Hello from mock\n");
        assert!(stderr(&out).contains("server busy"), "{}", stderr(&out));
        assert_eq!(s.mock.requests_to("/api/chat").len(), 2);
    }

    #[test]
    fn a_broken_stream_keeps_the_partial_text_and_exits_1() {
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        s.mock
            .script("/api/chat", Reply::ndjson(&[chunk("half")]).then_abort());
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert_eq!(stdout(&out), "half\n");
        assert!(stderr(&out).contains("partial"), "{}", stderr(&out));
        s.mock.script(
            "/api/chat",
            Reply::ndjson(&[chunk("x"), json!({"error": "model runner crashed"})]),
        );
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("model runner crashed"),
            "{}",
            stderr(&out)
        );
    }

    #[test]
    fn an_answer_cut_at_the_token_limit_warns() {
        let s = Ollama::start();
        let o = Ollm::new();
        s.mock.script(
            "/api/chat",
            Reply::ndjson(&[chunk("cut sh"), done("length")]),
        );
        let out = o.run(&["--host", &s.mock.url(), "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(stdout(&out), "cut sh\n");
        assert!(stderr(&out).contains("token limit"), "{}", stderr(&out));
    }
}

mod run_options {
    use super::*;

    #[test]
    fn a_prompt_argument_and_piped_stdin_are_joined() {
        let s = Ollama::start();
        let o = Ollm::new();
        let out = o.run_with(
            &["--host", &s.mock.url(), "run", "qwen3:8b", "summarise:"],
            &[],
            Some("the notes\n"),
        );
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let msgs = chat_messages(&s.mock, 0);
        let content = msgs.last().unwrap()["content"].as_str().unwrap();
        assert!(content.starts_with("summarise:"), "{content}");
        assert!(content.contains("the notes"), "{content}");
    }

    #[test]
    fn tools_are_offered_unless_no_tools_and_the_system_prompt_leads() {
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "hi"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let tools: Vec<String> = s.mock.requests_to("/api/chat")[0].body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
            .collect();
        for want in [
            "read_file",
            "list_dir",
            "search_text",
            "write_file",
            "run_command",
        ] {
            assert!(tools.iter().any(|t| t == want), "{want} in {tools:?}");
        }
        let out = o.run(&[
            "--host",
            &url,
            "run",
            "qwen3:8b",
            "--no-tools",
            "--system",
            "be brief",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let body = &s.mock.requests_to("/api/chat")[1].body;
        assert!(body["tools"].as_array().is_none_or(Vec::is_empty), "{body}");
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "be brief"})
        );
    }

    #[test]
    fn the_turn_limit_stops_the_run_with_a_warning() {
        let s = Ollama::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        s.mock.script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        let out = o.run(&[
            "--host",
            &s.mock.url(),
            "run",
            "qwen3:8b",
            "--max-turns",
            "1",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert!(stderr(&out).contains("--max-turns"), "{}", stderr(&out));
        assert_eq!(s.mock.requests_to("/api/chat").len(), 1);
    }

    #[test]
    fn a_resumed_session_with_a_tool_call_replays_valid_history() {
        let s = Ollama::start();
        let o = Ollm::new();
        let url = s.mock.url();
        std::fs::write(o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        s.mock.script(
            "/api/chat",
            tool_call("read_file", json!({"path": "notes.txt"})),
        );
        s.mock.script("/api/chat", answer(&["alpha it is"]));
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "--session", "t", "read"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let out = o.run(&["--host", &url, "run", "qwen3:8b", "--session", "t", "again"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let msgs = chat_messages(&s.mock, 2);
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant", "user"]);
        assert_eq!(msgs[1]["tool_calls"][0]["id"], msgs[2]["tool_call_id"]);
        assert_eq!(msgs[2]["content"], "alpha\n");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
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
        assert!(err.contains("✓ read_file port = 8080"), "{err}");
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
    fn a_text_call_to_an_unknown_tool_is_answered_with_the_tools_on_offer() {
        let s = OpenAi::start();
        let o = Ollm::new();
        let reply =
            "```json\n{\"name\": \"launch_code\", \"arguments\": {\"file\": \"main.py\"}}\n```";
        let (out, err) = run_text_call(&s, &o, reply, "text");
        assert_eq!(out, "The port is 8080.\n");
        assert!(
            err.contains("✗ launch_code Error: Unknown tool \"launch_code\"; available: "),
            "{err}"
        );
        let second = &s.mock.requests()[1]["messages"];
        let result = &second[second.as_array().unwrap().len() - 1];
        assert_eq!(result["role"], "tool");
        let content = result["content"].as_str().unwrap();
        assert!(content.contains("read_file"), "{content}");
    }

    #[test]
    fn a_streamed_native_tool_call_runs_and_the_answer_streams() {
        let s = OpenAi::start();
        let o = Ollm::new();
        std::fs::write(o.dir.path().join("notes.txt"), "alpha\n").unwrap();
        // The call's arguments arrive split over two chunks, as servers stream them.
        s.mock.push_reply(
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
        s.mock.push_reply(
            mock_openai::Reply::sse()
                .content("it is ")
                .content("alpha")
                .finish("stop")
                .usage(20, 3)
                .done()
                .reply(),
        );
        let out = o.run(&[
            "--provider",
            "openai",
            "--host",
            &s.mock.base_url(),
            "run",
            "mock-model",
            "--output-format",
            "stream-json",
            "hi",
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let events: Vec<Value> = stdout(&out)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            // The strategy line is pinned by its own test.
            .filter(|e: &Value| e["type"] != "strategy_chosen")
            .collect();
        assert_eq!(events[0]["type"], "tool_call_started");
        assert_eq!(events[0]["arguments"], json!({"path": "notes.txt"}));
        assert_eq!(events[1]["type"], "tool_result");
        assert_eq!(events[1]["content"], "alpha\n");
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
        let second = &s.mock.requests()[1]["messages"];
        assert_eq!(second[2]["role"], "tool");
        assert_eq!(second[2]["tool_call_id"], "c1");
        assert!(s.mock.violations().is_empty(), "{:?}", s.mock.violations());
    }

    #[test]
    fn show_on_llama_server_reads_props() {
        // Issue 16: the window per slot, the template's tool support and the modalities.
        let s = OpenAi::start();
        s.mock.set_props(json!({
            "default_generation_settings": {"n_ctx": 4096},
            "total_slots": 2,
            "chat_template_caps": {"supports_tools": true, "supports_tool_calls": true},
            "modalities": {"vision": true, "audio": false},
            "chat_template": "{%- if tools %}<tool_call>{% endif %}"
        }));
        let o = Ollm::new();
        let url = s.mock.base_url();
        let out = o.run(&["--provider", "openai", "--host", &url, "show", "mock-model"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let text = stdout(&out);
        for want in ["mock-model", "4096", "tools", "vision"] {
            assert!(text.contains(want), "{want} in {text}");
        }
    }

    #[test]
    fn ollama_only_commands_say_they_are_unsupported() {
        let s = OpenAi::start();
        let o = Ollm::new();
        let url = s.mock.base_url();
        for cmd in [
            &["show", "mock-model"][..],
            &["pull", "x"],
            &["ps"],
            &["rm", "x"],
        ] {
            let mut args = vec!["--provider", "openai", "--host", url.as_str()];
            args.extend_from_slice(cmd);
            let out = o.run(&args);
            assert_eq!(code(&out), 1, "{cmd:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("does not support"),
                "{cmd:?}: {}",
                stderr(&out)
            );
            // Issue 16: and what the server offers instead.
            assert!(
                stderr(&out).contains(&format!("{url}/models")),
                "{cmd:?}: {}",
                stderr(&out)
            );
        }
        let out = o.run(&["--provider", "openai", "--host", &url, "version"]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
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
        // The default cap is always sent.
        assert_eq!(body["max_tokens"], 4096);
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
        for key in ["temperature", "top_p", "top_k", "seed", "stop"] {
            assert!(body.get(key).is_none(), "{key} sent: {body:#}");
        }
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
