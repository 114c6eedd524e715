//! The turn loop (properties 4 to 9).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use ollm_core::{ChatEvent, ChatOptions};
use ollm_types::{FinishReason, ProviderEvent, Role};
use proptest::prelude::*;
use serde_json::json;
use test_utils::mock_provider::{MockProvider, Step, ev};
use test_utils::recording_tool::{RecordingTool, registry};
use tokio::sync::Barrier;
use tokio::time::Instant;

use crate::support::{
    block_on, chat, check_events, check_history, client, client_with, config, count, finish_reason,
};

#[derive(Debug, Clone)]
enum Delta {
    Text(String),
    Thinking(String),
}

proptest! {
    #![proptest_config(config())]

    // Property 4: event forwarding order
    #[test]
    fn event_forwarding_order(deltas in prop::collection::vec(
        prop_oneof![".{1,8}".prop_map(Delta::Text), ".{1,8}".prop_map(Delta::Thinking)],
        0..12,
    )) {
        let mut script: Vec<ProviderEvent> = deltas
            .iter()
            .map(|d| match d {
                Delta::Text(t) => ev::text(t),
                Delta::Thinking(t) => ev::thinking(t),
            })
            .collect();
        script.push(ev::finish());
        let provider = MockProvider::builder().turn(script).build();
        let events = block_on(async { chat(&client(provider, Default::default()), "hi").await });
        let forwarded: Vec<(bool, String)> = events
            .iter()
            .filter_map(|e| match e {
                ChatEvent::TextDelta { text } => Some((true, text.clone())),
                ChatEvent::ThinkingDelta { text } => Some((false, text.clone())),
                _ => None,
            })
            .collect();
        let expected: Vec<(bool, String)> = deltas
            .iter()
            .map(|d| match d {
                Delta::Text(t) => (true, t.clone()),
                Delta::Thinking(t) => (false, t.clone()),
            })
            .collect();
        prop_assert_eq!(forwarded, expected);
        prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
    }

    // Property 5: cancellation
    #[test]
    fn cancellation(after in 0usize..6, phase in 0u8..3) {
        // The provider streams `after` deltas then hangs (phase 0), or calls a tool that
        // hangs (phase 1), or is slow between deltas (phase 2). We cancel once `after`
        // events have been seen; the finish must follow within 100 ms (paused clock: a
        // stuck loop would let simulated time jump far ahead).
        let tool = RecordingTool::new("slow").hangs();
        let mut steps: Vec<Step> = (0..after).map(|i| Step::Event(ev::text(format!("t{i}")))).collect();
        match phase {
            0 => steps.push(Step::Hang),
            1 => {
                steps.push(Step::Event(ev::call("c1", "slow", json!({}))));
                steps.push(Step::Event(ev::finish()));
            }
            _ => {
                for _ in 0..10 {
                    steps.push(Step::Delay(Duration::from_secs(5)));
                    steps.push(Step::Event(ev::text("x")));
                }
                steps.push(Step::Event(ev::finish()));
            }
        }
        let provider = MockProvider::builder().turn_steps(steps).build();
        let c = client(provider, registry([tool.clone()]));
        let target = if phase == 1 { after + 1 } else { after };
        let (events, elapsed) = block_on(async {
            let mut run = c.chat("go", ChatOptions::default());
            let mut events = Vec::new();
            let mut cancelled_at = None;
            if target == 0 {
                cancelled_at = Some(Instant::now());
                run.cancel();
            }
            let mut seen = 0;
            while let Some(e) = run.next().await {
                if matches!(e, ChatEvent::TextDelta { .. } | ChatEvent::ToolCallStarted { .. }) {
                    seen += 1;
                }
                events.push(e);
                if cancelled_at.is_none() && seen >= target {
                    cancelled_at = Some(Instant::now());
                    run.cancel();
                }
            }
            (events, cancelled_at.map(|t| t.elapsed()))
        });
        prop_assert_eq!(finish_reason(&events), FinishReason::Cancelled);
        let elapsed = elapsed.unwrap();
        prop_assert!(elapsed <= Duration::from_millis(100), "took {:?}", elapsed);
        check_events(&events);
        prop_assert_eq!(tool.finished_count(), 0);
    }

    // Property 6: queuing and execution after the stream
    #[test]
    fn queuing_and_execution_after_the_stream(n in 1usize..5, gap_ms in 1u64..500) {
        let tool = RecordingTool::new("t");
        let mut steps: Vec<Step> = (0..n)
            .map(|i| Step::Event(ev::call(format!("c{i}"), "t", json!({"i": i}))))
            .collect();
        steps.push(Step::Delay(Duration::from_millis(gap_ms)));
        steps.push(Step::Event(ev::text("tail")));
        steps.push(Step::Event(ev::finish()));
        let provider = MockProvider::builder()
            .turn_steps(steps)
            .turn(vec![ev::text("done"), ev::finish()])
            .build();
        let c = client(provider, registry([tool.clone()]));
        let (events, t0) = block_on(async {
            let t0 = Instant::now();
            (chat(&c, "go").await, t0)
        });
        check_events(&events);
        // Every call started after the stream ended (the delay before its tail).
        prop_assert_eq!(tool.call_count(), n);
        for call in tool.calls() {
            prop_assert!(call.started.duration_since(t0) >= Duration::from_millis(gap_ms));
        }
        // ToolCallStarted events arrive as the calls do, before the stream's tail text;
        // results only after it.
        let tail = events.iter().position(|e| matches!(e, ChatEvent::TextDelta { text } if text == "tail")).unwrap();
        let starts: Vec<usize> = events.iter().enumerate().filter(|(_, e)| matches!(e, ChatEvent::ToolCallStarted { .. })).map(|(i, _)| i).collect();
        let results: Vec<usize> = events.iter().enumerate().filter(|(_, e)| matches!(e, ChatEvent::ToolResult { .. })).map(|(i, _)| i).collect();
        prop_assert!(starts.iter().all(|&i| i < tail));
        prop_assert!(results.iter().all(|&i| i > tail));
    }

    // Property 7: result continuation
    #[test]
    fn result_continuation(values in prop::collection::vec("[a-z]{1,6}", 1..5)) {
        // Each call echoes its arguments; the next request carries the assistant message
        // with the calls and then one tool message per call, in call order.
        let tool = RecordingTool::new("echo").echoes();
        let mut script: Vec<ProviderEvent> = values
            .iter()
            .enumerate()
            .map(|(i, v)| ev::call(format!("c{i}"), "echo", json!({"v": v, "i": i})))
            .collect();
        script.push(ev::finish());
        let provider = MockProvider::builder()
            .turn(script)
            .turn(vec![ev::text("ok"), ev::finish()])
            .build();
        let c = client(provider.clone(), registry([tool]));
        let events = block_on(async { chat(&c, "go").await });
        prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
        let requests = provider.requests();
        prop_assert_eq!(requests.len(), 2);
        let msgs = &requests[1].messages;
        prop_assert_eq!(msgs.len(), 2 + values.len());
        prop_assert_eq!(msgs[0].role(), Role::User);
        let calls: Vec<_> = msgs[1].tool_calls().collect();
        prop_assert_eq!(calls.len(), values.len());
        for (i, v) in values.iter().enumerate() {
            let m = &msgs[2 + i];
            prop_assert_eq!(m.role(), Role::Tool);
            let id = format!("c{i}");
            prop_assert_eq!(m.tool_call_id(), Some(id.as_str()));
            prop_assert_eq!(m.text(), json!({"v": v, "i": i}).to_string());
        }
    }

    // Property 8: parallel execution
    #[test]
    fn parallel_execution(n in 1usize..7) {
        // Each call waits at a barrier of n parties: the calls can only finish if all n
        // run at once. (Sequential execution would stall until the test's timeout.)
        let barrier = Arc::new(Barrier::new(n));
        let tool = RecordingTool::new("t").barrier(barrier).delay(Duration::from_millis(10));
        let mut script: Vec<ProviderEvent> = (0..n).map(|i| ev::call(format!("c{i}"), "t", json!({"i": i}))).collect();
        script.push(ev::finish());
        let provider = MockProvider::builder()
            .turn(script)
            .turn(vec![ev::text("done"), ev::finish()])
            .build();
        let c = client(provider, registry([tool.clone()]));
        let events = block_on(async { chat(&c, "go").await });
        check_events(&events);
        prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
        prop_assert_eq!(tool.max_concurrent(), n);
        prop_assert_eq!(tool.finished_count(), n);
        prop_assert_eq!(count(&events, |e| matches!(e, ChatEvent::ToolResult { is_error: false, .. })), n);
    }

    // Property 9: max turns
    #[test]
    fn max_turns(limit in 0u32..6, per_call in any::<bool>()) {
        let tool = RecordingTool::new("t");
        // Each turn's call differs (the loop guard stops identical ones).
        let mut builder = MockProvider::builder();
        for i in 0..limit {
            builder = builder.turn(vec![ev::call("", "t", json!({"i": i})), ev::finish()]);
        }
        let provider = builder.build();
        let c = client_with(provider.clone(), registry([tool.clone()]), |cfg| {
            if !per_call {
                cfg.max_turns = limit;
            }
        });
        let events = block_on(async {
            let options = ChatOptions {
                max_turns: per_call.then_some(limit),
                ..ChatOptions::default()
            };
            crate::support::collect(c.chat("go", options)).await
        });
        check_events(&events);
        prop_assert_eq!(finish_reason(&events), FinishReason::MaxTurns);
        prop_assert_eq!(provider.request_count(), limit as usize);
        prop_assert_eq!(tool.call_count(), limit as usize);
        prop_assert_eq!(count(&events, |e| matches!(e, ChatEvent::TurnComplete { .. })), limit as usize);
        check_history(&c.history());
    }
}

#[test]
fn the_tools_context_opens_the_first_prompt_only_in_runs_with_tools() {
    let provider = MockProvider::builder()
        .turn(vec![ev::call("c1", "read", json!({})), ev::finish()])
        .turn(vec![ev::text("done"), ev::finish()])
        .turn(vec![ev::text("plain"), ev::finish()])
        .turn(vec![ev::text("again"), ev::finish()])
        .build();
    let tools = registry([RecordingTool::new("read").returns(json!("x"))]);
    let client = client_with(Arc::clone(&provider), tools, |c| {
        c.system = Some("be brief".into());
        c.tools_context = Some("[Working folder: /w]".into());
    });
    block_on(chat(&client, "what is in x?"));
    let no_tools = ChatOptions {
        no_tools: true,
        ..ChatOptions::default()
    };
    block_on(crate::support::collect(client.chat("and?", no_tools)));
    block_on(chat(&client, "and now?"));
    let first_prompts: Vec<String> = provider
        .requests()
        .into_iter()
        .map(|r| {
            assert_eq!(r.system.as_deref(), Some("be brief"));
            let first = r.messages.iter().find(|m| m.role() == Role::User).unwrap();
            first.text()
        })
        .collect();
    // Every turn of every run with tools carries it on the same message (one prefix for
    // the prompt cache); the run without tools does not; the history never records it.
    let with = "[Working folder: /w]\n\nwhat is in x?".to_owned();
    assert_eq!(
        first_prompts,
        [with.clone(), with.clone(), "what is in x?".to_owned(), with]
    );
    let history = client.history();
    let texts: Vec<String> = history.messages().iter().map(|m| m.text()).collect();
    assert_eq!(texts[0], "what is in x?");
    assert!(texts.iter().all(|t| !t.contains("Working folder")));
}

#[test]
fn a_reply_that_repeats_the_tools_context_is_read_without_it() {
    // The 0.5B's second reply (issue 24): the context it was sent, then a fenced call.
    let context = "[Working folder: /w\nTop entries: data.csv, notes.txt]";
    let echo = format!(
        "{context}\n\n```json\n{{\"name\": \"read\", \"arguments\": {{\"path\": \"data.csv\"}}}}\n```"
    );
    let provider = MockProvider::builder()
        .turn(vec![ev::text(echo), ev::finish()])
        .turn(vec![ev::text("6 lines"), ev::finish()])
        .build();
    let tool = RecordingTool::new("read").returns(json!("data.csv: 6 lines"));
    let client = client_with(Arc::clone(&provider), registry([tool.clone()]), |c| {
        c.tools_context = Some(context.into());
    });
    let events = block_on(chat(&client, "How many lines does data.csv have?"));
    assert_eq!(tool.call_count(), 1);
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    let history = client.history();
    assert!(
        history
            .messages()
            .iter()
            .all(|m| !m.text().contains("Working folder"))
    );
    check_history(&history);
    // A reply that only mentions the folder later is left as it is.
    let provider = MockProvider::builder()
        .turn(vec![
            ev::text("In [Working folder: /w] there is data.csv."),
            ev::finish(),
        ])
        .build();
    let client = client_with(Arc::clone(&provider), registry([tool]), |c| {
        c.tools_context = Some(context.into());
    });
    block_on(chat(&client, "What is here?"));
    let last = client.history().messages().last().unwrap().text();
    assert_eq!(last, "In [Working folder: /w] there is data.csv.");
}

#[test]
fn requests_that_offer_tools_are_greedy_unless_the_options_say_otherwise() {
    // (tool_temperature, the options' temperature, think) -> what each request carries.
    let check = |tool_temperature: Option<f32>,
                 set: Option<f32>,
                 think: Option<ollm_types::Think>,
                 with_tools: Option<f32>| {
        let provider = MockProvider::builder()
            .turn(vec![ev::call("c1", "read", json!({})), ev::finish()])
            .turn(vec![ev::text("done"), ev::finish()])
            .turn(vec![ev::text("plain"), ev::finish()])
            .build();
        let tools = registry([RecordingTool::new("read").returns(json!("x"))]);
        let client = client_with(Arc::clone(&provider), tools, |c| {
            c.tool_temperature = tool_temperature;
            c.options.temperature = set;
            c.think = think;
        });
        block_on(chat(&client, "what is in x?"));
        let no_tools = ChatOptions {
            no_tools: true,
            ..ChatOptions::default()
        };
        block_on(crate::support::collect(client.chat("and?", no_tools)));
        let sent: Vec<Option<f32>> = provider
            .requests()
            .iter()
            .map(|r| r.options.temperature)
            .collect();
        // Both requests of the tool run, then the run without tools.
        assert_eq!(
            sent,
            [with_tools, with_tools, set],
            "{tool_temperature:?} {set:?} {think:?}"
        );
    };
    assert_eq!(ollm_core::ChatConfig::default().tool_temperature, Some(0.0));
    check(Some(0.0), None, None, Some(0.0));
    check(Some(0.0), Some(0.7), None, Some(0.7));
    check(None, None, None, None);
    check(Some(0.0), None, Some(ollm_types::Think::On), None);
    check(Some(0.0), None, Some(ollm_types::Think::Off), Some(0.0));
}

/// `answer-at-limit`: a run that reaches its turn limit after calls gets one more reply,
/// with no tools and the answer nudge, and no call of that reply runs.
#[test]
fn a_run_at_its_turn_limit_answers_from_its_results_with_answer_at_limit() {
    let run = |on: bool, last: Vec<ProviderEvent>| {
        let tool = RecordingTool::new("t").returns(json!("42"));
        let provider = MockProvider::builder()
            .turn(vec![ev::call("c1", "t", json!({"i": 1})), ev::finish()])
            .turn(last)
            .build();
        let c = client_with(Arc::clone(&provider), registry([tool.clone()]), |cfg| {
            cfg.max_turns = 1;
            if on {
                cfg.coach.on.insert(ollm_core::Rule::AnswerAtLimit);
            }
        });
        let events = block_on(chat(&c, "what does t say?"));
        check_events(&events);
        check_history(&c.history());
        (events, provider, tool, c)
    };
    let answer = || vec![ev::text("It says 42."), ev::finish()];
    // Off (the default): the limit ends the run with no answer.
    let (events, provider, tool, _) = run(false, answer());
    assert_eq!(finish_reason(&events), FinishReason::MaxTurns);
    assert_eq!((provider.request_count(), tool.call_count()), (1, 1));
    // On: one more request, with no tools, the nudge last; the answer ends the run.
    let (events, provider, tool, c) = run(true, answer());
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!((provider.request_count(), tool.call_count()), (2, 1));
    let last = provider.requests().pop().unwrap();
    assert!(last.tools.is_empty());
    let nudge = last.messages.last().unwrap();
    assert_eq!(nudge.role(), Role::User);
    assert!(
        nudge.text().starts_with("Now answer my question"),
        "{}",
        nudge.text()
    );
    assert!(
        c.history()
            .messages()
            .iter()
            .all(|m| m.text() != nudge.text())
    );
    assert_eq!(c.history().messages().last().unwrap().text(), "It says 42.");
    // A call in that reply never runs: it is answered, and the limit ends the run.
    let again = vec![ev::call("c2", "t", json!({"i": 2})), ev::finish()];
    let (events, _, tool, _) = run(true, again);
    assert_eq!(finish_reason(&events), FinishReason::MaxTurns);
    assert_eq!(tool.call_count(), 1);
    let refused = events.iter().any(|e| {
        matches!(e, ChatEvent::ToolResult { call_id, content, is_error: true, .. }
            if call_id == "c2" && content.contains("turn limit"))
    });
    assert!(refused, "{events:#?}");
}
