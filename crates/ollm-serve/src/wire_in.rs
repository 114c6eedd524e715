//! A client's chat-completions body, read into a [`ProviderRequest`].
//!
//! # Decisions
//! - Only what a chat request means is read: messages, tools, `tool_choice`, sampling
//!   (`temperature`, `top_p`, `max_tokens` or `max_completion_tokens`, `seed`, `stop`),
//!   `stream` and `stream_options.include_usage`. Unknown fields are ignored, as OpenAI's
//!   own server does for fields it does not know.
//! - System (and `developer`) messages become the request's system prompt, joined by a
//!   blank line in order.
//! - A `tool` message names no tool on OpenAI's wire; its name is taken from the
//!   assistant call it answers (by id), since Ollama's wire and the ReAct strategy need it.
//! - Images come as `data:` URLs only: `ollm serve` never fetches a URL for a client.
//! - A named `tool_choice` must name one of the request's `tools`, as OpenAI requires:
//!   a call to anything else could never reach the client (`turns.rs`).
//! - Every problem is a [`WireError`], answered 400 in OpenAI's error shape with the
//!   offending field in `param`.

use std::collections::HashMap;

use ollm_types::{
    ContentPart, GenerationOptions, Message, ProviderRequest, Role, ToolCall, ToolChoice,
    ToolSchema,
};
use serde_json::{Map, Value};

/// A body that is not a usable chat request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub(crate) struct WireError {
    /// What is wrong.
    pub(crate) message: String,
    /// The field at fault, as OpenAI's `param`.
    pub(crate) param: Option<String>,
}

fn bad(param: &str, message: impl Into<String>) -> WireError {
    WireError {
        message: message.into(),
        param: Some(param.to_owned()),
    }
}

/// A chat request as a client sent it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ClientRequest {
    /// The request for the provider.
    pub(crate) request: ProviderRequest,
    /// Whether the client asked for a stream.
    pub(crate) stream: bool,
    /// Whether a streamed reply ends with a usage chunk.
    pub(crate) include_usage: bool,
}

/// Reads a chat-completions body.
pub(crate) fn parse(body: &[u8]) -> Result<ClientRequest, WireError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| WireError {
        message: format!("the body is not valid JSON: {e}"),
        param: None,
    })?;
    let Value::Object(body) = value else {
        return Err(WireError {
            message: "the body must be a JSON object".into(),
            param: None,
        });
    };
    let model = match body.get("model") {
        Some(Value::String(m)) if !m.is_empty() => m.clone(),
        _ => return Err(bad("model", "`model` is required (a non-empty string)")),
    };
    let Some(Value::Array(raw_messages)) = body.get("messages") else {
        return Err(bad("messages", "`messages` is required (an array)"));
    };
    let (system, messages) = messages(raw_messages)?;
    if messages.is_empty() {
        return Err(bad(
            "messages",
            "`messages` needs a message besides the system prompt",
        ));
    }
    let mut request = ProviderRequest::new(model, messages);
    request.system = system;
    request.tools = tools(body.get("tools"))?;
    request.tool_choice = tool_choice(body.get("tool_choice"), &request.tools)?;
    request.parallel_tool_calls = match body.get("parallel_tool_calls") {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(_) => {
            return Err(bad(
                "parallel_tool_calls",
                "`parallel_tool_calls` is a boolean",
            ));
        }
    };
    request.options = options(&body)?;
    let stream = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = body
        .get("stream_options")
        .and_then(|o| o.get("include_usage"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Ok(ClientRequest {
        request,
        stream,
        include_usage,
    })
}

/// The system prompt and the other messages.
fn messages(raw: &[Value]) -> Result<(Option<String>, Vec<Message>), WireError> {
    let mut system: Vec<String> = Vec::new();
    let mut out = Vec::with_capacity(raw.len());
    let mut call_names: HashMap<String, String> = HashMap::new();
    for (i, m) in raw.iter().enumerate() {
        let param = format!("messages[{i}]");
        let role = m.get("role").and_then(Value::as_str).unwrap_or_default();
        let parts = content(m.get("content"), &param)?;
        let message = match role {
            "system" | "developer" => {
                system.push(text_of(&parts));
                continue;
            }
            "user" => Message::new(Role::User, non_empty(parts), None, None),
            "assistant" => {
                let calls = calls(m.get("tool_calls"), &param)?;
                for call in &calls {
                    call_names.insert(call.id.clone(), call.name.clone());
                }
                Ok(Message::assistant_with_calls(text_of(&parts), calls))
            }
            "tool" => {
                let id = m
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let name = m
                    .get("name")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .or_else(|| call_names.get(id).cloned())
                    .unwrap_or_default();
                Ok(Message::tool_result(id, name, text_of(&parts)))
            }
            other => return Err(bad(&param, format!("unknown role {other:?}"))),
        };
        out.push(message.map_err(|e| bad(&param, e.to_string()))?);
    }
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    Ok((system, out))
}

fn non_empty(mut parts: Vec<ContentPart>) -> Vec<ContentPart> {
    if parts.is_empty() {
        parts.push(ContentPart::Text {
            text: String::new(),
        });
    }
    parts
}

fn text_of(parts: &[ContentPart]) -> String {
    parts
        .iter()
        .filter_map(|p| match p {
            ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A message's content: a string, `null`, or an array of `text` and `image_url` parts.
fn content(raw: Option<&Value>, param: &str) -> Result<Vec<ContentPart>, WireError> {
    match raw {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![ContentPart::Text { text: text.clone() }]),
        Some(Value::Array(parts)) => parts.iter().map(|p| part(p, param)).collect(),
        Some(_) => Err(bad(
            param,
            "`content` must be a string, null or an array of parts",
        )),
    }
}

fn part(raw: &Value, param: &str) -> Result<ContentPart, WireError> {
    match raw.get("type").and_then(Value::as_str) {
        Some("text") => Ok(ContentPart::Text {
            text: raw
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
        }),
        Some("image_url") => {
            let url = raw
                .pointer("/image_url/url")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let (mime, data) = url
                .strip_prefix("data:")
                .and_then(|rest| rest.split_once(";base64,"))
                .ok_or_else(|| bad(param, "images must be `data:<mime>;base64,` URLs"))?;
            Ok(ContentPart::Image {
                data: data.to_owned(),
                mime_type: mime.to_owned(),
            })
        }
        other => Err(bad(
            param,
            format!("unsupported content part type {other:?}"),
        )),
    }
}

/// An assistant message's `tool_calls`: arguments as a JSON string (OpenAI's wire) or an
/// object.
fn calls(raw: Option<&Value>, param: &str) -> Result<Vec<ToolCall>, WireError> {
    let Some(Value::Array(raw)) = raw else {
        return Ok(Vec::new());
    };
    raw.iter()
        .map(|c| {
            let id = c.get("id").and_then(Value::as_str).unwrap_or_default();
            let name = c.pointer("/function/name").and_then(Value::as_str);
            let name = name.ok_or_else(|| bad(param, "a tool call without a function name"))?;
            let arguments = match c.pointer("/function/arguments") {
                Some(Value::String(s)) if s.trim().is_empty() => Value::Object(Map::new()),
                Some(Value::String(s)) => serde_json::from_str(s)
                    .map_err(|e| bad(param, format!("tool call arguments are not JSON: {e}")))?,
                Some(other) => other.clone(),
                None => Value::Null,
            };
            ToolCall::new(id, name, arguments).map_err(|e| bad(param, e.to_string()))
        })
        .collect()
}

/// The `tools` array: functions only.
fn tools(raw: Option<&Value>) -> Result<Vec<ToolSchema>, WireError> {
    let raw = match raw {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(raw)) => raw,
        Some(_) => return Err(bad("tools", "`tools` must be an array")),
    };
    raw.iter()
        .enumerate()
        .map(|(i, t)| {
            let f = t.get("function").ok_or_else(|| {
                bad(
                    &format!("tools[{i}]"),
                    "only `function` tools are supported",
                )
            })?;
            let name = f.get("name").and_then(Value::as_str).unwrap_or_default();
            if name.is_empty() {
                return Err(bad(
                    &format!("tools[{i}].function.name"),
                    "a tool needs a name",
                ));
            }
            let description = f
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let parameters = f
                .get("parameters")
                .cloned()
                .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
            Ok(ToolSchema::new(name, description, parameters))
        })
        .collect()
}

/// The `tool_choice`; a named one must be among `tools`.
fn tool_choice(raw: Option<&Value>, tools: &[ToolSchema]) -> Result<ToolChoice, WireError> {
    let name = match raw {
        None | Some(Value::Null) => return Ok(ToolChoice::Auto),
        Some(Value::String(s)) => {
            return match s.as_str() {
                "auto" => Ok(ToolChoice::Auto),
                "none" => Ok(ToolChoice::None),
                "required" => Ok(ToolChoice::Required),
                other => Err(bad("tool_choice", format!("unknown tool_choice {other:?}"))),
            };
        }
        Some(v) => v
            .pointer("/function/name")
            .and_then(Value::as_str)
            .ok_or_else(|| bad("tool_choice", "`tool_choice` names no function"))?,
    };
    if !tools.iter().any(|t| t.name == name) {
        let message = format!("`tool_choice` names {name:?}, which is not in `tools`");
        return Err(bad("tool_choice", message));
    }
    Ok(ToolChoice::Tool(name.to_owned()))
}

fn options(body: &Map<String, Value>) -> Result<GenerationOptions, WireError> {
    let float = |key: &str| -> Result<Option<f32>, WireError> {
        match body.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .map(|f| Some(f as f32))
                .ok_or_else(|| bad(key, format!("`{key}` must be a number"))),
        }
    };
    let max_tokens = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64)
        .map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let stop = match body.get("stop") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(_) => {
            return Err(bad(
                "stop",
                "`stop` must be a string or an array of strings",
            ));
        }
    };
    Ok(GenerationOptions {
        temperature: float("temperature")?,
        top_p: float("top_p")?,
        max_tokens,
        seed: body.get("seed").and_then(Value::as_i64),
        stop,
        ..GenerationOptions::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(body: Value, want: Result<(), &str>) -> Option<ClientRequest> {
        let got = parse(body.to_string().as_bytes());
        match (&got, want) {
            (Ok(_), Ok(())) => {}
            (Err(e), Err(param)) => assert_eq!(e.param.as_deref(), Some(param), "{e:?}"),
            _ => panic!("{body}: {got:?}"),
        }
        got.ok()
    }

    #[test]
    fn a_tool_loop_reads_back_with_names_ids_and_arguments() {
        let body = json!({
            "model": "m", "stream": true, "stream_options": {"include_usage": true},
            "temperature": 0, "max_tokens": 64, "stop": "END",
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "read a.txt"}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a.txt\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "hello"}
            ],
            "tools": [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}],
            "tool_choice": {"type": "function", "function": {"name": "read"}},
            "parallel_tool_calls": false
        });
        let got = check(body, Ok(())).expect("parsed");
        let r = &got.request;
        assert!(got.stream && got.include_usage);
        assert_eq!(r.system.as_deref(), Some("be brief"));
        assert_eq!(r.messages.len(), 3);
        assert_eq!(r.messages[2].tool_call_id(), Some("c1"));
        assert_eq!(r.messages[2].name(), Some("read"));
        assert_eq!(r.tools[0].name, "read");
        assert_eq!(r.tool_choice, ToolChoice::Tool("read".into()));
        assert_eq!(
            r.parallel_tool_calls,
            Some(false),
            "the client's choice goes up"
        );
        assert_eq!(r.options.temperature, Some(0.0));
        assert_eq!(r.options.max_tokens, Some(64));
        assert_eq!(r.options.stop, vec!["END".to_owned()]);
    }

    #[test]
    fn bad_bodies_name_the_field_at_fault() {
        let user = json!([{"role": "user", "content": "hi"}]);
        check(json!({"messages": user}), Err("model"));
        check(json!({"model": "m"}), Err("messages"));
        check(
            json!({"model": "m", "messages": [{"role": "system", "content": "x"}]}),
            Err("messages"),
        );
        check(
            json!({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}),
            Err("messages[0]"),
        );
        check(
            json!({"model": "m", "messages": user, "tools": {}}),
            Err("tools"),
        );
        check(
            json!({"model": "m", "messages": user, "tools": [{"type": "function", "function": {}}]}),
            Err("tools[0].function.name"),
        );
        check(
            json!({"model": "m", "messages": user, "tool_choice": "maybe"}),
            Err("tool_choice"),
        );
        check(
            json!({"model": "m", "messages": user,
                "tool_choice": {"type": "function", "function": {"name": "ghost"}}}),
            Err("tool_choice"),
        );
        check(
            json!({"model": "m", "messages": user, "temperature": "hot"}),
            Err("temperature"),
        );
        check(
            json!({"model": "m", "messages": user, "parallel_tool_calls": "yes"}),
            Err("parallel_tool_calls"),
        );
        let remote_image = json!([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]);
        check(
            json!({"model": "m", "messages": remote_image}),
            Err("messages[0]"),
        );
        let bad_args = json!([{"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f", "arguments": "{"}}]}]);
        check(
            json!({"model": "m", "messages": bad_args}),
            Err("messages[0]"),
        );
        assert!(parse(b"not json").is_err());
    }
}
