//! Compaction: a long chat with a small window continues to the end; every request fits;
//! calls stay with their results; the summary sits after the first user message; the
//! event fires. Also the drop fallback, `/compact`, bounded tool output and the refusal
//! when compaction is off.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use ollm_core::context::{SUMMARY_HEADER, SUMMARY_PROMPT};
use ollm_core::tokens::{estimate_text, request_text};
use ollm_core::{ChatClient, ChatEvent, Compactor, ProviderAdapter, ToolRegistry, WindowSource};
use ollm_types::{
    FinishReason, Message, ProviderError, ProviderErrorKind, ProviderRequest, Role, WarningKind,
};
use serde_json::json;
use test_utils::mock_provider::{MockProvider, ev};
use test_utils::recording_tool::RecordingTool;

use crate::support::{
    block_on, chat, check_events, check_history, client_with, count, finish_reason,
};

const WINDOW: u32 = 1200;

/// A model that reads a file for every question, answers after the result, and writes
/// a summary when asked with the summary prompt.
fn reading_model(window: u32) -> Arc<MockProvider> {
    let next = AtomicUsize::new(0);
    MockProvider::builder()
        .window(window)
        .respond_with(move |req: &ProviderRequest| {
            if req.system.as_deref() == Some(SUMMARY_PROMPT) {
                return vec![
                    ev::text("The user asked questions; files were read."),
                    ev::finish(),
                ];
            }
            match req.messages.last().map(Message::role) {
                Some(Role::Tool) => vec![ev::text("The file says what you asked."), ev::finish()],
                _ => {
                    let n = next.fetch_add(1, Ordering::Relaxed);
                    let call = ev::call(format!("r{n}"), "read_file", json!({"path": "a.txt"}));
                    vec![call, ev::finish()]
                }
            }
        })
        .build()
}

fn reader(result_chars: usize) -> ToolRegistry {
    let mut tools = ToolRegistry::default();
    tools
        .register(Arc::new(
            RecordingTool::new("read_file").returns(json!("x".repeat(result_chars))),
        ))
        .unwrap();
    tools
}

fn compactions(events: &[ChatEvent]) -> Vec<ollm_core::Compaction> {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Compacted { compaction } => Some(compaction.clone()),
            _ => None,
        })
        .collect()
}

fn warned(events: &[ChatEvent], kind: WarningKind) -> bool {
    count(
        events,
        |e| matches!(e, ChatEvent::Warning { warning } if warning.kind == kind),
    ) > 0
}

/// Every tool message answers a call of the assistant message before it (or of the
/// same turn), and no call is left without its result.
fn pairs_intact(messages: &[Message]) -> bool {
    let mut open: Vec<String> = Vec::new();
    for m in messages {
        if m.role() == Role::Tool {
            let id = m.tool_call_id().unwrap_or_default();
            let Some(p) = open.iter().position(|o| o == id) else {
                return false;
            };
            open.remove(p);
        } else {
            if !open.is_empty() {
                return false;
            }
            open = m.tool_calls().map(|c| c.id.clone()).collect();
        }
    }
    open.is_empty()
}

#[test]
fn a_sixty_turn_chat_with_a_small_window_continues_to_the_end() {
    let provider = reading_model(WINDOW);
    let c = client_with(provider.clone(), reader(600), |cfg| {
        cfg.system = Some("You read files.".into());
    });
    let mut all = Vec::new();
    for i in 0..60 {
        let events = block_on(chat(&c, &format!("question {i}: what is in a.txt?")));
        check_events(&events);
        assert_eq!(
            finish_reason(&events),
            FinishReason::Stop,
            "turn {i}: {events:?}"
        );
        assert!(!warned(&events, WarningKind::TurnsDropped), "turn {i}");
        all.extend(events);
    }
    check_history(&c.history());
    let done = compactions(&all);
    assert!(!done.is_empty(), "no compaction in 60 turns");
    for d in &done {
        assert!(d.tokens_after < d.tokens_before, "{d:?}");
        assert!(d.turns_summarised > 0 && d.summary.is_some(), "{d:?}");
    }
    let requests = provider.requests();
    let chats: Vec<&ProviderRequest> = requests
        .iter()
        .filter(|r| r.system.as_deref() != Some(SUMMARY_PROMPT))
        .collect();
    assert_eq!(chats.len(), 120);
    for r in &requests {
        assert!(estimate_text(&request_text(r)) <= WINDOW as usize);
        assert_eq!(r.options.context_length, Some(WINDOW));
    }
    for r in &chats {
        assert_eq!(r.system.as_deref(), Some("You read files."));
        assert!(pairs_intact(&r.messages));
        assert_eq!(r.messages[0].text(), "question 0: what is in a.txt?");
    }
    // After the first compaction, the summary follows the first user message.
    let last = chats.last().unwrap();
    assert!(
        last.messages[1].text().starts_with(SUMMARY_HEADER),
        "{:?}",
        last.messages[1]
    );
    let history = c.history();
    assert!(history.summary().contains("earlier turns were compacted"));
}

/// A compactor that always fails.
#[derive(Debug)]
struct Failing;

#[async_trait]
impl Compactor for Failing {
    async fn summarise(
        &self,
        _: &dyn ProviderAdapter,
        _: &str,
        _: &[Message],
        _: usize,
    ) -> Result<String, ProviderError> {
        Err(ProviderError::new(
            ProviderErrorKind::Server,
            "no summary today",
        ))
    }
}

#[test]
fn when_summarising_fails_the_oldest_turns_are_dropped_with_a_warning() {
    let provider = reading_model(WINDOW);
    let c = client_with(provider.clone(), reader(600), |_| {});
    c.set_compactor(Arc::new(Failing));
    let mut dropped = false;
    for i in 0..20 {
        let events = block_on(chat(&c, &format!("question {i}")));
        assert_eq!(finish_reason(&events), FinishReason::Stop, "turn {i}");
        dropped |= warned(&events, WarningKind::TurnsDropped);
    }
    assert!(dropped);
    for r in provider.requests() {
        assert!(estimate_text(&request_text(&r)) <= WINDOW as usize);
        assert!(pairs_intact(&r.messages));
        assert_eq!(r.messages[0].text(), "question 0");
    }
}

#[test]
fn compact_now_summarises_and_the_window_says_where_it_came_from() {
    let provider = reading_model(WINDOW);
    let c = client_with(provider, reader(300), |_| {});
    for i in 0..4 {
        block_on(chat(&c, &format!("question {i}")));
    }
    let window = block_on(c.context_window());
    assert_eq!(
        (window.tokens, window.source),
        (WINDOW as usize, WindowSource::Server)
    );
    let before = c.history().len();
    let done = block_on(c.compact()).unwrap();
    assert!(done.turns_summarised > 0);
    assert!(done.tokens_after < done.tokens_before);
    assert!(c.history().len() < before);
    assert!(c.history().messages()[1].text().starts_with(SUMMARY_HEADER));
    check_history(&c.history());
}

#[test]
fn a_large_tool_result_is_cut_with_a_marker() {
    let provider = reading_model(WINDOW);
    let c = client_with(provider.clone(), reader(50_000), |_| {});
    let events = block_on(chat(&c, "read it"));
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert!(warned(&events, WarningKind::ToolOutputCut));
    let result = c.history().messages()[2].text();
    assert!(result.contains("characters left out]"), "{result}");
    assert!(result.len() < 4 * WINDOW as usize);
    for r in provider.requests() {
        assert!(estimate_text(&request_text(&r)) <= WINDOW as usize);
    }
}

/// Issue 11: the `ToolResult` event carries the tool's whole output (what the user is
/// shown), while the model, the history and `Finish`'s `added` (what a session saves)
/// all hold the same cut text.
#[test]
fn the_event_shows_the_whole_result_and_the_history_holds_what_the_model_read() {
    let provider = reading_model(WINDOW);
    let c = client_with(provider.clone(), reader(50_000), |_| {});
    let events = block_on(chat(&c, "read it"));
    let shown: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolResult { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), 1);
    assert!(shown[0].matches('x').count() >= 50_000, "the event was cut");
    let history = c.history();
    let kept = history.messages()[2].text();
    assert!(
        kept.contains("characters left out]") && kept.len() < 10_000,
        "{kept}"
    );
    let added = events.iter().find_map(|e| match e {
        ChatEvent::Finish { added, .. } => Some(added.clone()),
        _ => None,
    });
    assert_eq!(added.as_deref(), Some(history.messages()));
    let requests = provider.requests();
    let read = &requests.last().expect("a second request").messages;
    assert_eq!(read[2].text(), kept, "the model read something else");
}

#[test]
fn with_compaction_off_an_overflow_is_refused_with_a_hint() {
    let provider = reading_model(300);
    let c = client_with(provider, reader(600), |cfg| cfg.compaction.enabled = false);
    let mut refused = None;
    for i in 0..10 {
        let events = block_on(chat(&c, &format!("question {i}")));
        if let Some(ChatEvent::Error { error }) =
            events.iter().find(|e| matches!(e, ChatEvent::Error { .. }))
        {
            refused = Some(error.clone());
            break;
        }
        assert!(compactions(&events).is_empty());
    }
    let error = refused.expect("a refusal");
    assert_eq!(error.kind, ProviderErrorKind::ContextOverflow);
    let hint = error.hint.expect("a hint");
    assert!(hint.contains("compaction is off"), "{hint}");
    assert!(!hint.contains('/'), "core names no CLI command: {hint}");
}

#[test]
fn the_window_setting_beats_the_server() {
    let provider = reading_model(WINDOW);
    let c: ChatClient = client_with(provider.clone(), reader(10), |cfg| {
        cfg.options.context_length = Some(9000);
    });
    block_on(chat(&c, "q"));
    let window = block_on(c.context_window());
    assert_eq!(
        (window.tokens, window.source),
        (9000, WindowSource::Setting)
    );
    assert!(
        provider
            .requests()
            .iter()
            .all(|r| r.options.context_length == Some(9000))
    );
}
