//! ollm as a library against an OpenAI-compatible server (llama-server, vLLM, `ollm
//! serve`): first the tool calls a model wrote as text, read out of a reply with
//! [`recover_calls`] (no server needed), then a one-shot [`ChatClient::reply`] with a
//! typed tool.
//!
//! `example-openai-tools [BASE_URL [MODEL]]`: the base URL includes `/v1` (default
//! `$OLLM_OPENAI_URL`, else `http://127.0.0.1:8080/v1`); the model defaults to
//! `$OLLM_EXAMPLE_MODEL`, else `default` (llama-server serves its one model under any
//! name). Exits non-zero unless the run ended well and the answer names the sum.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program: its output is the point"
)]

use std::process::ExitCode;
use std::sync::Arc;

use ollm_bridge::{OpenAiConfig, OpenAiProvider};
use ollm_core::{ChatClient, ChatConfig, ChatOptions, ToolError, ToolRegistry, TypedTool};
use ollm_core::{TextCalls, recover_calls};
use serde_json::{Value, json};

/// A reply as a small model writes it: prose, then a Hermes-style call in the text.
const REPLY: &str = "I'll add them.\n<tool_call>\n{\"name\": \"add\", \"arguments\": {\"numbers\": [19, 23]}}\n</tool_call>";

/// The arguments of [`Add`]; the schema the model sees is derived from this struct.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    /// The numbers to add.
    numbers: Vec<i64>,
}

/// A typed tool: adds numbers.
struct Add;

#[async_trait::async_trait]
impl TypedTool for Add {
    type Args = AddArgs;
    fn name(&self) -> &str {
        "add"
    }
    fn description(&self) -> &str {
        "Adds numbers and returns their sum."
    }
    async fn run(&self, args: AddArgs) -> Result<Value, ToolError> {
        Ok(json!(args.numbers.iter().sum::<i64>()))
    }
}

/// The calls in [`REPLY`], for the tools of `tools`.
fn recovered(tools: &ToolRegistry) -> TextCalls {
    recover_calls(REPLY, &tools.schemas())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let env = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let url = args
        .next()
        .unwrap_or_else(|| env("OLLM_OPENAI_URL", "http://127.0.0.1:8080/v1"));
    let model = args
        .next()
        .unwrap_or_else(|| env("OLLM_EXAMPLE_MODEL", "default"));
    let mut tools = ToolRegistry::new();
    let provider = tools
        .register_typed(Add)
        .map_err(|e| e.to_string())
        .and_then(|()| OpenAiProvider::new(OpenAiConfig::new(url)).map_err(|e| e.to_string()));
    let provider = match provider {
        Ok(provider) => provider,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    for found in recovered(&tools).calls {
        println!(
            "recovered ({}): {} {}",
            found.format,
            found.call.name,
            found.call.arguments_value()
        );
    }
    let client = ChatClient::new(Arc::new(provider), tools, ChatConfig::for_model(model));
    let reply = client
        .reply(
            "What is 19 plus 23? Use the add tool.",
            ChatOptions::default(),
        )
        .await;
    for record in &reply.tool_calls {
        println!("called: {} -> {:?}", record.call.name, record.result);
    }
    println!("answer: {}", reply.answer.trim());
    match reply.error {
        Some(error) => eprintln!("error: {}", error.message),
        None if reply.is_ok() && reply.answer.contains("42") => return ExitCode::SUCCESS,
        None => eprintln!(
            "unexpected run: {:?}, answer {:?}",
            reply.finish_reason, reply.answer
        ),
    }
    ExitCode::FAILURE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_call_in_the_text_is_recovered_with_its_format() {
        let mut tools = ToolRegistry::new();
        assert!(tools.register_typed(Add).is_ok());
        let read = recovered(&tools);
        assert_eq!(read.prose.trim(), "I'll add them.");
        let [found] = read.calls.as_slice() else {
            panic!("one call: {read:?}");
        };
        assert_eq!(found.format, ollm_core::CallFormat::Hermes);
        assert_eq!(found.call.name, "add");
        assert_eq!(found.call.arguments_value(), json!({"numbers": [19, 23]}));
    }
}
