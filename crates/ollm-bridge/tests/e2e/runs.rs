//! Whole runs on the real model: `ChatClient` -> OpenAI adapter -> llama-server -> tools
//! -> answer, at temperature 0 with a fixed seed, through every tool strategy.
//!
//! Every test asserts the protocol: each call gets exactly one result, with the call's
//! name and id, after the call; a fresh call of an offered tool with valid arguments
//! runs once; a repeat, an unknown tool or invalid arguments get an error result
//! without running; the history pairs calls and results 1:1; the run
//! finishes once, last, with the expected reason.
//! Facts in the answer are asserted only where the model gets them reliably at
//! temperature 0; each test says which.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use ollm_core::{
    ChatClient, ChatConfig, ChatEvent, ChatOptions, Tool, ToolError, ToolMode, ToolRegistry,
};
use ollm_types::{FinishReason, Role, ToolCall, ToolSchema};
use serde_json::{Map, Value, json};

use super::setup::{provider, server};

/// The project folder the tools see: file name -> text.
const FILES: &[(&str, &str)] = &[
    ("README.md", "# tally\n\nA tiny counting service.\n"),
    (
        "config.toml",
        "[server]\nhost = \"127.0.0.1\"\nport = 8123\nworkers = 4\n",
    ),
];

/// A project folder in memory that records every call its tools get.
#[derive(Default)]
struct Project {
    calls: Mutex<Vec<(String, Map<String, Value>)>>,
}

impl Project {
    fn record(&self, tool: &str, arguments: &Map<String, Value>) {
        self.calls
            .lock()
            .unwrap()
            .push((tool.to_owned(), arguments.clone()));
    }
}

/// `read_file {path}`: a file's text.
struct ReadFile(Arc<Project>);

#[async_trait]
impl Tool for ReadFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "read_file",
            "Read a text file in the project folder and return its contents.",
            json!({
                "type": "object",
                "properties": {"path": {
                    "type": "string",
                    "description": "The file's path, relative to the project folder."
                }},
                "required": ["path"],
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        self.0.record("read_file", &arguments);
        let path = arguments["path"].as_str().unwrap_or_default();
        let path = path.trim_start_matches("./");
        FILES
            .iter()
            .find(|(name, _)| *name == path)
            .map(|(_, text)| json!(text))
            .ok_or_else(|| ToolError::Failed(format!("no such file: {path}")))
    }
}

/// `list_dir {path}`: the folder's entries.
struct ListDir(Arc<Project>);

#[async_trait]
impl Tool for ListDir {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "list_dir",
            "List the entries of a folder in the project.",
            json!({
                "type": "object",
                "properties": {"path": {
                    "type": "string",
                    "description": "The folder's path, relative to the project folder; \".\" for the folder itself."
                }},
                "required": ["path"],
                "additionalProperties": false
            }),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        self.0.record("list_dir", &arguments);
        let names: Vec<&str> = FILES.iter().map(|(name, _)| *name).collect();
        Ok(json!(names.join("\n")))
    }
}

/// What one run did.
struct Run {
    events: Vec<ChatEvent>,
    calls: Vec<ToolCall>,
    /// The text of the last turn: the answer.
    answer: String,
    client: ChatClient,
    project: Arc<Project>,
}

/// Runs `prompt` through a fresh client in `mode`, at temperature 0 with a fixed seed.
async fn run(mode: ToolMode, system: Option<&str>, prompt: &str) -> Run {
    let project = Arc::new(Project::default());
    let mut tools = ToolRegistry::new();
    tools
        .register(Arc::new(ReadFile(Arc::clone(&project))))
        .unwrap();
    tools
        .register(Arc::new(ListDir(Arc::clone(&project))))
        .unwrap();
    let mut config = ChatConfig::for_model(server().1);
    config.tool_mode = mode;
    config.max_turns = 4;
    config.system = system.map(str::to_owned);
    config.options.temperature = Some(0.0);
    config.options.seed = Some(42);
    config.options.max_tokens = Some(256);
    let client = ChatClient::new(Arc::new(provider()), tools, config);
    let events: Vec<ChatEvent> = tokio::time::timeout(
        Duration::from_secs(300),
        client.chat(prompt, ChatOptions::default()).collect(),
    )
    .await
    .expect("the run took over 300 s");
    let calls = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCallStarted { call } => Some(call.clone()),
            _ => None,
        })
        .collect();
    // The answer is the text of the last turn.
    let (mut answer, mut turn) = (String::new(), String::new());
    for event in &events {
        match event {
            ChatEvent::TextDelta { text } => turn.push_str(text),
            ChatEvent::TurnComplete { .. } => answer = std::mem::take(&mut turn),
            _ => {}
        }
    }
    Run {
        events,
        calls,
        answer,
        client,
        project,
    }
}

impl Run {
    /// The protocol every run keeps, whatever the model says.
    fn assert_protocol(&self, finish: FinishReason) {
        let events = &self.events;
        let finishes = events
            .iter()
            .filter(|e| matches!(e, ChatEvent::Finish { .. }))
            .count();
        assert_eq!(finishes, 1, "{events:#?}");
        assert!(
            matches!(events.last(), Some(ChatEvent::Finish { reason, .. }) if *reason == finish),
            "expected finish {finish:?}: {events:#?}"
        );
        // Each call: exactly one result, with its name, after it; and no stray results.
        // A call that repeats an earlier one, names a tool not offered or has invalid
        // arguments is answered without running, with an error result (issue 9 items 5, 7).
        let tools = self.client.tools();
        let mut ran = Vec::new();
        for call in &self.calls {
            let started = events
                .iter()
                .position(
                    |e| matches!(e, ChatEvent::ToolCallStarted { call: c } if c.id == call.id),
                )
                .unwrap();
            let results: Vec<usize> = events
                .iter()
                .enumerate()
                .filter(|(_, e)| matches!(e, ChatEvent::ToolResult { call_id, .. } if *call_id == call.id))
                .map(|(i, _)| i)
                .collect();
            assert_eq!(results.len(), 1, "call {call:?}: {events:#?}");
            assert!(results[0] > started, "{events:#?}");
            let ChatEvent::ToolResult { name, is_error, .. } = &events[results[0]] else {
                unreachable!()
            };
            assert_eq!(name, &call.name, "{events:#?}");
            let key = (call.name.clone(), call.arguments.clone());
            let valid = tools.validate(&call.name, &call.arguments).is_ok();
            if valid && !ran.contains(&key) {
                assert!(!is_error, "a fresh valid call fails: {events:#?}");
                ran.push(key);
            } else {
                assert!(
                    is_error,
                    "a repeat, unknown tool or invalid call ran: {events:#?}"
                );
            }
        }
        let results = events
            .iter()
            .filter(|e| matches!(e, ChatEvent::ToolResult { .. }))
            .count();
        assert_eq!(results, self.calls.len(), "{events:#?}");
        assert_eq!(
            self.project.calls.lock().unwrap().len(),
            ran.len(),
            "every distinct call of an offered tool ran once"
        );
        self.assert_history_pairs_calls_and_results();
    }

    /// In the history, every assistant message's calls are answered by the tool messages
    /// right after it, one each, in order.
    fn assert_history_pairs_calls_and_results(&self) {
        let history = self.client.history();
        let messages = history.messages();
        let mut i = 0;
        while i < messages.len() {
            let ids: Vec<&str> = messages[i].tool_calls().map(|c| c.id.as_str()).collect();
            let answers: Vec<&str> = messages[i + 1..]
                .iter()
                .take_while(|m| m.role() == Role::Tool)
                .filter_map(|m| m.tool_call_id())
                .collect();
            if messages[i].role() == Role::Assistant {
                assert_eq!(ids, answers, "{messages:#?}");
            }
            i += 1 + answers
                .len()
                .max(usize::from(messages[i].role() == Role::Tool));
        }
    }

    /// The calls that ran (fresh calls of offered tools), as (tool, arguments) pairs.
    fn ran(&self) -> Vec<(String, Value)> {
        let calls = self.project.calls.lock().unwrap();
        calls
            .iter()
            .map(|(tool, args)| (tool.clone(), Value::Object(args.clone())))
            .collect()
    }

    /// The calls as (tool, arguments) pairs.
    #[cfg(feature = "e2e-pending")]
    fn made(&self) -> Vec<(String, Value)> {
        self.calls
            .iter()
            .map(|c| (c.name.clone(), Value::Object(c.arguments.clone())))
            .collect()
    }
}

/// The prompt whose answer is only in `config.toml`.
/// (Asked as "Which port does config.toml set?", the model writes Python instead of
/// calling; naming the tool makes it call, as a fenced JSON block in its text.)
const PORT_PROMPT: &str =
    "Use the read_file tool to read config.toml, then tell me which port it sets.";

fn read_config() -> (String, Value) {
    ("read_file".to_owned(), json!({"path": "config.toml"}))
}

/// One call to `read_file config.toml`, its result back, and an answer that uses it,
/// in `mode`. Fact asserted: the answer gives 8123 (native and auto at temperature 0; the
/// model often asks for the same call again, which the loop guard answers, then it
/// answers after the nudge).
async fn check_reads_the_port(mode: ToolMode) {
    let run = run(mode, None, PORT_PROMPT).await;
    run.assert_protocol(FinishReason::Stop);
    assert_eq!(run.ran(), [read_config()], "{:#?}", run.events);
    assert!(run.answer.contains("8123"), "answer: {:?}", run.answer);
}

#[tokio::test]
async fn native_call_result_and_answer() {
    check_reads_the_port(ToolMode::Native).await;
}

/// ReAct and constrained: the protocol only. At temperature 0 this model answers the
/// port prompt in one turn without calling under both ("8080" under each: invented), so
/// nothing is asserted about calls here: a check over whatever calls were made would pass
/// on none (issue 26). The call, its result and the answer are asserted by the pending
/// tests below; the eval (`docs/tool-calling.md`) measures how often these modes call on
/// other tasks.
async fn check_protocol_only(mode: ToolMode) {
    let run = run(mode, None, PORT_PROMPT).await;
    run.assert_protocol(FinishReason::Stop);
}

#[tokio::test]
async fn react_keeps_the_protocol() {
    check_protocol_only(ToolMode::React).await;
}

#[tokio::test]
async fn constrained_keeps_the_protocol() {
    check_protocol_only(ToolMode::Constrained).await;
}

/// Pending (`cargo xtask e2e --pending`): under ReAct and constrained this model answers
/// without calling (see [`check_protocol_only`]); these say what the modes should do.
#[cfg(feature = "e2e-pending")]
#[tokio::test]
async fn react_call_result_and_answer() {
    check_reads_the_port(ToolMode::React).await;
}

#[cfg(feature = "e2e-pending")]
#[tokio::test]
async fn constrained_call_result_and_answer() {
    check_reads_the_port(ToolMode::Constrained).await;
}

#[tokio::test]
async fn auto_call_result_and_answer() {
    check_reads_the_port(ToolMode::Auto).await;
}

/// A question that needs no tool runs no tool. Fact asserted: 7 * 6 = 42. (At
/// temperature 0 the model first calls a `multiply` tool that does not exist; it is
/// answered `Unknown tool` and the nudge, and then it answers.)
#[tokio::test]
async fn a_plain_question_runs_no_tool() {
    let run = run(
        ToolMode::Auto,
        None,
        "What is 7 times 6? Answer with the number.",
    )
    .await;
    run.assert_protocol(FinishReason::Stop);
    assert_eq!(run.ran(), [], "{:#?}", run.events);
    assert!(run.answer.contains("42"), "answer: {:?}", run.answer);
}

/// Two steps: list the folder, then read the file found there. Pending
/// (`cargo xtask e2e --pending`): after the listing this model sends `read_file` with an
/// extra `type` argument (refused by the schema) and then names an `invalid_tool_call`
/// tool, so it never reads config.toml at temperature 0.
#[cfg(feature = "e2e-pending")]
#[tokio::test]
async fn a_two_step_task_lists_then_reads() {
    let run = run(
        ToolMode::Native,
        None,
        "Use the list_dir tool to list this folder, then use read_file on the TOML file you \
         find and tell me which port it sets.",
    )
    .await;
    run.assert_protocol(FinishReason::Stop);
    assert_eq!(
        run.made(),
        [("list_dir".to_owned(), json!({"path": "."})), read_config()],
        "{:#?}",
        run.events
    );
    assert!(run.answer.contains("8123"), "answer: {:?}", run.answer);
}

/// A call written as text in the reply (not as a native call) is recovered, run, and its
/// result goes back.
#[tokio::test]
async fn a_call_written_as_text_is_recovered_and_run() {
    let run = run(ToolMode::Native, Some(TEXT_CALL_SYSTEM), PORT_PROMPT).await;
    run.assert_protocol(FinishReason::Stop);
    assert_eq!(run.ran(), [read_config()], "{:#?}", run.events);
}

/// A system prompt that asks for calls as a bare JSON object in the reply.
const TEXT_CALL_SYSTEM: &str = "To use a tool, reply with only a JSON object \
    {\"name\": <tool name>, \"arguments\": {...}} and nothing else.";
