//! The OpenAI adapter and the pool against vLLM's own rules (the mock of
//! `test_utils::mock_vllm`): auto tool choice without its flags, `--max-model-len`, an
//! unknown model, in each generation's error shape.

use std::sync::Arc;

use futures::StreamExt;
use ollm_bridge::{OpenAiConfig, OpenAiProvider, ProviderPool, Replica, ReplicaKind, RetryPolicy};
use ollm_core::ProviderAdapter;
use ollm_types::{
    Message, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest, ToolChoice,
    ToolSchema,
};
use serde_json::json;
use test_utils::mock_openai::{MockOpenAi, Reply};
use test_utils::mock_vllm::{Generation, VllmFlags};

fn adapter(url: &str) -> Arc<dyn ProviderAdapter> {
    let mut config = OpenAiConfig::new(url);
    config.http.retry = RetryPolicy {
        max_retries: 0,
        ..RetryPolicy::default()
    };
    Arc::new(OpenAiProvider::new(config).unwrap())
}

async fn vllm(flags: VllmFlags) -> MockOpenAi {
    let mock = MockOpenAi::start().await.unwrap();
    mock.behave_as_vllm(flags);
    mock
}

fn with_tools(words: usize) -> ProviderRequest {
    let mut request = ProviderRequest::new("mock-model", vec![Message::user("w ".repeat(words))]);
    request.tools = vec![ToolSchema::new("read", "reads", json!({"type": "object"}))];
    request
}

async fn error_of(
    provider: &dyn ProviderAdapter,
    request: ProviderRequest,
) -> Option<ProviderError> {
    let events: Vec<_> = provider.chat(request).collect().await;
    events.into_iter().find_map(|e| match e {
        ProviderEvent::Error { error } => Some(error),
        _ => None,
    })
}

fn answer() -> Reply {
    Reply::sse().content("fine").finish("stop").done().reply()
}

#[tokio::test]
async fn auto_tools_without_the_flags_is_a_tools_refusal_in_every_shape() {
    for generation in [
        Generation::Legacy,
        Generation::Reserving,
        Generation::Current,
    ] {
        let mock = vllm(VllmFlags {
            generation,
            ..VllmFlags::default()
        })
        .await;
        let error = error_of(adapter(&mock.base_url()).as_ref(), with_tools(3)).await;
        let error = error.expect("refused");
        assert_eq!(
            error.kind,
            ProviderErrorKind::ToolsUnsupported,
            "{generation:?}: {error:?}"
        );
        assert!(
            error
                .hint
                .as_deref()
                .unwrap_or("")
                .contains("--enable-auto-tool-choice")
        );
        // A named choice: served without the flags by older servers (guided decoding);
        // vLLM 0.32 wants --tool-call-parser for it too.
        let mut named = with_tools(3);
        named.tool_choice = ToolChoice::Tool("read".into());
        if generation == Generation::Current {
            let error = error_of(adapter(&mock.base_url()).as_ref(), named).await;
            let error = error.expect("refused");
            assert_eq!(error.kind, ProviderErrorKind::ToolsUnsupported, "{error:?}");
        } else {
            mock.push_reply(answer());
            assert_eq!(
                error_of(adapter(&mock.base_url()).as_ref(), named).await,
                None
            );
        }
    }
    let flagged = vllm(VllmFlags::default().with_auto_tool_choice("hermes")).await;
    flagged.push_reply(answer());
    assert_eq!(
        error_of(adapter(&flagged.base_url()).as_ref(), with_tools(3)).await,
        None
    );
}

#[tokio::test]
async fn over_max_model_len_is_a_context_overflow_in_every_wording() {
    // Older servers refuse the prompt plus max_tokens; vLLM 0.32 only a prompt over it.
    for (generation, words) in [
        (Generation::Legacy, 40),
        (Generation::Reserving, 40),
        (Generation::Current, 70),
    ] {
        let flags = VllmFlags {
            max_model_len: 64,
            generation,
            ..VllmFlags::default().with_auto_tool_choice("hermes")
        };
        let mock = vllm(flags).await;
        let mut request = with_tools(words);
        request.options.max_tokens = Some(32);
        let error = error_of(adapter(&mock.base_url()).as_ref(), request)
            .await
            .expect("refused");
        assert_eq!(
            error.kind,
            ProviderErrorKind::ContextOverflow,
            "{generation:?}: {error:?}"
        );
        assert!(
            error.message.contains("maximum context length is 64"),
            "{error:?}"
        );
    }
}

#[tokio::test]
async fn the_pool_fails_over_an_unknown_model_but_not_vllms_400s() {
    let without = vllm(VllmFlags::default()).await;
    without.set_models(&["another-model"]);
    let with = vllm(VllmFlags::default()).await;
    with.push_reply(answer());
    let replicas = vec![
        Replica::new(
            without.base_url(),
            ReplicaKind::OpenAi,
            adapter(&without.base_url()),
        ),
        Replica::new(
            with.base_url(),
            ReplicaKind::OpenAi,
            adapter(&with.base_url()),
        ),
    ];
    let config = ollm_bridge::PoolConfig {
        prefix_affinity: false,
    };
    let pool = ProviderPool::with_config(replicas, config).unwrap();
    // 404 "does not exist" on the first: the second serves it.
    let plain = ProviderRequest::new("mock-model", vec![Message::user("hi")]);
    assert_eq!(error_of(&pool, plain).await, None);
    assert_eq!(pool.status()[0].failovers, 1);
    // Auto tools on servers without the flags: the 400 is the answer, from one replica.
    let asked_before = without.requests().len() + with.requests().len();
    let error = error_of(&pool, with_tools(3)).await.expect("refused");
    assert_eq!(error.kind, ProviderErrorKind::ToolsUnsupported, "{error:?}");
    assert_eq!(
        without.requests().len() + with.requests().len(),
        asked_before + 1
    );
}
