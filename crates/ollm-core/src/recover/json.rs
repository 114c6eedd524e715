//! JSON calls: reading call objects in every spelling models use, and the bare-JSON
//! whole-reply form.
//!
//! Decisions: a call object is `{"name": ..., "arguments" | "parameters" | "args" |
//! "input": {...} | "{...}"}` (keys in any order), OpenAI's `{"type": "function",
//! "function": {...}}`, or llama.cpp's envelope `{"tool_calls": [...]}`; an object with
//! only a `name` (or `function` as a string, some fine-tunes' spelling) is a call only when that name is offered (otherwise `{"name": "Alice"}`
//! would be one). Doubled braces (`{{...}}}`, a Qwen2.5 slip) are read by dropping the
//! extra ones. A backslash in a string that starts no JSON escape (`"\d+"`, a regex
//! written as the model meant it) is read as itself. Several values may follow one
//! another, separated by whitespace, `,` or `;`.

use serde_json::{Map, Value};

use super::{OfferedTools, RawArgs, RawCall, scan};
use crate::coach::Rule;

const ARG_KEYS: &[&str] = &["arguments", "parameters", "args", "input"];

/// Every JSON value in `s`, read leniently (see the module docs).
pub(super) fn values(s: &str) -> Result<Vec<Value>, String> {
    let s = unfence(s.trim());
    let read = braces_repaired(s);
    match (&read, lone_backslashes_doubled(s)) {
        (Err(_), Some(doubled)) => braces_repaired(&doubled).or(read),
        _ => read,
    }
}

/// The values of `s`, or of `s` with doubled opening braces or one missing closing
/// bracket repaired (see the module docs).
fn braces_repaired(s: &str) -> Result<Vec<Value>, String> {
    match sequence(s) {
        Ok(values) => Ok(values),
        Err(e) => match s.strip_prefix('{') {
            Some(inner) if inner.trim_start().starts_with('{') => {
                let inner = inner.trim_start_matches(|c: char| c == '{' || c.is_whitespace());
                let inner = format!("{{{inner}");
                sequence(inner.trim_end().strip_suffix('}').unwrap_or(&inner))
                    .or_else(|_| sequence(&closed(&inner)))
                    .map_err(|_| e)
            }
            _ => sequence(&closed(s)).map_err(|_| e),
        },
    }
}

/// `s` with the brackets it leaves open closed at its end, in order (strings and their
/// escapes skipped): `{"name": "f", "arguments": {"a": 1}` gains its last `}`. A call
/// cut one brace short is a Qwen2.5 slip, as are doubled opening braces (above). Text
/// that closes more than it opens is returned as it is.
fn closed(s: &str) -> String {
    let mut open = Vec::new();
    let (mut in_string, mut escaped) = (false, false);
    for c in s.chars() {
        match (in_string, c) {
            (true, _) if escaped => escaped = false,
            (true, '\\') => escaped = true,
            (true, '"') | (false, '"') => in_string = !in_string,
            (false, '{') => open.push('}'),
            (false, '[') => open.push(']'),
            (false, '}' | ']') => {
                let expected = open.pop();
                if expected != Some(c) {
                    return s.to_owned();
                }
            }
            _ => {}
        }
    }
    if in_string || open.len() > MAX_CLOSED {
        return s.to_owned();
    }
    let mut out = s.trim_end().to_owned();
    out.extend(open.iter().rev());
    out
}

/// `s` with each backslash inside a string that starts no JSON escape doubled, or
/// `None` when there is none: `"\d+"` reads as the regex `\d+` its writer meant. The
/// 1.5B wrote `search_text` calls with a regex in `pattern` unescaped, which JSON
/// refuses ("invalid escape"), and the malformed call ended in an answer from nothing
/// (eval tuning part, 2026-11-28, "how many days of backups does backup.py keep?").
fn lone_backslashes_doubled(s: &str) -> Option<String> {
    let (mut out, mut changed) = (String::with_capacity(s.len() + 8), false);
    let (mut in_string, mut chars) = (false, s.chars().peekable());
    while let Some(c) = chars.next() {
        out.push(c);
        match (in_string, c) {
            (true, '\\') => {
                let next = chars.peek().copied();
                let escape = matches!(next, Some('"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't'))
                    || (next == Some('u') && unicode_escape(chars.clone()));
                if escape {
                    out.extend(chars.next());
                } else {
                    out.push('\\');
                    changed = true;
                }
            }
            (_, '"') => in_string = !in_string,
            _ => {}
        }
    }
    changed.then_some(out)
}

/// Whether `rest`, which starts at a `u` after a backslash, is `u` and four hex digits.
fn unicode_escape(rest: impl Iterator<Item = char>) -> bool {
    let digits: Vec<char> = rest.skip(1).take(4).collect();
    digits.len() == 4 && digits.iter().all(char::is_ascii_hexdigit)
}

/// The most brackets [`closed`] adds: a slip leaves one open; more is a reply cut short,
/// whose arguments may be incomplete, and stays malformed.
const MAX_CLOSED: usize = 1;

/// The body of a fence wrapped around JSON inside call markup, or `s` itself.
fn unfence(s: &str) -> &str {
    match scan::only_fences(s).as_deref() {
        Some([body]) => body.trim(),
        _ => s,
    }
}

fn sequence(s: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        at += s[at..].len()
            - s[at..]
                .trim_start_matches(|c: char| c.is_whitespace() || c == ',' || c == ';')
                .len();
        let rest = &s[at..];
        if rest.is_empty()
            || (!out.is_empty() && rest.chars().all(|c| c == '}' || c.is_whitespace()))
        {
            break;
        }
        let (len, value) = scan::first_json(rest)?;
        out.push(value);
        at += len;
    }
    if out.is_empty() {
        return Err("no JSON found".to_owned());
    }
    Ok(out)
}

/// The calls in `value`, or `None` when it is not shaped like calls at all.
/// `bare` is the offered tools when the value stands alone (not inside call markup), where
/// an object with only a `name` counts only if it names an offered tool.
pub(super) fn calls_in(value: Value, bare: Option<&OfferedTools>) -> Option<Vec<RawCall>> {
    match value {
        Value::Array(items) if !items.is_empty() => {
            let mut out = Vec::new();
            for item in items {
                out.extend(calls_in(item, bare)?);
            }
            Some(out)
        }
        Value::Object(object) => {
            if let Some(Value::Array(calls)) = object.get("tool_calls") {
                if !calls.is_empty() {
                    return calls_in(Value::Array(calls.clone()), bare);
                }
            }
            if let Some(Value::Object(inner)) = object.get("function") {
                return calls_in(Value::Object(inner.clone()), bare);
            }
            one_call(object, bare).map(|c| vec![c])
        }
        _ => None,
    }
}

/// One call object, or `None` when it is not one.
fn one_call(mut object: Map<String, Value>, bare: Option<&OfferedTools>) -> Option<RawCall> {
    let name = match object.remove("name") {
        Some(Value::String(name)) => name,
        None => match object.remove("function") {
            Some(Value::String(name)) => name,
            _ => return None,
        },
        Some(_) => return None,
    };
    let key = ARG_KEYS.iter().find(|k| object.contains_key(**k));
    let Some(key) = key else {
        let only_meta = object
            .keys()
            .all(|k| matches!(k.as_str(), "id" | "type" | "index"));
        let named = bare.is_none_or(|o| o.resolve(&name).is_some());
        return (only_meta && named).then(|| Ok((name, RawArgs::Json(Map::new()))));
    };
    let args = object.remove(*key).unwrap_or(Value::Null);
    Some(arguments(args).map(|map| (name, RawArgs::Json(map))))
}

/// Arguments given as an object, a string holding one, or nothing.
pub(super) fn arguments(args: Value) -> Result<Map<String, Value>, String> {
    match args {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map),
        Value::String(s) if s.trim().is_empty() => Ok(Map::new()),
        Value::String(s) => match serde_json::from_str::<Value>(&s) {
            Ok(Value::Object(map)) => Ok(map),
            _ => Err(format!(
                "the arguments must be a JSON object, got the string {s:?}"
            )),
        },
        other => Err(format!("the arguments must be a JSON object, got {other}")),
    }
}

/// The calls in a block body that must hold call JSON; one error when it does not.
pub(super) fn body_calls(body: &str, what: &str) -> Vec<RawCall> {
    let shape = format!("{what} must hold {{\"name\": ..., \"arguments\": {{...}}}}");
    match values(body) {
        Err(e) => vec![Err(format!("{shape}; {e}"))],
        Ok(values) => {
            let mut out = Vec::new();
            for value in values {
                match calls_in(value, None) {
                    Some(calls) => out.extend(calls),
                    None => out.push(Err(shape.clone())),
                }
            }
            out
        }
    }
}

/// The reply as bare JSON calls (or JSON alone in fences), if it is that; else, for a
/// reply that opens with calls to offered tools and goes on with something else, those
/// calls (see [`leading_calls`]).
pub(super) fn whole_reply(body: &str, offered: &OfferedTools) -> Option<Vec<RawCall>> {
    match whole(body, offered) {
        Some(calls) if calls.iter().any(Result::is_ok) => Some(calls),
        whole if offered.is_on(Rule::InventedResultCut) => {
            leading_calls(body.trim(), offered).or(whole)
        }
        whole => whole,
    }
}

/// The calls a reply opens with, when what follows them is not a call: small models
/// write the call and then invent its result, as JSON
/// (`{"name": "read_file", ...}` then `{"type": "error", "message": "No such file"}`)
/// or as prose. The calls run; what follows is dropped, so the invented part never
/// reaches the user. Only calls to offered tools, bare at the very start or in fences
/// that open the reply, count: JSON amid prose stays an example.
fn leading_calls(body: &str, offered: &OfferedTools) -> Option<Vec<RawCall>> {
    let mut calls = Vec::new();
    let mut rest = body;
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ',' || c == ';');
        let (used, found) = if rest.starts_with("```") {
            let (body, used) = first_fence(rest)?;
            (used, offered_calls(values(body).ok()?, offered))
        } else if rest.starts_with('{') {
            let Ok((used, value)) = scan::first_json(rest) else {
                break;
            };
            (used, offered_calls(vec![value], offered))
        } else {
            break;
        };
        match found {
            Some(found) => calls.extend(found),
            None => break,
        }
        rest = &rest[used..];
    }
    (!calls.is_empty()).then_some(calls)
}

/// The body of the fence that opens `s` (an info string calls are fenced in) and the
/// bytes up to the end of its closing line.
fn first_fence(s: &str) -> Option<(&str, usize)> {
    let after_open = s.strip_prefix("```")?;
    let info_end = after_open.find('\n')?;
    scan::call_fence(s)?.then_some(())?;
    let body_at = 3 + info_end + 1;
    let close = s[body_at..].find("```")?;
    Some((&s[body_at..body_at + close], body_at + close + 3))
}

/// The calls in `values` when every value is calls to offered tools.
fn offered_calls(values: Vec<Value>, offered: &OfferedTools) -> Option<Vec<RawCall>> {
    let mut out = Vec::new();
    for value in values {
        for call in calls_in(value, Some(offered))? {
            match &call {
                Ok((name, _)) if offered.resolve(name).is_some() => out.push(call),
                _ => return None,
            }
        }
    }
    (!out.is_empty()).then_some(out)
}

/// The reply as bare JSON calls (or JSON alone in fences), if it is all that.
fn whole(body: &str, offered: &OfferedTools) -> Option<Vec<RawCall>> {
    let trimmed = body.trim();
    let bodies = if trimmed.starts_with("```") {
        scan::only_fences(trimmed)?
    } else if trimmed.starts_with('{') || trimmed.starts_with('[') {
        vec![trimmed]
    } else {
        return None;
    };
    let mut calls = Vec::new();
    for inner in bodies {
        match values(inner) {
            Ok(values) => {
                for value in values {
                    calls.extend(calls_in(value, Some(offered))?);
                }
            }
            Err(e) if looks_like_call(inner) => {
                calls.push(Err(format!(
                    "the reply looks like a JSON tool call but {e}"
                )));
            }
            Err(_) => return None,
        }
    }
    (!calls.is_empty()).then_some(calls)
}

/// Whether broken JSON still reads as an attempted call.
fn looks_like_call(s: &str) -> bool {
    let s = s.trim_start();
    s.starts_with('{')
        && s.contains("\"name\"")
        && ARG_KEYS.iter().any(|k| s.contains(&format!("\"{k}\"")))
}
