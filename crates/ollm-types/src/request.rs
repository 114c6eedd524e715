//! What a provider is asked: the model, the conversation, the tools, and how to sample.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{Message, ToolChoice, ToolSchema, TypesError};

/// Sampling and length options. `None` leaves the server's default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct GenerationOptions {
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// The most tokens to generate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Nucleus sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Top-k sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Repetition penalty.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat_penalty: Option<f32>,
    /// Random seed, for repeatable sampling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Sequences that end generation.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// The context window to ask the server for, in tokens. The runtime always sets it
    /// (core's `context::window` settles it); an adapter sends exactly this (Ollama's
    /// `num_ctx`) or nothing, never a number of its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_length: Option<u32>,
}

/// Whether a reasoning model should think before answering, and how hard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Think {
    /// Do not think (where the model allows turning it off).
    Off,
    /// Think, at the model's default effort.
    On,
    /// Think briefly.
    Low,
    /// Think at medium effort.
    Medium,
    /// Think hard.
    High,
}

impl Think {
    /// Every level, from none to the most.
    pub const ALL: [Think; 5] = [
        Think::Off,
        Think::On,
        Think::Low,
        Think::Medium,
        Think::High,
    ];

    /// The level's name, as [`std::str::FromStr`] reads it, [`std::fmt::Display`] writes
    /// it and serde spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Think::Off => "off",
            Think::On => "on",
            Think::Low => "low",
            Think::Medium => "medium",
            Think::High => "high",
        }
    }
}

impl std::fmt::Display for Think {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Think {
    type Err = TypesError;

    /// Reads a level's name in any case; `true` and `false` are read as `on` and `off`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = match s.to_ascii_lowercase().as_str() {
            "true" => "on",
            "false" => "off",
            _ => s,
        };
        Think::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(name))
            .ok_or_else(|| TypesError::UnknownThink(s.to_owned()))
    }
}

/// Structured output: ask the server to constrain the reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
pub enum ResponseFormat {
    /// Any JSON value.
    Json,
    /// JSON matching this schema.
    JsonSchema {
        /// A short name for the schema (OpenAI-compatible servers require one).
        name: String,
        /// The JSON Schema.
        schema: Value,
    },
}

/// One request to a provider: everything a backend needs for one streamed reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderRequest {
    /// The model's name as the server knows it.
    pub model: String,
    /// A system prompt sent before the messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools offered natively.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSchema>,
    /// Whether the model should call a tool.
    #[serde(default)]
    pub tool_choice: ToolChoice,
    /// Whether the model may call several tools in one reply. `None` means yes, as in
    /// OpenAI's API; the OpenAI-compatible adapter says so out loud, since llama-server
    /// defaults to no and its grammar then ends the reply after the first call.
    /// `Some(false)` asks for one call at most (sent to OpenAI-compatible servers, and to
    /// Anthropic as `disable_parallel_tool_use`; Ollama has no such switch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// Sampling options.
    #[serde(default)]
    pub options: GenerationOptions,
    /// Whether to think (sent only to models that can).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<Think>,
    /// Structured output, when the reply must be JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// How long the server should keep the model loaded after this request (Ollama's
    /// `keep_alive`, for example `"5m"` or `"0"`); ignored by servers without the notion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_alive: Option<String>,
    /// What the runtime reckons the request's text costs, in tokens: core's count,
    /// corrected by what the server reported for earlier requests (its
    /// `context::calibrate`, the one owner of token cost), without its estimate of the
    /// chat template, so it errs low rather than high. Never sent; an adapter may judge
    /// a silent truncation by it (the Ollama adapter does). `None` when the request did
    /// not come through the runtime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_prompt_tokens: Option<u32>,
    /// HTTP headers for this request only, as (name, value): what a gateway passes on
    /// from its own client (`ollm serve` forwards `x-session-id` and the routing headers
    /// it is told to, which vLLM's and SGLang's routers key on). The adapters send them
    /// as headers, never in the body; empty for everything else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
}

impl ProviderRequest {
    /// A request for `model` with these messages and defaults elsewhere.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        ProviderRequest {
            model: model.into(),
            system: None,
            messages,
            tools: Vec::new(),
            tool_choice: ToolChoice::Auto,
            parallel_tool_calls: None,
            options: GenerationOptions::default(),
            think: None,
            response_format: None,
            keep_alive: None,
            estimated_prompt_tokens: None,
            headers: Vec::new(),
        }
    }

    /// The characters of everything the model will read (system prompt, messages, tool
    /// schemas), the basis of the `ceil(chars / 4)` estimate.
    pub fn char_count(&self) -> usize {
        let system = self.system.as_deref().map_or(0, |s| s.chars().count());
        let messages: usize = self.messages.iter().map(Message::char_count).sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| {
                t.name.chars().count()
                    + t.description.chars().count()
                    + t.parameters.to_string().chars().count()
            })
            .sum();
        system + messages + tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Result<Think, TypesError>) {
        assert_eq!(input.parse::<Think>(), expected, "{input:?}");
    }

    #[test]
    fn think_levels_parse() {
        check("HIGH", Ok(Think::High));
        check("off", Ok(Think::Off));
        check("True", Ok(Think::On));
        check("false", Ok(Think::Off));
        check("max", Err(TypesError::UnknownThink("max".into())));
    }

    #[test]
    fn think_names_round_trip_and_match_serde() {
        for think in Think::ALL {
            assert_eq!(think.to_string().parse::<Think>(), Ok(think));
            let json = serde_json::to_value(think).ok();
            assert_eq!(json, Some(Value::from(think.to_string())));
        }
    }
}
