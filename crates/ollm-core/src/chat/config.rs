//! A chat client's settings ([`ChatConfig`]) and one call's overrides of them
//! ([`ChatOptions`]). A leaf: plain data the client keeps and every run settles.

use std::sync::Arc;
use std::time::Duration;

use ollm_types::{GenerationOptions, Think, ToolChoice};
use serde::{Deserialize, Serialize};

use crate::ToolRegistry;
use crate::coach::{CoachConfig, Route};
use crate::context::CompactionConfig;
use crate::strategy::{AutoRules, ToolMode};
use crate::tokens::ContextLimits;

/// The generation cap per reply when none is configured, in tokens (see the chat module's
/// Decisions).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// How long one tool call may take when neither the tool ([`crate::Tool::timeout`]) nor
/// the client ([`ChatConfig::tool_timeout`]) says otherwise: ten minutes, above the
/// built-in tools' own limits (a command's 30 s, an MCP call's 120 s) and a person
/// answering an approval prompt.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(600);

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
    /// (default [`DEFAULT_MAX_TOKENS`]; `None`: what the context window leaves). Every
    /// request carries a cap either way, never more than the window minus the prompt's
    /// estimated cost (see the chat module's Decisions).
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
    /// How long one tool call may take unless its tool says ([`crate::Tool::timeout`]);
    /// a call past it is answered `Error: ...` ([`crate::ToolError::TimedOut`]). Default
    /// [`DEFAULT_TOOL_TIMEOUT`]; `None`: no limit.
    pub tool_timeout: Option<Duration>,
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
            tool_timeout: Some(DEFAULT_TOOL_TIMEOUT),
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

/// What a run does with the calls the model makes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallMode {
    /// Run them with the client's tools and feed the results back, turn after turn.
    #[default]
    Run,
    /// Run nothing: the first reply that makes calls to offered tools ends the run with
    /// `Finish { reason: tool_calls }`, its calls announced (`ToolCallStarted`) and left
    /// for the caller to run. The history then holds the prompt and the assistant message
    /// carrying those calls; the caller appends one `Message::tool_result` per call
    /// ([`crate::ChatClient::extend_history`]) before [`crate::ChatClient::resume`] or the
    /// next `chat`. Calls the run answers itself (a text call to a tool not offered, an
    /// unreadable one) get their `ToolResult` and go back to the model as in [`Run`]
    /// mode, so they never reach the caller.
    ///
    /// [`Run`]: CallMode::Run
    HandBack,
}

/// Per-call overrides of a [`ChatConfig`]; the client's settings stay for later calls.
#[derive(Debug, Clone, Default)]
pub struct ChatOptions {
    /// The model for this call.
    pub model: Option<String>,
    /// The system prompt of this call's requests, in place of the history's (never
    /// recorded).
    pub system: Option<String>,
    /// The tools of this call, in place of the client's.
    pub tools: Option<Arc<ToolRegistry>>,
    /// What happens to the model's calls (default: they run).
    pub calls: CallMode,
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
    /// The `tool-or-none` choice made for this prompt before, which the run plays
    /// without asking again, whatever calls the conversation made since the prompt: a
    /// proxy that sees each of a prompt's requests apart (`ollm serve`) keeps the first
    /// one's ([`super::ChatClient::route`]) so the tools it withheld stay withheld for
    /// the prompt, as in one run. Ignored when the rule is off, the run offers no tools
    /// or its tool choice requires a call.
    pub route: Option<Route>,
}
