//! A schema-constrained tool call through ollm-core's turn loop into a tool execution and
//! back, against the real server. Needs the core issue's `ChatClient` and
//! `ToolMode::Constrained`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use ollm_core::strategy::ToolMode;
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, Tool, ToolError, ToolRegistry};
use ollm_types::ToolSchema;
use serde_json::{Map, Value, json};

use super::setup::{provider, server};

/// A tool that reports the time and counts its runs.
struct Clock(Arc<AtomicUsize>);

#[async_trait]
impl Tool for Clock {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "get_time",
            "Returns the current time.",
            json!({"type": "object", "properties": {}, "additionalProperties": false}),
        )
    }

    async fn execute(&self, _arguments: Map<String, Value>) -> Result<Value, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!("12:00"))
    }
}

#[tokio::test]
async fn a_constrained_tool_call_runs_the_tool_and_the_result_goes_back() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Clock(Arc::clone(&runs)))).unwrap();
    let mut config = ChatConfig::for_model(server().1);
    config.tool_mode = ToolMode::Constrained;
    config.max_turns = 2;
    config.options.temperature = Some(0.0);
    config.options.seed = Some(42);
    config.options.max_tokens = Some(64);
    config.system = Some("You answer by calling tools. To learn the time, call get_time.".into());
    let client = ChatClient::new(Arc::new(provider()), tools, config);
    let run = client.chat(
        "What time is it? Call the get_time tool.",
        ChatOptions::default(),
    );
    let events: Vec<ChatEvent> = tokio::time::timeout(Duration::from_secs(240), run.collect())
        .await
        .expect("the run took over 240 s");
    let started = events
        .iter()
        .find_map(|e| match e {
            ChatEvent::ToolCallStarted { call } => Some(call.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no tool call in {events:#?}"));
    assert_eq!(started.name, "get_time");
    assert!(
        events.iter().any(
            |e| matches!(e, ChatEvent::ToolResult { call_id, is_error: false, .. }
            if *call_id == started.id)
        ),
        "{events:#?}"
    );
    assert!(runs.load(Ordering::SeqCst) >= 1);
    assert!(
        matches!(events.last(), Some(ChatEvent::Finish { .. })),
        "{events:#?}"
    );
}
