//! Ollama's native wire types, as `docs/api.md` and `api/types.go` define them.
//!
//! Request types borrow from the [`ollm_types::ProviderRequest`] they are built from, so
//! building a body copies no conversation text. Response types for the hot path (one
//! `/api/chat` line per token) borrow from the line where they can: text arrives as
//! `Cow<str>`, borrowed unless it contains escapes. Fields the adapter does not use
//! (`model`, `created_at`, `role`) are not declared, so serde skips them without
//! allocating.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The body of `POST /api/chat`.
#[derive(Debug, Serialize)]
pub struct ChatRequest<'a> {
    /// The model.
    pub model: &'a str,
    /// The conversation, the system prompt first.
    pub messages: Vec<WireMessage<'a>>,
    /// Tools in the function format.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WireTool<'a>>,
    /// `"json"` or a JSON schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<Cow<'a, Value>>,
    /// Sampling and context options.
    #[serde(skip_serializing_if = "WireOptions::is_empty")]
    pub options: WireOptions<'a>,
    /// Always `true`: the adapter streams.
    pub stream: bool,
    /// How long to keep the model loaded (`"5m"`, `0`, `-1`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<WireKeepAlive<'a>>,
    /// `true`/`false` or an effort level; only sent to models that can think.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub think: Option<WireThink>,
}

/// `think`: a boolean or an effort level (`"low"`, `"medium"`, `"high"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum WireThink {
    /// On or off.
    Bool(bool),
    /// An effort level.
    Level(&'static str),
}

/// `keep_alive`: Ollama reads a JSON number as seconds (negative: forever) and a string
/// as a Go duration, which needs a unit (`"-1"` and `"300"` are refused as strings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum WireKeepAlive<'a> {
    /// Whole seconds.
    Seconds(i64),
    /// A duration with units (`"10m"`, `"1h30m"`).
    Duration(&'a str),
}

/// One message of a chat request.
#[derive(Debug, Serialize)]
pub struct WireMessage<'a> {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: &'static str,
    /// The text.
    pub content: Cow<'a, str>,
    /// Base64 images, without `data:` prefix.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<&'a str>,
    /// Calls an assistant message made.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCallOut<'a>>,
    /// For tool results: the tool that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<&'a str>,
    /// For tool results: the call answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<&'a str>,
}

/// A tool call sent back in an assistant message.
#[derive(Debug, Serialize)]
pub struct WireToolCallOut<'a> {
    /// The call's id.
    pub id: &'a str,
    /// The function called.
    pub function: WireFunctionOut<'a>,
}

/// The function part of a tool call sent back: arguments are an object.
#[derive(Debug, Serialize)]
pub struct WireFunctionOut<'a> {
    /// Position in the batch.
    pub index: usize,
    /// The tool's name.
    pub name: &'a str,
    /// The arguments, a JSON object.
    pub arguments: &'a Map<String, Value>,
}

/// A tool offered: `{"type": "function", "function": {...}}`.
#[derive(Debug, Serialize)]
pub struct WireTool<'a> {
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The function.
    pub function: WireFunctionDef<'a>,
}

/// A function definition.
#[derive(Debug, Serialize)]
pub struct WireFunctionDef<'a> {
    /// Its name.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// JSON Schema of its arguments.
    pub parameters: &'a Value,
}

/// `options` of a chat request; `None` fields are left to the server.
#[derive(Debug, Default, Serialize)]
pub struct WireOptions<'a> {
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Top-k sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Repetition penalty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_penalty: Option<f32>,
    /// Seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// The most tokens to generate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_predict: Option<u32>,
    /// Stop sequences.
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    pub stop: &'a [String],
    /// The context window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub num_ctx: Option<u32>,
}

impl WireOptions<'_> {
    /// Whether no option is set (then `options` is left out).
    pub fn is_empty(&self) -> bool {
        self.temperature.is_none()
            && self.top_p.is_none()
            && self.top_k.is_none()
            && self.repeat_penalty.is_none()
            && self.seed.is_none()
            && self.num_predict.is_none()
            && self.stop.is_empty()
            && self.num_ctx.is_none()
    }
}

/// One line of a streamed `/api/chat` reply: what every line may carry.
///
/// The final line's statistics are read apart ([`FinalLine`], a second parse of that one
/// line): kept out of here, this struct stays small enough to be moved without a
/// `memcpy` call, which was a tenth of the decoder's cost per line.
#[derive(Debug, Deserialize)]
pub struct ChatLine<'a> {
    /// The delta.
    #[serde(borrow, default)]
    pub message: Option<LineMessage<'a>>,
    /// Whether this is the final line.
    #[serde(default)]
    pub done: bool,
    /// An error reported inside the stream.
    #[serde(borrow, default)]
    pub error: Option<WireStr<'a>>,
}

/// The statistics of the final line (`done: true`).
#[derive(Debug, Deserialize)]
pub struct FinalLine<'a> {
    /// Why generation stopped (`stop`, `length`, ...).
    #[serde(borrow, default)]
    pub done_reason: Option<WireStr<'a>>,
    /// Prompt tokens read.
    #[serde(default)]
    pub prompt_eval_count: Option<u32>,
    /// Tokens generated.
    #[serde(default)]
    pub eval_count: Option<u32>,
    /// Total time, ns.
    #[serde(default)]
    pub total_duration: Option<u64>,
    /// Model load time, ns.
    #[serde(default)]
    pub load_duration: Option<u64>,
    /// Prompt reading time, ns.
    #[serde(default)]
    pub prompt_eval_duration: Option<u64>,
    /// Generation time, ns.
    #[serde(default)]
    pub eval_duration: Option<u64>,
}

/// The `message` of a reply line.
#[derive(Debug, Deserialize)]
pub struct LineMessage<'a> {
    /// Answer text.
    #[serde(borrow, default)]
    pub content: Option<WireStr<'a>>,
    /// Reasoning text.
    #[serde(borrow, default)]
    pub thinking: Option<WireStr<'a>>,
    /// Whole tool calls.
    #[serde(default)]
    pub tool_calls: Option<Vec<WireToolCallIn>>,
}

/// A tool call in a reply; newer servers send `id` and `function.index`.
#[derive(Debug, Deserialize)]
pub struct WireToolCallIn {
    /// The call's id, when the server sent one.
    #[serde(default)]
    pub id: Option<String>,
    /// The function called (`None` in a flat call, which has `name` and `arguments` here).
    #[serde(default)]
    pub function: Option<WireFunctionIn>,
    /// A flat call's tool name.
    #[serde(default)]
    pub name: Option<String>,
    /// A flat call's arguments.
    #[serde(default)]
    pub arguments: Value,
}

/// The function part of a tool call in a reply.
#[derive(Debug, Deserialize)]
pub struct WireFunctionIn {
    /// The tool's name.
    #[serde(default)]
    pub name: String,
    /// The arguments: an object (a string holding one is tolerated and parsed).
    #[serde(default)]
    pub arguments: Value,
}

/// `{"error": "..."}`, the body of an HTTP error.
#[derive(Debug, Deserialize)]
pub struct ErrorBody {
    /// The server's text.
    pub error: String,
}

/// The reply of `/api/tags`.
#[derive(Debug, Deserialize)]
pub struct TagsResponse {
    /// The models installed.
    #[serde(default)]
    pub models: Vec<TagModel>,
}

/// One model of `/api/tags` (and, with the extra fields, `/api/ps`).
#[derive(Debug, Deserialize)]
pub struct TagModel {
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// Its name again, in newer servers.
    #[serde(default)]
    pub model: Option<String>,
    /// Last modified.
    #[serde(default)]
    pub modified_at: Option<String>,
    /// Size in bytes.
    #[serde(default)]
    pub size: Option<u64>,
    /// Digest.
    #[serde(default)]
    pub digest: Option<String>,
    /// Build details.
    #[serde(default)]
    pub details: Option<WireDetails>,
    /// (ps) When it will be unloaded.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// (ps) Bytes on the GPU.
    #[serde(default)]
    pub size_vram: Option<u64>,
    /// (ps) The context it was loaded with.
    #[serde(default)]
    pub context_length: Option<u32>,
}

/// `details` of a model.
#[derive(Debug, Default, Deserialize)]
pub struct WireDetails {
    /// File format.
    #[serde(default)]
    pub format: Option<String>,
    /// Family.
    #[serde(default)]
    pub family: Option<String>,
    /// Parameter count as text.
    #[serde(default)]
    pub parameter_size: Option<String>,
    /// Quantisation.
    #[serde(default)]
    pub quantization_level: Option<String>,
}

/// The reply of `/api/show`.
#[derive(Debug, Deserialize)]
pub struct ShowResponse {
    /// Default parameters, one `name value` a line.
    #[serde(default)]
    pub parameters: Option<String>,
    /// Build details.
    #[serde(default)]
    pub details: Option<WireDetails>,
    /// `general.architecture`, `<arch>.context_length`, ...
    #[serde(default)]
    pub model_info: Option<Map<String, Value>>,
    /// `completion`, `tools`, `thinking`, `vision`, ...
    #[serde(default)]
    pub capabilities: Vec<String>,
    /// Last modified.
    #[serde(default)]
    pub modified_at: Option<String>,
}

/// One line of `/api/pull`'s streamed progress.
#[derive(Debug, Deserialize)]
pub struct PullLine {
    /// What the server is doing.
    #[serde(default)]
    pub status: Option<String>,
    /// The layer.
    #[serde(default)]
    pub digest: Option<String>,
    /// Its size.
    #[serde(default)]
    pub total: Option<u64>,
    /// Bytes so far.
    #[serde(default)]
    pub completed: Option<u64>,
    /// A failure, even under 200.
    #[serde(default)]
    pub error: Option<String>,
}

/// The reply of `/api/version`.
#[derive(Debug, Deserialize)]
pub struct VersionResponse {
    /// The version.
    pub version: String,
}

/// A string borrowed from the line when it has no escapes, owned otherwise.
///
/// serde's own `Cow<str>` impl always allocates inside an `Option`; this one asks the
/// deserializer for a borrowed string first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireStr<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for WireStr<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = WireStr<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: serde::de::Error>(
                self,
                v: &'de str,
            ) -> Result<Self::Value, E> {
                Ok(WireStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(WireStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(WireStr(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}
