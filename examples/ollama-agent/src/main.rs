//! ollm as a library against a real server: an agent with the built-in tools.
//!
//! The pieces a program puts together: an [`OllamaProvider`] (from `OLLAMA_HOST`), the
//! built-in tools of `ollm-tools` confined to the current folder, an [`Approver`] that
//! decides which calls may run, and a [`ChatClient`] whose events are printed as they
//! arrive.
//!
//! # Decisions
//! - Headless approval: with nobody to ask, only the read-only tools run; `write_file` and
//!   `run_command` calls are denied and the model reads that as the call's result.
//! - The audit log of `run_command` goes to the system's temporary folder, so running the
//!   example leaves nothing in the folder it looks at.
//! - The exit code says whether the run ended normally, so a script can rely on it.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "an example program: its output is the point"
)]

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use futures::StreamExt;
use ollm_bridge::{OllamaConfig, OllamaProvider};
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ChatReply};
use ollm_tools::{Answer, Approver, Mode, Prompter, Request, ToolConfig, Workspace};

const USAGE: &str = "usage: example-ollama-agent MODEL PROMPT";

/// The front end of a headless run: nobody answers, warnings go to stderr.
struct Headless;

#[async_trait::async_trait]
impl Prompter for Headless {
    async fn ask(&self, _request: &Request) -> Answer {
        Answer::Deny
    }

    fn warn(&self, message: &str) {
        eprintln!("warning: {message}");
    }
}

/// A client for `model` on the server at `OLLAMA_HOST`, with the built-in tools.
fn agent(model: &str) -> Result<ChatClient, String> {
    let provider = OllamaProvider::new(OllamaConfig::from_env().map_err(|e| e.to_string())?)
        .map_err(|e| e.to_string())?;
    let folder = std::env::current_dir().map_err(|e| e.to_string())?;
    let workspace = Workspace::new(&folder).map_err(|e| e.to_string())?;
    let config = ToolConfig {
        audit_log: std::env::temp_dir().join("example-ollama-agent-audit.log"),
        ..ToolConfig::default()
    };
    let approver = Arc::new(Approver::new(Mode::Headless, &[], Arc::new(Headless)));
    let tools = ollm_tools::builtin(&workspace, &config, &approver).map_err(|e| e.to_string())?;
    let config = ChatConfig {
        system: Some("You answer questions about the files in the current folder.".into()),
        ..ChatConfig::for_model(model)
    };
    Ok(ChatClient::new(Arc::new(provider), tools, config))
}

/// Prints one event as it comes.
fn show(event: &ChatEvent) {
    match event {
        ChatEvent::TextDelta { text } => {
            print!("{text}");
            let _ = std::io::stdout().flush();
        }
        ChatEvent::ToolCallStarted { call } => {
            eprintln!("[{} {}]", call.name, call.arguments_value());
        }
        ChatEvent::ToolResult { name, is_error, .. } => {
            eprintln!("[{name}: {}]", if *is_error { "error" } else { "ok" });
        }
        ChatEvent::Warning { warning } => eprintln!("warning: {}", warning.message),
        ChatEvent::Error { error } => eprintln!("error: {}", error.message),
        ChatEvent::Finish { .. } => println!(),
        _ => {}
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, prompt] = args.as_slice() else {
        eprintln!("{USAGE}");
        return ExitCode::from(2);
    };
    let client = match agent(model) {
        Ok(client) => client,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::FAILURE;
        }
    };
    // Shown as it streams, and folded into one reply beside (the fold `reply()` uses).
    let mut run = client.chat(prompt.as_str(), ChatOptions::default());
    let mut reply = ChatReply::default();
    while let Some(event) = run.next().await {
        show(&event);
        reply.push(&event);
    }
    if reply.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
