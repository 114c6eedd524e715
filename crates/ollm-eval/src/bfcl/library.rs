//! The ollm columns: one question through the library itself, `ollm-core`'s
//! [`ChatClient`] with `ollm-bridge`'s OpenAI adapter against the llama-server.
//!
//! # Decisions
//!
//! - **The functions are declared, never run** ([`ToolRegistry::declared`]), and the run
//!   hands the calls back ([`CallMode::HandBack`]); the run is folded by core's
//!   [`ChatReply`], so a call is recorded as the library understood it (after its
//!   recovery of calls written as text, before any argument validation), whether or not
//!   the registry would have accepted it. The checker judges. `refused` counts the calls
//!   the run answered itself (an unknown tool, unreadable markup) and the handed-back
//!   ones whose arguments the registry's schema check refuses ([`ToolRegistry::validate`],
//!   without the coach's typing of quoted values that running them would apply).
//! - **One model turn** (`max_turns` 1): BFCL's categories here are single-turn; the calls
//!   of the first reply are the answer (finish `tool_calls`). Nudges and retries that need
//!   a second turn do not happen.
//! - **No system prompt**, as the plain column and BFCL's Qwen (FC) setup; temperature and
//!   generation cap as the plain column. A fresh client per question (its tools differ),
//!   so auto learns nothing across questions: the result is its first-run choice.
//! - A function whose schema the registry refuses is a question failed with finish
//!   `refused_schema`, not a harness failure: a user of the library would meet the same.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use futures::StreamExt;
use ollm_bridge::{OpenAiConfig, OpenAiProvider};
use ollm_core::{CallMode, ChatClient, ChatConfig, ChatOptions, ChatReply, ToolMode, ToolRegistry};
use ollm_types::ToolSchema;
use serde_json::Value;

use super::checker::Call;
use super::tools::Outcome;

/// What a library run needs besides the question.
pub(crate) struct Settings<'a> {
    pub(crate) base_url: &'a str,
    pub(crate) model: &'a str,
    pub(crate) mode: ToolMode,
    pub(crate) temperature: f64,
    pub(crate) max_tokens: u32,
    pub(crate) timeout: Duration,
}

/// The registry of `tools` (OpenAI `tools` entries), declared, or why the library
/// refused one.
fn registry(tools: &[Value]) -> Result<ToolRegistry, String> {
    let schemas = tools.iter().map(|t| {
        let f = &t["function"];
        ToolSchema::new(
            f["name"].as_str().unwrap_or_default(),
            f["description"].as_str().unwrap_or_default(),
            f["parameters"].clone(),
        )
    });
    ToolRegistry::declared(schemas).map_err(|e| e.to_string())
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
        Ok(registry) => Arc::new(registry),
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
    let client = ChatClient::new(Arc::new(provider), ToolRegistry::new(), config);
    let options = ChatOptions {
        tools: Some(Arc::clone(&registry)),
        calls: CallMode::HandBack,
        ..ChatOptions::default()
    };
    let mut run = client.chat(question, options);
    let mut reply = ChatReply::default();
    let read = async {
        while let Some(event) = run.next().await {
            reply.push(&event);
        }
    };
    let timed_out = tokio::time::timeout(settings.timeout, read).await.is_err();
    let mut out = outcome(&reply, &registry);
    if timed_out {
        out.finish = "timeout".into();
    }
    Ok(out)
}

/// What a run came to (see the module docs for `refused`).
fn outcome(reply: &ChatReply, registry: &ToolRegistry) -> Outcome {
    let refused = |record: &ollm_core::CallRecord| match &record.result {
        Some(_) => record.is_error,
        None => (registry.validate(&record.call.name, &record.call.arguments)).is_err(),
    };
    let finish = reply.finish_reason.map(|reason| {
        serde_json::to_value(reason)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| format!("{reason:?}"))
    });
    Outcome {
        calls: (reply.tool_calls.iter())
            .map(|r| Call {
                name: r.call.name.clone(),
                args: Value::Object(r.call.arguments.clone()),
            })
            .collect(),
        text: reply.answer.clone(),
        finish: finish.unwrap_or_default(),
        strategy: reply.strategy.map(|s| s.as_str().to_owned()),
        refused: reply.tool_calls.iter().filter(|r| refused(r)).count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ollm_core::ChatEvent;
    use ollm_types::{FinishReason, ToolCall, Usage};
    use serde_json::json;

    #[test]
    fn a_run_records_calls_refusals_text_strategy_and_finish() {
        let schema = json!({"type": "object", "properties": {"base": {"type": "integer"}},
            "required": ["base"]});
        let registry = ToolRegistry::declared([ToolSchema::new("geo_area", "", schema)]).unwrap();
        let call = |id: &str, name: &str, args: Value| ToolCall::new(id, name, args).unwrap();
        let events = [
            ChatEvent::StrategyChosen {
                strategy: Some(ToolMode::Native),
                reason: "r".into(),
                cause: ollm_core::Reason::ReportsTools,
            },
            ChatEvent::TextDelta { text: "a".into() },
            ChatEvent::TextDelta { text: "b".into() },
            ChatEvent::ToolCallStarted {
                call: call("c1", "geo_area", json!({"base": 10})),
            },
            ChatEvent::ToolCallStarted {
                call: call("c2", "geo_area", json!({"base": "ten"})),
            },
            ChatEvent::ToolCallStarted {
                call: call("c3", "geo_volume", json!({})),
            },
            ChatEvent::ToolResult {
                call_id: "c3".into(),
                name: "geo_volume".into(),
                content: "Error: Unknown tool".into(),
                is_error: true,
            },
            ChatEvent::Finish {
                reason: FinishReason::ToolCalls,
                usage: Usage::default(),
                added: Vec::new(),
            },
        ];
        let mut reply = ChatReply::default();
        for event in &events {
            reply.push(event);
        }
        let out = outcome(&reply, &registry);
        assert_eq!(out.text, "ab");
        assert_eq!(out.calls.len(), 3);
        assert_eq!(
            (out.calls[0].name.as_str(), &out.calls[0].args),
            ("geo_area", &json!({"base": 10}))
        );
        assert_eq!(out.refused, 2, "the unknown tool and the refused arguments");
        assert_eq!(out.strategy.as_deref(), Some("native"));
        assert_eq!(out.finish, "tool_calls");
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
