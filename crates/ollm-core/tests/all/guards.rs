//! The loop and runaway guards, the generation cap, the tool choice and the explained
//! strategy choice, in runs against scripted providers.

use ollm_core::{
    ChatConfig, ChatEvent, ChatOptions, CoachConfig, DEFAULT_MAX_TOKENS, Nudge, Rule, ToolMode,
};
use ollm_types::{
    Capability, FinishReason, ProviderErrorKind, ProviderEvent, Role, ToolChoice, WarningKind,
};
use proptest::prelude::*;
use serde_json::json;
use test_utils::mock_provider::{MockProvider, Step, ev};
use test_utils::recording_tool::{RecordingTool, registry};

use crate::support::{
    block_on, chat, check_events, check_history, client, client_with, config, count, finish_reason,
};

fn warnings(events: &[ChatEvent], kind: WarningKind) -> usize {
    count(
        events,
        |e| matches!(e, ChatEvent::Warning { warning } if warning.kind == kind),
    )
}

/// The text of `nudge` (the coach owns it).
fn said(nudge: Nudge) -> String {
    nudge.text(&CoachConfig::default())
}

/// The runaway guard off, as the CLI's `--no-runaway-guard` turns it off: the text
/// runaway stop and both cuts of a reply written as calls.
fn runaway_guard(cfg: &mut ChatConfig, on: bool) {
    if !on {
        let rules = [Rule::RunawayStop, Rule::CallLoopCut, Rule::ListedToolsCut];
        cfg.coach.off.extend(rules);
    }
}

fn call_turn(id: &str, args: serde_json::Value) -> Vec<ProviderEvent> {
    vec![ev::call(id, "list_dir", args), ev::finish()]
}

proptest! {
    #![proptest_config(config())]

    /// However often (1 to 6 times) the model repeats one call, the tool runs once; the
    /// third ask ends the run as `repetition`, an answer before it ends the run as `stop`;
    /// calls and results stay 1:1. (Key order is not varied here: a `ToolCall`'s
    /// arguments are a serde_json `Map`, which keeps keys sorted, so two orders would be
    /// one value. Arguments that differ only in key order on the wire are the bridge's
    /// test, `one_call_whatever_the_key_order_on_the_wire`.)
    #[test]
    fn a_repeated_call_runs_once(times in 1usize..7) {
        let tool = RecordingTool::new("list_dir").returns(json!({"entries": ["a.txt"]}));
        let mut builder = MockProvider::builder();
        for i in 0..times {
            builder = builder.turn(call_turn(&format!("c{i}"), json!({"path": ".", "depth": 1})));
        }
        let provider = builder.turn(vec![ev::text("a.txt"), ev::finish()]).build();
        let c = client(provider.clone(), registry([tool.clone()]));
        let events = block_on(chat(&c, "list it"));
        check_events(&events);
        check_history(&c.history());
        prop_assert_eq!(tool.call_count(), 1);
        let stuck = times >= 3;
        let expected = if stuck { FinishReason::Repetition } else { FinishReason::Stop };
        prop_assert_eq!(finish_reason(&events), expected);
        prop_assert_eq!(warnings(&events, WarningKind::Repetition), usize::from(stuck));
        prop_assert_eq!(provider.request_count(), if stuck { 3 } else { times + 1 });
    }
}

/// A run whose second reply repeats the first call (c2 of c1), makes a fresh one (c3)
/// and repeats that in the same reply (c4), then answers `answer`.
fn repeats_beside_a_fresh_call(answer: &str) -> std::sync::Arc<MockProvider> {
    MockProvider::builder()
        .turn(call_turn("c1", json!({"path": "."})))
        .turn(vec![
            ev::call("c2", "list_dir", json!({"path": "."})),
            ev::call("c3", "list_dir", json!({"path": "src"})),
            ev::call("c4", "list_dir", json!({"path": "src"})),
            ev::finish(),
        ])
        .turn(vec![ev::text(answer), ev::finish()])
        .build()
}

#[test]
fn a_repeat_is_answered_with_the_head_of_the_earlier_result() {
    let tool = RecordingTool::new("list_dir").returns(json!("port = 8080"));
    let provider = repeats_beside_a_fresh_call("8080");
    let c = client(provider, registry([tool.clone()]));
    let events = block_on(chat(&c, "port?"));
    check_events(&events);
    // c1 and c3 ran; c2 repeats c1 (an earlier turn), c4 repeats c3 (the same reply).
    assert_eq!(tool.call_count(), 2);
    let repeated: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolResult {
                call_id,
                content,
                is_error: true,
                ..
            } if content.contains("already called list_dir") => Some(call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(repeated, ["c2", "c4"]);
    let history = c.history();
    let tool_texts: Vec<String> = history
        .messages()
        .iter()
        .filter(|m| m.role() == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert!(tool_texts[1].contains("port = 8080"), "{tool_texts:?}");
    assert_eq!(finish_reason(&events), FinishReason::Stop);
}

/// A turn that ran a fresh call keeps only that call in the history: its repeats (of
/// an earlier turn's call, of a twin in the same reply) and their "not run again"
/// results are left out (`skip-repeat-calls`), and the next request carries none of
/// them; with the rule off they stay, calls and results 1:1 either way.
#[test]
fn a_turn_records_its_fresh_calls_without_their_repeats() {
    for on in [true, false] {
        let tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
        let provider = repeats_beside_a_fresh_call("a.txt");
        let c = client_with(provider.clone(), registry([tool]), |cfg| {
            if !on {
                cfg.coach.off.insert(Rule::SkipRepeatCalls);
            }
        });
        let events = block_on(chat(&c, "list it"));
        check_events(&events);
        check_history(&c.history());
        let history = c.history();
        let ids = |role: Role| -> Vec<String> {
            let messages = history.messages().iter().filter(|m| m.role() == role);
            match role {
                Role::Tool => messages
                    .filter_map(|m| m.tool_call_id().map(str::to_owned))
                    .collect(),
                _ => messages
                    .flat_map(|m| m.tool_calls().map(|c| c.id.clone()))
                    .collect(),
            }
        };
        let expected: &[&str] = if on {
            &["c1", "c3"]
        } else {
            &["c1", "c2", "c3", "c4"]
        };
        assert_eq!(ids(Role::Tool), expected, "on: {on}");
        assert_eq!(ids(Role::Assistant), expected, "on: {on}");
        let last = provider.requests().last().cloned().unwrap();
        let quoted = last
            .messages
            .iter()
            .any(|m| m.text().contains("not run again"));
        assert_eq!(quoted, !on, "on: {on}");
    }
}

/// The reply after a turn that repeated a call is asked for without tools (the model
/// is to answer from what it has); a fresh call in between brings the tools back.
#[test]
fn the_reply_after_a_repeat_is_offered_no_tools() {
    let tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
    let provider = MockProvider::builder()
        .turn(call_turn("c1", json!({"path": "."})))
        .turn(call_turn("c2", json!({"path": "."})))
        .turn(call_turn("c3", json!({"path": "src"})))
        .turn(call_turn("c4", json!({"path": "src"})))
        .turn(vec![ev::text("a.txt"), ev::finish()])
        .build();
    let c = client(provider.clone(), registry([tool.clone()]));
    let events = block_on(chat(&c, "list it"));
    check_events(&events);
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(tool.call_count(), 2);
    let offered: Vec<usize> = provider.requests().iter().map(|r| r.tools.len()).collect();
    assert_eq!(offered, [1, 1, 0, 1, 0]);
    let choices: Vec<ToolChoice> = provider
        .requests()
        .iter()
        .map(|r| r.tool_choice.clone())
        .collect();
    assert_eq!(choices[2], ToolChoice::None);
    // The repeats' turns are not in the history: the nudge stood in for each of them
    // while the run went on, and left the history with the run.
    let last = provider.requests().last().unwrap().clone();
    let sent: Vec<String> = last.messages.iter().map(|m| m.text()).collect();
    assert_eq!(
        count_text(&sent, &said(Nudge::AnswerFromResults)),
        2,
        "{sent:?}"
    );
    let history = c.history();
    let texts: Vec<String> = history.messages().iter().map(|m| m.text()).collect();
    assert_eq!(
        count_text(&texts, &said(Nudge::AnswerFromResults)),
        0,
        "{texts:?}"
    );
    let ids: Vec<String> = history
        .messages()
        .iter()
        .flat_map(|m| m.tool_calls().map(|c| c.id.clone()))
        .collect();
    assert_eq!(ids, ["c1", "c3"]);
    check_history(&history);
}

/// With `restate-question` on, the answer nudge after a repeated call ends with the
/// user's message again; off, it is the nudge alone. Either way it leaves the history
/// with the run.
#[test]
fn restate_question_repeats_the_users_message_in_the_answer_nudge() {
    for on in [false, true] {
        let tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
        let provider = MockProvider::builder()
            .turn(call_turn("c1", json!({"path": "."})))
            .turn(call_turn("c2", json!({"path": "."})))
            .turn(vec![ev::text("a.txt"), ev::finish()])
            .build();
        let c = client_with(provider.clone(), registry([tool]), |cfg| {
            if on {
                cfg.coach.turn_on(Rule::RestateQuestion);
            }
        });
        let events = block_on(chat(&c, "what is in here?"));
        check_events(&events);
        let last = provider.requests().last().unwrap().clone();
        let nudge = last.messages.last().unwrap().text();
        let mut want = said(Nudge::AnswerFromResults);
        if on {
            want.push_str(" My question: what is in here?");
        }
        assert_eq!(nudge, want, "on: {on}");
        let texts: Vec<String> = c.history().messages().iter().map(|m| m.text()).collect();
        assert_eq!(count_text(&texts, &want), 0, "{texts:?}");
    }
}

fn count_text(texts: &[String], text: &str) -> usize {
    texts.iter().filter(|t| t.as_str() == text).count()
}

/// A reply after a result that repeats itself is stopped, not recorded, and followed by
/// the nudge and a request without tools; a second runaway ends the run. (A reply of
/// call lines is cut sooner, by the call-loop guard: the test after the next.)
#[test]
fn a_runaway_after_a_result_is_asked_again_once() {
    let runaway = || {
        let mut steps: Vec<Step> = (0..400)
            .map(|_| Step::Event(ev::text("I will list the directory again.\n")))
            .collect();
        steps.push(Step::Hang);
        steps
    };
    for answers in [true, false] {
        let tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
        let mut builder = MockProvider::builder()
            .turn(call_turn("c1", json!({"path": "."})))
            .turn_steps(runaway());
        builder = if answers {
            builder.turn(vec![ev::text("a.txt"), ev::finish()])
        } else {
            builder.turn_steps(runaway())
        };
        let provider = builder.build();
        let c = client(provider.clone(), registry([tool.clone()]));
        let events = block_on(chat(&c, "list it"));
        check_events(&events);
        let expected = if answers {
            FinishReason::Stop
        } else {
            FinishReason::Repetition
        };
        assert_eq!(finish_reason(&events), expected);
        assert_eq!(provider.request_count(), 3);
        assert_eq!(provider.requests()[2].tools.len(), 0);
        let sent: Vec<String> = provider.requests()[2]
            .messages
            .iter()
            .map(|m| m.text())
            .collect();
        assert_eq!(
            count_text(&sent, &said(Nudge::AnswerFromResults)),
            1,
            "{sent:?}"
        );
        let history = c.history();
        let texts: Vec<String> = history.messages().iter().map(|m| m.text()).collect();
        assert_eq!(
            count_text(&texts, &said(Nudge::AnswerFromResults)),
            0,
            "{texts:?}"
        );
        check_history(&history);
    }
}

/// `answer-at-repeat-limit`: a run the repeat limit stops before any nudge (the turn
/// before the third ask ran a fresh call beside its repeat) gets one more reply, with no
/// tools and the answer nudge; a call in that reply never runs.
#[test]
fn a_run_stuck_at_the_repeat_limit_answers_from_its_results() {
    let run = |on: bool, last: Vec<ProviderEvent>| {
        let tool = RecordingTool::new("list_dir").returns(json!("todo.md: 3 open"));
        let provider = MockProvider::builder()
            .turn(call_turn("c1", json!({"path": "."})))
            .turn(vec![
                ev::call("c2", "list_dir", json!({"path": "."})),
                ev::call("c3", "list_dir", json!({"path": "notes"})),
                ev::finish(),
            ])
            .turn(call_turn("c4", json!({"path": "."})))
            .turn(last)
            .build();
        let c = client_with(provider.clone(), registry([tool.clone()]), |cfg| {
            if on {
                cfg.coach.turn_on(Rule::AnswerAtRepeatLimit);
            }
        });
        let events = block_on(chat(&c, "how many todos are open?"));
        check_events(&events);
        check_history(&c.history());
        (events, provider, tool, c)
    };
    let answer = || vec![ev::text("3 are open."), ev::finish()];
    // Off: the third ask ends the run with no answer.
    let (events, provider, tool, _) = run(false, answer());
    assert_eq!(finish_reason(&events), FinishReason::Repetition);
    assert_eq!((provider.request_count(), tool.call_count()), (3, 2));
    // On (the default): one more request, with no tools and the nudge last; the answer
    // ends the run, and the nudge leaves the history.
    let (events, provider, tool, c) = run(true, answer());
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(warnings(&events, WarningKind::Repetition), 1);
    assert_eq!((provider.request_count(), tool.call_count()), (4, 2));
    let last = provider.requests().pop().unwrap();
    assert!(last.tools.is_empty());
    assert_eq!(
        last.messages.last().unwrap().text(),
        said(Nudge::AnswerFromResults)
    );
    let history = c.history();
    let texts: Vec<String> = history.messages().iter().map(|m| m.text()).collect();
    assert_eq!(
        count_text(&texts, &said(Nudge::AnswerFromResults)),
        0,
        "{texts:?}"
    );
    assert_eq!(texts.last().unwrap(), "3 are open.");
    // A call in that reply never runs: it is answered, and the run ends as stuck.
    let again = vec![
        ev::call("c5", "list_dir", json!({"path": "x"})),
        ev::finish(),
    ];
    let (events, provider, tool, _) = run(true, again);
    assert_eq!(finish_reason(&events), FinishReason::Repetition);
    assert_eq!((provider.request_count(), tool.call_count()), (4, 2));
    let refused = events.iter().any(|e| {
        matches!(e, ChatEvent::ToolResult { call_id, content, is_error: true, .. }
            if call_id == "c5" && content.contains("repeated a call too often"))
    });
    assert!(refused, "{events:#?}");
}

#[test]
fn a_reply_that_repeats_itself_is_stopped() {
    // The stream never finishes: only the detector can end this turn.
    let mut steps: Vec<Step> = (0..400)
        .map(|_| Step::Event(ev::text("I will list the directory.\n")))
        .collect();
    steps.push(Step::Hang);
    let provider = MockProvider::builder().turn_steps(steps).build();
    let c = client(provider, registry([RecordingTool::new("list_dir")]));
    let events = block_on(chat(&c, "hi"));
    check_events(&events);
    assert_eq!(finish_reason(&events), FinishReason::Repetition);
    assert_eq!(warnings(&events, WarningKind::Repetition), 1);
    let history = c.history();
    let last = history.messages().last().unwrap();
    assert_eq!(last.role(), Role::Assistant);
    // 400 lines are 10,800 bytes: the stop comes at the guard's 8 KiB span.
    assert!(
        last.text().len() < 9000,
        "stopped at the span: {}",
        last.text().len()
    );
}

#[test]
fn with_the_runaway_guard_off_a_repeating_reply_streams_to_its_end() {
    let line = "I will list the directory.\n";
    let mut turn: Vec<_> = (0..400).map(|_| ev::text(line)).collect();
    turn.push(ev::finish());
    for (guard, expected) in [
        (true, FinishReason::Repetition),
        (false, FinishReason::Stop),
    ] {
        let provider = MockProvider::builder().turn(turn.clone()).build();
        let c = client_with(provider, registry([]), |cfg| runaway_guard(cfg, guard));
        let events = block_on(chat(&c, "hi"));
        check_events(&events);
        assert_eq!(finish_reason(&events), expected, "guard {guard}");
        let history = c.history();
        let last = history.messages().last().unwrap().text();
        assert_eq!(
            last.len() == line.len() * 400,
            !guard,
            "guard {guard}: {}",
            last.len()
        );
    }
}

#[test]
fn a_reply_that_keeps_writing_calls_is_cut_at_its_first_repeat() {
    // Qwen2.5-Coder-0.5B's reply after a result (issue 24): call lines cycling through the
    // tools until the generation cap. The stream never finishes: only the call-loop guard
    // can end this turn.
    let cycle = [
        r#"{"name": "search_text", "arguments": {"pattern": "notes.txt"}}"#,
        r#"{"name": "list_dir", "arguments": {"path": "."}}"#,
        r#"{"name": "search_text", "arguments": {"pattern": "launch"}}"#,
    ];
    let mut steps: Vec<Step> = (0..100)
        .flat_map(|_| {
            cycle
                .iter()
                .map(|line| Step::Event(ev::text(format!("{line}\n"))))
        })
        .collect();
    steps.push(Step::Hang);
    let provider = MockProvider::builder()
        .turn_steps(steps)
        .turn(vec![ev::text("The launch code is 4471."), ev::finish()])
        .build();
    let tools = ["search_text", "list_dir"].map(RecordingTool::new);
    let c = client(provider.clone(), registry(tools.clone()));
    let events = block_on(chat(&c, "What is the launch code in notes.txt?"));
    check_events(&events);
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(warnings(&events, WarningKind::Repetition), 1);
    assert_eq!(tools[0].call_count(), 2);
    assert_eq!(tools[1].call_count(), 1);
    assert_eq!(provider.requests().len(), 2);
    check_history(&c.history());
}

#[test]
fn a_reply_that_goes_through_the_tools_runs_its_first_tool_only() {
    // The 0.5B's first reply: a call to each offered tool in the order offered, the right
    // one first, then write_file with invented content.
    let lines = [
        r#"{"name": "read_file", "arguments": {"path": "config/app.toml"}}"#,
        r#"{"name": "list_dir", "arguments": {"path": "."}}"#,
        r#"{"name": "search_text", "arguments": {"pattern": "a"}}"#,
        r#"{"name": "write_file", "arguments": {"path": "x.txt", "content": "Hello"}}"#,
    ];
    let reply = lines.join("\n");
    let provider = MockProvider::builder()
        .turn(vec![ev::text(reply), ev::finish()])
        .turn(vec![ev::text("The port is 8123."), ev::finish()])
        .build();
    let tools = ["read_file", "list_dir", "search_text", "write_file"].map(RecordingTool::new);
    let c = client(provider, registry(tools.clone()));
    let events = block_on(chat(&c, "Which port is set in config/app.toml?"));
    check_events(&events);
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    let counts: Vec<usize> = tools.iter().map(RecordingTool::call_count).collect();
    assert_eq!(counts, [1, 0, 0, 0]);
    assert_eq!(warnings(&events, WarningKind::Repetition), 1);
    check_history(&c.history());
}

#[test]
fn with_the_runaway_guard_off_a_reply_of_calls_is_read_whole() {
    let line = r#"{"name": "list_dir", "arguments": {"path": "."}}"#;
    let mut turn: Vec<_> = (0..3).map(|_| ev::text(format!("{line}\n"))).collect();
    turn.push(ev::finish());
    for (guard, warned) in [(true, 1), (false, 0)] {
        let provider = MockProvider::builder()
            .turn(turn.clone())
            .turn(vec![ev::text("a.txt"), ev::finish()])
            .build();
        let tool = RecordingTool::new("list_dir");
        let c = client_with(provider, registry([tool.clone()]), |cfg| {
            runaway_guard(cfg, guard);
        });
        let events = block_on(chat(&c, "hi"));
        check_events(&events);
        assert_eq!(
            warnings(&events, WarningKind::Repetition),
            warned,
            "guard {guard}"
        );
        // Either way the call runs once: twins are answered from one result (repeat-guard).
        assert_eq!(tool.call_count(), 1, "guard {guard}");
    }
}

/// What cap a request should carry.
#[derive(Debug, Clone, Copy)]
enum Cap {
    /// Exactly this many tokens.
    Exactly(u32),
    /// What the window leaves after the prompt: under the window, within 100 tokens of
    /// it for a prompt of "hi", and never past it with the prompt's estimate.
    WindowLeft,
}

/// The cap a run's request carries in a `window`-token window, for the config's cap and
/// the call's.
fn check_cap(window: u32, config_cap: Option<u32>, call_cap: Option<u32>, expected: Cap) {
    let provider = MockProvider::builder()
        .window(window)
        .turn(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client_with(provider.clone(), registry([]), |cfg| {
        cfg.max_tokens = config_cap;
    });
    let options = ChatOptions {
        max_tokens: call_cap,
        ..ChatOptions::default()
    };
    block_on(crate::support::collect(c.chat("hi", options)));
    let request = &provider.requests()[0];
    let sent = request
        .options
        .max_tokens
        .expect("every request carries a cap");
    let case = format!("{window} {config_cap:?} {call_cap:?}: sent {sent}");
    match expected {
        Cap::Exactly(n) => assert_eq!(sent, n, "{case}"),
        Cap::WindowLeft => {
            let prompt = request.estimated_prompt_tokens.unwrap_or_default();
            assert!(sent + prompt <= window && sent + 100 > window, "{case}");
        }
    }
}

#[test]
fn every_request_carries_a_generation_cap() {
    // Issue 36: `max_tokens: None` used to pass through, and a default cap over a small
    // window made vLLM refuse every request (docs/vllm.md).
    check_cap(
        32768,
        Some(DEFAULT_MAX_TOKENS),
        None,
        Cap::Exactly(DEFAULT_MAX_TOKENS),
    );
    check_cap(32768, Some(100), None, Cap::Exactly(100));
    check_cap(32768, Some(100), Some(7), Cap::Exactly(7));
    check_cap(32768, None, None, Cap::WindowLeft);
    check_cap(2048, Some(DEFAULT_MAX_TOKENS), None, Cap::WindowLeft);
    check_cap(2048, Some(100), Some(5000), Cap::WindowLeft);
    assert_eq!(
        ollm_core::ChatConfig::default().max_tokens,
        Some(DEFAULT_MAX_TOKENS)
    );
}

#[test]
fn a_reply_cut_at_the_cap_finishes_as_length_with_a_warning() {
    let provider = MockProvider::builder()
        .turn(vec![
            ev::text("a long"),
            ev::finish_with(FinishReason::Length),
        ])
        .build();
    let c = client(provider, registry([]));
    let events = block_on(chat(&c, "hi"));
    assert_eq!(finish_reason(&events), FinishReason::Length);
    assert_eq!(warnings(&events, WarningKind::TokenLimit), 1);
}

/// The strategy announced for a run, with its reason.
fn chosen(events: &[ChatEvent]) -> Vec<(Option<ToolMode>, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::StrategyChosen {
                strategy,
                reason,
                cause,
            } => {
                // The words are the typed reason's.
                assert_eq!(&cause.to_string(), reason);
                Some((*strategy, reason.clone()))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn the_strategy_choice_is_explained() {
    let provider = MockProvider::builder()
        .capabilities(vec![Capability::Completion])
        .turn(vec![ev::text("hi"), ev::finish()])
        .build();
    let c = client(provider, registry([RecordingTool::new("t")]));
    let events = block_on(chat(&c, "hi"));
    let got = chosen(&events);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, Some(ToolMode::React));
    assert!(got[0].1.contains("without tool support"), "{got:?}");
}

#[test]
fn a_refusal_falls_back_with_the_server_flags_and_is_remembered() {
    let refused = ev::error(
        ProviderErrorKind::ToolsUnsupported,
        "tools param requires --jinja",
    );
    let provider = MockProvider::builder()
        .turn(vec![refused])
        .turn(vec![ev::text("Final Answer: hi"), ev::finish()])
        .turn(vec![ev::text("Final Answer: again"), ev::finish()])
        .build();
    let c = client(provider, registry([RecordingTool::new("t")]));
    let events = block_on(chat(&c, "hi"));
    let got = chosen(&events);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[1].0, Some(ToolMode::React));
    assert!(got[1].1.contains("--jinja"), "{got:?}");
    assert!(c.learned("m").native_refused);
    let events = block_on(chat(&c, "again"));
    assert_eq!(chosen(&events)[0].0, Some(ToolMode::React));
}

#[test]
fn native_text_calls_are_learned_per_model() {
    let provider = MockProvider::builder()
        .turn(vec![
            ev::text("{\"name\": \"t\", \"arguments\": {}}"),
            ev::finish(),
        ])
        .turn(vec![ev::text("done"), ev::finish()])
        .build();
    let c = client_with(provider, registry([RecordingTool::new("t")]), |cfg| {
        cfg.tool_mode = ToolMode::Native;
    });
    block_on(chat(&c, "go"));
    let learned = c.learned("m");
    assert_eq!((learned.text_calls, learned.native_calls), (1, 0));
}

#[test]
fn native_structured_calls_are_learned_as_such() {
    // A bug the issue-26 reshaping found: structured calls were counted as text ones.
    let provider = MockProvider::builder()
        .turn(call_turn("c1", json!({"path": "."})))
        .turn(vec![ev::text("done"), ev::finish()])
        .build();
    let c = client_with(
        provider,
        registry([RecordingTool::new("list_dir")]),
        |cfg| {
            cfg.tool_mode = ToolMode::Native;
        },
    );
    block_on(chat(&c, "go"));
    let learned = c.learned("m");
    assert_eq!((learned.text_calls, learned.native_calls), (0, 1));
}

/// Runs one prompt with `mode` and `choice` against `turns`; the events and the requests.
fn run_choice(
    mode: ToolMode,
    choice: ToolChoice,
    turns: Vec<Vec<ProviderEvent>>,
) -> (Vec<ChatEvent>, Vec<ollm_types::ProviderRequest>, usize) {
    let mut builder = MockProvider::builder();
    for t in turns {
        builder = builder.turn(t);
    }
    let provider = builder.build();
    let tool = RecordingTool::new("t").returns(json!("42"));
    let c = client_with(
        provider.clone(),
        registry([tool.clone(), RecordingTool::new("u")]),
        |cfg| {
            cfg.tool_mode = mode;
            cfg.tool_choice = choice;
        },
    );
    let events = block_on(chat(&c, "go"));
    check_events(&events);
    check_history(&c.history());
    (events, provider.requests(), tool.call_count())
}

#[test]
fn react_required_rejects_a_first_final_answer() {
    let (events, requests, calls) = run_choice(
        ToolMode::React,
        ToolChoice::Required,
        vec![
            vec![ev::text("Final Answer: 42"), ev::finish()],
            vec![ev::text("Action: t\nAction Input: {}"), ev::finish()],
            vec![ev::text("Final Answer: 42"), ev::finish()],
        ],
    );
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(calls, 1);
    assert_eq!(requests.len(), 3);
    // The last request, after the call, no longer insists on a tool.
    let last = requests[2].system.clone().unwrap_or_default();
    assert!(!last.contains("You must use a tool"), "{last}");
    assert!(
        requests[0]
            .system
            .clone()
            .unwrap_or_default()
            .contains("You must use a tool")
    );
}

#[test]
fn tool_choice_none_offers_and_runs_nothing() {
    for mode in [ToolMode::React, ToolMode::Constrained, ToolMode::Native] {
        let (events, requests, calls) = run_choice(
            mode,
            ToolChoice::None,
            vec![
                vec![ev::call("c1", "t", json!({})), ev::finish()],
                vec![ev::text("{\"final_answer\": \"no\"}"), ev::finish()],
            ],
        );
        assert_eq!(calls, 0, "{mode}");
        assert!(requests[0].response_format.is_none(), "{mode}");
        assert!(
            requests[0].system.is_none(),
            "{mode}: {:?}",
            requests[0].system
        );
        if mode == ToolMode::Native {
            // Sent as the server's `tool_choice`, with the tools.
            assert_eq!(requests[0].tool_choice, ToolChoice::None);
            assert_eq!(requests[0].tools.len(), 2);
        } else {
            assert!(requests[0].tools.is_empty(), "{mode}");
        }
        assert_eq!(finish_reason(&events), FinishReason::Stop);
    }
}

#[test]
fn constrained_named_choice_narrows_the_schema_until_the_first_call() {
    let (_, requests, calls) = run_choice(
        ToolMode::Constrained,
        ToolChoice::Tool("t".into()),
        vec![
            vec![
                ev::text("{\"tool\": \"t\", \"arguments\": {}}"),
                ev::finish(),
            ],
            vec![ev::text("{\"final_answer\": \"42\"}"), ev::finish()],
        ],
    );
    assert_eq!(calls, 1);
    let branches = |r: &ollm_types::ProviderRequest| match &r.response_format {
        Some(ollm_types::ResponseFormat::JsonSchema { schema, .. }) => {
            schema["oneOf"].as_array().map_or(0, Vec::len)
        }
        _ => 0,
    };
    assert_eq!(branches(&requests[0]), 1);
    assert_eq!(branches(&requests[1]), 3);
}

#[test]
fn native_sends_the_choice_and_an_unknown_name_is_refused() {
    let (_, requests, _) = run_choice(
        ToolMode::Native,
        ToolChoice::Required,
        vec![
            vec![ev::call("c1", "t", json!({})), ev::finish()],
            vec![ev::text("42"), ev::finish()],
        ],
    );
    assert_eq!(requests[0].tool_choice, ToolChoice::Required);
    assert_eq!(requests[1].tool_choice, ToolChoice::Auto);
    let (events, requests, _) =
        run_choice(ToolMode::Native, ToolChoice::Tool("nope".into()), vec![]);
    assert!(requests.is_empty());
    assert_eq!(finish_reason(&events), FinishReason::Error);
    assert!(events.iter().any(
        |e| matches!(e, ChatEvent::Error { error } if error.kind == ProviderErrorKind::BadRequest)
    ));
}

#[test]
fn a_reply_of_a_thousand_calls_runs_a_bounded_few_and_the_run_goes_on() {
    let tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
    let mut looping: Vec<ProviderEvent> = (0..1000)
        .map(|i| ev::call(format!("c{i}"), "list_dir", json!({"path": "."})))
        .collect();
    looping.push(ev::finish());
    let provider = MockProvider::builder()
        .turn(looping)
        .turn(vec![ev::text("a.txt"), ev::finish()])
        .build();
    // The twins stay in the history with `skip-repeat-calls` off, so the bound shows.
    let c = client_with(provider.clone(), registry([tool.clone()]), |cfg| {
        cfg.coach.off.insert(Rule::SkipRepeatCalls);
    });
    let events = block_on(chat(&c, "list it"));
    check_events(&events);
    check_history(&c.history());
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(tool.call_count(), 1, "twins in one reply run once");
    assert_eq!(warnings(&events, WarningKind::Repetition), 1);
    // Every announced call is answered, but the conversation keeps only the first 16.
    let results = count(&events, |e| matches!(e, ChatEvent::ToolResult { .. }));
    assert_eq!(results, 1000);
    let second = &provider.requests()[1];
    let tool_messages = second
        .messages
        .iter()
        .filter(|m| m.role() == Role::Tool)
        .count();
    assert_eq!(tool_messages, ollm_core::MAX_CALLS_PER_REPLY);
}

/// A reply that shows how to call a tool instead of calling it is followed by the act
/// nudge once, before the run's first call; the example never runs.
#[test]
fn an_example_instead_of_a_call_is_asked_to_act_once() {
    let example = "Here's how you can call it:\n\n```json\n{\"name\": \"list_dir\", \
                   \"arguments\": {\"path\": \"src\"}}\n```";
    let check = |script: Vec<Vec<ProviderEvent>>, runs: usize, finish: FinishReason| {
        let mut builder = MockProvider::builder();
        for turn in script {
            builder = builder.turn(turn);
        }
        let provider = builder.build();
        let tool = RecordingTool::new("list_dir").returns(json!("main.rs"));
        let c = client(provider.clone(), registry([tool.clone()]));
        let events = block_on(chat(&c, "which files are in src?"));
        check_events(&events);
        assert_eq!(tool.calls().len(), runs);
        assert_eq!(finish_reason(&events), finish);
        let sent = sent_last(&provider);
        assert_eq!(count_text(&sent, &said(Nudge::Act)), 1, "{sent:?}");
        assert_eq!(count_text(&texts_of(&c), &said(Nudge::Act)), 0);
        check_history(&c.history());
    };
    let text = |t: &str| vec![ev::text(t), ev::finish()];
    // Asked to act, it writes the call alone: it runs, and the answer follows.
    let fenced = "```json\n{\"name\": \"list_dir\", \"arguments\": {\"path\": \"src\"}}\n```";
    check(
        vec![text(example), text(fenced), text("main.rs")],
        1,
        FinishReason::Stop,
    );
    // A second example after the nudge is the answer: one nudge per run.
    check(vec![text(example), text(example)], 0, FinishReason::Stop);
    // After a call ran, an example is an answer: no nudge (the count above would be 0).
    let provider = MockProvider::builder()
        .turn(call_turn("c1", json!({})))
        .turn(text(example))
        .build();
    let c = client(provider.clone(), registry([RecordingTool::new("list_dir")]));
    let events = block_on(chat(&c, "which files?"));
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(count_text(&sent_last(&provider), &said(Nudge::Act)), 0);
}

/// The texts of a client's history.
fn texts_of(c: &ollm_core::ChatClient) -> Vec<String> {
    c.history().messages().iter().map(|m| m.text()).collect()
}

/// The texts of the messages of the last request a provider got.
fn sent_last(provider: &MockProvider) -> Vec<String> {
    let requests = provider.requests();
    let last = requests
        .last()
        .map(|r| r.messages.clone())
        .unwrap_or_default();
    last.iter().map(|m| m.text()).collect()
}

#[test]
fn an_answer_that_says_it_cannot_reach_the_files_is_asked_to_act_once() {
    // The 1.5B's answer on a question about docs/guide.md, with read_file on offer.
    let refusal = "I'm sorry, but I cannot execute external processes or interact with the \
                   operating system.";
    let text = |t: &str| vec![ev::text(t), ev::finish()];
    let provider = MockProvider::builder()
        .turn(text(refusal))
        .turn(call_turn("c1", json!({"path": "docs"})))
        .turn(text("The codename is Bluebird."))
        .build();
    let tool = RecordingTool::new("list_dir");
    let c = client(provider.clone(), registry([tool.clone()]));
    let events = block_on(chat(&c, "What is the release codename in docs/guide.md?"));
    check_events(&events);
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(tool.call_count(), 1);
    assert_eq!(count_text(&sent_last(&provider), &said(Nudge::Can)), 1);
    assert_eq!(count_text(&texts_of(&c), &said(Nudge::Can)), 0);
    check_history(&c.history());
    // Twice in a row: the second is the answer (one nudge per run); with no tools on
    // offer, never.
    for (tools, nudges) in [(vec![RecordingTool::new("list_dir")], 1), (vec![], 0)] {
        let provider = MockProvider::builder()
            .turn(text(refusal))
            .turn(text(refusal))
            .build();
        let c = client(provider.clone(), registry(tools));
        let events = block_on(chat(&c, "What is in docs?"));
        assert_eq!(finish_reason(&events), FinishReason::Stop);
        assert_eq!(count_text(&sent_last(&provider), &said(Nudge::Can)), nudges);
    }
}

#[test]
fn an_empty_answer_after_a_call_is_asked_for_again_once() {
    // The 1.5B read src/counter.rs, then ended its next reply at once (issue 24).
    let text = |t: &str| vec![ev::text(t), ev::finish()];
    let empty = vec![ev::finish()];
    for (after_empty, answer) in [
        (text("main.rs and counter.rs"), "main.rs and counter.rs"),
        (empty.clone(), ""),
    ] {
        let provider = MockProvider::builder()
            .turn(call_turn("c1", json!({"path": "src"})))
            .turn(empty.clone())
            .turn(after_empty)
            .build();
        let c = client(provider.clone(), registry([RecordingTool::new("list_dir")]));
        let events = block_on(chat(&c, "Which files are in src?"));
        check_events(&events);
        assert_eq!(finish_reason(&events), FinishReason::Stop);
        assert_eq!(provider.request_count(), 3);
        // The nudge asks with no tools; the empty reply is not in the history, nor is the
        // nudge once the run is over.
        assert_eq!(provider.requests()[2].tools.len(), 0);
        let sent = sent_last(&provider);
        assert_eq!(
            count_text(&sent, &said(Nudge::AnswerFromResults)),
            1,
            "{sent:?}"
        );
        let texts = texts_of(&c);
        assert_eq!(
            count_text(&texts, &said(Nudge::AnswerFromResults)),
            0,
            "{texts:?}"
        );
        assert_eq!(texts.last().map(String::as_str), Some(answer), "{texts:?}");
        check_history(&c.history());
    }
    // With no call before it, an empty answer ends the run as it is.
    let provider = MockProvider::builder().turn(vec![ev::finish()]).build();
    let c = client(provider.clone(), registry([RecordingTool::new("list_dir")]));
    let events = block_on(chat(&c, "hi"));
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(provider.request_count(), 1);
}
