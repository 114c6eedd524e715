//! The provider against [`MockAnthropic`]: the same checks the other adapters pass
//! against their mocks (streaming cut small, retries, errors by kind with hints, a server
//! that is down, cancellation, valid bodies with answered calls, images, models), then
//! what is the Messages API's own (headers and key, `count_tokens`, a run with a call).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::anthropic::{ANTHROPIC_VERSION, AnthropicConfig, AnthropicProvider};
use ollm_bridge::{HttpConfig, RetryPolicy, Secret};
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ProviderAdapter, ToolMode};
use ollm_types::{
    FinishReason, Message, ProviderErrorKind, ProviderEvent, ProviderRequest, ToolCall, ToolSchema,
    Usage, WarningKind,
};
use serde_json::json;
use test_utils::mock_anthropic::{
    MessagesEvents, MockAnthropic, Reply, api_error, mock_input_tokens,
};
use test_utils::recording_tool::{RecordingTool, registry};

fn config(base_url: &str) -> AnthropicConfig {
    let mut config = AnthropicConfig::new(base_url);
    config.http = HttpConfig {
        idle_timeout: Duration::from_millis(300),
        retry: RetryPolicy {
            max_retries: 2,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            max_retry_after: Duration::from_millis(50),
        },
        ..HttpConfig::default()
    };
    config
}

fn provider(mock: &MockAnthropic) -> AnthropicProvider {
    AnthropicProvider::new(config(&mock.base_url())).unwrap()
}

fn request() -> ProviderRequest {
    ProviderRequest::new("mock-model", vec![Message::user("hi")])
}

async fn collect(provider: &AnthropicProvider, request: ProviderRequest) -> Vec<ProviderEvent> {
    tokio::time::timeout(Duration::from_secs(10), provider.chat(request).collect())
        .await
        .unwrap()
}

/// Plays `replies` to one request and compares the events (warning texts are ignored).
async fn check(replies: Vec<Reply>, expected: &[ProviderEvent]) {
    let mock = MockAnthropic::start().await.unwrap();
    for r in replies {
        mock.push_reply(r);
    }
    let got: Vec<ProviderEvent> = collect(&provider(&mock), request())
        .await
        .into_iter()
        .map(|e| match e {
            ProviderEvent::Warning { mut warning } => {
                warning.message.clear();
                ProviderEvent::Warning { warning }
            }
            other => other,
        })
        .collect();
    assert_eq!(test_utils::split::merged(got), expected);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

/// Plays `replies` and returns the final error.
async fn final_error(mock: &MockAnthropic, replies: Vec<Reply>) -> ollm_types::ProviderError {
    for r in replies {
        mock.push_reply(r);
    }
    let events = collect(&provider(mock), request()).await;
    match events.last() {
        Some(ProviderEvent::Error { error }) => error.clone(),
        other => panic!("expected an error, got {other:?} in {events:?}"),
    }
}

fn text(t: &str) -> ProviderEvent {
    ProviderEvent::TextDelta { text: t.into() }
}

fn usage(prompt: u32, completion: u32) -> ProviderEvent {
    ProviderEvent::Usage {
        usage: Usage {
            prompt_tokens: Some(prompt),
            completion_tokens: Some(completion),
            ..Usage::default()
        },
    }
}

#[tokio::test]
async fn streams_every_event_cut_into_small_pieces_with_delays() {
    check(
        vec![
            Reply::sse()
                .message_start(12)
                .ping()
                .thinking_block(0, &["hm", "m"])
                .delay(Duration::from_millis(20))
                .text_block(1, &["Hé", "llo"])
                .tool_block(2, "toolu_1", "read_file", &["", "{\"path\"", ": \"a\"}"])
                .message_delta("tool_use", 7)
                .message_stop()
                .split_every(3)
                .reply(),
        ],
        &[
            ProviderEvent::ThinkingDelta { text: "hmm".into() },
            text("Héllo"),
            ProviderEvent::ToolCall {
                call: ToolCall::new("toolu_1", "read_file", json!({"path": "a"})).unwrap(),
            },
            usage(12, 7),
            ProviderEvent::Finish {
                reason: FinishReason::ToolCalls,
            },
        ],
    )
    .await;
}

#[tokio::test]
async fn retries_an_overloaded_server_honouring_retry_after_and_says_so() {
    check(
        vec![
            api_error(529, "overloaded_error", "Overloaded").with_retry_after("0"),
            Reply::sse()
                .message_start(1)
                .text_block(0, &["ok"])
                .message_delta("end_turn", 1)
                .message_stop()
                .reply(),
        ],
        &[
            ProviderEvent::Warning {
                warning: ollm_types::Warning::new(WarningKind::Retrying, ""),
            },
            text("ok"),
            usage(1, 1),
            ProviderEvent::Finish {
                reason: FinishReason::Stop,
            },
        ],
    )
    .await;
}

#[tokio::test]
async fn errors_map_to_kinds() {
    let overloaded = || api_error(529, "overloaded_error", "Overloaded");
    let cases: Vec<(Vec<Reply>, ProviderErrorKind, bool)> = vec![
        (
            vec![api_error(404, "not_found_error", "model: mock-x")],
            ProviderErrorKind::ModelNotFound,
            false,
        ),
        (
            vec![api_error(401, "authentication_error", "invalid x-api-key")],
            ProviderErrorKind::Auth,
            false,
        ),
        (
            vec![api_error(403, "permission_error", "no")],
            ProviderErrorKind::Auth,
            false,
        ),
        (
            vec![api_error(400, "invalid_request_error", "bad")],
            ProviderErrorKind::BadRequest,
            false,
        ),
        (
            vec![api_error(
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum",
            )],
            ProviderErrorKind::ContextOverflow,
            false,
        ),
        (
            vec![api_error(413, "request_too_large", "too big")],
            ProviderErrorKind::BadRequest,
            false,
        ),
        // Retried twice, then given up: still the retryable kind it is.
        (
            vec![overloaded(), overloaded(), overloaded()],
            ProviderErrorKind::Busy,
            true,
        ),
        (
            vec![
                api_error(429, "rate_limit_error", "slow"),
                api_error(429, "rate_limit_error", "slow"),
                api_error(429, "rate_limit_error", "slow"),
            ],
            ProviderErrorKind::Busy,
            true,
        ),
        (
            vec![
                api_error(500, "api_error", "boom"),
                api_error(500, "api_error", "boom"),
                api_error(500, "api_error", "boom"),
            ],
            ProviderErrorKind::Server,
            true,
        ),
        // An error event mid-stream, after output.
        (
            vec![
                Reply::sse()
                    .message_start(1)
                    .text_block(0, &["a"])
                    .api_error_event("overloaded_error", "Overloaded")
                    .reply(),
            ],
            ProviderErrorKind::Busy,
            true,
        ),
        (
            vec![Reply::sse().message_start(1).text_block(0, &["a"]).reply()],
            ProviderErrorKind::IncompleteStream,
            false,
        ),
        // A stall is the idle timeout (exit 3), after output too.
        (
            vec![
                Reply::sse()
                    .message_start(1)
                    .text_block(0, &["a"])
                    .stall()
                    .reply(),
            ],
            ProviderErrorKind::Timeout,
            false,
        ),
    ];
    for (replies, kind, retryable) in cases {
        let mock = MockAnthropic::start().await.unwrap();
        let error = final_error(&mock, replies).await;
        assert_eq!(
            (error.kind, error.retryable),
            (kind, retryable),
            "{error:?}"
        );
        if matches!(
            kind,
            ProviderErrorKind::ModelNotFound | ProviderErrorKind::Auth
        ) {
            assert!(error.hint.is_some(), "{error:?}");
        }
        if let Some(hint) = &error.hint {
            assert!(!hint.contains("ollm "), "{hint}");
        }
        if kind == ProviderErrorKind::ModelNotFound {
            let hint = error.hint.as_deref().unwrap_or_default();
            assert!(hint.contains("/v1/models lists what it serves"), "{hint}");
        }
    }
}

#[tokio::test]
async fn a_server_that_is_down_is_a_connection_error_naming_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let mut cfg = config(&url);
    cfg.http.retry = RetryPolicy::none();
    let events = collect(&AnthropicProvider::new(cfg).unwrap(), request()).await;
    match &events[..] {
        [ProviderEvent::Error { error }] => {
            assert_eq!(error.kind, ProviderErrorKind::Connection);
            assert!(
                error.hint.as_deref().is_some_and(|h| h.contains(&url)),
                "{error:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let mock = MockAnthropic::start().await.unwrap();
    mock.push_reply(
        Reply::sse()
            .message_start(1)
            .text_block(0, &["first"])
            .stall()
            .reply(),
    );
    let provider = provider(&mock);
    let mut stream = provider.chat(request());
    assert_eq!(stream.next().await, Some(text("first")));
    drop(stream);
    tokio::time::timeout(Duration::from_secs(5), mock.wait_bodies_ended(1))
        .await
        .unwrap();
}

fn done(reply: &str) -> Reply {
    Reply::sse()
        .message_start(1)
        .text_block(0, &[reply])
        .message_delta("end_turn", 1)
        .message_stop()
        .reply()
}

#[tokio::test]
async fn sends_a_valid_body_with_object_inputs_and_answered_calls() {
    let mock = MockAnthropic::start().await.unwrap();
    mock.require_key("sk-ant-canary");
    mock.push_reply(done("done"));
    let calls = vec![
        ToolCall::new("c1", "add", json!({"a": 1, "b": 2})).unwrap(),
        ToolCall::new("c2", "add", json!({"a": 3, "b": 4})).unwrap(),
    ];
    let mut req = ProviderRequest::new(
        "mock-model",
        vec![
            Message::user("add"),
            Message::assistant_with_calls("", calls),
            Message::tool_result("c1", "add", "3"),
            Message::tool_result("c2", "add", "7"),
        ],
    );
    req.system = Some("sys".into());
    req.tools = vec![ToolSchema::new("add", "adds", json!({"type": "object"}))];
    let mut cfg = config(&mock.base_url());
    cfg.http.api_key = Some(Secret::new("sk-ant-canary"));
    let provider = AnthropicProvider::new(cfg).unwrap();
    assert!(!format!("{provider:?}").contains("sk-ant-canary"));
    let events = collect(&provider, req).await;
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finish {
            reason: FinishReason::Stop
        }),
        "{events:?}"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert_eq!(mock.keys(), [Some("sk-ant-canary".to_owned())]);
    let body = &mock.requests()[0];
    assert_eq!(body["system"], json!("sys"));
    assert_eq!(body["max_tokens"], json!(4096));
    assert_eq!(
        body["messages"][1]["content"][1],
        json!({"type": "tool_use", "id": "c2", "name": "add", "input": {"a": 3, "b": 4}})
    );
    assert_eq!(body["messages"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn the_mock_refuses_what_the_api_refuses() {
    // A request that is not the adapter's: a result with no call before it, and a
    // missing version header, are both refused and listed.
    let mock = MockAnthropic::start().await.unwrap();
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let body = json!({"model": "m", "max_tokens": 5, "stream": true, "messages": [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "1"}]}]});
    let url = format!("{}/v1/messages", mock.base_url());
    let status = |r: reqwest::Response| r.status().as_u16();
    let sent = client.post(&url).json(&body).send().await.unwrap();
    assert_eq!(status(sent), 400);
    let sent = client
        .post(&url)
        .header("anthropic-version", ANTHROPIC_VERSION)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(status(sent), 400);
    let violations = mock.violations();
    assert!(
        violations[0].contains("anthropic-version"),
        "{violations:?}"
    );
    assert!(violations[1].contains("answers no call"), "{violations:?}");
}

#[tokio::test]
async fn images_go_as_base64_sources() {
    let mock = MockAnthropic::start().await.unwrap();
    mock.push_reply(done("a cat"));
    let req = ProviderRequest::new(
        "mock-model",
        vec![Message::user_with_images(
            "what is it?",
            vec![("iVBORw0KGgo=".into(), "image/png".into())],
        )],
    );
    let events = collect(&provider(&mock), req).await;
    assert!(matches!(events.last(), Some(ProviderEvent::Finish { .. })));
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    assert_eq!(
        mock.requests()[0]["messages"][0]["content"][1],
        json!({"type": "image", "source":
            {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
    );
}

#[tokio::test]
async fn counts_the_whole_request_where_the_server_can() {
    let mock = MockAnthropic::start().await.unwrap();
    let mut req = request();
    req.system = Some("be brief".into());
    req.tools = vec![ToolSchema::new("f", "does it", json!({"type": "object"}))];
    req.options.max_tokens = Some(9);
    let provider = provider(&mock);
    let counted = provider.count_request(&req).await.unwrap();
    let sent = mock.count_requests();
    assert_eq!(counted, Some(mock_input_tokens(&sent[0])));
    assert!(sent[0].get("max_tokens").is_none(), "{}", sent[0]);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    // A server without the endpoint: no count, and it is not asked again.
    let bare = MockAnthropic::start().await.unwrap();
    bare.without_count_tokens();
    let provider = self::provider(&bare);
    assert_eq!(provider.count_request(&req).await.unwrap(), None);
    assert_eq!(provider.count_request(&req).await.unwrap(), None);
    assert_eq!(
        bare.keys().len(),
        0,
        "the 404 comes before the header check"
    );
}

#[tokio::test]
async fn lists_and_shows_models() {
    let mock = MockAnthropic::start().await.unwrap();
    mock.set_models(&["claude-x", "qwen"]);
    let provider = provider(&mock);
    let names: Vec<String> = provider
        .list_models()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["claude-x", "qwen"]);
    // No llama.cpp /props here: `show` is the model's entry, or a refusal saying why.
    assert_eq!(provider.show_model("qwen").await.unwrap().name, "qwen");
    let refused = provider.show_model("other").await.unwrap_err();
    assert_eq!(refused.kind, ProviderErrorKind::Unsupported);
    for what in ["pull", "ps"] {
        let error = match what {
            "pull" => provider.pull_model("x").next().await.unwrap().unwrap_err(),
            _ => provider.running_models().await.unwrap_err(),
        };
        assert_eq!(error.kind, ProviderErrorKind::Unsupported, "{what}");
    }
}

#[tokio::test]
async fn llama_server_without_jinja_is_tools_unsupported() {
    let mock = MockAnthropic::start().await.unwrap();
    mock.push_reply(Reply::Http {
        status: 500,
        body: json!({"error": {"code": 500, "message": "tools param requires --jinja flag",
            "type": "server_error"}}),
        retry_after: None,
    });
    let error = final_error(&mock, vec![]).await;
    assert_eq!(error.kind, ProviderErrorKind::ToolsUnsupported, "{error:?}");
    assert!(!error.retryable);
    assert!(error.hint.as_deref().is_some_and(|h| h.contains("--jinja")));
}

/// A whole run through `ollm-core`: the model calls a tool (arguments streamed as
/// `input_json_delta`), the result goes back as a `tool_result` the mock checks against
/// the call, and the model answers.
#[tokio::test]
async fn a_chat_run_calls_a_tool_and_sends_its_result_back() {
    let mock = MockAnthropic::start().await.unwrap();
    mock.push_reply(
        Reply::sse()
            .message_start(20)
            .text_block(0, &["Let me add."])
            .tool_block(1, "toolu_a", "add", &["{\"a\": 2,", " \"b\": 3}"])
            .message_delta("tool_use", 9)
            .message_stop()
            .split_every(7)
            .reply(),
    );
    mock.push_reply(done("It is 5."));
    let add = RecordingTool::new("add").returns(json!("5"));
    let mut config = ChatConfig::for_model("mock-model");
    config.tool_mode = ToolMode::Native;
    let client = ChatClient::new(
        Arc::new(provider(&mock)),
        registry(vec![add.clone()]),
        config,
    );
    let events: Vec<ChatEvent> = tokio::time::timeout(
        Duration::from_secs(10),
        client.chat("add 2 and 3", ChatOptions::default()).collect(),
    )
    .await
    .unwrap();
    assert!(
        matches!(events.last(), Some(ChatEvent::Finish { .. })),
        "{events:#?}"
    );
    assert_eq!(add.calls().len(), 1);
    assert_eq!(add.calls()[0].arguments["b"], 3);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let second = &mock.requests()[1];
    let last = &second["messages"][2]["content"][0];
    assert_eq!(last["type"], "tool_result", "{second:#}");
    assert_eq!(last["tool_use_id"], "toolu_a");
    // The counts the run asked for, before each request.
    assert_eq!(mock.count_requests().len(), 2);
}
