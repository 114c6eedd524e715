//! The coach in runs against scripted providers: what it says belongs to the run that
//! needed it, over several runs of one client (an interactive chat).

use ollm_core::{ChatEvent, CoachConfig, Nudge, Rule};
use ollm_types::{FinishReason, ProviderEvent, Role, WarningKind};
use serde_json::json;
use test_utils::mock_provider::{MockProvider, ev};
use test_utils::recording_tool::{RecordingTool, registry};

use crate::support::{block_on, chat, check_events, check_history, client, finish_reason};

fn call_turn(id: &str) -> Vec<ProviderEvent> {
    vec![ev::call(id, "list_dir", json!({"path": "."})), ev::finish()]
}

fn text(t: &str) -> Vec<ProviderEvent> {
    vec![ev::text(t), ev::finish()]
}

/// Issue 35's chat with the 1.5B: "what's in this folder?" got `list_dir`, an identical
/// repeat answered from memory, then the answer nudge and a good answer. The nudge stayed
/// in the history, before every later request, and every later question (tools on offer)
/// got "I'm sorry, but I don't have enough information". Later runs must carry no nudge,
/// still be offered the tools, and the history must not hold it.
#[test]
fn a_nudge_never_outlives_the_run_that_needed_it() {
    let tool = RecordingTool::new("list_dir").returns(json!("config/ README.md"));
    let provider = MockProvider::builder()
        .turn(call_turn("c1"))
        .turn(call_turn("c2"))
        .turn(text("A config folder and a README."))
        .turn(call_turn("c3"))
        .turn(text("The app uses port 8088."))
        .turn(text("You're welcome!"))
        .build();
    let c = client(provider.clone(), registry([tool]));
    let questions = [
        "hi! what's in this folder?",
        "which port does the app use?",
        "thanks",
    ];
    let nudge = Nudge::AnswerFromResults.text(&CoachConfig::default());
    for (i, question) in questions.into_iter().enumerate() {
        let events = block_on(chat(&c, question));
        check_events(&events);
        assert_eq!(finish_reason(&events), FinishReason::Stop, "{question}");
        // The run says the coach acted, and reports no nudge among what it added.
        let coached = events.iter().any(|e| {
            matches!(
                e,
                ChatEvent::Coached {
                    rule: Rule::AnswerAfterIdle,
                    ..
                }
            )
        });
        assert_eq!(coached, i == 0, "{question}");
        let Some(ChatEvent::Finish { added, .. }) = events.last() else {
            panic!("no finish")
        };
        assert!(added.iter().all(|m| m.text() != nudge), "{question}");
    }
    let requests = provider.requests();
    assert_eq!(requests.len(), 6);
    // The run that needed it carried it, in the request that asked for the answer.
    let carries = |i: usize| requests[i].messages.iter().any(|m| m.text() == nudge);
    assert!(carries(2), "the third request asks for the answer");
    assert!(requests[2].tools.is_empty());
    // Later runs: no nudge, tools on offer.
    for (i, request) in requests.iter().enumerate().skip(3) {
        assert!(!carries(i), "request {i} carries the nudge");
        assert_eq!(request.tools.len(), 1, "request {i} offers the tools");
    }
    let history = c.history();
    assert!(history.messages().iter().all(|m| m.text() != nudge));
    assert_eq!(
        history
            .messages()
            .iter()
            .filter(|m| m.role() == Role::User)
            .count(),
        3,
        "the three questions, and no other user message"
    );
    check_history(&history);
}

/// What the coach did comes as typed `Coached` events: a repeat's names the call it
/// answered and comes before that call's result; every `Repetition` warning comes right
/// after the `Coached` event of the rule that acted (the CLI words that one, and skips
/// the warning).
#[test]
fn what_the_coach_did_is_typed_and_comes_first() {
    let listing = [
        r#"{"name": "list_dir", "arguments": {"path": "."}}"#,
        r#"{"name": "read_file", "arguments": {"path": "a"}}"#,
        r#"{"name": "search_text", "arguments": {"pattern": "x"}}"#,
    ]
    .join("\n");
    let provider = MockProvider::builder()
        .turn(vec![ev::text(listing), ev::finish()])
        .turn(call_turn("c2"))
        .turn(text("a.txt"))
        .build();
    let tools = ["list_dir", "read_file", "search_text"].map(RecordingTool::new);
    let c = client(provider, registry(tools.clone()));
    let events = block_on(chat(&c, "list it"));
    check_events(&events);
    let rules: Vec<(Rule, Option<String>)> = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Coached { rule, call_id, .. } => Some((*rule, call_id.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        rules,
        [
            (Rule::ListedToolsCut, None),
            (Rule::RepeatGuard, Some("c2".to_owned())),
            (Rule::AnswerAfterIdle, None),
        ]
    );
    for (i, e) in events.iter().enumerate() {
        match e {
            ChatEvent::Warning { warning } if warning.kind == WarningKind::Repetition => {
                assert!(
                    matches!(&events[i - 1], ChatEvent::Coached { .. }),
                    "{:?}",
                    events[i - 1]
                );
            }
            ChatEvent::Coached {
                rule: Rule::RepeatGuard,
                call_id: Some(id),
                ..
            } => assert!(
                matches!(&events[i + 1], ChatEvent::ToolResult { call_id, .. } if call_id == id),
                "{:?}",
                events[i + 1]
            ),
            _ => {}
        }
    }
    assert_eq!(tools[0].call_count(), 1, "list_dir ran once");
}

/// With every rule off the loop is a plain client's: a repeated call runs again and no
/// nudge is said.
#[test]
fn with_the_coach_off_a_repeat_runs_again_and_nothing_is_said() {
    let tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
    let provider = MockProvider::builder()
        .turn(call_turn("c1"))
        .turn(call_turn("c2"))
        .turn(text("a.txt"))
        .build();
    let c = crate::support::client_with(provider.clone(), registry([tool.clone()]), |cfg| {
        cfg.coach = CoachConfig::all_off();
    });
    let events = block_on(chat(&c, "list it"));
    check_events(&events);
    assert_eq!(tool.call_count(), 2);
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, ChatEvent::Coached { .. }))
    );
    let requests = provider.requests();
    assert!(requests.iter().all(|r| r.tools.len() == 1));
    assert!(requests.iter().all(|r| r.options.temperature.is_none()));
}

/// `tool-or-none` (on request): the run's first request is the constrained choice, with
/// the run's prompt alone; a clean `none` leaves the run without tools (and without the
/// tools context), a tool's name or anything else offers them as usual, and a choice the
/// server fails offers them too.
#[test]
fn tool_or_none_takes_the_tools_away_only_on_a_clean_none() {
    let cases: [(&str, Vec<ProviderEvent>, usize); 4] = [
        ("none", text(r#"{"tool": "none"}"#), 0),
        ("a tool", text(r#"{"tool": "list_dir"}"#), 1),
        ("not json", text("none"), 1),
        (
            "a failure",
            vec![ev::error(ollm_types::ProviderErrorKind::Other, "boom")],
            1,
        ),
    ];
    for (case, choice, tools) in cases {
        let provider = MockProvider::builder()
            .turn(choice)
            .turn(text("42"))
            .build();
        let tool = RecordingTool::new("list_dir");
        let c = crate::support::client_with(provider.clone(), registry([tool]), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.tools_context = Some("[Working folder: /w]".into());
        });
        let events = block_on(chat(&c, "what's 6 times 7?"));
        check_events(&events);
        assert_eq!(finish_reason(&events), FinishReason::Stop, "{case}");
        let coached = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    ChatEvent::Coached {
                        rule: Rule::ToolOrNone,
                        ..
                    }
                )
            })
            .count();
        assert_eq!(coached, 1, "{case}");
        let requests = provider.requests();
        assert_eq!(requests.len(), 2, "{case}");
        let route = &requests[0];
        assert!(route.response_format.is_some(), "{case}");
        assert!(route.tools.is_empty(), "{case}");
        assert_eq!(route.messages.len(), 1, "{case}");
        assert_eq!(route.messages[0].text(), "what's 6 times 7?", "{case}");
        let answer = &requests[1];
        assert_eq!(answer.tools.len(), tools, "{case}");
        assert!(answer.response_format.is_none(), "{case}");
        let with_context = answer.messages[0].text().starts_with("[Working folder");
        assert_eq!(with_context, tools == 1, "{case}");
    }
}

/// `choice-both-orders`: a choice that named a tool is asked once more with the tools in
/// reverse order; a `none` there leaves the run without tools, and says so. A first
/// `none`, or the rule off, asks once.
#[test]
fn a_tool_chosen_in_one_order_only_is_no_choice_of_a_tool() {
    // (case, the rule on, the second reply, choices asked, tools offered after)
    let cases = [
        ("second none", true, Some(r#"{"tool": "none"}"#), 2, 0),
        (
            "second a tool",
            true,
            Some(r#"{"tool": "read_file"}"#),
            2,
            2,
        ),
        ("second unreadable", true, Some("none"), 2, 2),
        ("rule off", false, None, 1, 2),
    ];
    for (case, on, second, asked, offered) in cases {
        let mut provider = MockProvider::builder().turn(text(r#"{"tool": "list_dir"}"#));
        if let Some(second) = second {
            provider = provider.turn(text(second));
        }
        let provider = provider.turn(text("42")).build();
        let tools = registry([
            RecordingTool::new("list_dir"),
            RecordingTool::new("read_file"),
        ]);
        let c = crate::support::client_with(provider.clone(), tools, |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            if on {
                cfg.coach.turn_on(Rule::ChoiceBothOrders);
            }
        });
        let events = block_on(chat(&c, "what's 6 times 7?"));
        check_events(&events);
        assert_eq!(finish_reason(&events), FinishReason::Stop, "{case}");
        let requests = provider.requests();
        assert_eq!(requests.len(), asked + 1, "{case}");
        let listed = |i: usize| {
            let Some(ollm_types::ResponseFormat::JsonSchema { schema, .. }) =
                &requests[i].response_format
            else {
                panic!("{case}: request {i} is no choice");
            };
            schema["properties"]["tool"]["enum"].clone()
        };
        assert_eq!(
            listed(0),
            json!(["list_dir", "read_file", "none"]),
            "{case}"
        );
        if asked == 2 {
            assert_eq!(
                listed(1),
                json!(["read_file", "list_dir", "none"]),
                "{case}"
            );
        }
        assert_eq!(requests[asked].tools.len(), offered, "{case}");
        let said = events.iter().any(|e| {
            matches!(
                e,
                ChatEvent::Coached {
                    rule: Rule::ChoiceBothOrders,
                    ..
                }
            )
        });
        assert_eq!(said, offered == 0, "{case}");
    }
    // A first `none` is not asked again.
    let provider = MockProvider::builder()
        .turn(text(r#"{"tool": "none"}"#))
        .turn(text("42"))
        .build();
    let c = crate::support::client_with(
        provider.clone(),
        registry([RecordingTool::new("list_dir")]),
        |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.turn_on(Rule::ChoiceBothOrders);
        },
    );
    let _ = block_on(chat(&c, "thanks!"));
    assert_eq!(provider.requests().len(), 2);
}

/// `changes-both-orders` (on by default): a choice of a tool that changes things is asked
/// again in reverse order, and a `none` there offers no tools, so nothing is written or
/// run; a choice of a read tool is not asked again, nor is any with the rule off.
#[test]
fn a_change_chosen_in_one_order_only_is_no_choice_of_a_tool() {
    // (case, first choice, the rule on, the second reply, choices asked, tools offered)
    let cases = [
        (
            "write, second none",
            "write_file",
            true,
            Some(r#"{"tool": "none"}"#),
            2,
            0,
        ),
        (
            "write, second write",
            "write_file",
            true,
            Some(r#"{"tool": "write_file"}"#),
            2,
            2,
        ),
        ("read", "read_file", true, None, 1, 2),
        ("rule off", "write_file", false, None, 1, 2),
    ];
    for (case, first, on, second, asked, offered) in cases {
        let choice = format!(r#"{{"tool": "{first}"}}"#);
        let mut provider = MockProvider::builder().turn(text(&choice));
        if let Some(second) = second {
            provider = provider.turn(text(second));
        }
        let provider = provider.turn(text("Paris")).build();
        let write = RecordingTool::new("write_file");
        let tools = registry([RecordingTool::new("read_file"), write.clone()]);
        let c = crate::support::client_with(provider.clone(), tools, |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.read_only = ["read_file".to_owned()].into();
            if !on {
                cfg.coach.turn_off(Rule::ChangesBothOrders);
            }
        });
        let events = block_on(chat(&c, "capital of France?"));
        check_events(&events);
        let requests = provider.requests();
        assert_eq!(requests.len(), asked + 1, "{case}");
        assert_eq!(requests[asked].tools.len(), offered, "{case}");
        assert_eq!(write.call_count(), 0, "{case}");
        let said = events.iter().any(|e| {
            matches!(
                e,
                ChatEvent::Coached {
                    rule: Rule::ChangesBothOrders,
                    ..
                }
            )
        });
        assert_eq!(said, offered == 0, "{case}");
    }
}

/// `general-check` (on request): a read chosen for a message that names none of the
/// caller's files is checked by asking what the message needs, and a clean `general`
/// offers no tools; a message that names a file, a change chosen, or the rule off asks
/// nothing more.
#[test]
fn a_read_chosen_for_a_general_message_is_checked_and_general_offers_no_tools() {
    // (case, prompt, first choice, the rule on, the check's reply, requests before the
    // answer, tools offered)
    let cases = [
        (
            "general",
            "toml files: what for?",
            "read_file",
            true,
            Some(r#"{"need": "general"}"#),
            2,
            2,
        ),
        (
            "files",
            "plumber phone?",
            "read_file",
            true,
            Some(r#"{"need": "files"}"#),
            2,
            2,
        ),
        (
            "not clean",
            "plumber phone?",
            "read_file",
            true,
            Some("general"),
            2,
            2,
        ),
        (
            "names a file",
            "what's in config.toml?",
            "read_file",
            true,
            None,
            1,
            2,
        ),
        (
            "a change",
            "save it",
            "write_file",
            true,
            Some(r#"{"tool": "write_file"}"#),
            2,
            2,
        ),
        (
            "rule off",
            "toml files: what for?",
            "read_file",
            false,
            None,
            1,
            2,
        ),
    ];
    for (case, prompt, first, on, second, asked, offered) in cases {
        let choice = format!(r#"{{"tool": "{first}"}}"#);
        let mut provider = MockProvider::builder().turn(text(&choice));
        if let Some(second) = second {
            provider = provider.turn(text(second));
        }
        let provider = provider.turn(text("an answer")).build();
        let read = RecordingTool::new("read_file");
        let tools = registry([read.clone(), RecordingTool::new("write_file")]);
        let c = crate::support::client_with(provider.clone(), tools, |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.read_only = ["read_file".to_owned()].into();
            cfg.coach.paths = [("read_file".to_owned(), vec!["config.toml".to_owned()])].into();
            if on {
                cfg.coach.turn_on(Rule::GeneralCheck);
            }
        });
        let events = block_on(chat(&c, prompt));
        check_events(&events);
        let requests = provider.requests();
        assert_eq!(requests.len(), asked + 1, "{case}");
        let general = case == "general";
        assert_eq!(
            requests[asked].tools.len(),
            if general { 0 } else { offered },
            "{case}"
        );
        let checked = requests[..asked].iter().any(|r| {
            matches!(&r.response_format,
                Some(ollm_types::ResponseFormat::JsonSchema { schema, .. })
                    if schema["properties"]["need"].is_object())
        });
        assert_eq!(checked, on && asked == 2 && first == "read_file", "{case}");
        let said = events.iter().any(|e| {
            matches!(
                e,
                ChatEvent::Coached {
                    rule: Rule::GeneralCheck,
                    ..
                }
            )
        });
        assert_eq!(said, general, "{case}");
        assert_eq!(read.call_count(), 0, "{case}");
    }
}

/// `tool-or-none` is off unless turned on, and never runs when the call is required.
#[test]
fn tool_or_none_is_asked_only_when_on_and_the_call_is_optional() {
    for (on, required, asked) in [(false, false, 0), (true, true, 0), (true, false, 1)] {
        let provider = MockProvider::builder()
            .turn(text(r#"{"tool": "list_dir"}"#))
            .turn(text("done"))
            .build();
        let tool = RecordingTool::new("list_dir");
        let c = crate::support::client_with(provider.clone(), registry([tool]), |cfg| {
            if on {
                cfg.coach.turn_on(Rule::ToolOrNone);
            }
            if required {
                cfg.tool_choice = ollm_types::ToolChoice::Required;
            }
        });
        let _ = block_on(chat(&c, "list it"));
        let choices = provider
            .requests()
            .iter()
            .filter(|r| r.response_format.is_some())
            .count();
        assert_eq!(choices, asked, "on {on}, required {required}");
    }
}

/// `routed-call`: the tool the model chose is the next reply's call, asked for alone under
/// the constrained strategy and recorded as a native call; its result in hand, the model
/// answers with no tools.
#[test]
fn a_chosen_tool_is_called_under_its_schema_then_the_model_answers() {
    let tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
    let provider = MockProvider::builder()
        .turn(text(r#"{"tool": "list_dir"}"#))
        .turn(text(r#"{"tool": "list_dir", "arguments": {"path": "."}}"#))
        .turn(text("It holds a.txt."))
        .build();
    let other = RecordingTool::new("write_file");
    let c = crate::support::client_with(provider.clone(), registry([tool.clone(), other]), |cfg| {
        cfg.coach.turn_on(Rule::ToolOrNone);
        cfg.coach.turn_on(Rule::RoutedCall);
        cfg.coach.read_only = ["list_dir".to_owned()].into();
    });
    let events = block_on(chat(&c, "what's in here?"));
    check_events(&events);
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    assert_eq!(tool.call_count(), 1);
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    let call = &requests[1];
    let Some(ollm_types::ResponseFormat::JsonSchema { schema, .. }) = &call.response_format else {
        panic!("the call is not constrained: {:?}", call.response_format);
    };
    let alternatives = schema["oneOf"].as_array().expect("oneOf");
    assert_eq!(
        alternatives.len(),
        1,
        "only the chosen tool, no answer: {schema}"
    );
    assert_eq!(alternatives[0]["properties"]["tool"]["const"], "list_dir");
    assert!(call.tools.is_empty());
    let answer = &requests[2];
    assert!(answer.tools.is_empty() && answer.response_format.is_none());
    let roles: Vec<Role> = answer.messages.iter().map(|m| m.role()).collect();
    assert_eq!(roles, [Role::User, Role::Assistant, Role::Tool]);
    let history = c.history();
    assert_eq!(history.messages()[1].tool_calls().count(), 1);
    assert_eq!(history.messages().last().unwrap().text(), "It holds a.txt.");
}

/// `known-paths`: the routed call's path argument is held to the caller's paths (the
/// 0.5B asked for `/path/to/service` and `launch_date.txt` where `config.toml` and
/// `launch.txt` existed); off, or with no paths listed, the tool's own schema stands.
#[test]
fn a_routed_calls_path_is_one_of_the_callers_paths() {
    let parameters = json!({"type": "object", "required": ["path"],
        "properties": {"path": {"type": "string", "description": "relative path"}}});
    let run = |known_paths: bool, paths: &[&str]| {
        let tool = RecordingTool::new("read_file")
            .schema(parameters.clone())
            .returns(json!("port = 7341"));
        let provider = MockProvider::builder()
            .turn(text(r#"{"tool": "read_file"}"#))
            .turn(text(
                r#"{"tool": "read_file", "arguments": {"path": "config.toml"}}"#,
            ))
            .turn(text("7341"))
            .build();
        let c = crate::support::client_with(provider.clone(), registry([tool.clone()]), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.turn_on(Rule::RoutedCall);
            cfg.coach.read_only = ["read_file".to_owned()].into();
            cfg.coach.path_argument = Some("path".into());
            let paths = paths.iter().map(|p| (*p).to_owned()).collect();
            cfg.coach.paths = [("read_file".to_owned(), paths)].into();
            if known_paths {
                cfg.coach.turn_on(Rule::KnownPaths);
            }
        });
        let events = block_on(chat(&c, "which port does config.toml set?"));
        check_events(&events);
        assert_eq!(tool.call_count(), 1);
        let requests = provider.requests();
        let Some(ollm_types::ResponseFormat::JsonSchema { schema, .. }) =
            &requests[1].response_format
        else {
            panic!("the call is not constrained");
        };
        schema["oneOf"][0]["properties"]["arguments"]["properties"]["path"].clone()
    };
    let known = run(true, &[".", "config.toml", "src"]);
    assert_eq!(known["enum"], json!([".", "config.toml", "src"]), "{known}");
    assert_eq!(known["description"], "relative path");
    for (on, paths) in [(false, &[".", "config.toml"][..]), (true, &[][..])] {
        let own = run(on, paths);
        assert_eq!(own, parameters["properties"]["path"], "on {on}, {paths:?}");
    }
}

/// `routed-call`, when the reply is not the call (a server that does not enforce the
/// schema): nothing of it is recorded and the run's own strategy plays on, with every
/// tool and no more choices.
#[test]
fn a_routed_reply_that_is_not_the_call_leaves_the_run_to_its_own_strategy() {
    let provider = MockProvider::builder()
        .turn(text(r#"{"tool": "list_dir"}"#))
        .turn(text("Sure! Let me look."))
        .turn(text("done"))
        .build();
    let tools = [
        RecordingTool::new("list_dir"),
        RecordingTool::new("read_file"),
    ];
    let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
        cfg.coach.turn_on(Rule::ToolOrNone);
        cfg.coach.turn_on(Rule::RoutedCall);
        cfg.coach.read_only = ["list_dir".to_owned(), "read_file".to_owned()].into();
    });
    let events = block_on(chat(&c, "what's in here?"));
    check_events(&events);
    assert_eq!(finish_reason(&events), FinishReason::Stop);
    let requests = provider.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2].tools.len(), 2);
    assert!(requests[2].response_format.is_none());
    let texts: Vec<String> = c.history().messages().iter().map(|m| m.text()).collect();
    assert!(
        !texts.iter().any(|t| t.contains("Let me look")),
        "{texts:?}"
    );
}

/// `routed-call` never obliges a call to a tool the caller did not say only reads: the
/// 0.5B chose `write_file` for "backup.py keep days?" and, obliged, overwrote the file.
#[test]
fn a_chosen_tool_that_may_change_things_is_never_obliged() {
    let provider = MockProvider::builder()
        .turn(text(r#"{"tool": "write_file"}"#))
        .turn(text("30 days."))
        .build();
    let tools = [
        RecordingTool::new("write_file"),
        RecordingTool::new("list_dir"),
    ];
    let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
        cfg.coach.turn_on(Rule::ToolOrNone);
        cfg.coach.turn_on(Rule::RoutedCall);
        cfg.coach.turn_off(Rule::ChangesBothOrders);
        cfg.coach.read_only = ["list_dir".to_owned()].into();
    });
    let events = block_on(chat(&c, "backup.py keep days?"));
    check_events(&events);
    let requests = provider.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].tools.len(), 2);
    assert!(requests[1].response_format.is_none());
}

/// `routed-call`: a result that is an error leaves the run to its own strategy, with
/// every tool, to recover; one that is not is answered with no tools.
#[test]
fn after_the_chosen_call_the_model_answers_unless_its_result_was_an_error() {
    for (result_is_error, requests, last_tools) in [(false, 3, 0), (true, 3, 2)] {
        let mut tool = RecordingTool::new("list_dir").returns(json!("a.txt"));
        if result_is_error {
            tool = RecordingTool::new("list_dir").fails("no such folder");
        }
        let provider = MockProvider::builder()
            .turn(text(r#"{"tool": "list_dir"}"#))
            .turn(text(r#"{"tool": "list_dir", "arguments": {"path": "x"}}"#))
            .turn(text("It holds a.txt."))
            .build();
        let tools = [tool, RecordingTool::new("read_file")];
        let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.turn_on(Rule::RoutedCall);
            cfg.coach.read_only = ["list_dir".to_owned(), "read_file".to_owned()].into();
        });
        let events = block_on(chat(&c, "what's in x?"));
        check_events(&events);
        assert_eq!(finish_reason(&events), FinishReason::Stop);
        let sent = provider.requests();
        assert_eq!(sent.len(), requests, "error {result_is_error}");
        let last = sent.last().unwrap();
        assert_eq!(last.tools.len(), last_tools, "error {result_is_error}");
        assert!(last.response_format.is_none());
    }
}

/// `changes-on-request` (issue 35: "never a write or a command the user did not ask
/// for"): once `tool-or-none` has chosen, a tool that changes things is offered and run
/// only when it was the one chosen. The model calls `write_file` anyway, natively or as
/// text: the call is answered, never run. Rows: the choice, the rule on, how the model
/// calls, the tools the next request offers, whether `write_file` ran.
#[test]
fn a_tool_that_changes_things_runs_only_when_the_choice_named_it() {
    let native = || {
        vec![
            ev::call("w1", "write_file", json!({"path": "a.txt"})),
            ev::finish(),
        ]
    };
    let fenced =
        || text("```json\n{\"name\": \"write_file\", \"arguments\": {\"path\": \"a.txt\"}}\n```");
    type Turn = fn() -> Vec<ProviderEvent>;
    const WRITE: &[&str] = &["read_file", "list_dir", "write_file"];
    const COMMAND: &[&str] = &["read_file", "list_dir", "run_command"];
    const ALL: &[&str] = &["read_file", "list_dir", "write_file", "run_command"];
    let rows: [(&str, bool, Turn, &[&str], bool); 8] = [
        ("none", true, fenced, &[], false),
        ("none", true, native, &[], false),
        ("run_command", true, native, COMMAND, false),
        ("run_command", true, fenced, COMMAND, false),
        ("write_file", true, native, WRITE, true),
        ("read_file", true, native, ALL, true),
        ("bogus", true, native, ALL, true),
        ("run_command", false, native, ALL, true),
    ];
    for (chosen, on, turn, offered, ran) in rows {
        let row = format!("chose {chosen}, rule on {on}");
        let write = RecordingTool::new("write_file");
        let tools = [
            RecordingTool::new("read_file"),
            RecordingTool::new("list_dir"),
            write.clone(),
            RecordingTool::new("run_command"),
        ];
        let provider = MockProvider::builder()
            .turn(text(&format!(r#"{{"tool": "{chosen}"}}"#)))
            .turn(turn())
            .turn(text("Done."))
            .build();
        let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.read_only = ["read_file".to_owned(), "list_dir".to_owned()].into();
            // The choice stands as made (`changes-both-orders` has its own test).
            cfg.coach.off.insert(Rule::ChangesBothOrders);
            if !on {
                cfg.coach.off.insert(Rule::ChangesOnRequest);
            }
        });
        let events = block_on(chat(&c, "what port does config.toml set?"));
        check_events(&events);
        let requests = provider.requests();
        let names: Vec<&str> = requests[1].tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, offered, "{row}");
        assert_eq!(write.call_count() == 1, ran, "{row}");
        if !ran {
            let answer = c.history().messages()[2].text();
            assert!(answer.contains("not offered"), "{row}: {answer}");
        }
    }
}

/// A provider whose replies are the `tool-or-none` `choice`, then `call`, then "Done.".
fn chosen_then_call(choice: &str, call: ProviderEvent) -> std::sync::Arc<MockProvider> {
    MockProvider::builder()
        .turn(text(choice))
        .turn(vec![call, ev::finish()])
        .turn(text("Done."))
        .build()
}

/// `named-command` over a whole run, for "python venv how?", which names none of
/// `run_command`'s programs: the choice lists `run_command`, the run's replies are never
/// offered it, a call to it is told and never runs, and a choice of it reads as `none`.
/// Rows: the choice, the tools the second request offers, the coached line's detail.
#[test]
fn a_command_the_message_names_no_program_of_never_runs() {
    const READS: &[&str] = &["read_file", "list_dir"];
    let rows: [(&str, &[&str], &str); 2] = [
        (
            "read_file",
            READS,
            "the message names no program run_command runs: not run",
        ),
        (
            "run_command",
            &[],
            "the model chose run_command, the message names none",
        ),
    ];
    for (chosen, offered, told) in rows {
        let command = RecordingTool::new("run_command");
        let tools = [
            RecordingTool::new("read_file"),
            RecordingTool::new("list_dir"),
            command.clone(),
        ];
        let choice = format!(r#"{{"tool": "{chosen}"}}"#);
        let call = ev::call("r1", "run_command", json!({"program": "python"}));
        let provider = chosen_then_call(&choice, call);
        let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.read_only = ["read_file".to_owned(), "list_dir".to_owned()].into();
            let programs = vec!["ls".to_owned(), "wc".to_owned()];
            cfg.coach.programs.insert("run_command".into(), programs);
        });
        let events = block_on(chat(&c, "python venv how?"));
        check_events(&events);
        let requests = provider.requests();
        let choice = format!("{:?}", requests[0]);
        assert!(
            choice.contains("run_command"),
            "{chosen}: the choice lists it"
        );
        let names: Vec<&str> = requests[1].tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, offered, "{chosen}");
        assert_eq!(command.call_count(), 0, "{chosen}");
        let coached = events.iter().any(|e| {
            matches!(e, ChatEvent::Coached { rule: Rule::NamedCommand, detail, .. }
                if detail.starts_with(told))
        });
        assert!(coached, "{chosen}: {events:#?}");
    }
}

/// `ChatOptions::route` (a proxy's way to keep `changes-on-request` for the whole prompt,
/// as one run keeps it): a run over a conversation that already made calls since its
/// prompt asks nothing, so without the earlier choice every tool is offered and runs; with
/// it, the tools that choice withheld stay withheld. Rows: the choice given, the tools the
/// request offers, whether `run_command` ran.
#[test]
fn a_choice_given_for_the_prompt_holds_over_its_later_requests() {
    use ollm_core::ChatOptions;
    use ollm_core::coach::Route;
    use ollm_types::{Message, ToolCall};
    const ALL: &[&str] = &["read_file", "write_file", "run_command"];
    let rows: [(Option<Route>, &[&str], bool); 3] = [
        (None, ALL, true),
        (
            Some(Route::Tools(Some("write_file".into()))),
            &["read_file", "write_file"],
            false,
        ),
        (Some(Route::Tools(Some("read_file".into()))), ALL, true),
    ];
    for (given, offered, ran) in rows {
        let row = format!("given {given:?}");
        let command = RecordingTool::new("run_command");
        let tools = [
            RecordingTool::new("read_file"),
            RecordingTool::new("write_file"),
            command.clone(),
        ];
        let provider = MockProvider::builder()
            .turn(vec![
                ev::call("r1", "run_command", json!({"program": "ls"})),
                ev::finish(),
            ])
            .turn(text("Done."))
            .build();
        let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.read_only = ["read_file".to_owned()].into();
        });
        let write = ToolCall::new("w1", "write_file", json!({"path": "shopping.txt"})).unwrap();
        c.extend_history([
            Message::user("make me a shopping.txt"),
            Message::assistant_with_calls("", vec![write]),
            Message::tool_result("w1", "write_file", "written"),
        ]);
        let options = ChatOptions {
            route: given.clone(),
            ..ChatOptions::default()
        };
        let events = block_on(crate::support::collect(c.resume(options)));
        check_events(&events);
        let requests = provider.requests();
        let names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, offered, "{row}: no choice is asked again");
        assert_eq!(command.call_count() == 1, ran, "{row}");
        assert_eq!(c.route(), given, "{row}");
    }
}

/// The client keeps the choice its run made, for a proxy to pass to the prompt's later
/// requests.
#[test]
fn the_client_keeps_the_choice_its_run_made() {
    let provider = MockProvider::builder()
        .turn(text(r#"{"tool": "none"}"#))
        .turn(text("Hello!"))
        .build();
    let c = crate::support::client_with(
        provider,
        registry([RecordingTool::new("read_file")]),
        |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
        },
    );
    assert_eq!(c.route(), None);
    let events = block_on(chat(&c, "hi!"));
    check_events(&events);
    assert_eq!(c.route(), Some(ollm_core::coach::Route::None));
}

/// `named-file`: a `none` chosen for a message that names one of the caller's files
/// offers the tools that only read after all, never those that change things; a message
/// that names no file, or the rule off, keeps the `none`. Rows: the prompt, rule on,
/// the tools the reply's request offers.
#[test]
fn a_none_for_a_message_that_names_a_file_offers_the_reads() {
    const READS: &[&str] = &["read_file", "list_dir"];
    let rows: [(&str, bool, &[&str]); 4] = [
        ("backup.py keep days?", true, READS),
        ("how long does ./backup.py keep backups?", true, READS),
        ("what's a python file?", true, &[]),
        ("backup.py keep days?", false, &[]),
    ];
    for (prompt, on, offered) in rows {
        let write = RecordingTool::new("write_file");
        let tools = [
            RecordingTool::new("read_file"),
            RecordingTool::new("list_dir"),
            write.clone(),
        ];
        let call = ev::call("w1", "write_file", json!({"path": "backup.py"}));
        let provider = chosen_then_call(r#"{"tool": "none"}"#, call);
        let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.read_only = ["read_file".to_owned(), "list_dir".to_owned()].into();
            cfg.coach
                .paths
                .insert("read_file".into(), vec!["backup.py".into()]);
            if !on {
                cfg.coach.turn_off(Rule::NamedFile);
            }
        });
        let events = block_on(chat(&c, prompt));
        check_events(&events);
        let requests = provider.requests();
        let names: Vec<&str> = requests[1].tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, offered, "{prompt}, on {on}");
        assert_eq!(write.call_count(), 0, "{prompt}, on {on}");
        let told = events.iter().any(|e| {
            matches!(e, ChatEvent::Coached { rule: Rule::NamedFile, detail, .. }
                if detail.contains("backup.py"))
        });
        assert_eq!(told, !offered.is_empty(), "{prompt}, on {on}");
    }
}

/// `read-named`: after a choice that offers tools, a file of the caller's that the
/// message names is read before the first reply, by the one offered tool that only
/// reads and takes the path alone, and the reply's request carries the call and its
/// result as the run's first turn. Rows: the prompt, the choice's reply, rule on, the
/// read expected.
#[test]
fn a_file_the_message_names_is_read_before_the_first_reply() {
    const SEARCH: &str = r#"{"tool": "search_text"}"#;
    const WRITE: &str = r#"{"tool": "write_file"}"#;
    const READ: &str = r#"{"tool": "read_file"}"#;
    const NONE: &str = r#"{"tool": "none"}"#;
    let rows: [(&str, &str, bool, bool); 6] = [
        ("backup.py keep days?", SEARCH, true, true),
        (
            "save the port from ./config.toml into port.txt",
            WRITE,
            true,
            true,
        ),
        ("no clean choice: backup.py?", "maybe", true, true),
        // No file named, a choice of none, the rule off: nothing is read.
        ("what's a python file?", READ, true, false),
        ("what does backup.py mean as a name?", NONE, true, false),
        ("backup.py keep days?", SEARCH, false, false),
    ];
    for (prompt, choice, on, read) in rows {
        let path_only = json!({"type": "object", "properties": {"path": {"type": "string"}},
            "required": ["path"]});
        let search = json!({"type": "object", "properties": {"pattern": {"type": "string"},
            "path": {"type": "string"}}, "required": ["pattern"]});
        let reader = RecordingTool::new("read_file")
            .schema(path_only.clone())
            .returns(json!("backup.py:\nKEEP_DAYS = 30\n"));
        let tools = [
            reader.clone(),
            RecordingTool::new("search_text").schema(search),
            RecordingTool::new("write_file").schema(path_only),
        ];
        let provider = MockProvider::builder()
            .turn(text(choice))
            .turn(text("30 days."))
            .build();
        let c = crate::support::client_with(provider.clone(), registry(tools), |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.turn_off(Rule::ChangesBothOrders);
            // A `none` stays `none` here (`named-file`'s own test is above).
            cfg.coach.turn_off(Rule::NamedFile);
            cfg.coach.path_argument = Some("path".into());
            cfg.coach.read_only = ["read_file".to_owned(), "search_text".to_owned()].into();
            let files = vec!["backup.py".to_owned(), "config.toml".to_owned()];
            cfg.coach.paths.insert("read_file".into(), files.clone());
            cfg.coach.paths.insert("search_text".into(), files);
            if on {
                cfg.coach.turn_on(Rule::ReadNamed);
            }
        });
        let events = block_on(chat(&c, prompt));
        check_events(&events);
        let case = format!("{prompt}, on {on}");
        let want: Vec<serde_json::Map<String, serde_json::Value>> = if !read {
            Vec::new()
        } else if prompt.contains("config.toml") {
            vec![serde_json::Map::from_iter([(
                "path".into(),
                json!("config.toml"),
            )])]
        } else {
            vec![serde_json::Map::from_iter([(
                "path".into(),
                json!("backup.py"),
            )])]
        };
        let args: Vec<_> = reader.calls().into_iter().map(|c| c.arguments).collect();
        assert_eq!(args, want, "{case}");
        let told = events.iter().any(|e| {
            matches!(
                e,
                ChatEvent::Coached {
                    rule: Rule::ReadNamed,
                    call_id: Some(_),
                    ..
                }
            )
        });
        assert_eq!(told, read, "{case}");
        let requests = provider.requests();
        assert_eq!(requests.len(), 2, "{case}");
        let roles: Vec<Role> = requests[1].messages.iter().map(|m| m.role()).collect();
        let expected = if read {
            vec![Role::User, Role::Assistant, Role::Tool]
        } else {
            vec![Role::User]
        };
        assert_eq!(roles, expected, "{case}");
        assert_eq!(finish_reason(&events), FinishReason::Stop, "{case}");
    }
}

/// `dotted-path`: a call whose path is one the message names without its leading dot
/// runs with the dot (the 1.5B wrote `gitignore` for "add a .gitignore ..."), says so in
/// a `Coached` event with the call's id, and the history carries the call as it ran.
/// Off, the call runs as the model wrote it.
#[test]
fn a_path_the_message_names_with_a_dot_keeps_it() {
    for on in [true, false] {
        let path = json!({"type": "object", "properties": {"path": {"type": "string"},
            "content": {"type": "string"}}, "required": ["path", "content"]});
        let writer = RecordingTool::new("write_file").schema(path);
        let written = json!({"path": "gitignore", "content": "__pycache__/"});
        let provider = MockProvider::builder()
            .turn(vec![ev::call("c1", "write_file", written), ev::finish()])
            .then_forever(text("Done."))
            .build();
        let c = crate::support::client_with(provider.clone(), registry([writer.clone()]), |cfg| {
            cfg.coach.path_argument = Some("path".into());
            if !on {
                cfg.coach.turn_off(Rule::DottedPath);
            }
        });
        let events = block_on(chat(&c, "add a .gitignore that ignores __pycache__"));
        check_events(&events);
        let want = if on { ".gitignore" } else { "gitignore" };
        let ran = &writer.calls()[0].arguments;
        assert_eq!(ran["path"], json!(want), "on {on}");
        let told = events.iter().any(|e| {
            matches!(e, ChatEvent::Coached { rule: Rule::DottedPath, call_id: Some(id), .. }
                if id == "c1")
        });
        assert_eq!(told, on);
        let requests = provider.requests();
        let recorded = requests[1].messages[1].tool_calls().next().unwrap();
        assert_eq!(recorded.arguments["path"], json!(want), "on {on}");
    }
}

/// `change-after-idle`: the 1.5B read config.toml for "save the port from config.toml
/// into port.txt", repeated the read, and answered the port under the answer nudge with
/// no tools to write it. After the idle turn the model is asked what the message needs;
/// on `change` the write is obliged, its path held to the new file the message names,
/// then the answer nudge; on `files` the answer nudge as before, and nothing is written.
/// The nudges stay out of the history.
#[test]
fn a_change_the_message_asks_for_is_made_after_an_idle_turn() {
    for need in ["write", "answer"] {
        let path = json!({"type": "object", "properties": {"path": {"type": "string"},
            "content": {"type": "string"}}, "required": ["path", "content"]});
        let writer = RecordingTool::new("write_file").schema(path.clone());
        let reader = RecordingTool::new("read_file")
            .schema(path)
            .returns(json!("port = 7341"));
        let read = json!({"path": "config.toml"});
        let mut script = MockProvider::builder()
            .turn(text(r#"{"tool": "read_file"}"#))
            .turn(vec![
                ev::call("c1", "read_file", read.clone()),
                ev::finish(),
            ])
            .turn(vec![ev::call("c2", "read_file", read), ev::finish()])
            .turn(text(&format!(r#"{{"asks": "{need}"}}"#)));
        if need == "write" {
            let call =
                r#"{"tool": "write_file", "arguments": {"path": "port.txt", "content": "7341"}}"#;
            script = script.turn(text(call));
        }
        let provider = script.turn(text("Saved 7341.")).build();
        let tools = registry([reader.clone(), writer.clone()]);
        let c = crate::support::client_with(provider.clone(), tools, |cfg| {
            cfg.coach.turn_on(Rule::ToolOrNone);
            cfg.coach.turn_on(Rule::ChangeAfterIdle);
            cfg.coach.read_only = ["read_file".to_owned()].into();
            cfg.coach.path_argument = Some("path".into());
            cfg.coach.paths = [("read_file".to_owned(), vec!["config.toml".to_owned()])].into();
        });
        let events = block_on(chat(&c, "save the port from config.toml into port.txt"));
        check_events(&events);
        assert_eq!(finish_reason(&events), FinishReason::Stop, "{need}");
        let written: Vec<_> = writer.calls().into_iter().map(|c| c.arguments).collect();
        let requests = provider.requests();
        let last = requests.last().unwrap();
        assert!(
            last.tools.is_empty() && last.response_format.is_none(),
            "{need}"
        );
        let said = last.messages.last().unwrap().text();
        if need == "write" {
            assert_eq!(
                written,
                [json!({"path": "port.txt", "content": "7341"})
                    .as_object()
                    .unwrap()
                    .clone()]
            );
            let obliged = &requests[4];
            let Some(ollm_types::ResponseFormat::JsonSchema { schema, .. }) =
                &obliged.response_format
            else {
                panic!(
                    "the write is not constrained: {:?}",
                    obliged.response_format
                );
            };
            let args = &schema["oneOf"][0]["properties"]["arguments"]["properties"];
            assert_eq!(args["path"]["enum"], json!(["port.txt"]), "{schema}");
            assert_eq!(last.messages.last().unwrap().role(), Role::User);
        } else {
            assert!(written.is_empty(), "{written:?}");
        }
        assert_eq!(said, Nudge::Answer.text(&CoachConfig::default()), "{need}");
        let history: Vec<String> = c.history().messages().iter().map(|m| m.text()).collect();
        for nudge in [Nudge::Answer, Nudge::Change] {
            let text = nudge.text(&CoachConfig::default());
            assert!(!history.contains(&text), "{need}: {history:?}");
        }
        assert_eq!(c.history().messages().last().unwrap().text(), "Saved 7341.");
    }
}

/// `overwrite-needs-name` over a whole run, for "add a .gitignore that ignores
/// __pycache__": a write to `README.md`, which exists and which the message does not
/// name, never runs and is told; the model's next call, to `.gitignore`, runs. Off, the
/// write to `README.md` runs (the safety case the rule is kept for).
#[test]
fn a_write_to_an_existing_file_the_message_does_not_name_never_runs() {
    for on in [true, false] {
        let write = RecordingTool::new("write_file");
        let tools = [RecordingTool::new("read_file"), write.clone()];
        let args = |path: &str| json!({"path": path, "content": "__pycache__/"});
        let provider = MockProvider::builder()
            .turn(vec![
                ev::call("w1", "write_file", args("README.md")),
                ev::finish(),
            ])
            .turn(vec![
                ev::call("w2", "write_file", args(".gitignore")),
                ev::finish(),
            ])
            .turn(text("Done."))
            .build();
        let c = crate::support::client_with(provider, registry(tools), |cfg| {
            cfg.coach.path_argument = Some("path".into());
            cfg.coach.read_only = ["read_file".to_owned()].into();
            let files = vec!["README.md".to_owned(), "backup.py".to_owned()];
            cfg.coach.paths.insert("read_file".into(), files);
            if !on {
                cfg.coach.turn_off(Rule::OverwriteNeedsName);
            }
        });
        let events = block_on(chat(&c, "add a .gitignore that ignores __pycache__"));
        check_events(&events);
        let written: Vec<serde_json::Value> = (write.calls().iter())
            .map(|call| call.arguments["path"].clone())
            .collect();
        let want = if on {
            vec![json!(".gitignore")]
        } else {
            vec![json!("README.md"), json!(".gitignore")]
        };
        assert_eq!(written, want, "on: {on}");
        let told = events.iter().any(|e| {
            matches!(e, ChatEvent::Coached { rule: Rule::OverwriteNeedsName, call_id: Some(id), .. }
                if id == "w1")
        });
        assert_eq!(told, on, "on: {on}: {events:#?}");
    }
}
