//! The repeat guard's memory: which calls a run made, with their results and how often
//! each was asked for ([`CallMemory`]), and a call's identity ([`identities`], and its key:
//! its tool and its arguments as canonical JSON, keys sorted at every depth, so key
//! order does not matter). The rules that read it, and the measurements behind them,
//! are in the coach's Decisions.

use std::collections::{HashMap, HashSet};

use ollm_types::{Message, Role, ToolCall};
use serde_json::Value;

use crate::ToolRegistry;
use crate::tool::ToolOutcome;

/// How many characters of the earlier result a repeated call's answer quotes.
pub(crate) const HEAD_CHARS: usize = 200;

/// The same call asked for this many times in one run ends the run (`repeat-limit`).
pub(crate) const REPEAT_LIMIT: u32 = 3;

/// What one run's calls produced, by call.
#[derive(Debug, Default)]
pub(crate) struct CallMemory {
    seen: HashMap<String, Seen>,
    /// Whether a call of the run got a result that is not an error.
    held: bool,
}

/// A call made in this run: its result and how often it was asked for.
#[derive(Debug)]
struct Seen {
    content: String,
    times: u32,
    /// Whether its first result was not an error (it ran, and was not refused).
    ok: bool,
}

/// Where each call of a turn gets its result from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Source {
    /// Run it.
    Run,
    /// A call of an earlier turn: answer from its result.
    Earlier,
    /// The call at this index of the same turn: answer from its result.
    Twin(usize),
}

impl CallMemory {
    /// The memory of the calls `messages` made since their last user message, each
    /// answered by a tool message there (a proxy sees only a request's history). Each
    /// assistant message's calls count as one turn; identities as [`identities`] says.
    /// A message does not say whether its result was an error: a result of a tool in
    /// `tools` counts as one that is not, an undeclared tool's as one that is.
    pub(crate) fn seeded(messages: &[Message], tools: &ToolRegistry, undeclared: bool) -> Self {
        let since = messages
            .iter()
            .rposition(|m| m.role() == Role::User)
            .map_or(0, |i| i + 1);
        let messages = &messages[since..];
        let mut memory = CallMemory::default();
        for (i, message) in messages.iter().enumerate() {
            let (calls, results): (Vec<ToolCall>, Vec<ToolOutcome>) = message
                .tool_calls()
                .filter_map(|call| {
                    let result = messages[i + 1..]
                        .iter()
                        .find(|r| r.tool_call_id() == Some(call.id.as_str()))?;
                    let outcome = if tools.contains(&call.name) {
                        ToolOutcome::ok(result.text())
                    } else {
                        ToolOutcome::error(result.text())
                    };
                    Some((call.clone(), outcome))
                })
                .unzip();
            if !calls.is_empty() {
                memory.learn(&identities(tools, &calls, undeclared), &results);
            }
        }
        memory
    }

    /// Whether any call has been made in this run.
    pub(crate) fn any(&self) -> bool {
        !self.seen.is_empty()
    }

    /// Whether a call of the run got a result that is not an error.
    pub(crate) fn holds_results(&self) -> bool {
        self.held
    }

    /// Whether a call of the run to the tool `name`, with any arguments, got a result
    /// that is not an error: a call refused before it ran (`overwrite-needs-name`) or
    /// that failed does not count.
    pub(crate) fn ran(&self, name: &str) -> bool {
        let prefix = format!("{name}\u{0}");
        (self.seen.iter()).any(|(k, seen)| seen.ok && k.starts_with(&prefix))
    }

    /// How many calls the run has made: each call once per turn that made it.
    pub(crate) fn count(&self) -> u32 {
        self.seen.values().map(|seen| seen.times).sum()
    }

    /// Where each of `calls` gets its result from.
    pub(crate) fn sort(&self, calls: &[ToolCall]) -> Vec<Source> {
        let keys: Vec<String> = calls.iter().map(key).collect();
        keys.iter()
            .enumerate()
            .map(|(i, k)| {
                if self.seen.contains_key(k) {
                    Source::Earlier
                } else {
                    match keys[..i].iter().position(|earlier| earlier == k) {
                        Some(j) => Source::Twin(j),
                        None => Source::Run,
                    }
                }
            })
            .collect()
    }

    /// The answer to a repeated call, from the remembered result of the same call.
    pub(crate) fn answer(&self, call: &ToolCall) -> Option<ToolOutcome> {
        self.seen
            .get(&key(call))
            .map(|seen| repeat_result(&call.name, &seen.content))
    }

    /// Takes in a turn's calls and their results; returns the first call that has now
    /// been asked for [`REPEAT_LIMIT`] times, if any.
    pub(crate) fn learn(&mut self, calls: &[ToolCall], results: &[ToolOutcome]) -> Option<usize> {
        let mut stuck = None;
        let mut this_turn = HashSet::new();
        self.held |= results.iter().any(|r| !r.is_error);
        for (i, (call, result)) in calls.iter().zip(results).enumerate() {
            let key = key(call);
            let first_in_turn = this_turn.insert(key.clone());
            let seen = self.seen.entry(key).or_insert_with(|| Seen {
                content: result.content.clone(),
                times: 0,
                ok: !result.is_error,
            });
            if first_in_turn {
                seen.times = seen.times.saturating_add(1);
            }
            if seen.times >= REPEAT_LIMIT && stuck.is_none() {
                stuck = Some(i);
            }
        }
        stuck
    }
}

/// The result a repeated call of `name` gets, quoting the head of the earlier `content`.
pub(crate) fn repeat_result(name: &str, content: &str) -> ToolOutcome {
    let mut head: String = content.chars().take(HEAD_CHARS).collect();
    if content.chars().count() > HEAD_CHARS {
        head.push('…');
    }
    ToolOutcome::error(format!(
        "not run again: you already called {name} with these arguments, and its \
         result was: {head}\nUse that result to answer; do not repeat the call."
    ))
}

/// The calls as the guard compares them: with `undeclared` (`repeat-ignores-undeclared`),
/// each without the arguments its tool's schema does not declare (unchanged when the
/// tool is unknown or declares no `properties`); otherwise as they are.
pub(crate) fn identities(
    tools: &ToolRegistry,
    calls: &[ToolCall],
    undeclared: bool,
) -> Vec<ToolCall> {
    calls
        .iter()
        .map(|call| {
            let declared = tools
                .schema(&call.name)
                .and_then(|s| s.parameters.get("properties"))
                .and_then(Value::as_object)
                .filter(|_| undeclared);
            let mut call = call.clone();
            if let Some(declared) = declared {
                call.arguments.retain(|k, _| declared.contains_key(k));
            }
            call
        })
        .collect()
}

/// The identity of a call: its name and its arguments as canonical JSON.
fn key(call: &ToolCall) -> String {
    let mut out = call.name.clone();
    out.push('\u{0}');
    canonical(&Value::Object(call.arguments.clone()), &mut out);
    out
}

/// Writes `value` as JSON with object keys sorted at every depth.
pub(crate) fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(v, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::{Map, json};

    fn call(name: &str, args: Value) -> ToolCall {
        ToolCall::new("id", name, args).unwrap()
    }

    fn check(calls: &[ToolCall], earlier: &[ToolCall], expected: &[Source]) {
        let mut memory = CallMemory::default();
        let results: Vec<ToolOutcome> = earlier.iter().map(|_| ToolOutcome::ok("r")).collect();
        memory.learn(earlier, &results);
        assert_eq!(memory.sort(calls), expected, "{calls:?} after {earlier:?}");
    }

    #[test]
    fn repeats_are_found_by_name_and_canonical_arguments() {
        let a = call("list_dir", json!({"path": ".", "depth": 1}));
        let a_reordered = call("list_dir", json!({"depth": 1, "path": "."}));
        let b = call("list_dir", json!({"path": "src"}));
        let other_tool = call("read_file", json!({"path": ".", "depth": 1}));
        let one = std::slice::from_ref;
        check(one(&a), &[], &[Source::Run]);
        check(one(&a_reordered), one(&a), &[Source::Earlier]);
        check(
            &[b.clone(), other_tool],
            one(&a),
            &[Source::Run, Source::Run],
        );
        check(
            &[a, b, a_reordered],
            &[],
            &[Source::Run, Source::Run, Source::Twin(0)],
        );
    }

    #[test]
    fn undeclared_arguments_do_not_make_a_call_new() {
        #[derive(Debug)]
        struct Read;
        #[async_trait::async_trait]
        impl crate::Tool for Read {
            fn schema(&self) -> ollm_types::ToolSchema {
                let parameters = json!({
                    "type": "object",
                    "properties": {"path": {"type": "string"}}
                });
                ollm_types::ToolSchema::new("read", "reads", parameters)
            }
            async fn execute(&self, _: Map<String, Value>) -> Result<Value, crate::ToolError> {
                Ok(Value::Null)
            }
        }
        let tools = ToolRegistry::new().with(std::sync::Arc::new(Read)).unwrap();
        let first = [call("read", json!({"path": "a"}))];
        let later = [
            call("read", json!({"path": "a", "port": 8123})),
            call("read", json!({"path": "b", "port": 8123})),
            call("other", json!({"path": "a", "port": 8123})),
        ];
        let (first, later) = (
            identities(&tools, &first, true),
            identities(&tools, &later, true),
        );
        check(&later, &first, &[Source::Earlier, Source::Run, Source::Run]);
        assert_eq!(later[2].arguments.len(), 2, "an unknown tool keeps all");
    }

    #[test]
    fn the_third_time_is_stuck() {
        let a = call("t", json!({"x": 1}));
        let mut memory = CallMemory::default();
        let r = [ToolOutcome::ok("result")];
        assert_eq!(memory.learn(std::slice::from_ref(&a), &r), None);
        assert_eq!(memory.learn(std::slice::from_ref(&a), &r), None);
        assert_eq!(memory.learn(std::slice::from_ref(&a), &r), Some(0));
        // Twins in one turn count once.
        let mut memory = CallMemory::default();
        let twins = [a.clone(), a.clone()];
        let rr = [ToolOutcome::ok("result"), ToolOutcome::ok("result")];
        assert_eq!(memory.learn(std::slice::from_ref(&a), &r), None);
        assert_eq!(memory.learn(&twins, &rr), None);
        assert_eq!(memory.learn(&twins, &rr), Some(0));
    }

    #[test]
    fn a_repeat_quotes_the_head_of_the_result() {
        let long = "x".repeat(HEAD_CHARS + 50);
        let answer = repeat_result("read_file", &long);
        assert!(answer.is_error);
        assert!(
            answer
                .content
                .contains(&format!("{}…", "x".repeat(HEAD_CHARS)))
        );
        assert!(!answer.content.contains(&"x".repeat(HEAD_CHARS + 1)));
        let short = repeat_result("read_file", "port = 8080");
        assert!(short.content.contains("port = 8080\n"));
    }

    #[test]
    fn canonical_sorts_keys_whatever_the_map_keeps() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"d": 2, "c": [3]}}"#).unwrap();
        let mut out = String::new();
        canonical(&a, &mut out);
        assert_eq!(out, r#"{"a":{"c":[3],"d":2},"b":1}"#);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            any::<i32>().prop_map(Value::from),
            "[a-z]{0,4}".prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                prop::collection::vec(("[a-z]{1,3}", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Rebuilds every object of `v` with its keys in reverse order.
    fn reversed(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut entries: Vec<(String, Value)> =
                    m.iter().map(|(k, v)| (k.clone(), reversed(v))).collect();
                entries.reverse();
                Value::Object(entries.into_iter().collect::<Map<_, _>>())
            }
            Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
            other => other.clone(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 100, failure_persistence: None, ..ProptestConfig::default() })]

        /// Canonical JSON is valid JSON of the same value, and key order never matters.
        /// Without serde_json's `preserve_order` (see the test below) a map iterates its
        /// keys sorted whatever the insertion order, so only the round trip can fail in
        /// this build; with it, the reversed insertion makes the order check bite.
        #[test]
        fn canonical_json_ignores_key_order(v in arb_json()) {
            let (mut a, mut b) = (String::new(), String::new());
            canonical(&v, &mut a);
            canonical(&reversed(&v), &mut b);
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(serde_json::from_str::<Value>(&a).ok(), Some(v));
        }
    }
}
