//! What a server says about its models: installed, running, being pulled.

use serde::{Deserialize, Serialize};

/// What a model can do, as the server reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(from = "String", into = "String")]
pub enum Capability {
    /// Text completion.
    Completion,
    /// Native tool calling.
    Tools,
    /// Reasoning (`think`).
    Thinking,
    /// Image input.
    Vision,
    /// Embeddings.
    Embedding,
    /// Fill-in-the-middle.
    Insert,
    /// A capability this version of ollm does not know, kept by name.
    Other(String),
}

impl From<String> for Capability {
    fn from(s: String) -> Self {
        match s.as_str() {
            "completion" => Capability::Completion,
            "tools" => Capability::Tools,
            "thinking" => Capability::Thinking,
            "vision" => Capability::Vision,
            "embedding" => Capability::Embedding,
            "insert" => Capability::Insert,
            _ => Capability::Other(s),
        }
    }
}

impl From<Capability> for String {
    fn from(c: Capability) -> Self {
        c.as_str().to_owned()
    }
}

impl Capability {
    /// The server's name for it.
    pub fn as_str(&self) -> &str {
        match self {
            Capability::Completion => "completion",
            Capability::Tools => "tools",
            Capability::Thinking => "thinking",
            Capability::Vision => "vision",
            Capability::Embedding => "embedding",
            Capability::Insert => "insert",
            Capability::Other(s) => s,
        }
    }
}

/// Details of a model's build, where the server reports them.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelDetails {
    /// File format, for example `gguf`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// Model family, for example `qwen3`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Parameter count as text, for example `8.2B`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameter_size: Option<String>,
    /// Quantisation, for example `Q4_K_M`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub quantization_level: Option<String>,
}

/// A model the server has.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ModelInfo {
    /// Its name, for example `qwen3:8b`.
    pub name: String,
    /// Size on disk in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// When it was last modified, as the server wrote it (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub modified_at: Option<String>,
    /// Content digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Build details.
    pub details: ModelDetails,
    /// What it can do; empty when the server did not say.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
    /// Its trained context window in tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u32>,
    /// The window a chat gets on this server as it runs, in tokens, as the server reports
    /// it: llama.cpp's per-slot `n_ctx`, vLLM's `max_model_len`, or a `num_ctx` among an
    /// Ollama model's parameters. `None` when the server does not say. A fact, not a
    /// decision: the runtime (core's `context::window`) settles the window from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<u32>,
    /// Whether the server sizes the window per request from `options.context_length`
    /// (Ollama's `num_ctx`), so a chat may ask for more than [`ModelInfo::window`], up to
    /// the trained length; `false` for servers that fix it at start (llama.cpp, vLLM).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub window_per_request: bool,
    /// Default runtime parameters, as the server lists them (one `name value` a line).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parameters: Option<String>,
}

impl ModelInfo {
    /// Whether the server reported this capability.
    pub fn has(&self, capability: &Capability) -> bool {
        self.capabilities.contains(capability)
    }
}

/// A model loaded in memory right now.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunningModel {
    /// Its name.
    pub name: String,
    /// Memory it takes, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Of which on the GPU, in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_vram: Option<u64>,
    /// When it will be unloaded (RFC 3339).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    /// The context window it was loaded with.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u32>,
}

/// One step of a model download.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PullProgress {
    /// What the server is doing (`pulling manifest`, `downloading ...`, `success`).
    pub status: String,
    /// The layer being downloaded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Its size in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Bytes downloaded so far.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completed: Option<u64>,
}
