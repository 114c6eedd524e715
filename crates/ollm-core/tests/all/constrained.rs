//! The schema-constrained strategy in a run (properties 32 to 35); the schema's and the
//! parser's own properties sit beside the code in `strategy/constrained.rs`.

use ollm_core::strategy::ToolMode;
use ollm_core::{ChatEvent, ToolRegistry};
use ollm_types::{FinishReason, ResponseFormat, Role, ToolSchema, WarningKind};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use test_utils::mock_provider::{MockProvider, ev};
use test_utils::recording_tool::{RecordingTool, registry};

use crate::support::{
    block_on, chat, check_events, check_history, client_with, config, count, finish_reason, text_of,
};

fn arb_args() -> impl Strategy<Value = Map<String, Value>> {
    prop::collection::btree_map("[a-z]{1,6}", any::<i32>().prop_map(Value::from), 0..4)
        .prop_map(|m| m.into_iter().collect())
}

fn names() -> impl Strategy<Value = Vec<String>> {
    prop::collection::btree_set("[a-z][a-z_]{0,8}", 1..5).prop_map(|s| s.into_iter().collect())
}

fn int_schema() -> Value {
    json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
}

proptest! {
    #![proptest_config(config())]

    // Property 32: constrained schema shape
    #[test]
    fn constrained_schema_shape(names in names(), args in arb_args(), answer in ".{0,20}") {
        let tools: Vec<ToolSchema> = names.iter().map(|n| ToolSchema::new(n, "d", json!({"type": "object"}))).collect();
        // The request carries it, and no native tools.
        let provider = MockProvider::builder().turn(vec![ev::text(json!({"final_answer": answer}).to_string()), ev::finish()]).build();
        let mut reg = ToolRegistry::new();
        for t in &tools {
            reg.register(RecordingTool::new(&t.name).arc()).unwrap();
        }
        let c = client_with(provider.clone(), reg, |cfg| cfg.tool_mode = ToolMode::Constrained);
        block_on(chat(&c, "q"));
        let req = &provider.requests()[0];
        prop_assert!(req.tools.is_empty());
        match &req.response_format {
            Some(ResponseFormat::JsonSchema { name, schema: sent }) => {
                prop_assert_eq!(name.as_str(), "tool_call_or_final_answer");
                // One alternative per tool, then the answer; each accepts its replies.
                let alts = sent["oneOf"].as_array().unwrap();
                prop_assert_eq!(alts.len(), tools.len() + 1);
                for (alt, tool) in alts.iter().zip(&tools) {
                    prop_assert_eq!(&alt["properties"]["tool"]["const"], &json!(tool.name));
                }
                let validator = jsonschema::validator_for(sent).unwrap();
                for n in &names {
                    let reply = json!({"tool": n, "arguments": Value::Object(args.clone())});
                    prop_assert!(validator.is_valid(&reply));
                }
                let good = json!({"final_answer": answer});
                prop_assert!(validator.is_valid(&good));
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }

    // Property 33: constrained reply parsing
    #[test]
    fn constrained_reply_parsing(answer in ".{0,30}") {
        let fin = json!({"final_answer": answer}).to_string();
        // In a run, the answer is shown as text (not the JSON) and ends the run.
        let provider = MockProvider::builder().turn(vec![ev::text(fin), ev::finish()]).build();
        let c = client_with(provider, registry([RecordingTool::new("t")]), |cfg| cfg.tool_mode = ToolMode::Constrained);
        let events = block_on(chat(&c, "q"));
        prop_assert_eq!(text_of(&events), answer.clone());
        prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
    }

    // Property 34: constrained validation
    #[test]
    fn constrained_validation(value in prop_oneof![any::<i64>().prop_map(Value::from), "[a-z]{0,4}".prop_map(Value::from)], malformed_first in any::<bool>()) {
        // A parsed call goes through the registry's validation like a native one; a reply
        // that does not parse draws a correction and the loop continues.
        let tool = RecordingTool::new("t").schema(int_schema()).echoes();
        let mut builder = MockProvider::builder();
        if malformed_first {
            builder = builder.turn(vec![ev::text("{\"tool\": 3}"), ev::finish()]);
        }
        let provider = builder
            .turn(vec![ev::text(json!({"tool": "t", "arguments": {"n": value}}).to_string()), ev::finish()])
            .turn(vec![ev::text(json!({"final_answer": "done"}).to_string()), ev::finish()])
            .build();
        let c = client_with(provider.clone(), registry([tool.clone()]), |cfg| cfg.tool_mode = ToolMode::Constrained);
        let events = block_on(chat(&c, "q"));
        check_events(&events);
        prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
        let valid = value.is_i64();
        prop_assert_eq!(tool.call_count(), usize::from(valid));
        let result = events.iter().find_map(|e| match e {
            ChatEvent::ToolResult { is_error, content, .. } => Some((*is_error, content.clone())),
            _ => None,
        }).unwrap();
        prop_assert_eq!(result.0, !valid);
        if !valid {
            prop_assert!(result.1.starts_with("Error: invalid arguments for t"));
        }
        let warnings = count(&events, |e| matches!(e, ChatEvent::Warning { warning } if warning.kind == WarningKind::MalformedOutput));
        prop_assert_eq!(warnings, usize::from(malformed_first));
        prop_assert_eq!(provider.request_count(), 2 + usize::from(malformed_first));
    }

    // Property 35: constrained 1:1 results
    #[test]
    fn constrained_one_to_one(turns in prop::collection::vec(prop_oneof![Just("t"), Just("ghost")], 0..5)) {
        // Every parsed call gets a minted id and exactly one result, recorded as a native
        // call followed by its tool message.
        let tool = RecordingTool::new("t");
        let mut builder = MockProvider::builder();
        for (i, name) in turns.iter().enumerate() {
            builder = builder.turn(vec![ev::text(json!({"tool": name, "arguments": {"i": i}}).to_string()), ev::finish()]);
        }
        let provider = builder.turn(vec![ev::text(json!({"final_answer": "ok"}).to_string()), ev::finish()]).build();
        let c = client_with(provider, registry([tool]), |cfg| cfg.tool_mode = ToolMode::Constrained);
        let events = block_on(chat(&c, "q"));
        check_events(&events);
        prop_assert_eq!(count(&events, |e| matches!(e, ChatEvent::ToolResult { .. })), turns.len());
        let h = c.history();
        check_history(&h);
        let tool_msgs: Vec<_> = h.messages().iter().filter(|m| m.role() == Role::Tool).collect();
        prop_assert_eq!(tool_msgs.len(), turns.len());
        let mut ids: Vec<&str> = tool_msgs.iter().map(|m| m.tool_call_id().unwrap()).collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), turns.len());
        prop_assert_eq!(h.last().unwrap().text(), "ok");
    }
}
