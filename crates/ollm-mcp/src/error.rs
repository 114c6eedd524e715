//! The crate's one error type.
//!
//! # Decisions
//! - Configuration mistakes (a bad server name, a tool name that collides) stop the start:
//!   they are the user's to fix and a half-registered tool set would surprise them.
//! - A server that fails to start or exits is *not* a hard error: the manager records the
//!   variant as that server's state and reports it once; the run goes on without it.

use std::time::Duration;

/// Why an MCP server could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// A server name outside `[a-zA-Z0-9_-]`, empty, or containing `__` (the separator).
    #[error("invalid MCP server name {0:?}: use letters, digits, '_' and '-' (not \"__\")")]
    InvalidServerName(String),
    /// Two servers share a name.
    #[error("MCP server {0:?} is configured twice")]
    DuplicateServer(String),
    /// A namespaced tool name is already taken (by a built-in or another MCP tool).
    #[error(
        "MCP tool {tool:?} of server {server:?} would be named {name:?}, which is already taken"
    )]
    NameCollision {
        /// The namespaced name.
        name: String,
        /// The server.
        server: String,
        /// The tool's own name on its server.
        tool: String,
    },
    /// The environment variable that should hold the bearer token is not set.
    #[error("MCP server {server:?}: the bearer token variable {var} is not set")]
    MissingToken {
        /// The server.
        server: String,
        /// The variable.
        var: String,
    },
    /// A configured HTTP header is not a valid name or value.
    #[error("MCP server {server:?}: invalid HTTP header {header:?}")]
    InvalidHeader {
        /// The server.
        server: String,
        /// The header name.
        header: String,
    },
    /// The server's command could not be started, or its log file opened.
    #[error("MCP server {server:?} could not be started: {source}")]
    Spawn {
        /// The server.
        server: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The server did not finish the MCP handshake in time.
    #[error("MCP server {server:?} did not start within {timeout:?}")]
    StartTimeout {
        /// The server.
        server: String,
        /// The start-up timeout.
        timeout: Duration,
    },
    /// The handshake or the first tool listing failed.
    #[error("MCP server {server:?} failed to start: {message}")]
    Handshake {
        /// The server.
        server: String,
        /// What went wrong.
        message: String,
    },
    /// The server exited (or its connection closed) while in use.
    #[error("MCP server {0:?} has exited")]
    Exited(String),
    /// Registering a tool in the core registry failed (its schema, most often).
    #[error(transparent)]
    Core(#[from] ollm_core::CoreError),
}
