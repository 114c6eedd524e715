//! The pool against the mock servers: failover before the first byte and never after,
//! never on a 400, least-busy routing, affinity, health checks per kind.

use std::sync::Arc;

use futures::StreamExt;
use ollm_core::ProviderAdapter;
use ollm_types::{Message, ProviderErrorKind, ProviderEvent, ProviderRequest, ToolSchema};
use serde_json::json;
use test_utils::mock_ollama::{MockModel, MockOllama};
use test_utils::mock_openai::{MockOpenAi, Reply};

use super::*;
use crate::{OllamaConfig, OllamaProvider, OpenAiConfig, OpenAiProvider, RetryPolicy};

fn no_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    }
}

fn openai(url: &str, kind: ReplicaKind) -> Replica {
    let mut config = OpenAiConfig::new(url);
    config.http.retry = no_retries();
    let adapter = OpenAiProvider::new(config).expect("a valid address");
    Replica::new(url, kind, Arc::new(adapter))
}

fn ollama(url: &str) -> Replica {
    let mut config = OllamaConfig {
        base_url: url.to_owned(),
        ..OllamaConfig::default()
    };
    config.http.retry = no_retries();
    let adapter = OllamaProvider::new(config).expect("a valid address");
    Replica::new(url, ReplicaKind::Ollama, Arc::new(adapter))
}

/// An address nothing listens on.
async fn refused_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    format!("http://{addr}/v1")
}

fn request(text: &str) -> ProviderRequest {
    ProviderRequest::new("mock-model", vec![Message::user(text)])
}

fn answer(text: &str) -> Reply {
    Reply::sse().content(text).finish("stop").done().reply()
}

fn text_of(events: &[ProviderEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn error_of(events: &[ProviderEvent]) -> Option<&ProviderError> {
    events.iter().find_map(|e| match e {
        ProviderEvent::Error { error } => Some(error),
        _ => None,
    })
}

fn unaffine(replicas: Vec<Replica>) -> ProviderPool {
    let config = PoolConfig {
        prefix_affinity: false,
    };
    ProviderPool::with_config(replicas, config).expect("replicas")
}

#[tokio::test]
async fn a_replica_that_cannot_serve_before_the_first_byte_is_left_for_the_next() {
    // Each way the first replica cannot serve: it sends nothing of a reply.
    let first_failures: [(&str, Option<Reply>); 3] = [
        ("refused", None),
        ("busy", Some(Reply::http_error(503, "Loading model"))),
        (
            "model not found",
            Some(Reply::http_error(404, "model 'mock-model' not found")),
        ),
    ];
    for (label, failure) in first_failures {
        let second = MockOpenAi::start().await.expect("mock");
        second.push_reply(answer("from the second"));
        let (first, _mock) = match failure {
            None => (refused_url().await, None),
            Some(reply) => {
                let mock = MockOpenAi::start().await.expect("mock");
                mock.push_reply(reply);
                (mock.base_url(), Some(mock))
            }
        };
        let pool = unaffine(vec![
            openai(&first, ReplicaKind::OpenAi),
            openai(&second.base_url(), ReplicaKind::OpenAi),
        ]);
        let mut switches = pool.subscribe();
        let events: Vec<_> = pool.chat(request("hi")).collect().await;
        assert_eq!(text_of(&events), "from the second", "{label}: {events:?}");
        assert!(error_of(&events).is_none(), "{label}: {events:?}");
        let warned = events.iter().any(|e| matches!(e, ProviderEvent::Warning { warning } if warning.message.contains(&second.base_url())));
        assert!(warned, "{label}: the switch is in the reply: {events:?}");
        match switches.try_recv() {
            Ok(PoolEvent::Switched { from, to, .. }) => {
                assert_eq!((from, to), (first.clone(), second.base_url()), "{label}");
            }
            other => panic!("{label}: no switch event: {other:?}"),
        }
        let status = pool.status();
        assert!(
            !status[0].healthy && status[1].healthy,
            "{label}: {status:?}"
        );
        assert_eq!((status[0].failovers, status[1].served), (1, 1), "{label}");
    }
}

#[tokio::test]
async fn a_bad_request_is_not_failed_over() {
    let first = MockOpenAi::start().await.expect("mock");
    let second = MockOpenAi::start().await.expect("mock");
    first.push_reply(Reply::http_error(400, "bad temperature"));
    second.push_reply(answer("never"));
    let pool = unaffine(vec![
        openai(&first.base_url(), ReplicaKind::OpenAi),
        openai(&second.base_url(), ReplicaKind::OpenAi),
    ]);
    let events: Vec<_> = pool.chat(request("hi")).collect().await;
    let error = error_of(&events).expect("the 400 is the reply");
    assert_eq!(error.kind, ProviderErrorKind::BadRequest, "{error:?}");
    assert!(second.requests().is_empty(), "the second replica was asked");
}

#[tokio::test]
async fn a_reply_that_breaks_after_text_stays_broken_and_is_not_restarted() {
    let first = MockOpenAi::start().await.expect("mock");
    let second = MockOpenAi::start().await.expect("mock");
    // Text, then the connection ends without `[DONE]` or a finish reason.
    first.push_reply(Reply::sse().content("half an ans").reply());
    second.push_reply(answer("a whole answer"));
    let pool = unaffine(vec![
        openai(&first.base_url(), ReplicaKind::OpenAi),
        openai(&second.base_url(), ReplicaKind::OpenAi),
    ]);
    let events: Vec<_> = pool.chat(request("hi")).collect().await;
    assert_eq!(text_of(&events), "half an ans");
    let error = error_of(&events).expect("the break is reported");
    assert_eq!(error.kind, ProviderErrorKind::IncompleteStream, "{error:?}");
    assert!(
        second.requests().is_empty(),
        "the reply was restarted elsewhere"
    );
}

#[tokio::test]
async fn the_last_replica_failing_ends_the_reply_with_its_error() {
    let pool = unaffine(vec![
        openai(&refused_url().await, ReplicaKind::OpenAi),
        openai(&refused_url().await, ReplicaKind::OpenAi),
    ]);
    let events: Vec<_> = pool.chat(request("hi")).collect().await;
    let error = error_of(&events).expect("an error");
    assert_eq!(error.kind, ProviderErrorKind::Connection, "{error:?}");
    assert!(matches!(events.last(), Some(ProviderEvent::Error { .. })));
}

#[tokio::test]
async fn requests_go_to_the_least_busy_replica() {
    let first = MockOpenAi::start().await.expect("mock");
    let second = MockOpenAi::start().await.expect("mock");
    // The first reply stalls after its first text: it stays in flight on the first replica.
    first.push_reply(Reply::sse().content("thinking...").stall().reply());
    second.push_reply(answer("second"));
    let pool = unaffine(vec![
        openai(&first.base_url(), ReplicaKind::OpenAi),
        openai(&second.base_url(), ReplicaKind::OpenAi),
    ]);
    let mut stalled = pool.chat(request("one"));
    let started = stalled.next().await;
    assert!(
        matches!(started, Some(ProviderEvent::TextDelta { .. })),
        "{started:?}"
    );
    assert_eq!(pool.status()[0].in_flight, 1);
    let events: Vec<_> = pool.chat(request("two")).collect().await;
    assert_eq!(text_of(&events), "second");
    drop(stalled);
    assert_eq!(
        pool.status()[0].in_flight,
        0,
        "a dropped reply is no longer in flight"
    );
}

#[tokio::test]
async fn a_session_or_a_conversation_stays_on_its_replica() {
    let mocks = [
        MockOpenAi::start().await.expect("mock"),
        MockOpenAi::start().await.expect("mock"),
        MockOpenAi::start().await.expect("mock"),
    ];
    for mock in &mocks {
        // Enough for both runs of three, should they land on the same replica.
        for _ in 0..6 {
            mock.push_reply(answer("ok"));
        }
    }
    let replicas = mocks
        .iter()
        .map(|m| openai(&m.base_url(), ReplicaKind::OpenAi))
        .collect();
    let pool = ProviderPool::new(replicas).expect("replicas");
    let served =
        |pool: &ProviderPool| -> Vec<usize> { pool.status().iter().map(|s| s.served).collect() };
    // The same session key, whatever the conversation.
    for text in ["a", "b", "c"] {
        let _: Vec<_> = pool
            .chat_in_session(request(text), Some("user-7"))
            .collect()
            .await;
    }
    assert!(served(&pool).contains(&3), "{:?}", served(&pool));
    // The same conversation growing, without a session key.
    let before = served(&pool);
    let mut messages = vec![Message::user("write a poem")];
    for turn in 0..3 {
        let req = ProviderRequest::new("mock-model", messages.clone());
        let _: Vec<_> = pool.chat(req).collect().await;
        messages.push(Message::assistant(format!("verse {turn}")));
        messages.push(Message::user("more"));
    }
    let grew: Vec<usize> = served(&pool)
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect();
    assert!(grew.contains(&3), "{grew:?}");
}

#[tokio::test]
async fn llama_cpp_health_keeps_requests_off_a_loading_replica() {
    let loading = MockOpenAi::start().await.expect("mock");
    let ready = MockOpenAi::start().await.expect("mock");
    loading.set_loading(true);
    ready.push_reply(answer("ready"));
    let pool = unaffine(vec![
        openai(&loading.base_url(), ReplicaKind::LlamaCpp),
        openai(&ready.base_url(), ReplicaKind::LlamaCpp),
    ]);
    pool.check_health().await;
    let healthy: Vec<bool> = pool.status().iter().map(|s| s.healthy).collect();
    assert_eq!(healthy, [false, true]);
    let events: Vec<_> = pool.chat(request("hi")).collect().await;
    assert_eq!(text_of(&events), "ready");
    assert!(loading.requests().is_empty());
    loading.set_loading(false);
    pool.check_health().await;
    assert!(pool.status()[0].healthy, "the replica came back");
}

#[tokio::test]
async fn openai_health_is_the_model_list() {
    let up = MockOpenAi::start().await.expect("mock");
    let pool = unaffine(vec![
        openai(&refused_url().await, ReplicaKind::OpenAi),
        openai(&up.base_url(), ReplicaKind::OpenAi),
    ]);
    pool.check_health().await;
    let healthy: Vec<bool> = pool.status().iter().map(|s| s.healthy).collect();
    assert_eq!(healthy, [false, true]);
}

#[tokio::test]
async fn ollama_replicas_with_the_model_loaded_are_preferred() {
    let cold = MockOllama::start().await.expect("mock");
    let warm = MockOllama::start().await.expect("mock");
    for mock in [&cold, &warm] {
        mock.add_model(MockModel::new("m1"));
    }
    warm.set_running("m1");
    let pool = unaffine(vec![ollama(&cold.url()), ollama(&warm.url())]);
    pool.check_health().await;
    let req = ProviderRequest::new("m1", vec![Message::user("hi")]);
    let events: Vec<_> = pool.chat(req).collect().await;
    assert!(error_of(&events).is_none(), "{events:?}");
    assert!(cold.requests_to("/api/chat").is_empty());
    assert_eq!(warm.requests_to("/api/chat").len(), 1);
}

#[tokio::test]
async fn a_failover_skips_a_replica_whose_model_has_no_tools() {
    let busy = MockOpenAi::start().await.expect("mock");
    busy.push_reply(Reply::http_error(503, "busy"));
    let no_tools = MockOllama::start().await.expect("mock");
    no_tools.add_model(MockModel::new("mock-model"));
    let fine = MockOpenAi::start().await.expect("mock");
    fine.push_reply(answer("with tools"));
    let pool = unaffine(vec![
        openai(&busy.base_url(), ReplicaKind::OpenAi),
        ollama(&no_tools.url()),
        openai(&fine.base_url(), ReplicaKind::OpenAi),
    ]);
    let mut events_seen = pool.subscribe();
    let mut req = request("read it");
    req.tools = vec![ToolSchema::new("read", "reads", json!({"type": "object"}))];
    let events: Vec<_> = pool.chat(req).collect().await;
    assert_eq!(text_of(&events), "with tools", "{events:?}");
    assert!(no_tools.requests_to("/api/chat").is_empty());
    let first = events_seen.try_recv();
    assert!(matches!(first, Ok(PoolEvent::Skipped { .. })), "{first:?}");
}

#[test]
fn an_empty_pool_is_an_error() {
    assert_eq!(
        ProviderPool::new(Vec::new()).err(),
        Some(BridgeError::EmptyPool)
    );
}

#[test]
fn only_errors_before_any_reply_that_another_replica_may_not_share_fail_over() {
    let check = |kind, status, want| {
        let mut error = ProviderError::new(kind, "x");
        error.status = status;
        assert_eq!(fails_over(&error), want, "{kind:?} {status:?}");
    };
    check(ProviderErrorKind::Connection, None, true);
    check(ProviderErrorKind::Busy, Some(503), true);
    check(ProviderErrorKind::ModelNotFound, Some(404), true);
    check(ProviderErrorKind::ModelNotFound, None, true);
    check(ProviderErrorKind::BadRequest, Some(400), false);
    check(ProviderErrorKind::ToolsUnsupported, Some(400), false);
    check(ProviderErrorKind::Busy, Some(429), false);
    check(ProviderErrorKind::Server, Some(500), false);
    check(ProviderErrorKind::Timeout, None, false);
    check(ProviderErrorKind::Auth, Some(401), false);
}
