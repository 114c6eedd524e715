//! Tool calls that a model wrote as text, recovered per call and in every format local
//! models use, without ever running an example.
//!
//! One entry point, [`recover`], takes a whole reply and the tools on offer and returns a
//! [`Recovery`]: the prose to keep (call markup cut out, nothing duplicated) and, in
//! order, one [`Recovered`] per call the reply makes, each a call to run, a call to a tool
//! that is not offered, or a malformed block to answer with an error, so calls and results
//! stay 1:1 and the model can retry. [`HoldBack`] is its streaming twin for display.
//!
//! Decisions:
//! - **Only deliberate markup counts.** A marker (`<tool_call>`, `<function=`,
//!   `[TOOL_CALLS]`, `<|python_tag|>`, `<|python_start|>`, `>>>name`, DeepSeek's
//!   `<｜tool▁calls▁begin｜>`, LFM's `<|tool_call_start|>`) counts only when it opens a
//!   line (special tokens also mid-line, outside inline code) outside a code fence and
//!   outside the reasoning (`<think>...</think>`, or the text
//!   before an orphan `</think>`). Inline code, fenced examples and drafts in the reasoning
//!   never run; a block drafted in reasoning and repeated outside runs once, from outside.
//! - **Bare forms only as the whole reply.** JSON (one object, an array, several objects,
//!   llama.cpp's `{"tool_calls": [...]}` envelope, OpenAI's `{"function": {...}}`) and a
//!   pythonic list `[f(a=1)]` are calls only when they are all of the reply after the
//!   reasoning, bare or alone in fences (```` ```json ````). JSON amid prose is an example.
//! - A pythonic list on lines of its own that ends the reply after prose is a call too,
//!   but only when every name in it is an offered tool (Llama 4 reasons first).
//! - **Per call.** Each block is parsed on its own; a malformed one becomes
//!   [`Recovered::Malformed`] when the reply is clearly a call (another block parsed, the
//!   reply is nothing but markup, or the block ends the reply); otherwise the reply is left
//!   as prose untouched, because a broken block amid prose is more likely an explanation.
//! - **Names** are matched to an offered tool exactly, then without a `functions.` prefix
//!   and a `:N` suffix (`functions.read_file:0`, servers' own spellings), then with the
//!   coach's `name-repair` on, ignoring case, then as a path written into the name
//!   (`read_config.toml`; `path-in-name`) or as a file's name (`file-as-name`). A well-formed call to a tool not
//!   on offer in a reply that is clearly a call is [`Recovered::UnknownTool`], so the
//!   caller can answer `Error: Unknown tool "<name>"; available: ...`.
//! - **Qwen3-Coder XML values are strings** unless the tool's JSON schema types the
//!   property otherwise (integer, number, boolean, array, object), then they are parsed.
//! - Everything here is pure text processing: no I/O, no allocation beyond the reply.
//! - **Wired into the native strategy** (`strategy/native.rs`): it runs on each reply
//!   that brought no native calls; the strategy records calls with only the prose as the
//!   message text, answers [`Recovered::UnknownTool`] with `Error: Unknown tool "<name>";
//!   available: ...` and [`Recovered::Malformed`] with its reason, without running
//!   anything, and shows streamed text through [`HoldBack`].
//! - **[`HoldBack`] is incremental**: each line is scanned once and only unreleased text
//!   on the last line is looked at again, so a reply costs linear time (the rescanning
//!   rule it replaced is the tests' oracle).

mod blocks;
mod deepseek;
mod functionary;
mod hermes;
mod json;
mod lfm;
mod llama;
mod mistral;
mod pythonic;
mod qwen_xml;
mod scan;
mod stream;
#[cfg(test)]
mod tests;
mod types;

use ollm_types::{ToolCall, ToolSchema};
use serde_json::Value;

use crate::coach::Rule;
use blocks::Block;
pub(crate) use qwen_xml::typed_strings;
pub(crate) use stream::HoldBack;
pub use types::{CallFormat, Rejected, TextCall, TextCalls};
pub(crate) use types::{Format, OfferedTools, Recovered, Recovery, Repair};
use types::{RawArgs, RawCall};

/// The calls that `text` makes, by the rules in the module docs.
pub(crate) fn recover(text: &str, offered: &OfferedTools) -> Recovery {
    let body_from = scan::think_end(text);
    let blocks = blocks::marker_blocks(text, body_from);
    if !blocks.is_empty() {
        return from_blocks(text, body_from, blocks, offered);
    }
    let start = body_from + (text[body_from..].len() - text[body_from..].trim_start().len());
    match whole_reply(&text[start..], offered) {
        Some((format, calls)) => {
            let (calls, repairs): (Vec<_>, _) = calls
                .into_iter()
                .map(|c| resolve(c, format, offered))
                .unzip();
            Recovery {
                prose: text[..start].to_owned(),
                formats: vec![format; calls.len()],
                calls,
                repairs,
            }
        }
        None => trailing_list(text, body_from, offered).unwrap_or_else(|| prose_only(text)),
    }
}

/// Reads the tool calls a model wrote as text in `reply`, for the tools a request
/// declared (`tools`: their names and argument schemas).
///
/// Every format local models use is read (Hermes `<tool_call>`, Qwen3-Coder XML,
/// Mistral, Llama, pythonic lists, Functionary, DeepSeek, LFM, bare or fenced JSON), per
/// call, and only deliberate markup counts: inline code, fenced examples amid prose and
/// drafts inside `<think>` never become calls. Names are matched to a declared tool
/// exactly, or without a `functions.` prefix and a `:N` suffix. The result holds
/// the prose without the call markup, the calls to declared tools (each with the format
/// it came from) and, apart, what was clearly meant as a call but cannot run
/// ([`Rejected`]). Pure text processing: nothing runs, nothing is sent.
///
/// ```
/// use ollm_core::{CallFormat, recover_calls};
/// use ollm_types::ToolSchema;
/// use serde_json::json;
///
/// let tools = [ToolSchema::new("read_file", "Reads a file.", json!({"type": "object"}))];
/// let reply = "Let me look.\n<tool_call>{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}</tool_call>";
/// let read = recover_calls(reply, &tools);
/// assert_eq!(read.prose.trim(), "Let me look.");
/// assert_eq!(read.calls[0].call.name, "read_file");
/// assert_eq!(read.calls[0].call.arguments["path"], "a.txt");
/// assert_eq!(read.calls[0].format, CallFormat::Hermes);
/// ```
pub fn recover_calls(reply: &str, tools: &[ToolSchema]) -> TextCalls {
    let offered = OfferedTools::new(tools.iter().map(|t| (t.name.clone(), t.parameters.clone())));
    let recovery = recover(reply, &offered);
    let body = &reply[scan::think_end(reply)..];
    let fenced = body.trim_start().starts_with("```");
    let mut read = TextCalls {
        prose: recovery.prose,
        ..TextCalls::default()
    };
    for (item, format) in recovery.calls.into_iter().zip(recovery.formats) {
        let format = CallFormat::of(format, fenced);
        match item {
            Recovered::Call { name, arguments } => {
                let id = format!("text-call-{}", read.calls.len() + 1);
                let call = ToolCall {
                    id,
                    name,
                    arguments,
                };
                read.calls.push(TextCall { call, format });
            }
            Recovered::UnknownTool { name, .. } => {
                read.rejected.push(Rejected::UnknownTool { name });
            }
            Recovered::Malformed { reason, .. } => {
                read.rejected.push(Rejected::Malformed { format, reason });
            }
        }
    }
    read
}

/// Whether `text`, which makes no call, shows one instead: a fenced block, or a line of
/// its own, holding a JSON call to an offered tool amid prose ("Here's how you can call
/// it: ```json {...}```"), or call markup with nothing in it. Such a reply tells the user how to use the tools instead of
/// using them; it never runs (see the module docs), but the caller may ask the model to
/// act.
pub(crate) fn shows_call(text: &str, offered: &OfferedTools) -> bool {
    let body_from = scan::think_end(text);
    if !blocks::marker_blocks(text, body_from).is_empty() {
        // Call markup with no call in it (`<tools></tools>`): meant to act, did not.
        return true;
    }
    let body = &text[body_from..];
    let mut fence: Option<String> = None;
    for line in body.lines() {
        let trimmed = line.trim();
        match &mut fence {
            Some(inner) if scan::is_fence(trimmed) => {
                if names_offered_call(inner, offered) {
                    return true;
                }
                fence = None;
            }
            Some(inner) => {
                inner.push_str(line);
                inner.push('\n');
            }
            None if scan::is_fence(trimmed) => fence = Some(String::new()),
            None if trimmed.starts_with('{') && names_offered_call(trimmed, offered) => {
                return true;
            }
            None => {}
        }
    }
    false
}

/// Whether `s` is JSON calls, every one to an offered tool.
fn names_offered_call(s: &str, offered: &OfferedTools) -> bool {
    let Ok(values) = json::values(s) else {
        return false;
    };
    let calls: Vec<RawCall> = values
        .into_iter()
        .filter_map(|v| json::calls_in(v, Some(offered)))
        .flatten()
        .collect();
    !calls.is_empty()
        && calls
            .iter()
            .all(|c| matches!(c, Ok((name, _)) if offered.resolve(name).is_some()))
}

/// A pythonic list of calls that ends the reply on lines of its own after prose (Llama 4
/// writes its reasoning first, vllm#22917); every name must be offered.
fn trailing_list(text: &str, from: usize, offered: &OfferedTools) -> Option<Recovery> {
    let start = scan::list_lines(text, from).into_iter().find(|&at| {
        let rest = text[at..].trim();
        rest.ends_with(']')
            && pythonic::parse_calls(rest)
                .is_ok_and(|calls| calls.iter().all(|(n, _)| offered.resolve(n).is_some()))
    })?;
    let calls = pythonic::parse_calls(text[start..].trim()).ok()?;
    let (calls, repairs): (Vec<_>, _) = calls
        .into_iter()
        .map(|c| resolve(Ok(c), Format::Pythonic, offered))
        .unzip();
    Some(Recovery {
        prose: text[..start].to_owned(),
        formats: vec![Format::Pythonic; calls.len()],
        calls,
        repairs,
    })
}

fn prose_only(text: &str) -> Recovery {
    Recovery {
        prose: text.to_owned(),
        ..Recovery::default()
    }
}

/// The reply (after the reasoning) as a whole-reply form: JSON or a pythonic list.
fn whole_reply(body: &str, offered: &OfferedTools) -> Option<(Format, Vec<RawCall>)> {
    if let Some(calls) = json::whole_reply(body, offered) {
        return Some((Format::Json, calls));
    }
    let trimmed = body.trim();
    if trimmed.starts_with('[') && trimmed.ends_with(']') {
        let calls = pythonic::parse_calls(trimmed).ok()?;
        return Some((Format::Pythonic, calls.into_iter().map(Ok).collect()));
    }
    None
}

/// The recovery when marker blocks were found: all of them, or none if the reply is not
/// clearly a call.
fn from_blocks(
    text: &str,
    body_from: usize,
    blocks: Vec<Block>,
    offered: &OfferedTools,
) -> Recovery {
    let any_good = blocks.iter().flat_map(|b| &b.calls).any(|c| match c {
        Ok((name, _)) => offered.resolve(name).is_some(),
        Err(_) => false,
    });
    let mut prose = String::new();
    let mut outside = String::new();
    let mut at = 0;
    for block in &blocks {
        prose.push_str(&text[at..block.start]);
        outside.push_str(&text[at.max(body_from)..block.start.max(body_from)]);
        at = block.end;
    }
    prose.push_str(&text[at..]);
    let last_at_end = text[at..].trim().is_empty();
    let clearly = any_good || last_at_end || outside.trim().is_empty();
    if !clearly {
        return prose_only(text);
    }
    let (formats, (calls, repairs)) = blocks
        .into_iter()
        .flat_map(|b| {
            let format = b.format;
            b.calls.into_iter().map(move |c| (format, c))
        })
        .map(|(format, c)| (format, resolve(c, format, offered)))
        .unzip();
    Recovery {
        prose,
        calls,
        formats,
        repairs,
    }
}

/// A parsed call matched against the offered tools, with the coach's rule that repaired
/// it when one did (its name matched loosely, or a tool found from its name or its
/// arguments), so the caller can say so.
fn resolve(call: RawCall, format: Format, offered: &OfferedTools) -> (Recovered, Option<Repair>) {
    let (name, args) = match call {
        Ok(call) => call,
        Err(reason) => return (Recovered::Malformed { format, reason }, None),
    };
    let Some(tool) = offered.resolve(&name) else {
        let repaired = [
            (Rule::PathInName, path_in_name as Finder),
            (Rule::FileAsName, file_as_name),
            (Rule::ToolFromArguments, |_, args, offered| {
                tool_from_arguments(args, offered)
            }),
        ]
        .into_iter()
        .find_map(|(rule, find)| find(&name, &args, offered).map(|call| (call, rule)));
        return match repaired {
            Some((call, rule)) => (
                call,
                Some(Repair {
                    rule,
                    written: name,
                }),
            ),
            None => (
                Recovered::UnknownTool {
                    name,
                    arguments: args.into_map(),
                },
                None,
            ),
        };
    };
    let loosely = !offered.names_exactly(&name);
    let repair = loosely.then(|| Repair {
        rule: Rule::NameRepair,
        written: name.clone(),
    });
    let arguments = match args {
        RawArgs::Json(map) => map,
        RawArgs::Strings(pairs) => qwen_xml::typed(pairs, offered.schema(tool)),
    };
    let call = Recovered::Call {
        name: tool.to_owned(),
        arguments,
    };
    (call, repair)
}

/// A rule's way of finding the offered tool a call to an unknown name meant.
type Finder = fn(&str, &RawArgs, &OfferedTools) -> Option<Recovered>;

/// A native call (one the server parsed) to a tool that is not offered, repaired as the
/// same call written as text would be: its name matched loosely (`name-repair`, which
/// alone also takes a server's `functions.` prefix off a native call), or a
/// path taken out of its name (`path-in-name`, `file-as-name`). The repaired call, with
/// its id, and the rule; `None` when the name is offered or no rule applies. Seen:
/// llama-server parsed the 0.5B's `{"name": "backup.py", "arguments": {}}` as a native
/// call, which only the unknown-tool answer met (14 runs of the day's eval traces).
pub(crate) fn repair_native(call: &ToolCall, offered: &OfferedTools) -> Option<(ToolCall, Rule)> {
    if offered.tools.iter().any(|(t, _)| *t == call.name) {
        return None;
    }
    let args = RawArgs::Json(call.arguments.clone());
    let loosely = offered
        .is_on(Rule::NameRepair)
        .then(|| offered.resolve(&call.name));
    let (repaired, rule) = match loosely.flatten() {
        Some(tool) => (
            Recovered::Call {
                name: tool.to_owned(),
                arguments: call.arguments.clone(),
            },
            Rule::NameRepair,
        ),
        None => match path_in_name(&call.name, &args, offered) {
            Some(found) => (found, Rule::PathInName),
            None => match file_as_name(&call.name, &args, offered) {
                Some(found) => (found, Rule::FileAsName),
                None => (
                    tool_from_arguments(&args, offered)?,
                    Rule::ToolFromArguments,
                ),
            },
        },
    };
    let Recovered::Call { name, arguments } = repaired else {
        return None;
    };
    let id = call.id.clone();
    Some((
        ToolCall {
            id,
            name,
            arguments,
        },
        rule,
    ))
}

/// A call named like a file (`{"name": "config.toml", "arguments": {}}`, as
/// Qwen2.5-Coder-0.5B writes for "which port does config.toml set?", or `{"name":
/// "backup.py", "arguments": {"days": 7}}` for "backup.py keep days?"): the one offered
/// tool named `read*` that takes the path argument (the coach's `file-as-name`), with the
/// name as the path. Only a name of one word with an extension or a `/` that does not
/// open with an offered tool's verb (`search_a.txt`). Of the arguments, those the read
/// tool declares are kept and the rest dropped: they say what the model looks for in
/// the file, which reading it answers. A path among them is a second path, and then
/// nothing is guessed. Reading is the one thing a file's name can ask, and it changes
/// nothing.
fn file_as_name(name: &str, args: &RawArgs, offered: &OfferedTools) -> Option<Recovered> {
    let key = path_argument(offered, Rule::FileAsName)?;
    let name = name.trim();
    // `search_a.txt` names a tool's verb: `path-in-name` territory, not a file's name.
    let verb = name.split_once('_').map(|(verb, _)| format!("{verb}_"));
    let names_a_verb = verb.is_some_and(|v| offered.tools.iter().any(|(t, _)| t.starts_with(&v)));
    if names_a_verb || !looks_like_a_file(name) {
        return None;
    }
    let tool = the_one_taking(offered, "read", key)?;
    let schema = offered.schema(tool);
    let mut arguments = match args {
        RawArgs::Json(map) => map.clone(),
        RawArgs::Strings(pairs) => qwen_xml::typed(pairs.clone(), schema),
    };
    if arguments.contains_key(key) {
        return None;
    }
    let declared = schema.and_then(|s| s.get("properties"));
    arguments.retain(|k, _| declared.is_some_and(|p| p.get(k).is_some()));
    arguments.insert(key.to_owned(), Value::String(name.to_owned()));
    Some(Recovered::Call {
        name: tool.to_owned(),
        arguments,
    })
}

/// A call to a tool that is not offered whose arguments fit exactly one offered tool:
/// every key declared by that tool's schema and every key it requires given (the coach's
/// `tool-from-arguments`). The 1.5B called `wc` with `{"program": "wc", "args":
/// ["sales.csv"]}` for "wc -l sales.csv" (14 runs of the tuning part's passes, each
/// answered "unknown tool"), and the 0.5B `save_port_from_config_toml` with
/// `search_text`'s three arguments: the arguments say which tool was meant where the
/// name, taken from the user's words, does not. No arguments, or arguments two tools
/// take (`{"path": ...}` fits a read and a listing), guess nothing. It only ever names
/// a tool the request offered, with the arguments the model wrote, so it reaches
/// nothing a direct call could not; a tool withheld is not offered.
fn tool_from_arguments(args: &RawArgs, offered: &OfferedTools) -> Option<Recovered> {
    if !offered.is_on(Rule::ToolFromArguments) {
        return None;
    }
    let keys: Vec<&str> = match args {
        RawArgs::Json(map) => map.keys().map(String::as_str).collect(),
        RawArgs::Strings(pairs) => pairs.iter().map(|(k, _)| k.as_str()).collect(),
    };
    if keys.is_empty() {
        return None;
    }
    let fits = |schema: &Value| {
        let declared = schema.get("properties").and_then(Value::as_object);
        let required = schema.get("required").and_then(Value::as_array);
        let all_declared = declared.is_some_and(|p| keys.iter().all(|k| p.contains_key(*k)));
        let given = |r: &Value| r.as_str().is_some_and(|r| keys.contains(&r));
        all_declared && required.is_none_or(|r| r.iter().all(given))
    };
    let mut fitting = offered.tools.iter().filter(|(_, schema)| fits(schema));
    let (tool, schema) = fitting.next()?;
    if fitting.next().is_some() {
        return None;
    }
    let arguments = match args {
        RawArgs::Json(map) => map.clone(),
        RawArgs::Strings(pairs) => qwen_xml::typed(pairs.clone(), Some(schema)),
    };
    Some(Recovered::Call {
        name: tool.clone(),
        arguments,
    })
}

/// The argument the caller's tools take a path in, when `rule` is on.
fn path_argument(offered: &OfferedTools, rule: Rule) -> Option<&str> {
    (offered.coach.path_argument.as_deref()).filter(|_| offered.is_on(rule))
}

/// The one offered tool whose name starts with `prefix` and whose schema takes `key`;
/// `None` when there is none or more than one (which one is not guessed).
fn the_one_taking<'a>(offered: &'a OfferedTools, prefix: &str, key: &str) -> Option<&'a str> {
    let takes = |schema: &Value| schema.get("properties").and_then(|p| p.get(key)).is_some();
    let mut tools =
        (offered.tools.iter()).filter(|(t, schema)| t.starts_with(prefix) && takes(schema));
    let (tool, _) = tools.next()?;
    tools.next().is_none().then_some(tool.as_str())
}

/// One word of file-name characters with a `/` or an extension of 1 to 5 characters
/// (`config.toml`, `src/main.rs`, `.env`). A dotted name meant as a function
/// (`os.walk`) can pass; reading it finds no file and says so, which is what the
/// unknown-tool answer did before.
fn looks_like_a_file(name: &str) -> bool {
    let fine = |c: char| c.is_alphanumeric() || "._-/".contains(c);
    if name.is_empty() || !name.chars().all(fine) || name.ends_with('/') {
        return false;
    }
    let base = name.rsplit('/').next().unwrap_or(name);
    let extension = base.rsplit_once('.').map(|(_, e)| e);
    name.contains('/') || extension.is_some_and(|e| (1..=5).contains(&e.len()))
}

/// A call whose name carries its path (`read_config.toml` with no arguments, as
/// Qwen2.5-Coder-0.5B writes for "read config.toml": 5 of 38 eval tasks): the one offered
/// tool named `<verb>_...` that takes the path argument (the caller's word, the coach's
/// `path-in-name`), called with the rest of the name as the path. Only when the rest
/// looks like a file path (has a `.` or a `/`) and the arguments give no path.
fn path_in_name(name: &str, args: &RawArgs, offered: &OfferedTools) -> Option<Recovered> {
    let key = path_argument(offered, Rule::PathInName)?;
    let (verb, path) = name.trim().split_once('_')?;
    let no_path = match args {
        RawArgs::Json(map) => !map.contains_key(key),
        RawArgs::Strings(pairs) => pairs.iter().all(|(k, _)| k != key),
    };
    if verb.is_empty() || !no_path || !(path.contains('.') || path.contains('/')) {
        return None;
    }
    let tool = the_one_taking(offered, &format!("{verb}_"), key)?;
    let mut arguments = match args {
        RawArgs::Json(map) => map.clone(),
        RawArgs::Strings(pairs) => qwen_xml::typed(pairs.clone(), offered.schema(tool)),
    };
    arguments.insert(key.to_owned(), Value::String(path.to_owned()));
    Some(Recovered::Call {
        name: tool.to_owned(),
        arguments,
    })
}
