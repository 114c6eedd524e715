//! Model management against the mock: tags, show (cached), pull, delete, ps, version.

use futures::StreamExt;
use ollm_core::ProviderAdapter;
use ollm_types::{Capability, ProviderErrorKind};
use test_utils::fixtures;
use test_utils::mock_ollama::{MockOllama, Reply};

use super::provider;

#[tokio::test]
async fn list_show_ps_version() {
    let mock = MockOllama::start().await.unwrap();
    mock.set_running("qwen3:8b");
    let p = provider(&mock);
    let names: Vec<String> = p
        .list_models()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.name)
        .collect();
    assert_eq!(names, ["qwen3:8b", "gemma:2b"]);
    let info = p.show_model("qwen3:8b").await.unwrap();
    assert_eq!(info.context_length, Some(40960));
    assert!(info.has(&Capability::Tools) && info.has(&Capability::Thinking));
    assert_eq!(info.parameters.as_deref(), Some("temperature 0.7"));
    p.show_model("qwen3:8b").await.unwrap();
    assert_eq!(mock.requests_to("/api/show").len(), 1, "cached per model");
    let running = p.running_models().await.unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].context_length, Some(8192));
    assert_eq!(p.server_version().await.unwrap(), "0.12.6");
    let missing = p.show_model("nope").await.unwrap_err();
    assert_eq!(missing.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(missing.hint.as_deref(), Some("ollama pull nope"));
}

#[tokio::test]
async fn pull_streams_progress_and_fails_on_an_error_line() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    let steps: Vec<_> = p.pull_model("llama3.2").collect().await;
    assert!(steps.iter().all(Result::is_ok), "{steps:?}");
    let last = steps.last().unwrap().as_ref().unwrap();
    assert_eq!(last.status, "success");
    assert!(
        steps
            .iter()
            .any(|s| s.as_ref().unwrap().completed == Some(60))
    );
    assert_eq!(mock.requests_to("/api/pull")[0].body["stream"], true);

    let path = fixtures::path("ollama/pull_error/stream.ndjson");
    mock.script("/api/pull", Reply::from_file(&path).unwrap().split_every(5));
    let steps: Vec<_> = p.pull_model("nope").collect().await;
    assert_eq!(steps.len(), 2);
    // Issue 16: a name the registry lacks is "model not found" (exit 4) with a hint.
    let err = steps[1].as_ref().unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(err.message, "pull model manifest: file does not exist");
    assert!(
        err.hint.as_deref().is_some_and(|h| h.contains("ollm list")),
        "{err:?}"
    );

    mock.script(
        "/api/pull",
        Reply::stream_text("{\"status\":\"pulling manifest\"}\n"),
    );
    let steps: Vec<_> = p.pull_model("x").collect().await;
    assert_eq!(
        steps.last().unwrap().as_ref().unwrap_err().kind,
        ProviderErrorKind::IncompleteStream
    );
}

/// A retried pull says so: each retry is a progress step whose status is the retry notice
/// (the same text as the chat streams' `Retrying` warning), then the pull goes on.
#[tokio::test]
async fn pull_surfaces_retries_as_progress() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    mock.script("/api/pull", Reply::error(503, "server busy"));
    mock.script("/api/pull", Reply::error(503, "server busy"));
    let steps: Vec<_> = p.pull_model("llama3.2").collect().await;
    let statuses: Vec<&str> = steps
        .iter()
        .map(|s| s.as_ref().unwrap().status.as_str())
        .collect();
    assert!(statuses[0].starts_with("retry 1 in "), "{statuses:?}");
    assert!(statuses[1].starts_with("retry 2 in "), "{statuses:?}");
    assert!(statuses[0].contains("server busy"), "{statuses:?}");
    assert_eq!(statuses.last(), Some(&"success"));
    assert_eq!(mock.requests_to("/api/pull").len(), 3);
}

#[tokio::test]
async fn delete_and_delete_missing() {
    let mock = MockOllama::start().await.unwrap();
    let p = provider(&mock);
    p.delete_model("gemma:2b").await.unwrap();
    let err = p.delete_model("gemma:2b").await.unwrap_err();
    assert_eq!(err.kind, ProviderErrorKind::ModelNotFound);
    assert_eq!(mock.requests_to("/api/delete")[0].method, "DELETE");
}
