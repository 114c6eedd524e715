//! [`ProviderRequest`] to the body of `POST /v1/chat/completions` (pure).
//!
//! - The system prompt goes first, as a `system` message.
//! - Text-only messages send `content` as a string; messages with images send an array of
//!   `text` and `image_url` parts, the images as `data:` URLs (an empty text part is
//!   left out: an image-only prompt is only its images).
//! - Assistant messages carry their `tool_calls` with the arguments as a JSON **string**;
//!   an assistant message that only calls tools has `content: null`.
//! - Tool results are `role: "tool"` messages with the `tool_call_id` they answer.
//! - `tool_choice` is sent only with tools (several servers refuse it without), and so
//!   is `parallel_tool_calls`, `true` unless the request says otherwise: OpenAI's
//!   default, which llama-server does not share (its grammar ends a reply after one
//!   call when it is `false`, its default), so a model that calls two tools at once
//!   could not.
//! - `think`: `off`/`on` become `chat_template_kwargs.enable_thinking` (llama.cpp, vLLM);
//!   `low`/`medium`/`high` become `reasoning_effort`.
//! - Structured output: `response_format` `json_object`, or `json_schema` with
//!   `strict: true` (enforced by grammar on llama.cpp, guided decoding on vLLM).
//! - Always streamed, with `stream_options.include_usage` for the final usage chunk.
//! - `context_length` and `keep_alive` have no OpenAI-compatible equivalent (the server
//!   fixes its context at start) and are not sent.

use ollm_types::{ContentPart, Message, ProviderRequest, ResponseFormat, Role, Think, ToolChoice};
use serde_json::{Value, json};

use super::wire::{
    ChatRequest, StreamOptions, WireFunction, WireFunctionCall, WireMessage, WireTool, WireToolCall,
};

/// The wire body of `request`.
pub(crate) fn chat_request(request: &ProviderRequest) -> ChatRequest {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(WireMessage {
            role: "system",
            content: Value::String(system.clone()),
            tool_calls: Vec::new(),
            tool_call_id: None,
        });
    }
    messages.extend(request.messages.iter().map(message));
    let tools: Vec<WireTool> = request
        .tools
        .iter()
        .map(|t| WireTool {
            kind: "function",
            function: WireFunction {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: t.parameters.clone(),
            },
        })
        .collect();
    let tool_choice = (!tools.is_empty()).then(|| match &request.tool_choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(name) => json!({"type": "function", "function": {"name": name}}),
    });
    let parallel_tool_calls =
        (!tools.is_empty()).then_some(request.parallel_tool_calls.unwrap_or(true));
    let (reasoning_effort, chat_template_kwargs) = think(request.think);
    let response_format = request.response_format.as_ref().map(response_format);
    let o = &request.options;
    ChatRequest {
        model: request.model.clone(),
        messages,
        tools,
        tool_choice,
        parallel_tool_calls,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        max_tokens: o.max_tokens,
        temperature: o.temperature,
        top_p: o.top_p,
        top_k: o.top_k,
        repeat_penalty: o.repeat_penalty,
        seed: o.seed,
        stop: o.stop.clone(),
        response_format,
        reasoning_effort,
        chat_template_kwargs,
    }
}

/// `think` on the wire: `reasoning_effort` for a level, the template's `enable_thinking`
/// for on and off.
fn think(think: Option<Think>) -> (Option<&'static str>, Option<Value>) {
    match think {
        None => (None, None),
        Some(Think::Off) => (None, Some(json!({"enable_thinking": false}))),
        Some(Think::On) => (None, Some(json!({"enable_thinking": true}))),
        Some(Think::Low) => (Some("low"), None),
        Some(Think::Medium) => (Some("medium"), None),
        Some(Think::High) => (Some("high"), None),
    }
}

/// `response_format` on the wire.
fn response_format(format: &ResponseFormat) -> Value {
    match format {
        ResponseFormat::Json => json!({"type": "json_object"}),
        ResponseFormat::JsonSchema { name, schema } => json!({
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": true},
        }),
    }
}

/// One message on the wire.
fn message(m: &Message) -> WireMessage {
    let tool_calls: Vec<WireToolCall> = m
        .tool_calls()
        .map(|c| WireToolCall {
            id: c.id.clone(),
            kind: "function",
            function: WireFunctionCall {
                name: c.name.clone(),
                arguments: c.arguments_value().to_string(),
            },
        })
        .collect();
    let has_images = m.images().next().is_some();
    let content = if has_images {
        let parts = m
            .parts()
            .iter()
            .filter_map(|p| match p {
                ContentPart::Text { text } if text.is_empty() => None,
                ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
                ContentPart::Image { data, mime_type } => Some(json!({
                    "type": "image_url",
                    "image_url": {"url": format!("data:{mime_type};base64,{data}")},
                })),
                ContentPart::ToolCall(_) => None,
            })
            .collect();
        Value::Array(parts)
    } else {
        let text = m.text();
        if text.is_empty() && !tool_calls.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        }
    };
    WireMessage {
        role: m.role().as_str(),
        content,
        tool_calls,
        tool_call_id: match m.role() {
            Role::Tool => m.tool_call_id().map(str::to_owned),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use ollm_types::{ToolCall, ToolSchema};

    use super::*;

    fn check(request: &ProviderRequest, expected: Value) {
        let got = serde_json::to_value(chat_request(request)).unwrap();
        assert_eq!(got, expected, "got: {got:#}");
    }

    fn base(messages: Vec<Message>) -> ProviderRequest {
        ProviderRequest::new("m", messages)
    }

    #[test]
    fn minimal_request() {
        check(
            &base(vec![Message::user("hi")]),
            json!({
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": true,
                "stream_options": {"include_usage": true},
            }),
        );
    }

    #[test]
    fn full_request() {
        let call = ToolCall::new("c1", "add", json!({"a": 1})).unwrap();
        let mut r = base(vec![
            Message::user_with_images("look", vec![("QUJD".into(), "image/png".into())]),
            Message::assistant_with_calls("", vec![call]),
            Message::tool_result("c1", "add", "2"),
        ]);
        r.system = Some("be brief".into());
        r.tools = vec![ToolSchema::new("add", "adds", json!({"type": "object"}))];
        r.tool_choice = ToolChoice::Tool("add".into());
        r.options.max_tokens = Some(10);
        r.options.temperature = Some(0.5);
        r.options.top_p = Some(0.25);
        r.options.seed = Some(7);
        r.options.stop = vec!["END".into()];
        r.options.context_length = Some(4096);
        r.think = Some(Think::High);
        r.response_format = Some(ResponseFormat::JsonSchema {
            name: "out".into(),
            schema: json!({"type": "object"}),
        });
        check(
            &r,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
                    ]},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "c1", "type": "function",
                         "function": {"name": "add", "arguments": "{\"a\":1}"}},
                    ]},
                    {"role": "tool", "content": "2", "tool_call_id": "c1"},
                ],
                "tools": [{"type": "function", "function":
                    {"name": "add", "description": "adds", "parameters": {"type": "object"}}}],
                "tool_choice": {"type": "function", "function": {"name": "add"}},
                "parallel_tool_calls": true,
                "stream": true,
                "stream_options": {"include_usage": true},
                "max_tokens": 10,
                "temperature": 0.5,
                "top_p": 0.25,
                "seed": 7,
                "stop": ["END"],
                "reasoning_effort": "high",
                "response_format": {"type": "json_schema", "json_schema":
                    {"name": "out", "schema": {"type": "object"}, "strict": true}},
            }),
        );
    }

    #[test]
    fn several_calls_in_one_reply_are_allowed_unless_the_request_says_no() {
        let body = |tools: bool, parallel: Option<bool>| {
            let mut r = base(vec![Message::user("x")]);
            if tools {
                r.tools = vec![ToolSchema::new("add", "adds", json!({"type": "object"}))];
            }
            r.parallel_tool_calls = parallel;
            serde_json::to_value(chat_request(&r)).unwrap()["parallel_tool_calls"].clone()
        };
        // llama-server's own default is false: said out loud, or a second call is cut.
        assert_eq!(body(true, None), json!(true));
        assert_eq!(body(true, Some(true)), json!(true));
        assert_eq!(body(true, Some(false)), json!(false));
        assert_eq!(body(false, Some(false)), Value::Null, "only with tools");
    }

    #[test]
    fn tool_choice_needs_tools_and_think_off_uses_template_kwargs() {
        let mut r = base(vec![Message::user("x")]);
        r.tool_choice = ToolChoice::Required;
        r.think = Some(Think::Off);
        r.response_format = Some(ResponseFormat::Json);
        check(
            &r,
            json!({
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "stream": true,
                "stream_options": {"include_usage": true},
                "chat_template_kwargs": {"enable_thinking": false},
                "response_format": {"type": "json_object"},
            }),
        );
    }
}
