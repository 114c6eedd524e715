//! The OpenAI adapter against the real vLLM: what this server does its own way.
//!
//! Each test names the behaviour it pins; the protocol facts are vLLM 0.32.0's, measured
//! with curl on the same server before they were written here (docs/vllm.md).

use std::sync::Arc;

use ollm_core::{ChatClient, ChatConfig, ProviderAdapter, ToolRegistry, WindowSource};
use ollm_types::{
    FinishReason, ProviderError, ProviderErrorKind, ProviderEvent, ToolCall, ToolChoice, ToolSchema,
};
use serde_json::{Value, json};

use crate::setup::{collect, provider, request, server, text_of};

/// The prompt whose call the model writes as fenced JSON under `auto`.
const PORT_PROMPT: &str =
    "Use the read_file tool to read config.toml, then tell me which port it sets.";

/// `--max-model-len`, from the environment `cargo xtask e2e --engine vllm` sets.
fn max_model_len() -> u32 {
    std::env::var("OLLM_E2E_MAX_MODEL_LEN")
        .expect("OLLM_E2E_MAX_MODEL_LEN is not set: run `cargo xtask e2e --engine vllm`")
        .parse()
        .unwrap()
}

fn read_file() -> ToolSchema {
    ToolSchema::new(
        "read_file",
        "Read a text file and return its contents.",
        json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file path"}},
            "required": ["path"]
        }),
    )
}

/// A plain HTTP client (no proxy: the server is on loopback).
fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().build().unwrap()
}

fn finish_of(events: &[ProviderEvent]) -> FinishReason {
    match events.last() {
        Some(ProviderEvent::Finish { reason }) => *reason,
        other => panic!("expected a finish, got {other:?} in {events:?}"),
    }
}

fn calls_of(events: &[ProviderEvent]) -> Vec<ToolCall> {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::ToolCall { call } => Some(call.clone()),
            _ => None,
        })
        .collect()
}

fn error_of(events: &[ProviderEvent]) -> ProviderError {
    match events {
        [ProviderEvent::Error { error }] => error.clone(),
        other => panic!("expected one error, got {other:?}"),
    }
}

/// The port prompt with `read_file` offered and `choice`, at temperature 0.
async fn ask_with_tools(choice: ToolChoice) -> Vec<ProviderEvent> {
    let mut r = request(PORT_PROMPT, 128);
    r.tools = vec![read_file()];
    r.tool_choice = choice;
    collect(&provider(), r).await
}

/// The adapter streams; the same request whole (`stream: false`, sent by hand) gives the
/// same text and the same token counts at temperature 0.
#[tokio::test]
async fn the_stream_and_the_whole_reply_agree() {
    let (base, model) = server();
    let events = collect(&provider(), request("The capital of France is", 16)).await;
    let usage = events
        .iter()
        .find_map(|e| match e {
            ProviderEvent::Usage { usage } => Some(*usage),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no usage in {events:?}"));
    let whole: Value = http()
        .post(format!("{base}/chat/completions"))
        .json(&json!({
            "model": model,
            "messages": [{"role": "user", "content": "The capital of France is"}],
            "max_tokens": 16, "temperature": 0, "seed": 42, "stream": false
        }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let text = whole["choices"][0]["message"]["content"].as_str().unwrap();
    assert!(!text.is_empty(), "{whole}");
    assert_eq!(text_of(&events), text, "{events:?}\n{whole}");
    assert_eq!(
        usage.prompt_tokens.map(u64::from),
        whole["usage"]["prompt_tokens"].as_u64()
    );
    assert_eq!(
        usage.completion_tokens.map(u64::from),
        whole["usage"]["completion_tokens"].as_u64()
    );
}

/// Under `auto`, vLLM's hermes parser finds no `<tool_call>` block: the model writes its
/// call as a fenced JSON block in the content, which reaches ollm as text (ollm-core
/// recovers it: `runs::auto_call_result_and_answer`).
#[tokio::test]
async fn auto_tool_choice_gets_the_call_as_json_in_the_text() {
    let events = ask_with_tools(ToolChoice::Auto).await;
    assert_eq!(calls_of(&events), [], "{events:?}");
    assert_eq!(finish_of(&events), FinishReason::Stop, "{events:?}");
    let text = text_of(&events);
    assert!(
        text.contains("\"read_file\"") && text.contains("config.toml"),
        "{text:?}"
    );
}

/// `required` is grammar-constrained by vLLM: a real call, finish `tool_calls`.
#[tokio::test]
async fn required_tool_choice_gets_a_real_call() {
    let events = ask_with_tools(ToolChoice::Required).await;
    let calls = calls_of(&events);
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(
        Value::Object(calls[0].arguments.clone()),
        json!({"path": "config.toml"})
    );
    assert_eq!(finish_of(&events), FinishReason::ToolCalls, "{events:?}");
}

/// A named function: a real call too, but vLLM finishes it `stop`; the adapter reports
/// `tool_calls`, because a reply with calls ended for them.
#[tokio::test]
async fn a_named_tool_choice_gets_a_real_call_finished_as_tool_calls() {
    let events = ask_with_tools(ToolChoice::Tool("read_file".into())).await;
    let calls = calls_of(&events);
    assert_eq!(calls.len(), 1, "{events:?}");
    assert_eq!(calls[0].name, "read_file");
    assert_eq!(finish_of(&events), FinishReason::ToolCalls, "{events:?}");
}

/// A prompt longer than `--max-model-len` is refused before any output (400,
/// `param: "input_tokens"`), streamed too: a context overflow, not retryable.
#[tokio::test]
async fn a_prompt_over_the_window_is_a_context_overflow() {
    let words = max_model_len() as usize + 500;
    let events = collect(&provider(), request(&"word ".repeat(words), 16)).await;
    let error = error_of(&events);
    assert_eq!(error.kind, ProviderErrorKind::ContextOverflow, "{error:?}");
    assert_eq!(error.status, Some(400), "{error:?}");
    assert!(!error.retryable, "{error:?}");
}

/// A prompt that fits, with `max_tokens` that would pass the window, is not refused:
/// vLLM 0.32 cuts the generation to what is left and finishes `length`.
#[tokio::test]
async fn max_tokens_past_the_window_is_cut_to_fit_not_refused() {
    let window = max_model_len();
    // "word" repeated is one token each; the chat template adds about 30.
    let events = collect(
        &provider(),
        request(&"word ".repeat(window as usize - 60), 200),
    )
    .await;
    assert_eq!(finish_of(&events), FinishReason::Length, "{events:?}");
    let usage = events
        .iter()
        .find_map(|e| match e {
            ProviderEvent::Usage { usage } => Some(*usage),
            _ => None,
        })
        .unwrap();
    let (prompt, completion) = (
        usage.prompt_tokens.unwrap(),
        usage.completion_tokens.unwrap(),
    );
    assert!(completion < 200, "{usage:?}");
    assert_eq!(prompt + completion, window, "{usage:?}");
}

/// vLLM checks the model name: 404 `NotFoundError` listing the served names, which the
/// adapter types as a missing model with a hint.
#[tokio::test]
async fn an_unknown_model_is_model_not_found() {
    let mut r = request("Hi", 4);
    r.model = "no-such-model-ollm-e2e".into();
    let error = error_of(&collect(&provider(), r).await);
    assert_eq!(error.kind, ProviderErrorKind::ModelNotFound, "{error:?}");
    assert_eq!(error.status, Some(404), "{error:?}");
    assert!(
        error.message.contains(&server().1),
        "names the served model: {error:?}"
    );
    assert!(error.hint.is_some(), "{error:?}");
}

/// The window comes from `/v1/models`' `max_model_len`, and a chat client uses it.
#[tokio::test]
async fn the_window_is_max_model_len() {
    let (_, model) = server();
    let provider = Arc::new(provider());
    let info = provider.show_model(&model).await.unwrap();
    assert_eq!(info.window, Some(max_model_len()), "{info:?}");
    let client = ChatClient::new(
        provider,
        ToolRegistry::default(),
        ChatConfig::for_model(&model),
    );
    let window = client.context_window().await;
    assert_eq!(window.source, WindowSource::Server, "{window:?}");
    assert_eq!(window.tokens, max_model_len() as usize, "{window:?}");
}

/// Token counts come from vLLM's own `/tokenize` (`{"model", "prompt"}`).
#[tokio::test]
async fn token_counts_equal_vllms_tokenize() {
    let (base, model) = server();
    let text = "Counting tokens exactly: naïve café, 12345, <b>tags</b>.";
    let root = base.trim_end_matches('/').trim_end_matches("/v1");
    let direct: Value = http()
        .post(format!("{root}/tokenize"))
        .json(&json!({"model": model, "prompt": text}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expected = direct["count"].as_u64().map(|n| n as usize);
    assert!(expected.is_some_and(|n| n > 0), "{direct}");
    let provider = provider();
    assert_eq!(provider.count_tokens(&model, text).await.unwrap(), expected);
    assert_eq!(provider.count_tokens(&model, text).await.unwrap(), expected);
}

#[tokio::test]
async fn lists_the_served_model() {
    let models = provider().list_models().await.unwrap();
    let names: Vec<&str> = models.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, [server().1.as_str()]);
}
