//! What every column offers and brings back: BFCL's functions as OpenAI-style tools, and
//! the outcome of one question. A leaf, so the column runners and the scheduler share it
//! without importing each other.
//!
//! # Decisions
//!
//! - **BFCL's types become JSON Schema's** the way BFCL's own OpenAI-style handlers map
//!   them: `dict` → `object`, `float` → `number`, `tuple` → `array`, `any` → `string`,
//!   the rest as they are, wherever a `type` appears (properties, items, nested objects).
//!   The top-level parameters are an `object`.
//! - **Names with `.`** are offered with `_` ([`super::checker::wire_name`]), as BFCL does
//!   for OpenAI-compatible servers; the checker compares against that name.

use serde_json::{Map, Value, json};

use super::checker::{Call, wire_name};

/// What one question in one column came to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    /// The calls made, as the column recorded them (none ran).
    pub(crate) calls: Vec<Call>,
    /// The reply's text, if any.
    pub(crate) text: String,
    /// How the turn ended (`stop`, `tool_calls`, `max_turns`, `error`, `timeout`, ...).
    pub(crate) finish: String,
    /// The strategy the library chose (ollm columns).
    pub(crate) strategy: Option<String>,
    /// How many of the calls the library answered with an error (an unknown tool,
    /// arguments its schema refuses): calls a user's tools would never have seen.
    pub(crate) refused: usize,
}

/// BFCL's function `function` as an OpenAI `tools` entry.
pub(crate) fn tool(function: &Value) -> Value {
    let name = function["name"].as_str().unwrap_or_default();
    let mut parameters = function["parameters"].clone();
    convert_types(&mut parameters);
    if let Value::Object(map) = &mut parameters {
        map.insert("type".into(), "object".into());
    } else {
        parameters = json!({"type": "object", "properties": {}});
    }
    json!({"type": "function", "function": {
        "name": wire_name(name),
        "description": function["description"].as_str().unwrap_or_default(),
        "parameters": parameters,
    }})
}

/// JSON Schema's name for a BFCL type.
fn json_type(kind: &str) -> &str {
    match kind {
        "dict" => "object",
        "float" => "number",
        "tuple" => "array",
        "any" => "string",
        other => other,
    }
}

/// Renames every `type` of a schema, through `properties` and `items`.
fn convert_types(schema: &mut Value) {
    let Value::Object(map) = schema else {
        return;
    };
    if let Some(Value::String(kind)) = map.get("type") {
        let renamed = json_type(kind).to_owned();
        map.insert("type".into(), Value::String(renamed));
    }
    if let Some(Value::Object(properties)) = map.get_mut("properties") {
        properties.values_mut().for_each(convert_types);
    }
    if let Some(items) = map.get_mut("items") {
        convert_types(items);
    }
}

/// A call read from an OpenAI `tool_calls` entry: `arguments` is a JSON text; one that is
/// not JSON is kept as a string (and fails the checker).
pub(crate) fn call_from_openai(entry: &Value) -> Call {
    let function = &entry["function"];
    let raw = &function["arguments"];
    let args = match raw {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| raw.clone()),
        Value::Object(_) => raw.clone(),
        _ => Value::Object(Map::new()),
    };
    Call {
        name: function["name"].as_str().unwrap_or_default().to_owned(),
        args,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bfcl_types_become_json_schema_types_everywhere() {
        let function = json!({"name": "math.hypot", "description": "d", "parameters": {
            "type": "dict", "properties": {
                "x": {"type": "float"},
                "pts": {"type": "array", "items": {"type": "tuple", "items": {"type": "float"}}},
                "opt": {"type": "dict", "properties": {"v": {"type": "any"}}}},
            "required": ["x"]}});
        let t = tool(&function);
        let f = &t["function"];
        assert_eq!(f["name"], "math_hypot");
        let p = &f["parameters"];
        assert_eq!(p["type"], "object");
        assert_eq!(p["properties"]["x"]["type"], "number");
        assert_eq!(p["properties"]["pts"]["items"]["type"], "array");
        assert_eq!(p["properties"]["pts"]["items"]["items"]["type"], "number");
        assert_eq!(p["properties"]["opt"]["type"], "object");
        assert_eq!(p["properties"]["opt"]["properties"]["v"]["type"], "string");
        assert_eq!(p["required"], json!(["x"]));
    }

    #[test]
    fn openai_calls_parse_their_argument_text() {
        let call =
            |args: Value| call_from_openai(&json!({"function": {"name": "f", "arguments": args}}));
        assert_eq!(call(json!("{\"a\": 1}")).args, json!({"a": 1}));
        assert_eq!(call(json!({"a": 1})).args, json!({"a": 1}));
        assert_eq!(call(json!("a=1")).args, json!("a=1"));
        assert_eq!(call(Value::Null).args, json!({}));
    }
}
