//! A chat client's settings ([`ChatConfig`]) and one call's overrides of them
//! ([`ChatOptions`]). A leaf: plain data the client keeps and every run settles.

use ollm_types::{GenerationOptions, Think, ToolChoice};
use serde::{Deserialize, Serialize};

use crate::coach::CoachConfig;
use crate::context::CompactionConfig;
use crate::strategy::{AutoRules, ToolMode};
use crate::tokens::ContextLimits;

/// The generation cap per reply when none is configured, in tokens (see the chat module's
/// Decisions).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// Settings of a chat client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatConfig {
    /// The model to talk to.
    pub model: String,
    /// The system prompt.
    pub system: Option<String>,
    /// Text put before the conversation's first user message in the requests of a run
    /// that offers tools: what the tools work on (the CLI puts the working folder and
    /// its top entries here). Never recorded in the history, and left out of runs
    /// without tools (the coach's `tools-context` rule).
    pub tools_context: Option<String>,
    /// The most provider round trips one `chat` call may make (default 10).
    pub max_turns: u32,
    /// How tools reach the model.
    pub tool_mode: ToolMode,
    /// Whether, and which, tool the model must call (see the chat module's Decisions).
    pub tool_choice: ToolChoice,
    /// Whether the model may call several tools in one reply
    /// ([`ProviderRequest::parallel_tool_calls`](ollm_types::ProviderRequest); default
    /// `None`: yes). The turn loop runs every call of a reply either way.
    pub parallel_tool_calls: Option<bool>,
    /// How [`ToolMode::Auto`] weighs what earlier runs learned about a model.
    pub auto: AutoRules,
    /// The generation cap per reply, in tokens, when the sampling options set none
    /// (default [`DEFAULT_MAX_TOKENS`]; `None`: the server's own limit).
    pub max_tokens: Option<u32>,
    /// Sampling options.
    pub options: GenerationOptions,
    /// The temperature of a request that offers tools when the sampling options set
    /// none (default `Some(0.0)`: greedy; `None` leaves the server's default). Not used
    /// in a run asked to think, which greedy decoding can send into loops, nor with the
    /// coach's `greedy-tool-turns` rule off (see [`crate::coach`] for the measurement).
    pub tool_temperature: Option<f32>,
    /// Whether to think.
    pub think: Option<Think>,
    /// Context limits per model.
    pub context_limits: ContextLimits,
    /// When and how the history is compacted.
    pub compaction: CompactionConfig,
    /// How long the server keeps the model loaded after each request (Ollama's
    /// `keep_alive`: `"5m"`, `"0"`, a number of seconds); `None` leaves the server's
    /// default. Servers without the notion ignore it.
    pub keep_alive: Option<String>,
    /// The small-model rules' switches, and the caller's words they use
    /// ([`crate::coach`]; default: every rule on).
    pub coach: CoachConfig,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            model: String::new(),
            system: None,
            tools_context: None,
            max_turns: 10,
            tool_mode: ToolMode::default(),
            tool_choice: ToolChoice::default(),
            parallel_tool_calls: None,
            auto: AutoRules::default(),
            max_tokens: Some(DEFAULT_MAX_TOKENS),
            options: GenerationOptions::default(),
            tool_temperature: Some(0.0),
            think: None,
            context_limits: ContextLimits::default(),
            compaction: CompactionConfig::default(),
            keep_alive: None,
            coach: CoachConfig::default(),
        }
    }
}

impl ChatConfig {
    /// A configuration for `model` with defaults elsewhere.
    pub fn for_model(model: impl Into<String>) -> Self {
        ChatConfig {
            model: model.into(),
            ..ChatConfig::default()
        }
    }
}

/// Per-call overrides of a [`ChatConfig`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatOptions {
    /// Tool mode for this call.
    pub tool_mode: Option<ToolMode>,
    /// Tool choice for this call.
    pub tool_choice: Option<ToolChoice>,
    /// Generation cap per reply for this call, in tokens (wins over the sampling
    /// options' `max_tokens`).
    pub max_tokens: Option<u32>,
    /// Sampling options for this call.
    pub options: Option<GenerationOptions>,
    /// Thinking for this call.
    pub think: Option<Think>,
    /// Turn limit for this call.
    pub max_turns: Option<u32>,
    /// Offer no tools in this call.
    pub no_tools: bool,
    /// Images attached to the prompt (base64 data, MIME type).
    pub images: Vec<(String, String)>,
}
