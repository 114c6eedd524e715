//! Invariants of whole runs (properties 23 to 28, 30 and 31).

use std::time::Duration;

use futures::StreamExt;
use ollm_core::chat::CANCELLED_RESULT;
use ollm_core::{ChatClient, ChatEvent, ChatOptions, CoachConfig, Nudge};
use ollm_types::{FinishReason, Message, ProviderErrorKind, ProviderEvent, Role, Usage};
use proptest::prelude::*;
use serde_json::json;
use test_utils::mock_provider::{MockProvider, Step, ev};
use test_utils::recording_tool::{RecordingTool, registry};

use crate::support::{
    added_of, block_on, chat, check_events, check_history, client, config, count, finish_reason,
    text_of,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Ok,
    Fails,
    Unknown,
    Invalid,
}

fn arb_plan() -> impl Strategy<Value = Vec<Vec<(Kind, bool)>>> {
    let kind = prop_oneof![
        Just(Kind::Ok),
        Just(Kind::Fails),
        Just(Kind::Unknown),
        Just(Kind::Invalid)
    ];
    prop::collection::vec(prop::collection::vec((kind, any::<bool>()), 1..4), 0..4)
}

/// Whether none of a turn's calls runs (all name an unknown tool): the answer nudge
/// follows it in the history.
fn idle(turn: &[(Kind, bool)]) -> bool {
    turn.iter().all(|(k, _)| *k == Kind::Unknown)
}

struct Scenario {
    plan: Vec<Vec<(Kind, bool)>>,
    events: Vec<ChatEvent>,
    client: ChatClient,
    requests: usize,
    /// The messages of the last request (the answer's).
    last_sent: Vec<Message>,
    ok_calls: usize,
}

/// Runs a chat whose turns make the planned calls (`bool`: the server sends an id),
/// then answers; each turn reports usage 10/1.
fn run_plan(plan: Vec<Vec<(Kind, bool)>>) -> Scenario {
    let schema =
        json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]});
    let ok = RecordingTool::new("ok").schema(schema.clone()).echoes();
    let bad = RecordingTool::new("bad").fails("nope");
    let mut builder = MockProvider::builder();
    for (t, calls) in plan.iter().enumerate() {
        let mut script: Vec<ProviderEvent> = calls
            .iter()
            .enumerate()
            .map(|(k, (kind, with_id))| {
                let id = if *with_id {
                    format!("t{t}c{k}")
                } else {
                    String::new()
                };
                // Every call differs from the others (the loop guard answers repeats
                // without running them; tests/all/guards.rs covers that).
                let n = t * 10 + k;
                match kind {
                    Kind::Ok => ev::call(id, "ok", json!({"x": n})),
                    Kind::Fails => ev::call(id, "bad", json!({"n": n})),
                    Kind::Unknown => ev::call(id, "ghost", json!({"n": n})),
                    Kind::Invalid => ev::call(id, "ok", json!({"x": format!("three{n}")})),
                }
            })
            .collect();
        script.push(ev::usage(10, 1));
        script.push(ev::finish());
        builder = builder.turn(script);
    }
    let provider = builder
        .turn(vec![ev::text("answer"), ev::usage(10, 1), ev::finish()])
        .build();
    let c = client(provider.clone(), registry([ok.clone(), bad]));
    let events = block_on(chat(&c, "go"));
    Scenario {
        plan,
        events,
        client: c,
        requests: provider.request_count(),
        last_sent: provider
            .requests()
            .last()
            .map(|r| r.messages.clone())
            .unwrap_or_default(),
        ok_calls: ok.call_count(),
    }
}

proptest! {
    #![proptest_config(config())]

    // Property 23: turn state
    #[test]
    fn turn_state(plan in arb_plan()) {
        let s = run_plan(plan);
        let turns: Vec<u32> = s.events.iter().filter_map(|e| match e {
            ChatEvent::TurnComplete { turn, .. } => Some(*turn),
            _ => None,
        }).collect();
        let expected: Vec<u32> = (1..=s.plan.len() as u32 + 1).collect();
        prop_assert_eq!(&turns, &expected);
        prop_assert_eq!(s.requests, expected.len());
        let n = expected.len() as u32;
        match s.events.last() {
            Some(ChatEvent::Finish { usage, reason, .. }) => {
                prop_assert_eq!(*reason, FinishReason::Stop);
                prop_assert_eq!(*usage, Usage { prompt_tokens: Some(10 * n), completion_tokens: Some(n), ..Usage::default() });
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    // Property 24: event completeness
    #[test]
    fn event_completeness(plan in arb_plan()) {
        let s = run_plan(plan);
        check_events(&s.events);
        let calls: usize = s.plan.iter().map(Vec::len).sum();
        prop_assert_eq!(count(&s.events, |e| matches!(e, ChatEvent::ToolCallStarted { .. })), calls);
        prop_assert_eq!(count(&s.events, |e| matches!(e, ChatEvent::ToolResult { .. })), calls);
        // Every result of a turn comes before that turn's TurnComplete.
        let mut open = 0usize;
        for e in &s.events {
            match e {
                ChatEvent::ToolCallStarted { .. } => open += 1,
                ChatEvent::ToolResult { .. } => open -= 1,
                ChatEvent::TurnComplete { .. } => prop_assert_eq!(open, 0),
                _ => {}
            }
        }
        prop_assert_eq!(text_of(&s.events), "answer");
    }

    // Property 25: history update
    #[test]
    fn history_update(plan in arb_plan()) {
        let s = run_plan(plan);
        let h = s.client.history();
        let msgs = h.messages();
        let calls: usize = s.plan.iter().map(Vec::len).sum();
        // The history holds every turn and no nudge; the run's last request held each
        // nudge after the turn that needed it (the coach's nudges belong to their run).
        let nudges = s.plan.iter().filter(|t| idle(t)).count();
        prop_assert_eq!(msgs.len(), 1 + s.plan.len() + calls + 1);
        prop_assert_eq!(s.last_sent.len(), 1 + s.plan.len() + calls + nudges);
        // The nudge asks from the results above once a call got a result that is not
        // an error (`answer-from-results`): here an `ok` call.
        let nudge = |held: bool| {
            let nudge = if held { Nudge::AnswerFromResults } else { Nudge::Answer };
            nudge.text(&CoachConfig::default())
        };
        let mut held = false;
        for sent in [msgs, &s.last_sent[..]] {
            prop_assert_eq!(sent[0].role(), Role::User);
            prop_assert_eq!(sent[0].text(), "go");
        }
        let (mut i, mut j) = (1, 1);
        for turn in &s.plan {
            for (sent, at) in [(msgs, i), (&s.last_sent[..], j)] {
                prop_assert_eq!(sent[at].role(), Role::Assistant);
                prop_assert_eq!(sent[at].tool_calls().count(), turn.len());
            }
            i += 1 + turn.len();
            j += 1 + turn.len();
            held |= turn.iter().any(|(k, _)| *k == Kind::Ok);
            if idle(turn) {
                prop_assert_eq!(s.last_sent[j].text(), nudge(held));
                j += 1;
            }
        }
        let last = msgs.last().unwrap();
        prop_assert_eq!(last.role(), Role::Assistant);
        prop_assert_eq!(last.text(), "answer");
        // The run reports exactly what it added (all of it, on a fresh client).
        prop_assert_eq!(added_of(&s.events), msgs.to_vec());
    }

    // Property 26: message validity
    #[test]
    fn message_validity(plan in arb_plan()) {
        let s = run_plan(plan);
        check_history(&s.client.history());
        // Every request sent was valid too: each call answered before the next request.
        prop_assert_eq!(s.requests, s.plan.len() + 1);
    }

    // Property 27: tool message name
    #[test]
    fn tool_message_name(plan in arb_plan()) {
        let s = run_plan(plan);
        let h = s.client.history();
        let msgs = h.messages();
        let mut i = 1;
        for turn in &s.plan {
            let calls: Vec<_> = msgs[i].tool_calls().cloned().collect();
            for (k, (kind, _)) in turn.iter().enumerate() {
                let m = &msgs[i + 1 + k];
                let name = match kind {
                    Kind::Ok | Kind::Invalid => "ok",
                    Kind::Fails => "bad",
                    Kind::Unknown => "ghost",
                };
                prop_assert_eq!(m.name(), Some(name));
                prop_assert_eq!(m.tool_call_id(), Some(calls[k].id.as_str()));
                prop_assert!(!calls[k].id.is_empty());
            }
            // No nudge stays in the history (the coach's nudges belong to their run).
            i += 1 + turn.len();
        }
    }

    // Property 28: tool error continuation
    #[test]
    fn tool_error_continuation(plan in arb_plan()) {
        let s = run_plan(plan);
        prop_assert_eq!(finish_reason(&s.events), FinishReason::Stop);
        prop_assert_eq!(s.requests, s.plan.len() + 1);
        let h = s.client.history();
        let msgs = h.messages();
        let mut i = 1;
        let mut ok_runs = 0;
        for (t, turn) in s.plan.iter().enumerate() {
            for (k, (kind, _)) in turn.iter().enumerate() {
                let content = msgs[i + 1 + k].text();
                match kind {
                    Kind::Ok => {
                        ok_runs += 1;
                        prop_assert_eq!(content, json!({"x": t * 10 + k}).to_string());
                    }
                    Kind::Fails => prop_assert_eq!(content, "Error: nope"),
                    Kind::Unknown => prop_assert_eq!(content, "Error: Unknown tool \"ghost\""),
                    Kind::Invalid => prop_assert!(content.starts_with("Error: invalid arguments for ok"), "{}", content),
                }
            }
            // No nudge stays in the history (the coach's nudges belong to their run).
            i += 1 + turn.len();
        }
        // Invalid arguments never reached the tool.
        prop_assert_eq!(s.ok_calls, ok_runs);
        let errors = count(&s.events, |e| matches!(e, ChatEvent::ToolResult { is_error: true, .. }));
        let expected_errors = s.plan.iter().flatten().filter(|(k, _)| *k != Kind::Ok).count();
        prop_assert_eq!(errors, expected_errors);
    }

    // Property 30: cancellation cleanup
    #[test]
    fn cancellation_cleanup(quick in 0usize..4, hanging in 1usize..4, during_stream in any::<bool>()) {
        // `quick` calls finish, `hanging` calls never do; we cancel once the quick results
        // are in (or while the reply still streams). The history keeps calls and results
        // 1:1 (placeholders for unfinished calls), no tool finishes or starts after the
        // cancel, and the client works for the next prompt.
        let fast = RecordingTool::new("fast").delay(Duration::from_millis(5));
        let slow = RecordingTool::new("slow").hangs();
        let mut steps: Vec<Step> = Vec::new();
        for k in 0..quick {
            steps.push(Step::Event(ev::call(format!("q{k}"), "fast", json!({"k": k}))));
        }
        for k in 0..hanging {
            steps.push(Step::Event(ev::call(format!("h{k}"), "slow", json!({"k": k}))));
        }
        if during_stream {
            steps.push(Step::Hang);
        } else {
            steps.push(Step::Event(ev::finish()));
        }
        let provider = MockProvider::builder()
            .turn_steps(steps)
            .then_forever(vec![ev::text("fine"), ev::finish()])
            .build();
        let c = client(provider.clone(), registry([fast.clone(), slow.clone()]));
        let total = quick + hanging;
        let events = block_on(async {
            let mut run = c.chat("go", ChatOptions::default());
            let mut events = Vec::new();
            let (mut started, mut results) = (0, 0);
            let mut cancelled = false;
            while let Some(e) = run.next().await {
                match &e {
                    ChatEvent::ToolCallStarted { .. } => started += 1,
                    ChatEvent::ToolResult { .. } => results += 1,
                    _ => {}
                }
                events.push(e);
                let ready = if during_stream { started == total } else { started == total && results == quick };
                if ready && !cancelled {
                    if !during_stream {
                        // Let every hanging tool start first (they are spawned after the
                        // reply ends, with no event to announce the start).
                        while slow.call_count() < hanging {
                            tokio::task::yield_now().await;
                        }
                    }
                    cancelled = true;
                    run.cancel();
                }
            }
            events
        });
        check_events(&events);
        prop_assert_eq!(finish_reason(&events), FinishReason::Cancelled);
        prop_assert_eq!(slow.finished_count(), 0);
        let expected_fast = if during_stream { 0 } else { quick };
        prop_assert_eq!(fast.call_count(), expected_fast);
        prop_assert_eq!(fast.finished_count(), expected_fast);
        prop_assert_eq!(slow.call_count(), if during_stream { 0 } else { hanging });
        let h = c.history();
        check_history(&h);
        let placeholders = h.messages().iter().filter(|m| m.role() == Role::Tool && m.text() == CANCELLED_RESULT).count();
        prop_assert_eq!(placeholders, if during_stream { total } else { hanging });
        prop_assert_eq!(added_of(&events), h.messages().to_vec());
        prop_assert_eq!(provider.request_count(), 1);
        // The client is usable again.
        let next = block_on(chat(&c, "again"));
        prop_assert_eq!(finish_reason(&next), FinishReason::Stop);
        prop_assert_eq!(text_of(&next), "fine");
        check_history(&c.history());
    }

    // Property 31: unexpected error resilience
    #[test]
    fn unexpected_error_resilience(failure in 0u8..5, prior_turn in any::<bool>()) {
        // A provider error event, a provider panic, a stream cut short, a stream that
        // hangs up without a finish after text, or a panicking tool: each becomes error
        // events, nothing panics, and the next prompt works.
        let boom = RecordingTool::new("boom").panics();
        let ok = RecordingTool::new("ok");
        let mut builder = MockProvider::builder();
        if prior_turn {
            builder = builder.turn(vec![ev::call("p", "ok", json!({})), ev::finish()]);
        }
        builder = match failure {
            0 => builder.turn(vec![ev::text("par"), ev::error(ProviderErrorKind::Server, "exploded")]),
            1 => builder.turn_steps(vec![Step::Event(ev::text("x")), Step::Panic]),
            2 => builder.turn(vec![]),
            3 => builder.turn(vec![ev::text("cut")]),
            _ => builder.turn(vec![ev::call("b", "boom", json!({})), ev::finish()]),
        };
        let provider = builder.then_forever(vec![ev::text("recovered"), ev::finish()]).build();
        let c = client(provider, registry([boom, ok]));
        let events = block_on(chat(&c, "first"));
        check_events(&events);
        check_history(&c.history());
        if failure == 4 {
            // A tool panic is the call's error result; the run carries on.
            let panicked = events.iter().any(|e| matches!(e, ChatEvent::ToolResult { is_error: true, content, .. } if content.contains("panicked")));
            prop_assert!(panicked);
            prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
        } else {
            prop_assert_eq!(count(&events, |e| matches!(e, ChatEvent::Error { .. })), 1);
            prop_assert_eq!(finish_reason(&events), FinishReason::Error);
            let h = c.history();
            // A failed first turn leaves no trace; completed turns stay.
            if prior_turn {
                prop_assert_eq!(h.len(), 3);
            } else {
                prop_assert!(h.is_empty());
            }
            prop_assert_eq!(added_of(&events), h.messages().to_vec());
        }
        let before = c.history().len();
        let next = block_on(chat(&c, "second"));
        check_events(&next);
        prop_assert_eq!(added_of(&next), c.history().messages()[before..].to_vec());
        prop_assert_eq!(finish_reason(&next), FinishReason::Stop);
        prop_assert_eq!(text_of(&next), "recovered");
        check_history(&c.history());
    }
}
