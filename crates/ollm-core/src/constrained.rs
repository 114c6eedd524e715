//! Schema-constrained tool calling: the reply must be JSON matching a `oneOf` schema with
//! one alternative per tool (`{"tool": <const name>, "arguments": <its parameters>}`) and
//! one for the answer (`{"final_answer": <string>}`). Servers enforce it by grammar
//! (llama.cpp), guided decoding (vLLM) or `format` (Ollama); small models that never emit
//! well-formed native calls can still call tools this way.
//!
//! The reply is read into a tool call with a minted id, or the turn's answer; a call then
//! flows through the same validation, concurrent execution and 1:1 result recording as a
//! native one, and is recorded in the history as a native call. A reply that does not
//! parse draws a correction message and the loop continues.
//!
//! Tool parameter schemas that use local `$defs` (as schemars derives for nested types)
//! have their definitions hoisted to the root of the output schema, where their
//! `#/$defs/...` references resolve; on a name clash the first tool's definition wins.

use ollm_types::ToolSchema;
use serde_json::{Map, Value, json};

/// The name the output schema is sent under.
pub const SCHEMA_NAME: &str = "tool_call_or_final_answer";

/// The output schema for `tools` (see the module docs).
pub fn response_schema(tools: &[ToolSchema]) -> Value {
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
    alternatives.push(json!({
        "type": "object",
        "properties": {"final_answer": {"type": "string"}},
        "required": ["final_answer"],
        "additionalProperties": false,
    }));
    let mut schema = json!({ "oneOf": alternatives });
    if !defs.is_empty() {
        schema["$defs"] = Value::Object(defs);
    }
    schema
}

/// The instructions that describe `tools` and the reply format to the model.
pub fn system_prompt(tools: &[ToolSchema]) -> String {
    let mut out = String::from(
        "Reply with one JSON object only. To call a tool, reply \
         {\"tool\": \"<name>\", \"arguments\": {...}}. When you know the answer, reply \
         {\"final_answer\": \"<your answer>\"}.\n\nTools:\n",
    );
    for t in tools {
        out.push_str(&format!(
            "- {}: {}\n  Arguments (JSON Schema): {}\n",
            t.name, t.description, t.parameters
        ));
    }
    out
}

/// What a constrained reply says.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
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
pub fn parse(text: &str) -> Reply {
    let mut body = text.trim();
    if let Some(rest) = body.strip_prefix("```") {
        body = rest
            .trim_start_matches(|c: char| c.is_ascii_alphanumeric())
            .trim_end()
            .trim_end_matches("```")
            .trim();
    }
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
pub fn correction_message(error: &str) -> String {
    format!(
        "Your last reply could not be used ({error}). Reply with one JSON object: \
         {{\"tool\": \"<name>\", \"arguments\": {{...}}}} or {{\"final_answer\": \"...\"}}."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
