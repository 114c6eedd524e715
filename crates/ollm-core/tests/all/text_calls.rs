//! Calls a model writes as text, through the whole `ChatClient` in native mode: however
//! the reply is chunked, the display shows exactly the prose (a recovered call is a tool
//! call, never answer text; text that is no call is shown unchanged), calls and results
//! stay 1:1, and the history keeps the prose with the calls as structured calls.

use std::sync::Arc;

use ollm_core::{ChatClient, ChatConfig, ChatEvent, ToolMode};
use ollm_types::{Message, ProviderEvent, Role};
use proptest::prelude::*;
use serde_json::{Value, json};
use test_utils::mock_provider::{MockProvider, ev};
use test_utils::recording_tool::{RecordingTool, registry};
use test_utils::split::split_text;

use crate::support::{added_of, block_on, chat};

/// A reply, the prose it keeps, and what each call it makes is answered with (`None`: the
/// tool runs; `Some(prefix)`: an error result starting so).
struct Case {
    text: &'static str,
    prose: &'static str,
    calls: &'static [(&'static str, Option<&'static str>)],
    /// Whether it shows a call instead of making one, so the act nudge follows.
    nudged: bool,
}

const CASES: &[Case] = &[
    // Qwen2.5-Coder-0.5B's usual reply: one fenced call, nothing else.
    Case {
        text: "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"notes.txt\"}}\n```",
        prose: "",
        calls: &[("read_file", None)],
        nudged: false,
    },
    Case {
        text: "I'll read it.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>",
        prose: "I'll read it.\n",
        calls: &[("read_file", None)],
        nudged: false,
    },
    Case {
        text: "{\"name\": \"launch_code\", \"arguments\": {\"file\": \"main.py\"}}",
        prose: "",
        calls: &[("launch_code", Some("Error: Unknown tool \"launch_code\""))],
        nudged: false,
    },
    Case {
        text: "<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n</tool_call>\n<tool_call>\nnot json\n</tool_call>",
        prose: "",
        calls: &[
            ("read_file", None),
            (
                "invalid_tool_call",
                Some("Error: the tool call could not be read: "),
            ),
        ],
        nudged: false,
    },
    Case {
        text: "For example:\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}\n```\nThat is how a call looks.",
        prose: "For example:\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"x\"}}\n```\nThat is how a call looks.",
        calls: &[],
        nudged: true,
    },
    Case {
        text: "Send `<tool_call>{\"name\": \"launch_code\"}</tool_call>` to call one.",
        prose: "Send `<tool_call>{\"name\": \"launch_code\"}</tool_call>` to call one.",
        calls: &[],
        nudged: false,
    },
    Case {
        text: "{\"answer\": 42}",
        prose: "{\"answer\": 42}",
        calls: &[],
        nudged: false,
    },
    Case {
        text: "The port is 8080.\n\n[1] notes.txt",
        prose: "The port is 8080.\n\n[1] notes.txt",
        calls: &[],
        nudged: false,
    },
];

/// `text` cut at `cuts` (see [`split_text`]) into text deltas, then a finish.
fn split(text: &str, cuts: &[usize]) -> Vec<ProviderEvent> {
    let mut events: Vec<ProviderEvent> = split_text(text, cuts).into_iter().map(ev::text).collect();
    events.push(ev::finish());
    events
}

fn native_client(reply: Vec<ProviderEvent>, tool: &RecordingTool) -> ChatClient {
    let provider: Arc<MockProvider> = MockProvider::builder()
        .turn(reply)
        .then_forever(vec![ev::text("done"), ev::finish()])
        .build();
    let mut config = ChatConfig::for_model("m");
    config.tool_mode = ToolMode::Native;
    ChatClient::new(provider, registry([tool.clone()]), config)
}

/// The first turn's answer text, announced calls and results (name, content, is_error).
fn first_turn(events: &[ChatEvent]) -> (String, Vec<String>, Vec<(String, String, bool)>) {
    let (mut text, mut calls, mut results) = (String::new(), Vec::new(), Vec::new());
    for event in events {
        match event {
            ChatEvent::TextDelta { text: t } => text.push_str(t),
            ChatEvent::ToolCallStarted { call } => calls.push(call.name.clone()),
            ChatEvent::ToolResult {
                name,
                content,
                is_error,
                ..
            } => results.push((name.clone(), content.clone(), *is_error)),
            ChatEvent::TurnComplete { .. } => break,
            _ => {}
        }
    }
    (text, calls, results)
}

fn check(case: &Case, cuts: &[usize]) -> Result<(), TestCaseError> {
    let tool = RecordingTool::new("read_file");
    let client = native_client(split(case.text, cuts), &tool);
    let events = block_on(chat(&client, "q"));
    let (shown, calls, results) = first_turn(&events);
    prop_assert_eq!(&shown, case.prose, "{:?}", case.text);
    let names: Vec<&str> = case.calls.iter().map(|(n, _)| *n).collect();
    prop_assert_eq!(&calls, &names);
    prop_assert_eq!(results.len(), case.calls.len());
    for ((name, content, is_error), (want, answer)) in results.iter().zip(case.calls) {
        prop_assert_eq!(name, want);
        match answer {
            None => prop_assert!(!is_error, "{content}"),
            Some(prefix) => {
                prop_assert!(is_error);
                prop_assert!(content.starts_with(prefix), "{content}");
            }
        }
    }
    let ran = case.calls.iter().filter(|(_, a)| a.is_none()).count();
    prop_assert_eq!(tool.call_count(), ran);
    let added = added_of(&events);
    let assistant: &Message = &added[1];
    prop_assert_eq!(assistant.role(), Role::Assistant);
    if case.calls.is_empty() {
        prop_assert_eq!(assistant.text(), case.text);
        if case.nudged {
            // Asked once to act (the coach's act nudge, which leaves the history with
            // the run), then the scripted "done".
            prop_assert_eq!(added.len(), 3);
            prop_assert_eq!(added[2].text(), "done");
            let coached = events.iter().any(|e| {
                matches!(
                    e,
                    ChatEvent::Coached {
                        rule: ollm_core::Rule::ActNudge,
                        ..
                    }
                )
            });
            prop_assert!(coached);
        } else {
            prop_assert_eq!(added.len(), 2);
        }
    } else {
        // The prose alone, the calls structured, one result each in order.
        prop_assert_eq!(assistant.text(), case.prose.trim());
        let ids: Vec<String> = assistant.tool_calls().map(|c| c.id.clone()).collect();
        prop_assert_eq!(ids.len(), case.calls.len());
        for (i, id) in ids.iter().enumerate() {
            prop_assert_eq!(added[2 + i].tool_call_id(), Some(id.as_str()));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::support::config())]

    /// However the reply is chunked, the display is exactly the prose, and the calls,
    /// results and history are the same.
    #[test]
    fn text_calls_show_only_prose_whatever_the_chunking(
        index in 0usize..CASES.len(),
        cuts in proptest::collection::vec(0usize..400, 0..12),
    ) {
        check(&CASES[index], &cuts)?;
    }
}

#[test]
fn every_case_holds_unsplit() {
    for case in CASES {
        check(case, &[]).unwrap();
    }
}

#[test]
fn fence_debris_around_a_native_call_is_not_answer_text() {
    // A server's parser took the call out of the content and left the fence around it.
    let tool = RecordingTool::new("read_file");
    let reply = vec![
        ev::text("```json\n"),
        ev::call("c1", "read_file", json!({"path": "a"})),
        ev::text("\n```"),
        ev::finish(),
    ];
    let client = native_client(reply, &tool);
    let events = block_on(chat(&client, "q"));
    let (shown, calls, _) = first_turn(&events);
    assert_eq!(shown, "");
    assert_eq!(calls, ["read_file"]);
    let added = added_of(&events);
    assert_eq!(added[1].text(), "");
    assert_eq!(
        added[1]
            .tool_calls()
            .map(|c| c.arguments_value())
            .collect::<Vec<Value>>(),
        [json!({"path": "a"})]
    );
}

/// A call the server parsed itself (llama-server read the 0.5B's
/// `{"name": "backup.py", "arguments": {}}` as a native call) to a tool that is not
/// offered is repaired as the same call written as text would be: the one offered
/// `read*` tool with that path (`file-as-name`), announced under its new name after a
/// `Coached` event naming the rule and the call. Off, the unknown-tool answer stands.
#[test]
fn a_native_call_named_like_a_file_reads_it_and_says_so() {
    let path = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    for off in [false, true] {
        let tool = RecordingTool::new("read_file").schema(path.clone());
        let provider: Arc<MockProvider> = MockProvider::builder()
            .turn(vec![ev::call("c1", "backup.py", json!({})), ev::finish()])
            .then_forever(vec![ev::text("30 days"), ev::finish()])
            .build();
        let mut config = ChatConfig::for_model("m");
        config.tool_mode = ToolMode::Native;
        config.coach.path_argument = Some("path".to_owned());
        if off {
            config.coach.off.insert(ollm_core::Rule::FileAsName);
        }
        let client = ChatClient::new(provider, registry([tool.clone()]), config);
        let events = block_on(chat(&client, "how many days does backup.py keep?"));
        let (_, calls, results) = first_turn(&events);
        let coached = events.iter().any(|e| {
            matches!(e, ChatEvent::Coached { rule: ollm_core::Rule::FileAsName, call_id: Some(id), .. } if id == "c1")
        });
        if off {
            assert_eq!(calls, ["backup.py"]);
            assert!(
                results[0]
                    .1
                    .starts_with("Error: Unknown tool \"backup.py\"")
            );
            assert!(!coached && tool.call_count() == 0);
        } else {
            assert_eq!(calls, ["read_file"], "{events:#?}");
            assert_eq!(results, [("read_file".into(), "ok".into(), false)]);
            assert!(coached, "{events:#?}");
            let arguments = Value::Object(tool.calls()[0].arguments.clone());
            assert_eq!(arguments, json!({"path": "backup.py"}));
        }
    }
}

/// A call written as text that a repair made a call to an offered tool is told to the
/// caller as the server's own calls are: a `Coached` event naming the rule and the
/// call's id, before the call starts, so a front end and the eval see where each repair
/// acted. A call to an offered tool by its own name is no repair.
#[test]
fn a_repaired_text_call_is_told_by_its_rule() {
    let path = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let check = |written: &str, rule: Option<ollm_core::Rule>| {
        let tool = RecordingTool::new("read_file").schema(path.clone());
        let provider: Arc<MockProvider> = MockProvider::builder()
            .turn(vec![ev::text(written), ev::finish()])
            .then_forever(vec![ev::text("30 days"), ev::finish()])
            .build();
        let mut config = ChatConfig::for_model("m");
        config.tool_mode = ToolMode::Native;
        config.coach.path_argument = Some("path".to_owned());
        config.coach.on.insert(ollm_core::Rule::NameRepair);
        let client = ChatClient::new(provider, registry([tool.clone()]), config);
        let events = block_on(chat(&client, "how many days does backup.py keep?"));
        let (_, calls, _) = first_turn(&events);
        assert_eq!(calls, ["read_file"], "{written}");
        let started = events
            .iter()
            .position(|e| matches!(e, ChatEvent::ToolCallStarted { .. }));
        let coached: Vec<(usize, ollm_core::Rule)> = (events.iter().enumerate())
            .filter_map(|(i, e)| match e {
                ChatEvent::Coached {
                    rule,
                    call_id: Some(_),
                    ..
                } => Some((i, *rule)),
                _ => None,
            })
            .collect();
        match rule {
            Some(rule) => {
                assert_eq!(coached.len(), 1, "{written}: {events:#?}");
                assert_eq!(coached[0].1, rule, "{written}");
                assert!(
                    Some(coached[0].0) < started,
                    "{written}: told before it starts"
                );
            }
            None => assert!(coached.is_empty(), "{written}: {events:#?}"),
        }
    };
    use ollm_core::Rule;
    check(
        r#"{"name": "backup.py", "arguments": {}}"#,
        Some(Rule::FileAsName),
    );
    check(
        r#"{"name": "READ_FILE", "arguments": {"path": "backup.py"}}"#,
        Some(Rule::NameRepair),
    );
    check(
        r#"{"name": "functions.read_file:0", "arguments": {"path": "backup.py"}}"#,
        None,
    );
    check(
        r#"{"name": "read_file", "arguments": {"path": "backup.py"}}"#,
        None,
    );
}
