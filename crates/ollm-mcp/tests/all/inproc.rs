//! Exact edge cases against an in-process rmcp server over streamable HTTP (loopback).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ollm_mcp::{HttpConfig, McpServers, ServerConfig, ServerState, TransportConfig};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ListToolsResult, PaginatedRequestParams,
    ServerCapabilities, ServerInfo, Tool,
};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::json;
use tokio::sync::mpsc;

use crate::common::*;

/// The test server: `wait` blocks until cancelled and says so, `fail` is an error
/// result, `grow` adds a tool and announces the change.
#[derive(Clone)]
struct TestServer {
    tools: Arc<Mutex<Vec<Tool>>>,
    cancelled: mpsc::UnboundedSender<String>,
    headers: Arc<Mutex<Vec<String>>>,
}

fn tool(name: &'static str) -> Tool {
    let schema = json!({"type": "object", "properties": {}});
    Tool::new(
        name,
        "a test tool",
        Arc::new(schema.as_object().cloned().unwrap()),
    )
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerInfo {
        ServerInfo::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(parts) = context.extensions.get::<http::request::Parts>() {
            let mut seen = self.headers.lock().unwrap();
            for name in ["authorization", "x-team"] {
                if let Some(v) = parts.headers.get(name) {
                    seen.push(format!("{name}: {}", v.to_str().unwrap()));
                }
            }
        }
        Ok(ListToolsResult::with_all_items(
            self.tools.lock().unwrap().clone(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        match request.name.as_ref() {
            "wait" => {
                context.ct.cancelled().await;
                let _ = self.cancelled.send(format!("{:?}", context.id));
                Ok(CallToolResult::success(vec![ContentBlock::text(
                    "cancelled",
                )]))
            }
            "fail" => Ok(CallToolResult::error(vec![ContentBlock::text("it broke")])),
            "grow" => {
                self.tools.lock().unwrap().push(tool("new"));
                context.peer.notify_tool_list_changed().await.unwrap();
                Ok(CallToolResult::structured(json!({"grown": true})))
            }
            _ => Err(ErrorData::invalid_params("no such tool", None)),
        }
    }
}

struct Fixture {
    servers: McpServers,
    cancelled: mpsc::UnboundedReceiver<String>,
    headers: Arc<Mutex<Vec<String>>>,
    _logs: tempfile::TempDir,
}

async fn serve(bearer_env: Option<&str>) -> Fixture {
    let (tx, cancelled) = mpsc::unbounded_channel();
    let server = TestServer {
        tools: Arc::new(Mutex::new(vec![tool("wait"), tool("fail"), tool("grow")])),
        cancelled: tx,
        headers: Arc::default(),
    };
    let headers = Arc::clone(&server.headers);
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        LocalSessionManager::default().into(),
        StreamableHttpServerConfig::default(),
    );
    let app = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let mut config = ServerConfig::new(
        "local",
        TransportConfig::Http(HttpConfig {
            url: format!("http://127.0.0.1:{}/mcp", addr.port()),
            headers: [("x-team".to_owned(), "blue".to_owned())].into(),
            bearer_token_env: bearer_env.map(str::to_owned),
        }),
    );
    config.tool_timeout = BOUND;
    let (servers, logs) = start(vec![config]).await;
    Fixture {
        servers,
        cancelled,
        headers,
        _logs: logs,
    }
}

#[tokio::test]
async fn dropping_a_call_sends_notifications_cancelled() {
    let mut f = serve(None).await;
    assert!(matches!(
        f.servers.statuses()[0].state,
        ServerState::Running
    ));
    let registry = registry(&f.servers);
    let call = call(&registry, "local__wait", json!({}));
    assert!(
        tokio::time::timeout(Duration::from_millis(200), call)
            .await
            .is_err()
    );
    let seen = tokio::time::timeout(BOUND, f.cancelled.recv()).await;
    assert!(
        matches!(seen, Ok(Some(_))),
        "the server never saw the cancellation"
    );
    f.servers.shutdown().await;
}

#[tokio::test]
async fn error_and_structured_results_and_list_changed() {
    let f = serve(None).await;
    let registry = registry(&f.servers);
    let fail = call(&registry, "local__fail", json!({})).await;
    assert_eq!(
        (fail.content.as_str(), fail.is_error),
        ("Error: it broke", true)
    );
    assert!(!f.servers.refresh().await, "nothing changed yet");
    let grow = call(&registry, "local__grow", json!({})).await;
    assert_eq!(grow.content, r#"{"grown":true}"#);
    let deadline = tokio::time::Instant::now() + BOUND;
    while !f.servers.refresh().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no tools/list_changed"
        );
        tokio::task::yield_now().await;
    }
    let registry = crate::common::registry(&f.servers);
    assert!(registry.contains("local__new"));
    assert_eq!(
        f.headers.lock().unwrap().first().map(String::as_str),
        Some("x-team: blue")
    );
    f.servers.shutdown().await;
}

#[tokio::test]
async fn a_missing_bearer_token_variable_fails_the_start_clearly() {
    let f = serve(Some("OLLM_TEST_UNSET_TOKEN_VARIABLE")).await;
    let state = f.servers.statuses()[0].state.clone();
    assert!(
        matches!(&state, ServerState::Failed(e) if matches!(**e, ollm_mcp::McpError::MissingToken { .. })),
        "{state:?}"
    );
}
