//! ollm as a library, with no server: a rule-based model, a typed tool, one chat.
//!
//! What a downstream crate needs to plug in its own backend and its own tool:
//! - a [`ProviderAdapter`]: here [`RuleModel`], which reads the request and streams the
//!   events a real model would (a tool call first, the answer once the result is back);
//! - a [`TypedTool`]: here [`Add`], whose argument schema schemars derives from [`AddArgs`],
//!   so the model is shown exactly what the tool parses;
//! - a [`ChatClient`] tying them together; [`ChatClient::reply`] runs the chat to its end
//!   and folds its events into one [`ChatReply`].
//!
//! The program prints the calls and the answer and exits non-zero unless the run went as designed
//! (one call, its result, an answer naming the sum), so CI running it checks it.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program: its output is the point"
)]

use std::process::ExitCode;
use std::sync::Arc;

use async_trait::async_trait;
use ollm_core::{
    ChatClient, ChatConfig, ChatOptions, ChatReply, ProviderAdapter, ProviderStream, ToolError,
    ToolRegistry, TypedTool,
};
use ollm_types::{FinishReason, Message, ProviderEvent, ProviderRequest, Role, ToolCall};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// A "model" that follows two rules: when the last message is a tool result it answers
/// with it; otherwise, if the `add` tool is offered, it calls it with the numbers in the
/// user's prompt.
struct RuleModel;

impl ProviderAdapter for RuleModel {
    fn name(&self) -> &str {
        "rules"
    }

    fn chat(&self, request: ProviderRequest) -> ProviderStream {
        Box::pin(futures::stream::iter(reply(&request)))
    }
}

/// The events [`RuleModel`] streams for `request`.
fn reply(request: &ProviderRequest) -> Vec<ProviderEvent> {
    let last = request.messages.last();
    if let Some(result) = last.filter(|m| m.role() == Role::Tool) {
        return answer(format!("The sum is {}.", result.text()));
    }
    let prompt = last.map(Message::text).unwrap_or_default();
    let numbers = numbers_in(&prompt);
    let offers_add = request.tools.iter().any(|tool| tool.name == "add");
    if !offers_add || numbers.is_empty() {
        return answer("I can only add numbers.".into());
    }
    match ToolCall::new("call-1", "add", json!({ "numbers": numbers })) {
        Ok(call) => vec![
            ProviderEvent::ToolCall { call },
            ProviderEvent::Finish {
                reason: FinishReason::ToolCalls,
            },
        ],
        Err(err) => answer(format!("I could not build the call: {err}")),
    }
}

/// The whole numbers written in `text`.
fn numbers_in(text: &str) -> Vec<i64> {
    text.split(|c: char| !c.is_ascii_digit())
        .filter_map(|word| word.parse().ok())
        .collect()
}

/// A plain answer: text, then the finish.
fn answer(text: String) -> Vec<ProviderEvent> {
    vec![
        ProviderEvent::TextDelta { text },
        ProviderEvent::Finish {
            reason: FinishReason::Stop,
        },
    ]
}

/// The arguments of [`Add`]; the schema the model sees is derived from this struct.
#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    /// The numbers to add.
    numbers: Vec<i64>,
}

/// A typed tool: adds numbers.
struct Add;

#[async_trait]
impl TypedTool for Add {
    type Args = AddArgs;

    fn name(&self) -> &str {
        "add"
    }

    fn description(&self) -> &str {
        "Adds numbers and returns their sum."
    }

    async fn run(&self, args: AddArgs) -> Result<Value, ToolError> {
        let sum = args
            .numbers
            .iter()
            .try_fold(0i64, |sum, n| sum.checked_add(*n))
            .ok_or_else(|| ToolError::Failed("the sum overflows".into()))?;
        Ok(json!(sum))
    }
}

/// Runs one chat with `prompt` to its end, folded into one reply.
async fn converse(prompt: &str) -> Result<ChatReply, ollm_core::CoreError> {
    let mut tools = ToolRegistry::new();
    tools.register_typed(Add)?;
    let client = ChatClient::new(Arc::new(RuleModel), tools, ChatConfig::for_model("rules"));
    Ok(client.reply(prompt, ChatOptions::default()).await)
}

/// What went wrong, if the reply is not one call, its result and an answer with `sum`.
fn check(reply: &ChatReply, sum: &str) -> Result<(), String> {
    let results: Vec<Option<&str>> = (reply.tool_calls.iter())
        .map(|r| r.result.as_deref())
        .collect();
    if results != [Some(sum)] {
        return Err(format!("expected one tool result `{sum}`, got {results:?}"));
    }
    if !reply.answer.contains(sum) {
        return Err(format!(
            "the answer does not name {sum}: {:?}",
            reply.answer
        ));
    }
    match reply.finish_reason {
        Some(FinishReason::Stop) => Ok(()),
        other => Err(format!("the run did not finish normally: {other:?}")),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "What is 19 plus 23?".into());
    let reply = match converse(&prompt).await {
        Ok(reply) => reply,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    for record in &reply.tool_calls {
        let (call, result) = (&record.call, &record.result);
        println!(
            "called {} {} -> {result:?}",
            call.name,
            call.arguments_value()
        );
    }
    println!("answer: {}", reply.answer);
    let expected = numbers_in(&prompt)
        .iter()
        .try_fold(0i64, |sum, n| sum.checked_add(*n))
        .map_or_else(|| "no sum".to_owned(), |sum| sum.to_string());
    match check(&reply, &expected) {
        Ok(()) => ExitCode::SUCCESS,
        Err(problem) => {
            eprintln!("unexpected run: {problem}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_model_calls_the_tool_then_answers_with_its_result() {
        let reply = converse("What is 19 plus 23?").await.unwrap();
        assert_eq!(check(&reply, "42"), Ok(()));
    }

    #[tokio::test]
    async fn without_numbers_the_model_answers_without_a_call() {
        let reply = converse("Hello").await.unwrap();
        assert!(check(&reply, "42").is_err());
        assert!(reply.tool_calls.is_empty());
    }
}
