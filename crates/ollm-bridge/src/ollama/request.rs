//! `ProviderRequest` -> the body of `POST /api/chat`: a pure function with table tests.
//!
//! What the I/O shell decided beforehand (the default keep-alive) comes in as
//! [`ChatPlan`], so this module never asks the server anything. `think` is sent exactly
//! as the request carries it: the runtime decided it (and warned) already, and so is
//! `num_ctx`: it is the request's `options.context_length` (core's `context::window`
//! settled it) or absent, never a number of this adapter's.

use std::borrow::Cow;

use ollm_types::{Message, ProviderRequest, ResponseFormat, Role, Think, ToolChoice};
use serde_json::Value;

use super::wire::{
    ChatRequest, WireFunctionDef, WireFunctionOut, WireKeepAlive, WireMessage, WireOptions,
    WireThink, WireTool, WireToolCallOut,
};

/// What the shell settled before building the body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChatPlan {
    /// Keep-alive used when the request has none.
    pub keep_alive: Option<String>,
}

/// The `format` value for a structured-output request.
fn format_value(format: &ResponseFormat) -> Cow<'_, Value> {
    match format {
        ResponseFormat::Json => Cow::Owned(Value::String("json".to_owned())),
        ResponseFormat::JsonSchema { schema, .. } => Cow::Borrowed(schema),
    }
}

/// The wire form of a `keep_alive`: a whole number is seconds, anything else a duration.
fn keep_alive_value(text: &str) -> WireKeepAlive<'_> {
    match text.trim().parse::<i64>() {
        Ok(seconds) => WireKeepAlive::Seconds(seconds),
        Err(_) => WireKeepAlive::Duration(text),
    }
}

fn think_value(think: Think) -> WireThink {
    match think {
        Think::Off => WireThink::Bool(false),
        Think::On => WireThink::Bool(true),
        Think::Low => WireThink::Level("low"),
        Think::Medium => WireThink::Level("medium"),
        Think::High => WireThink::Level("high"),
    }
}

/// Builds the `/api/chat` body for `req` (always streamed).
///
/// - the system prompt becomes the first `system` message;
/// - images go in `images` (base64), assistant tool calls carry **object** arguments,
///   tool results go as `role: "tool"` with `tool_name` and `tool_call_id`;
/// - `tool_choice: none` sends no tools; `tool_choice: <name>` sends only that tool
///   (Ollama has no `tool_choice`);
/// - `think` as the request carries it (the runtime decides it, never this adapter);
/// - `options.context_length` as `num_ctx`, exactly (none when the request has none);
/// - `format` from `response_format` (`"json"` or the schema).
pub fn chat_body<'a>(req: &'a ProviderRequest, plan: &'a ChatPlan) -> ChatRequest<'a> {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(system) = req.system.as_deref() {
        messages.push(WireMessage {
            role: "system",
            content: Cow::Borrowed(system),
            images: Vec::new(),
            tool_calls: Vec::new(),
            tool_name: None,
            tool_call_id: None,
        });
    }
    messages.extend(req.messages.iter().map(wire_message));
    let o = &req.options;
    ChatRequest {
        model: &req.model,
        messages,
        tools: wire_tools(req),
        format: req.response_format.as_ref().map(format_value),
        options: WireOptions {
            temperature: o.temperature,
            top_p: o.top_p,
            top_k: o.top_k,
            repeat_penalty: o.repeat_penalty,
            seed: o.seed,
            num_predict: o.max_tokens,
            stop: &o.stop,
            num_ctx: o.context_length,
        },
        stream: true,
        keep_alive: req
            .keep_alive
            .as_deref()
            .or(plan.keep_alive.as_deref())
            .map(keep_alive_value),
        think: req.think.map(think_value),
    }
}

/// One message as Ollama reads it: its text parts joined, images as base64, calls with
/// object arguments.
fn wire_message(m: &Message) -> WireMessage<'_> {
    let role = match m.role() {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let text_parts: Vec<&str> = m
        .parts()
        .iter()
        .filter_map(|p| match p {
            ollm_types::ContentPart::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let content = match text_parts.as_slice() {
        [] => Cow::Borrowed(""),
        [one] => Cow::Borrowed(*one),
        many => Cow::Owned(many.concat()),
    };
    WireMessage {
        role,
        content,
        images: m.images().map(|(data, _)| data).collect(),
        tool_calls: m
            .tool_calls()
            .enumerate()
            .map(|(index, c)| WireToolCallOut {
                id: &c.id,
                function: WireFunctionOut {
                    index,
                    name: &c.name,
                    arguments: &c.arguments,
                },
            })
            .collect(),
        tool_name: m.name(),
        tool_call_id: m.tool_call_id(),
    }
}

/// The tools the request offers, as its tool choice narrows them (Ollama has no
/// `tool_choice`).
fn wire_tools(req: &ProviderRequest) -> Vec<WireTool<'_>> {
    let choice = &req.tool_choice;
    if *choice == ToolChoice::None {
        return Vec::new();
    }
    req.tools
        .iter()
        .filter(|t| match choice {
            ToolChoice::Tool(name) => &t.name == name,
            _ => true,
        })
        .map(|t| WireTool {
            kind: "function",
            function: WireFunctionDef {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use ollm_types::{GenerationOptions, ToolCall, ToolSchema};
    use serde_json::json;

    use super::*;

    fn check(req: &ProviderRequest, plan: &ChatPlan, expected: Value) {
        let body = serde_json::to_value(chat_body(req, plan)).unwrap();
        assert_eq!(body, expected, "\n got: {body:#}\nwant: {expected:#}");
    }

    fn weather() -> ToolSchema {
        ToolSchema::new(
            "weather",
            "Weather for a city",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        )
    }

    #[test]
    fn plain_text_with_system() {
        let mut req = ProviderRequest::new("qwen3", vec![Message::user("hi")]);
        req.system = Some("be brief".into());
        check(
            &req,
            &ChatPlan::default(),
            json!({"model": "qwen3", "stream": true, "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "hi"}]}),
        );
    }

    #[test]
    fn tools_calls_results_and_images() {
        let call = ToolCall::new("call_1", "weather", json!({"city": "Paris"})).unwrap();
        let mut req = ProviderRequest::new(
            "qwen3",
            vec![
                Message::user_with_images(
                    "what is this",
                    vec![("aGk=".into(), "image/png".into())],
                ),
                Message::assistant_with_calls("", vec![call]),
                Message::tool_result("call_1", "weather", "sunny"),
            ],
        );
        req.tools = vec![weather()];
        check(
            &req,
            &ChatPlan::default(),
            json!({"model": "qwen3", "stream": true,
                "tools": [{"type": "function", "function": {"name": "weather",
                    "description": "Weather for a city",
                    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
                "messages": [
                    {"role": "user", "content": "what is this", "images": ["aGk="]},
                    {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1",
                        "function": {"index": 0, "name": "weather", "arguments": {"city": "Paris"}}}]},
                    {"role": "tool", "content": "sunny", "tool_name": "weather", "tool_call_id": "call_1"}]}),
        );
    }

    #[test]
    fn tool_choice_none_and_named() {
        let other = ToolSchema::new("clock", "Time", json!({"type": "object"}));
        let mut req = ProviderRequest::new("m", vec![Message::user("x")]);
        req.tools = vec![weather(), other];
        req.tool_choice = ToolChoice::None;
        let body = serde_json::to_value(chat_body(&req, &ChatPlan::default())).unwrap();
        assert!(body.get("tools").is_none());
        req.tool_choice = ToolChoice::Tool("clock".into());
        let body = serde_json::to_value(chat_body(&req, &ChatPlan::default())).unwrap();
        assert_eq!(body["tools"].as_array().map(Vec::len), Some(1));
        assert_eq!(body["tools"][0]["function"]["name"], "clock");
    }

    #[test]
    fn options_think_format_keep_alive() {
        let mut req = ProviderRequest::new("m", vec![Message::user("x")]);
        req.options = GenerationOptions {
            temperature: Some(0.5),
            max_tokens: Some(64),
            top_p: Some(0.25),
            top_k: Some(40),
            repeat_penalty: Some(1.5),
            seed: Some(7),
            stop: vec!["END".into()],
            context_length: Some(999),
        };
        req.think = Some(Think::High);
        req.response_format = Some(ResponseFormat::Json);
        let plan = ChatPlan {
            keep_alive: Some("10m".into()),
        };
        check(
            &req,
            &plan,
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}],
                "options": {"temperature": 0.5, "top_p": 0.25, "top_k": 40, "repeat_penalty": 1.5,
                    "seed": 7, "num_predict": 64, "stop": ["END"], "num_ctx": 999},
                "think": "high", "format": "json", "keep_alive": "10m"}),
        );
    }

    #[test]
    fn num_ctx_is_exactly_the_requested_context_length() {
        // (options.context_length, num_ctx sent): nothing of the adapter's own.
        for (asked, sent) in [
            (Some(999), Some(999_u64)),
            (Some(32768), Some(32768)),
            (Some(512), Some(512)),
            (None, None),
        ] {
            let mut req = ProviderRequest::new("m", vec![Message::user("x")]);
            req.options.context_length = asked;
            req.estimated_prompt_tokens = Some(7);
            let plan = ChatPlan {
                keep_alive: Some("1m".into()),
            };
            let body = serde_json::to_value(chat_body(&req, &plan)).unwrap();
            assert_eq!(
                body["options"].get("num_ctx").and_then(Value::as_u64),
                sent,
                "asked {asked:?}"
            );
            // The runtime's estimate is for the adapter, not the server.
            assert!(!body.to_string().contains("estimated"), "{body}");
        }
    }

    #[test]
    fn think_is_sent_as_the_request_carries_it() {
        let mut req = ProviderRequest::new("m", vec![Message::user("x")]);
        req.think = Some(Think::On);
        req.keep_alive = Some("0".into());
        req.response_format = Some(ResponseFormat::JsonSchema {
            name: "s".into(),
            schema: json!({"type": "object"}),
        });
        let plan = ChatPlan {
            keep_alive: Some("10m".into()),
        };
        check(
            &req,
            &plan,
            json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}],
                "format": {"type": "object"}, "keep_alive": 0, "think": true}),
        );
        req.think = None;
        let body = serde_json::to_value(chat_body(&req, &plan)).unwrap();
        assert_eq!(body.get("think"), None);
    }

    #[test]
    fn keep_alive_in_seconds_is_a_number_and_a_duration_a_string() {
        let check = |given: &str, sent: Value| {
            let mut req = ProviderRequest::new("m", vec![Message::user("x")]);
            req.keep_alive = Some(given.into());
            let body = serde_json::to_value(chat_body(&req, &ChatPlan::default())).unwrap();
            assert_eq!(body["keep_alive"], sent, "{given:?}");
        };
        check("-1", json!(-1));
        check("300", json!(300));
        check("0", json!(0));
        check("10m", json!("10m"));
        check("1h30m", json!("1h30m"));
        check("-5m", json!("-5m"));
    }
}
