//! `/api/chat` through the provider against the mock: streaming, tools, thinking, errors,
//! retries, cancellation and the truncation warning.

use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::{OllamaConfig, OllamaProvider};
use ollm_core::ProviderAdapter;
use ollm_types::{
    FinishReason, Message, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest, Think,
    ToolCall, ToolSchema, WarningKind,
};
use serde_json::json;
use test_utils::fixtures;
use test_utils::mock_ollama::{MockOllama, Reply, mock_token_count};

use super::{collect, provider, provider_with};

fn fixture(case: &str) -> Reply {
    Reply::from_file(&fixtures::path(&format!("ollama/{case}/stream.ndjson"))).unwrap()
}

fn text(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn error(events: &[ProviderEvent]) -> Option<&ProviderError> {
    match events.last() {
        Some(ProviderEvent::Error { error }) => Some(error),
        _ => None,
    }
}

fn finish(events: &[ProviderEvent]) -> Option<FinishReason> {
    match events.last() {
        Some(ProviderEvent::Finish { reason }) => Some(*reason),
        _ => None,
    }
}

fn warnings(events: &[ProviderEvent]) -> Vec<WarningKind> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::Warning { warning } => Some(warning.kind),
            _ => None,
        })
        .collect()
}

fn ask(model: &str, text: &str) -> ProviderRequest {
    ProviderRequest::new(model, vec![Message::user(text)])
}

#[tokio::test]
async fn streams_text_split_anywhere_and_sends_the_requested_num_ctx() {
    let mock = MockOllama::start().await.unwrap();
    mock.script(
        "/api/chat",
        fixture("text_stream")
            .split_every(3)
            .delay_each(Duration::from_millis(1)),
    );
    let mut req = ask("qwen3:8b", "hi");
    req.options.context_length = Some(8192);
    let p = provider(&mock);
    let events = collect(p.chat(req)).await;
    assert_eq!(text(&events), "Bonjour le monde 🌍, ça va?\n\"ok\"");
    assert_eq!(finish(&events), Some(FinishReason::Stop));
    let usage = events.iter().find_map(|e| match e {
        ProviderEvent::Usage { usage } => Some(*usage),
        _ => None,
    });
    let usage = usage.unwrap();
    assert_eq!(usage.prompt_tokens, Some(26));
    assert_eq!(
        usage.total_duration,
        Some(Duration::from_nanos(4_883_583_458))
    );
    let chat = &mock.requests_to("/api/chat")[0].body;
    // Exactly the request's context_length (core settled it), nothing worked out here.
    assert_eq!(chat["options"]["num_ctx"], 8192);
    assert_eq!(chat["stream"], true);
    // A request without one sends none (the server's default applies), and no chat asks
    // `/api/show`.
    collect(p.chat(ask("qwen3:8b", "hi"))).await;
    let chat = &mock.requests_to("/api/chat")[1].body;
    assert_eq!(chat["options"].get("num_ctx"), None, "{chat}");
    assert!(mock.requests_to("/api/show").is_empty());
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
}

/// Issue 14: images go as plain base64 in the user message's `images` (no `data:`
/// prefix, which Ollama's decoder refuses), and the mock, which checks that, accepts them.
#[tokio::test]
async fn images_go_as_base64_in_images() {
    let mock = MockOllama::start().await.unwrap();
    let png = ("iVBORw0KGgo=".to_owned(), "image/png".to_owned());
    let gif = ("R0lGODlh".to_owned(), "image/gif".to_owned());
    let req = ProviderRequest::new(
        "qwen3:8b",
        vec![Message::user_with_images("describe", vec![png, gif])],
    );
    let events = collect(provider(&mock).chat(req)).await;
    assert_eq!(finish(&events), Some(FinishReason::Stop), "{events:?}");
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let sent = &mock.requests_to("/api/chat")[0].body["messages"][0];
    assert_eq!(
        *sent,
        json!({"role": "user", "content": "describe", "images": ["iVBORw0KGgo=", "R0lGODlh"]})
    );
}

/// The mock refuses what Ollama's decoder would: images that are not base64 strings.
#[test]
fn the_mock_checks_images() {
    use test_utils::mock_ollama::validate_chat;
    let body = |images: serde_json::Value| json!({"model": "m", "messages": [{"role": "user", "content": "x", "images": images}]});
    let check = |images: serde_json::Value, ok: bool| {
        assert_eq!(
            validate_chat(&body(images.clone())).is_empty(),
            ok,
            "{images}"
        );
    };
    check(json!(["QUJD", "QUI="]), true);
    check(json!(["data:image/png;base64,QUJD"]), false);
    check(json!(["QUJ"]), false);
    check(json!([""]), false);
    check(json!([1]), false);
    check(json!("QUJD"), false);
}

#[tokio::test]
async fn tool_round_trip_keeps_ids_and_object_arguments() {
    let mock = MockOllama::start().await.unwrap();
    mock.script("/api/chat", fixture("tool_calls_with_ids"));
    let p = provider(&mock);
    let mut req = ask("qwen3:8b", "weather and time in Paris?");
    req.tools = vec![ToolSchema::new(
        "get_weather",
        "Weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    )];
    let events = collect(p.chat(req.clone())).await;
    let calls: Vec<ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCall { call } => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].id, "call_gkz0y3xw");
    assert_eq!(finish(&events), Some(FinishReason::ToolCalls));
    req.messages
        .push(Message::assistant_with_calls("", calls.clone()));
    for c in &calls {
        req.messages
            .push(Message::tool_result(&c.id, &c.name, "fine"));
    }
    let events = collect(p.chat(req)).await;
    assert_eq!(finish(&events), Some(FinishReason::Stop));
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let sent = &mock.requests_to("/api/chat")[1].body;
    assert_eq!(
        sent["messages"][1]["tool_calls"][0]["function"]["arguments"]["city"],
        "Paris"
    );
    assert_eq!(sent["messages"][2]["tool_name"], "get_weather");
    assert_eq!(sent["messages"][2]["tool_call_id"], "call_gkz0y3xw");
    assert_eq!(sent["tools"][0]["type"], "function");
}

#[tokio::test]
async fn minted_ids_are_unique() {
    let mock = MockOllama::start().await.unwrap();
    mock.script("/api/chat", fixture("tool_calls_no_ids"));
    mock.script("/api/chat", fixture("tool_calls_no_ids"));
    let p = provider(&mock);
    let mut ids = Vec::new();
    for _ in 0..2 {
        for e in collect(p.chat(ask("qwen3:8b", "x"))).await {
            if let ProviderEvent::ToolCall { call } = e {
                ids.push(call.id);
            }
        }
    }
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!((ids.len(), unique.len()), (4, 4), "{ids:?}");
}

#[tokio::test]
async fn think_is_sent_as_given_and_a_refusal_is_typed() {
    let mock = MockOllama::start().await.unwrap();
    mock.script("/api/chat", fixture("thinking"));
    let p = provider(&mock);
    let mut req = ask("qwen3:8b", "hi");
    req.think = Some(Think::On);
    let events = collect(p.chat(req.clone())).await;
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ProviderEvent::ThinkingDelta { .. }))
    );
    // The runtime decides `think` (issue 8): the adapter sends it even to a model that
    // reports no thinking, and the server's refusal comes back typed.
    req.model = "gemma:2b".into();
    let events = collect(p.chat(req)).await;
    assert_eq!(
        error(&events).map(|e| e.kind),
        Some(ProviderErrorKind::ThinkingUnsupported),
        "{events:?}"
    );
    let chats = mock.requests_to("/api/chat");
    assert_eq!(chats[0].body["think"], true);
    assert_eq!(chats[1].body["think"], true);
    // No window asked, none sent; the chat asks no /api/show.
    assert_eq!(chats[1].body["options"].get("num_ctx"), None);
    assert!(mock.requests_to("/api/show").is_empty());
}

#[tokio::test]
async fn a_missing_model_is_asked_about_once() {
    // Issue 16: the runtime's show_model and the chat that follows made two identical
    // /api/show requests for a model the server does not have.
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    let shown = p.show_model("llama9").await.unwrap_err();
    assert_eq!(shown.kind, ProviderErrorKind::ModelNotFound);
    let e = error(&collect(p.chat(ask("llama9", "x"))).await)
        .unwrap()
        .clone();
    assert_eq!(e.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(e.hint.as_deref(), Some("ollama pull llama9"));
    assert_eq!(mock.requests_to("/api/show").len(), 1);
    assert!(mock.requests_to("/api/chat").is_empty());
    // The answer is used once: a later chat asks again (the model may have been pulled),
    // and the server's 404 says the same.
    let e = error(&collect(p.chat(ask("llama9", "x"))).await)
        .unwrap()
        .clone();
    assert_eq!(e.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(mock.requests_to("/api/chat").len(), 1);
    assert_eq!(mock.requests_to("/api/show").len(), 1);
}

#[tokio::test]
async fn a_settled_window_sends_no_show() {
    // Issue 15: the runtime always settles the window, so the chat's own /api/show
    // was a request per first chat (a thousand concurrent chats sent a thousand).
    let mock = MockOllama::start().await.unwrap();
    mock.script("/api/chat", fixture("thinking"));
    let p = provider(&mock);
    let mut req = ask("qwen3:8b", "hi");
    req.options.context_length = Some(3000);
    let events = collect(p.chat(req)).await;
    assert_eq!(finish(&events), Some(FinishReason::Stop), "{events:?}");
    assert_eq!(mock.requests_to("/api/show").len(), 0);
    assert_eq!(
        mock.requests_to("/api/chat")[0].body["options"]["num_ctx"],
        3000
    );
    // A model show_model found missing still fails without asking the server again.
    assert!(p.show_model("llama9").await.is_err());
    let mut req = ask("llama9", "x");
    req.options.context_length = Some(3000);
    let e = error(&collect(p.chat(req)).await).unwrap().clone();
    assert_eq!(e.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(mock.requests_to("/api/show").len(), 1);
    assert_eq!(mock.requests_to("/api/chat").len(), 1);
}

#[tokio::test]
async fn errors_are_typed_with_hints() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);

    // 404: the model is not there.
    let events = collect(p.chat(ask("llama9", "x"))).await;
    let e = error(&events).unwrap();
    assert_eq!(e.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(e.hint.as_deref(), Some("ollama pull llama9"));

    // 400 tools: gemma has no tool support (the server's own check).
    let mut req = ask("gemma:2b", "x");
    req.tools = vec![ToolSchema::new("t", "d", json!({"type": "object"}))];
    let e = collect(p.chat(req)).await;
    assert_eq!(error(&e).unwrap().kind, ProviderErrorKind::ToolsUnsupported);
    assert!(!error(&e).unwrap().retryable);

    // 400 thinking, when the server refuses think anyway (capabilities said yes).
    mock.script(
        "/api/chat",
        Reply::error(400, "\"qwen3:8b\" does not support thinking"),
    );
    let e = collect(p.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(
        error(&e).unwrap().kind,
        ProviderErrorKind::ThinkingUnsupported
    );

    // An error line inside a 200 stream: text kept, the server's words.
    mock.script("/api/chat", fixture("error_in_stream"));
    let e = collect(p.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(text(&e), "Partial");
    let err = error(&e).unwrap();
    assert_eq!(err.kind, ProviderErrorKind::Server);
    assert_eq!(
        err.message,
        "an error was encountered while running the model: unexpected EOF"
    );

    // Issue 8's drift: an error line in the body gets the same mapping and hint as an
    // HTTP error (a model unloaded between show and chat, a capability refused).
    mock.script(
        "/api/chat",
        Reply::ndjson(&[json!({"error": "model 'qwen3:8b' not found"})]),
    );
    let err = error(&collect(p.chat(ask("qwen3:8b", "x"))).await)
        .unwrap()
        .clone();
    assert_eq!(err.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(err.hint.as_deref(), Some("ollama pull qwen3:8b"));
    mock.script(
        "/api/chat",
        Reply::ndjson(&[
            json!({"error": "registry.ollama.ai/library/qwen3:8b does not support tools"}),
        ]),
    );
    let err = error(&collect(p.chat(ask("qwen3:8b", "x"))).await)
        .unwrap()
        .clone();
    assert_eq!(err.kind, ProviderErrorKind::ToolsUnsupported);

    // The body ends without done, or the connection breaks mid-stream.
    mock.script("/api/chat", fixture("text_stream").truncate_after(2));
    let e = collect(p.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(text(&e), "Bonjour le monde 🌍");
    assert_eq!(error(&e).unwrap().kind, ProviderErrorKind::IncompleteStream);
    mock.script(
        "/api/chat",
        fixture("text_stream").truncate_after(1).then_abort(),
    );
    let e = collect(p.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(text(&e), "Bonjour");
    assert_eq!(error(&e).unwrap().kind, ProviderErrorKind::IncompleteStream);

    // A malformed line names itself.
    mock.script("/api/chat", fixture("malformed"));
    let e = collect(p.chat(ask("qwen3:8b", "x"))).await;
    let err = error(&e).unwrap();
    assert_eq!(err.kind, ProviderErrorKind::Protocol);
    assert!(err.message.contains("\"content\":\"bro"), "{}", err.message);

    // An over-long line.
    let small = provider_with(&mock, |c| c.max_line = 64);
    mock.script("/api/chat", fixture("text_stream"));
    let e = collect(small.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(error(&e).unwrap().kind, ProviderErrorKind::Protocol);
    assert!(mock.violations().is_empty());
}

#[tokio::test]
async fn connection_refused_hints_ollama_serve() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut config = OllamaConfig::from_host(Some(&addr.to_string())).unwrap();
    config.http.retry.max_retries = 0;
    let p = OllamaProvider::new(config).unwrap();
    let events = collect(p.chat(ask("qwen3:8b", "x"))).await;
    let e = error(&events).unwrap();
    assert_eq!(e.kind, ProviderErrorKind::Connection);
    assert!(e.hint.as_deref().unwrap().contains("ollama serve"));
    assert!(e.retryable);
}

#[tokio::test]
async fn busy_server_is_retried_and_announced_but_400_is_not() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    mock.script(
        "/api/chat",
        Reply::error(
            503,
            "server busy, please try again.  maximum pending requests exceeded",
        )
        .header("Retry-After", "0"),
    );
    mock.script("/api/chat", Reply::error(429, "slow down"));
    let events = collect(p.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(
        warnings(&events),
        vec![WarningKind::Retrying, WarningKind::Retrying]
    );
    assert_eq!(text(&events), "Hello from mock");
    assert_eq!(mock.requests_to("/api/chat").len(), 3);

    mock.script("/api/chat", Reply::error(400, "invalid options"));
    let events = collect(p.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(error(&events).unwrap().kind, ProviderErrorKind::BadRequest);
    assert_eq!(mock.requests_to("/api/chat").len(), 4);
}

#[tokio::test]
async fn a_stream_that_yielded_is_never_retried() {
    let mock = MockOllama::start().await.unwrap();
    mock.script(
        "/api/chat",
        fixture("text_stream").truncate_after(1).then_abort(),
    );
    let events = collect(provider(&mock).chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(
        error(&events).unwrap().kind,
        ProviderErrorKind::IncompleteStream
    );
    assert!(!error(&events).unwrap().retryable);
    assert_eq!(mock.requests_to("/api/chat").len(), 1);
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let mock = MockOllama::start().await.unwrap();
    mock.script(
        "/api/chat",
        fixture("text_stream").truncate_after(1).then_stall(),
    );
    let mut stream = provider(&mock).chat(ask("qwen3:8b", "x"));
    let first = stream.next().await;
    assert!(
        matches!(first, Some(ProviderEvent::TextDelta { .. })),
        "{first:?}"
    );
    drop(stream);
    let index = mock
        .requests()
        .iter()
        .rposition(|r| r.path == "/api/chat")
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), mock.wait_closed_early(index))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_stalled_stream_hits_the_idle_timeout() {
    let mock = MockOllama::start().await.unwrap();
    mock.script(
        "/api/chat",
        fixture("text_stream").truncate_after(1).then_stall(),
    );
    let p = provider_with(&mock, |c| c.http.idle_timeout = Duration::from_millis(200));
    let events = collect(p.chat(ask("qwen3:8b", "x"))).await;
    // Issue 16: even after text, an idle timeout is a timeout (exit 3); the message says
    // the text already delivered is partial.
    let stalled = error(&events).unwrap();
    assert_eq!(stalled.kind, ProviderErrorKind::Timeout);
    assert!(stalled.message.contains("partial"), "{stalled:?}");
    // Before any text the same stall is the idle timeout itself.
    mock.script(
        "/api/chat",
        fixture("text_stream").truncate_after(0).then_stall(),
    );
    let events = collect(p.chat(ask("qwen3:8b", "x"))).await;
    assert_eq!(error(&events).unwrap().kind, ProviderErrorKind::Timeout);
}

#[tokio::test]
async fn silent_truncation_is_reported_and_a_fitting_prompt_is_not() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    let windowed = |text: &str| {
        let mut req = ask("qwen3:8b", text);
        req.options.context_length = Some(2048);
        req
    };
    let mut long = windowed(&"All work and no play makes Jack a dull boy. ".repeat(400));
    long.system = Some("You are a pirate. Always answer in pirate speak.".into());
    let events = collect(p.chat(long)).await;
    assert_eq!(warnings(&events), vec![WarningKind::PromptTruncated]);
    assert_eq!(finish(&events), Some(FinishReason::Stop));
    let events = collect(p.chat(windowed("short question"))).await;
    assert!(warnings(&events).is_empty());
    // The recorded fixture: the server stopped at the window sent.
    mock.script("/api/chat", fixture("truncated_prompt"));
    let events = collect(p.chat(windowed(&"x".repeat(20_000)))).await;
    assert_eq!(warnings(&events), vec![WarningKind::PromptTruncated]);
}

/// Issue 26: truncation is judged against the runtime's estimate carried on the request
/// (core's calibrated cost), not a count of the adapter's own.
#[tokio::test]
async fn truncation_is_judged_by_the_estimate_on_the_request() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    let count =
        |text: &str| mock_token_count(&json!({"messages": [{"role": "user", "content": text}]}));
    // (prompt, estimate carried, warns): the mock reads each short prompt whole (well
    // under the window; each differs, so none is in its prompt cache), so only an
    // estimate far over the window says it was cut.
    let (a, b, c) = ("a short prompt", "another short one", "a third prompt");
    for (text, estimate, warns) in [
        (a, None, false),
        (b, Some(count(b)), false),
        (c, Some(9000), true),
    ] {
        let mut req = ask("qwen3:8b", text);
        req.options.context_length = Some(2048);
        req.estimated_prompt_tokens = estimate;
        let events = collect(p.chat(req)).await;
        let want = if warns {
            vec![WarningKind::PromptTruncated]
        } else {
            Vec::new()
        };
        assert_eq!(warnings(&events), want, "estimate {estimate:?}");
    }
}

#[tokio::test]
async fn a_fresh_prompt_read_short_warns_and_says_what_to_do() {
    // Issue 16: a fresh client, one prompt, no calibration history; the server reads 64
    // tokens of a ~330-token prompt although a window of 8192 was sent.
    let mock = MockOllama::start().await.unwrap();
    mock.script(
        "/api/chat",
        Reply::ndjson(&[
            json!({"message": {"role": "assistant", "content": "Arr"}, "done": false}),
            json!({"message": {"role": "assistant", "content": ""}, "done": true,
                "done_reason": "stop", "prompt_eval_count": 64, "eval_count": 1}),
        ]),
    );
    let p = provider(&mock);
    let mut req = ask("qwen3:8b", &"Tell me about ships. ".repeat(60));
    req.options.context_length = Some(8192);
    let events = collect(p.chat(req)).await;
    assert_eq!(warnings(&events), vec![WarningKind::PromptTruncated]);
    let said = events.iter().find_map(|e| match e {
        ProviderEvent::Warning { warning } => Some(warning.message.clone()),
        _ => None,
    });
    let said = said.unwrap();
    assert!(
        said.contains("num_ctx") && said.contains("--context-length"),
        "{said}"
    );
    assert_eq!(finish(&events), Some(FinishReason::Stop));
}

/// Issue 26: the adapter has no token count of its own (core calibrates cost from the
/// prompt counts it reports), however many replies it has seen.
#[tokio::test]
async fn count_tokens_is_left_to_the_runtime() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    for n in [3, 10] {
        collect(p.chat(ask("qwen3:8b", &"The quick brown fox. ".repeat(n)))).await;
    }
    assert_eq!(p.count_tokens("qwen3:8b", "hello").await.unwrap(), None);
}
