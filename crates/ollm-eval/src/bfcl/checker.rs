//! The AST checker: whether the calls a model made match BFCL's possible answers.
//!
//! Written from the rules of BFCL's own checker (`bfcl_eval/eval_checker/ast_eval/
//! ast_checker.py` at the pinned version), read as facts, not translated line by line.
//!
//! # The rules
//!
//! - **simple**: exactly one call, checked against the one function.
//! - **multiple**: as many calls as answers (always one), checked against the function
//!   the answer names.
//! - **parallel**: as many calls as answers; each answer, in its order, takes the first
//!   call not yet taken that matches it, so calls may come in any order.
//! - **irrelevance**: passes when the model made no call.
//! - **Calls BFCL could not decode count as none** ([`decodable`]): ollm's marker for a
//!   malformed text call, and arguments that are not a JSON object. BFCL scores an output
//!   it cannot decode as no call (a pass on irrelevance, a failure elsewhere).
//! - **One call against one answer**: the name matches (the declared name with `.` as `_`,
//!   as the tools were offered); every required parameter is present; no parameter the
//!   function does not declare or the answer does not list; each value has the declared
//!   type (an integer where a float is declared counts as that float); each value is among
//!   the answer's possible values; a parameter the answer lists without `""` among its
//!   values must be present.
//! - **Types** are BFCL's Python ones: `string`/`any` a string, `integer` an integer
//!   (JSON numbers without a fraction or exponent; `true` is not one), `float` a number
//!   written with a fraction, `boolean`, `array`/`tuple` a list, `dict` an object. Arrays
//!   check their items one level deep against each possible list. When the possible
//!   values are of another type than the declared one (BFCL writes some as variable
//!   names), a value of that other type is accepted and compared as it is.
//! - **Strings compare standardised**: spaces and `,./-_*^` removed, lower-cased, `'` as
//!   `"`; inside lists too, and string values of objects (one level). Numbers compare by
//!   value (`5` equals `5.0`), as Python's `==` does.

use serde_json::{Map, Value};

/// A call the model made: the name as it came back and its arguments.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Call {
    /// The tool's name as offered (dots as underscores).
    pub(crate) name: String,
    /// The arguments (an object when the model wrote one).
    pub(crate) args: Value,
}

/// BFCL's categories this benchmark runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    /// One function, one call.
    Simple,
    /// Several functions, one call to the right one.
    Multiple,
    /// One function, several calls.
    Parallel,
    /// No function fits: no call.
    Irrelevance,
}

/// The name a function is offered under: BFCL's OpenAI-style handlers replace `.` with
/// `_`, which the OpenAI API requires of names.
pub(crate) fn wire_name(name: &str) -> String {
    name.replace('.', "_")
}

/// The name ollm-core records a malformed text call under (`strategy/native.rs`): a block
/// that was clearly meant as a call but could not be read as one.
pub(crate) const MALFORMED_CALL: &str = "invalid_tool_call";

/// Whether a call is one BFCL could decode: not ollm's marker for a malformed block, and
/// with arguments that are a JSON object (not the raw text an adapter hands on under
/// [`ollm_types::INVALID_ARGUMENTS_KEY`], nor a string that did not parse).
pub(crate) fn decodable(call: &Call) -> bool {
    call.name != MALFORMED_CALL
        && call
            .args
            .as_object()
            .is_some_and(|args| !args.contains_key(ollm_types::INVALID_ARGUMENTS_KEY))
}

/// Whether `calls` answer a question of `category` whose functions are `functions` and
/// whose possible answers are `answers` (BFCL's `ground_truth`: a list of
/// `{function: {param: [possible values]}}`). `Err` says why not.
///
/// Calls BFCL could not decode ([`decodable`]) are left out first: BFCL counts an output
/// it cannot decode as no call, which passes an irrelevance question and fails the others.
pub(crate) fn check(
    category: Category,
    functions: &[Value],
    calls: &[Call],
    answers: &[Value],
) -> Result<(), String> {
    let decoded: Vec<Call> = calls.iter().filter(|c| decodable(c)).cloned().collect();
    let calls = decoded.as_slice();
    if category == Category::Irrelevance {
        return match calls.len() {
            0 => Ok(()),
            n => Err(format!("{n} calls where none was due")),
        };
    }
    if calls.len() != answers.len() {
        return Err(format!(
            "wrong number of calls: {}, expected {}",
            calls.len(),
            answers.len()
        ));
    }
    match category {
        Category::Parallel => parallel(functions, calls, answers),
        _ => {
            let (function, answer) = expected(functions, &answers[0])?;
            one(function, &calls[0], answer)
        }
    }
}

/// Each answer takes the first untaken call that matches it.
fn parallel(functions: &[Value], calls: &[Call], answers: &[Value]) -> Result<(), String> {
    let mut taken = vec![false; calls.len()];
    for (i, answer) in answers.iter().enumerate() {
        let (function, answer) = expected(functions, answer)?;
        let mut last = String::from("no call left");
        let found = calls.iter().enumerate().find(|(j, call)| {
            if taken[*j] {
                return false;
            }
            match one(function, call, answer) {
                Ok(()) => true,
                Err(why) => {
                    last = why;
                    false
                }
            }
        });
        match found {
            Some((j, _)) => taken[j] = true,
            None => return Err(format!("no call matches answer {i}: {last}")),
        }
    }
    Ok(())
}

/// The function an answer names and its parameters' possible values.
fn expected<'a>(
    functions: &'a [Value],
    answer: &'a Value,
) -> Result<(&'a Value, &'a Map<String, Value>), String> {
    let (name, params) = answer
        .as_object()
        .and_then(|m| m.iter().next())
        .ok_or_else(|| format!("malformed answer {answer}"))?;
    let params = params
        .as_object()
        .ok_or_else(|| format!("malformed answer for {name}"))?;
    let function = functions
        .iter()
        .find(|f| f["name"] == name.as_str())
        .ok_or_else(|| format!("the answer names {name}, which is not declared"))?;
    Ok((function, params))
}

/// One call against one function and its possible values.
fn one(function: &Value, call: &Call, answer: &Map<String, Value>) -> Result<(), String> {
    let name = function["name"].as_str().unwrap_or_default();
    if call.name != wire_name(name) {
        return Err(format!(
            "called {}, expected {}",
            call.name,
            wire_name(name)
        ));
    }
    let empty = Map::new();
    let args = call.args.as_object().unwrap_or(&empty);
    let properties = function["parameters"]["properties"]
        .as_object()
        .unwrap_or(&empty);
    let required = function["parameters"]["required"].as_array();
    for param in required.into_iter().flatten().filter_map(Value::as_str) {
        if !args.contains_key(param) {
            return Err(format!("missing required parameter {param}"));
        }
    }
    for (param, value) in args {
        let (Some(schema), Some(possible)) = (properties.get(param), answer.get(param)) else {
            return Err(format!("unexpected parameter {param}"));
        };
        let possible = possible.as_array().map_or(&[][..], Vec::as_slice);
        parameter(param, value, schema, possible)?;
    }
    for (param, possible) in answer {
        let optional = possible.as_array().is_some_and(|p| p.contains(&"".into()));
        if !args.contains_key(param) && !optional {
            return Err(format!("parameter {param} is due and missing"));
        }
    }
    Ok(())
}

/// BFCL's Python type of a JSON value.
fn type_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "none",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// The Python type a declared BFCL type stands for.
fn declared(kind: &str) -> Option<&'static str> {
    Some(match kind {
        "string" | "any" => "str",
        "integer" => "int",
        "float" => "float",
        "boolean" => "bool",
        "array" | "tuple" => "list",
        "dict" => "dict",
        _ => return None,
    })
}

/// The type of the first possible value that is not `""` (the mark of "may be left out").
fn possible_type(possible: &[Value]) -> Option<&'static str> {
    possible.iter().find(|p| **p != "").map(type_of)
}

/// One parameter's value: its type, then its value among the possible ones.
fn parameter(param: &str, value: &Value, schema: &Value, possible: &[Value]) -> Result<(), String> {
    let kind = schema["type"].as_str().unwrap_or_default();
    let expected = declared(kind).ok_or_else(|| format!("{param}: unknown type {kind}"))?;
    let value = &match value {
        Value::Number(n) if kind == "float" && !n.is_f64() => {
            n.as_f64().map_or(Value::Null, Value::from)
        }
        other => other.clone(),
    };
    let nested = schema["items"]["type"].as_str().and_then(declared);
    let variable = possible_type(possible).is_some_and(|t| t != expected);
    let own_type = type_of(value) == expected;
    if own_type && expected == "list" && nested.is_some() && !items_typed(value, possible, nested) {
        return Err(format!("{param}: items of the wrong type in {value}"));
    }
    if !own_type {
        if possible_type(possible) == Some(type_of(value)) {
            return member(param, value, possible, false);
        }
        return Err(format!("{param}: expected {kind}, got {value}"));
    }
    if variable {
        return member(param, value, possible, false);
    }
    match (expected, nested) {
        ("dict", _) => dict_among(param, value, possible),
        ("list", Some("dict")) => dicts_among(param, value, possible),
        _ => member(param, value, possible, true),
    }
}

/// Whether the items of `value` have the `nested` type against the first possible list
/// (BFCL stops at the first possible value that passes, and a non-list passes).
fn items_typed(value: &Value, possible: &[Value], nested: Option<&str>) -> bool {
    let items = value.as_array().map_or(&[][..], Vec::as_slice);
    possible.iter().any(|p| match p.as_array() {
        None => true,
        Some(list) => items.iter().all(|item| {
            let t = type_of(item);
            Some(t) == nested || possible_type(list) == Some(t)
        }),
    })
}

/// Whether `value` is among `possible`, standardising strings when `standard`.
fn member(param: &str, value: &Value, possible: &[Value], standard: bool) -> Result<(), String> {
    let norm = |v: &Value| {
        if standard {
            standardise_deep(v)
        } else {
            v.clone()
        }
    };
    let value_n = norm(value);
    if possible.iter().any(|p| py_eq(&value_n, &norm(p))) {
        Ok(())
    } else {
        Err(format!(
            "{param}: {value} is not among {}",
            Value::from(possible.to_vec())
        ))
    }
}

/// Standardises a string, or the strings directly inside a list.
fn standardise_deep(value: &Value) -> Value {
    match value {
        Value::String(s) => Value::String(standardise(s)),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|i| match i {
                    Value::String(s) => Value::String(standardise(s)),
                    other => other.clone(),
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

/// BFCL's string standardisation: no spaces or `,./-_*^`, lower case, `'` as `"`.
pub(crate) fn standardise(text: &str) -> String {
    text.chars()
        .filter(|c| !matches!(c, ' ' | ',' | '.' | '/' | '-' | '_' | '*' | '^'))
        .collect::<String>()
        .to_lowercase()
        .replace('\'', "\"")
}

/// Python's `==` on JSON values: numbers by value (booleans as 0 and 1), the rest
/// structurally.
fn py_eq(a: &Value, b: &Value) -> bool {
    let number = |v: &Value| match v {
        Value::Bool(b) => Some(f64::from(u8::from(*b))),
        Value::Number(n) => n.as_f64(),
        _ => None,
    };
    match (a, b) {
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (number(a), number(b)) {
            (Some(x), Some(y)) => x == y,
            _ => a == b,
        },
    }
}

/// An object against possible objects: every key known, every value among that key's
/// possible ones (strings standardised), no key left out unless it may be.
fn dict_among(param: &str, value: &Value, possible: &[Value]) -> Result<(), String> {
    let empty = Map::new();
    let given = value.as_object().unwrap_or(&empty);
    let mut why = format!("{param}: no possible object matches {value}");
    for answer in possible.iter().filter(|p| **p != "") {
        let Some(answer) = answer.as_object() else {
            continue;
        };
        match dict_matches(given, answer) {
            Ok(()) => return Ok(()),
            Err(reason) => why = format!("{param}: {reason}"),
        }
    }
    Err(why)
}

fn dict_matches(given: &Map<String, Value>, answer: &Map<String, Value>) -> Result<(), String> {
    for (key, value) in given {
        let Some(options) = answer.get(key).and_then(Value::as_array) else {
            return Err(format!("unexpected key {key}"));
        };
        // BFCL standardises a string value here, and compares anything else as it is.
        member(key, value, options, value.is_string())?;
    }
    for (key, options) in answer {
        let optional = options.as_array().is_some_and(|o| o.contains(&"".into()));
        if !given.contains_key(key) && !optional {
            return Err(format!("missing key {key}"));
        }
    }
    Ok(())
}

/// A list of objects against possible lists of objects, in order.
fn dicts_among(param: &str, value: &Value, possible: &[Value]) -> Result<(), String> {
    let given = value.as_array().map_or(&[][..], Vec::as_slice);
    let fits = |answer: &Value| {
        let answer = answer.as_array().map_or(&[][..], Vec::as_slice);
        answer.len() == given.len()
            && given.iter().zip(answer).all(|(g, a)| {
                matches!((g.as_object(), a.as_object()), (Some(g), Some(a)) if dict_matches(g, a).is_ok())
            })
    };
    if possible.iter().any(fits) {
        Ok(())
    } else {
        Err(format!(
            "{param}: no possible list of objects matches {value}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A function with every type the four categories declare.
    fn functions() -> Vec<Value> {
        vec![
            json!({"name": "geo.area", "parameters": {"type": "dict", "properties": {
                "base": {"type": "integer"}, "height": {"type": "float"},
                "unit": {"type": "string"}, "exact": {"type": "boolean"},
                "sides": {"type": "array", "items": {"type": "integer"}},
                "names": {"type": "array", "items": {"type": "string"}},
                "options": {"type": "dict", "properties": {}},
                "rows": {"type": "array", "items": {"type": "dict"}}},
                "required": ["base"]}}),
            json!({"name": "other", "parameters": {"type": "dict", "properties": {
                "x": {"type": "integer"}}, "required": ["x"]}}),
        ]
    }

    /// The check of `calls` (name, args) against `answers` in `category`.
    fn check_case(
        category: Category,
        calls: &[(&str, Value)],
        answers: Value,
    ) -> Result<(), String> {
        let calls: Vec<Call> = calls
            .iter()
            .map(|(n, a)| Call {
                name: (*n).to_owned(),
                args: a.clone(),
            })
            .collect();
        let answers = answers.as_array().cloned().unwrap_or_default();
        check(category, &functions(), &calls, &answers)
    }

    /// One simple call against the answer `{"geo.area": answer}`: passes or not.
    fn simple(args: Value, answer: Value) -> bool {
        check_case(
            Category::Simple,
            &[("geo_area", args)],
            json!([{"geo.area": answer}]),
        )
        .is_ok()
    }

    #[test]
    fn simple_calls() {
        let base = json!({"base": [10], "height": [5.0, ""], "unit": ["square meters", ""]});
        let cases = [
            (json!({"base": 10}), true),
            (json!({"base": 10, "height": 5}), true),
            (json!({"base": 10, "height": 5.0}), true),
            (json!({"base": 10, "unit": "Square-Meters"}), true),
            (json!({"base": 10, "unit": "square_meters."}), true),
            (json!({"base": 10, "unit": "sq m"}), false),
            (json!({"base": 11}), false),
            (json!({"base": 10.0}), false),
            (json!({"base": "10"}), false),
            (json!({"base": true}), false),
            (json!({}), false),
            (json!({"base": 10, "colour": "red"}), false),
            (json!({"base": 10, "exact": true}), false),
            (json!({"base": 10, "height": 6}), false),
        ];
        for (args, pass) in cases {
            assert_eq!(simple(args.clone(), base.clone()), pass, "{args}");
        }
    }

    #[test]
    fn a_listed_parameter_without_the_empty_mark_is_due() {
        let answer = json!({"base": [10], "height": [5.0]});
        assert!(!simple(json!({"base": 10}), answer.clone()));
        assert!(simple(json!({"base": 10, "height": 5}), answer));
    }

    #[test]
    fn names_come_back_with_underscores_for_dots() {
        let answer = json!([{"geo.area": {"base": [1]}}]);
        assert!(
            check_case(
                Category::Simple,
                &[("geo_area", json!({"base": 1}))],
                answer.clone()
            )
            .is_ok()
        );
        assert!(
            check_case(
                Category::Simple,
                &[("geo.area", json!({"base": 1}))],
                answer.clone()
            )
            .is_err()
        );
        assert!(check_case(Category::Simple, &[("other", json!({"x": 1}))], answer).is_err());
    }

    #[test]
    fn lists_and_objects() {
        let cases = [
            (
                json!({"base": 1, "sides": [3, 4]}),
                json!({"base": [1], "sides": [[3, 4]]}),
                true,
            ),
            (
                json!({"base": 1, "sides": [4, 3]}),
                json!({"base": [1], "sides": [[3, 4]]}),
                false,
            ),
            (
                json!({"base": 1, "sides": [3.5]}),
                json!({"base": [1], "sides": [[3]]}),
                false,
            ),
            (
                json!({"base": 1, "names": ["New York", "LA"]}),
                json!({"base": [1], "names": [["new york", "la"]]}),
                true,
            ),
            (
                json!({"base": 1, "options": {"a": "X Y"}}),
                json!({"base": [1], "options": [{"a": ["x y"], "b": [""]}]}),
                true,
            ),
            (
                json!({"base": 1, "options": {"a": "x", "c": 1}}),
                json!({"base": [1], "options": [{"a": ["x"]}]}),
                false,
            ),
            (
                json!({"base": 1, "options": {}}),
                json!({"base": [1], "options": [{"a": ["x"]}]}),
                false,
            ),
            (
                json!({"base": 1, "rows": [{"a": 1}]}),
                json!({"base": [1], "rows": [[{"a": [1]}]]}),
                true,
            ),
            (
                json!({"base": 1, "rows": [{"a": 2}]}),
                json!({"base": [1], "rows": [[{"a": [1]}]]}),
                false,
            ),
            (
                json!({"base": 1, "rows": []}),
                json!({"base": [1], "rows": [[{"a": [1]}]]}),
                false,
            ),
        ];
        for (args, answer, pass) in cases {
            assert_eq!(simple(args.clone(), answer), pass, "{args}");
        }
    }

    #[test]
    fn a_value_of_the_possible_answers_type_is_taken_as_a_variable() {
        // BFCL writes a few answers as names where a number is declared.
        let answer = json!({"base": ["side_length"]});
        assert!(simple(json!({"base": "side_length"}), answer.clone()));
        assert!(!simple(json!({"base": "side length"}), answer.clone()));
        assert!(!simple(json!({"base": 3}), answer));
    }

    #[test]
    fn multiple_picks_the_function_the_answer_names() {
        let answer = json!([{"other": {"x": [2]}}]);
        assert!(
            check_case(
                Category::Multiple,
                &[("other", json!({"x": 2}))],
                answer.clone()
            )
            .is_ok()
        );
        assert!(
            check_case(
                Category::Multiple,
                &[("geo_area", json!({"base": 2}))],
                answer.clone()
            )
            .is_err()
        );
        let two = [("other", json!({"x": 2})), ("other", json!({"x": 2}))];
        assert!(check_case(Category::Multiple, &two, answer).is_err());
    }

    #[test]
    fn parallel_is_a_set_match_in_any_order() {
        let answer = json!([{"other": {"x": [1]}}, {"other": {"x": [2]}}]);
        let p =
            |calls: &[(&str, Value)]| check_case(Category::Parallel, calls, answer.clone()).is_ok();
        assert!(p(&[("other", json!({"x": 1})), ("other", json!({"x": 2}))]));
        assert!(p(&[("other", json!({"x": 2})), ("other", json!({"x": 1}))]));
        assert!(!p(&[
            ("other", json!({"x": 1})),
            ("other", json!({"x": 1}))
        ]));
        assert!(!p(&[("other", json!({"x": 1}))]));
        assert!(!p(&[
            ("other", json!({"x": 1})),
            ("other", json!({"x": 2})),
            ("other", json!({"x": 3}))
        ]));
    }

    #[test]
    fn calls_bfcl_could_not_decode_count_as_none() {
        let undecodable = [
            (MALFORMED_CALL, json!({"error": "not JSON"})),
            ("other", json!({ollm_types::INVALID_ARGUMENTS_KEY: "{x: 1"})),
            ("other", json!("x=1")),
        ];
        let answer = json!([{"other": {"x": [1]}}]);
        for call in undecodable {
            let calls = [call.clone()];
            assert!(
                check_case(Category::Irrelevance, &calls, json!([])).is_ok(),
                "{call:?}"
            );
            assert!(
                check_case(Category::Simple, &calls, answer.clone()).is_err(),
                "{call:?}"
            );
        }
        let with_marker = [("other", json!({"x": 1})), (MALFORMED_CALL, json!({}))];
        assert!(check_case(Category::Simple, &with_marker, answer).is_ok());
    }

    #[test]
    fn irrelevance_passes_only_without_calls() {
        assert!(
            check_case(
                Category::Irrelevance,
                &[("undeclared", json!({}))],
                json!([])
            )
            .is_err()
        );
        assert!(check_case(Category::Irrelevance, &[], json!([])).is_ok());
        assert!(
            check_case(
                Category::Irrelevance,
                &[("other", json!({"x": 1}))],
                json!([])
            )
            .is_err()
        );
    }

    #[test]
    fn a_simple_question_wants_exactly_one_call() {
        let answer = json!([{"geo.area": {"base": [1]}}]);
        assert!(check_case(Category::Simple, &[], answer.clone()).is_err());
        let two = [
            ("geo_area", json!({"base": 1})),
            ("geo_area", json!({"base": 1})),
        ];
        assert!(check_case(Category::Simple, &two, answer).is_err());
    }

    #[test]
    fn arguments_that_are_not_an_object_fail_on_the_required_parameter() {
        assert!(!simple(json!("base=10"), json!({"base": [10]})));
    }

    #[test]
    fn standardisation() {
        for (raw, out) in [
            ("April 1, 2024", "april12024"),
            ("San_Francisco-CA", "sanfranciscoca"),
            ("it's 2*3^2/1.5", "it\"s23215"),
            ("ÉCOLE", "école"),
        ] {
            assert_eq!(standardise(raw), out, "{raw}");
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    proptest! {
        #[test]
        fn standardising_is_idempotent_and_leaves_no_removed_character(text in ".{0,40}") {
            let once = standardise(&text);
            prop_assert_eq!(standardise(&once), once.clone());
            prop_assert!(!once.chars().any(|c| " ,./-_*^'".contains(c)));
        }

        #[test]
        fn parallel_calls_with_distinct_values_pass_in_any_order(
            values in proptest::collection::btree_set(-1000_i64..1000, 1..6),
            seed in any::<u64>(),
        ) {
            let functions = [json!({"name": "f.g", "parameters": {"type": "dict",
                "properties": {"x": {"type": "integer"}}, "required": ["x"]}})];
            let answers: Vec<Value> = values.iter().map(|v| json!({"f.g": {"x": [v]}})).collect();
            let mut calls: Vec<Call> = values
                .iter()
                .map(|v| Call { name: "f_g".into(), args: json!({"x": v}) })
                .collect();
            // A deterministic shuffle from the seed.
            let len = calls.len();
            for i in (1..len).rev() {
                let j = usize::try_from(seed.rotate_left(u32::try_from(i).unwrap_or(0)) % (i as u64 + 1)).unwrap_or(0);
                calls.swap(i, j);
            }
            prop_assert!(check(Category::Parallel, &functions, &calls, &answers).is_ok());
            calls.pop();
            prop_assert!(check(Category::Parallel, &functions, &calls, &answers).is_err());
        }
    }
}

/// The checker against BFCL's own possible answers: a call made of the first possible
/// value of each parameter must pass every question.
#[cfg(test)]
mod ground_truth {
    use super::*;
    use crate::bfcl::data;

    /// The first possible value that is not `""`, with objects inside made the same way.
    fn pick(options: &Value) -> Option<Value> {
        let first = options.as_array()?.iter().find(|o| **o != "")?.clone();
        Some(unwrap(first))
    }

    fn unwrap(value: Value) -> Value {
        match value {
            Value::Object(m) if m.values().all(Value::is_array) => Value::Object(
                m.into_iter()
                    .filter_map(|(k, o)| pick(&o).map(|x| (k, x)))
                    .collect(),
            ),
            Value::Array(items) if !items.is_empty() && items.iter().all(Value::is_object) => {
                Value::Array(items.into_iter().map(unwrap).collect())
            }
            other => other,
        }
    }

    fn ideal(answer: &Value) -> Call {
        let (name, params) = answer.as_object().and_then(|m| m.iter().next()).unwrap();
        let args = params
            .as_object()
            .unwrap()
            .iter()
            .filter_map(|(p, options)| pick(options).map(|v| (p.clone(), v)))
            .collect();
        Call {
            name: wire_name(name),
            args: Value::Object(args),
        }
    }

    /// The ids whose ideal calls fail, with the calls in answer order or reversed.
    fn failures(reversed: bool) -> Vec<String> {
        let dir = crate::util::cache_dir().unwrap().join("bfcl/2026.3.23");
        let mut failed = Vec::new();
        for category in [Category::Simple, Category::Multiple, Category::Parallel] {
            for item in data::load(&dir, category).unwrap() {
                let mut calls: Vec<Call> = item.answers.iter().map(ideal).collect();
                if reversed {
                    calls.reverse();
                }
                if check(category, &item.functions, &calls, &item.answers).is_err() {
                    failed.push(item.id);
                }
            }
        }
        failed
    }

    #[test]
    #[ignore = "needs BFCL's data in the cache: `cargo xtask eval --bfcl` fetches it"]
    fn every_ground_truth_passes_in_any_order_but_one() {
        assert_eq!(failures(false), Vec::<String>::new());
        // parallel_178's first answer also accepts the third's company: BFCL's matching
        // takes the first call that fits, in answer order, so reversed calls fail there
        // with BFCL's checker too.
        assert_eq!(failures(true), ["parallel_178"]);
    }
}
