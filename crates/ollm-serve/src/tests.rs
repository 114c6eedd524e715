//! `ollm serve` end to end against the OpenAI mock: a client's view of the repairs, the
//! errors and the routes.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ollm_core::{Rule, ToolMode};
use reqwest::header::HeaderMap;

use ollm_bridge::{OpenAiConfig, OpenAiProvider, ProviderPool, Replica, ReplicaKind, RetryPolicy};
use serde_json::{Value, json};
use test_utils::mock_openai::{MockOpenAi, Reply};

use crate::{ClientKey, Options, Policy, Repair};

const FENCED_CALL: &str =
    "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```";

fn replica(url: &str) -> Replica {
    let mut config = OpenAiConfig::new(url);
    config.http.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    let adapter = OpenAiProvider::new(config).expect("a valid address");
    Replica::new(url, ReplicaKind::OpenAi, Arc::new(adapter))
}

/// Serves `urls` on a free port with repair on or off and maybe a key; the base URL
/// (`http://127.0.0.1:PORT`).
async fn serve(urls: &[String], repair: bool, key: Option<&str>) -> String {
    let options = Options {
        policy: Policy {
            default: if repair { Repair::On } else { Repair::Off },
            ..Policy::default()
        },
        keys: key
            .map(|k| ClientKey {
                name: "default".into(),
                secret: k.to_owned(),
                repair: None,
            })
            .into_iter()
            .collect(),
        ..Options::default()
    };
    serve_with(urls, options).await
}

/// Serves `urls` on a free port with `options`; the base URL.
async fn serve_with(urls: &[String], options: Options) -> String {
    let pool = ProviderPool::new(urls.iter().map(|u| replica(u)).collect()).expect("replicas");
    let options = Options {
        max_body_bytes: 64 * 1024,
        ..options
    };
    let router = crate::router(pool, options).expect("usable options");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

fn tools() -> Value {
    json!([{"type": "function", "function": {
        "name": "read_file", "description": "Reads a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}])
}

fn body(stream: bool, with_tools: bool) -> Value {
    let mut body = json!({
        "model": "mock-model", "stream": stream,
        "messages": [{"role": "user", "content": "What is in notes.txt?"}],
    });
    if with_tools {
        body["tools"] = tools();
    }
    body
}

async fn post(base: &str, body: &Value) -> (u16, String) {
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(body)
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

fn answer(text: &str) -> Reply {
    Reply::sse().content(text).finish("stop").done().reply()
}

/// The `data:` payloads of an SSE body, `[DONE]` as a string.
fn events(sse: &str) -> Vec<Value> {
    sse.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap_or_else(|_| Value::String(d.to_owned())))
        .collect()
}

/// Content and calls (name, joined arguments) reassembled from chunks, by index.
fn reassemble(events: &[Value]) -> (String, Vec<(String, String, String)>) {
    let mut content = String::new();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for e in events {
        let delta = &e["choices"][0]["delta"];
        content.push_str(delta["content"].as_str().unwrap_or_default());
        for c in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = c["index"].as_u64().unwrap_or(u64::MAX) as usize;
            if index == calls.len() {
                calls.push(Default::default());
            }
            let call = &mut calls[index];
            call.0.push_str(c["id"].as_str().unwrap_or_default());
            call.1
                .push_str(c["function"]["name"].as_str().unwrap_or_default());
            call.2
                .push_str(c["function"]["arguments"].as_str().unwrap_or_default());
        }
    }
    (content, calls)
}

#[tokio::test]
async fn a_call_written_as_fenced_json_comes_back_as_tool_calls() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, text) = post(&base, &body(false, true)).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("json");
    let choice = &reply["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls", "{reply}");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "read_file");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or("")).expect("args");
    assert_eq!(args, json!({"path": "notes.txt"}));
    assert!(choice["message"]["content"].is_null(), "{reply}");
    // The upstream saw the client's conversation as sent: nothing added.
    let sent = &mock.requests()[0];
    assert_eq!(sent["messages"].as_array().map(Vec::len), Some(1), "{sent}");
    assert_eq!(sent["messages"][0]["content"], "What is in notes.txt?");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn a_streamed_call_arrives_as_tool_call_chunks_and_never_as_content() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(
        Reply::sse()
            .content(&FENCED_CALL[..9])
            .content(&FENCED_CALL[9..])
            .finish("stop")
            .done()
            .reply(),
    );
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, text) = post(&base, &body(true, true)).await;
    assert_eq!(status, 200, "{text}");
    let events = events(&text);
    assert_eq!(
        events.last(),
        Some(&Value::String("[DONE]".into())),
        "{text}"
    );
    let (content, calls) = reassemble(&events);
    assert!(
        content.is_empty(),
        "the call leaked as content: {content:?}"
    );
    assert_eq!(calls.len(), 1, "{text}");
    assert_eq!(calls[0].1, "read_file");
    assert!(!calls[0].0.is_empty(), "a call id");
    assert_eq!(
        serde_json::from_str::<Value>(&calls[0].2).ok(),
        Some(json!({"path": "notes.txt"}))
    );
    let finish = events
        .iter()
        .find_map(|e| e["choices"][0]["finish_reason"].as_str());
    assert_eq!(finish, Some("tool_calls"));
}

#[tokio::test]
async fn the_next_turn_with_a_tool_result_goes_up_as_the_client_sent_it() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer("It says hello."));
    let base = serve(&[mock.base_url()], true, None).await;
    let mut turn = body(false, true);
    turn["messages"] = json!([
        {"role": "user", "content": "What is in notes.txt?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]);
    turn["parallel_tool_calls"] = json!(false);
    let (status, text) = post(&base, &turn).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(reply["choices"][0]["message"]["content"], "It says hello.");
    assert_eq!(reply["choices"][0]["finish_reason"], "stop");
    let sent = &mock.requests()[0];
    let roles: Vec<&str> = sent["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "{sent}");
    // The client set no temperature: none goes up (ollm run's greedy tool turns are
    // its own default, not the proxy's).
    assert!(sent.get("temperature").is_none(), "{sent}");
    // The client's one-call-at-most goes up as sent.
    assert_eq!(sent["parallel_tool_calls"], json!(false), "{sent}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

#[tokio::test]
async fn without_tools_or_with_repair_off_the_reply_passes_through() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    mock.push_reply(answer(FENCED_CALL));
    let repaired = serve(&[mock.base_url()], true, None).await;
    let (_, text) = post(&repaired, &body(false, false)).await;
    let reply: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        reply["choices"][0]["message"]["content"], FENCED_CALL,
        "no tools: untouched"
    );
    let plain = serve(&[mock.base_url()], false, None).await;
    let (_, text) = post(&plain, &body(false, true)).await;
    let reply: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        reply["choices"][0]["message"]["content"], FENCED_CALL,
        "repair off: untouched"
    );
    assert!(reply["choices"][0]["message"].get("tool_calls").is_none());
}

#[tokio::test]
async fn think_text_goes_to_reasoning_content() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer("<think>the file is small</think>It is short."));
    let base = serve(&[mock.base_url()], true, None).await;
    let (_, text) = post(&base, &body(true, true)).await;
    let events = events(&text);
    let reasoning: String = events
        .iter()
        .filter_map(|e| e["choices"][0]["delta"]["reasoning_content"].as_str())
        .collect();
    let (content, calls) = reassemble(&events);
    assert_eq!(reasoning, "the file is small", "{text}");
    assert_eq!(content.trim(), "It is short.", "{text}");
    assert!(calls.is_empty());
}

#[tokio::test]
async fn failures_before_the_reply_are_http_errors_in_openais_shape() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(Reply::http_error(400, "temperature out of range"));
    let base = serve(&[mock.base_url()], true, None).await;
    let check = |(status, text): (u16, String), want: u16| {
        assert_eq!(status, want, "{text}");
        let body: Value = serde_json::from_str(&text).expect("json");
        assert!(body["error"]["message"].is_string(), "{body}");
        assert!(body["error"]["type"].is_string(), "{body}");
        body
    };
    let upstream = check(post(&base, &body(true, false)).await, 400);
    assert!(
        upstream["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("temperature")
    );
    let invalid = check(post(&base, &json!({"model": "m"})).await, 400);
    assert_eq!(invalid["error"]["param"], "messages");
    let mut huge = body(false, false);
    huge["messages"][0]["content"] = Value::String("x".repeat(100 * 1024));
    check(post(&base, &huge).await, 413);
    drop(mock);
    let gone = serve(&["http://127.0.0.1:9/v1".to_owned()], true, None).await;
    check(post(&gone, &body(true, false)).await, 502);
}

#[tokio::test]
async fn a_break_after_text_is_an_error_event_not_a_finished_reply() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(Reply::sse().content("half an ans").reply());
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, text) = post(&base, &body(true, false)).await;
    assert_eq!(status, 200);
    let events = events(&text);
    assert!(events.iter().any(|e| e.get("error").is_some()), "{text}");
    assert!(
        events.last().is_some_and(|e| e.get("error").is_some()),
        "{text}"
    );
    assert!(!events.contains(&Value::String("[DONE]".into())), "{text}");
    assert!(
        events
            .iter()
            .all(|e| e["choices"][0]["finish_reason"].is_null()),
        "{text}"
    );
}

#[tokio::test]
async fn an_api_key_guards_every_route_but_health() {
    let mock = MockOpenAi::start().await.expect("mock");
    let base = serve(&[mock.base_url()], true, Some("sekret")).await;
    let client = reqwest::Client::new();
    let get = |path: &str, key: Option<&str>| {
        let mut request = client.get(format!("{base}{path}"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        request.send()
    };
    assert_eq!(get("/v1/models", None).await.expect("sent").status(), 401);
    assert_eq!(
        get("/v1/models", Some("wrong"))
            .await
            .expect("sent")
            .status(),
        401
    );
    let models = get("/v1/models", Some("sekret")).await.expect("sent");
    assert_eq!(models.status(), 200);
    let list: Value = models.json().await.expect("json");
    assert_eq!(list["data"][0]["id"], "mock-model");
    assert_eq!(get("/health", None).await.expect("sent").status(), 200);
}

#[tokio::test]
async fn the_router_mounts_under_a_prefix_in_another_app() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    let pool = ProviderPool::new(vec![replica(&mock.base_url())]).expect("replicas");
    let options = Options {
        keys: vec![ClientKey {
            name: "default".into(),
            secret: "sekret".into(),
            repair: None,
        }],
        ..Options::default()
    };
    let gateway = crate::router(pool, options).expect("usable options");
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "the host app" }))
        .nest("/llm", gateway);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let client = reqwest::Client::new();
    let status = |path: &str| {
        let request = client.get(format!("{base}{path}"));
        async move { request.send().await.expect("sent").status().as_u16() }
    };
    // The host's own route is its own; the gateway's health is open, the rest keyed.
    assert_eq!(status("/").await, 200);
    assert_eq!(status("/llm/health").await, 200);
    assert_eq!(status("/llm/v1/models").await, 401);
    let reply: Value = client
        .post(format!("{base}/llm/v1/chat/completions"))
        .bearer_auth("sekret")
        .json(&body(false, true))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let call = &reply["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "read_file", "{reply}");
}

#[test]
fn options_that_cannot_work_are_refused_when_the_router_is_built() {
    let check = |options: Options, want: Option<crate::ServeError>| {
        let pool = ProviderPool::new(vec![replica("http://127.0.0.1:9/v1")]).expect("replicas");
        assert_eq!(crate::router(pool, options).err(), want);
    };
    check(Options::default(), None);
    check(
        Options {
            max_in_flight: Some(0),
            ..Options::default()
        },
        Some(crate::ServeError::NoCapacity),
    );
    check(
        Options {
            forward_headers: vec!["X-Smg-Routing-Key".into()],
            ..Options::default()
        },
        None,
    );
    check(
        Options {
            forward_headers: vec!["bad header".into()],
            ..Options::default()
        },
        Some(crate::ServeError::HeaderName("bad header".into())),
    );
}

#[tokio::test]
async fn metrics_count_requests_calls_and_replicas() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    let base = serve(&[mock.base_url()], true, None).await;
    let _ = post(&base, &body(false, true)).await;
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    assert!(
        text.contains("ollm_serve_requests_total{path=\"/v1/chat/completions\",status=\"200\"} 1"),
        "{text}"
    );
    assert!(text.contains("ollm_serve_tool_calls_total 1"), "{text}");
    assert!(
        text.contains("ollm_pool_replica_served_total{replica="),
        "{text}"
    );
    assert!(text.contains("ollm_serve_in_flight 0"), "{text}");
}

/// A conversation whose `read_file notes.txt` already has its result.
fn after_a_result(stream: bool) -> Value {
    let mut turn = body(stream, true);
    turn["messages"] = json!([
        {"role": "user", "content": "What is in notes.txt?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]);
    turn
}

#[tokio::test]
async fn a_reply_that_only_repeats_an_answered_call_becomes_the_answer() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    mock.push_reply(answer("It says hello."));
    let base = serve(&[mock.base_url()], true, None).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(&after_a_result(true))
        .send()
        .await
        .expect("sent");
    assert_eq!(response.status(), 200);
    // The coach's repair is marked as every repair is: header, finish chunk, metric.
    assert_eq!(
        response.headers()["x-ollm-repair"],
        "coached; rule=answer-after-idle; calls=1"
    );
    let text = response.text().await.expect("body");
    let events = events(&text);
    let (content, calls) = reassemble(&events);
    assert!(calls.is_empty(), "the repeat went to the client: {text}");
    assert_eq!(content, "It says hello.");
    let marked = events
        .iter()
        .find_map(|e| e.get("ollm").cloned())
        .unwrap_or_default();
    assert_eq!(marked["repair"]["status"], "coached", "{text}");
    assert_eq!(marked["repair"]["rule"], "answer-after-idle", "{text}");
    assert_eq!(
        marked["repair"]["calls"][0]["function"]["name"], "read_file",
        "{text}"
    );
    let asked = mock.requests();
    assert_eq!(asked.len(), 2);
    assert!(asked[1].get("tools").is_none(), "{}", asked[1]);
    let last = &asked[1]["messages"]
        .as_array()
        .and_then(|m| m.last().cloned())
        .unwrap_or_default();
    let nudge = ollm_core::Nudge::AnswerFromResults.text(&ollm_core::CoachConfig::default());
    assert_eq!(last["content"], nudge.as_str());
    let metrics = reqwest::get(format!("{base}/metrics"))
        .await
        .expect("sent")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("ollm_serve_coached_calls_total{rule=\"answer-after-idle\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn the_coachs_switches_decide_whether_a_repeat_is_answered() {
    // (rules off, whether the repeated call reaches the client)
    let check = async |off: &[ollm_core::Rule], reaches: bool| {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer(FENCED_CALL));
        mock.push_reply(answer("It says hello."));
        let mut options = Options::default();
        options.coach.off = off.iter().copied().collect();
        let base = serve_with(&[mock.base_url()], options).await;
        let (status, text) = post(&base, &after_a_result(false)).await;
        assert_eq!(status, 200, "{text}");
        let reply: Value = serde_json::from_str(&text).expect("json");
        let calls = reply["choices"][0]["message"]["tool_calls"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(calls == 1, reaches, "{off:?}: {reply}");
        assert_eq!(
            mock.requests().len(),
            if reaches { 1 } else { 2 },
            "{off:?}"
        );
    };
    use ollm_core::Rule;
    check(&[], false).await;
    check(&[Rule::RepeatGuard], true).await;
    check(&[Rule::AnswerAfterIdle], true).await;
    check(&[Rule::ActNudge], false).await;
}

/// `[serve] tool_or_none`: a request that declares tools and leaves `tool_choice` at
/// `auto` first asks the model to name a tool or none (one short request under a JSON
/// schema, without the tools); on `none` the reply is asked for without tools. A
/// `required` or named `tool_choice` outranks it: no choice is asked.
#[tokio::test]
async fn tool_or_none_asks_first_unless_the_client_obliges_a_call() {
    // (rule on, tool_choice, the choice's reply if one is asked, the reply, whether the
    // reply's request offers the tools)
    let check = async |on: bool, choice: Value, route: Option<&str>, reply: &str, tools: bool| {
        let mock = MockOpenAi::start().await.expect("mock");
        if let Some(route) = route {
            mock.push_reply(answer(route));
        }
        mock.push_reply(answer(reply));
        let mut options = Options::default();
        if on {
            options.coach.turn_on(ollm_core::Rule::ToolOrNone);
        }
        let base = serve_with(&[mock.base_url()], options).await;
        let mut request = body(false, true);
        if !choice.is_null() {
            request["tool_choice"] = choice.clone();
        }
        let (status, text) = post(&base, &request).await;
        assert_eq!(status, 200, "{choice}: {text}");
        let asked = mock.requests();
        assert_eq!(
            asked.len(),
            1 + usize::from(route.is_some()),
            "{choice}: {asked:?}"
        );
        if route.is_some() {
            let schema = &asked[0]["response_format"]["json_schema"]["schema"];
            assert!(
                schema["properties"]["tool"]["enum"].is_array(),
                "{}",
                asked[0]
            );
            assert!(asked[0].get("tools").is_none(), "{}", asked[0]);
        }
        let last = &asked[asked.len() - 1];
        assert_eq!(last["tools"].is_array(), tools, "{choice}: {last}");
    };
    let none = Some(r#"{"tool": "none"}"#);
    let named = json!({"type": "function", "function": {"name": "read_file"}});
    check(false, Value::Null, None, "Hello.", true).await;
    check(true, Value::Null, none, "Hello.", false).await;
    check(true, json!("auto"), none, "Hello.", false).await;
    check(
        true,
        Value::Null,
        Some(r#"{"tool": "read_file"}"#),
        FENCED_CALL,
        true,
    )
    .await;
    check(true, json!("required"), None, FENCED_CALL, true).await;
    check(true, named, None, FENCED_CALL, true).await;
}

/// `[serve] greedy_tool_turns`: a request that offers tools and sets no temperature goes
/// upstream at 0 when the config turns the rule on; a client's own temperature, or the
/// rule left as serve ships it, passes the client's sampling as sent.
#[tokio::test]
async fn greedy_tool_turns_only_when_turned_on_and_the_client_set_no_temperature() {
    // (rule turned on, the client's temperature, what goes upstream)
    let check = async |on: bool, client: Option<f64>, upstream: Value| {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer("Hello."));
        let mut options = Options::default();
        if on {
            options.coach.turn_on(ollm_core::Rule::GreedyToolTurns);
        }
        let base = serve_with(&[mock.base_url()], options).await;
        let mut request = body(false, true);
        if let Some(t) = client {
            request["temperature"] = json!(t);
        }
        let (status, text) = post(&base, &request).await;
        assert_eq!(status, 200, "{text}");
        let asked = mock.requests();
        let sent = asked[0].get("temperature").cloned().unwrap_or(Value::Null);
        assert_eq!(sent, upstream, "on {on}, client {client:?}: {}", asked[0]);
    };
    check(true, None, json!(0.0)).await;
    check(true, Some(0.7), json!(0.7)).await;
    check(false, None, Value::Null).await;
}

/// `[serve.models."NAME"] tool_or_none`: a model's own coach outranks the server's, for
/// requests naming that model only.
#[tokio::test]
async fn a_models_own_coach_serves_the_requests_that_name_it() {
    // (the model asked for, whether the choice is asked first)
    let check = async |model: &str, routed: bool| {
        let mock = MockOpenAi::start().await.expect("mock");
        if routed {
            mock.push_reply(answer(r#"{"tool": "none"}"#));
        }
        mock.push_reply(answer("Hello."));
        let mut options = Options::default();
        let mut small = options.coach.clone();
        small.turn_on(ollm_core::Rule::ToolOrNone);
        options.model_coach.insert("small".into(), small);
        let base = serve_with(&[mock.base_url()], options).await;
        let mut request = body(false, true);
        request["model"] = json!(model);
        let (status, text) = post(&base, &request).await;
        assert_eq!(status, 200, "{model}: {text}");
        let asked = mock.requests();
        assert_eq!(asked.len(), 1 + usize::from(routed), "{model}: {asked:?}");
        assert_eq!(
            asked[asked.len() - 1]["tools"].is_array(),
            !routed,
            "{model}"
        );
    };
    check("small", true).await;
    check("mock-model", false).await;
}

#[tokio::test]
async fn a_path_written_into_the_tools_name_becomes_its_path_argument() {
    let mock = MockOpenAi::start().await.expect("mock");
    let reply = "```json\n{\"name\": \"read_notes.txt\", \"arguments\": {}}\n```";
    mock.push_reply(answer(reply));
    // `path-in-name` is off by default (no lift measured); a config turns it on.
    let mut options = Options {
        policy: Policy {
            default: Repair::On,
            ..Policy::default()
        },
        ..Options::default()
    };
    options.coach.turn_on(Rule::PathInName);
    let base = serve_with(&[mock.base_url()], options).await;
    let (status, text) = post(&base, &body(false, true)).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("json");
    let call = &reply["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "read_file", "{reply}");
    assert_eq!(call["function"]["arguments"], "{\"path\":\"notes.txt\"}");
}

/// A streamed reply that is one native call, id `n1`, to `name` with `arguments`.
fn native_call(name: &str, arguments: &str) -> Reply {
    let call = json!({"index": 0, "id": "n1", "type": "function",
        "function": {"name": name, "arguments": arguments}});
    let chunk =
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]});
    Reply::sse().data(chunk).finish("tool_calls").done().reply()
}

/// llama-server parsed the 0.5B's `{"name": "backup.py", "arguments": {"days": 7}}` as a
/// native call to an undeclared tool. Serve repairs it as the same call written as text
/// (`file-as-name`): the client gets the declared `read_file` with that path and without
/// the argument `read_file` does not declare, marked as a repair of the server's call,
/// never the undeclared name.
#[tokio::test]
async fn a_native_call_named_like_a_file_reaches_the_client_as_the_read_tool_and_marked() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(native_call("backup.py", "{\"days\": 7}"));
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, headers, text) = post_full(&base, &body(false, true), None).await;
    assert_eq!(status, 200, "{text}");
    let (_, calls, _) = read_reply(false, &text);
    assert_eq!(calls.len(), 1, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("json");
    let call = &reply["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "read_file", "{reply}");
    assert_eq!(call["function"]["arguments"], "{\"path\":\"backup.py\"}");
    assert_eq!(
        header(&headers, "x-ollm-repair"),
        Some("recovered; format=native; calls=1; rule=file-as-name"),
        "{text}"
    );
}

/// `[serve] routed_call` (with `tool_or_none` and `read_only`): after the model chose a
/// tool that only reads, its reply is asked for as a call to that tool under its schema,
/// and the client gets the call. Without it the model's answer from memory reaches the
/// client (through serve the 0.5B answered "port 8080" for a file that says 7341).
#[tokio::test]
async fn a_chosen_read_tool_is_called_for_the_client_when_routed_call_is_on() {
    for routed in [true, false] {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer(r#"{"tool": "read_file"}"#));
        mock.push_reply(answer(if routed {
            r#"{"tool": "read_file", "arguments": {"path": "notes.txt"}}"#
        } else {
            "It says hello."
        }));
        let mut options = Options::default();
        options.coach.turn_on(ollm_core::Rule::ToolOrNone);
        options.coach.read_only = ["read_file".to_owned()].into();
        if routed {
            options.coach.turn_on(ollm_core::Rule::RoutedCall);
        }
        let base = serve_with(&[mock.base_url()], options).await;
        let (status, text) = post(&base, &body(false, true)).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(false, &text);
        let asked = mock.requests();
        assert_eq!(asked.len(), 2, "{routed}: {asked:?}");
        if routed {
            let call = [("read_file".to_owned(), r#"{"path":"notes.txt"}"#.to_owned())];
            assert_eq!(calls, call, "{text}");
            assert_eq!(finish, "tool_calls");
            assert_eq!(
                asked[1]["response_format"]["type"], "json_schema",
                "the call is asked under its schema: {:?}",
                asked[1]
            );
        } else {
            assert!(calls.is_empty(), "{text}");
            assert_eq!(content, "It says hello.");
        }
    }
}

#[tokio::test]
async fn session_and_routing_headers_go_upstream_on_every_request_made_for_the_client() {
    let mock = MockOpenAi::start().await.expect("mock");
    let invented = "```json\n{\"name\": \"say_hello\", \"arguments\": {}}\n```";
    // A call to an undeclared tool, then the answer (two runs of the repair loop); the
    // coach's answer to a repeat (two requests); a request without tools (one).
    mock.push_reply(answer(invented));
    mock.push_reply(answer("Hello."));
    mock.push_reply(answer(FENCED_CALL));
    mock.push_reply(answer("It says hello."));
    mock.push_reply(answer("Plain."));
    let options = Options {
        forward_headers: vec!["X-SMG-Routing-Key".into()],
        keys: vec![ClientKey {
            name: "default".into(),
            secret: "sekret".into(),
            repair: None,
        }],
        ..Options::default()
    };
    let base = serve_with(&[mock.base_url()], options).await;
    let send = async |body: &Value| {
        let response = reqwest::Client::new()
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth("sekret")
            .header("X-Session-ID", "s-42")
            .header("x-smg-routing-key", "tenant-7")
            .header("x-not-forwarded", "no")
            .json(body)
            .send()
            .await
            .expect("sent");
        assert_eq!(response.status(), 200);
        response.text().await.expect("body")
    };
    let text = send(&body(false, true)).await;
    assert!(text.contains("Hello."), "{text}");
    let text = send(&after_a_result(true)).await;
    assert!(text.contains("It says hello."), "{text}");
    let text = send(&body(false, false)).await;
    assert!(text.contains("Plain."), "{text}");
    let seen = mock.request_headers();
    assert_eq!(seen.len(), 5, "{seen:?}");
    for (i, headers) in seen.iter().enumerate() {
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(
            get("x-session-id"),
            Some("s-42"),
            "request {i}: {headers:?}"
        );
        assert_eq!(get("x-smg-routing-key"), Some("tenant-7"), "request {i}");
        assert_eq!(get("x-not-forwarded"), None, "request {i}");
        assert_eq!(
            get("authorization"),
            None,
            "the client's key left serve: {i}"
        );
    }
}

#[tokio::test]
async fn a_new_call_after_a_result_still_reaches_the_client() {
    let mock = MockOpenAi::start().await.expect("mock");
    let other = FENCED_CALL.replace("notes.txt", "todo.txt");
    mock.push_reply(answer(&other));
    let base = serve(&[mock.base_url()], true, None).await;
    let mut turn = body(false, true);
    turn["messages"] = json!([
        {"role": "user", "content": "What is in notes.txt and todo.txt?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
    ]);
    let (_, text) = post(&base, &turn).await;
    let reply: Value = serde_json::from_str(&text).expect("json");
    let call = &reply["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(
        call["function"]["arguments"], "{\"path\":\"todo.txt\"}",
        "{reply}"
    );
    assert_eq!(mock.requests().len(), 1);
}

#[tokio::test]
async fn behind_vllm_without_auto_tool_choice_calls_still_arrive_through_react() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.behave_as_vllm(test_utils::mock_vllm::VllmFlags::default());
    let react =
        "Thought: I need the file.\nAction: read_file\nAction Input: {\"path\": \"notes.txt\"}";
    mock.push_reply(answer(react));
    mock.push_reply(answer(react));
    let base = serve(&[mock.base_url()], true, None).await;
    for round in 0..2 {
        let (status, text) = post(&base, &body(false, true)).await;
        assert_eq!(status, 200, "round {round}: {text}");
        let reply: Value = serde_json::from_str(&text).expect("json");
        let call = &reply["choices"][0]["message"]["tool_calls"][0];
        assert_eq!(
            call["function"]["name"], "read_file",
            "round {round}: {reply}"
        );
        assert_eq!(call["function"]["arguments"], "{\"path\":\"notes.txt\"}");
    }
    // The refusal cost one request, once: the second round went straight to ReAct.
    let with_tools = mock
        .requests()
        .iter()
        .filter(|r| r.get("tools").is_some())
        .count();
    assert_eq!(
        (mock.requests().len(), with_tools),
        (3, 1),
        "{:?}",
        mock.requests()
    );
}

#[tokio::test]
async fn a_call_answered_before_the_users_last_message_may_run_again() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    let base = serve(&[mock.base_url()], true, None).await;
    let mut turn = body(false, true);
    turn["messages"] = json!([
        {"role": "user", "content": "What is in notes.txt?"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "hello"},
        {"role": "assistant", "content": "It says hello."},
        {"role": "user", "content": "I changed it. What is in notes.txt now?"},
    ]);
    let (_, text) = post(&base, &turn).await;
    let reply: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(
        reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "read_file",
        "{reply}"
    );
    assert_eq!(mock.requests().len(), 1);
}

/// Issue 37: a client that leaves mid-stream must not leave the upstream generating for
/// nobody. The upstream streams forever; the client goes away; the upstream's body must
/// end (its connection closed) within a second, with or without tools, and also when
/// nothing reached the client yet (text held back as possible call markup).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_leaves_mid_stream_drops_the_upstream_request_within_a_second() {
    let held = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"";
    let cases = [
        (true, false, "Counting: "),
        (true, true, "Counting: "),
        (true, true, held),
        (false, false, "Counting: "),
        (false, true, "Counting: "),
    ];
    for (stream, with_tools, opening) in cases {
        let case = format!("stream: {stream}, tools: {with_tools}, opening: {opening:?}");
        let mock = MockOpenAi::start().await.expect("mock");
        let endless = Reply::sse()
            .content(opening)
            .forever(Duration::from_millis(5));
        mock.push_reply(endless.reply());
        let base = serve(&[mock.base_url()], true, None).await;
        let request = body(stream, with_tools);
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let client = tokio::spawn(async move {
            let response = reqwest::Client::new()
                .post(format!("{base}/v1/chat/completions"))
                .json(&request)
                .send()
                .await
                .expect("sent");
            let mut chunks = response.bytes_stream();
            let _ = chunks.next().await;
            let _ = first_tx.send(());
            // Reads on until the test ends it.
            while let Some(Ok(_)) = chunks.next().await {}
        });
        tokio::time::timeout(Duration::from_secs(5), mock.wait_requests(1))
            .await
            .expect(&case);
        if stream && opening != held {
            // Mid-stream: the client has its first chunk.
            let first = tokio::time::timeout(Duration::from_secs(5), first_rx).await;
            assert!(matches!(first, Ok(Ok(()))), "no first chunk ({case})");
        }
        client.abort();
        let _ = client.await;
        let ended = tokio::time::timeout(Duration::from_secs(1), mock.wait_bodies_ended(1)).await;
        assert!(
            ended.is_ok(),
            "the upstream still streams a second after the client left ({case})"
        );
    }
}

/// The log lines at `warn` and above written on this thread while capturing (a
/// `#[tokio::test]` runs every task on its own thread). One global subscriber writes to
/// the capturing thread's buffer: a per-test default subscriber lost lines when other
/// tests' threads registered the same callsites at the same time (tracing caches a
/// callsite's interest globally).
#[derive(Clone, Default)]
struct Log(Arc<std::sync::Mutex<Vec<u8>>>);

thread_local! {
    static CAPTURING: std::cell::RefCell<Option<Log>> = const { std::cell::RefCell::new(None) };
}

impl Log {
    /// Captures this thread's log from now on, into the returned log.
    fn capture() -> Log {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            let _ = tracing_subscriber::fmt()
                .with_writer(|| ThisThread)
                .with_max_level(tracing::Level::WARN)
                .with_ansi(false)
                .try_init();
        });
        let log = Log::default();
        CAPTURING.with(|c| *c.borrow_mut() = Some(log.clone()));
        log
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log")).into_owned()
    }
}

/// Writes to the log this thread captures into, if any.
struct ThisThread;

impl std::io::Write for ThisThread {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        CAPTURING.with(|c| {
            if let Some(log) = &*c.borrow() {
                log.0.lock().expect("log").extend_from_slice(bytes);
            }
        });
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An upstream that answers each chat request on a new connection, keeps the connection
/// alive, and closes it without a word when a second request arrives on it: a server whose
/// keep-alive timer fired just as a pooled connection was reused (llama-server's and
/// uvicorn's close idle connections after 5 s). The base URL (`.../v1`).
async fn closes_reused_connections(reply: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut seen = Vec::new();
                let mut buf = [0u8; 8192];
                let mut answered = false;
                while let Ok(n) = socket.read(&mut buf).await {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    if !whole_request(&seen) {
                        continue;
                    }
                    if answered {
                        return; // closes the reused connection unanswered
                    }
                    seen.clear();
                    answered = true;
                    let body = format!(
                        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
                        json!({"choices": [{"index": 0, "delta": {"content": reply}, "finish_reason": null}]}),
                        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
                    );
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(format!("{head}{body}").as_bytes()).await;
                }
            });
        }
    });
    format!("http://{addr}/v1")
}

/// Whether `seen` holds a whole request: its head and `content-length` bytes of body.
fn whole_request(seen: &[u8]) -> bool {
    let text = String::from_utf8_lossy(seen);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    body.len() >= length
}

/// Issue 37: about one request in 45 got an immediate 502 with nothing in serve's log.
/// A pooled connection the upstream had just closed (llama-server closes the connection
/// of every streamed reply) fails before any byte: the transport sends the request once
/// more on a new connection, so the client gets its reply and serve's own second try
/// (for a connection error that persists) is not needed.
#[tokio::test]
async fn a_reused_connection_closed_by_the_upstream_is_sent_again() {
    let log = Log::capture();
    let upstream = closes_reused_connections("fine").await;
    let base = serve(&[upstream], true, None).await;
    for round in 0..3 {
        let (status, text) = post(&base, &body(false, false)).await;
        assert_eq!(status, 200, "round {round}: {text}\nlog:\n{}", log.text());
        let reply: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(reply["choices"][0]["message"]["content"], "fine");
    }
    let logged = log.text();
    assert!(
        !logged.contains("trying once more") && !logged.contains("ERROR"),
        "the transport's resend was enough:\n{logged}"
    );
}

/// Issue 37: every error a client receives is logged with its cause, the upstream's
/// status and message, or the transport error.
#[tokio::test]
async fn every_error_a_client_receives_is_logged_with_its_cause() {
    let log = Log::capture();
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(Reply::http_error(400, "temperature out of range"));
    mock.push_reply(Reply::sse().content("half an ans").reply());
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, _) = post(&base, &body(false, false)).await;
    assert_eq!(status, 400);
    let (status, _) = post(&base, &body(true, false)).await;
    assert_eq!(status, 200, "the break comes after the first byte");
    let gone = serve(&["http://127.0.0.1:9/v1".to_owned()], true, None).await;
    let (status, _) = post(&gone, &body(false, true)).await;
    assert_eq!(status, 502);
    let logged = log.text();
    let lines: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR"))
        .collect();
    let check = |what: &str, needle: &str| {
        assert!(
            lines.iter().any(|l| l.contains(needle)),
            "{what} is not logged ({needle:?}):\n{logged}"
        );
    };
    check("the upstream's refusal", "temperature out of range");
    check("its status", "400");
    check("the break mid-stream", "ended");
    check("the transport error", "127.0.0.1:9");
}

/// Issue 37: `/tokenize` was asked before every chat request, and what it counted held
/// the run's placeholder prompt.
#[tokio::test]
async fn tokenize_is_asked_only_near_the_window_and_never_with_the_placeholder() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer("short"));
    mock.push_reply(answer("long"));
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, text) = post(&base, &body(false, true)).await;
    assert_eq!(status, 200, "{text}");
    assert!(
        mock.tokenize_requests().is_empty(),
        "a short request is clearly within the 4096-token window: {:?}",
        mock.tokenize_requests()
    );
    // 10,000 characters: an estimate of 2,500 tokens, past half the window.
    let mut long = body(false, true);
    long["messages"][0]["content"] =
        json!(format!("{}What is in notes.txt?", "word ".repeat(2000)));
    let (status, text) = post(&base, &long).await;
    assert_eq!(status, 200, "{text}");
    let asked = mock.tokenize_requests();
    assert_eq!(asked.len(), 1, "{asked:?}");
    let counted = asked[0]["content"].as_str().unwrap_or_default();
    assert!(counted.contains("word word"), "{counted:.80}");
    assert!(
        !counted.contains("continue the conversation") && !counted.contains('\0'),
        "the placeholder was counted"
    );
}

/// The messages of an upstream request, as (role, content or called names).
fn roles(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| {
            let calls: Vec<&str> = m["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["function"]["name"].as_str())
                .collect();
            let what = match m["content"].as_str() {
                Some(text) if calls.is_empty() => text.to_owned(),
                _ => calls.join(","),
            };
            (m["role"].as_str().unwrap_or_default().to_owned(), what)
        })
        .collect()
}

/// A streamed or whole reply's content, calls (name, arguments) and finish reason.
fn read_reply(stream: bool, text: &str) -> (String, Vec<(String, String)>, String) {
    if stream {
        let events = events(text);
        let (content, calls) = reassemble(&events);
        let finish = events
            .iter()
            .find_map(|e| e["choices"][0]["finish_reason"].as_str())
            .unwrap_or_default()
            .to_owned();
        return (
            content,
            calls.into_iter().map(|c| (c.1, c.2)).collect(),
            finish,
        );
    }
    let reply: Value = serde_json::from_str(text).expect("json");
    let message = &reply["choices"][0]["message"];
    let calls = message["tool_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            let f = &c["function"];
            let name = f["name"].as_str().unwrap_or_default().to_owned();
            (name, f["arguments"].as_str().unwrap_or_default().to_owned())
        })
        .collect();
    let content = message["content"].as_str().unwrap_or_default().to_owned();
    let finish = reply["choices"][0]["finish_reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (content, calls, finish)
}

/// Issue 37: the 1.5B called `say_hello` and `count`, which the client never declared,
/// and serve passed the calls on.
#[tokio::test]
async fn a_call_to_an_undeclared_tool_is_answered_inside_the_request_and_never_reaches_the_client()
{
    let invented = "```json\n{\"name\": \"say_hello\", \"arguments\": {}}\n```";
    for stream in [false, true] {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer(invented));
        mock.push_reply(answer(FENCED_CALL));
        let base = serve(&[mock.base_url()], true, None).await;
        let (status, text) = post(&base, &body(stream, true)).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(stream, &text);
        let want = vec![(
            "read_file".to_owned(),
            "{\"path\":\"notes.txt\"}".to_owned(),
        )];
        assert_eq!(calls, want, "stream {stream}: {text}");
        assert_eq!(
            (content.as_str(), finish.as_str()),
            ("", "tool_calls"),
            "{text}"
        );
        let asked = mock.requests();
        assert_eq!(asked.len(), 2, "{asked:?}");
        let retry = roles(&asked[1]);
        assert_eq!(retry[0], ("user".into(), "What is in notes.txt?".into()));
        assert_eq!(
            retry[1],
            ("assistant".into(), "say_hello".into()),
            "{retry:?}"
        );
        assert_eq!(retry[2].0, "tool");
        assert!(
            retry[2].1.contains("Unknown tool \"say_hello\""),
            "{retry:?}"
        );
        assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    }
}

/// Issue 37: a model that keeps calling an undeclared tool is asked at most twice more;
/// the client then gets its text without the calls, and a finish that says so.
#[tokio::test]
async fn a_model_that_keeps_inventing_tools_gives_the_client_its_text_without_the_calls() {
    let mock = MockOpenAi::start().await.expect("mock");
    for word in ["One.", "Two.", "Three."] {
        let count = json!({"index": 0, "id": "c", "type": "function",
            "function": {"name": "count", "arguments": "{}"}});
        let delta = json!({"choices": [{"index": 0, "delta": {"tool_calls": [count]}, "finish_reason": null}]});
        let reply = Reply::sse()
            .content(word)
            .data(delta)
            .finish("tool_calls")
            .done();
        mock.push_reply(reply.reply());
    }
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, text) = post(&base, &body(false, true)).await;
    assert_eq!(status, 200, "{text}");
    let (content, calls, finish) = read_reply(false, &text);
    assert!(calls.is_empty(), "{text}");
    assert_eq!(finish, "stop", "{text}");
    assert_eq!(content, "One.\n\nTwo.\n\nThree.");
    let asked = mock.requests();
    assert_eq!(asked.len(), 3, "one request and two retries");
    // The server's own call to an undeclared tool is answered as the runtime answers one.
    let retry = roles(&asked[1]);
    let answered =
        |(role, text): &(String, String)| role == "tool" && text.contains("Unknown tool \"count\"");
    assert!(retry.iter().any(answered), "{retry:?}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let metrics = reqwest::get(format!("{base}/metrics")).await.expect("sent");
    let metrics = metrics.text().await.expect("text");
    assert!(
        metrics.contains("ollm_serve_undeclared_calls_total 3"),
        "{metrics}"
    );
}

/// A chat request's status, headers and body.
async fn post_full(base: &str, body: &Value, key: Option<&str>) -> (u16, HeaderMap, String) {
    let mut request = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .json(body);
    if let Some(key) = key {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.expect("sent");
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, headers, response.text().await.expect("body"))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// The `ollm` extension of a whole reply, or of a stream's finish chunk.
fn extension(stream: bool, text: &str) -> Value {
    if !stream {
        let reply: Value = serde_json::from_str(text).expect("json");
        return reply["ollm"].clone();
    }
    let events = events(text);
    let finish = events
        .iter()
        .find(|e| e["choices"][0]["finish_reason"].is_string())
        .cloned()
        .unwrap_or_default();
    finish["ollm"].clone()
}

/// Issue 37: every repaired call is visible (header, body, metric), so an agent that
/// refuses recovered calls can tell them from the server's own.
#[tokio::test]
async fn a_recovered_call_is_marked_in_a_header_the_body_and_a_metric() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    mock.push_reply(answer(FENCED_CALL));
    mock.push_reply(native_call("read_file", "{\"path\":\"a\"}"));
    let base = serve(&[mock.base_url()], true, None).await;
    for stream in [false, true] {
        let (status, headers, text) = post_full(&base, &body(stream, true), None).await;
        assert_eq!(status, 200, "{text}");
        assert_eq!(
            header(&headers, "x-ollm-repair"),
            Some("recovered; format=fenced-json; calls=1"),
            "stream {stream}: the reply began with its call, so even a stream has the header"
        );
        assert_eq!(header(&headers, "x-ollm-repair-policy"), Some("on"));
        let repair = &extension(stream, &text)["repair"];
        assert_eq!(repair["status"], "recovered", "{text}");
        assert_eq!(repair["format"], "fenced-json", "{text}");
        assert_eq!(
            repair["calls"][0]["function"]["name"], "read_file",
            "{text}"
        );
    }
    // The server's own call is no repair: no mark.
    let (_, headers, text) = post_full(&base, &body(false, true), None).await;
    assert_eq!(read_reply(false, &text).1.len(), 1, "{text}");
    assert_eq!(header(&headers, "x-ollm-repair"), None);
    assert!(extension(false, &text).is_null(), "{text}");
    let metrics = reqwest::get(format!("{base}/metrics")).await.expect("sent");
    let metrics = metrics.text().await.expect("text");
    let line = "ollm_serve_repaired_calls_total{status=\"recovered\",format=\"fenced-json\"} 2";
    assert!(metrics.contains(line), "{metrics}");
}

/// Issue 37: under `flag` the reply goes out as the server wrote it, and the calls serve
/// would have recovered are only reported.
#[tokio::test]
async fn under_flag_the_text_goes_out_untouched_and_the_calls_are_only_reported() {
    let mock = MockOpenAi::start().await.expect("mock");
    let split = Reply::sse()
        .content(&FENCED_CALL[..9])
        .content(&FENCED_CALL[9..])
        .finish("stop")
        .done();
    mock.push_reply(split.clone().reply());
    mock.push_reply(split.reply());
    let options = Options {
        policy: Policy {
            default: Repair::Flag,
            ..Policy::default()
        },
        ..Options::default()
    };
    let base = serve_with(&[mock.base_url()], options).await;
    for stream in [false, true] {
        let (status, headers, text) = post_full(&base, &body(stream, true), None).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(stream, &text);
        assert_eq!(
            content, FENCED_CALL,
            "stream {stream}: the text untouched: {text}"
        );
        assert!(calls.is_empty(), "{text}");
        assert_eq!(finish, "stop");
        assert_eq!(header(&headers, "x-ollm-repair-policy"), Some("flag"));
        let repair = &extension(stream, &text)["repair"];
        assert_eq!(repair["status"], "flagged", "{text}");
        assert_eq!(
            repair["calls"][0]["function"]["name"], "read_file",
            "{text}"
        );
        if !stream {
            let want = Some("flagged; format=fenced-json; calls=1");
            assert_eq!(header(&headers, "x-ollm-repair"), want);
        }
    }
    assert_eq!(
        mock.requests().len(),
        2,
        "one upstream request per client request"
    );
}

/// Issue 37: the policy is set per model and per API key; where both apply, the more
/// cautious wins.
#[tokio::test]
async fn the_policy_follows_the_model_and_the_key() {
    let mock = MockOpenAi::start().await.expect("mock");
    for _ in 0..4 {
        mock.push_reply(answer(FENCED_CALL));
    }
    let key = |name: &str, repair: Option<Repair>| ClientKey {
        name: name.into(),
        secret: format!("{name}-secret"),
        repair,
    };
    let options = Options {
        policy: Policy {
            default: Repair::On,
            models: [("flagged-model".to_owned(), Repair::Flag)].into(),
        },
        keys: vec![key("agent", Some(Repair::Off)), key("editor", None)],
        ..Options::default()
    };
    let base = serve_with(&[mock.base_url()], options).await;
    let mut flagged = body(false, true);
    flagged["model"] = json!("flagged-model");
    let cases = [
        (body(false, true), "editor-secret", "on"),
        (body(false, true), "agent-secret", "off"),
        (flagged.clone(), "editor-secret", "flag"),
        (flagged, "agent-secret", "off"),
    ];
    for (request, key, want) in cases {
        let (status, headers, text) = post_full(&base, &request, Some(key)).await;
        assert_eq!(status, 200, "{text}");
        let case = format!("{} with {key}", request["model"]);
        assert_eq!(
            header(&headers, "x-ollm-repair-policy"),
            Some(want),
            "{case}"
        );
        let (content, calls, _) = read_reply(false, &text);
        assert_eq!(calls.len(), usize::from(want == "on"), "{case}: {text}");
        assert_eq!(content.is_empty(), want == "on", "{case}: {text}");
    }
}

/// Issue 37: llama.cpp and LM Studio accept `tool_choice: "required"` and answer in
/// prose. The reply without a call is asked for once more under a JSON schema that only
/// admits a call.
#[tokio::test]
async fn tool_choice_required_gets_a_call_from_an_engine_that_answers_in_prose() {
    for stream in [false, true] {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer("The file says hello."));
        mock.push_reply(answer(
            "{\"tool\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}",
        ));
        let base = serve(&[mock.base_url()], true, None).await;
        let mut request = body(stream, true);
        request["tool_choice"] = json!("required");
        let (status, headers, text) = post_full(&base, &request, None).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(stream, &text);
        let want = vec![(
            "read_file".to_owned(),
            "{\"path\":\"notes.txt\"}".to_owned(),
        )];
        assert_eq!(calls, want, "stream {stream}: {text}");
        assert_eq!(
            (content.as_str(), finish.as_str()),
            ("", "tool_calls"),
            "{text}"
        );
        assert_eq!(
            extension(stream, &text)["repair"]["format"],
            "json-schema",
            "{text}"
        );
        if !stream {
            assert!(header(&headers, "x-ollm-repair").is_some_and(|h| h.contains("json-schema")));
        }
        let asked = mock.requests();
        assert_eq!(asked.len(), 2);
        assert_eq!(
            asked[0]["tool_choice"], "required",
            "the engine was asked first"
        );
        let schema = &asked[1]["response_format"]["json_schema"]["schema"];
        assert!(schema["oneOf"].is_array(), "{}", asked[1]);
        assert!(
            !schema.to_string().contains("final_answer"),
            "the schema admits only a call: {schema}"
        );
    }
}

/// A named tool choice under the ReAct constraint (an upstream that takes no schema), and
/// a retry that brings no call either: the first reply stands, and its finish says `stop`.
#[tokio::test]
async fn a_named_tool_choice_falls_back_to_react_and_the_finish_always_agrees() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer("It says hello."));
    mock.push_reply(answer(
        "Thought: I need the file.\nAction: read_file\nAction Input: {\"path\": \"notes.txt\"}",
    ));
    mock.push_reply(answer("It says hello."));
    mock.push_reply(answer("I will not."));
    let options = Options {
        constraint: ToolMode::React,
        ..Options::default()
    };
    let base = serve_with(&[mock.base_url()], options).await;
    let mut request = body(false, true);
    request["tool_choice"] = json!({"type": "function", "function": {"name": "read_file"}});
    let (_, _, text) = post_full(&base, &request, None).await;
    let (_, calls, finish) = read_reply(false, &text);
    assert_eq!(calls.len(), 1, "{text}");
    assert_eq!(finish, "tool_calls");
    assert_eq!(
        extension(false, &text)["repair"]["format"],
        "react",
        "{text}"
    );
    let retry = &mock.requests()[1];
    assert!(retry.get("response_format").is_none(), "{retry}");
    assert!(
        retry.to_string().contains("Action:"),
        "the ReAct prompt: {retry}"
    );
    // Another model, whose server has not yet been caught ignoring the choice.
    request["model"] = json!("other-model");
    let (_, _, text) = post_full(&base, &request, None).await;
    let (content, calls, finish) = read_reply(false, &text);
    assert!(calls.is_empty(), "{text}");
    assert_eq!(
        (content.as_str(), finish.as_str()),
        ("It says hello.", "stop")
    );
}

/// vLLM answers a named `tool_choice` with a call and `finish_reason: "stop"`; the client
/// gets `tool_calls`, agreeing with the body.
#[tokio::test]
async fn the_finish_reason_says_tool_calls_whenever_the_body_has_calls() {
    let mock = MockOpenAi::start().await.expect("mock");
    let call = json!({"index": 0, "id": "n1", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\":\"a\"}"}});
    let call =
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]});
    for _ in 0..4 {
        mock.push_reply(
            Reply::sse()
                .data(call.clone())
                .finish("stop")
                .done()
                .reply(),
        );
    }
    for repair in [true, false] {
        let base = serve(&[mock.base_url()], repair, None).await;
        for stream in [false, true] {
            let mut request = body(stream, true);
            request["tool_choice"] = json!({"type": "function", "function": {"name": "read_file"}});
            let (_, _, text) = post_full(&base, &request, None).await;
            let (_, calls, finish) = read_reply(stream, &text);
            assert_eq!(calls.len(), 1, "repair {repair}, stream {stream}: {text}");
            assert_eq!(
                finish, "tool_calls",
                "repair {repair}, stream {stream}: {text}"
            );
        }
    }
}

/// A server that ignored `"required"` for a model once is asked under the constraint at
/// once from then on: the prose reply it would write first costs the client its time.
#[tokio::test]
async fn a_server_that_ignored_a_required_choice_is_asked_under_the_constraint_at_once() {
    let mock = MockOpenAi::start().await.expect("mock");
    let call = "{\"tool\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}";
    mock.push_reply(answer("The file says hello."));
    mock.push_reply(answer(call));
    mock.push_reply(answer(call));
    let base = serve(&[mock.base_url()], true, None).await;
    let mut request = body(false, true);
    request["tool_choice"] = json!("required");
    for round in 0..2 {
        let (_, _, text) = post_full(&base, &request, None).await;
        assert_eq!(read_reply(false, &text).1.len(), 1, "round {round}: {text}");
    }
    let asked = mock.requests();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert!(asked[2].get("response_format").is_some(), "{}", asked[2]);
    let metrics = reqwest::get(format!("{base}/metrics")).await.expect("sent");
    let metrics = metrics.text().await.expect("text");
    assert!(
        metrics.contains("ollm_serve_tool_choice_retries_total 1"),
        "{metrics}"
    );
}

/// Issue 37: what serve adds is told per reply (`x-ollm-overhead-ms`, as LiteLLM's
/// `x-litellm-overhead-duration-ms`) and kept as a histogram; the upstream's own time is
/// not in it.
#[tokio::test]
async fn what_serve_adds_is_told_per_reply_without_the_upstreams_time() {
    let mock = MockOpenAi::start().await.expect("mock");
    for _ in 0..2 {
        let slow = Reply::sse()
            .delay(Duration::from_millis(500))
            .content(FENCED_CALL);
        mock.push_reply(slow.finish("stop").done().reply());
    }
    let base = serve(&[mock.base_url()], true, None).await;
    for stream in [false, true] {
        let started = std::time::Instant::now();
        let (status, headers, text) = post_full(&base, &body(stream, true), None).await;
        let took = started.elapsed();
        assert_eq!(status, 200, "{text}");
        let added: f64 = header(&headers, "x-ollm-overhead-ms")
            .and_then(|v| v.parse().ok())
            .expect("x-ollm-overhead-ms");
        assert!(took >= Duration::from_millis(500), "{took:?}");
        assert!(
            (0.0..400.0).contains(&added),
            "stream {stream}: {added} ms of {took:?}: the upstream's 500 ms are not serve's"
        );
    }
    let metrics = reqwest::get(format!("{base}/metrics")).await.expect("sent");
    let metrics = metrics.text().await.expect("text");
    assert!(
        metrics.contains("ollm_serve_overhead_seconds_count 2"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ollm_serve_overhead_seconds_bucket{le=\"+Inf\"} 2"),
        "{metrics}"
    );
}

/// Issue 37: with a concurrency limit, a request past it while every replica is full is
/// answered 429 with `Retry-After` at once, before anything reaches an upstream.
#[tokio::test]
async fn past_the_concurrency_limit_a_request_gets_429_with_retry_after() {
    let mock = MockOpenAi::start().await.expect("mock");
    // Held open until the refused request has been answered: with a fixed delay the
    // first reply could end first on a loaded machine, and the second then got a 200.
    let gate = Arc::new(tokio::sync::Notify::new());
    let slow = Reply::sse().hold(Arc::clone(&gate)).content("first");
    mock.push_reply(slow.finish("stop").done().reply());
    mock.push_reply(answer("third"));
    let options = Options {
        max_in_flight: Some(1),
        ..Options::default()
    };
    let base = serve_with(&[mock.base_url()], options).await;
    let held = {
        let base = base.clone();
        tokio::spawn(async move { post(&base, &body(false, false)).await })
    };
    tokio::time::timeout(Duration::from_secs(5), mock.wait_requests(1))
        .await
        .expect("the first request went up");
    let (status, headers, text) = post_full(&base, &body(false, false), None).await;
    assert_eq!(status, 429, "{text}");
    assert_eq!(header(&headers, "retry-after"), Some("1"));
    let error: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(error["error"]["type"], "rate_limit_error");
    assert_eq!(
        mock.requests().len(),
        1,
        "nothing went up for the refused one"
    );
    gate.notify_one();
    let (status, first) = held.await.expect("joined");
    assert_eq!(status, 200, "{first}");
    let (status, text) = post(&base, &body(false, false)).await;
    assert_eq!(status, 200, "room again once the first ended: {text}");
}

/// Serves `replica` alone with `options`; the base URL.
async fn serve_replica(replica: Replica, options: Options) -> String {
    let pool = ProviderPool::new(vec![replica]).expect("replicas");
    let router = crate::router(pool, options).expect("usable options");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}")
}

/// Serves one Ollama replica (the mock) with `options`; the base URL.
async fn serve_ollama(mock: &test_utils::mock_ollama::MockOllama, options: Options) -> String {
    let mut config = ollm_bridge::OllamaConfig::from_host(Some(&mock.host_port())).expect("host");
    config.http.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    let adapter = ollm_bridge::OllamaProvider::new(config).expect("a valid address");
    let replica = Replica::new(mock.url(), ReplicaKind::Ollama, Arc::new(adapter));
    serve_replica(replica, options).await
}

/// Serves one Anthropic replica (the mock) with `options`; the base URL.
async fn serve_anthropic(
    mock: &test_utils::mock_anthropic::MockAnthropic,
    options: Options,
) -> String {
    let mut config = ollm_bridge::AnthropicConfig::new(mock.base_url());
    config.http.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    let adapter = ollm_bridge::AnthropicProvider::new(config).expect("a valid address");
    let replica = Replica::new(mock.base_url(), ReplicaKind::OpenAi, Arc::new(adapter));
    serve_replica(replica, options).await
}

/// Two requests (with tools, so through the repair, and without) sent to `base` with a
/// session, a routing and an unlisted header; `seen` then gives the upstream's chat
/// requests' headers, each of which must carry the first two and not the third.
async fn check_forwarded(
    adapter: &str,
    model: &str,
    base: &str,
    seen: impl Fn() -> Vec<Vec<(String, String)>>,
) {
    for with_tools in [true, false] {
        let mut request = body(false, with_tools);
        request["model"] = json!(model);
        let response = reqwest::Client::new()
            .post(format!("{base}/v1/chat/completions"))
            .header("X-Session-ID", "s-42")
            .header("x-smg-routing-key", "tenant-7")
            .header("x-not-forwarded", "no")
            .json(&request)
            .send()
            .await
            .expect("sent");
        let status = response.status().as_u16();
        let text = response.text().await.expect("body");
        assert_eq!(
            (status, text.contains("Hello.")),
            (200, true),
            "{adapter}: {text}"
        );
    }
    let seen = seen();
    assert_eq!(seen.len(), 2, "{adapter}: {seen:?}");
    for (i, headers) in seen.iter().enumerate() {
        let get = |name: &str| {
            headers
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(
            get("x-session-id"),
            Some("s-42"),
            "{adapter} {i}: {headers:?}"
        );
        assert_eq!(get("x-smg-routing-key"), Some("tenant-7"), "{adapter} {i}");
        assert_eq!(get("x-not-forwarded"), None, "{adapter} {i}");
    }
}

/// The session and configured routing headers reach Ollama and Anthropic upstreams as
/// they reach OpenAI-compatible ones (the transport is shared; this shows the adapters
/// pass them on), on the repair path and on the pass-through.
#[tokio::test]
async fn session_and_routing_headers_reach_ollama_and_anthropic_upstreams_too() {
    use test_utils::mock_anthropic::{MessagesEvents, MockAnthropic};
    use test_utils::mock_ollama::{MockOllama, Reply as OllamaReply};
    let options = || Options {
        forward_headers: vec!["X-SMG-Routing-Key".into()],
        ..Options::default()
    };
    let ollama = MockOllama::start().await.expect("mock");
    for _ in 0..2 {
        let done = json!({"model": "qwen3:8b", "created_at": "2026-01-01T00:00:00Z",
            "done": true, "done_reason": "stop",
            "message": {"role": "assistant", "content": "Hello."}});
        ollama.script("/api/chat", OllamaReply::ndjson(&[done]));
    }
    let base = serve_ollama(&ollama, options()).await;
    check_forwarded("ollama", "qwen3:8b", &base, || {
        let chats = ollama.requests_to("/api/chat");
        chats.into_iter().map(|r| r.headers).collect()
    })
    .await;
    let anthropic = MockAnthropic::start().await.expect("mock");
    for _ in 0..2 {
        let reply = test_utils::mock_anthropic::Reply::sse()
            .message_start(3)
            .text_block(0, &["Hello."])
            .message_delta("end_turn", 2)
            .message_stop()
            .reply();
        anthropic.push_reply(reply);
    }
    let base = serve_anthropic(&anthropic, options()).await;
    check_forwarded("anthropic", "mock-model", &base, || {
        anthropic.request_headers()
    })
    .await;
    assert_eq!(anthropic.violations(), Vec::<String>::new());
}

#[tokio::test]
async fn ollamas_500_for_a_call_it_could_not_parse_is_read_or_asked_once_more() {
    use test_utils::mock_ollama::{MockOllama, Reply as OllamaReply};
    let parse_error = |raw: &str| {
        let message = format!(
            "error parsing tool call: raw='{raw}', err=invalid character 'W' looking for beginning of value"
        );
        OllamaReply::error(500, &message)
    };
    let native_call = OllamaReply::ndjson(&[json!({
        "model": "qwen3:8b", "created_at": "2026-01-01T00:00:00Z", "done": true, "done_reason": "stop",
        "message": {"role": "assistant", "content": "", "tool_calls": [
            {"function": {"name": "read_file", "arguments": {"path": "notes.txt"}}}]},
    })]);
    // (the replies scripted, the calls the client gets, the upstream requests, the status)
    let check = async |replies: Vec<OllamaReply>, want: &[&str], asked: usize, status: u16| {
        let mock = MockOllama::start().await.expect("mock");
        for reply in replies {
            mock.script("/api/chat", reply);
        }
        let base = serve_ollama(&mock, Options::default()).await;
        let mut request = body(false, true);
        request["model"] = json!("qwen3:8b");
        let (got, text) = post(&base, &request).await;
        assert_eq!(got, status, "{text}");
        let reply: Value = serde_json::from_str(&text).expect("json");
        let calls: Vec<String> = reply["choices"][0]["message"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                format!(
                    "{} {}",
                    c["function"]["name"].as_str().unwrap_or(""),
                    c["function"]["arguments"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(calls, want, "{reply}");
        assert_eq!(mock.requests_to("/api/chat").len(), asked, "{reply}");
        reply
    };
    let read = "read_file {\"path\":\"notes.txt\"}";
    // The raw text names the call (one closing brace short): read from it, marked.
    let named = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}";
    let reply = check(vec![parse_error(named)], &[read], 1, 200).await;
    assert_eq!(reply["ollm"]["repair"]["status"], "recovered", "{reply}");
    // gpt-oss's kind: prose and the arguments, no name: asked once more.
    let unnamed = "We need to read the file. {\"path\": \"notes.txt\"}";
    check(vec![parse_error(unnamed), native_call], &[read], 2, 200).await;
    // Twice: the client's error, after one retry only.
    let reply = check(
        vec![parse_error(unnamed), parse_error(unnamed)],
        &[],
        2,
        500,
    )
    .await;
    assert!(
        reply["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("error parsing tool call"),
        "{reply}"
    );
}

/// A streamed reply that is only the server's own call to `name` with no arguments.
fn only_a_call(name: &str) -> Reply {
    let call = json!({"index": 0, "id": "c", "type": "function",
        "function": {"name": name, "arguments": "{}"}});
    let delta =
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]});
    Reply::sse().data(delta).finish("tool_calls").done().reply()
}

/// Issue 37 (`answer-after-nothing`): the 0.5B through serve kept calling a tool the
/// client never declared; once the retries were spent those calls were left out and the
/// client got an empty reply, no text and no calls. Serve asks once more, without tools
/// and with the coach's answer nudge, and the client gets that answer, marked.
#[tokio::test]
async fn a_reply_left_with_nothing_after_undeclared_calls_is_asked_for_its_answer() {
    for stream in [false, true] {
        let mock = MockOpenAi::start().await.expect("mock");
        for _ in 0..3 {
            mock.push_reply(only_a_call("count"));
        }
        mock.push_reply(answer("It says hello."));
        let base = serve(&[mock.base_url()], true, None).await;
        let (status, headers, text) = post_full(&base, &body(stream, true), None).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(stream, &text);
        assert_eq!(
            (content.as_str(), calls.len(), finish.as_str()),
            ("It says hello.", 0, "stop"),
            "stream {stream}: {text}"
        );
        assert_eq!(
            header(&headers, "x-ollm-repair"),
            Some("coached; rule=answer-after-nothing; calls=1"),
            "stream {stream}"
        );
        let marked = extension(stream, &text);
        assert_eq!(marked["repair"]["rule"], "answer-after-nothing", "{text}");
        assert_eq!(marked["repair"]["calls"][0]["function"]["name"], "count");
        let asked = mock.requests();
        assert_eq!(asked.len(), 4, "three tries, then the answer");
        let last = &asked[3];
        assert!(last.get("tools").is_none(), "{last}");
        assert!(last.get("tool_choice").is_none(), "{last}");
        let said = roles(last);
        let nudge = ollm_core::Nudge::Answer.text(&ollm_core::CoachConfig::default());
        assert_eq!(said.last(), Some(&("user".to_owned(), nudge)), "{said:?}");
        // Every call in it has its answer, the third try's too.
        let unknown = said
            .iter()
            .filter(|(role, text)| role == "tool" && text.contains("Unknown tool \"count\""));
        assert_eq!(unknown.count(), 3, "{said:?}");
        assert!(mock.violations().is_empty(), "{:?}", mock.violations());
        let metrics = reqwest::get(format!("{base}/metrics")).await.expect("sent");
        let metrics = metrics.text().await.expect("text");
        let counted = "ollm_serve_coached_replies_total{rule=\"answer-after-nothing\"} 1";
        assert!(metrics.contains(counted), "{metrics}");
    }
}

/// `answer-after-nothing` is the coach's switch: off, the empty reply goes to the client
/// as it was, after the three tries and nothing more.
#[tokio::test]
async fn with_answer_after_nothing_off_an_empty_reply_reaches_the_client() {
    let mock = MockOpenAi::start().await.expect("mock");
    for _ in 0..3 {
        mock.push_reply(only_a_call("count"));
    }
    mock.push_reply(answer("It says hello."));
    let mut options = Options::default();
    options.coach.turn_off(ollm_core::Rule::AnswerAfterNothing);
    let base = serve_with(&[mock.base_url()], options).await;
    let (status, headers, text) = post_full(&base, &body(false, true), None).await;
    assert_eq!(status, 200, "{text}");
    let (content, calls, finish) = read_reply(false, &text);
    assert_eq!(
        (content.as_str(), calls.len(), finish.as_str()),
        ("", 0, "stop")
    );
    assert_eq!(header(&headers, "x-ollm-repair"), None);
    assert_eq!(mock.requests().len(), 3);
}

/// A reply with text, or with a declared call, is never asked again; nor one under a
/// `tool_choice` that obliges a call (the contract retries that, once).
#[tokio::test]
async fn a_reply_with_text_or_a_call_or_an_obliged_one_is_never_asked_again() {
    // (the upstream's replies, the request's tool_choice, requests made, content, calls)
    let check =
        async |replies: Vec<Reply>, choice: Option<&str>, asked: usize, want: (&str, usize)| {
            let mock = MockOpenAi::start().await.expect("mock");
            for reply in replies {
                mock.push_reply(reply);
            }
            mock.push_reply(answer("Never asked for."));
            let base = serve(&[mock.base_url()], true, None).await;
            let mut request = body(false, true);
            if let Some(choice) = choice {
                request["tool_choice"] = json!(choice);
            }
            let (status, text) = post(&base, &request).await;
            assert_eq!(status, 200, "{text}");
            let (content, calls, _) = read_reply(false, &text);
            assert_eq!((content.as_str(), calls.len()), want, "{choice:?}: {text}");
            assert_eq!(mock.requests().len(), asked, "{choice:?}: {text}");
        };
    check(vec![answer("Hello.")], None, 1, ("Hello.", 0)).await;
    check(vec![answer(FENCED_CALL)], None, 1, ("", 1)).await;
    // Text beside calls to an undeclared tool, three times: the text stands, nothing is
    // asked after the tries (also `a_model_that_keeps_inventing_tools_...`, rule on).
    let told = |word: &str| {
        let call = json!({"index": 0, "id": "c", "type": "function",
            "function": {"name": "count", "arguments": "{}"}});
        let delta = json!({"choices": [{"index": 0, "delta": {"tool_calls": [call]}, "finish_reason": null}]});
        Reply::sse()
            .content(word)
            .data(delta)
            .finish("tool_calls")
            .done()
            .reply()
    };
    let with_text = vec![told("One."), told("Two."), told("Three.")];
    check(with_text, None, 3, ("One.\n\nTwo.\n\nThree.", 0)).await;
    // An empty reply under `required`: the contract's one retry, no answer asked.
    check(vec![answer(""), answer("")], Some("required"), 2, ("", 0)).await;
}

/// Any reply with nothing in it is asked again (`answer-after-nothing`), once: an empty
/// first answer gets the answer to the nudge; an empty answer to that goes out as it is.
#[tokio::test]
async fn an_empty_answer_is_asked_for_once_more_and_only_once() {
    for (second, want) in [("It says hello.", "It says hello."), ("", "")] {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer(""));
        mock.push_reply(answer(second));
        mock.push_reply(answer("Never asked for."));
        let base = serve(&[mock.base_url()], true, None).await;
        let (status, text) = post(&base, &body(false, true)).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(false, &text);
        assert_eq!(
            (content.as_str(), calls.len(), finish.as_str()),
            (want, 0, "stop")
        );
        let asked = mock.requests();
        assert_eq!(asked.len(), 2, "{text}");
        // The empty answer is not part of what the model is asked to answer after.
        let said = roles(&asked[1]);
        assert_eq!(said.len(), 2, "{said:?}");
        assert_eq!(said[0], ("user".into(), "What is in notes.txt?".into()));
        assert!(asked[1].get("tools").is_none(), "{}", asked[1]);
    }
}

/// What the 0.5B answered through serve to tool tasks (issue 37): no call, in words.
const CANNOT: &str = "I'm sorry, but I can't access files on your computer.";

/// Issue 37: through serve the 0.5B answered a tool task in words ("I'm sorry, but I
/// can't ...") where `ollm run`'s coach tells it that it can (`can-nudge`) and it calls
/// the tool. A reply the client takes whole has reached it in nothing before it ends, so
/// serve plays the nudge's turn: the client gets the call, marked with the rule, and
/// never the first answer or the nudge.
#[tokio::test]
async fn a_whole_reply_that_says_it_cannot_gets_the_can_nudges_turn() {
    let native = json!({"index": 0, "id": "n1", "type": "function",
        "function": {"name": "read_file", "arguments": "{\"path\":\"notes.txt\"}"}});
    let native = json!({"choices": [{"index": 0, "delta": {"tool_calls": [native]}, "finish_reason": null}]});
    let native = Reply::sse().data(native).finish("tool_calls").done();
    // (the reply after the nudge, the mark)
    let cases = [
        (
            answer(FENCED_CALL),
            "recovered; format=fenced-json; calls=1; rule=can-nudge",
        ),
        (native.reply(), "coached; rule=can-nudge; calls=0"),
    ];
    for (after, mark) in cases {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer(CANNOT));
        mock.push_reply(after);
        mock.push_reply(answer("Never asked for."));
        let base = serve(&[mock.base_url()], true, None).await;
        let (status, headers, text) = post_full(&base, &body(false, true), None).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(false, &text);
        let want = vec![(
            "read_file".to_owned(),
            "{\"path\":\"notes.txt\"}".to_owned(),
        )];
        assert_eq!(calls, want, "{text}");
        assert_eq!((content.as_str(), finish.as_str()), ("", "tool_calls"));
        assert_eq!(header(&headers, "x-ollm-repair"), Some(mark), "{text}");
        assert_eq!(extension(false, &text)["repair"]["rule"], "can-nudge");
        let nudge = ollm_core::Nudge::Can.text(&Options::default().coach);
        assert!(!text.contains("can't") && !text.contains(&nudge), "{text}");
        let asked = mock.requests();
        assert_eq!(asked.len(), 2, "{text}");
        // The nudge's turn offers the tools, after the answer and the nudge.
        assert!(asked[1].get("tools").is_some(), "{}", asked[1]);
        let said = roles(&asked[1]);
        let tail = [
            ("assistant".to_owned(), CANNOT.to_owned()),
            ("user".to_owned(), nudge),
        ];
        assert!(said.ends_with(&tail), "{said:?}");
        assert!(mock.violations().is_empty(), "{:?}", mock.violations());
        let metrics = reqwest::get(format!("{base}/metrics")).await.expect("sent");
        let metrics = metrics.text().await.expect("text");
        let counted = "ollm_serve_coached_replies_total{rule=\"can-nudge\"} 1";
        assert!(metrics.contains(counted), "{metrics}");
    }
}

/// With `tool-or-none` on, the nudge's run in the same request plays the choice its first
/// run made: it is not asked again with the nudge as the prompt (where a second choice
/// could oblige a routed call the first choice never made).
#[tokio::test]
async fn the_nudges_run_plays_the_choice_the_requests_first_run_made() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(r#"{"tool": "write_file"}"#));
    mock.push_reply(answer(CANNOT));
    mock.push_reply(native_call("write_file", r#"{"path": "notes.txt"}"#));
    mock.push_reply(answer("Never asked for."));
    let mut options = Options::default();
    options.coach.turn_on(ollm_core::Rule::ToolOrNone);
    options.coach.turn_on(ollm_core::Rule::RoutedCall);
    options.coach.read_only = ["read_file".to_owned()].into();
    let base = serve_with(&[mock.base_url()], options).await;
    let mut request = body(false, true);
    request["tools"] = three_tools();
    let (status, text) = post(&base, &request).await;
    assert_eq!(status, 200, "{text}");
    let (_, calls, _) = read_reply(false, &text);
    assert_eq!(calls.len(), 1, "{text}");
    assert_eq!(calls[0].0, "write_file", "{text}");
    let asked = mock.requests();
    assert_eq!(asked.len(), 3, "one choice: {asked:?}");
    assert!(
        asked[2]["response_format"].is_null() && asked[2]["tools"].is_array(),
        "the nudge's run asks no second choice: {}",
        asked[2]
    );
}

/// A streamed answer's text is the client's as it comes: it is never asked again, and
/// with `can-nudge` off (`[coach] off`) a whole one is not either; each reply is the
/// first answer, unmarked, after one request.
#[tokio::test]
async fn a_streamed_answer_or_one_whose_rule_is_off_is_never_asked_again() {
    for (stream, off) in [(true, false), (false, true)] {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer(CANNOT));
        mock.push_reply(answer(FENCED_CALL));
        let mut options = Options::default();
        if off {
            options.coach.turn_off(ollm_core::Rule::CanNudge);
        }
        let base = serve_with(&[mock.base_url()], options).await;
        let (status, headers, text) = post_full(&base, &body(stream, true), None).await;
        assert_eq!(status, 200, "{text}");
        let (content, calls, finish) = read_reply(stream, &text);
        assert_eq!(
            (content.as_str(), calls.len(), finish.as_str()),
            (CANNOT, 0, "stop"),
            "stream {stream}: {text}"
        );
        assert_eq!(header(&headers, "x-ollm-repair"), None);
        assert!(extension(stream, &text).is_null(), "{text}");
        assert_eq!(mock.requests().len(), 1, "stream {stream}");
    }
}

/// An empty answer after a result streamed nothing to the client: the nudge the run's
/// coach says (`answer-after-empty`) gets its turn, without tools, on a stream too, and
/// the stream carries only the answer to it.
#[tokio::test]
async fn an_empty_answer_after_a_result_gets_the_answer_nudges_turn_on_a_stream() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(""));
    mock.push_reply(answer("It says hello."));
    mock.push_reply(answer("Never asked for."));
    let base = serve(&[mock.base_url()], true, None).await;
    let (status, headers, text) = post_full(&base, &after_a_result(true), None).await;
    assert_eq!(status, 200, "{text}");
    let (content, calls, finish) = read_reply(true, &text);
    assert_eq!(
        (content.as_str(), calls.len(), finish.as_str()),
        ("It says hello.", 0, "stop")
    );
    assert_eq!(
        header(&headers, "x-ollm-repair"),
        Some("coached; rule=answer-after-empty; calls=0")
    );
    let nudge = ollm_core::Nudge::AnswerFromResults.text(&ollm_core::CoachConfig::default());
    assert!(!text.contains(&nudge), "{text}");
    let asked = mock.requests();
    assert_eq!(asked.len(), 2, "{text}");
    assert!(asked[1].get("tools").is_none(), "{}", asked[1]);
    let said = roles(&asked[1]);
    assert_eq!(said.last(), Some(&("user".to_owned(), nudge)), "{said:?}");
    assert_eq!(said.len(), 4, "the empty answer is not in it: {said:?}");
}

/// Three declared tools: one that reads, one that writes, one that runs commands.
fn three_tools() -> Value {
    let tool = |name: &str| {
        json!({"type": "function", "function": {"name": name, "description": name,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}})
    };
    json!([tool("read_file"), tool("write_file"), tool("run_command")])
}

/// `[serve] read_only` with `tool_or_none` (issue 35: "never a write or a command the
/// user did not ask for"): for "make me a shopping.txt" the model chose `write_file`, so
/// `run_command` is withheld for the whole prompt, the request after the client ran the
/// write included (serve keeps the choice; the coach asks only before the first call).
/// The model's `run_command` there is answered inside the request and never reaches the
/// client, which gets the answer instead. Without `read_only` nothing is withheld, and
/// the command reaches the client as it always did.
#[tokio::test]
async fn a_command_the_prompt_did_not_ask_for_never_reaches_the_client() {
    for read_only in [true, false] {
        let mock = MockOpenAi::start().await.expect("mock");
        mock.push_reply(answer(r#"{"tool": "write_file"}"#));
        mock.push_reply(native_call("write_file", r#"{"path": "shopping.txt"}"#));
        mock.push_reply(native_call("run_command", r#"{"path": "ls"}"#));
        mock.push_reply(answer("I made shopping.txt."));
        let mut options = Options::default();
        options.coach.turn_on(ollm_core::Rule::ToolOrNone);
        // The write chosen stands (`changes-both-orders` would ask again; core tests it).
        options.coach.turn_off(ollm_core::Rule::ChangesBothOrders);
        if read_only {
            options.coach.read_only = ["read_file".to_owned()].into();
        }
        let base = serve_with(&[mock.base_url()], options).await;
        let mut request = json!({"model": "mock-model", "stream": false, "tools": three_tools(),
            "messages": [{"role": "user", "content": "make me a shopping.txt"}]});
        let (status, text) = post(&base, &request).await;
        assert_eq!(status, 200, "{text}");
        let first: Value = serde_json::from_str(&text).expect("json");
        let message = first["choices"][0]["message"].clone();
        assert_eq!(message["tool_calls"][0]["function"]["name"], "write_file");
        let messages = request["messages"].as_array_mut().expect("messages");
        messages.push(message);
        messages.push(json!({"role": "tool", "tool_call_id": "n1", "content": "written"}));
        let (status, text) = post(&base, &request).await;
        assert_eq!(status, 200, "{text}");
        let second: Value = serde_json::from_str(&text).expect("json");
        let message = &second["choices"][0]["message"];
        let asked = mock.requests();
        let offered = |i: usize| -> Vec<String> {
            (asked[i]["tools"].as_array().into_iter().flatten())
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        };
        if read_only {
            assert!(message["tool_calls"].is_null(), "read_only: {second}");
            assert_eq!(message["content"], "I made shopping.txt.", "{second}");
            assert_eq!(asked.len(), 4, "one choice, asked once: {asked:?}");
            assert_eq!(offered(1), ["read_file", "write_file"]);
            assert_eq!(offered(2), ["read_file", "write_file"], "the choice held");
            assert!(
                offered(3).is_empty(),
                "the answer is asked for without tools"
            );
        } else {
            assert_eq!(message["tool_calls"][0]["function"]["name"], "run_command");
            assert_eq!(offered(2), ["read_file", "write_file", "run_command"]);
        }
    }
}

/// `answer-at-limit` belongs to `ollm run`: serve's runs are one turn each and hand
/// their calls to the client, so the rule never acts there, even turned on.
#[tokio::test]
async fn a_call_reaches_the_client_whatever_answer_at_limit_says() {
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    mock.push_reply(answer("It says hello."));
    let mut options = Options::default();
    options.coach.turn_on(ollm_core::Rule::AnswerAtLimit);
    let base = serve_with(&[mock.base_url()], options).await;
    let (status, text) = post(&base, &body(false, true)).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).expect("json");
    let calls = reply["choices"][0]["message"]["tool_calls"].as_array();
    assert_eq!(calls.map_or(0, Vec::len), 1, "{reply}");
    assert_eq!(mock.requests().len(), 1);
    // A repeat answered inside the request: serve's own nudge turn, and only it.
    let mock = MockOpenAi::start().await.expect("mock");
    mock.push_reply(answer(FENCED_CALL));
    mock.push_reply(answer("It says hello."));
    mock.push_reply(answer("It says hello again."));
    let mut options = Options::default();
    options.coach.turn_on(ollm_core::Rule::AnswerAtLimit);
    let base = serve_with(&[mock.base_url()], options).await;
    let (status, text) = post(&base, &after_a_result(false)).await;
    assert_eq!(status, 200, "{text}");
    assert!(text.contains("It says hello."), "{text}");
    assert_eq!(mock.requests().len(), 2);
}
