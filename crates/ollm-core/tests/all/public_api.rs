//! The library API of issue 36: recovery as a call, the one-shot reply, handing calls
//! back, per-call settings and the per-tool timeout.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ollm_core::{
    CallFormat, CallMode, ChatOptions, Rejected, Tool, ToolError, ToolRegistry, recover_calls,
};
use ollm_types::{FinishReason, Message, Role, ToolCall, ToolSchema};
use serde_json::{Map, Value, json};
use test_utils::mock_provider::{MockProvider, ev};
use test_utils::recording_tool::{RecordingTool, registry};

use crate::support::{block_on, check_events, check_history, client, client_with, collect};

/// What `recover_calls` reads from `reply` with `read_file` and `list_dir` declared:
/// `(name, format)` per call, the prose, and how many items it rejected.
fn check(reply: &str, calls: &[(&str, CallFormat)], prose: &str, rejected: usize) {
    let tools = [
        ToolSchema::new("read_file", "Reads a file.", json!({"type": "object"})),
        ToolSchema::new("list_dir", "Lists a folder.", json!({"type": "object"})),
    ];
    let read = recover_calls(reply, &tools);
    let got: Vec<(&str, CallFormat)> = (read.calls.iter())
        .map(|c| (c.call.name.as_str(), c.format))
        .collect();
    assert_eq!(got, calls, "{reply:?}");
    assert_eq!(read.prose.trim(), prose, "{reply:?}");
    assert_eq!(read.rejected.len(), rejected, "{reply:?}");
    let ids: Vec<&str> = read.calls.iter().map(|c| c.call.id.as_str()).collect();
    let unique: std::collections::HashSet<&str> = ids.iter().copied().collect();
    assert_eq!(
        unique.len(),
        ids.len(),
        "ids are unique in a reply: {ids:?}"
    );
}

#[test]
fn recovery_reads_calls_per_format_for_declared_tools_only() {
    let hermes = r#"<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>"#;
    check(hermes, &[("read_file", CallFormat::Hermes)], "", 0);
    let bare = r#"{"name": "list_dir", "arguments": {"path": "."}}"#;
    check(bare, &[("list_dir", CallFormat::Json)], "", 0);
    let fenced = "```json\n{\"name\": \"list_dir\", \"arguments\": {}}\n```";
    check(fenced, &[("list_dir", CallFormat::FencedJson)], "", 0);
    check(
        r#"[read_file(path="a")]"#,
        &[("read_file", CallFormat::Pythonic)],
        "",
        0,
    );
    let xml = "<function=read_file><parameter=path>a</parameter></function>";
    check(xml, &[("read_file", CallFormat::QwenXml)], "", 0);
    // A call to a tool the request did not declare is never a call; it is rejected.
    let unknown = r#"<tool_call>{"name": "rm", "arguments": {}}</tool_call>"#;
    check(unknown, &[], "", 1);
    // Prose stays, inline examples and drafts in the reasoning never become calls.
    let prose = "Use `<tool_call>` to call tools.";
    check(prose, &[], prose, 0);
    let drafted = format!("<think>{hermes}</think>No call needed.");
    check(&drafted, &[], &drafted, 0);
    let two = format!("Reading.\n{hermes}\n{hermes}");
    check(&two, &[("read_file", CallFormat::Hermes); 2], "Reading.", 0);
}

#[test]
fn recovery_names_its_formats_and_rejects_unreadable_markup() {
    let broken = "<tool_call>{\"name\": \"read_file\", \"arguments\": </tool_call>";
    let read = recover_calls(broken, &[]);
    assert!(read.calls.is_empty());
    assert!(matches!(
        read.rejected.as_slice(),
        [Rejected::Malformed {
            format: CallFormat::Hermes,
            ..
        }]
    ));
    assert_eq!(CallFormat::FencedJson.to_string(), "fenced-json");
    assert_eq!(CallFormat::QwenXml.as_str(), "qwen3-xml");
}

#[test]
fn reply_folds_a_run_with_a_tool_into_one_value() {
    let provider = MockProvider::builder()
        .turn(vec![
            ev::call("c1", "t", json!({"x": 1})),
            ev::usage(10, 2),
            ev::finish(),
        ])
        .turn(vec![ev::text("done"), ev::usage(20, 1), ev::finish()])
        .build();
    let tool = RecordingTool::new("t").returns(json!("result"));
    let c = client(provider, registry([tool.clone()]));
    let reply = block_on(c.reply("go", ChatOptions::default()));
    assert!(reply.is_ok(), "{reply:?}");
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));
    assert_eq!(reply.answer, "done");
    assert_eq!(reply.turns, 2);
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].result.as_deref(), Some("result"));
    assert_eq!(reply.usage.prompt_tokens, Some(30));
    assert_eq!(reply.added.len(), 4, "prompt, call, result, answer");
    assert_eq!(reply.unanswered().count(), 0);
    assert_eq!(tool.call_count(), 1);
}

#[test]
fn hand_back_returns_the_calls_unrun_and_resume_carries_on() {
    let provider = MockProvider::builder()
        .turn(vec![
            ev::text("Reading."),
            ev::call("c1", "t", json!({})),
            ev::finish(),
        ])
        .turn(vec![ev::text("It says hi."), ev::finish()])
        .build();
    let tool = RecordingTool::new("t");
    let c = client(provider.clone(), registry([tool.clone()]));
    let options = ChatOptions {
        calls: CallMode::HandBack,
        ..ChatOptions::default()
    };
    let reply = block_on(c.reply("read it", options));
    assert_eq!(reply.finish_reason, Some(FinishReason::ToolCalls));
    let handed: Vec<&str> = reply.unanswered().map(|c| c.name.as_str()).collect();
    assert_eq!(handed, ["t"]);
    assert_eq!(tool.call_count(), 0, "nothing runs in hand-back mode");
    let roles: Vec<Role> = reply.added.iter().map(Message::role).collect();
    assert_eq!(roles, [Role::User, Role::Assistant]);
    assert_eq!(reply.added[1].tool_calls().count(), 1);
    // The caller runs the call, answers it and resumes.
    c.extend_history([Message::tool_result("c1", "t", "hi")]);
    let events = block_on(collect(c.resume(ChatOptions::default())));
    check_events(&events);
    check_history(&c.history());
    let sent = &provider.requests()[1].messages;
    assert_eq!(sent.last().map(Message::role), Some(Role::Tool));
    assert_eq!(
        c.history().last().map(Message::text).as_deref(),
        Some("It says hi.")
    );
}

#[test]
fn declared_tools_are_offered_by_schema_and_never_run_here() {
    let schema = ToolSchema::new("t", "T.", json!({"type": "object"}));
    let declared = ToolRegistry::declared([schema.clone()]).unwrap();
    assert_eq!(declared.schemas(), [schema]);
    let call = ToolCall::new("c1", "t", json!({})).unwrap();
    let outcome = block_on(declared.execute(&call));
    assert!(outcome.is_error, "{outcome:?}");
    assert!(ToolRegistry::declared([ToolSchema::new("", "", json!({}))]).is_err());
}

#[test]
fn model_system_prompt_and_tools_can_be_set_per_call() {
    let provider = MockProvider::builder()
        .turn(vec![ev::text("a"), ev::finish()])
        .turn(vec![ev::text("b"), ev::finish()])
        .build();
    let c = client_with(
        provider.clone(),
        registry([RecordingTool::new("client_tool")]),
        |cfg| {
            cfg.system = Some("client system".into());
        },
    );
    let options = ChatOptions {
        model: Some("other".into()),
        system: Some("call system".into()),
        tools: Some(Arc::new(registry([RecordingTool::new("call_tool")]))),
        ..ChatOptions::default()
    };
    block_on(c.reply("one", options));
    block_on(c.reply("two", ChatOptions::default()));
    let requests = provider.requests();
    let names =
        |i: usize| -> Vec<String> { requests[i].tools.iter().map(|t| t.name.clone()).collect() };
    assert_eq!(requests[0].model, "other");
    assert_eq!(requests[0].system.as_deref(), Some("call system"));
    assert_eq!(names(0), ["call_tool"]);
    // The client's settings stay for later calls.
    assert_eq!(requests[1].model, "m");
    assert_eq!(requests[1].system.as_deref(), Some("client system"));
    assert_eq!(names(1), ["client_tool"]);
    assert_eq!(c.config().model, "m");
}

/// A custom tool that never finishes, with its own timeout or none.
struct Never(Option<Duration>);

#[async_trait]
impl Tool for Never {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new("never", "Never finishes.", json!({"type": "object"}))
    }

    async fn execute(&self, _arguments: Map<String, Value>) -> Result<Value, ToolError> {
        std::future::pending().await
    }

    fn timeout(&self) -> Option<Duration> {
        self.0
    }
}

/// Runs one call of [`Never`] with the tool's and the client's timeouts and returns the
/// call's result text; the clock is paused, so the timeout passes without waiting.
fn timed_out(tool: Option<Duration>, client_default: Option<Duration>) -> String {
    let provider = MockProvider::builder()
        .turn(vec![ev::call("c1", "never", json!({})), ev::finish()])
        .turn(vec![ev::text("gave up"), ev::finish()])
        .build();
    let mut tools = ToolRegistry::new();
    tools.register(Arc::new(Never(tool))).unwrap();
    let c = client_with(provider, tools, |cfg| cfg.tool_timeout = client_default);
    let events = block_on(collect(c.chat("go", ChatOptions::default())));
    check_events(&events);
    check_history(&c.history());
    let reply = ollm_core::ChatReply::collect(futures::stream::iter(events));
    let reply = futures::executor::block_on(reply);
    assert_eq!(reply.finish_reason, Some(FinishReason::Stop));
    let [call] = reply.tool_calls.as_slice() else {
        panic!("one call: {reply:?}");
    };
    assert!(call.is_error);
    call.result.clone().unwrap_or_default()
}

#[test]
fn a_tool_that_never_finishes_is_answered_at_its_timeout() {
    let by_client = timed_out(None, Some(Duration::from_secs(5)));
    assert_eq!(
        by_client,
        format!("Error: {}", ToolError::TimedOut(Duration::from_secs(5)))
    );
    let by_tool = timed_out(Some(Duration::from_secs(2)), None);
    assert_eq!(
        by_tool,
        format!("Error: {}", ToolError::TimedOut(Duration::from_secs(2)))
    );
    assert_eq!(
        ollm_core::ChatConfig::default().tool_timeout,
        Some(ollm_core::DEFAULT_TOOL_TIMEOUT)
    );
}
