//! `ollm serve` through the binary: the config file's `[serve]` table and the flags
//! settle into the repair policy per model and per key (issue 37), and bad settings are
//! usage errors before anything listens.

use super::*;
use std::io::{BufRead, BufReader};
use std::process::Child;

/// A running `ollm serve`, killed when dropped.
struct Served {
    child: Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `ollm --provider openai serve --listen 127.0.0.1:0 --upstream URL ARGS` and
/// reads the address it prints once listening.
fn serve(o: &Ollm, upstream: &str, args: &[&str], env: &[(&str, &str)]) -> Served {
    let mut all = vec![
        "--provider",
        "openai",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        upstream,
    ];
    all.extend_from_slice(args);
    let mut cmd = o.command(&all);
    cmd.envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_default()
        .to_owned();
    assert!(base.starts_with("http://"), "{line:?}");
    Served { child, base }
}

/// Posts a request with tools for `model` with `key`; the status, the policy header and
/// the body.
fn ask(rt: &tokio::runtime::Runtime, base: &str, model: &str, key: &str) -> (u16, String, Value) {
    let body = json!({
        "model": model,
        "messages": [{"role": "user", "content": "What is in notes.txt?"}],
        "tools": [{"type": "function", "function": {"name": "read_file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}],
    });
    rt.block_on(async {
        let response = reqwest::Client::new()
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let policy = response
            .headers()
            .get("x-ollm-repair-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        (status, policy, response.json().await.unwrap_or_default())
    })
}

const FENCED: &str =
    "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```";

#[test]
fn the_serve_table_and_the_flags_set_the_policy_per_model_and_per_key() {
    let s = OpenAi::start();
    for _ in 0..4 {
        s.mock.push_reply(
            mock_openai::Reply::sse()
                .content(FENCED)
                .finish("stop")
                .done()
                .reply(),
        );
    }
    s.mock.set_models(&["plain", "careful", "chosen"]);
    let o = Ollm::new();
    // The policy alone: no `tool-or-none` choice, which would take a scripted reply.
    o.write_config(
        "[serve]\nrepair = \"on\"\ntool_or_none = false\n\n[serve.models.careful]\nrepair = \"flag\"\n\n\
         [serve.keys.agent]\napi_key_env = \"OLLM_TEST_AGENT_KEY\"\nrepair = \"off\"\n",
    );
    let env = [("OLLM_TEST_AGENT_KEY", "agent-key")];
    let args = ["--api-key", "editor-key", "--repair-model", "chosen=off"];
    let served = serve(&o, &s.mock.base_url(), &args, &env);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cases = [
        ("plain", "editor-key", "on"),
        ("careful", "editor-key", "flag"),
        ("chosen", "editor-key", "off"),
        ("careful", "agent-key", "off"),
    ];
    for (model, key, want) in cases {
        let (status, policy, reply) = ask(&rt, &served.base, model, key);
        assert_eq!(
            (status, policy.as_str()),
            (200, want),
            "{model} with {key}: {reply}"
        );
        let calls = reply["choices"][0]["message"]["tool_calls"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(
            calls,
            usize::from(want == "on"),
            "{model} with {key}: {reply}"
        );
        assert_eq!(
            reply["ollm"]["repair"]["status"].as_str(),
            match want {
                "on" => Some("recovered"),
                "flag" => Some("flagged"),
                _ => None,
            },
            "{reply}"
        );
    }
    let (status, _, _) = ask(&rt, &served.base, "plain", "wrong-key");
    assert_eq!(status, 401);
}

#[test]
fn bad_serve_settings_are_usage_errors() {
    let o = Ollm::new();
    let port = closed_port();
    let upstream = format!("http://127.0.0.1:{port}/v1");
    let run = |args: &[&str]| -> Ran {
        let mut all = vec![
            "--provider",
            "openai",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            upstream.as_str(),
        ];
        all.extend_from_slice(args);
        o.run(&all).into()
    };
    let bad = run(&["--repair-model", "no-policy"]);
    assert_eq!(bad.code, 2, "{}", bad.err);
    assert!(bad.err.contains("MODEL=off|flag|on"), "{}", bad.err);
    o.write_config("[serve.keys.agent]\napi_key_env = \"OLLM_TEST_UNSET_KEY\"\n");
    let unset = run(&[]);
    assert_eq!(unset.code, 2, "{}", unset.err);
    assert!(unset.err.contains("OLLM_TEST_UNSET_KEY"), "{}", unset.err);
    o.write_config("[serve]\nrepiar = \"off\"\n");
    let misspelt = run(&[]);
    assert_eq!(misspelt.code, 2, "{}", misspelt.err);
    assert!(misspelt.err.contains("repiar"), "{}", misspelt.err);
}
