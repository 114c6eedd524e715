//! One MCP tool as a core [`Tool`].
//!
//! # Decisions
//! - The tool's `inputSchema` is its parameter schema as the server sent it; the core
//!   registry validates arguments against it before [`Tool::execute`] runs.
//! - A call is sent as a cancellable request and guarded: if the call future is dropped
//!   (the run was cancelled) or the per-call timeout fires, the server gets
//!   `notifications/cancelled` for that request. rmcp does not do this on drop itself.
//! - A call to a server that has exited fails with an error result naming the server
//!   (the run goes on); the exit is reported once through the manager.
//! - A tool reaches its server through the small [`Endpoint`] trait, which the manager's
//!   server implements: this module never names the manager, so the two do not form a
//!   module cycle.

use std::sync::Arc;

use async_trait::async_trait;
use ollm_core::{Tool, ToolError};
use ollm_types::ToolSchema;
use rmcp::RoleClient;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult,
};
use rmcp::service::{Peer, PeerRequestOptions, ServiceError};
use serde_json::{Map, Value};

use crate::content::result_text;
/// What a tool needs of its server.
pub(crate) trait Endpoint: Send + Sync {
    /// The connection, when the server is running.
    fn peer(&self) -> Option<Peer<RoleClient>>;
    /// The error result of a call to a server that is not running (marking it exited).
    fn unavailable(&self) -> ToolError;
    /// How long one call may take.
    fn tool_timeout(&self) -> std::time::Duration;
}

/// A tool of an MCP server, under its namespaced name.
pub(crate) struct McpTool {
    pub(crate) server: Arc<dyn Endpoint>,
    pub(crate) name: String,
    pub(crate) tool: rmcp::model::Tool,
}

#[async_trait]
impl Tool for McpTool {
    fn schema(&self) -> ToolSchema {
        let description = self.tool.description.as_deref().unwrap_or_default();
        ToolSchema::new(
            self.name.clone(),
            description,
            Value::Object((*self.tool.input_schema).clone()),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let peer = self
            .server
            .peer()
            .ok_or_else(|| self.server.unavailable())?;
        let mut params = CallToolRequestParams::new(self.tool.name.clone());
        params.arguments = Some(arguments);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await
            .map_err(|e| self.failed(e))?;
        let mut guard = CancelOnDrop {
            peer: Some(peer.clone()),
            id: handle.id.clone(),
        };
        let timeout = self.server.tool_timeout();
        let response = match tokio::time::timeout(timeout, handle.await_response()).await {
            Ok(response) => response,
            Err(_) => {
                guard.cancel("timed out").await;
                return Err(ToolError::Failed(format!(
                    "the MCP tool {} timed out after {timeout:?}",
                    self.name
                )));
            }
        };
        guard.peer = None;
        match response.map_err(|e| self.failed(e))? {
            ServerResult::CallToolResult(result) => {
                let wire = serde_json::to_value(&result)
                    .map_err(|e| ToolError::Failed(format!("unreadable MCP result: {e}")))?;
                result_text(&wire)
                    .map(Value::String)
                    .map_err(ToolError::Failed)
            }
            other => Err(ToolError::Failed(format!(
                "the MCP server answered tools/call with {other:?}"
            ))),
        }
    }
}

impl McpTool {
    fn failed(&self, error: ServiceError) -> ToolError {
        match error {
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.server.unavailable()
            }
            other => ToolError::Failed(format!("MCP error from {}: {other}", self.name)),
        }
    }
}

/// Sends `notifications/cancelled` for a request unless disarmed (`peer` taken).
struct CancelOnDrop {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl CancelOnDrop {
    async fn cancel(&mut self, reason: &str) {
        if let Some(peer) = self.peer.take() {
            let _ = peer.send_notification(cancelled(&self.id, reason)).await;
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let notification = cancelled(&self.id, "cancelled by the client");
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = peer.send_notification(notification).await;
            });
        }
    }
}

fn cancelled(id: &RequestId, reason: &str) -> rmcp::model::ClientNotification {
    CancelledNotification::new(CancelledNotificationParam::new(
        Some(id.clone()),
        Some(reason.to_owned()),
    ))
    .into()
}
