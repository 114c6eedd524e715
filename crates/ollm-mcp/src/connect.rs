//! Starting one server: spawn or connect, handshake, first tool list, all under the
//! start-up timeout.
//!
//! # Decisions
//! - stdio children get a scrubbed environment ([`BASE_ENV`] plus their configured
//!   variables), their stderr appended to `<log_dir>/<server>.log` (never the terminal,
//!   where it would land in the middle of an answer), and their own process group, so
//!   shutting them down also ends whatever they spawned (`npx` wrappers, shells).
//! - HTTP servers on a loopback address are reached without a proxy: a proxy set for the
//!   internet must not break a local server (reqwest routes loopback through it).
//! - A start given up (timeout, failure, or its future dropped) kills the child's group
//!   at once ([`GroupGuard`]).
//! - The client handler only records `notifications/tools/list_changed`; the manager
//!   re-lists between turns, never in the middle of one.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{ClientCapabilities, ClientInfo, Implementation};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt};

use crate::McpError;
use crate::config::{BASE_ENV, HttpConfig, ServerConfig, StdioConfig, TransportConfig};
use crate::group::kill_group;

/// The client side of one connection: remembers that the server's tool list changed.
#[derive(Debug, Clone, Default)]
pub(crate) struct Handler {
    pub(crate) tools_changed: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.tools_changed.store(true, Ordering::SeqCst);
    }

    fn get_info(&self) -> ClientInfo {
        ClientInfo::new(
            ClientCapabilities::default(),
            Implementation::new("ollm", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A running connection.
pub(crate) type Service = RunningService<RoleClient, Handler>;

/// A started server: its connection, the process id of a stdio child, its tools.
pub(crate) struct Started {
    pub(crate) service: Service,
    pub(crate) handler: Handler,
    pub(crate) pid: Option<u32>,
    pub(crate) tools: Vec<rmcp::model::Tool>,
}

/// Starts `config` within its start-up timeout.
pub(crate) async fn start(config: &ServerConfig, log_dir: &Path) -> Result<Started, McpError> {
    let timeout = config.startup_timeout;
    match tokio::time::timeout(timeout, start_unbounded(config, log_dir)).await {
        Ok(result) => result,
        Err(_) => Err(McpError::StartTimeout {
            server: config.name.clone(),
            timeout,
        }),
    }
}

async fn start_unbounded(config: &ServerConfig, log_dir: &Path) -> Result<Started, McpError> {
    let handler = Handler::default();
    let handshake = |e: &dyn std::fmt::Display| McpError::Handshake {
        server: config.name.clone(),
        message: e.to_string(),
    };
    let (service, pid) = match &config.transport {
        TransportConfig::Stdio(stdio) => {
            let child = spawn(&config.name, stdio, log_dir)?;
            let pid = child.id();
            let guard = GroupGuard(pid);
            let service = handler
                .clone()
                .serve(child)
                .await
                .map_err(|e| handshake(&e))?;
            std::mem::forget(guard);
            (service, pid)
        }
        TransportConfig::Http(http) => {
            let transport = http_transport(&config.name, http)?;
            let service = handler
                .clone()
                .serve(transport)
                .await
                .map_err(|e| handshake(&e))?;
            (service, None)
        }
    };
    let tools = service.list_all_tools().await.map_err(|e| handshake(&e))?;
    Ok(Started {
        service,
        handler,
        pid,
        tools,
    })
}

/// Kills a starting server's process group when the start is given up (dropped by the
/// start-up timeout or by the caller, e.g. on Ctrl-C) or fails. rmcp's child handle
/// kills on drop from a spawned task, which never runs when the process exits right
/// after (seen: Ctrl-C during start-up left the server running); this kill is
/// synchronous. Forgotten once the handshake succeeded: from then on the server's
/// shutdown owns the group.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

fn spawn(name: &str, config: &StdioConfig, log_dir: &Path) -> Result<TokioChildProcess, McpError> {
    let io = |source| McpError::Spawn {
        server: name.to_owned(),
        source,
    };
    std::fs::create_dir_all(log_dir).map_err(io)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_dir.join(format!("{name}.log")))
        .map_err(io)?;
    let mut command = tokio::process::Command::new(&config.command);
    command.args(&config.args).env_clear();
    for key in BASE_ENV {
        if let Some(value) = std::env::var_os(key) {
            command.env(key, value);
        }
    }
    command.envs(&config.env);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    let (child, _stderr) = TokioChildProcess::builder(wrapped)
        .stderr(log)
        .spawn()
        .map_err(io)?;
    Ok(child)
}

fn http_transport(
    name: &str,
    config: &HttpConfig,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, McpError> {
    let mut headers = HashMap::new();
    for (key, value) in &config.headers {
        let invalid = || McpError::InvalidHeader {
            server: name.to_owned(),
            header: key.clone(),
        };
        let key = http::HeaderName::try_from(key.as_str()).map_err(|_| invalid())?;
        let value = http::HeaderValue::try_from(value.as_str()).map_err(|_| invalid())?;
        headers.insert(key, value);
    }
    let mut transport =
        StreamableHttpClientTransportConfig::with_uri(config.url.as_str()).custom_headers(headers);
    if let Some(var) = &config.bearer_token_env {
        let token = std::env::var(var).map_err(|_| McpError::MissingToken {
            server: name.to_owned(),
            var: var.clone(),
        })?;
        transport = transport.auth_header(token);
    }
    let mut client = reqwest::Client::builder();
    if is_loopback(&config.url) {
        client = client.no_proxy();
    }
    let client = client.build().map_err(|e| McpError::Handshake {
        server: name.to_owned(),
        message: e.to_string(),
    })?;
    Ok(StreamableHttpClientTransport::with_client(
        client, transport,
    ))
}

fn is_loopback(url: &str) -> bool {
    let Ok(url) = reqwest::Url::parse(url) else {
        return false;
    };
    match url.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}
