//! The window core enforces and the `num_ctx` the adapter sends are one number, in every
//! case: a chat through `ChatClient` against the mock, for each way the window is set.

use std::sync::Arc;

use futures::StreamExt;
use ollm_core::tokens::ContextLimits;
use ollm_core::{ChatClient, ChatConfig, ChatOptions, ToolRegistry, WindowSource};
use test_utils::mock_ollama::{MockModel, MockOllama, Reply};

use super::provider_with;

/// One case: the model's trained length, the adapter's configured `num_ctx`, the run's
/// `context_length`, the per-model table entry and the window set for every model; the
/// window expected and its source.
struct Case {
    trained: u32,
    adapter: Option<u32>,
    requested: Option<u32>,
    table: Option<usize>,
    every: Option<usize>,
    want: (usize, WindowSource),
}

async fn check(case: Case) {
    let mock = MockOllama::start().await.unwrap();
    mock.add_model(MockModel::new("m:1").context(case.trained));
    mock.script("/api/chat", Reply::stream_text("ok"));
    let provider = provider_with(&mock, |c| c.num_ctx = case.adapter);
    let mut config = ChatConfig::for_model("m:1");
    config.options.context_length = case.requested;
    if let Some(t) = case.table {
        config.context_limits = ContextLimits::default().with_model("m:1", t);
    }
    config.context_limits.every_model = case.every;
    let client = ChatClient::new(Arc::new(provider), ToolRegistry::default(), config);
    let events: Vec<_> = client.chat("hi", ChatOptions::default()).collect().await;
    assert!(matches!(
        events.last(),
        Some(ollm_core::ChatEvent::Finish { .. })
    ));
    let window = client.context_window().await;
    assert_eq!((window.tokens, window.source), case.want);
    let chats = mock.requests_to("/api/chat");
    assert_eq!(chats.len(), 1);
    assert_eq!(
        chats[0].body["options"]["num_ctx"].as_u64(),
        Some(window.tokens as u64),
        "num_ctx sent differs from the window enforced"
    );
}

#[tokio::test]
async fn num_ctx_sent_equals_the_window_enforced() {
    use WindowSource::*;
    let cases = [
        // The trained length above the cap: the cap (8192), as the server's window.
        (40960, None, None, None, None, (8192, Server)),
        // Below the cap: the trained length.
        (2048, None, None, None, None, (2048, Server)),
        // The adapter's configured num_ctx is what the server reports as the window.
        (40960, Some(4096), None, None, None, (4096, Server)),
        // A run's setting (the CLI's `--context-length`) beats everything.
        (
            40960,
            Some(4096),
            Some(16384),
            None,
            Some(2000),
            (16384, Setting),
        ),
        // The per-model table (the CLI's `[models."NAME"]`).
        (40960, None, None, Some(3000), None, (3000, Setting)),
        // The run's setting beats the table.
        (40960, None, Some(6000), Some(3000), None, (6000, Setting)),
        // A window for every model (the CLI's config `context_length`) beats the server,
        // even below the trained length and over the adapter's configured num_ctx.
        (40960, Some(4096), None, None, Some(2500), (2500, Setting)),
        (1024, None, None, None, Some(2500), (2500, Setting)),
        // The table beats the window for every model.
        (40960, None, None, Some(3000), Some(2500), (3000, Setting)),
    ];
    for (trained, adapter, requested, table, every, want) in cases {
        check(Case {
            trained,
            adapter,
            requested,
            table,
            every,
            want,
        })
        .await;
    }
}
