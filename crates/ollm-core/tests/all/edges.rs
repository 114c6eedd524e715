//! Edge cases of the client that no property covers.

use std::sync::Arc;

use futures::StreamExt;
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, History};
use ollm_types::{Capability, FinishReason, Message, Think, WarningKind};
use serde_json::json;
use test_utils::mock_provider::{MockProvider, ev};
use test_utils::recording_tool::{RecordingTool, registry};

use crate::support::{block_on, chat, client, client_with, count, finish_reason, text_of};

#[test]
fn think_is_dropped_for_models_that_cannot_think() {
    let provider = MockProvider::builder()
        .capabilities(vec![Capability::Completion, Capability::Tools])
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client_with(provider.clone(), Default::default(), |cfg| {
        cfg.think = Some(Think::On)
    });
    let events = block_on(chat(&c, "q"));
    assert_eq!(provider.requests()[0].think, None);
    assert_eq!(
        count(
            &events,
            |e| matches!(e, ChatEvent::Warning { warning } if warning.kind == WarningKind::Other)
        ),
        1
    );
}

#[test]
fn think_is_sent_when_capabilities_are_unknown_or_present() {
    for caps in [None, Some(vec![Capability::Thinking])] {
        let mut b = MockProvider::builder().then_forever(vec![ev::text("ok"), ev::finish()]);
        if let Some(caps) = caps {
            b = b.capabilities(caps);
        }
        let provider = b.build();
        let c = client_with(provider.clone(), Default::default(), |cfg| {
            cfg.think = Some(Think::High)
        });
        block_on(chat(&c, "q"));
        assert_eq!(provider.requests()[0].think, Some(Think::High));
    }
}

#[test]
fn native_tools_are_offered_and_no_tools_hides_them() {
    let provider = MockProvider::builder()
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client(provider.clone(), registry([RecordingTool::new("t")]));
    block_on(chat(&c, "q"));
    block_on(crate::support::collect(c.chat(
        "q",
        ChatOptions {
            no_tools: true,
            ..ChatOptions::default()
        },
    )));
    let reqs = provider.requests();
    assert_eq!(reqs[0].tools.len(), 1);
    assert!(reqs[1].tools.is_empty());
}

#[test]
fn calls_made_with_tools_off_run_nothing_and_are_answered() {
    // A model may call a tool it was never offered (it saw one earlier in the history).
    let provider = MockProvider::builder()
        .turn(vec![ev::call("c1", "t", json!({})), ev::finish()])
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let tool = RecordingTool::new("t");
    let c = client(provider.clone(), registry([tool.clone()]));
    let events = block_on(crate::support::collect(c.chat(
        "q",
        ChatOptions {
            no_tools: true,
            ..ChatOptions::default()
        },
    )));
    assert_eq!(tool.call_count(), 0);
    assert!(events.iter().any(|e| matches!(
        e,
        ChatEvent::ToolResult { call_id, is_error: true, content, .. }
            if call_id == "c1" && content == "Error: Unknown tool \"t\""
    )));
    assert_eq!(finish_reason(&events), FinishReason::Stop);
}

#[test]
fn calls_written_as_text_run_but_quoted_ones_do_not() {
    let tagged = "<tool_call>\n{\"name\": \"t\", \"arguments\": {\"k\": 1}}\n</tool_call>";
    let provider = MockProvider::builder()
        .turn(vec![ev::text(tagged), ev::finish()])
        .turn(vec![ev::text("done"), ev::finish()])
        .then_forever(vec![
            ev::text("Call it like {\"name\": \"t\", \"arguments\": {}} next time."),
            ev::finish(),
        ])
        .build();
    let tool = RecordingTool::new("t");
    let c = client(provider.clone(), registry([tool.clone()]));
    let events = block_on(chat(&c, "q"));
    assert_eq!(tool.call_count(), 1);
    assert_eq!(
        serde_json::Value::Object(tool.calls()[0].arguments.clone()),
        json!({"k": 1})
    );
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    let events = block_on(chat(&c, "again"));
    assert_eq!(tool.call_count(), 1, "JSON quoted in prose must not run");
    assert_eq!(finish_reason(&events), FinishReason::Stop);
}

#[test]
fn history_carries_over_and_can_be_replaced() {
    let provider = MockProvider::builder()
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client_with(provider.clone(), Default::default(), |cfg| {
        cfg.system = Some("be brief".into())
    });
    block_on(chat(&c, "one"));
    block_on(chat(&c, "two"));
    let reqs = provider.requests();
    assert_eq!(reqs[1].messages.len(), 3);
    assert_eq!(reqs[1].system.as_deref(), Some("be brief"));
    let saved = c.history().to_json().unwrap();
    c.clear_history();
    assert!(c.history().is_empty());
    assert_eq!(c.history().system_text().as_deref(), Some("be brief"));
    c.set_history(History::from_json(&saved).unwrap());
    assert_eq!(c.history().len(), 4);
}

#[test]
fn length_finish_is_reported() {
    let provider = MockProvider::builder()
        .turn(vec![ev::text("abc"), ev::finish_with(FinishReason::Length)])
        .build();
    let events = block_on(chat(&client(provider, Default::default()), "q"));
    assert_eq!(finish_reason(&events), FinishReason::Length);
}

#[test]
fn dropping_the_run_cancels_it() {
    let tool = RecordingTool::new("slow").hangs();
    let provider = MockProvider::builder()
        .turn(vec![ev::call("c", "slow", json!({})), ev::finish()])
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client(provider, registry([tool.clone()]));
    block_on(async {
        let mut run = c.chat("q", ChatOptions::default());
        while let Some(e) = run.next().await {
            if matches!(e, ChatEvent::ToolCallStarted { .. }) {
                break;
            }
        }
        drop(run);
        // The next run waits for the dropped one to end, then works.
        let events = chat(&c, "again").await;
        assert_eq!(text_of(&events), "ok");
    });
    assert_eq!(tool.finished_count(), 0);
    crate::support::check_history(&c.history());
}

#[test]
fn chat_outside_a_runtime_reports_an_error() {
    let provider = MockProvider::answering("x");
    let c = ChatClient::new(provider, Default::default(), ChatConfig::for_model("m"));
    let run = c.chat("q", ChatOptions::default());
    let events = futures::executor::block_on(run.collect::<Vec<_>>());
    assert_eq!(finish_reason(&events), FinishReason::Error);
}

#[test]
fn a_run_made_outside_a_runtime_starts_when_polled_inside_one() {
    let provider = MockProvider::answering("late");
    let c = client(provider, Default::default());
    let run = c.chat("q", ChatOptions::default());
    let events = block_on(crate::support::collect(run));
    assert_eq!(text_of(&events), "late");
}

#[test]
fn images_reach_the_request() {
    let provider = MockProvider::answering("x");
    let c = client(provider.clone(), Default::default());
    let options = ChatOptions {
        images: vec![("aGk=".into(), "image/png".into())],
        ..ChatOptions::default()
    };
    block_on(crate::support::collect(c.chat("look", options)));
    let req = &provider.requests()[0];
    assert_eq!(req.messages[0].images().count(), 1);
}

/// Issue 14: images for a model whose capabilities are known and lack `vision` are
/// refused before anything is sent, and the prompt is not kept; a model with `vision`, or
/// one the server does not describe, is sent them.
#[test]
fn images_go_only_to_models_that_may_read_them() {
    use ollm_types::{Capability, ProviderErrorKind};
    let options = || ChatOptions {
        images: vec![("aGk=".into(), "image/png".into())],
        ..ChatOptions::default()
    };
    let check = |caps: Option<Vec<Capability>>, sent: bool| {
        let builder = MockProvider::builder().then_forever(vec![ev::text("x"), ev::finish()]);
        let provider = match caps.clone() {
            Some(caps) => builder.capabilities(caps),
            None => builder,
        }
        .build();
        let c = client(provider.clone(), Default::default());
        let events = block_on(crate::support::collect(c.chat("look", options())));
        assert_eq!(provider.request_count(), usize::from(sent), "{caps:?}");
        let error = events.iter().find_map(|e| match e {
            ChatEvent::Error { error } => Some(error.kind),
            _ => None,
        });
        let expected = (!sent).then_some(ProviderErrorKind::VisionUnsupported);
        assert_eq!(error, expected, "{caps:?}");
        assert_eq!(c.history().is_empty(), !sent, "{caps:?}");
    };
    check(None, true);
    check(Some(vec![Capability::Completion, Capability::Vision]), true);
    check(Some(vec![Capability::Completion, Capability::Tools]), false);
}

#[test]
fn zero_max_turns_sends_nothing() {
    let provider = MockProvider::answering("x");
    let c = client_with(provider.clone(), Default::default(), |cfg| {
        cfg.max_turns = 0
    });
    let events = block_on(chat(&c, "q"));
    assert_eq!(finish_reason(&events), FinishReason::MaxTurns);
    assert_eq!(provider.request_count(), 0);
}

#[test]
fn repeated_or_missing_call_ids_are_replaced() {
    // Some servers send the same id (or none) for every call of a batch.
    let tool = RecordingTool::new("t");
    let provider = MockProvider::builder()
        .turn(vec![
            ev::call("x", "t", json!({"i": 1})),
            ev::call("x", "t", json!({"i": 2})),
            ev::call("", "t", json!({"i": 3})),
            ev::finish(),
        ])
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client(provider, registry([tool.clone()]));
    let events = block_on(chat(&c, "q"));
    crate::support::check_events(&events);
    crate::support::check_history(&c.history());
    assert_eq!(tool.call_count(), 3);
    let h = c.history();
    let ids: std::collections::BTreeSet<_> =
        h.messages()[1].tool_calls().map(|c| c.id.clone()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.contains("x"));
}

#[test]
fn refused_native_tools_fall_back_to_react_in_auto_mode() {
    use ollm_types::ProviderErrorKind;
    let provider = MockProvider::builder()
        .turn(vec![ev::error(
            ProviderErrorKind::ToolsUnsupported,
            "m does not support tools",
        )])
        .turn(vec![ev::text("Final Answer: hi"), ev::finish()])
        .turn(vec![ev::text("Final Answer: again"), ev::finish()])
        .build();
    let c = client(provider.clone(), registry([RecordingTool::new("t")]));
    let events = block_on(chat(&c, "q"));
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(text_of(&events), "hi");
    assert_eq!(count(&events, |e| matches!(e, ChatEvent::Error { .. })), 0);
    assert_eq!(
        count(&events, |e| matches!(e, ChatEvent::Warning { .. })),
        1
    );
    block_on(chat(&c, "q2"));
    let reqs = provider.requests();
    assert_eq!(reqs[0].tools.len(), 1);
    assert!(reqs[1].tools.is_empty());
    assert!(reqs[2].tools.is_empty(), "the client remembers the refusal");
    crate::support::check_history(&c.history());
}

#[test]
fn refused_think_is_retried_without_it() {
    use ollm_types::ProviderErrorKind;
    let provider = MockProvider::builder()
        .turn(vec![ev::error(
            ProviderErrorKind::ThinkingUnsupported,
            "no thinking",
        )])
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client_with(provider.clone(), Default::default(), |cfg| {
        cfg.think = Some(Think::On)
    });
    let events = block_on(chat(&c, "q"));
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    let reqs = provider.requests();
    assert_eq!(reqs[0].think, Some(Think::On));
    assert_eq!(reqs[1].think, None);
}

#[test]
fn refused_native_tools_are_an_error_when_native_was_asked_for() {
    use ollm_core::ToolMode;
    use ollm_types::ProviderErrorKind;
    let provider = MockProvider::builder()
        .turn(vec![ev::error(
            ProviderErrorKind::ToolsUnsupported,
            "no tools",
        )])
        .build();
    let c = client_with(provider, registry([RecordingTool::new("t")]), |cfg| {
        cfg.tool_mode = ToolMode::Native
    });
    let events = block_on(chat(&c, "q"));
    assert_eq!(finish_reason(&events), FinishReason::Error);
}

#[test]
fn cancellation_needs_no_timer_and_is_prompt_in_real_time() {
    // A runtime without timers, on the real clock: cancelling a run whose tool hangs ends
    // it with a cancelled finish well within 100 ms (the work is microseconds; the bound
    // is the requirement, measured on the wall clock).
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let tool = RecordingTool::new("slow").hangs();
    let provider = MockProvider::builder()
        .turn(vec![ev::call("c", "slow", json!({})), ev::finish()])
        .build();
    let c = client(provider, registry([tool.clone()]));
    let (events, elapsed) = rt.block_on(async {
        let mut run = c.chat("q", ChatOptions::default());
        let mut events = Vec::new();
        let mut at = None;
        while let Some(e) = run.next().await {
            let started = matches!(e, ChatEvent::ToolCallStarted { .. });
            events.push(e);
            if started {
                // Let the tool start before cancelling.
                while tool.call_count() == 0 {
                    tokio::task::yield_now().await;
                }
                at = Some(std::time::Instant::now());
                run.cancel();
            }
        }
        (events, at.unwrap().elapsed())
    });
    assert_eq!(finish_reason(&events), FinishReason::Cancelled);
    assert!(
        elapsed < std::time::Duration::from_millis(100),
        "{elapsed:?}"
    );
    assert_eq!(tool.active(), 0, "the hanging tool was stopped");
    crate::support::check_history(&c.history());
}

#[test]
fn runs_on_a_multi_thread_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let barrier = Arc::new(tokio::sync::Barrier::new(3));
    let tool = RecordingTool::new("t").barrier(barrier);
    let provider = MockProvider::builder()
        .turn(vec![
            ev::call("a", "t", json!({"i": 1})),
            ev::call("b", "t", json!({"i": 2})),
            ev::call("c", "t", json!({"i": 3})),
            ev::finish(),
        ])
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client(provider, registry([tool.clone()]));
    let events = rt.block_on(async {
        tokio::time::timeout(std::time::Duration::from_secs(20), chat(&c, "q"))
            .await
            .unwrap()
    });
    crate::support::check_events(&events);
    assert_eq!(text_of(&events), "ok");
    assert_eq!(tool.max_concurrent(), 3);
}

#[test]
fn slow_streams_are_forwarded_as_they_come() {
    let provider = MockProvider::builder()
        .turn_with_delay(
            vec![ev::text("a"), ev::text("b"), ev::usage(3, 2), ev::finish()],
            std::time::Duration::from_secs(1),
        )
        .build();
    let c = client(provider, Default::default());
    let (events, took) = block_on(async {
        let t0 = tokio::time::Instant::now();
        let events = chat(&c, "q").await;
        (events, t0.elapsed())
    });
    assert_eq!(text_of(&events), "ab");
    assert!(took >= std::time::Duration::from_secs(4));
    match events.last() {
        Some(ChatEvent::Finish { usage, .. }) => assert_eq!(usage.completion_tokens, Some(2)),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_saved_conversation_can_be_resumed() {
    let provider = MockProvider::answering("ok");
    let c = client(provider.clone(), Default::default())
        .with_history(vec![Message::user("earlier"), Message::assistant("reply")]);
    block_on(chat(&c, "now"));
    let req = &provider.requests()[0];
    assert_eq!(req.messages.len(), 3);
    assert_eq!(req.messages[0].text(), "earlier");
}
