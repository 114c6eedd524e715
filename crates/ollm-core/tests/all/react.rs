//! The ReAct strategy in a run (properties 13, 15, 17 and 29); the parser's and the
//! display's own properties (13 to 17) sit beside the code in `strategy/react.rs`.

use ollm_core::strategy::ToolMode;
use ollm_core::{ChatEvent, ChatOptions};
use ollm_types::{Capability, FinishReason, ProviderEvent, Role, ToolSchema, WarningKind};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use test_utils::mock_provider::{MockProvider, ev};
use test_utils::recording_tool::{RecordingTool, registry};
use test_utils::split::split_text;

use crate::support::{
    block_on, check_events, check_history, client_with, config, count, finish_reason, text_of,
};

fn tool_name() -> impl Strategy<Value = String> {
    "[a-z][a-z_]{0,10}"
}

fn arb_args() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map(
        "[a-z]{1,6}",
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[ -~]{0,10}".prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
        ],
        0..4,
    )
    .prop_map(|m| m.into_iter().collect())
}

/// `text` cut at `cuts` (see [`split_text`]) into text deltas, like a server's.
fn split(text: &str, cuts: &[usize]) -> Vec<ProviderEvent> {
    split_text(text, cuts).into_iter().map(ev::text).collect()
}

fn react_client(
    provider: std::sync::Arc<MockProvider>,
    tools: ollm_core::ToolRegistry,
) -> ollm_core::ChatClient {
    client_with(provider, tools, |c| c.tool_mode = ToolMode::React)
}

proptest! {
    #![proptest_config(config())]

    // Property 13: ReAct formatting
    #[test]
    fn react_formatting(tools in prop::collection::vec((tool_name(), "[A-Za-z ]{0,20}"), 1..5)) {
        let schemas: Vec<ToolSchema> = tools
            .iter()
            .map(|(n, d)| ToolSchema::new(n, d, json!({"type": "object", "properties": {"q": {"type": "string"}}})))
            .collect();
        // The request carries it in the system prompt, with no native tools.
        let provider = MockProvider::builder().turn(vec![ev::text("Final Answer: x"), ev::finish()]).build();
        let mut reg = ollm_core::ToolRegistry::new();
        for s in &schemas {
            if !reg.contains(&s.name) {
                reg.register(RecordingTool::new(&s.name).description(&s.description).schema(s.parameters.clone()).arc()).unwrap();
            }
        }
        let c = react_client(provider.clone(), reg);
        block_on(crate::support::chat(&c, "hi"));
        let req = &provider.requests()[0];
        prop_assert!(req.tools.is_empty());
        prop_assert!(req.system.as_deref().unwrap().contains("Action Input:"));
    }

    // Property 15: validation
    #[test]
    fn react_validation(value in prop_oneof![
        any::<i64>().prop_map(Value::from),
        "[a-z]{0,5}".prop_map(Value::from),
        prop::collection::vec(any::<u8>().prop_map(Value::from), 0..3).prop_map(Value::from),
        Just(Value::Null),
        arb_args().prop_map(Value::Object),
    ]) {
        // An Action Input is checked against the tool's schema before it runs.
        let tool = RecordingTool::new("t").schema(json!({
            "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
            "additionalProperties": false
        }));
        let action = format!("Action: t\nAction Input: {value}");
        let provider = MockProvider::builder()
            .turn(vec![ev::text(action), ev::finish()])
            .turn(vec![ev::text("Final Answer: done"), ev::finish()])
            .build();
        let c = react_client(provider, registry([tool.clone()]));
        let events = block_on(crate::support::chat(&c, "go"));
        check_events(&events);
        let valid = value.as_object().is_some_and(|m| m.len() == 1 && m.get("n").is_some_and(Value::is_i64));
        prop_assert_eq!(tool.call_count(), usize::from(valid));
    }

    // Property 17: final answer
    #[test]
    fn react_final_answer(thought in "[a-z ]{1,20}", answer in "[a-zA-Z0-9 .,]{1,40}", cuts in prop::collection::vec(any::<usize>(), 0..6)) {
        let text = format!("Thought: {thought}\nFinal Answer: {answer}");
        let expected_answer = answer.trim().to_owned();
        let mut script = split(&text, &cuts);
        script.push(ev::finish());
        let tool = RecordingTool::new("t");
        let provider = MockProvider::builder().turn(script).build();
        let c = react_client(provider.clone(), registry([tool.clone()]));
        let events = block_on(crate::support::chat(&c, "q"));
        prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
        let shown = text_of(&events);
        prop_assert_eq!(shown.trim(), expected_answer.as_str());
        prop_assert_eq!(tool.call_count(), 0);
        prop_assert_eq!(provider.request_count(), 1);
        let thinking: String = events.iter().filter_map(|e| match e {
            ChatEvent::ThinkingDelta { text } => Some(text.as_str()),
            _ => None,
        }).collect();
        prop_assert_eq!(thinking.trim(), thought.trim());
    }

    // Property 29: ReAct JSON recovery
    #[test]
    fn react_json_recovery(broken in prop_oneof![
        Just("{\"n\": 1".to_owned()),
        Just("n = 1".to_owned()),
        Just("[1, 2]".to_owned()),
        Just("\"text\"".to_owned()),
        Just(String::new()),
    ], prose_json in arb_args()) {
        // Turn 1: an unusable Action Input draws a correction, and the loop continues.
        // Turn 2: JSON merely quoted in prose is not executed.
        // Turn 3: a proper action runs. Turn 4: the answer.
        let tool = RecordingTool::new("t").echoes();
        let prose = format!("I might call t with {} later, e.g. Action: t", Value::Object(prose_json));
        let provider = MockProvider::builder()
            .turn(vec![ev::text(format!("Thought: try\nAction: t\nAction Input: {broken}")), ev::finish()])
            .turn(vec![ev::text(format!("Thought: {prose}\nAction: t\nAction Input: {{\"ok\": true}}")), ev::finish()])
            .turn(vec![ev::text("Final Answer: done"), ev::finish()])
            .build();
        let c = react_client(provider.clone(), registry([tool.clone()]));
        let events = block_on(crate::support::chat(&c, "go"));
        check_events(&events);
        prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
        prop_assert_eq!(count(&events, |e| matches!(e, ChatEvent::Warning { warning } if warning.kind == WarningKind::MalformedOutput)), 1);
        let requests = provider.requests();
        prop_assert_eq!(requests.len(), 3);
        let correction = requests[1].messages.last().unwrap();
        prop_assert_eq!(correction.role(), Role::User);
        prop_assert!(correction.text().starts_with("Observation: "));
        prop_assert_eq!(tool.call_count(), 1);
        prop_assert_eq!(Value::Object(tool.calls()[0].arguments.clone()), json!({"ok": true}));
        let observation = requests[2].messages.last().unwrap();
        prop_assert_eq!(observation.text(), "Observation: {\"ok\":true}");
        check_history(&c.history());
    }
}

#[test]
fn auto_mode_falls_back_to_react_without_the_tools_capability() {
    let provider = MockProvider::builder()
        .capabilities(vec![Capability::Completion])
        .turn(vec![ev::text("Final Answer: hi"), ev::finish()])
        .build();
    let c = client_with(
        provider.clone(),
        registry([RecordingTool::new("t")]),
        |_| {},
    );
    let events = block_on(crate::support::chat(&c, "q"));
    assert_eq!(text_of(&events), "hi");
    let req = &provider.requests()[0];
    assert!(req.tools.is_empty());
    assert!(req.options.stop.iter().any(|s| s.contains("Observation:")));
}

#[test]
fn per_request_mode_overrides_the_config() {
    let provider = MockProvider::builder()
        .turn(vec![ev::text("Final Answer: hi"), ev::finish()])
        .build();
    let c = client_with(
        provider.clone(),
        registry([RecordingTool::new("t")]),
        |_| {},
    );
    let options = ChatOptions {
        tool_mode: Some(ToolMode::React),
        ..ChatOptions::default()
    };
    block_on(crate::support::collect(c.chat("q", options)));
    assert!(provider.requests()[0].tools.is_empty());
}
