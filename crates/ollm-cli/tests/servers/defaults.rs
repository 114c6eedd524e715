//! Issue 14 through the binary: the config file's defaults for `ollm run` (top level,
//! `[providers.NAME]`, `[models."NAME"]`), `--keep-alive`, and custom `headers` reach
//! the wire; `ollm config show` prints them, secret-looking header values masked.

use super::*;
use test_utils::mock_ollama::Recorded;

/// "ok", after a prompt the server read whole (a low count is a truncation warning).
fn plain_answer() -> Reply {
    let mut last = done("stop");
    last["prompt_eval_count"] = json!(2000);
    Reply::ndjson(&[chunk("ok"), last])
}

/// Runs `ollm run qwen3:8b FLAGS hi` against the mock Ollama with `config` as the config
/// file; the first `/api/chat` request.
fn first_request(config: &str, flags: &[&str]) -> (Ran, Recorded) {
    let c = Case::ollama();
    c.o.write_config(config);
    c.mock().script("/api/chat", plain_answer());
    let mut args = vec!["run", "qwen3:8b"];
    args.extend_from_slice(flags);
    args.push("hi");
    let out = c.run(&args);
    let sent = c.mock().requests_to("/api/chat").first().cloned();
    (out, sent.expect("a chat request"))
}

/// Each row: the config file, the flags, a JSON pointer into the body and the value it
/// must hold there (`null`: absent).
#[test]
fn config_defaults_reach_the_wire() {
    let provider = "[providers.ollama]\nkind = \"ollama\"\n";
    let model = "[models.\"qwen3:8b\"]\n";
    let rows: Vec<(String, &[&str], &str, Value)> = vec![
        (
            "temperature = 0.5".into(),
            &[],
            "/options/temperature",
            json!(0.5),
        ),
        (
            format!("{provider}top_k = 7"),
            &[],
            "/options/top_k",
            json!(7),
        ),
        (format!("{model}seed = 42"), &[], "/options/seed", json!(42)),
        ("top_p = 0.25".into(), &[], "/options/top_p", json!(0.25)),
        (
            "stop = [\"END\"]".into(),
            &[],
            "/options/stop",
            json!(["END"]),
        ),
        (
            "max_tokens = 77".into(),
            &[],
            "/options/num_predict",
            json!(77),
        ),
        (
            "keep_alive = \"10m\"".into(),
            &[],
            "/keep_alive",
            json!("10m"),
        ),
        ("keep_alive = -1".into(), &[], "/keep_alive", json!(-1)),
        (
            String::new(),
            &["--keep-alive", "0"],
            "/keep_alive",
            json!(0),
        ),
        (String::new(), &[], "/keep_alive", Value::Null),
        ("think = \"off\"".into(), &[], "/think", json!(false)),
        ("think = true".into(), &[], "/think", json!(true)),
        (
            "system = \"be brief\"".into(),
            &[],
            "/messages/0/content",
            json!("be brief"),
        ),
        // ReAct describes the tools in the prompt: no native `tools`.
        ("tool_mode = \"react\"".into(), &[], "/tools", Value::Null),
        // Precedence on the wire: flag > model > provider > top level.
        (
            format!("temperature = 0.1\n{provider}temperature = 0.2\n{model}temperature = 0.3"),
            &[],
            "/options/temperature",
            json!(0.3),
        ),
        (
            format!("temperature = 0.1\n{provider}temperature = 0.2\n"),
            &[],
            "/options/temperature",
            json!(0.2),
        ),
        (
            format!("temperature = 0.1\n{model}temperature = 0.3"),
            &["--temperature", "0.75"],
            "/options/temperature",
            json!(0.75),
        ),
        // Another model's table does not apply.
        (
            "temperature = 0.1\n[models.other]\ntemperature = 0.3".into(),
            &[],
            "/options/temperature",
            json!(0.1),
        ),
        (
            format!("{model}max_tokens = 50"),
            &["--max-tokens", "60"],
            "/options/num_predict",
            json!(60),
        ),
    ];
    for (config, flags, pointer, want) in rows {
        let (out, sent) = first_request(&config, flags);
        out.ok();
        let got = sent.body.pointer(pointer).cloned().unwrap_or(Value::Null);
        // f32 values are compared as sent (0.1f32 is not 0.1f64).
        let close = match (got.as_f64(), want.as_f64()) {
            (Some(a), Some(b)) => (a - b).abs() < 1e-6,
            _ => got == want,
        };
        assert!(close, "{config:?} {flags:?}: {pointer} = {got}, not {want}");
    }
}

#[test]
fn max_turns_and_hide_thinking_come_from_the_config() {
    let c = Case::ollama();
    c.o.write_config("max_turns = 1\nhide_thinking = true\n");
    std::fs::write(c.o.dir.path().join("notes.txt"), "alpha\n").unwrap();
    c.mock().script(
        "/api/chat",
        tool_call("read_file", json!({"path": "notes.txt"})),
    );
    let out = c.run(&["run", "qwen3:8b", "hi"]);
    out.ok();
    assert!(out.err.contains("--max-turns"), "{}", out.err);
    assert_eq!(c.mock().requests_to("/api/chat").len(), 1);

    let thinking = Reply::ndjson(&[
        json!({"model": "qwen3:8b", "created_at": "2025-05-01T12:00:00Z",
            "message": {"role": "assistant", "content": "", "thinking": "pondering"},
            "done": false}),
        chunk("the answer"),
        done("stop"),
    ]);
    c.mock().script("/api/chat", thinking);
    let out = c.run(&["run", "qwen3:8b", "--think", "hi"]);
    out.ok();
    assert_eq!(out.out, "the answer\n");
    assert!(!out.err.contains("pondering"), "{}", out.err);
}

#[test]
fn a_bad_value_in_the_config_exits_2_naming_its_table() {
    let o = Ollm::new();
    let port = closed_port().to_string();
    let host = format!("http://127.0.0.1:{port}");
    for (config, table) in [
        ("temperature = -1", "top level"),
        ("[models.\"m\"]\ntop_p = 3.0", "[models.\"m\"]"),
        (
            "[providers.ollama]\nkind = \"ollama\"\nmax_turns = 0",
            "[providers.ollama]",
        ),
        ("keep_alive = \"soon\"", "soon"),
        ("think = \"max\"", "max"),
    ] {
        o.write_config(config);
        let out: Ran = o.run(&["--host", &host, "run", "m", "hi"]).into();
        assert_eq!(out.code, 2, "{config}: {}", out.err);
        assert!(out.err.contains(table), "{config}: {}", out.err);
    }
    let out: Ran = o
        .run(&["--host", &host, "run", "m", "--keep-alive", "soon", "hi"])
        .into();
    assert_eq!(out.code, 2, "{}", out.err);
}

#[test]
fn headers_reach_the_wire_the_providers_over_the_top_levels() {
    let config = "headers = { \"X-Team\" = \"blue\", \"X-Api-Key\" = \"sk-global-canary\" }\n\
                  [providers.ollama]\nkind = \"ollama\"\n\
                  headers = { \"x-api-key\" = \"sk-provider-canary\" }\n";
    let (out, sent) = first_request(config, &[]);
    out.ok();
    assert_eq!(sent.header("x-team"), Some("blue"));
    assert_eq!(sent.header("x-api-key"), Some("sk-provider-canary"));
    let keys = sent
        .headers
        .iter()
        .filter(|(n, _)| n == "x-api-key")
        .count();
    assert_eq!(keys, 1, "{:?}", sent.headers);
}

#[test]
fn openai_gets_the_sampling_defaults_and_no_keep_alive() {
    let s = OpenAi::start();
    let o = Ollm::new();
    o.write_config("temperature = 0.5\nkeep_alive = \"10m\"\nseed = 3\n");
    s.mock.push_reply(
        mock_openai::Reply::sse()
            .content("ok")
            .finish("stop")
            .done()
            .reply(),
    );
    let url = s.mock.base_url();
    let out: Ran = o
        .run(&["--provider", "openai", "--host", &url, "run", "m", "hi"])
        .into();
    out.ok();
    let body = &s.mock.requests()[0];
    assert_eq!(body["temperature"], json!(0.5), "{body:#}");
    assert_eq!(body["seed"], json!(3), "{body:#}");
    assert!(body.get("keep_alive").is_none(), "{body:#}");
}

#[test]
fn config_show_prints_the_defaults_and_masks_secret_headers() {
    let o = Ollm::new();
    o.write_config(
        "system = \"be brief\"\ntemperature = 0.25\n\
         headers = { \"X-Team\" = \"blue\", \"Authorization\" = \"Bearer sk-show-canary\" }\n\
         [providers.ollama]\nkind = \"ollama\"\nthink = \"low\"\nkeep_alive = \"10m\"\n\
         [models.\"qwen3:8b\"]\nseed = 42\nstop = [\"END\"]\n",
    );
    let out: Ran = o.run(&["config", "show"]).into();
    out.ok();
    let text = &out.out;
    assert!(!text.contains("sk-show-canary"), "{text}");
    let parsed: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(parsed["system"].as_str(), Some("be brief"));
    assert_eq!(parsed["temperature"].as_float(), Some(0.25));
    let provider = &parsed["providers"]["ollama"];
    assert_eq!(provider["think"].as_str(), Some("low"));
    assert_eq!(provider["keep_alive"].as_str(), Some("10m"));
    assert_eq!(provider["headers"]["X-Team"].as_str(), Some("blue"));
    let auth = provider["headers"]["Authorization"].as_str().unwrap();
    assert!(auth.starts_with("set ("), "{auth}");
    let model = &parsed["models"]["qwen3:8b"];
    assert_eq!(model["seed"].as_integer(), Some(42));
    assert_eq!(model["stop"][0].as_str(), Some("END"));
}
