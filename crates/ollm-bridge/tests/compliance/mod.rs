//! The adapter contract over real HTTP: the Ollama and the OpenAI adapters, each against
//! its mock server, hand on the scripted text in order and end with exactly one terminal
//! event (`test_utils::mock_provider::check_compliance`), a `Finish` for a reply that
//! ends and an `Error` for one that breaks after its text. Core's `adapter_compliance`
//! checks the same contract of `MockProvider`; this is the same property of the adapters
//! programs use (issue 26). The guard's "same call whatever the key order" is here too:
//! only on the wire can two calls differ in nothing but key order.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::openai::{OpenAiConfig, OpenAiProvider};
use ollm_bridge::{HttpConfig, OllamaConfig, OllamaProvider, RetryPolicy};
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ProviderAdapter, ToolMode};
use ollm_types::{FinishReason, Message, ProviderEvent, ProviderRequest};
use proptest::prelude::*;
use serde_json::json;
use test_utils::mock_ollama::{self, MockOllama};
use test_utils::mock_openai::{self, MockOpenAi};
use test_utils::mock_provider::check_compliance;
use test_utils::recording_tool::{RecordingTool, registry};

/// No retries: a reply that breaks before any text must end as the error it is, not as
/// the mock's answer to a request it has no script for.
fn http() -> HttpConfig {
    HttpConfig {
        retry: RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        },
        ..HttpConfig::default()
    }
}

fn ask(model: &str) -> ProviderRequest {
    ProviderRequest::new(model, vec![Message::user("hi")])
}

async fn collect(provider: &dyn ProviderAdapter, request: ProviderRequest) -> Vec<ProviderEvent> {
    tokio::time::timeout(Duration::from_secs(10), provider.chat(request).collect())
        .await
        .expect("the stream ends")
}

/// The Ollama adapter's events for a reply of `texts`, then `done` or an in-body error.
async fn ollama(texts: &[String], fail: bool) -> Vec<ProviderEvent> {
    let mock = MockOllama::start().await.expect("mock Ollama");
    let message = |t: &str| json!({"role": "assistant", "content": t});
    let mut lines: Vec<_> = texts
        .iter()
        .map(|t| json!({"model": "qwen3:8b", "message": message(t), "done": false}))
        .collect();
    lines.push(if fail {
        json!({"error": "boom"})
    } else {
        json!({"model": "qwen3:8b", "message": message(""), "done": true, "done_reason": "stop"})
    });
    mock.script("/api/chat", mock_ollama::Reply::ndjson(&lines));
    let mut config = OllamaConfig::from_host(Some(&mock.host_port())).expect("config");
    config.http = http();
    let provider = OllamaProvider::new(config).expect("provider");
    collect(&provider, ask("qwen3:8b")).await
}

/// The OpenAI adapter's events for a reply of `texts`, then a finish or an error event.
async fn openai(texts: &[String], fail: bool) -> Vec<ProviderEvent> {
    let mock = MockOpenAi::start().await.expect("mock OpenAI");
    let mut script = mock_openai::Reply::sse();
    for t in texts {
        script = script.content(t);
    }
    script = if fail {
        script.error_event("boom")
    } else {
        script.finish("stop").done()
    };
    mock.push_reply(script.reply());
    let mut config = OpenAiConfig::new(mock.base_url());
    config.http = http();
    let provider = OpenAiProvider::new(config).expect("provider");
    collect(&provider, ask("mock-model")).await
}

/// The contract, and that the events are the script's: its text in order, whole even when
/// the reply breaks (the OpenAI decoder used to drop a trailing `<` it held back for a
/// possible `<think>` on an error: found by this property), and a `Stop` finish or an
/// error as scripted.
fn check(adapter: &str, events: &[ProviderEvent], texts: &[String], fail: bool) {
    if let Err(problem) = check_compliance(events) {
        panic!("{adapter}: {problem}: {events:#?}");
    }
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let script = texts.concat();
    assert_eq!(text, script, "{adapter}: {events:#?}");
    match events.last() {
        Some(ProviderEvent::Finish { reason }) => {
            assert!(!fail, "{adapter}: a broken reply finished: {events:#?}");
            assert_eq!(*reason, FinishReason::Stop, "{adapter}");
        }
        Some(ProviderEvent::Error { .. }) => {
            assert!(fail, "{adapter}: a whole reply failed: {events:#?}");
        }
        _ => unreachable!("check_compliance found a terminal event last"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]

    // Property 10 (adapter compliance), for the real adapters.
    #[test]
    fn both_adapters_keep_the_contract(
        texts in prop::collection::vec(".{0,12}", 0..6),
        fail in any::<bool>(),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            check("ollama", &ollama(&texts, fail).await, &texts, fail);
            check("openai", &openai(&texts, fail).await, &texts, fail);
        });
    }
}

/// A call whose arguments differ from an earlier one only in key order on the wire
/// (`{"path":".","depth":1}`, then `{"depth":1,"path":"."}`) is the same call: the loop
/// guard answers the repeat from the earlier result and the tool runs once. In process a
/// `ToolCall`'s arguments are a sorted map, so this is where key order can differ.
#[tokio::test]
async fn one_call_whatever_the_key_order_on_the_wire() {
    let mock = MockOpenAi::start().await.expect("mock OpenAI");
    let call = |id: &str, arguments: &str| {
        mock_openai::Reply::sse()
            .data(
                json!({"object": "chat.completion.chunk", "choices": [{"index": 0,
                "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": "list_dir", "arguments": arguments}}]},
                "finish_reason": null}]}),
            )
            .finish("tool_calls")
            .done()
            .reply()
    };
    mock.push_reply(call("c1", r#"{"path":".","depth":1}"#));
    mock.push_reply(call("c2", r#"{"depth":1,"path":"."}"#));
    mock.push_reply(
        mock_openai::Reply::sse()
            .content("a.txt")
            .finish("stop")
            .done()
            .reply(),
    );
    let mut config = OpenAiConfig::new(mock.base_url());
    config.http = http();
    let provider = Arc::new(OpenAiProvider::new(config).expect("provider"));
    let tool = RecordingTool::new("list_dir").returns(json!({"entries": ["a.txt"]}));
    let mut chat = ChatConfig::for_model("mock-model");
    chat.tool_mode = ToolMode::Native;
    let client = ChatClient::new(provider, registry([tool.clone()]), chat);
    let events: Vec<ChatEvent> = tokio::time::timeout(
        Duration::from_secs(10),
        client.chat("list it", ChatOptions::default()).collect(),
    )
    .await
    .expect("the run ends");
    assert!(
        matches!(
            events.last(),
            Some(ChatEvent::Finish {
                reason: FinishReason::Stop,
                ..
            })
        ),
        "{events:#?}"
    );
    assert_eq!(tool.call_count(), 1, "{events:#?}");
    assert_eq!(mock.violations(), Vec::<String>::new());
}
