//! Start-up time per real server and call latency over MCP against a trivial in-process
//! tool: `cargo bench -p ollm-mcp` (after `cargo xtask mcp-servers`). Plain timing, no
//! harness: the numbers are for the closing note, not for regression gates.
#![allow(
    clippy::print_stdout,
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark prints its numbers and fails loudly on setup errors"
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ollm_core::{Tool, ToolError, ToolRegistry};
use ollm_mcp::{McpServers, ServerConfig, StdioConfig, TransportConfig};
use ollm_types::{ToolCall, ToolSchema};
use serde_json::{Map, Value, json};

const CALLS: u32 = 200;

struct Echo;

#[async_trait::async_trait]
impl Tool for Echo {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new("builtin_echo", "echoes", json!({"type": "object"}))
    }
    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        Ok(arguments.get("message").cloned().unwrap_or(Value::Null))
    }
}

fn server(name: &str, package: &str, arg: &str) -> ServerConfig {
    let dir = std::env::var_os("OLLM_MCP_SERVERS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache/ollm/mcp")
        });
    let entry = dir
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        entry.is_file(),
        "run `cargo xtask mcp-servers` first ({})",
        entry.display()
    );
    ServerConfig::new(
        name,
        TransportConfig::Stdio(StdioConfig {
            command: "node".into(),
            args: vec![entry.display().to_string(), arg.into()],
            ..StdioConfig::default()
        }),
    )
}

async fn per_call(registry: &ToolRegistry, name: &str) -> Duration {
    let call = ToolCall::new("c", name, json!({"message": "hi"})).unwrap();
    let begun = Instant::now();
    for _ in 0..CALLS {
        let outcome = registry.execute(&call).await;
        assert!(!outcome.is_error, "{outcome:?}");
    }
    begun.elapsed() / CALLS
}

#[tokio::main]
async fn main() {
    let logs = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let configs = vec![
        server("everything", "server-everything", "stdio"),
        server(
            "fs",
            "server-filesystem",
            &root.path().display().to_string(),
        ),
    ];
    let servers = McpServers::start(configs, logs.path()).await.unwrap();
    for status in servers.statuses() {
        println!(
            "start-up {:<12} {:>8.1} ms",
            status.name,
            status.startup.as_secs_f64() * 1e3
        );
    }
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Echo)).unwrap();
    servers.register(&mut registry).unwrap();
    let builtin = per_call(&registry, "builtin_echo").await;
    let mcp = per_call(&registry, "everything__echo").await;
    println!("call built-in     {:>8.1} µs", builtin.as_secs_f64() * 1e6);
    println!("call MCP (stdio)  {:>8.1} µs", mcp.as_secs_f64() * 1e6);
    println!(
        "MCP overhead      {:>8.1} µs",
        (mcp.saturating_sub(builtin)).as_secs_f64() * 1e6
    );
    servers.shutdown().await;
}
