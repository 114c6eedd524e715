//! The `[mcp_servers.NAME]` tables of the config file and their translation into
//! `ollm-mcp`'s `ServerConfig`s.
//!
//! # Decisions
//! - Its own module, below both `config` (which reads the tables as part of the file) and
//!   `mcp/edit.rs` (which checks an edited file the way `ollm` will read it): with the
//!   tables in `mcp.rs`, config, mcp and edit imported one another (issue 26).
//! - The rules for a table (exactly one transport, no keys of the other transport) are
//!   the ones `mcp.rs`'s docs list.

use std::collections::BTreeMap;
use std::time::Duration;

use ollm_mcp::{HttpConfig, ServerConfig, StdioConfig, TransportConfig};
use serde::{Deserialize, Serialize};

use crate::exit::CliError;

/// One `[mcp_servers.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct McpServerEntry {
    /// The program of a stdio server.
    pub(crate) command: Option<String>,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// Variables set for it (its environment is otherwise scrubbed).
    pub(crate) env: BTreeMap<String, String>,
    /// The endpoint of a streamable HTTP server.
    pub(crate) url: Option<String>,
    /// Headers sent to it.
    pub(crate) headers: BTreeMap<String, String>,
    /// The variable holding its bearer token.
    pub(crate) bearer_token_env: Option<String>,
    /// Whether it is used (default true).
    pub(crate) enabled: Option<bool>,
    /// Seconds it has to start.
    pub(crate) startup_timeout_secs: Option<u64>,
    /// Seconds one call may take.
    pub(crate) tool_timeout_secs: Option<u64>,
    /// Which of its tools run without asking.
    pub(crate) approve: Option<Approve>,
}

/// The `approve` key.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(untagged)]
pub(crate) enum Approve {
    /// `"ask"` or `"always"`.
    Mode(ApproveMode),
    /// The tools (their names on the server) that run without asking.
    Tools(Vec<String>),
}

/// `ask` or `always`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ApproveMode {
    /// Ask, like for built-in tools (headless: deny).
    Ask,
    /// Never ask.
    Always,
}

/// The enabled servers' configs, in name order.
pub(crate) fn server_configs(
    entries: &BTreeMap<String, McpServerEntry>,
) -> Result<Vec<ServerConfig>, CliError> {
    entries
        .iter()
        .filter(|(_, e)| e.enabled != Some(false))
        .map(|(name, entry)| server_config(name, entry))
        .collect()
}

fn server_config(name: &str, e: &McpServerEntry) -> Result<ServerConfig, CliError> {
    let usage = |m: &str| CliError::Usage(format!("[mcp_servers.{name}]: {m}"));
    let transport = match (&e.command, &e.url) {
        (Some(command), None) => {
            if !e.headers.is_empty() || e.bearer_token_env.is_some() {
                return Err(usage("`headers` and `bearer_token_env` need `url`"));
            }
            TransportConfig::Stdio(StdioConfig {
                command: command.into(),
                args: e.args.clone(),
                env: e.env.clone(),
                cwd: None,
            })
        }
        (None, Some(url)) => {
            if !e.args.is_empty() || !e.env.is_empty() {
                return Err(usage("`args` and `env` need `command`"));
            }
            TransportConfig::Http(HttpConfig {
                url: url.clone(),
                headers: e.headers.clone(),
                bearer_token_env: e.bearer_token_env.clone(),
            })
        }
        _ => return Err(usage("set exactly one of `command` and `url`")),
    };
    let mut config = ServerConfig::new(name, transport);
    if let Some(secs) = e.startup_timeout_secs {
        config.startup_timeout = Duration::from_secs(secs);
    }
    if let Some(secs) = e.tool_timeout_secs {
        config.tool_timeout = Duration::from_secs(secs);
    }
    Ok(config)
}
