//! Issue 14 through the binary: the log (`-v`, `-vv`, `-vvv`, `RUST_LOG`, `--log-file`).
//! Secrets never reach it, stdout stays machine-readable at any verbosity, an unknown
//! tool is a warning, and a plain run prints nothing extra.

use super::*;

/// The canaries: an API key, credentials in the address and a custom header's value.
const KEY: &str = "sk-key-canary-1f2e";
const URL_SECRET: &str = "sk-url-canary-9a8b";

/// Asserts that no canary appears in `text` (`what` names where it was looked for).
fn assert_no_secret(what: &str, text: &str) {
    for canary in [KEY, URL_SECRET, "Bearer "] {
        assert!(!text.contains(canary), "{canary} in {what}:\n{text}");
    }
}

/// One answered prompt against a mock OpenAI-compatible server.
fn openai_answering() -> OpenAi {
    let s = OpenAi::start();
    s.mock.push_reply(
        mock_openai::Reply::sse()
            .content("the answer")
            .finish("stop")
            .done()
            .reply(),
    );
    s
}

#[test]
fn at_trace_the_request_is_logged_and_the_api_key_is_not() {
    let s = openai_answering();
    let o = Ollm::new();
    o.write_config(&format!(
        "[providers.lab]\nkind = \"openai\"\nbase_url = {:?}\napi_key_env = \"OLLM_TEST_LOG_KEY\"\n",
        s.mock.base_url()
    ));
    let log = o.dir.path().join("ollm.log");
    let log_arg = log.display().to_string();
    let args = [
        "--provider",
        "lab",
        "-vvv",
        "--log-file",
        &log_arg,
        "run",
        "m",
        "the prompt",
    ];
    let out: Ran = o
        .run_with(&args, &[("OLLM_TEST_LOG_KEY", KEY)], None)
        .into();
    out.ok();
    assert_eq!(out.out, "the answer\n");
    let logged = std::fs::read_to_string(&log).unwrap();
    // The request, its body and the raw stream are there; the key is not.
    assert!(logged.contains("request"), "{logged}");
    assert!(logged.contains("/chat/completions"), "{logged}");
    assert!(logged.contains("the prompt"), "{logged}");
    assert!(logged.contains("credentials=true"), "{logged}");
    assert!(logged.contains("raw"), "{logged}");
    assert!(logged.contains("run{model=m}:turn{n=1}"), "{logged}");
    assert_no_secret("the log file", &logged);
    assert_no_secret("stderr", &out.err);
    // With a log file the log is not on stderr.
    assert!(!out.err.contains("TRACE"), "{}", out.err);
}

#[test]
fn at_trace_on_stderr_credentials_in_the_address_stay_out() {
    let s = openai_answering();
    let o = Ollm::new();
    let host = s
        .mock
        .base_url()
        .replace("http://", &format!("http://me:{URL_SECRET}@"));
    let args = [
        "--provider",
        "openai",
        "--host",
        &host,
        "run",
        "m",
        "hi",
        "-vvv",
    ];
    let out: Ran = o.run(&args).into();
    out.ok();
    assert_eq!(out.out, "the answer\n");
    assert!(out.err.contains("DEBUG"), "{}", out.err);
    assert!(out.err.contains("request"), "{}", out.err);
    assert!(out.err.contains("TRACE"), "{}", out.err);
    assert!(out.err.contains("http://127.0.0.1:"), "{}", out.err);
    assert_no_secret("stderr", &out.err);
    assert_no_secret("stdout", &out.out);
}

#[test]
fn stream_json_stays_json_lines_at_debug() {
    let c = Case::ollama();
    c.mock().script("/api/chat", answer(&["one", " two"]));
    let out = c.run(&[
        "run",
        "qwen3:8b",
        "--output-format",
        "stream-json",
        "-vv",
        "hi",
    ]);
    out.ok();
    assert!(out.err.contains("DEBUG"), "the log is on: {}", out.err);
    assert!(!out.out.is_empty());
    for line in out.out.lines() {
        let parsed: Result<Value, _> = serde_json::from_str(line);
        assert!(parsed.is_ok(), "not JSON: {line:?}\n{}", out.out);
    }
    let out = c.run(&["run", "qwen3:8b", "--output-format", "json", "-vvv", "hi"]);
    out.ok();
    let parsed: Result<Value, _> = serde_json::from_str(&out.out);
    assert!(parsed.is_ok(), "{}", out.out);
}

#[test]
fn an_unknown_tool_is_a_warning_even_without_verbose() {
    let c = Case::ollama();
    c.mock()
        .script("/api/chat", tool_call("launch_rockets", json!({})));
    c.mock().script("/api/chat", answer(&["done"]));
    let out = c.run(&["run", "qwen3:8b", "hi"]);
    out.ok();
    assert!(out.err.contains("WARN"), "{}", out.err);
    assert!(out.err.contains("unknown tool"), "{}", out.err);
    assert!(out.err.contains("launch_rockets"), "{}", out.err);

    // With a log file it goes there, not to stderr.
    c.mock()
        .script("/api/chat", tool_call("launch_rockets", json!({})));
    c.mock().script("/api/chat", answer(&["done"]));
    let log = c.o.dir.path().join("warn.log");
    let log_arg = log.display().to_string();
    let out = c.run(&["--log-file", &log_arg, "run", "qwen3:8b", "hi"]);
    out.ok();
    assert!(!out.err.contains("unknown tool"), "{}", out.err);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("WARN"), "{logged}");
    assert!(logged.contains("launch_rockets"), "{logged}");
}

/// "ok", after a prompt the server read whole (a low count is a truncation warning).
fn plain_answer() -> Reply {
    let mut last = done("stop");
    last["prompt_eval_count"] = json!(2000);
    Reply::ndjson(&[chunk("ok"), last])
}

#[test]
fn a_plain_run_prints_no_log_and_verbose_adds_info() {
    let c = Case::ollama();
    c.mock().script("/api/chat", plain_answer());
    let out = c.run(&["run", "qwen3:8b", "hi"]);
    out.ok();
    assert_eq!(out.out, "ok\n");
    assert_eq!(out.err, "", "a plain run says nothing on stderr");

    c.mock().script("/api/chat", plain_answer());
    let out = c.run(&["run", "qwen3:8b", "hi", "-v"]);
    out.ok();
    assert_eq!(out.out, "ok\n");
    assert!(out.err.contains("ollm: tool strategy:"), "{}", out.err);
    assert!(out.err.contains("INFO"), "{}", out.err);
    assert!(out.err.contains("run finished"), "{}", out.err);
    assert!(!out.err.contains("DEBUG"), "{}", out.err);
}

#[test]
fn rust_log_overrides_the_level_and_a_bad_one_exits_2() {
    let c = Case::ollama();
    c.mock().script("/api/chat", answer(&["ok"]));
    let env = [("RUST_LOG", "ollm_bridge=debug")];
    let out = c.run_with(&["run", "qwen3:8b", "hi"], &env, None);
    out.ok();
    assert!(out.err.contains("DEBUG"), "{}", out.err);
    assert!(out.err.contains("request"), "{}", out.err);
    let env = [("RUST_LOG", "ollm=loud")];
    let out = c.run_with(&["run", "qwen3:8b", "hi"], &env, None);
    assert_eq!(out.code, 2, "{}", out.err);
    assert!(out.err.contains("RUST_LOG"), "{}", out.err);
}

#[test]
fn a_log_file_that_cannot_be_opened_exits_2() {
    let o = Ollm::new();
    o.write_config("");
    // Its folder is a file.
    let log = o.config_path().join("ollm.log");
    let out: Ran = o
        .run(&["--log-file", &log.display().to_string(), "config", "path"])
        .into();
    assert_eq!(out.code, 2, "{}", out.err);
    assert!(out.err.contains("log file"), "{}", out.err);
}
