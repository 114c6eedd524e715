//! [`ProviderRequest`] to the body of `POST /v1/messages` and of
//! `POST /v1/messages/count_tokens` (pure).
//!
//! # Decisions
//! - The system prompt is the top-level `system` string. `system` messages inside the
//!   history (the Messages API has no such role) join it, in order, a blank line apart.
//! - Roles alternate: ollm's tool results are `tool_result` blocks in a `user` message,
//!   and consecutive messages of one side (tool results, then the user's next words) are
//!   merged into one message, their blocks in order, so every `tool_result` comes first
//!   in the message right after the `tool_use` it answers.
//! - A message that is one text block is sent as a plain string (what every server
//!   accepts); anything else as an array of blocks: `text` (empty text left out),
//!   `image` with a base64 `source`, `tool_use` with the arguments as a JSON **object**
//!   (`input`), `tool_result` with the `tool_use_id` it answers.
//! - `max_tokens` is required by the API: the request's cap, else [`DEFAULT_MAX_TOKENS`]
//!   (core always sets one; the fallback is for other callers).
//! - `tool_choice` is sent only with tools: `auto`, `any` (ollm's `required`), `tool`
//!   with a name, `none`.
//! - `think`: `off` is `{"type": "disabled"}`; the others are `{"type": "enabled"}` with a
//!   token budget by level (`on` and `medium` 4096, `low` 1024, `high` 16384), below
//!   `max_tokens` as the API requires and at least its minimum of 1024; with a cap of
//!   1024 or less there is no room to think and nothing is sent.
//! - Not in the Messages API, so not sent (Anthropic refuses unknown fields): `seed`,
//!   `repeat_penalty`, `response_format`, `context_length` and `keep_alive`.
//! - Always streamed. The count body is the same request without `max_tokens`, `stream`
//!   and sampling, which `count_tokens` does not take.

use ollm_types::{ContentPart, Message, ProviderRequest, Role, Think, ToolChoice};
use serde_json::{Map, Value, json};

/// The cap sent when the request has none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The API's smallest thinking budget.
const MIN_THINKING_BUDGET: u32 = 1024;

/// The wire body of `request` for `/v1/messages`.
pub(crate) fn messages_request(request: &ProviderRequest) -> Value {
    let mut body = count_request(request);
    let o = &request.options;
    let max_tokens = o.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS);
    let fields = [
        ("max_tokens", Some(json!(max_tokens))),
        ("stream", Some(json!(true))),
        ("temperature", o.temperature.map(|v| json!(v))),
        ("top_p", o.top_p.map(|v| json!(v))),
        ("top_k", o.top_k.map(|v| json!(v))),
        (
            "stop_sequences",
            (!o.stop.is_empty()).then(|| json!(o.stop)),
        ),
        (
            "thinking",
            request.think.and_then(|t| thinking(t, max_tokens)),
        ),
    ];
    if let Value::Object(map) = &mut body {
        for (key, value) in fields {
            if let Some(value) = value {
                map.insert(key.to_owned(), value);
            }
        }
    }
    body
}

/// The wire body of `request` for `/v1/messages/count_tokens`: what the model reads
/// (system, messages, tools and the tool choice), no generation settings.
pub(crate) fn count_request(request: &ProviderRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    let (system, messages) = conversation(request);
    if let Some(system) = system {
        body.insert("system".into(), Value::String(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description,
                       "input_schema": t.parameters})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        let mut choice = tool_choice(&request.tool_choice);
        if request.parallel_tool_calls == Some(false) && choice["type"] != "none" {
            choice["disable_parallel_tool_use"] = Value::Bool(true);
        }
        body.insert("tool_choice".into(), choice);
    }
    Value::Object(body)
}

/// The system text and the alternating messages.
fn conversation(request: &ProviderRequest) -> (Option<String>, Vec<Value>) {
    let mut system: Vec<String> = request.system.iter().cloned().collect();
    // (role, blocks) of the message being built.
    let mut turns: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in &request.messages {
        let role = match message.role() {
            Role::System => {
                system.push(message.text());
                continue;
            }
            Role::User | Role::Tool => "user",
            Role::Assistant => "assistant",
        };
        let blocks = blocks(message);
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some((last, open)) if *last == role => open.extend(blocks),
            _ => turns.push((role, blocks)),
        }
    }
    let system = system
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>();
    let system = (!system.is_empty()).then(|| system.join("\n\n"));
    let messages = turns
        .into_iter()
        .map(|(role, blocks)| json!({"role": role, "content": content(blocks)}))
        .collect();
    (system, messages)
}

/// One text block as a plain string, anything else as the array of blocks.
fn content(mut blocks: Vec<Value>) -> Value {
    if blocks.len() == 1 && blocks[0]["type"] == "text" {
        if let Some(Value::String(text)) = blocks[0].get_mut("text").map(Value::take) {
            return Value::String(text);
        }
    }
    Value::Array(blocks)
}

/// The content blocks of one message.
fn blocks(message: &Message) -> Vec<Value> {
    if message.role() == Role::Tool {
        let id = message.tool_call_id().unwrap_or_default();
        return vec![json!({"type": "tool_result", "tool_use_id": id, "content": message.text()})];
    }
    message
        .parts()
        .iter()
        .filter_map(|part| match part {
            ContentPart::Text { text } if text.is_empty() => None,
            ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
            ContentPart::Image { data, mime_type } => Some(json!({
                "type": "image",
                "source": {"type": "base64", "media_type": mime_type, "data": data},
            })),
            ContentPart::ToolCall(call) => Some(json!({
                "type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments,
            })),
        })
        .collect()
}

fn tool_choice(choice: &ToolChoice) -> Value {
    match choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
    }
}

/// The `thinking` field for `think` under a cap of `max_tokens` (see the module docs).
fn thinking(think: Think, max_tokens: u32) -> Option<Value> {
    let wanted = match think {
        Think::Off => return Some(json!({"type": "disabled"})),
        Think::Low => MIN_THINKING_BUDGET,
        Think::On | Think::Medium => 4096,
        Think::High => 16384,
    };
    let budget = wanted.min(max_tokens.saturating_sub(1));
    (budget >= MIN_THINKING_BUDGET).then(|| json!({"type": "enabled", "budget_tokens": budget}))
}

#[cfg(test)]
mod tests {
    use ollm_types::{ToolCall, ToolSchema};

    use super::*;

    fn check(request: &ProviderRequest, expected: Value) {
        let got = messages_request(request);
        assert_eq!(got, expected, "got: {got:#}");
    }

    fn base(messages: Vec<Message>) -> ProviderRequest {
        ProviderRequest::new("m", messages)
    }

    #[test]
    fn minimal_request_has_the_default_cap() {
        check(
            &base(vec![Message::user("hi")]),
            json!({
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": DEFAULT_MAX_TOKENS,
                "stream": true,
            }),
        );
    }

    #[test]
    fn full_request_alternates_and_carries_blocks() {
        let calls = vec![
            ToolCall::new("c1", "add", json!({"a": 1})).unwrap(),
            ToolCall::new("c2", "neg", json!({})).unwrap(),
        ];
        let mut r = base(vec![
            Message::system("also this"),
            Message::user_with_images("look", vec![("QUJD".into(), "image/png".into())]),
            Message::assistant_with_calls("adding", calls),
            Message::tool_result("c1", "add", "2"),
            Message::tool_result("c2", "neg", "-0"),
            Message::user("and now?"),
            Message::assistant("done"),
        ]);
        r.system = Some("be brief".into());
        r.tools = vec![ToolSchema::new("add", "adds", json!({"type": "object"}))];
        r.tool_choice = ToolChoice::Required;
        r.options.max_tokens = Some(8000);
        r.options.temperature = Some(0.5);
        r.options.top_p = Some(0.25);
        r.options.top_k = Some(40);
        r.options.seed = Some(7);
        r.options.repeat_penalty = Some(1.1);
        r.options.stop = vec!["END".into()];
        r.options.context_length = Some(4096);
        r.think = Some(Think::High);
        r.keep_alive = Some("5m".into());
        check(
            &r,
            json!({
                "model": "m",
                "system": "be brief\n\nalso this",
                "messages": [
                    {"role": "user", "content": [
                        {"type": "text", "text": "look"},
                        {"type": "image", "source":
                            {"type": "base64", "media_type": "image/png", "data": "QUJD"}},
                    ]},
                    {"role": "assistant", "content": [
                        {"type": "text", "text": "adding"},
                        {"type": "tool_use", "id": "c1", "name": "add", "input": {"a": 1}},
                        {"type": "tool_use", "id": "c2", "name": "neg", "input": {}},
                    ]},
                    {"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": "c1", "content": "2"},
                        {"type": "tool_result", "tool_use_id": "c2", "content": "-0"},
                        {"type": "text", "text": "and now?"},
                    ]},
                    {"role": "assistant", "content": "done"},
                ],
                "tools": [{"name": "add", "description": "adds",
                           "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "any"},
                "max_tokens": 8000,
                "stream": true,
                "temperature": 0.5,
                "top_p": 0.25,
                "top_k": 40,
                "stop_sequences": ["END"],
                "thinking": {"type": "enabled", "budget_tokens": 7999},
            }),
        );
    }

    #[test]
    fn tool_choices_and_thinking_budgets() {
        let with = |choice: ToolChoice| {
            let mut r = base(vec![Message::user("x")]);
            r.tools = vec![ToolSchema::new("f", "", json!({"type": "object"}))];
            r.tool_choice = choice;
            messages_request(&r)["tool_choice"].clone()
        };
        assert_eq!(with(ToolChoice::Auto), json!({"type": "auto"}));
        assert_eq!(with(ToolChoice::None), json!({"type": "none"}));
        assert_eq!(
            with(ToolChoice::Tool("f".into())),
            json!({"type": "tool", "name": "f"})
        );
        // One call at most: Anthropic's `disable_parallel_tool_use` (not with `none`).
        let one = |choice: ToolChoice| {
            let mut r = base(vec![Message::user("x")]);
            r.tools = vec![ToolSchema::new("f", "", json!({"type": "object"}))];
            r.tool_choice = choice;
            r.parallel_tool_calls = Some(false);
            messages_request(&r)["tool_choice"].clone()
        };
        assert_eq!(
            one(ToolChoice::Auto),
            json!({"type": "auto", "disable_parallel_tool_use": true})
        );
        assert_eq!(one(ToolChoice::None), json!({"type": "none"}));
        // No tools: no tool_choice.
        let mut r = base(vec![Message::user("x")]);
        r.tool_choice = ToolChoice::Required;
        assert_eq!(messages_request(&r).get("tool_choice"), None);
        // (think, max_tokens, the thinking field)
        let cases = [
            (Think::Off, 100, Some(json!({"type": "disabled"}))),
            (
                Think::Low,
                4096,
                Some(json!({"type": "enabled", "budget_tokens": 1024})),
            ),
            (
                Think::On,
                8192,
                Some(json!({"type": "enabled", "budget_tokens": 4096})),
            ),
            (
                Think::Medium,
                2000,
                Some(json!({"type": "enabled", "budget_tokens": 1999})),
            ),
            (Think::High, 1024, None),
        ];
        for (think, max, want) in cases {
            assert_eq!(thinking(think, max), want, "{think:?} {max}");
        }
    }

    #[test]
    fn the_count_body_has_no_generation_settings() {
        let mut r = base(vec![Message::user("hi")]);
        r.system = Some("s".into());
        r.options.max_tokens = Some(10);
        r.options.temperature = Some(0.0);
        r.think = Some(Think::Off);
        assert_eq!(
            count_request(&r),
            json!({"model": "m", "system": "s", "messages": [{"role": "user", "content": "hi"}]})
        );
    }
}
