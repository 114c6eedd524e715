//! MCP servers in the CLI: the `[mcp_servers.NAME]` tables of the config file and
//! `ollm mcp list`.
//!
//! # Decisions
//! - A table names exactly one transport: `command` (stdio) or `url` (streamable HTTP);
//!   both or neither is a usage error naming the server. Stdio-only keys on an HTTP server
//!   (and the reverse) are refused too, so a typo cannot silently do nothing.
//! - `enabled = false` keeps a server in the file but out of every run and listing start.
//! - `approve` is `"ask"` (the default: the same rules as built-in tools, so headless runs
//!   deny), `"always"`, or a list of the server's own tool names approved without asking.
//! - Everything MCP itself (start, tools, failures) lives in `ollm-mcp`; this file only
//!   turns config into `ServerConfig`s and prints.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use ollm_mcp::{HttpConfig, McpServers, ServerConfig, ServerState, StdioConfig, TransportConfig};
use serde::{Deserialize, Serialize};

use crate::exit::CliError;

/// `ollm mcp ...`.
#[derive(Debug, Clone, Copy, clap::Subcommand)]
pub(crate) enum McpAction {
    /// Start the enabled servers and list each one's state and tools.
    List,
}

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

/// `ollm mcp list`: starts the enabled servers, prints each one's state and tools, stops
/// them. Server logs go to `<data_dir>/mcp-logs`.
pub(crate) async fn list(
    entries: &BTreeMap<String, McpServerEntry>,
    data_dir: &Path,
    out: &mut impl Write,
) -> Result<(), CliError> {
    let configs = server_configs(entries)?;
    if entries.is_empty() {
        writeln!(
            out,
            "no MCP servers configured (add [mcp_servers.NAME] tables)"
        )?;
        return Ok(());
    }
    let servers = McpServers::start(configs, &data_dir.join("mcp-logs"))
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    for status in servers.statuses() {
        let state = match &status.state {
            ServerState::Running => format!("running ({} ms)", status.startup.as_millis()),
            ServerState::Failed(e) => format!("failed: {e}"),
            other => format!("{other:?}").to_lowercase(),
        };
        writeln!(out, "{}\t{state}", status.name)?;
        for tool in &status.tools {
            writeln!(out, "  {tool}")?;
        }
    }
    for (name, entry) in entries {
        if entry.enabled == Some(false) {
            writeln!(out, "{name}\tdisabled")?;
        }
    }
    servers.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(toml_text: &str, expected: Result<Vec<&str>, &str>) {
        #[derive(Deserialize)]
        struct File {
            mcp_servers: BTreeMap<String, McpServerEntry>,
        }
        let file: File = toml::from_str(toml_text).unwrap();
        let got = server_configs(&file.mcp_servers)
            .map(|c| c.iter().map(|s| s.name.clone()).collect::<Vec<_>>())
            .map_err(|e| e.to_string());
        let expected = expected
            .map(|v| v.into_iter().map(str::to_owned).collect())
            .map_err(str::to_owned);
        assert_eq!(got, expected);
    }

    #[test]
    fn tables() {
        check(
            r#"
            [mcp_servers.fs]
            command = "npx"
            args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
            approve = ["read_text_file"]
            [mcp_servers.web]
            url = "http://127.0.0.1:8000/mcp"
            bearer_token_env = "WEB_TOKEN"
            approve = "always"
            [mcp_servers.off]
            command = "x"
            enabled = false
            "#,
            Ok(vec!["fs", "web"]),
        );
        check(
            "[mcp_servers.both]\ncommand = \"x\"\nurl = \"http://h\"",
            Err("[mcp_servers.both]: set exactly one of `command` and `url`"),
        );
        check(
            "[mcp_servers.none]\nargs = []",
            Err("[mcp_servers.none]: set exactly one of `command` and `url`"),
        );
        check(
            "[mcp_servers.h]\nurl = \"http://h\"\nenv = { A = \"1\" }",
            Err("[mcp_servers.h]: `args` and `env` need `command`"),
        );
    }
}
