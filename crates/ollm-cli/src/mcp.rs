//! MCP servers in the CLI: the `[mcp_servers.NAME]` tables of the config file, their
//! tools in `ollm run` (one-shot and chat, `/mcp`), and `ollm mcp list/add/remove`.
//!
//! # Decisions
//! - A table names exactly one transport: `command` (stdio) or `url` (streamable HTTP);
//!   both or neither is a usage error naming the server. Stdio-only keys on an HTTP server
//!   (and the reverse) are refused too, so a typo cannot silently do nothing.
//! - `enabled = false` keeps a server in the file but out of every run and listing start.
//! - `approve` is `"ask"` (the default: the same rules as built-in tools, so headless runs
//!   deny), `"always"`, or a list of the server's own tool names approved without asking.
//! - Everything MCP itself (start, tools, failures) lives in `ollm-mcp`; this file only
//!   turns config into `ServerConfig`s, applies approval, and prints.
//! - A run starts its servers only when it offers tools (`--no-tools` starts none), all
//!   at once before the first prompt. A name that collides with a built-in tool stops the
//!   run before anything is sent. A server that does not start is a warning on stderr,
//!   printed once; its tools are simply absent and the run goes on.
//! - Approval goes through the run's one [`Approver`]: `--yes`, `/tools yes`, a headless
//!   run's denial, "always" answers and `tools.auto_approve` (with the namespaced name)
//!   all apply to MCP tools as to built-in ones. The server's `approve` key only adds
//!   tools that never ask.
//! - Reports of servers that died, and `tools/list_changed` refreshes, happen between
//!   prompts (and once at the end), never while an answer is being written.
//! - The hooks in `main.rs`, `run.rs` and `chat.rs` are one call each; what they call
//!   lives here. [`RunServers::shutdown`] runs on every way out of `ollm run`: normal
//!   end, error, Ctrl-C (which cancels the run rather than killing the process).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};

use ollm_core::{ChatClient, Tool, ToolError, ToolRegistry};
use ollm_mcp::{McpServers, ServerState, ServerStatus, tool_name};
use ollm_tools::{Approver, Request};
use ollm_types::ToolSchema;
use serde_json::{Map, Value};

use crate::exit::CliError;

pub(crate) mod edit;
mod entry;

pub(crate) use entry::{Approve, ApproveMode, McpServerEntry, server_configs};

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
    write!(out, "{}", describe(&servers.statuses()))?;
    for (name, entry) in entries {
        if entry.enabled == Some(false) {
            writeln!(out, "{name}\tdisabled")?;
        }
    }
    servers.shutdown().await;
    Ok(())
}

/// The MCP servers of one `ollm run`, their tools wired into its registry.
pub(crate) struct RunServers {
    servers: McpServers,
    entries: BTreeMap<String, McpServerEntry>,
    approver: Arc<Approver>,
    /// The built-in tools, to rebuild the registry from after a refresh.
    builtin: ToolRegistry,
    /// The registry in use (built-in and MCP tools).
    current: Mutex<ToolRegistry>,
}

impl std::fmt::Debug for RunServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunServers")
            .field("servers", &self.servers)
            .finish_non_exhaustive()
    }
}

/// Starts the enabled servers of `entries` for a run and adds their tools to
/// `tools`; `None` when there are none. A collision with a built-in tool is an error
/// (the servers are stopped first); a server that fails to start is a warning.
pub(crate) async fn attach(
    entries: &BTreeMap<String, McpServerEntry>,
    data_dir: &Path,
    tools: &mut ToolRegistry,
    approver: &Arc<Approver>,
) -> Result<Option<Arc<RunServers>>, CliError> {
    let configs = server_configs(entries)?;
    if configs.is_empty() {
        return Ok(None);
    }
    let servers = McpServers::start(configs, &data_dir.join("mcp-logs"))
        .await
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let run = RunServers {
        servers,
        entries: entries.clone(),
        approver: Arc::clone(approver),
        builtin: tools.clone(),
        current: Mutex::new(tools.clone()),
    };
    let registry = match run.registry() {
        Ok(registry) => registry,
        Err(e) => {
            run.servers.shutdown().await;
            return Err(e);
        }
    };
    run.report();
    *tools = registry.clone();
    *run.lock() = registry;
    Ok(Some(Arc::new(run)))
}

/// [`attach`], given up on Ctrl-C: the servers being started are dropped, which kills
/// them (each leads its own process group, so the terminal's SIGINT never reaches it and
/// the default action would leave it running after `ollm` died), and the run ends as
/// cancelled.
pub(crate) async fn attach_or_interrupt(
    entries: &BTreeMap<String, McpServerEntry>,
    data_dir: &Path,
    tools: &mut ToolRegistry,
    approver: &Arc<Approver>,
) -> Result<Option<Arc<RunServers>>, CliError> {
    // `biased`: Ctrl-C's handler is installed when its future is first polled, so it is
    // polled before `attach` spawns anything. Unbiased, select! sometimes polled `attach`
    // first, and a SIGINT just after the spawn met the default action: ollm died by the
    // signal instead of exiting 130 (seen as a flaky `ctrl_c_while_a_server_starts`).
    tokio::select! {
        biased;
        _ = tokio::signal::ctrl_c() => Err(CliError::Cancelled),
        attached = attach(entries, data_dir, tools, approver) => attached,
    }
}

impl RunServers {
    fn lock(&self) -> std::sync::MutexGuard<'_, ToolRegistry> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The built-in tools plus the servers' tools, each behind the approval policy.
    fn registry(&self) -> Result<ToolRegistry, CliError> {
        let mut raw = self.builtin.clone();
        self.servers
            .register(&mut raw)
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let mut registry = self.builtin.clone();
        for status in self.servers.statuses() {
            let entry = self.entries.get(&status.name);
            for name in &status.tools {
                let Some(inner) = raw.get(name) else { continue };
                let tool = Approved {
                    inner,
                    approver: Arc::clone(&self.approver),
                    ask: !never_asks(&status.name, name, entry),
                };
                registry.register(Arc::new(tool))?;
            }
        }
        Ok(registry)
    }

    /// Prints each failure not reported yet (once per server) on stderr.
    pub(crate) fn report(&self) {
        for (_, error) in self.servers.take_reports() {
            crate::ui::warn(&format!("{error}; its tools are unavailable"));
        }
    }

    /// Between prompts: reports failures and, after a `tools/list_changed`, gives
    /// `client` the new tool set.
    pub(crate) async fn between_turns(&self, client: &ChatClient) {
        self.report();
        if !self.servers.refresh().await {
            return;
        }
        match self.registry() {
            Ok(registry) => {
                client.set_tools(registry.clone());
                *self.lock() = registry;
            }
            Err(e) => crate::ui::warn(&format!("MCP tools not refreshed: {e}")),
        }
    }

    /// `/mcp`: each server, its state and its tools.
    pub(crate) fn describe(&self) -> String {
        describe(&self.servers.statuses())
    }

    /// Reports what is left to report and stops every server.
    pub(crate) async fn shutdown(&self) {
        self.report();
        self.servers.shutdown().await;
    }
}

/// Chat's hook before each prompt: reports and refreshes the run's servers, if any.
pub(crate) fn before_prompt(
    servers: Option<&RunServers>,
    client: &ChatClient,
    rt: &tokio::runtime::Runtime,
) {
    if let Some(servers) = servers {
        rt.block_on(servers.between_turns(client));
    }
}

/// `/mcp` in chat.
pub(crate) fn describe_run(servers: Option<&RunServers>) -> String {
    match servers {
        Some(servers) => servers.describe().trim_end().to_owned(),
        None => "no MCP servers in this chat (none enabled in the config, or --no-tools)".into(),
    }
}

/// Whether the server's `approve` key lets `tool` (namespaced) run without asking.
fn never_asks(server: &str, tool: &str, entry: Option<&McpServerEntry>) -> bool {
    match entry.and_then(|e| e.approve.as_ref()) {
        Some(Approve::Mode(ApproveMode::Always)) => true,
        Some(Approve::Tools(names)) => names.iter().any(|n| tool_name(server, n) == tool),
        Some(Approve::Mode(ApproveMode::Ask)) | None => false,
    }
}

/// Each server's state and tools, one server a paragraph.
fn describe(statuses: &[ServerStatus]) -> String {
    let mut text = String::new();
    for status in statuses {
        let state = match &status.state {
            ServerState::Running => format!("running ({} ms)", status.startup.as_millis()),
            ServerState::Failed(e) => format!("failed: {e}"),
            other => format!("{other:?}").to_lowercase(),
        };
        text.push_str(&format!("{}\t{state}\n", status.name));
        for tool in &status.tools {
            text.push_str(&format!("  {tool}\n"));
        }
    }
    text
}

/// An MCP tool behind the run's approval policy.
struct Approved {
    inner: Arc<dyn Tool>,
    approver: Arc<Approver>,
    ask: bool,
}

#[async_trait::async_trait]
impl Tool for Approved {
    fn schema(&self) -> ToolSchema {
        self.inner.schema()
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        if self.ask {
            let tool = self.inner.schema().name;
            let request = Request::External {
                tool: tool.clone(),
                arguments: Value::Object(arguments.clone()).to_string(),
            };
            if !self.approver.approve(&tool, "", request).await {
                return Err(ToolError::Denied(None));
            }
        }
        self.inner.execute(arguments).await
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

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
