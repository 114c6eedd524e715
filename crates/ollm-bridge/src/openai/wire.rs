//! The OpenAI Chat Completions wire format, as far as ollm speaks it.
//!
//! Request types serialise exactly the fields ollm sends; response types deserialise
//! leniently (every field optional, unknown fields ignored), because each server fills in
//! a different subset. Text fields borrow from the event's data where JSON escapes allow,
//! so decoding a stream copies little.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The body of `POST /v1/chat/completions`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ChatRequest {
    pub(crate) model: String,
    pub(crate) messages: Vec<WireMessage>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tools: Vec<WireTool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_choice: Option<Value>,
    /// Sent with tools: llama-server's default is `false`, OpenAI's and vLLM's `true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) parallel_tool_calls: Option<bool>,
    pub(crate) stream: bool,
    pub(crate) stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_p: Option<f32>,
    /// Not in OpenAI's API; llama.cpp, vLLM and LM Studio accept it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) top_k: Option<u32>,
    /// Not in OpenAI's API; llama.cpp's and LM Studio's name for the repetition penalty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) repeat_penalty: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) seed: Option<i64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) stop: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) reasoning_effort: Option<&'static str>,
    /// llama.cpp's and vLLM's way to pass `enable_thinking` to the chat template.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) chat_template_kwargs: Option<Value>,
}

/// `stream_options`: ask for a final usage chunk.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct StreamOptions {
    pub(crate) include_usage: bool,
}

/// One message of the request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WireMessage {
    pub(crate) role: &'static str,
    /// A string, an array of parts (text and images), or `null` for an assistant message
    /// that only calls tools.
    pub(crate) content: Value,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) tool_calls: Vec<WireToolCall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tool_call_id: Option<String>,
}

/// An assistant's tool call as sent back to the server.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WireToolCall {
    pub(crate) id: String,
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) function: WireFunctionCall,
}

/// The function of a [`WireToolCall`]; `arguments` is a JSON **string**.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WireFunctionCall {
    pub(crate) name: String,
    pub(crate) arguments: String,
}

/// A tool offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WireTool {
    #[serde(rename = "type")]
    pub(crate) kind: &'static str,
    pub(crate) function: WireFunction,
}

/// The function of a [`WireTool`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WireFunction {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
}

/// One streamed chunk (`data: {...}`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Chunk<'a> {
    #[serde(default, borrow)]
    pub(crate) choices: Vec<Choice<'a>>,
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
    /// llama.cpp's server-side timings.
    #[serde(default)]
    pub(crate) timings: Option<Timings>,
    /// An error reported inside the stream.
    #[serde(default)]
    pub(crate) error: Option<Value>,
}

/// One choice of a chunk; ollm asks for one and reads index 0's.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Choice<'a> {
    #[serde(default, borrow)]
    pub(crate) delta: Option<Delta<'a>>,
    #[serde(default, borrow)]
    pub(crate) finish_reason: Option<Cow<'a, str>>,
}

/// What a chunk adds.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta<'a> {
    #[serde(default, borrow)]
    pub(crate) content: Option<Cow<'a, str>>,
    /// vLLM and llama.cpp.
    #[serde(default, borrow)]
    pub(crate) reasoning_content: Option<Cow<'a, str>>,
    /// Ollama `/v1` and newer vLLM.
    #[serde(default, borrow)]
    pub(crate) reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(crate) tool_calls: Option<Vec<ToolCallDelta<'a>>>,
    /// The legacy (pre-`tools`) single call: name and argument fragments, or whole.
    /// Boxed: it is rare, and inline it made every `Choice` too large to move without a
    /// `memcpy` call.
    #[serde(default, borrow)]
    pub(crate) function_call: Option<Box<FunctionDelta<'a>>>,
}

/// A fragment of a streamed tool call.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ToolCallDelta<'a> {
    #[serde(default)]
    pub(crate) index: Option<u32>,
    #[serde(default, borrow)]
    pub(crate) id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub(crate) function: Option<FunctionDelta<'a>>,
    /// A flat call (`{"name", "arguments"}` without `function`), as some servers send.
    #[serde(default, borrow)]
    pub(crate) name: Option<Cow<'a, str>>,
    /// The arguments of a flat call.
    #[serde(default)]
    pub(crate) arguments: Option<Value>,
}

/// The function part of a [`ToolCallDelta`].
#[derive(Debug, Default, Deserialize)]
pub(crate) struct FunctionDelta<'a> {
    #[serde(default, borrow)]
    pub(crate) name: Option<Cow<'a, str>>,
    /// A string fragment on every server that follows the spec; some send a whole JSON
    /// object instead, which is accepted too.
    #[serde(default)]
    pub(crate) arguments: Option<Value>,
}

/// Token counts of the final usage chunk.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) prompt_tokens: Option<u32>,
    #[serde(default)]
    pub(crate) completion_tokens: Option<u32>,
}

/// llama.cpp's `timings` (milliseconds).
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct Timings {
    #[serde(default)]
    pub(crate) prompt_ms: Option<f64>,
    #[serde(default)]
    pub(crate) predicted_ms: Option<f64>,
}

/// `GET /v1/models`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ModelList {
    #[serde(default)]
    pub(crate) data: Vec<ModelEntry>,
}

/// One entry of [`ModelList`].
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ModelEntry {
    pub(crate) id: String,
    /// vLLM's context length.
    #[serde(default)]
    pub(crate) max_model_len: Option<u32>,
    /// llama.cpp's model metadata.
    #[serde(default)]
    pub(crate) meta: Option<ModelMeta>,
}

/// llama.cpp's `meta` of a model entry.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ModelMeta {
    /// The context the server runs with (per slot), which is what a prompt must fit.
    #[serde(default)]
    pub(crate) n_ctx: Option<u32>,
    #[serde(default)]
    pub(crate) n_ctx_train: Option<u32>,
    #[serde(default)]
    pub(crate) size: Option<u64>,
}

/// The answer of a `/tokenize` endpoint: llama.cpp sends `tokens`, vLLM `count` and
/// `tokens`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct TokenizeReply {
    #[serde(default)]
    pub(crate) tokens: Option<Vec<Value>>,
    #[serde(default)]
    pub(crate) count: Option<usize>,
}

impl TokenizeReply {
    /// The token count, if the reply had one.
    pub(crate) fn count(&self) -> Option<usize> {
        self.count.or_else(|| self.tokens.as_ref().map(Vec::len))
    }
}

/// The text of an error value: `{"message": ...}`, a plain string, or the JSON itself.
pub(crate) fn error_message(error: &Value) -> String {
    match error {
        Value::String(s) => s.clone(),
        Value::Object(map) => match map.get("message") {
            Some(Value::String(s)) => s.clone(),
            Some(inner @ Value::Object(_)) => error_message(inner),
            _ => error.to_string(),
        },
        other => other.to_string(),
    }
}

/// The `type` or `code` of an error value, where it has one.
pub(crate) fn error_type(error: &Value) -> Option<&str> {
    let map = error.as_object()?;
    ["type", "code"]
        .iter()
        .find_map(|k| map.get(*k).and_then(Value::as_str))
}
