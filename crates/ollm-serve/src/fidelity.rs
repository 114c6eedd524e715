//! Streaming fidelity, as a property: whatever the upstream's chunking, and whether the
//! model wrote its calls as text or the server sent them natively in fragments, the
//! calls a client reassembles from `ollm serve`'s streamed `delta.tool_calls` are exactly
//! the calls of the same reply asked for whole, and exactly the calls the model made.

use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::{Value, json};
use test_utils::mock_openai::{MockOpenAi, Reply, SseScript};

use crate::Options;
use ollm_bridge::{OpenAiConfig, OpenAiProvider, ProviderPool, Replica, ReplicaKind};

/// One call the model makes: `read_file` with these arguments.
type Call = (String, i64);

fn args((path, n): &Call) -> Value {
    json!({"path": path, "n": n})
}

/// Cuts `text` at the given fractions of its length (on character boundaries).
fn cut(text: &str, fractions: &[u16]) -> Vec<String> {
    let mut points: Vec<usize> = fractions
        .iter()
        .map(|f| {
            let mut at = text.len() * usize::from(*f) / 1000;
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            at
        })
        .collect();
    points.extend([0, text.len()]);
    points.sort_unstable();
    points.dedup();
    points
        .windows(2)
        .map(|w| text[w[0]..w[1]].to_owned())
        .collect()
}

/// The upstream's reply making `calls`: Hermes blocks in the text, or native fragments.
fn script(calls: &[Call], native: bool, fractions: &[u16], split: usize) -> Reply {
    let mut sse = SseScript::default();
    if native {
        for (i, call) in calls.iter().enumerate() {
            let head = json!({"index": i, "id": format!("call_{i}"), "type": "function",
                "function": {"name": "read_file", "arguments": ""}});
            sse = sse.data(delta(json!({"tool_calls": [head]})));
            for piece in cut(&args(call).to_string(), fractions) {
                let frag = json!({"index": i, "function": {"arguments": piece}});
                sse = sse.data(delta(json!({"tool_calls": [frag]})));
            }
        }
        sse = sse.finish("tool_calls");
    } else {
        let text: Vec<String> = calls
            .iter()
            .map(|c| {
                let call = json!({"name": "read_file", "arguments": args(c)});
                format!("<tool_call>\n{call}\n</tool_call>")
            })
            .collect();
        for piece in cut(&text.join("\n"), fractions) {
            sse = sse.content(&piece);
        }
        sse = sse.finish("stop");
    }
    sse.done().split_every(split).reply()
}

fn delta(delta: Value) -> Value {
    json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
}

fn request(stream: bool) -> Value {
    json!({
        "model": "mock-model", "stream": stream,
        "messages": [{"role": "user", "content": "read them"}],
        "tools": [{"type": "function", "function": {"name": "read_file", "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
            "required": ["path", "n"]}}}],
    })
}

/// The calls of a whole reply, as (name, arguments).
fn whole_calls(body: &Value) -> Vec<(String, Value)> {
    let calls = body["choices"][0]["message"]["tool_calls"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    calls
        .iter()
        .map(|c| {
            let name = c["function"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let args = c["function"]["arguments"].as_str().unwrap_or("null");
            (name, serde_json::from_str(args).unwrap_or(Value::Null))
        })
        .collect()
}

/// The calls reassembled from a streamed reply by index, and its content.
fn streamed_calls(sse: &str) -> (Vec<(String, Value)>, String) {
    let mut calls: Vec<(String, String)> = Vec::new();
    let mut content = String::new();
    for data in sse.split("\n\n").filter_map(|e| e.strip_prefix("data: ")) {
        let Ok(chunk) = serde_json::from_str::<Value>(data) else {
            continue;
        };
        let delta = &chunk["choices"][0]["delta"];
        content.push_str(delta["content"].as_str().unwrap_or_default());
        for c in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = c["index"].as_u64().map_or(usize::MAX, |i| i as usize);
            if index == calls.len() {
                calls.push(Default::default());
            }
            let Some(call) = calls.get_mut(index) else {
                return (Vec::new(), "bad index".into());
            };
            call.0
                .push_str(c["function"]["name"].as_str().unwrap_or_default());
            call.1
                .push_str(c["function"]["arguments"].as_str().unwrap_or_default());
        }
    }
    let calls = calls
        .into_iter()
        .map(|(n, a)| (n, serde_json::from_str(&a).unwrap_or(Value::Null)))
        .collect();
    (calls, content)
}

fn calls_strategy() -> impl Strategy<Value = Vec<Call>> {
    prop::collection::vec(("[a-zA-Z0-9 _./ü\"\\\\{}-]{0,24}", any::<i64>()), 1..=3).prop_map(
        |calls| {
            // Distinct paths: a call repeated inside one reply is a different rule.
            calls
                .into_iter()
                .enumerate()
                .map(|(i, (p, n))| (format!("{i}/{p}"), n))
                .collect()
        },
    )
}

#[test]
fn streamed_calls_reassemble_into_the_whole_replys_calls_whatever_the_chunking() {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (mock, base) = rt.block_on(async {
        let mock = MockOpenAi::start().await.expect("mock");
        let adapter = OpenAiProvider::new(OpenAiConfig::new(mock.base_url())).expect("address");
        let replica = Replica::new(mock.base_url(), ReplicaKind::OpenAi, Arc::new(adapter));
        let pool = ProviderPool::new(vec![replica]).expect("replica");
        let router = crate::router(pool, Options::default()).expect("options");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        (mock, base)
    });
    let client = reqwest::Client::new();
    let strategy = (
        calls_strategy(),
        any::<bool>(),
        prop::collection::vec(0u16..=1000, 0..8),
        1usize..96,
    );
    let mut runner = TestRunner::new(Config {
        cases: 48,
        ..Config::default()
    });
    let checked = runner.run(&strategy, |(calls, native, fractions, split)| {
        let want: Vec<(String, Value)> = calls
            .iter()
            .map(|c| ("read_file".to_owned(), args(c)))
            .collect();
        mock.push_reply(script(&calls, native, &fractions, split));
        mock.push_reply(script(&calls, native, &fractions, split));
        let (whole, streamed) = rt.block_on(async {
            let post = |stream| {
                client
                    .post(format!("{base}/v1/chat/completions"))
                    .json(&request(stream))
                    .send()
            };
            let whole: Value = post(false).await.expect("sent").json().await.expect("json");
            let streamed = post(true).await.expect("sent").text().await.expect("text");
            (whole, streamed)
        });
        prop_assert_eq!(whole_calls(&whole), want.clone(), "whole: {}", whole);
        let (got, content) = streamed_calls(&streamed);
        prop_assert_eq!(got, want, "streamed: {}", streamed);
        prop_assert!(
            !content.contains("tool_call"),
            "a call leaked as content: {}",
            content
        );
        Ok(())
    });
    if let Err(e) = checked {
        panic!("{e}");
    }
}
