//! Token estimates and per-model context limits.
//!
//! # Decisions
//! - The fallback estimate is `ceil(chars / 4)` over everything the model reads (system
//!   prompt, messages, tool schemas); a provider's own tokenizer
//!   ([`crate::ProviderAdapter::count_tokens`]) is preferred whenever it answers.
//! - Where the window comes from (a setting, the per-model table here, the server's
//!   report, the default) is decided once, in [`crate::context::window`].
//! - A request at 90% or more of the limit draws a warning; one over the limit is refused
//!   before anything is sent.

use std::collections::BTreeMap;

use ollm_types::{ContentPart, ProviderRequest, ResponseFormat};
use serde::{Deserialize, Serialize};

/// The share of the context window from which a warning is given.
pub(crate) const WARNING_THRESHOLD_PERCENT: f64 = 90.0;

/// Context limits by model name, with a default for models not listed (4096).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextLimits {
    /// Limits by model name.
    pub models: BTreeMap<String, usize>,
    /// The limit for models not listed, when the server reports no window.
    pub default: usize,
    /// A window set for every model not listed (a setting, such as the CLI's config
    /// `context_length`): unlike [`ContextLimits::default`] it goes over what the
    /// server reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every_model: Option<usize>,
    /// The cap on a window taken from a model's trained length, on a server that sizes
    /// the window per request (Ollama): memory grows with the window, and trained
    /// lengths run to 128k and more (default 8192).
    pub trained_cap: usize,
}

/// The default [`ContextLimits::trained_cap`].
pub(crate) const DEFAULT_TRAINED_CAP: usize = 8192;

impl Default for ContextLimits {
    fn default() -> Self {
        ContextLimits {
            models: BTreeMap::new(),
            default: 4096,
            every_model: None,
            trained_cap: DEFAULT_TRAINED_CAP,
        }
    }
}

impl ContextLimits {
    /// The same table with a limit for `model`.
    pub fn with_model(mut self, model: impl Into<String>, limit: usize) -> Self {
        self.models.insert(model.into(), limit);
        self
    }

    /// The same table with a window for every model not listed.
    pub fn with_every_model(mut self, limit: usize) -> Self {
        self.every_model = Some(limit);
        self
    }

    /// The window set for `model`: its entry, else the one for every model.
    pub fn setting_for(&self, model: &str) -> Option<usize> {
        self.models.get(model).copied().or(self.every_model)
    }

    /// The limit set for `model` (see [`ContextLimits::setting_for`]), or the default.
    pub fn limit_for(&self, model: &str) -> usize {
        self.setting_for(model).unwrap_or(self.default)
    }
}

/// Template tokens per message that [`request_text`] lacks (`<|im_start|>role\n` and
/// `<|im_end|>\n` are 5 on Qwen; other templates are close).
pub(crate) const PER_MESSAGE_TOKENS: usize = 5;

/// Template tokens every request has (a default system prompt, the reply's opening).
pub(crate) const PREAMBLE_TOKENS: usize = 20;

/// Template tokens around the tool schemas when tools are offered natively: the
/// instructions, and the `{"type": "function", "function": ...}` wrapper of each tool.
pub(crate) const TOOLS_PREAMBLE_TOKENS: usize = 80;
/// See `TOOLS_PREAMBLE_TOKENS`.
pub(crate) const PER_TOOL_TOKENS: usize = 35;

/// The tokens a chat template adds to `request`'s text, before any correction learned
/// from the server: 5 for each message, the system prompt and the reply's opening, 20
/// for the preamble, and the tools' own text when tools are offered (80, and 35 a tool).
///
/// Measured on Qwen2.5-Coder-0.5B through llama-server (`/tokenize` of
/// [`request_text`] against `usage.prompt_tokens`, one user message): 29 more tokens
/// with no tools, then 142, 212, 317 and 457 with 1, 3, 6 and 10 tools offered; this
/// gives 30, 145, 215, 320 and 460.
pub fn template_overhead(request: &ProviderRequest) -> usize {
    let messages = request.messages.len() + usize::from(request.system.is_some()) + 1;
    let tools = if request.tools.is_empty() {
        0
    } else {
        TOOLS_PREAMBLE_TOKENS + PER_TOOL_TOKENS * request.tools.len()
    };
    PER_MESSAGE_TOKENS * messages + PREAMBLE_TOKENS + tools
}

/// `ceil(chars / 4)`: the estimate used when the provider has no tokenizer.
pub fn estimate_tokens(chars: usize) -> usize {
    chars.div_ceil(4)
}

/// [`estimate_tokens`] of a text's characters (not bytes).
pub fn estimate_text(text: &str) -> usize {
    estimate_tokens(text.chars().count())
}

/// Everything the model reads in `request`, as one text: the system prompt, the messages'
/// text and tool calls, the tool schemas and the output schema. Its character count is the
/// basis of the fallback estimate, and it is what a provider's tokenizer is asked to count.
pub fn request_text(request: &ProviderRequest) -> String {
    let mut out = String::new();
    if let Some(system) = &request.system {
        out.push_str(system);
    }
    for message in &request.messages {
        for part in message.parts() {
            match part {
                ContentPart::Text { text } => out.push_str(text),
                ContentPart::Image { .. } => {}
                ContentPart::ToolCall(call) => {
                    out.push_str(&call.name);
                    out.push_str(&call.arguments_value().to_string());
                }
            }
        }
    }
    for tool in &request.tools {
        out.push_str(&tool.name);
        out.push_str(&tool.description);
        out.push_str(&tool.parameters.to_string());
    }
    if let Some(ResponseFormat::JsonSchema { schema, .. }) = &request.response_format {
        out.push_str(&schema.to_string());
    }
    out
}

/// `used` as a percentage of `limit` (100% or more when `limit` is zero and anything is
/// used).
pub fn usage_percent(used: usize, limit: usize) -> f64 {
    if limit == 0 {
        return if used == 0 { 0.0 } else { f64::INFINITY };
    }
    used as f64 * 100.0 / limit as f64
}

/// Where a request stands against its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// Under 90%.
    Fits,
    /// 90% or more, but within the limit: send it and warn.
    NearLimit,
    /// Over the limit: refuse it.
    Over,
}

/// Classifies `used` tokens against `limit`.
pub fn budget(used: usize, limit: usize) -> Budget {
    if used > limit {
        Budget::Over
    } else if usage_percent(used, limit) >= WARNING_THRESHOLD_PERCENT {
        Budget::NearLimit
    } else {
        Budget::Fits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn estimate_rounds_up() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(4), 1);
        assert_eq!(estimate_tokens(5), 2);
        assert_eq!(estimate_text("héllo"), 2);
    }

    #[test]
    fn budget_edges() {
        assert_eq!(budget(89, 100), Budget::Fits);
        assert_eq!(budget(90, 100), Budget::NearLimit);
        assert_eq!(budget(100, 100), Budget::NearLimit);
        assert_eq!(budget(101, 100), Budget::Over);
        assert_eq!(budget(0, 0), Budget::Fits);
    }
}
