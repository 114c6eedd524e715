//! The Messages API's streamed events and replies, as far as ollm reads them.
//!
//! Every field is optional and unknown fields and event types are ignored: Anthropic
//! documents that new event and block types may appear, and compatible servers
//! (llama.cpp, Ollama) fill in different subsets (llama.cpp's `tool_use` start has no
//! `input`; its usage adds `cache_read_input_tokens`). Text borrows from the event's data
//! where JSON escapes allow.

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::Value;

/// One streamed event's data, told apart by its `type`.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Event<'a> {
    /// The reply's envelope: its usage so far (the input tokens).
    MessageStart {
        #[serde(default)]
        message: Option<MessageHead>,
    },
    /// A content block opens at `index`.
    ContentBlockStart {
        #[serde(default)]
        index: u32,
        #[serde(borrow)]
        content_block: Block<'a>,
    },
    /// A piece of the block at `index`.
    ContentBlockDelta {
        #[serde(default)]
        index: u32,
        #[serde(borrow)]
        delta: Delta<'a>,
    },
    /// The block at `index` is complete.
    ContentBlockStop {},
    /// The stop reason and the usage (cumulative).
    MessageDelta {
        #[serde(default, borrow)]
        delta: Option<MessageDeltaBody<'a>>,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    /// The reply is complete.
    MessageStop {},
    /// Keep-alive.
    Ping {},
    /// An error inside the stream.
    Error {
        #[serde(default)]
        error: Option<Value>,
    },
    /// A type this version does not know.
    #[serde(other)]
    Unknown,
}

/// `message_start`'s `message` (the fields read).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageHead {
    #[serde(default)]
    pub(crate) usage: Option<WireUsage>,
}

/// A content block as it opens.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Block<'a> {
    /// Answer text (usually empty at the start).
    Text {
        #[serde(default, borrow)]
        text: Option<Cow<'a, str>>,
    },
    /// A tool call: its arguments follow as `input_json_delta`s.
    ToolUse {
        #[serde(default, borrow)]
        id: Option<Cow<'a, str>>,
        #[serde(default, borrow)]
        name: Option<Cow<'a, str>>,
        /// `{}` from Anthropic (the arguments stream after it); absent on llama.cpp.
        #[serde(default)]
        input: Option<Value>,
    },
    /// Reasoning.
    Thinking {
        #[serde(default, borrow)]
        thinking: Option<Cow<'a, str>>,
    },
    /// Anything else (`redacted_thinking`, server tool blocks, ...).
    #[serde(other)]
    Other,
}

/// A piece of a content block.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Delta<'a> {
    /// Answer text.
    #[serde(rename = "text_delta")]
    Text {
        #[serde(borrow)]
        text: Cow<'a, str>,
    },
    /// A fragment of a tool call's arguments (JSON text, cut anywhere).
    #[serde(rename = "input_json_delta")]
    InputJson {
        #[serde(borrow)]
        partial_json: Cow<'a, str>,
    },
    /// Reasoning text.
    #[serde(rename = "thinking_delta")]
    Thinking {
        #[serde(borrow)]
        thinking: Cow<'a, str>,
    },
    /// The signature of a thinking block (see the decoder's docs: not kept).
    #[serde(rename = "signature_delta")]
    Signature {},
    /// Anything else (`citations_delta`, ...).
    #[serde(other)]
    Other,
}

/// `message_delta`'s `delta`.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageDeltaBody<'a> {
    #[serde(default, borrow)]
    pub(crate) stop_reason: Option<Cow<'a, str>>,
}

/// Token counts. The input is split by the prompt cache: `input_tokens` are the ones
/// read anew, the cache fields the others (llama.cpp reports its cache hits the same way).
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub(crate) input_tokens: Option<u32>,
    #[serde(default)]
    pub(crate) cache_creation_input_tokens: Option<u32>,
    #[serde(default)]
    pub(crate) cache_read_input_tokens: Option<u32>,
    #[serde(default)]
    pub(crate) output_tokens: Option<u32>,
}

impl WireUsage {
    /// Every token of the prompt: read anew, written to the cache and read from it.
    pub(crate) fn prompt(&self) -> Option<u32> {
        let parts = [
            self.input_tokens,
            self.cache_creation_input_tokens,
            self.cache_read_input_tokens,
        ];
        parts.iter().flatten().copied().reduce(u32::saturating_add)
    }
}

/// `POST /v1/messages/count_tokens`.
#[derive(Debug, Deserialize)]
pub(crate) struct TokenCount {
    pub(crate) input_tokens: usize,
}

/// `GET /v1/models`: Anthropic's list (`data[].id`, `display_name`) or llama.cpp's
/// OpenAI-style one (`data[].id`, `meta.n_ctx`).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ModelList {
    #[serde(default)]
    pub(crate) data: Vec<ModelEntry>,
}

/// One entry of [`ModelList`].
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ModelEntry {
    pub(crate) id: String,
    #[serde(default)]
    pub(crate) created_at: Option<String>,
    /// llama.cpp's model metadata.
    #[serde(default)]
    pub(crate) meta: Option<ModelMeta>,
}

/// llama.cpp's `meta` of a model entry.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ModelMeta {
    #[serde(default)]
    pub(crate) n_ctx: Option<u32>,
    #[serde(default)]
    pub(crate) n_ctx_train: Option<u32>,
    #[serde(default)]
    pub(crate) size: Option<u64>,
}
