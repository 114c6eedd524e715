//! Schema-constrained tool calling: the reply must be JSON matching a `oneOf` schema with
//! one alternative per tool (`{"tool": <const name>, "arguments": <its parameters>}`) and
//! one for the answer (`{"final_answer": <string>}`). Servers enforce it by grammar
//! (llama.cpp), guided decoding (vLLM) or `format` (Ollama); small models that never emit
//! well-formed native calls can still call tools this way.
//!
//! The reply is read into a tool call with a minted id, or the turn's answer; a call then
//! flows through the same validation, concurrent execution and 1:1 result recording as a
//! native one, and is recorded in the history as a native call. A reply that does not
//! parse draws a correction message and the loop continues. The JSON of a reply is a
//! protocol, not an answer: nothing is shown while it streams ([`Hold`]), a call is
//! recorded without text, and half a reply cut short by a cancel is not recorded.
//!
//! Tool parameter schemas that use local `$defs` (as schemars derives for nested types)
//! have their definitions hoisted to the root of the output schema, where their
//! `#/$defs/...` references resolve; on a name clash the first tool's definition wins.

use ollm_types::{Message, ProviderRequest, ResponseFormat, ToolChoice, ToolSchema};
use serde_json::{Map, Value, json};

use super::common::{self, Shown, TextFilter, Turn};

/// The name the output schema is sent under.
pub(crate) const SCHEMA_NAME: &str = "tool_call_or_final_answer";

/// Offers `tools` as instructions in the system prompt and the output schema; with
/// `must_call` (tool choice `required` or a named tool) the schema has no `final_answer`
/// branch, so a server that enforces it can only produce a call.
pub(crate) fn prepare(request: &mut ProviderRequest, tools: &[ToolSchema], must_call: bool) {
    common::append_system(&mut request.system, system_prompt(tools, must_call));
    request.response_format = Some(ResponseFormat::JsonSchema {
        name: SCHEMA_NAME.to_owned(),
        schema: response_schema(tools, must_call),
    });
}

/// The output schema for `tools` (see the module docs); without the answer's branch when
/// `must_call`.
pub(crate) fn response_schema(tools: &[ToolSchema], must_call: bool) -> Value {
    let mut defs = Map::new();
    let mut alternatives: Vec<Value> = tools
        .iter()
        .map(|t| {
            let mut params = t.parameters.clone();
            if let Value::Object(map) = &mut params {
                if let Some(Value::Object(local)) = map.remove("$defs") {
                    for (k, v) in local {
                        defs.entry(k).or_insert(v);
                    }
                }
            }
            json!({
                "type": "object",
                "properties": {
                    "tool": {"const": t.name},
                    "arguments": params,
                },
                "required": ["tool", "arguments"],
                "additionalProperties": false,
            })
        })
        .collect();
    if !must_call {
        alternatives.push(json!({
            "type": "object",
            "properties": {"final_answer": {"type": "string"}},
            "required": ["final_answer"],
            "additionalProperties": false,
        }));
    }
    let mut schema = json!({ "oneOf": alternatives });
    if !defs.is_empty() {
        schema["$defs"] = Value::Object(defs);
    }
    schema
}

/// The instructions that describe `tools` and the reply format to the model.
pub(crate) fn system_prompt(tools: &[ToolSchema], must_call: bool) -> String {
    let mut out = String::from(if let ([only], true) = (tools, must_call) {
        return format!(
            "Reply with one JSON object only: call {name} now, taking its arguments from the \
             user's message, replying {{\"tool\": \"{name}\", \"arguments\": {{...}}}}.\n\n\
             Tools:\n{}",
            common::tool_list(tools),
            name = only.name
        );
    } else if must_call {
        "Reply with one JSON object only: call a tool now, replying \
         {\"tool\": \"<name>\", \"arguments\": {...}}.\n\nTools:\n"
    } else {
        "Reply with one JSON object only. To call a tool, reply \
         {\"tool\": \"<name>\", \"arguments\": {...}}. When you know the answer, reply \
         {\"final_answer\": \"<your answer>\"}.\n\nTools:\n"
    });
    out.push_str(&common::tool_list(tools));
    out
}

/// What a constrained reply says.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    /// Call `tool` with `arguments`.
    Call {
        /// The tool's name.
        tool: String,
        /// Its arguments.
        arguments: Map<String, Value>,
    },
    /// The answer.
    FinalAnswer(String),
    /// Not a reply of the expected shape; the text says why.
    Malformed(String),
}

/// Reads a constrained reply (whitespace and a Markdown fence around it are tolerated).
pub(crate) fn parse(text: &str) -> Reply {
    let body = common::strip_fence(text);
    let value: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) => return Reply::Malformed(format!("invalid JSON: {e}")),
    };
    let Value::Object(mut map) = value else {
        return Reply::Malformed("expected a JSON object".into());
    };
    if let Some(Value::String(tool)) = map.get("tool") {
        let tool = tool.clone();
        return match map.remove("arguments") {
            Some(Value::Object(arguments)) => Reply::Call { tool, arguments },
            None | Some(Value::Null) => Reply::Call {
                tool,
                arguments: Map::new(),
            },
            Some(_) => Reply::Malformed("\"arguments\" must be a JSON object".into()),
        };
    }
    match map.remove("final_answer") {
        Some(Value::String(answer)) => Reply::FinalAnswer(answer),
        Some(_) => Reply::Malformed("\"final_answer\" must be a string".into()),
        None => Reply::Malformed("expected a \"tool\" or a \"final_answer\" key".into()),
    }
}

/// The user message sent when a reply could not be read.
pub(crate) fn correction_message(error: &str) -> String {
    format!(
        "Your last reply could not be used ({error}). Reply with one JSON object: \
         {{\"tool\": \"<name>\", \"arguments\": {{...}}}} or {{\"final_answer\": \"...\"}}."
    )
}

/// The user message sent when the model answered although the tool choice obliges a
/// call (a server that does not enforce the schema).
pub(crate) fn must_call_message(choice: &ToolChoice) -> String {
    let which = match choice {
        ToolChoice::Tool(name) => format!("\"{name}\""),
        _ => "\"<name>\"".to_owned(),
    };
    format!(
        "You must call a tool before answering. Reply with one JSON object: \
         {{\"tool\": {which}, \"arguments\": {{...}}}}."
    )
}

/// Shows nothing while the JSON streams, then the answer read from it.
#[derive(Debug, Default)]
pub(crate) struct Hold;

impl TextFilter for Hold {
    fn feed(&mut self, _delta: &str) -> Vec<Shown> {
        Vec::new()
    }

    fn finish(&mut self, answer: Option<&str>) -> Vec<Shown> {
        match answer {
            Some(answer) if !answer.is_empty() => vec![Shown::Text(answer.to_owned())],
            _ => Vec::new(),
        }
    }
}

/// Records a constrained turn: calls as native calls without text, and nothing of a
/// reply cut short (half a JSON document is not text worth keeping).
pub(crate) fn record(turn: Turn<'_>) -> Vec<Message> {
    match turn {
        Turn::Cut { .. } => Vec::new(),
        _ => common::record_default(turn, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::strategy::Strategy as ToolStrategy;
    use proptest::prelude::*;

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 100,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    fn arb_args() -> impl Strategy<Value = Map<String, Value>> {
        prop::collection::btree_map("[a-z]{1,6}", any::<i32>().prop_map(Value::from), 0..4)
            .prop_map(|m| m.into_iter().collect())
    }

    fn names() -> impl Strategy<Value = Vec<String>> {
        prop::collection::btree_set("[a-z][a-z_]{0,8}", 1..5).prop_map(|s| s.into_iter().collect())
    }

    proptest! {
        #![proptest_config(config())]

        // Property 32: constrained schema shape (the run's side is in
        // tests/all/constrained.rs).
        #[test]
        fn constrained_schema_shape(names in names(), args in arb_args(), answer in ".{0,20}") {
            let tools: Vec<ToolSchema> = names.iter().map(|n| ToolSchema::new(n, "d", json!({"type": "object"}))).collect();
            let schema = response_schema(&tools, false);
            let alts = schema["oneOf"].as_array().unwrap();
            prop_assert_eq!(alts.len(), tools.len() + 1);
            for (alt, tool) in alts.iter().zip(&tools) {
                prop_assert_eq!(&alt["properties"]["tool"]["const"], &json!(tool.name));
                prop_assert_eq!(&alt["properties"]["arguments"], &tool.parameters);
                prop_assert_eq!(&alt["additionalProperties"], &json!(false));
                prop_assert_eq!(&alt["required"], &json!(["tool", "arguments"]));
            }
            let last = alts.last().unwrap();
            prop_assert_eq!(&last["required"], &json!(["final_answer"]));
            // Exactly one alternative accepts each well-formed reply.
            let validator = jsonschema::validator_for(&schema).unwrap();
            for n in &names {
                let reply = json!({"tool": n, "arguments": Value::Object(args.clone())});
                prop_assert!(validator.is_valid(&reply));
            }
            let good = json!({"final_answer": answer});
            let unknown = json!({"tool": "NOT A TOOL", "arguments": {}});
            let extra = json!({"final_answer": answer, "extra": 1});
            prop_assert!(validator.is_valid(&good));
            prop_assert!(!validator.is_valid(&unknown));
            prop_assert!(!validator.is_valid(&extra));
            // The request carries it, and no native tools.
            let mut req = ProviderRequest::new("m", Vec::new());
            ToolStrategy::Constrained.prepare(&mut req, &tools, &ollm_types::ToolChoice::Auto);
            prop_assert!(req.tools.is_empty());
            match &req.response_format {
                Some(ResponseFormat::JsonSchema { name, schema: sent }) => {
                    prop_assert_eq!(name.as_str(), SCHEMA_NAME);
                    prop_assert_eq!(sent, &schema);
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }

        // Property 33: constrained reply parsing (the run's side is in
        // tests/all/constrained.rs).
        #[test]
        fn constrained_reply_parsing(name in "[a-z]{1,8}", args in arb_args(), answer in ".{0,30}", pad in "[ \n]{0,3}") {
            let call = format!("{pad}{}{pad}", json!({"tool": name, "arguments": Value::Object(args.clone())}));
            prop_assert_eq!(parse(&call), Reply::Call { tool: name.clone(), arguments: args });
            let fin = json!({"final_answer": answer}).to_string();
            prop_assert_eq!(parse(&fin), Reply::FinalAnswer(answer.clone()));
            let junk = format!("{answer} not json {{");
            let malformed = matches!(parse(&junk), Reply::Malformed(_));
            prop_assert!(malformed);
        }
    }

    #[test]
    fn nested_definitions_are_hoisted() {
        let params = json!({
            "type": "object",
            "properties": {"inner": {"$ref": "#/$defs/Inner"}},
            "required": ["inner"],
            "$defs": {"Inner": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}
        });
        let schema = response_schema(&[ToolSchema::new("t", "d", params)], false);
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(v.is_valid(&json!({"tool": "t", "arguments": {"inner": {"x": 1}}})));
        assert!(!v.is_valid(&json!({"tool": "t", "arguments": {"inner": {"x": "no"}}})));
    }

    #[test]
    fn parses_both_shapes() {
        assert_eq!(
            parse(r#"{"final_answer": "hi"}"#),
            Reply::FinalAnswer("hi".into())
        );
        assert!(matches!(
            parse("```json\n{\"tool\": \"t\", \"arguments\": {\"a\": 1}}\n```"),
            Reply::Call { .. }
        ));
        assert!(matches!(parse("nope"), Reply::Malformed(_)));
        assert!(matches!(
            parse(r#"{"tool": "t", "arguments": 3}"#),
            Reply::Malformed(_)
        ));
    }
}
