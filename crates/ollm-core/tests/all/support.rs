//! Shared helpers: a paused-clock runtime, event collection and history checks.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ChatRun, History, ToolRegistry};
use ollm_types::{FinishReason, Message, Role};
use test_utils::mock_provider::MockProvider;

/// Cases per property.
pub(crate) const CASES: u32 = 100;

pub(crate) fn config() -> proptest::prelude::ProptestConfig {
    proptest::prelude::ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..proptest::prelude::ProptestConfig::default()
    }
}

/// Runs `f` on a current-thread runtime with Tokio's clock paused (time advances only
/// when every task waits, so delays cost nothing), failing after ten simulated minutes.
pub(crate) fn block_on<F: Future>(f: F) -> F::Output {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(Duration::from_secs(600), f)
            .await
            .expect("the test did not finish in ten simulated minutes")
    })
}

pub(crate) async fn collect(run: ChatRun) -> Vec<ChatEvent> {
    run.collect().await
}

pub(crate) fn client(provider: Arc<MockProvider>, tools: ToolRegistry) -> ChatClient {
    ChatClient::new(provider, tools, ChatConfig::for_model("m"))
}

pub(crate) fn client_with(
    provider: Arc<MockProvider>,
    tools: ToolRegistry,
    f: impl FnOnce(&mut ChatConfig),
) -> ChatClient {
    let mut cfg = ChatConfig::for_model("m");
    f(&mut cfg);
    ChatClient::new(provider, tools, cfg)
}

pub(crate) async fn chat(client: &ChatClient, prompt: &str) -> Vec<ChatEvent> {
    collect(client.chat(prompt, ChatOptions::default())).await
}

pub(crate) fn finish_reason(events: &[ChatEvent]) -> FinishReason {
    match events.last() {
        Some(ChatEvent::Finish { reason, .. }) => *reason,
        other => panic!("the last event is not a finish: {other:?}"),
    }
}

/// The messages the run's `Finish` says it added to the history.
pub(crate) fn added_of(events: &[ChatEvent]) -> Vec<Message> {
    match events.last() {
        Some(ChatEvent::Finish { added, .. }) => added.clone(),
        other => panic!("the last event is not a Finish: {other:?}"),
    }
}

pub(crate) fn text_of(events: &[ChatEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

pub(crate) fn count<F: Fn(&ChatEvent) -> bool>(events: &[ChatEvent], f: F) -> usize {
    events.iter().filter(|e| f(e)).count()
}

/// Checks the event invariants every run keeps: exactly one `Finish`, last; one
/// `ToolResult` per `ToolCallStarted`, after it; `Error` only right before the finish.
pub(crate) fn check_events(events: &[ChatEvent]) {
    let finishes = count(events, |e| matches!(e, ChatEvent::Finish { .. }));
    assert_eq!(finishes, 1, "{events:#?}");
    finish_reason(events);
    let mut started = Vec::new();
    let mut answered = Vec::new();
    for e in events {
        match e {
            ChatEvent::ToolCallStarted { call } => {
                assert!(
                    !started.contains(&call.id),
                    "call id used twice: {events:#?}"
                );
                started.push(call.id.clone());
            }
            ChatEvent::ToolResult { call_id, .. } => {
                assert!(
                    started.contains(call_id),
                    "result before its call: {events:#?}"
                );
                assert!(!answered.contains(call_id), "two results for one call");
                answered.push(call_id.clone());
            }
            _ => {}
        }
    }
    started.sort();
    answered.sort();
    assert_eq!(started, answered, "calls and results are not 1:1");
}

/// Checks the history invariants: every message valid (it survives the checked serde
/// round trip), and every assistant message with calls is followed by exactly one tool
/// message per call, in call order, with matching ids and names.
pub(crate) fn check_history(history: &History) {
    let back = History::from_json(&history.to_json().unwrap()).unwrap();
    assert_eq!(&back, history);
    let msgs = history.messages();
    let mut i = 0;
    while i < msgs.len() {
        let m = &msgs[i];
        assert_ne!(m.role(), Role::System);
        if m.role() == Role::Tool {
            panic!("tool message {i} answers no preceding call: {msgs:#?}");
        }
        let calls: Vec<_> = m.tool_calls().cloned().collect();
        for (k, call) in calls.iter().enumerate() {
            let answer: &Message = msgs
                .get(i + 1 + k)
                .unwrap_or_else(|| panic!("call {} has no result: {msgs:#?}", call.id));
            assert_eq!(answer.role(), Role::Tool);
            assert_eq!(answer.tool_call_id(), Some(call.id.as_str()));
            assert_eq!(answer.name(), Some(call.name.as_str()));
        }
        i += 1 + calls.len();
    }
}
