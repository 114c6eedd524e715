//! The HTTP side of `ollm serve`: routes, the API key check, bounded bodies, and the
//! reply sent whole or streamed.
//!
//! # Decisions
//! - The reply's first piece is awaited before any header goes out, so a failure before
//!   the first byte (every replica down, a 400 from the server) is a real HTTP error
//!   status with OpenAI's error body, streamed or not.
//! - With an API key, every route but `/health` wants `Authorization: Bearer <key>`;
//!   the key is compared in constant time.
//! - Bodies over the limit get 413 in OpenAI's error shape, not axum's plain text.
//! - A client's session header (`x-session-id`, or `x-session-affinity` as some routers
//!   name it) is the pool's affinity key.
//! - **Every error a client receives is logged** with its cause (the upstream's status
//!   and message, or the transport error): server errors at `error`, the rest at `warn`,
//!   so they show at the default verbosity. Issue 37 saw one request in about 45 answered
//!   502 at once with nothing in the log, even at `-vv`.
//! - **A transport error before the first byte is tried once more.** That 502 was a
//!   pooled connection the upstream closed just as it was reused: llama-server (and
//!   uvicorn, in front of vLLM) close a connection idle for 5 s, and a request sent on it
//!   at that moment fails with "connection closed before message completed" (reproduced
//!   by `a_reused_connection_closed_by_the_upstream_is_retried_and_logged`). The
//!   replicas do not retry on their own (the pool's failover is their retry), and with one
//!   replica there was nothing to fail over to. Nothing reached the client yet and the
//!   upstream closed the connection without answering, so a second try on a fresh
//!   connection is safe; a second failure is the client's 502.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use futures::stream::BoxStream;
use ollm_bridge::ProviderPool;
use ollm_core::ProviderAdapter;
use ollm_types::{ProviderError, ProviderErrorKind, ProviderRequest};
use serde_json::{Value, json};

use super::metrics::Metrics;
use super::repair::{self, InfoCache};
use super::wire_in;
use super::wire_out::{self, Chunker, Meta, Piece};

/// The session headers the pool keys affinity on, first found wins.
const SESSION_HEADERS: [&str; 2] = ["x-session-id", "x-session-affinity"];

/// What every request handler shares.
pub(crate) struct App {
    pub(crate) pool: ProviderPool,
    pub(crate) repair: bool,
    pub(crate) api_key: Option<String>,
    pub(crate) metrics: Metrics,
    pub(crate) cache: Arc<InfoCache>,
    pub(crate) replies: AtomicU64,
}

impl App {
    /// A server in front of `pool`.
    pub(crate) fn new(pool: ProviderPool, repair: bool, api_key: Option<String>) -> Self {
        App {
            pool,
            repair,
            api_key,
            metrics: Metrics::default(),
            cache: Arc::default(),
            replies: AtomicU64::new(0),
        }
    }
}

/// The routes, with bodies capped at `max_body` bytes.
pub(crate) fn router(app: Arc<App>, max_body: usize) -> Router {
    Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .fallback(|| async {
            error(
                StatusCode::NOT_FOUND,
                "invalid_request_error",
                "no such route",
            )
        })
        .layer(middleware::from_fn_with_state(Arc::clone(&app), auth))
        .layer(DefaultBodyLimit::max(max_body))
        .with_state(app)
}

/// OpenAI's error shape with `status`.
fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    tracing::warn!(status = status.as_u16(), kind, "serve: {message}");
    let body = json!({"error": {"message": message, "type": kind, "param": null, "code": null}});
    (status, axum::Json(body)).into_response()
}

/// The response for `error` before any of the reply was sent, logged with its cause.
fn provider_error(meta: &Meta, error: &ProviderError) -> Response {
    let status =
        StatusCode::from_u16(wire_out::error_status(error)).unwrap_or(StatusCode::BAD_GATEWAY);
    log_error(meta, status.as_u16(), error, false);
    (status, axum::Json(wire_out::error_body(error))).into_response()
}

/// Logs an error a client receives, with its cause: the upstream's status and message,
/// or the transport error (server errors at `error`, the rest at `warn`). `began`: the
/// stream had begun, so the client got it as an error event after a 200.
pub(super) fn log_error(meta: &Meta, status: u16, error: &ProviderError, began: bool) {
    let upstream = error
        .status
        .map_or_else(|| "none".to_owned(), |s| s.to_string());
    let when = if began {
        "after the stream began"
    } else {
        "before the reply"
    };
    let (id, model, kind, hint) = (&meta.id, &meta.model, error.kind, &error.hint);
    if status >= 500 {
        tracing::error!(%id, %model, status, upstream_status = %upstream, ?kind, ?hint,
            "serve: error {when}: {}", error.message);
    } else {
        tracing::warn!(%id, %model, status, upstream_status = %upstream, ?kind, ?hint,
            "serve: error {when}: {}", error.message);
    }
}

/// The reply's first piece and the rest, awaited before any header goes out. A transport
/// error before the first byte (a pooled connection the upstream had just closed: see
/// the module docs) is tried once more, and logged.
async fn begin(
    app: &Arc<App>,
    meta: &Meta,
    request: ProviderRequest,
    session: Option<String>,
) -> Result<(Piece, BoxStream<'static, Piece>), ProviderError> {
    let mut retried = false;
    loop {
        let mut pieces = repair::reply(
            &app.pool,
            &app.cache,
            request.clone(),
            session.clone(),
            app.repair,
        );
        match pieces.next().await {
            Some(Piece::Error(e)) if e.kind == ProviderErrorKind::Connection && !retried => {
                tracing::warn!(id = %meta.id, model = %meta.model, kind = ?e.kind,
                    "serve: {}; trying once more on a fresh connection", e.message);
                retried = true;
            }
            Some(Piece::Error(e)) => return Err(e),
            Some(first) => return Ok((first, pieces)),
            None => {
                return Err(ProviderError::new(
                    ProviderErrorKind::IncompleteStream,
                    "the reply ended before it began",
                ));
            }
        }
    }
}

async fn auth(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let Some(key) = app.api_key.as_deref() else {
        return next.run(request).await;
    };
    if request.uri().path() == "/health" {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if constant_time_eq(given.as_bytes(), key.as_bytes()) {
        next.run(request).await
    } else {
        error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "a valid `Authorization: Bearer` key is required",
        )
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn chat(
    State(app): State<Arc<App>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let response = answer(&app, &headers, body).await;
    app.metrics
        .request("/v1/chat/completions", response.status().as_u16());
    response
}

async fn answer(
    app: &Arc<App>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let client = match client_request(body) {
        Ok(client) => client,
        Err(refused) => return *refused,
    };
    let session = SESSION_HEADERS
        .iter()
        .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
        .map(str::to_owned);
    let meta = Meta {
        id: format!(
            "chatcmpl-ollm-{}",
            app.replies.fetch_add(1, Ordering::Relaxed)
        ),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        model: client.request.model.clone(),
    };
    let guard = InFlight::new(Arc::clone(app));
    let (first, pieces) = match begin(app, &meta, client.request, session).await {
        Ok(begun) => begun,
        Err(e) => return provider_error(&meta, &e),
    };
    let pieces = futures::stream::once(std::future::ready(first)).chain(pieces);
    if !client.stream {
        let all: Vec<Piece> = pieces.collect().await;
        guard.count_calls(&all);
        return match wire_out::completion(&meta, all) {
            Ok(body) => axum::Json(body).into_response(),
            Err(e) => provider_error(&meta, &e),
        };
    }
    streamed(pieces, meta, client.include_usage, guard)
}

/// The client's request read from `body`, or the error response that refuses it.
fn client_request(
    body: Result<Bytes, BytesRejection>,
) -> Result<wire_in::ClientRequest, Box<Response>> {
    let body = body.map_err(|rejection| {
        let status = rejection.status();
        Box::new(error(
            status,
            "invalid_request_error",
            &rejection.body_text(),
        ))
    })?;
    wire_in::parse(&body).map_err(|e| {
        tracing::warn!(status = 400, param = ?e.param, "serve: {}", e.message);
        let body = json!({"error": {"message": e.message, "type": "invalid_request_error", "param": e.param, "code": null}});
        Box::new((StatusCode::BAD_REQUEST, axum::Json(body)).into_response())
    })
}

/// The reply as server-sent events, counting its calls as they pass.
fn streamed(
    pieces: impl futures::Stream<Item = Piece> + Send + 'static,
    meta: Meta,
    include_usage: bool,
    guard: InFlight,
) -> Response {
    let (mut chunker, head) = Chunker::new(meta.clone(), include_usage);
    let chunks = pieces.map(move |piece| {
        match &piece {
            Piece::Call(_) => {
                guard.app.metrics.tool_calls.fetch_add(1, Ordering::Relaxed);
            }
            Piece::Error(e) => {
                log_error(&meta, wire_out::error_status(e), e, true);
            }
            _ => {}
        }
        let mut out = String::new();
        chunker.push(piece, &mut out);
        Ok::<_, Infallible>(Bytes::from(out))
    });
    let body = futures::stream::once(std::future::ready(Ok(Bytes::from(head)))).chain(chunks);
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .unwrap_or_else(|_| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                "response",
            )
        })
}

/// Counts a reply in progress while it lives.
struct InFlight {
    app: Arc<App>,
}

impl InFlight {
    fn new(app: Arc<App>) -> Self {
        app.metrics.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight { app }
    }

    fn count_calls(&self, pieces: &[Piece]) {
        let calls = pieces
            .iter()
            .filter(|p| matches!(p, Piece::Call(_)))
            .count();
        self.app
            .metrics
            .tool_calls
            .fetch_add(calls as u64, Ordering::Relaxed);
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.app.metrics.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn models(State(app): State<Arc<App>>) -> Response {
    let meta = Meta {
        id: "models".into(),
        created: 0,
        model: String::new(),
    };
    let response = match app.pool.list_models().await {
        Ok(models) => {
            let data: Vec<Value> = models
                .iter()
                .map(|m| json!({"id": m.name, "object": "model", "created": 0, "owned_by": "ollm"}))
                .collect();
            axum::Json(json!({"object": "list", "data": data})).into_response()
        }
        Err(e) => provider_error(&meta, &e),
    };
    app.metrics
        .request("/v1/models", response.status().as_u16());
    response
}

async fn health(State(app): State<Arc<App>>) -> Response {
    let replicas: Vec<Value> = app
        .pool
        .status()
        .iter()
        .map(|s| json!({"replica": s.name, "healthy": s.healthy, "in_flight": s.in_flight}))
        .collect();
    let any = replicas.iter().any(|r| r["healthy"] == true);
    let status = if any {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let body = json!({"status": if any { "ok" } else { "unavailable" }, "replicas": replicas});
    (status, axum::Json(body)).into_response()
}

async fn metrics(State(app): State<Arc<App>>) -> Response {
    let text = app.metrics.render(&app.pool);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response()
}
