//! What a server is: its name, transport and time limits.
//!
//! # Decisions
//! - Plain data, no parsing: the CLI reads `[mcp_servers.NAME]` from its config file and
//!   builds these; the library never reads files or the environment on its own except
//!   the variables a config names (the bearer token, the stdio allowlist).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// The default time a server has to finish its handshake and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// The default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// One MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name: the prefix of its tools' names (`name__tool`).
    pub name: String,
    /// How to reach it.
    pub transport: TransportConfig,
    /// How long it has to start (handshake and first `tools/list`).
    pub startup_timeout: Duration,
    /// How long one call may take before it is cancelled.
    pub tool_timeout: Duration,
}

impl ServerConfig {
    /// A server with the default time limits.
    pub fn new(name: impl Into<String>, transport: TransportConfig) -> Self {
        ServerConfig {
            name: name.into(),
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
        }
    }
}

/// How to reach a server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransportConfig {
    /// A child process speaking MCP on its stdin and stdout.
    Stdio(StdioConfig),
    /// A streamable HTTP endpoint.
    Http(HttpConfig),
}

/// A server started as a child process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StdioConfig {
    /// The program.
    pub command: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it, on top of the scrubbed environment (see [`BASE_ENV`]).
    pub env: BTreeMap<String, String>,
    /// Its working directory; the caller's when `None`.
    pub cwd: Option<PathBuf>,
}

/// A server reached over streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpConfig {
    /// The endpoint, e.g. `http://127.0.0.1:8000/mcp`.
    pub url: String,
    /// Headers sent with every request.
    pub headers: BTreeMap<String, String>,
    /// The environment variable holding a bearer token, if the server wants one.
    pub bearer_token_env: Option<String>,
}

/// The variables a stdio server inherits from ollm's environment; everything else (API
/// keys, tokens) is withheld unless its config sets it.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TMPDIR",
    "TZ",
];
