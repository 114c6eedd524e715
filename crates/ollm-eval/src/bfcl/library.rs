//! The ollm columns: one question through the library itself, `ollm-core`'s
//! [`ChatClient`] with `ollm-bridge`'s OpenAI adapter against the llama-server.
//!
//! # Decisions
//!
//! - **The functions are declared as tools that never run**: each is a [`Recorder`] whose
//!   `execute` returns a fixed text; the calls are read from the run's
//!   [`ChatEvent::ToolCallStarted`] events, so a call is recorded as the library
//!   understood it (after its recovery of calls written as text, before its argument
//!   validation), whether or not the registry would have accepted it. The checker judges.
//! - **One model turn** (`max_turns` 1): BFCL's categories here are single-turn; the calls
//!   of the first reply are the answer. Nudges and retries that need a second turn do not
//!   happen.
//! - **No system prompt**, as the plain column and BFCL's Qwen (FC) setup; temperature and
//!   generation cap as the plain column. A fresh client per question (its tools differ),
//!   so auto learns nothing across questions: the result is its first-run choice.
//! - A function whose schema the registry refuses is a question failed with finish
//!   `refused_schema`, not a harness failure: a user of the library would meet the same.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use async_trait::async_trait;
use futures::StreamExt;
use ollm_bridge::{OpenAiConfig, OpenAiProvider};
use ollm_core::{
    ChatClient, ChatConfig, ChatEvent, ChatOptions, Tool, ToolError, ToolMode, ToolRegistry,
};
use ollm_types::ToolSchema;
use serde_json::{Map, Value};

use super::checker::Call;
use super::tools::Outcome;

/// A declared function that records nothing itself and never runs.
struct Recorder {
    schema: ToolSchema,
}

#[async_trait]
impl Tool for Recorder {
    fn schema(&self) -> ToolSchema {
        self.schema.clone()
    }

    async fn execute(&self, _arguments: Map<String, Value>) -> Result<Value, ToolError> {
        Ok(Value::String("(recorded by the benchmark; not run)".into()))
    }
}

/// What a library run needs besides the question.
pub(crate) struct Settings<'a> {
    pub(crate) base_url: &'a str,
    pub(crate) model: &'a str,
    pub(crate) mode: ToolMode,
    pub(crate) temperature: f64,
    pub(crate) max_tokens: u32,
    pub(crate) timeout: Duration,
}

/// The registry of `tools` (OpenAI `tools` entries), or why the library refused one.
fn registry(tools: &[Value]) -> Result<ToolRegistry, String> {
    let mut registry = ToolRegistry::new();
    for t in tools {
        let f = &t["function"];
        let schema = ToolSchema::new(
            f["name"].as_str().unwrap_or_default(),
            f["description"].as_str().unwrap_or_default(),
            f["parameters"].clone(),
        );
        registry
            .register(Arc::new(Recorder { schema }))
            .map_err(|e| e.to_string())?;
    }
    Ok(registry)
}

/// Asks `question` with `tools` declared, in `settings.mode`; `Err` only when the client
/// cannot be built.
pub(crate) async fn ask(
    settings: &Settings<'_>,
    question: &str,
    tools: &[Value],
) -> Result<Outcome> {
    let provider = OpenAiProvider::new(OpenAiConfig::new(settings.base_url))?;
    let registry = match registry(tools) {
        Ok(registry) => registry,
        Err(why) => {
            return Ok(Outcome {
                text: why,
                finish: "refused_schema".into(),
                ..Outcome::default()
            });
        }
    };
    let mut config = ChatConfig::for_model(settings.model);
    config.system = None;
    config.max_turns = 1;
    config.tool_mode = settings.mode;
    config.max_tokens = Some(settings.max_tokens);
    #[allow(
        clippy::cast_possible_truncation,
        reason = "a temperature: 0 or near it"
    )]
    let temperature = settings.temperature as f32;
    config.options.temperature = Some(temperature);
    let client = ChatClient::new(Arc::new(provider), registry, config);
    let mut run = client.chat(question, ChatOptions::default());
    let mut out = Outcome::default();
    let read = async {
        while let Some(event) = run.next().await {
            note(&mut out, event);
        }
    };
    if tokio::time::timeout(settings.timeout, read).await.is_err() {
        out.finish = "timeout".into();
    }
    Ok(out)
}

/// Records what one event says.
fn note(out: &mut Outcome, event: ChatEvent) {
    match event {
        ChatEvent::TextDelta { text } => out.text.push_str(&text),
        ChatEvent::ToolCallStarted { call } => out.calls.push(Call {
            name: call.name,
            args: Value::Object(call.arguments),
        }),
        ChatEvent::ToolResult { is_error, .. } => out.refused += usize::from(is_error),
        ChatEvent::StrategyChosen { strategy, .. } => {
            out.strategy = strategy.map(|s| s.as_str().to_owned());
        }
        ChatEvent::Finish { reason, .. } => {
            out.finish = serde_json::to_value(reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("{reason:?}"));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ollm_types::{FinishReason, ToolCall, Usage};
    use serde_json::json;

    #[test]
    fn events_record_calls_refusals_text_strategy_and_finish() {
        let mut out = Outcome::default();
        let call = ToolCall::new("c1", "geo_area", json!({"base": 10})).unwrap();
        let events = [
            ChatEvent::StrategyChosen {
                strategy: Some(ToolMode::Native),
                reason: "r".into(),
            },
            ChatEvent::TextDelta { text: "a".into() },
            ChatEvent::TextDelta { text: "b".into() },
            ChatEvent::ToolCallStarted { call },
            ChatEvent::ToolResult {
                call_id: "c1".into(),
                name: "geo_area".into(),
                content: "Error: unknown tool".into(),
                is_error: true,
            },
            ChatEvent::Finish {
                reason: FinishReason::MaxTurns,
                usage: Usage::default(),
                added: Vec::new(),
            },
        ];
        for event in events {
            note(&mut out, event);
        }
        assert_eq!(out.text, "ab");
        assert_eq!(out.calls.len(), 1);
        assert_eq!(
            (out.calls[0].name.as_str(), &out.calls[0].args),
            ("geo_area", &json!({"base": 10}))
        );
        assert_eq!(out.refused, 1);
        assert_eq!(out.strategy.as_deref(), Some("native"));
        assert_eq!(out.finish, "max_turns");
    }

    #[test]
    fn the_registry_takes_converted_bfcl_schemas() {
        let function = json!({"name": "math.hypot", "description": "d", "parameters": {
            "type": "dict", "properties": {"x": {"type": "float"}, "o": {"type": "dict",
            "properties": {"k": {"type": "tuple", "items": {"type": "integer"}}}}},
            "required": ["x"]}});
        let registry = registry(&[super::super::tools::tool(&function)]).unwrap();
        assert!(
            registry
                .validate("math_hypot", json!({"x": 1.5}).as_object().unwrap())
                .is_ok()
        );
        assert!(
            registry
                .validate("math_hypot", json!({"x": "one"}).as_object().unwrap())
                .is_err()
        );
    }
}
