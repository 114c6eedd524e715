//! The provider against the mock OpenAI-compatible server: streaming through real HTTP,
//! the request body it sends, error mapping, retries, timeouts, cancellation, models and
//! token counting.

use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::openai::{OpenAiConfig, OpenAiProvider};
use ollm_bridge::{HttpConfig, RetryPolicy};
use ollm_core::ProviderAdapter;
use ollm_types::{
    FinishReason, Message, ProviderErrorKind, ProviderEvent, ProviderRequest, ToolCall, Usage,
    WarningKind,
};
use serde_json::json;
use test_utils::mock_openai::{MockOpenAi, Reply, Tokenizer, mock_token_count};

fn config(base_url: &str) -> OpenAiConfig {
    let mut config = OpenAiConfig::new(base_url);
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

fn provider(mock: &MockOpenAi) -> OpenAiProvider {
    OpenAiProvider::new(config(&mock.base_url())).unwrap()
}

fn request() -> ProviderRequest {
    ProviderRequest::new("mock-model", vec![Message::user("hi")])
}

async fn collect(provider: &OpenAiProvider, request: ProviderRequest) -> Vec<ProviderEvent> {
    tokio::time::timeout(Duration::from_secs(10), provider.chat(request).collect())
        .await
        .unwrap()
}

/// Plays `replies` to one request and compares the events (warning texts are ignored).
async fn check(replies: Vec<Reply>, expected: &[ProviderEvent]) {
    let mock = MockOpenAi::start().await.unwrap();
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
    assert_eq!(got, expected);
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

/// Plays `replies` and returns the final error.
async fn final_error(mock: &MockOpenAi, replies: Vec<Reply>) -> ollm_types::ProviderError {
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

#[tokio::test]
async fn streams_text_and_usage_cut_into_small_pieces_with_delays() {
    check(
        vec![
            Reply::sse()
                .content("Hé")
                .delay(Duration::from_millis(20))
                .keep_alive()
                .content("llo")
                .finish("stop")
                .usage(3, 2)
                .done()
                .split_every(3)
                .reply(),
        ],
        &[
            text("Hé"),
            text("llo"),
            ProviderEvent::Usage {
                usage: Usage {
                    prompt_tokens: Some(3),
                    completion_tokens: Some(2),
                    ..Usage::default()
                },
            },
            ProviderEvent::Finish {
                reason: FinishReason::Stop,
            },
        ],
    )
    .await;
}

#[tokio::test]
async fn replays_a_recorded_ollama_v1_batch_split_every_five_bytes() {
    let body = std::fs::read(test_utils::fixtures::path(
        "openai/ollama_v1_parallel_index0.sse",
    ))
    .unwrap();
    let call = |id: &str, city: &str| ProviderEvent::ToolCall {
        call: ToolCall::new(id, "get_weather", json!({"city": city})).unwrap(),
    };
    check(
        vec![Reply::sse().raw(body).split_every(5).reply()],
        &[
            call("call_m1x2", "Paris"),
            call("call_q8z0", "Rome"),
            ProviderEvent::Usage {
                usage: Usage {
                    prompt_tokens: Some(88),
                    completion_tokens: Some(40),
                    ..Usage::default()
                },
            },
            ProviderEvent::Finish {
                reason: FinishReason::ToolCalls,
            },
        ],
    )
    .await;
}

#[tokio::test]
async fn retries_a_busy_server_honouring_retry_after_and_says_so() {
    check(
        vec![
            Reply::http_error(503, "busy").with_retry_after("0"),
            Reply::sse().content("ok").finish("stop").done().reply(),
        ],
        &[
            ProviderEvent::Warning {
                warning: ollm_types::Warning::new(WarningKind::Retrying, ""),
            },
            text("ok"),
            ProviderEvent::Finish {
                reason: FinishReason::Stop,
            },
        ],
    )
    .await;
}

#[tokio::test]
async fn errors_map_to_kinds() {
    let cases: Vec<(Vec<Reply>, ProviderErrorKind)> = vec![
        (
            vec![Reply::http_error(404, "model not found")],
            ProviderErrorKind::ModelNotFound,
        ),
        (
            vec![Reply::http_error(401, "bad key")],
            ProviderErrorKind::Auth,
        ),
        (
            vec![Reply::http_error(403, "forbidden")],
            ProviderErrorKind::Auth,
        ),
        (
            vec![Reply::http_error(400, "bad")],
            ProviderErrorKind::BadRequest,
        ),
        (
            vec![Reply::Http {
                status: 400,
                body: json!({"error": {"code": 400, "message": "too long",
                    "type": "exceed_context_size_error"}}),
                retry_after: None,
            }],
            ProviderErrorKind::ContextOverflow,
        ),
        (
            vec![Reply::sse().content("a").error_event("boom").reply()],
            ProviderErrorKind::Server,
        ),
        (
            vec![Reply::sse().content("a").reply()],
            ProviderErrorKind::IncompleteStream,
        ),
        // A stall is the idle timeout (exit 3), after output too (issue 16).
        (
            vec![Reply::sse().content("a").stall().reply()],
            ProviderErrorKind::Timeout,
        ),
        (
            vec![Reply::sse().stall().reply()],
            ProviderErrorKind::Timeout,
        ),
    ];
    for (replies, kind) in cases {
        let mock = MockOpenAi::start().await.unwrap();
        let error = final_error(&mock, replies).await;
        assert_eq!(error.kind, kind, "{error:?}");
        if matches!(
            kind,
            ProviderErrorKind::ModelNotFound | ProviderErrorKind::Auth
        ) {
            assert!(error.hint.is_some(), "{error:?}");
        }
        // Hints say what is true at the server, and name no CLI command.
        if let Some(hint) = &error.hint {
            assert!(!hint.contains("ollm "), "{hint}");
        }
        if kind == ProviderErrorKind::ModelNotFound {
            let hint = error.hint.as_deref().unwrap_or_default();
            assert!(hint.contains("GET http://127.0.0.1:"), "{hint}");
            assert!(hint.contains("/v1/models lists what it serves"), "{hint}");
        }
    }
}

#[tokio::test]
async fn a_server_that_is_down_is_a_connection_error_naming_the_url() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let mut cfg = config(&url);
    cfg.http.retry = RetryPolicy::none();
    let events = collect(&OpenAiProvider::new(cfg).unwrap(), request()).await;
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
    let mock = MockOpenAi::start().await.unwrap();
    mock.push_reply(Reply::sse().content("first").stall().reply());
    let provider = provider(&mock);
    let mut stream = provider.chat(request());
    assert_eq!(stream.next().await, Some(text("first")));
    drop(stream);
    tokio::time::timeout(Duration::from_secs(5), mock.wait_bodies_ended(1))
        .await
        .unwrap();
}

#[tokio::test]
async fn sends_a_valid_body_with_string_arguments_and_answered_calls() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push_reply(Reply::sse().content("done").finish("stop").done().reply());
    let call = ToolCall::new("c1", "add", json!({"a": 1, "b": 2})).unwrap();
    let mut req = ProviderRequest::new(
        "mock-model",
        vec![
            Message::user("add"),
            Message::assistant_with_calls("", vec![call]),
            Message::tool_result("c1", "add", "3"),
        ],
    );
    req.system = Some("sys".into());
    let events = collect(&provider(&mock), req).await;
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finish {
            reason: FinishReason::Stop
        })
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let body = &mock.requests()[0];
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "sys"})
    );
    assert_eq!(
        body["messages"][2]["tool_calls"][0]["function"]["arguments"],
        json!("{\"a\":1,\"b\":2}")
    );
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
}

/// Issue 14: an image goes as an `image_url` part with a base64 `data:` URL after the
/// text, and the mock (which checks every part) accepts the body; an image-only prompt
/// sends no empty text part.
#[tokio::test]
async fn images_go_as_data_url_parts() {
    let mock = MockOpenAi::start().await.unwrap();
    for _ in 0..2 {
        mock.push_reply(Reply::sse().content("a cat").finish("stop").done().reply());
    }
    let png = ("iVBORw0KGgo=".to_owned(), "image/png".to_owned());
    let jpeg = ("/9j/4AAQ".to_owned(), "image/jpeg".to_owned());
    let described = Message::user_with_images("describe", vec![png, jpeg.clone()]);
    let alone = Message::user_with_images("", vec![jpeg]);
    for message in [described, alone] {
        let req = ProviderRequest::new("mock-model", vec![message]);
        let events = collect(&provider(&mock), req).await;
        assert!(
            matches!(events.last(), Some(ProviderEvent::Finish { .. })),
            "{events:?}"
        );
    }
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let bodies = mock.requests();
    assert_eq!(
        bodies[0]["messages"][0]["content"],
        json!([
            {"type": "text", "text": "describe"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}},
        ])
    );
    assert_eq!(
        bodies[1]["messages"][0]["content"],
        json!([{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}])
    );
}

/// The mock refuses what a server would: an image URL that is neither `http(s)` nor a
/// base64 `data:` URL.
#[test]
fn the_mock_checks_image_parts() {
    use test_utils::mock_openai::validate_chat_body;
    let body = |url: &str| {
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": [
            {"type": "text", "text": "x"}, {"type": "image_url", "image_url": {"url": url}}]}]})
    };
    let check = |url: &str, ok: bool| {
        assert_eq!(validate_chat_body(&body(url)).is_empty(), ok, "{url}");
    };
    check("data:image/png;base64,QUJD", true);
    check("https://example.invalid/cat.png", true);
    check("QUJD", false);
    check("data:image/png;base64,not base64!", false);
    check("data:;base64,QUJD", false);
}

#[tokio::test]
async fn the_mock_refuses_results_that_answer_no_call() {
    let mock = MockOpenAi::start().await.unwrap();
    let req = ProviderRequest::new(
        "mock-model",
        vec![Message::user("x"), Message::tool_result("nope", "add", "3")],
    );
    let events = collect(&provider(&mock), req).await;
    assert!(
        matches!(events.last(), Some(ProviderEvent::Error { error }) if error.kind == ProviderErrorKind::BadRequest)
    );
    assert_eq!(mock.violations().len(), 1);
}

#[tokio::test]
async fn lists_models() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.set_models(&["a", "b"]);
    let models = provider(&mock).list_models().await.unwrap();
    let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(models[0].context_length, Some(4096));
}

#[tokio::test]
async fn other_management_is_unsupported() {
    let mock = MockOpenAi::start().await.unwrap();
    let err = provider(&mock).show_model("a").await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::Unsupported);
}

#[tokio::test]
async fn token_counts_probe_the_dialect_once() {
    let text = "one two three four";
    // (dialect, expected count, requests after two counts)
    let cases = [
        (Tokenizer::LlamaCpp, Some(mock_token_count(text)), 2),
        (Tokenizer::Vllm, Some(mock_token_count(text)), 3),
        (Tokenizer::Absent, None, 2),
    ];
    for (dialect, expected, requests) in cases {
        let mock = MockOpenAi::start().await.unwrap();
        mock.set_tokenizer(dialect);
        let provider = provider(&mock);
        assert_eq!(
            provider.count_tokens("mock-model", text).await.unwrap(),
            expected
        );
        assert_eq!(
            provider.count_tokens("mock-model", text).await.unwrap(),
            expected
        );
        assert_eq!(mock.tokenize_requests().len(), requests, "{dialect:?}");
    }
}

/// A request offering `read_file`.
fn request_with_tools() -> ProviderRequest {
    let mut request = request();
    request.tools = vec![ollm_types::ToolSchema::new(
        "read_file",
        "reads a file",
        json!({"type":"object","properties":{"path":{"type":"string"}}}),
    )];
    request
}

#[tokio::test]
async fn servers_started_without_tool_support_are_tools_unsupported_naming_the_flags() {
    use test_utils::mock_openai::ToolsOff;
    for (how, flag) in [
        (ToolsOff::LlamaWithoutJinja, "--jinja"),
        (
            ToolsOff::VllmWithoutAutoToolChoice,
            "--enable-auto-tool-choice --tool-call-parser",
        ),
    ] {
        let mock = MockOpenAi::start().await.unwrap();
        mock.refuse_tools(how);
        let events = collect(&provider(&mock), request_with_tools()).await;
        let [ProviderEvent::Error { error }] = events.as_slice() else {
            panic!("{how:?}: expected one error, got {events:?}");
        };
        assert_eq!(error.kind, ProviderErrorKind::ToolsUnsupported, "{how:?}");
        assert!(!error.retryable, "{how:?}");
        let hint = error.hint.as_deref().unwrap_or_default();
        assert!(hint.contains(flag), "{how:?}: {hint}");
        // Refused at once, not retried (llama-server's refusal is a 500).
        assert_eq!(mock.requests().len(), 1, "{how:?}");
    }
}

#[tokio::test]
async fn legacy_function_calls_and_misnamed_calls_come_through_http() {
    let mock = MockOpenAi::start().await.unwrap();
    mock.push_reply(
        Reply::sse()
            .data(json!({"choices":[{"index":0,"delta":{"function_call":
                {"name":"functions.Read_File","arguments":"{\"path\":"}}}]}))
            .data(json!({"choices":[{"index":0,"delta":{"function_call":
                {"arguments":"\"a.txt\"}"}}}]}))
            .finish("function_call")
            .done()
            .split_every(7)
            .reply(),
    );
    let events = collect(&provider(&mock), request_with_tools()).await;
    let calls: Vec<&ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCall { call } => Some(call),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(
        calls[0].arguments,
        *json!({"path":"a.txt"}).as_object().unwrap()
    );
    assert_eq!(
        events.last(),
        Some(&ProviderEvent::Finish {
            reason: FinishReason::ToolCalls
        })
    );
}

#[tokio::test]
async fn a_429_asking_for_too_long_a_wait_says_so() {
    let mock = MockOpenAi::start().await.unwrap();
    let error = final_error(
        &mock,
        vec![Reply::http_error(429, "slow down").with_retry_after("120")],
    )
    .await;
    assert_eq!(error.kind, ProviderErrorKind::Busy);
    assert!(
        error.message.contains("asked to wait 120 s"),
        "{}",
        error.message
    );
    assert_eq!(mock.requests().len(), 1);
}
