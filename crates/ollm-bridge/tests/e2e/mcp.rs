//! A whole chat run on the real model where the model calls a real MCP server's tool:
//! `@modelcontextprotocol/server-filesystem` (installed by `cargo xtask mcp-servers`)
//! confined to a temporary folder, reached through `ollm-mcp`, driven by `ollm-core` over
//! the OpenAI adapter. Facts asserted: the call names the server's read tool and the file,
//! its result (the file's text) goes back, and the answer gives the port.

use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt;
use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ToolRegistry};
use ollm_mcp::{McpServers, ServerConfig, StdioConfig, TransportConfig};

use super::setup::{provider, server};

fn filesystem(root: &std::path::Path) -> ServerConfig {
    let dir = std::env::var_os("OLLM_MCP_SERVERS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ollm/mcp")))
        .expect("no HOME to find the MCP servers under");
    let entry = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(entry.is_file(), "run `cargo xtask mcp-servers` first");
    ServerConfig::new(
        "fs",
        TransportConfig::Stdio(StdioConfig {
            command: "node".into(),
            args: vec![entry.display().to_string(), root.display().to_string()],
            ..StdioConfig::default()
        }),
    )
}

#[tokio::test]
async fn the_model_reads_a_file_through_the_filesystem_server() {
    let root = tempfile::tempdir().unwrap();
    let file = root.path().join("config.toml");
    std::fs::write(&file, "[server]\nport = 8123\n").unwrap();
    let logs = tempfile::tempdir().unwrap();
    let servers = McpServers::start(vec![filesystem(root.path())], logs.path())
        .await
        .unwrap();
    let mut tools = ToolRegistry::new();
    servers.register(&mut tools).unwrap();
    let mut config = ChatConfig::for_model(server().1);
    config.max_turns = 4;
    config.options.temperature = Some(0.0);
    config.options.seed = Some(42);
    config.options.max_tokens = Some(256);
    let client = ChatClient::new(std::sync::Arc::new(provider()), tools, config);
    let prompt = format!(
        "Call the tool fs__read_text_file with path {} and tell me the port number in it.",
        file.display()
    );
    let events: Vec<ChatEvent> = tokio::time::timeout(
        Duration::from_secs(300),
        client.chat(prompt, ChatOptions::default()).collect(),
    )
    .await
    .expect("the run took over 300 s");
    servers.shutdown().await;
    // The answer is the text of the last turn.
    let (mut answer, mut turn) = (String::new(), String::new());
    let mut results = Vec::new();
    for event in &events {
        match event {
            ChatEvent::TextDelta { text } => turn.push_str(text),
            ChatEvent::TurnComplete { .. } => answer = std::mem::take(&mut turn),
            ChatEvent::ToolResult {
                name,
                content,
                is_error,
                ..
            } => results.push((name.clone(), content.clone(), *is_error)),
            _ => {}
        }
    }
    assert_eq!(
        results.first(),
        Some(&(
            "fs__read_text_file".to_owned(),
            "[server]\nport = 8123\n".to_owned(),
            false
        )),
        "{events:#?}"
    );
    assert!(answer.contains("8123"), "answer: {answer:?}\n{events:#?}");
}
