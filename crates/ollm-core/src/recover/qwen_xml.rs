//! Qwen3-Coder XML: `<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n</function>`,
//! and the `<function=NAME>{json}</function>` spelling of Functionary and Llama 3.1.
//!
//! Decisions: seen in the wild without the `<tool_call>` wrapper (then an orphan
//! `</tool_call>` may follow; the scanner takes it in), with parameters left unclosed at
//! the end, several calls back to back and whitespace flattened onto one line. A value
//! loses one newline on each side (or its spaces when it has none); everything else is
//! kept. Values stay strings unless the tool's schema types the property otherwise.

use serde_json::{Map, Value};

use super::{RawArgs, RawCall};

const OPEN: &str = "<function=";
const CLOSE: &str = "</function>";
const PARAM: &str = "<parameter=";
const PARAM_CLOSE: &str = "</parameter>";

/// Parses consecutive `<function=...>` blocks opening `rest`.
pub(super) fn parse(rest: &str) -> (usize, Vec<RawCall>) {
    let mut calls = Vec::new();
    let mut at = 0;
    while let Some(after) = rest[at..].trim_start().strip_prefix(OPEN) {
        let start = rest.len() - after.len();
        let (len, call) = one(after);
        calls.push(call);
        at = start + len;
    }
    (at, calls)
}

/// One function block, `after` starting just past `<function=`.
fn one(after: &str) -> (usize, RawCall) {
    let body_end = [
        after.find(CLOSE),
        after.find(OPEN),
        after.find("</tool_call>"),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(after.len());
    let consumed = if after[body_end..].starts_with(CLOSE) {
        body_end + CLOSE.len()
    } else {
        body_end
    };
    let block = &after[..body_end];
    let Some(name_end) = block.find('>') else {
        return (
            consumed,
            Err("the <function=NAME> tag is not closed with `>`".to_owned()),
        );
    };
    let name = block[..name_end].trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return (consumed, Err(format!("{name:?} is not a function name")));
    }
    let body = &block[name_end + 1..];
    let call = if body.trim_start().starts_with('{') {
        super::scan::first_json(body)
            .and_then(|(_, v)| super::json::arguments(v))
            .map(|map| (name.to_owned(), RawArgs::Json(map)))
    } else {
        params(body).map(|pairs| (name.to_owned(), RawArgs::Strings(pairs)))
    };
    (consumed, call)
}

/// The `<parameter=KEY>VALUE</parameter>` pairs of a function body.
fn params(body: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    let mut rest = body;
    loop {
        let Some(i) = rest.find(PARAM) else {
            if !rest.trim().is_empty() && pairs.is_empty() {
                return Err("expected <parameter=KEY>VALUE</parameter> elements".to_owned());
            }
            return Ok(pairs);
        };
        let after = &rest[i + PARAM.len()..];
        let Some(key_end) = after.find('>') else {
            return Err("a <parameter=KEY> tag is not closed with `>`".to_owned());
        };
        let key = after[..key_end].trim();
        if key.is_empty() || key.contains(['<', '=', ' ', '\n']) {
            return Err(format!(
                "<parameter={key}> is not a well-formed parameter tag"
            ));
        }
        let value_from = &after[key_end + 1..];
        let value_end = [value_from.find(PARAM_CLOSE), value_from.find(PARAM)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(value_from.len());
        pairs.push((key.to_owned(), clean(&value_from[..value_end])));
        rest = &value_from[value_end..];
        rest = rest.strip_prefix(PARAM_CLOSE).unwrap_or(rest);
    }
}

/// A value without the newline (or spaces) that frame it.
fn clean(value: &str) -> String {
    let value = match value.strip_prefix('\n') {
        Some(v) => v,
        None => value.trim_start_matches(' '),
    };
    let value = match value.strip_suffix('\n') {
        Some(v) => v,
        None => value.trim_end_matches(' '),
    };
    value.to_owned()
}

/// String parameters typed by the tool's schema.
pub(super) fn typed(pairs: Vec<(String, String)>, schema: Option<&Value>) -> Map<String, Value> {
    pairs
        .into_iter()
        .map(|(key, raw)| {
            let types = schema
                .and_then(|s| s.get("properties"))
                .and_then(|p| p.get(&key))
                .map(declared_types)
                .unwrap_or_default();
            let value = convert(&raw, &types);
            (key, value)
        })
        .collect()
}

/// `arguments` with each string value whose property the schema types otherwise (a
/// boolean, integer, number, array or object, and never a string) converted when the
/// string reads exactly as that type (`"true"`, `"50"`): small models quote such values in
/// JSON calls too. Everything else is kept as it is, so validation still reports it.
pub(crate) fn typed_strings(arguments: &Map<String, Value>, schema: &Value) -> Map<String, Value> {
    arguments
        .iter()
        .map(|(key, value)| {
            let value = match value {
                Value::String(raw) => {
                    let types = schema
                        .get("properties")
                        .and_then(|p| p.get(key))
                        .map(declared_types)
                        .unwrap_or_default();
                    convert(raw, &types)
                }
                other => other.clone(),
            };
            (key.clone(), value)
        })
        .collect()
}

fn declared_types(property: &Value) -> Vec<String> {
    match property.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(|t| t.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

fn convert(raw: &str, types: &[String]) -> Value {
    let keep = || Value::String(raw.to_owned());
    if types.is_empty() || types.iter().any(|t| t == "string") {
        return keep();
    }
    let trimmed = raw.trim();
    if let Ok(value) = serde_json::from_str::<Value>(trimmed) {
        let fits = types.iter().any(|t| match t.as_str() {
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => false,
        });
        if fits {
            return value;
        }
    }
    if types.iter().any(|t| t == "boolean") {
        match trimmed.to_ascii_lowercase().as_str() {
            "true" => return Value::Bool(true),
            "false" => return Value::Bool(false),
            _ => {}
        }
    }
    keep()
}
