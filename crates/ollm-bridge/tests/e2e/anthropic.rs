//! The Anthropic Messages adapter against the real server's `/v1/messages` (issue 27):
//! llama-server serves the Messages API beside the OpenAI-compatible one, so the same
//! `cargo xtask e2e` server is reached at the root of `OLLM_E2E_BASE_URL` (its `/v1`
//! dropped).
//!
//! Asserted: a streamed text reply with usage; a tool call assembled from
//! `input_json_delta` fragments and its result sent back as a `tool_result` (the server
//! takes it and the reply ends normally); a whole chat run whose answer uses the
//! result; `count_tokens` equal to the `input_tokens` the reply reports, for
//! requests with and without a system prompt, tools and a call round trip; a prompt over
//! the window counted over it and refused as `ContextOverflow`. Reported on
//! stderr (for the closing note): each request's count beside the estimate plus
//! template correction that a provider without `count_tokens` starts from.
//!
//! Observed (temperature 0): offered `read_file` and asked to use it, this model writes
//! the call as a fenced JSON block in its text, which llama-server does not parse into a
//! `tool_use` block (so the turn loop recovers it). To exercise the native path, the
//! request ends with the assistant's turn begun with `<tool_call>` (a prefill, which the
//! Messages API allows); llama-server then streams a `tool_use` block whose arguments
//! come as `input_json_delta` fragments and stops with `tool_use`.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ollm_bridge::anthropic::{AnthropicConfig, AnthropicProvider};
use ollm_bridge::openai::{OpenAiConfig, OpenAiProvider};
use ollm_core::tokens::{estimate_text, request_text, template_overhead};
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ProviderAdapter, ToolMode};
use ollm_types::{
    FinishReason, Message, ProviderEvent, ProviderRequest, ToolCall, ToolSchema, Usage,
};
use serde_json::json;
use test_utils::recording_tool::{RecordingTool, registry};

use super::setup::{collect_from, server, text_of};

fn provider() -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig::new(server().0)).unwrap()
}

fn request(messages: Vec<Message>, max_tokens: u32) -> ProviderRequest {
    let mut r = ProviderRequest::new(server().1, messages);
    r.options.max_tokens = Some(max_tokens);
    r.options.temperature = Some(0.0);
    r
}

fn read_file() -> ToolSchema {
    ToolSchema::new(
        "read_file",
        "Read a text file in the working folder and return its content.",
        json!({"type": "object", "properties": {"path": {"type": "string"}},
               "required": ["path"]}),
    )
}

fn usage_of(events: &[ProviderEvent]) -> Usage {
    events
        .iter()
        .find_map(|e| match e {
            ProviderEvent::Usage { usage } => Some(*usage),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no usage in {events:?}"))
}

fn finish_of(events: &[ProviderEvent]) -> FinishReason {
    match events.last() {
        Some(ProviderEvent::Finish { reason }) => *reason,
        other => panic!("expected a finish, got {other:?} in {events:?}"),
    }
}

#[tokio::test]
async fn streams_a_text_reply_with_usage() {
    let events = collect_from(
        &provider(),
        request(vec![Message::user("The capital of France is")], 16),
    )
    .await;
    assert!(
        matches!(
            finish_of(&events),
            FinishReason::Stop | FinishReason::Length
        ),
        "{events:?}"
    );
    let usage = usage_of(&events);
    assert!(usage.prompt_tokens.unwrap_or(0) > 0, "{usage:?}");
    assert!(usage.completion_tokens.unwrap_or(0) > 0, "{usage:?}");
    assert!(!text_of(&events).is_empty(), "{events:?}");
}

const ASK: &str = "Use the read_file tool to read config.toml, then tell me which port it sets.";

/// The call request: `read_file` offered, the assistant's turn begun with `<tool_call>`.
fn call_request() -> ProviderRequest {
    let mut r = request(
        vec![Message::user(ASK), Message::assistant("<tool_call>\n")],
        64,
    );
    r.tools = vec![read_file()];
    r
}

#[tokio::test]
async fn a_tool_call_from_input_json_delta_and_its_result_sent_back() {
    let provider = provider();
    let events = collect_from(&provider, call_request()).await;
    assert_eq!(finish_of(&events), FinishReason::ToolCalls, "{events:?}");
    let calls: Vec<ToolCall> = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCall { call } => Some(call.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(calls[0].arguments["path"], "config.toml", "{calls:?}");
    // The result goes back as a tool_result; the server takes it and the model answers.
    let mut answer = request(
        vec![
            Message::user(ASK),
            Message::assistant_with_calls("", calls.clone()),
            Message::tool_result(&calls[0].id, "read_file", "[server]\nport = 8123\n"),
        ],
        48,
    );
    answer.tools = vec![read_file()];
    let events = collect_from(&provider, answer).await;
    assert!(
        matches!(
            finish_of(&events),
            FinishReason::Stop | FinishReason::Length
        ),
        "{events:?}"
    );
    assert!(!text_of(&events).is_empty(), "{events:?}");
}

/// A whole run through `ollm-core` on this adapter: the model's call (written as text,
/// recovered by the native strategy), its result back as a `tool_result`, and the answer.
/// Fact asserted: the answer gives 8123 (at temperature 0 the model asks for the same
/// call again; the loop guard answers it from the first result, then the model answers).
#[tokio::test]
async fn a_chat_run_reads_the_port_through_the_messages_api() {
    let tool = RecordingTool::new("read_file")
        .description("Read a text file in the working folder and return its content.")
        .schema(read_file().parameters)
        .returns(json!("[server]\nport = 8123\n"));
    let mut config = ChatConfig::for_model(server().1);
    config.tool_mode = ToolMode::Native;
    config.max_turns = 4;
    config.options.temperature = Some(0.0);
    let client = ChatClient::new(Arc::new(provider()), registry(vec![tool.clone()]), config);
    let events: Vec<ChatEvent> = tokio::time::timeout(
        Duration::from_secs(300),
        client.chat(ASK, ChatOptions::default()).collect(),
    )
    .await
    .expect("the run took over 300 s");
    let answer: String = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        matches!(events.last(), Some(ChatEvent::Finish { .. })),
        "{events:#?}"
    );
    assert_eq!(tool.calls().len(), 1, "{events:#?}");
    assert_eq!(tool.calls()[0].arguments["path"], "config.toml");
    assert!(answer.contains("8123"), "answer: {answer:?}");
}

/// `count_tokens` against the reported `input_tokens` for requests of each shape, and
/// the estimate a provider without it starts from (`/tokenize` of the text plus the
/// template prior), reported for the closing note.
#[tokio::test]
async fn count_tokens_equals_the_reported_input_tokens() {
    let provider = provider();
    let tokenizer = OpenAiProvider::new(OpenAiConfig::new(server().0)).unwrap();
    let call = ToolCall::new("toolu_1", "read_file", json!({"path": "config.toml"})).unwrap();
    let mut with_system = request(vec![Message::user("Say hi.")], 4);
    with_system.system = Some("You are a terse assistant. Answer in one word.".into());
    let mut with_tools = request(vec![Message::user(ASK)], 4);
    with_tools.tools = vec![read_file()];
    let mut round_trip = request(
        vec![
            Message::user(ASK),
            Message::assistant_with_calls("", vec![call]),
            Message::tool_result("toolu_1", "read_file", "[server]\nport = 8123\n"),
        ],
        4,
    );
    round_trip.tools = vec![read_file()];
    round_trip.system = Some("Answer briefly.".into());
    let cases = [
        (
            "plain",
            request(vec![Message::user("The capital of France is")], 4),
        ),
        ("system", with_system),
        ("tools", with_tools),
        ("round trip", round_trip),
    ];
    for (what, r) in cases {
        let counted = provider.count_request(&r).await.unwrap();
        let model = r.model.clone();
        let prior = template_overhead(&r);
        let chars = estimate_text(&request_text(&r)) + prior;
        let text = tokenizer
            .count_tokens(&model, &request_text(&r))
            .await
            .unwrap();
        let tokenized = text.map(|n| n + prior);
        let events = collect_from(&provider, r).await;
        let reported = usage_of(&events).prompt_tokens.map(|n| n as usize);
        eprintln!(
            "{what}: count_tokens {counted:?}, reported input_tokens {reported:?}; before \
             any correction, /tokenize of the text + template prior {tokenized:?}, \
             chars/4 + prior {chars}"
        );
        assert!(counted.is_some_and(|n| n > 0), "{what}");
        assert_eq!(counted, reported, "{what}");
    }
}

/// A prompt over the slot's window: `count_tokens` says how far over, and the chat is
/// refused as a `ContextOverflow` (llama-server answers in its own error shape, whose
/// `exceed_context_size_error` type the adapter reads like Anthropic's types).
#[tokio::test]
async fn a_prompt_over_the_window_is_counted_and_refused_as_context_overflow() {
    let provider = provider();
    let window = provider
        .show_model(&server().1)
        .await
        .unwrap()
        .window
        .expect("llama-server's /props has the window");
    let long = request(
        vec![Message::user("word ".repeat(window as usize + 500))],
        4,
    );
    let counted = provider.count_request(&long).await.unwrap();
    assert!(
        counted.is_some_and(|n| n > window as usize),
        "{counted:?} vs {window}"
    );
    let events = collect_from(&provider, long).await;
    match events.last() {
        Some(ProviderEvent::Error { error }) => {
            assert_eq!(
                error.kind,
                ollm_types::ProviderErrorKind::ContextOverflow,
                "{error:?}"
            );
            assert!(!error.retryable);
        }
        other => panic!("{other:?}"),
    }
}
