//! Tools from Model Context Protocol servers, as ollm [`Tool`](ollm_core::Tool)s.
//!
//! [`McpServers::start`] starts the configured servers (stdio child processes or
//! streamable HTTP endpoints) concurrently, each within its start-up timeout;
//! [`McpServers::register`] adds their tools to a core
//! [`ToolRegistry`](ollm_core::ToolRegistry) under namespaced names (`server__tool`), where
//! their arguments are validated against each tool's `inputSchema` like any tool's.
//!
//! # Decisions
//! - Built on the official SDK, `rmcp` (client side only). The version is the newest
//!   that builds on the workspace's minimum Rust (1.85); rmcp 3 needs 1.88.
//! - The crate knows nothing of the CLI, its config file or the terminal: callers build
//!   [`ServerConfig`]s and decide what to print from [`McpServers::take_reports`].
//! - Everything that can go wrong at start is an [`McpError`]; a call that goes wrong is
//!   an error result for the model, never a failed run.

mod config;
mod connect;
mod content;
mod error;
mod group;
mod names;
mod server;
mod tool;

pub use config::{
    BASE_ENV, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, HttpConfig, ServerConfig, StdioConfig,
    TransportConfig,
};
pub use content::result_text;
pub use error::McpError;
pub use names::{MAX_TOOL_NAME, SEPARATOR, check_server_name, tool_name};
pub use server::{McpServers, ServerState, ServerStatus};
