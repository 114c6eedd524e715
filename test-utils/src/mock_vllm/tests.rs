//! The rules against the recorded server (`test-utils/fixtures/vllm/`), and the older
//! generations' rules against their documented behaviour.

use std::path::PathBuf;

use super::*;

fn check(flags: &VllmFlags, body: Value, want: Option<u16>) {
    let models = vec!["m".to_owned()];
    let got = refusal(flags, &models, &body).map(|(status, _)| status);
    assert_eq!(got, want, "{flags:?}: {body}");
}

fn ask(choice: Value) -> Value {
    let tools = json!([{"type": "function", "function": {"name": "f"}}]);
    let mut body =
        json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools});
    if !choice.is_null() {
        body["tool_choice"] = choice;
    }
    body
}

#[test]
fn tools_need_the_flags_and_on_current_servers_every_choice_but_none_needs_the_parser() {
    let named = json!({"type": "function", "function": {"name": "f"}});
    for generation in [
        Generation::Legacy,
        Generation::Reserving,
        Generation::Current,
    ] {
        let plain = VllmFlags {
            generation,
            ..VllmFlags::default()
        };
        let older = generation != Generation::Current;
        let served_when_older = if older { None } else { Some(400) };
        check(&plain, ask(Value::Null), Some(400));
        check(&plain, ask(json!("auto")), Some(400));
        check(&plain, ask(json!("none")), None);
        check(&plain, ask(json!("required")), served_when_older);
        check(&plain, ask(named.clone()), served_when_older);
        let flagged = plain.clone().with_auto_tool_choice("hermes");
        for choice in [
            json!("auto"),
            json!("required"),
            named.clone(),
            json!("none"),
        ] {
            check(&flagged, ask(choice), None);
        }
        let parser_only = VllmFlags {
            tool_call_parser: Some("hermes".into()),
            ..plain.clone()
        };
        check(&parser_only, ask(json!("auto")), Some(400));
        check(&parser_only, ask(json!("required")), None);
        let no_tools = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        check(&plain, no_tools, None);
    }
    let (_, body) = refusal(&VllmFlags::default(), &["m".into()], &ask(named)).unwrap();
    assert_eq!(
        body["error"]["message"],
        "tool_choice=function \"f\" requires --tool-call-parser to be set"
    );
}

fn words(n: usize, max_tokens: Option<u64>) -> Value {
    let mut b = json!({"model": "m", "messages": [{"role": "user", "content": "w ".repeat(n)}]});
    if let Some(max) = max_tokens {
        b["max_tokens"] = json!(max);
    }
    b
}

#[test]
fn older_servers_bound_the_prompt_plus_max_tokens_in_their_wordings() {
    for generation in [Generation::Legacy, Generation::Reserving] {
        let flags = VllmFlags {
            max_model_len: 10,
            generation,
            ..VllmFlags::default()
        };
        check(&flags, words(6, Some(4)), None);
        check(&flags, words(6, Some(5)), Some(400));
        check(&flags, words(10, None), Some(400));
        let (_, refused) = refusal(&flags, &["m".to_owned()], &words(6, Some(5))).unwrap();
        let text = refused.to_string();
        assert!(
            text.contains("maximum context length is 10 tokens"),
            "{text}"
        );
        match generation {
            Generation::Legacy => assert_eq!(refused["object"], "error", "{text}"),
            _ => assert_eq!(refused["error"]["param"], "input_tokens", "{text}"),
        }
    }
}

#[test]
fn current_servers_bound_the_prompt_and_cut_max_tokens_to_fit() {
    let flags = VllmFlags {
        max_model_len: 10,
        ..VllmFlags::default()
    };
    check(&flags, words(6, Some(4)), None);
    check(&flags, words(6, Some(5)), None);
    check(&flags, words(10, None), None);
    check(&flags, words(11, None), Some(400));
    check(&flags, words(1, Some(10)), None);
    check(&flags, words(1, Some(11)), Some(400));
    let mut completion = words(1, None);
    completion["max_completion_tokens"] = json!(11);
    let (_, body) = refusal(&flags, &["m".to_owned()], &completion).unwrap();
    assert_eq!(body["error"]["param"], "max_completion_tokens", "{body}");
}

#[test]
fn an_unknown_model_is_not_found() {
    for generation in [
        Generation::Legacy,
        Generation::Reserving,
        Generation::Current,
    ] {
        let flags = VllmFlags {
            generation,
            ..VllmFlags::default()
        };
        check(&flags, json!({"model": "other", "messages": []}), Some(404));
    }
}

/// One recorded exchange (see `xtask/vllm/record_fixtures.py`).
struct Recorded {
    name: String,
    request: Value,
    status: u16,
    body: Value,
}

/// Every recorded exchange, with long prompts expanded as they were sent.
fn recorded() -> Vec<Recorded> {
    let dir = crate::fixtures::path("vllm");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            name.ends_with(".json") && !name.ends_with(".events.json")
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            let record: Value = serde_json::from_str(&text).unwrap();
            Recorded {
                name: path.file_stem().unwrap().to_string_lossy().into_owned(),
                request: expand(&record["request"]),
                status: u16::try_from(record["status"].as_u64().unwrap()).unwrap(),
                body: record["body"].clone(),
            }
        })
        .collect()
}

/// `{"repeat": TEXT, "times": N}` becomes TEXT repeated N times.
fn expand(value: &Value) -> Value {
    match value {
        Value::Object(map) if map.len() == 2 && map.contains_key("repeat") => {
            let text = map["repeat"].as_str().unwrap_or_default();
            let times = map["times"].as_u64().unwrap_or(0) as usize;
            Value::String(text.repeat(times))
        }
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), expand(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(expand).collect()),
        other => other.clone(),
    }
}

/// The server the fixtures were recorded from: `cargo xtask server --engine vllm`.
fn recorded_server() -> (VllmFlags, Vec<String>) {
    let flags = VllmFlags {
        max_model_len: 8192,
        ..VllmFlags::default().with_auto_tool_choice("hermes")
    };
    (flags, vec!["qwen2.5-coder-0.5b".to_owned()])
}

#[test]
fn the_rules_refuse_what_the_real_server_refused_with_its_very_body() {
    let (flags, models) = recorded_server();
    let chats: Vec<Recorded> = recorded()
        .into_iter()
        .filter(|r| r.request["path"] == "/v1/chat/completions")
        .collect();
    assert!(chats.len() >= 10, "{} recorded chats", chats.len());
    for case in chats {
        let got = refusal(&flags, &models, &case.request["body"]);
        match got {
            None => assert_eq!(case.status, 200, "{}: the mock serves it", case.name),
            Some((status, body)) => {
                assert_eq!(
                    (status, &body),
                    (case.status, &case.body),
                    "{}: the mock's refusal differs",
                    case.name
                );
            }
        }
    }
}

#[test]
fn models_and_tokenize_have_the_real_servers_fields() {
    let (flags, models) = recorded_server();
    let by_name = |name: &str| {
        recorded()
            .into_iter()
            .find(|r| r.name == name)
            .unwrap_or_else(|| panic!("no fixture {name}"))
    };
    let real = &by_name("models").body["data"][0];
    let mock = model_entry(&flags, &models[0]);
    for key in ["id", "object", "owned_by", "parent", "max_model_len"] {
        assert_eq!(mock[key], real[key], "{key}");
    }
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&mock), keys(real));
    let real = by_name("tokenize");
    let mock = tokenize_reply(&flags, 8);
    assert_eq!(keys(&mock), keys(&real.body));
    assert_eq!(mock["max_model_len"], real.body["max_model_len"]);
    assert_eq!(by_name("tokenize_llama_form").status, 400);
}
