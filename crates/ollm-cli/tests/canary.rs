//! Issue 12's secrets canary: the `ollm` binary runs a conversation with tools against the
//! mock OpenAI-compatible server, with one API key in the environment (named by the
//! provider's `api_key_env`) and another in the host URL (`http://user:key@host`), under
//! `RUST_LOG=trace` and the most talkative output (`--output-format stream-json`; ollm has
//! no other verbose flag). Neither key may appear in stdout, stderr, any file ollm wrote
//! (the session, the audit log, history) or anything sent to the server (the tool results
//! go there).
//!
//! A test binary of its own: it needs only the binary and the mock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "setup helpers fail the test loudly on a broken environment"
)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;
use test_utils::mock_openai::{MockOpenAi, Reply};

const ENV_KEY: &str = "sk-env-canary-91b2c7";
const HOST_KEY: &str = "sk-host-canary-7f3a55";

/// An SSE reply calling `name` with `arguments` (a JSON object, sent as a string).
fn call(id: &str, name: &str, arguments: serde_json::Value) -> Reply {
    Reply::sse()
        .data(
            json!({"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":id,
            "type":"function","function":{"name":name,"arguments":arguments.to_string()}}]}}]}),
        )
        .finish("tool_calls")
        .done()
        .reply()
}

/// Every file under `dir` but `skip`, as text (lossy), with its path.
fn files(dir: &Path, skip: &Path, out: &mut Vec<(String, String)>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path == skip {
            continue;
        }
        if path.is_dir() {
            files(&path, skip, out);
        } else {
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            out.push((path.display().to_string(), text));
        }
    }
}

/// The `run` of the canary conversation. Its replies are scripted request by request, so
/// `tool-or-none`'s own request is turned off.
const RUN: &[&str] = &[
    "run",
    "--coach-off",
    "tool-or-none",
    "mock-model",
    "--yes",
    "--tool-mode",
    "native",
    "--session",
    "canary",
    "--output-format",
    "stream-json",
    "run env and show me the environment",
];

/// Runs `ollm --provider lab --host HOST ARGS` in `dir/work` with both keys set.
fn run(dir: &Path, host: &str, args: &[&str]) -> Output {
    let config = dir.join("config.toml");
    Command::new(env!("CARGO_BIN_EXE_ollm"))
        .args(["--provider", "lab", "--host", host])
        .args(args)
        .current_dir(dir.join("work"))
        .env("OLLM_CONFIG", &config)
        .env("OLLM_DATA_DIR", dir.join("data"))
        .env("NO_COLOR", "1")
        .env("RUST_LOG", "trace")
        .env("RUST_BACKTRACE", "1")
        .env("OLLM_CANARY_KEY", ENV_KEY)
        .env_remove("OLLAMA_HOST")
        .env_remove("OLLM_HOST")
        .env_remove("OLLM_PROVIDER")
        .env_remove("OLLM_MODEL")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .unwrap()
}

#[test]
fn no_key_leaks_into_output_files_or_what_the_server_is_sent() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mock = rt.block_on(MockOpenAi::start()).unwrap();
    mock.push_reply(call("c1", "run_command", json!({"program": "env"})));
    mock.push_reply(call("c2", "read_file", json!({"path": "notes.txt"})));
    mock.push_reply(
        Reply::sse()
            .content("all done")
            .finish("stop")
            .done()
            .reply(),
    );

    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("work")).unwrap();
    std::fs::write(dir.path().join("work/notes.txt"), "plain notes\n").unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        "[providers.lab]\nkind = \"openai\"\napi_key_env = \"OLLM_CANARY_KEY\"\n\n\
         [tools]\nallowed_commands = [\"env\", \"cat\"]\n",
    )
    .unwrap();
    let base = mock.base_url();
    let host = base.replacen("http://", &format!("http://canary:{HOST_KEY}@"), 1);

    let out = run(dir.path(), &host, RUN);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );

    // The run really went through both tools and wrote its files, so the search below
    // looks at something.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "{requests:#?}");
    assert!(stdout.contains("all done"), "{stdout}");
    let mut written = Vec::new();
    files(dir.path(), &config, &mut written);
    let names: Vec<&str> = written.iter().map(|(p, _)| p.as_str()).collect();
    assert!(
        names.iter().any(|p| p.contains("canary")),
        "no session file: {names:?}"
    );
    assert!(
        names.iter().any(|p| p.ends_with("audit.log")),
        "no audit log: {names:?}"
    );
    let sent = serde_json::to_string(&requests).unwrap();
    assert!(
        sent.contains("plain notes"),
        "the tool results were not sent: {sent}"
    );

    // Where the address itself is printed: `config show`, and the errors of a server
    // that is down (at the same address with a closed port).
    let shown = run(dir.path(), &host, &["config", "show"]);
    assert_eq!(shown.status.code(), Some(0));
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let down_host = format!("http://canary:{HOST_KEY}@127.0.0.1:{closed}/v1");
    let down = run(dir.path(), &down_host, &["run", "mock-model", "hi"]);
    assert_eq!(down.status.code(), Some(3), "{down:?}");
    let text = |o: &Output| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(text(&shown).contains("***@127.0.0.1"), "{}", text(&shown));
    assert!(
        text(&down).contains(&format!("127.0.0.1:{closed}")),
        "{}",
        text(&down)
    );

    let mut places = vec![
        ("stdout".to_owned(), stdout.into_owned()),
        ("stderr".to_owned(), stderr.into_owned()),
        ("the requests sent to the server".to_owned(), sent),
        ("config show".to_owned(), text(&shown)),
        ("a server-down error".to_owned(), text(&down)),
    ];
    places.extend(written);
    for (place, text) in &places {
        for key in [ENV_KEY, HOST_KEY] {
            assert!(!text.contains(key), "{key} leaked into {place}:\n{text}");
        }
    }
}
