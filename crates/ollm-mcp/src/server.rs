//! The servers of a run: started together, their tools registered under namespaced
//! names, their failures reported once, shut down together.
//!
//! # Decisions
//! - [`McpServers::start`] fails only for configuration mistakes. A server that does not
//!   start (spawn error, handshake error, start-up timeout) is recorded in its state and
//!   the others are used: one broken server must not stop a run.
//! - Failures are reported once: [`McpServers::take_reports`] hands each failure (start
//!   failure or exit) to the caller the first time it sees it; after that the server's
//!   tools keep answering with an error result and nothing else is said.
//! - `tools/list_changed` only sets a flag; [`McpServers::refresh`] re-lists the flagged
//!   servers and the caller rebuilds its registry between turns, so the tool set never
//!   changes in the middle of a turn.
//! - Shutdown closes each connection (stdin closed, the child waited for, killed after a
//!   grace period) and then kills the child's process group, so nothing it spawned
//!   outlives the run.
//! - Each start is logged at `info` (`tracing`): the server, how long it took, its tool
//!   count or why it failed. Failures are no `warn`: the caller reports them once.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use ollm_core::{Tool, ToolError, ToolRegistry};
use rmcp::RoleClient;
use rmcp::service::Peer;

use crate::McpError;
use crate::config::ServerConfig;
use crate::connect::{Handler, Service, start};
use crate::group::kill_group;
use crate::names::{check_server_name, tool_name};
use crate::tool::{Endpoint, McpTool};

/// Where a server is in its life.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerState {
    /// Connected; its tools can be called.
    Running,
    /// It did not start.
    Failed(Arc<McpError>),
    /// It exited, or its connection closed, after starting.
    Exited,
    /// [`McpServers::shutdown`] stopped it.
    Stopped,
}

/// A server's state and tools, for `ollm mcp list` and `/mcp`.
#[derive(Debug, Clone)]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// Its state.
    pub state: ServerState,
    /// Its tools' namespaced names (empty unless it started).
    pub tools: Vec<String>,
    /// How long it took to start (or to fail).
    pub startup: Duration,
    /// The process id of a stdio server's child.
    pub pid: Option<u32>,
}

/// What is known of one server.
struct Live {
    state: ServerState,
    peer: Option<Peer<RoleClient>>,
    handler: Handler,
    tools: Vec<rmcp::model::Tool>,
}

/// One server.
pub(crate) struct Server {
    pub(crate) config: ServerConfig,
    live: Mutex<Live>,
    service: tokio::sync::Mutex<Option<Service>>,
    reported: AtomicBool,
    startup: Duration,
    pid: Option<u32>,
}

impl Server {
    fn live(&self) -> MutexGuard<'_, Live> {
        self.live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The connection, when the server is running (an exit noticed here is recorded).
    pub(crate) fn peer(&self) -> Option<Peer<RoleClient>> {
        let mut live = self.live();
        Self::notice_exit(&mut live);
        match live.state {
            ServerState::Running => live.peer.clone(),
            _ => None,
        }
    }

    fn notice_exit(live: &mut Live) {
        let closed = live.peer.as_ref().is_some_and(Peer::is_transport_closed);
        if closed && matches!(live.state, ServerState::Running) {
            live.state = ServerState::Exited;
        }
    }

    /// The error result of a call to a server that is not running; marks it exited.
    pub(crate) fn unavailable(&self) -> ToolError {
        let mut live = self.live();
        if matches!(live.state, ServerState::Running) {
            live.state = ServerState::Exited;
        }
        ToolError::Failed(format!(
            "the MCP server {} is not running",
            self.config.name
        ))
    }

    fn status(&self) -> ServerStatus {
        let mut live = self.live();
        Self::notice_exit(&mut live);
        ServerStatus {
            name: self.config.name.clone(),
            state: live.state.clone(),
            tools: live
                .tools
                .iter()
                .map(|t| tool_name(&self.config.name, &t.name))
                .collect(),
            startup: self.startup,
            pid: self.pid,
        }
    }
}

impl Endpoint for Server {
    fn peer(&self) -> Option<Peer<RoleClient>> {
        Server::peer(self)
    }

    fn unavailable(&self) -> ToolError {
        Server::unavailable(self)
    }

    fn tool_timeout(&self) -> Duration {
        self.config.tool_timeout
    }
}

/// The MCP servers of a run.
pub struct McpServers {
    servers: Vec<Arc<Server>>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self
            .servers
            .iter()
            .map(|s| s.config.name.as_str())
            .collect();
        f.debug_struct("McpServers")
            .field("servers", &names)
            .finish()
    }
}

impl McpServers {
    /// Starts every server concurrently, each within its start-up timeout; stdio
    /// servers' stderr goes to `<log_dir>/<name>.log`. Fails only on a bad or repeated
    /// server name; a server that does not start is recorded (see the module docs).
    pub async fn start(configs: Vec<ServerConfig>, log_dir: &Path) -> Result<Self, McpError> {
        let mut seen = HashSet::new();
        for config in &configs {
            check_server_name(&config.name)?;
            if !seen.insert(config.name.clone()) {
                return Err(McpError::DuplicateServer(config.name.clone()));
            }
        }
        let log_dir: PathBuf = log_dir.to_owned();
        let starts = configs.into_iter().map(|config| {
            let log_dir = log_dir.clone();
            async move { start_one(config, &log_dir).await }
        });
        let servers = futures::future::join_all(starts).await;
        Ok(McpServers {
            servers: servers.into_iter().map(Arc::new).collect(),
        })
    }

    /// Every server's status, in configuration order.
    pub fn statuses(&self) -> Vec<ServerStatus> {
        self.servers.iter().map(|s| s.status()).collect()
    }

    /// The tools of the running servers (and of those that exited: they answer with an
    /// error result), under their namespaced names. Two tools with the same namespaced
    /// name are refused.
    pub fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, McpError> {
        let mut names = HashSet::new();
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        for server in &self.servers {
            let listed = server.live().tools.clone();
            for tool in listed {
                let name = tool_name(&server.config.name, &tool.name);
                if !names.insert(name.clone()) {
                    return Err(collision(name, &server.config.name, &tool.name));
                }
                let endpoint: Arc<dyn Endpoint> = Arc::clone(server) as Arc<dyn Endpoint>;
                tools.push(Arc::new(McpTool {
                    server: endpoint,
                    name,
                    tool,
                }));
            }
        }
        Ok(tools)
    }

    /// Adds the tools to `registry`, refusing any whose name is taken already (a
    /// built-in tool's, say). Nothing is added when one is refused.
    pub fn register(&self, registry: &mut ToolRegistry) -> Result<(), McpError> {
        let tools = self.tools()?;
        for tool in &tools {
            let name = tool.schema().name;
            if registry.contains(&name) {
                let (server, remote) = name.split_once("__").unwrap_or((&name, ""));
                return Err(collision(name.clone(), server, remote));
            }
        }
        let mut added = registry.clone();
        for tool in tools {
            added.register(tool)?;
        }
        *registry = added;
        Ok(())
    }

    /// Re-lists the tools of servers that announced a change; `true` when any did (the
    /// caller then rebuilds its registry with [`McpServers::register`]). Call it between
    /// turns.
    pub async fn refresh(&self) -> bool {
        let mut changed = false;
        for server in &self.servers {
            let peer = {
                let live = server.live();
                if !live.handler.tools_changed.swap(false, Ordering::SeqCst) {
                    continue;
                }
                live.peer.clone()
            };
            let Some(peer) = peer else { continue };
            match peer.list_all_tools().await {
                Ok(tools) => {
                    server.live().tools = tools;
                    changed = true;
                }
                // Keep the flag so the next refresh tries again.
                Err(_) => server
                    .live()
                    .handler
                    .tools_changed
                    .store(true, Ordering::SeqCst),
            }
        }
        changed
    }

    /// Failures not reported yet (start failures and exits), each returned once.
    pub fn take_reports(&self) -> Vec<(String, Arc<McpError>)> {
        let mut reports = Vec::new();
        for server in &self.servers {
            let error = match server.status().state {
                ServerState::Failed(error) => error,
                ServerState::Exited => Arc::new(McpError::Exited(server.config.name.clone())),
                _ => continue,
            };
            if !server.reported.swap(true, Ordering::SeqCst) {
                reports.push((server.config.name.clone(), error));
            }
        }
        reports
    }

    /// Stops every server and waits for them; nothing they started outlives this.
    pub async fn shutdown(&self) {
        let stops = self.servers.iter().map(|server| async move {
            let service = server.service.lock().await.take();
            if let Some(mut service) = service {
                let _ = service.close_with_timeout(Duration::from_secs(5)).await;
            }
            kill_group(server.pid);
            let mut live = server.live();
            live.peer = None;
            if matches!(live.state, ServerState::Running | ServerState::Exited) {
                live.state = ServerState::Stopped;
            }
        });
        futures::future::join_all(stops).await;
    }
}

fn collision(name: String, server: &str, tool: &str) -> McpError {
    McpError::NameCollision {
        name,
        server: server.to_owned(),
        tool: tool.to_owned(),
    }
}

async fn start_one(config: ServerConfig, log_dir: &Path) -> Server {
    let begun = Instant::now();
    let result = start(&config, log_dir).await;
    let startup = begun.elapsed();
    let name = &config.name;
    match &result {
        Ok(started) => {
            tracing::info!(server = %name, ?startup, tools = started.tools.len(), "MCP server started")
        }
        Err(error) => {
            tracing::info!(server = %name, ?startup, %error, "MCP server failed to start")
        }
    }
    match result {
        Ok(started) => Server {
            live: Mutex::new(Live {
                state: ServerState::Running,
                peer: Some(started.service.peer().clone()),
                handler: started.handler,
                tools: started.tools,
            }),
            service: tokio::sync::Mutex::new(Some(started.service)),
            reported: AtomicBool::new(false),
            startup,
            pid: started.pid,
            config,
        },
        Err(error) => Server {
            live: Mutex::new(Live {
                state: ServerState::Failed(Arc::new(error)),
                peer: None,
                handler: Handler::default(),
                tools: Vec::new(),
            }),
            service: tokio::sync::Mutex::new(None),
            reported: AtomicBool::new(false),
            startup,
            pid: None,
            config,
        },
    }
}
