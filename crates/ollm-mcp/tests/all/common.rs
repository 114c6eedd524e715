//! Shared setup: where the npm servers are, how to configure and start them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ollm_core::{Tool, ToolError, ToolOutcome, ToolRegistry};
use ollm_mcp::{McpServers, ServerConfig, StdioConfig, TransportConfig};
use ollm_types::{ToolCall, ToolSchema};
use serde_json::{Map, Value, json};

/// The install of `cargo xtask mcp-servers`: `$OLLM_MCP_SERVERS`, else the cache path.
pub(crate) fn servers_dir() -> PathBuf {
    let dir = std::env::var_os("OLLM_MCP_SERVERS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("OLLM_CACHE_DIR").map(|d| PathBuf::from(d).join("mcp")))
        .or_else(|| {
            std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("ollm").join("mcp"))
        })
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/ollm/mcp")))
        .expect("no HOME to find the MCP servers under");
    let marker = dir.join("node_modules/.ollm-lock.json");
    assert!(
        marker.is_file(),
        "the MCP test servers are not installed in {}: run `cargo xtask mcp-servers`",
        dir.display()
    );
    dir
}

fn entry(package: &str) -> String {
    servers_dir()
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js")
        .display()
        .to_string()
}

/// A stdio server config.
pub(crate) fn stdio(name: &str, command: &str, args: &[String]) -> ServerConfig {
    ServerConfig::new(
        name,
        TransportConfig::Stdio(StdioConfig {
            command: command.into(),
            args: args.to_vec(),
            ..StdioConfig::default()
        }),
    )
}

/// `@modelcontextprotocol/server-everything` on stdio.
pub(crate) fn everything(name: &str) -> ServerConfig {
    stdio(name, "node", &[entry("server-everything"), "stdio".into()])
}

/// `@modelcontextprotocol/server-filesystem` confined to `root`.
pub(crate) fn filesystem(name: &str, root: &std::path::Path) -> ServerConfig {
    stdio(
        name,
        "node",
        &[entry("server-filesystem"), root.display().to_string()],
    )
}

/// Starts `configs` with a fresh log folder (returned, to keep it alive).
pub(crate) async fn start(configs: Vec<ServerConfig>) -> (McpServers, tempfile::TempDir) {
    let logs = tempfile::tempdir().unwrap();
    let servers = McpServers::start(configs, logs.path()).await.unwrap();
    (servers, logs)
}

/// A registry holding a built-in tool (`builtin_echo`) and the servers' tools.
pub(crate) fn registry(servers: &McpServers) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(BuiltinEcho)).unwrap();
    servers.register(&mut registry).unwrap();
    registry
}

/// Runs one call through the registry (validation first, like the chat loop).
pub(crate) async fn call(registry: &ToolRegistry, name: &str, arguments: Value) -> ToolOutcome {
    let call = ToolCall::new("c1", name, arguments).unwrap();
    registry.execute(&call).await
}

/// A trivial built-in tool, the baseline for call latency.
pub(crate) struct BuiltinEcho;

#[async_trait::async_trait]
impl Tool for BuiltinEcho {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "builtin_echo",
            "echoes",
            json!({"type": "object", "properties": {"message": {"type": "string"}}}),
        )
    }
    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        Ok(arguments.get("message").cloned().unwrap_or(Value::Null))
    }
}

/// A bound for waits that must end (never a synchronisation sleep).
pub(crate) const BOUND: Duration = Duration::from_secs(20);
