//! The HTTP side of `ollm serve`: routes, the API key check, bounded bodies, and the
//! reply sent whole or streamed.
//!
//! # Decisions
//! - The reply's first piece is awaited before any header goes out, so a failure before
//!   the first byte (every replica down, a 400 from the server) is a real HTTP error
//!   status with OpenAI's error body, streamed or not.
//! - With API keys (`--api-key`, `[serve.keys.NAME]`), every route but `/health` wants
//!   `Authorization: Bearer <key>`; each key is compared in constant time, all of them
//!   every time. The key a request came with chooses its repair policy with the model's
//!   (`policy.rs`), and the policy applied is told in `x-ollm-repair-policy`.
//! - Where a reply's calls came from goes in `x-ollm-repair` (`provenance.rs`): on every
//!   whole reply that has repaired calls, and on a stream only when it begins with them,
//!   since headers go before the first byte; the stream's finish chunk always says.
//! - Bodies over the limit get 413 in OpenAI's error shape, not axum's plain text.
//! - **A concurrency limit answers 429** with `Retry-After`, as llama-swap's do: with
//!   `--max-in-flight N`, the server admits N chat replies per healthy replica and
//!   refuses the next before anything reaches an upstream, so a full pool sheds load at
//!   once instead of queueing in every engine. The admission is one atomic count, exact
//!   for the server; how the replies spread over the replicas is the pool's least-busy
//!   routing (a session's affinity may keep more than N on one replica).
//! - A client's session header (`x-session-id`, or `x-session-affinity` as some routers
//!   name it) is the pool's affinity key.
//! - **The session headers and the configured routing headers go upstream** with every
//!   chat request serve makes for the client's (its retries, the repair loop's turns,
//!   the `tool_choice` retry, the coach's answer), as the client sent them: vLLM's
//!   routers key on `X-Session-ID` and SGLang's gateway on `x-smg-routing-key` (issue 37),
//!   and a router between serve and the engines would otherwise lose the client's
//!   affinity. Only the names asked for: a client's `Authorization` is serve's, never
//!   the upstream's.
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
//!   upstream closed the connection without answering, so a second try is safe; a second
//!   failure is the client's 502. The transport now sends a request whose pooled
//!   connection was closed once more on a new connection itself (llama-server closes
//!   the connection of every streamed reply; `ollm_bridge`'s transport docs), so this
//!   try is left for a connection error that outlasts that.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Extension, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures::StreamExt;
use futures::stream::BoxStream;
use ollm_bridge::ProviderPool;
use ollm_core::{CoachConfig, ProviderAdapter, ToolMode};
use ollm_types::{ProviderError, ProviderErrorKind, ProviderRequest};
use serde_json::{Value, json};

use super::clock::Clock;
use super::metrics::Metrics;
use super::policy::{ClientKey, Policy, Repair};
use super::repair;
use super::routes::Routes;
use super::through::InfoCache;
use super::turns::Upstream;
use super::wire_in;
use super::wire_out::{self, Chunker, Meta, Piece};

/// The session headers the pool keys affinity on, first found wins.
const SESSION_HEADERS: [&str; 2] = ["x-session-id", "x-session-affinity"];

/// Where a reply's calls came from (`provenance.rs`): `recovered; format=...; calls=N`.
const REPAIR_HEADER: &str = "x-ollm-repair";

/// The repair policy a request was answered under (`off`, `flag`, `on`).
const POLICY_HEADER: &str = "x-ollm-repair-policy";

/// The wait a client at the concurrency limit is asked for, in seconds: a short reply
/// of a small model takes about that long.
const RETRY_AFTER_SECS: &str = "1";

/// What serve added to the reply's latency, in milliseconds (`clock.rs`).
const OVERHEAD_HEADER: &str = "x-ollm-overhead-ms";

/// How the gateway treats requests: plain data (the CLI settles its flags and the
/// `[serve]` table into it).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// The repair policy, the server's and the models'.
    pub policy: Policy,
    /// The keys clients may use; none: no key asked for.
    pub keys: Vec<ClientKey>,
    /// How a `tool_choice` that obliges a call is enforced on a retry (`contract.rs`):
    /// `Constrained` where the upstream takes a JSON schema, else `React`.
    pub constraint: ToolMode,
    /// Chat replies in flight per healthy replica before the server answers 429; none:
    /// no limit.
    pub max_in_flight: Option<usize>,
    /// The largest request body accepted, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Request headers passed on to the upstream on every request made for the client's
    /// (routing keys such as SGLang's `x-smg-routing-key`), besides the session headers,
    /// which always are. Case does not matter.
    pub forward_headers: Vec<String>,
    /// The coach's switches and words, for the turn loop's runs and for the answer asked
    /// for in place of a reply that only repeats answered calls (`repair.rs`). The
    /// default is the coach's (every rule on but those `Rule::ON_REQUEST` lists) and
    /// names `path` as the argument a file path goes in (`path-in-name`, `file-as-name`),
    /// as `ollm run` does. The `[serve]` table ([`ServeEntry`](crate::ServeEntry)) also
    /// turns on `tool-or-none` and `greedy-tool-turns` and names read-only tools unless
    /// it says otherwise, as `ollm serve` ships.
    pub coach: CoachConfig,
    /// The coach for requests that name one of these models, in place of `coach` (the
    /// CLI's `[serve.models."NAME"] tool_or_none`): a small model may want the
    /// `tool-or-none` choice that a large one does not need to pay a request for.
    pub model_coach: BTreeMap<String, CoachConfig>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            policy: Policy::default(),
            keys: Vec::new(),
            constraint: ToolMode::Constrained,
            max_in_flight: None,
            max_body_bytes: crate::DEFAULT_MAX_BODY,
            forward_headers: Vec::new(),
            coach: CoachConfig {
                path_argument: Some("path".to_owned()),
                ..CoachConfig::default()
            },
            model_coach: BTreeMap::new(),
        }
    }
}

/// What every request handler shares.
pub(crate) struct App {
    pub(crate) pool: ProviderPool,
    pub(crate) options: Options,
    /// The coach's config of `options`, shared by every request's repair.
    coach: Arc<CoachConfig>,
    /// The coach's config per model, where `options` gives one.
    model_coach: BTreeMap<String, Arc<CoachConfig>>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) cache: Arc<InfoCache>,
    /// The `tool-or-none` choices made, by prompt.
    routes: Arc<Routes>,
    pub(crate) replies: AtomicU64,
}

impl App {
    /// A server in front of `pool`.
    pub(crate) fn new(pool: ProviderPool, options: Options) -> Self {
        App {
            pool,
            coach: Arc::new(options.coach.clone()),
            model_coach: options
                .model_coach
                .iter()
                .map(|(model, coach)| (model.clone(), Arc::new(coach.clone())))
                .collect(),
            options,
            metrics: Arc::default(),
            cache: Arc::default(),
            routes: Arc::default(),
            replies: AtomicU64::new(0),
        }
    }

    /// A new reply's id, time and model.
    fn meta(&self, model: String) -> Meta {
        let n = self.replies.fetch_add(1, Ordering::Relaxed);
        Meta {
            id: format!("chatcmpl-ollm-{n}"),
            created: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            model,
        }
    }

    /// What a repair of a request for `model` timed by `clock` needs of the server.
    fn upstream(&self, model: &str, clock: Arc<Clock>) -> Upstream {
        Upstream {
            pool: self.pool.clone(),
            cache: Arc::clone(&self.cache),
            routes: Arc::clone(&self.routes),
            metrics: Arc::clone(&self.metrics),
            constraint: self.options.constraint,
            coach: Arc::clone(self.model_coach.get(model).unwrap_or(&self.coach)),
            clock,
        }
    }
}

/// The key a request came with (its name and policy), put in the request by [`auth`].
#[derive(Debug, Clone)]
struct Caller {
    name: String,
    repair: Option<Repair>,
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
    up: &Upstream,
    meta: &Meta,
    request: ProviderRequest,
    session: Option<String>,
    policy: Repair,
    whole: bool,
) -> Result<(Piece, BoxStream<'static, Piece>), ProviderError> {
    let mut retried = false;
    loop {
        let mut pieces = repair::reply(up, request.clone(), session.clone(), policy, whole);
        match pieces.next().await {
            Some(Piece::Error(e)) if e.kind == ProviderErrorKind::Connection && !retried => {
                tracing::warn!(id = %meta.id, model = %meta.model, kind = ?e.kind,
                    "serve: {}; trying once more", e.message);
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

async fn auth(State(app): State<Arc<App>>, mut request: Request, next: Next) -> Response {
    if app.options.keys.is_empty() || request.uri().path() == "/health" {
        return next.run(request).await;
    }
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    // Every key is compared, so the time taken does not say which one came close.
    let matched = app.options.keys.iter().fold(None, |found, key| {
        let same = constant_time_eq(given.as_bytes(), key.secret.as_bytes());
        found.or(same.then_some(key))
    });
    match matched {
        Some(key) => {
            request.extensions_mut().insert(Caller {
                name: key.name.clone(),
                repair: key.repair,
            });
            next.run(request).await
        }
        None => error(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "a valid `Authorization: Bearer` key is required",
        ),
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn chat(
    State(app): State<Arc<App>>,
    caller: Option<Extension<Caller>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let caller = caller.map(|Extension(c)| c);
    let response = answer(&app, caller.as_ref(), &headers, body).await;
    app.metrics
        .request("/v1/chat/completions", response.status().as_u16());
    response
}

async fn answer(
    app: &Arc<App>,
    caller: Option<&Caller>,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let clock = Clock::start();
    let mut client = match client_request(body) {
        Ok(client) => client,
        Err(refused) => return *refused,
    };
    let session = SESSION_HEADERS
        .iter()
        .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
        .map(str::to_owned);
    client.request.headers = forwarded(headers, &app.options.forward_headers);
    let model = client.request.model.clone();
    let policy = app
        .options
        .policy
        .decide(&model, caller.and_then(|c| c.repair));
    let up = app.upstream(&model, Arc::clone(&clock));
    let meta = app.meta(model);
    tracing::debug!(id = %meta.id, key = ?caller.map(|c| &c.name), %policy, "serve: chat request");
    let Some(guard) = InFlight::admit(app) else {
        return with_policy(full(&meta), policy);
    };
    let held = !client.stream;
    let (first, pieces) = match begin(&up, &meta, client.request, session, policy, held).await {
        Ok(begun) => begun,
        Err(e) => return with_policy(provider_error(&meta, &e), policy),
    };
    // A stream's header can say where its calls came from when the reply begins with
    // them (no prose first); its finish chunk always does.
    let repaired = match &first {
        Piece::Repair(p) if client.stream => Some(p.header()),
        _ => None,
    };
    let pieces = futures::stream::once(std::future::ready(first)).chain(pieces);
    let response = if client.stream {
        let response = streamed(pieces, meta, client.include_usage, guard);
        with_repair(response, repaired.as_deref())
    } else {
        whole(pieces, &meta, &guard).await
    };
    let overhead = clock.overhead();
    app.metrics.overhead(overhead);
    with_policy(with_overhead(response, overhead), policy)
}

/// The client's headers that go upstream with every request made for it: the session
/// headers and the `forward` ones (lower case, as [`crate::router`] settled them), each
/// as the client sent it; a value that is not text is left out.
fn forwarded(headers: &HeaderMap, forward: &[String]) -> Vec<(String, String)> {
    let names = SESSION_HEADERS
        .iter()
        .copied()
        .chain(forward.iter().map(String::as_str));
    let mut out: Vec<(String, String)> = Vec::new();
    for name in names {
        if out.iter().any(|(n, _)| n == name) {
            continue;
        }
        for value in headers.get_all(name) {
            if let Ok(value) = value.to_str() {
                out.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    out
}

/// The answer when every replica is full: 429 with `Retry-After`, as llama-swap's
/// concurrency limits answer.
fn full(meta: &Meta) -> Response {
    tracing::warn!(id = %meta.id, model = %meta.model, status = 429,
        "serve: every replica is at --max-in-flight; the client is asked to retry");
    let message = "every upstream is at its concurrency limit; retry shortly";
    let body = json!({"error": {"message": message, "type": "rate_limit_error", "param": null, "code": 429}});
    let mut response = (StatusCode::TOO_MANY_REQUESTS, axum::Json(body)).into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from_static(RETRY_AFTER_SECS),
    );
    response
}

/// `response` with what serve added to its latency (`clock.rs`), in milliseconds.
fn with_overhead(mut response: Response, added: std::time::Duration) -> Response {
    let ms = format!("{:.3}", added.as_secs_f64() * 1000.0);
    if let Ok(value) = HeaderValue::from_str(&ms) {
        response.headers_mut().insert(OVERHEAD_HEADER, value);
    }
    response
}

/// The reply gathered whole, marked when its calls came from text.
async fn whole(
    pieces: impl futures::Stream<Item = Piece>,
    meta: &Meta,
    guard: &InFlight,
) -> Response {
    let all: Vec<Piece> = pieces.collect().await;
    all.iter().for_each(|p| guard.observe(p));
    // The last mark is the reply's, as in the body (a nudge turn's calls can follow the
    // mark of the nudge).
    let repaired = all.iter().rev().find_map(|p| match p {
        Piece::Repair(p) => Some(p.header()),
        _ => None,
    });
    match wire_out::completion(meta, all) {
        Ok(body) => with_repair(axum::Json(body).into_response(), repaired.as_deref()),
        Err(e) => provider_error(meta, &e),
    }
}

/// `response` with the `x-ollm-repair` header, when there is one to give.
fn with_repair(mut response: Response, repaired: Option<&str>) -> Response {
    if let Some(value) = repaired.and_then(|v| HeaderValue::from_str(v).ok()) {
        response.headers_mut().insert(REPAIR_HEADER, value);
    }
    response
}

/// `response` with the policy it was answered under (`x-ollm-repair-policy`).
fn with_policy(mut response: Response, policy: Repair) -> Response {
    response
        .headers_mut()
        .insert(POLICY_HEADER, HeaderValue::from_static(policy.as_str()));
    response
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
        guard.observe(&piece);
        if let Piece::Error(e) = &piece {
            log_error(&meta, wire_out::error_status(e), e, true);
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
    /// Admits a reply, unless the server is full: with `max_in_flight` per replica, the
    /// server takes that many times its healthy replicas (at least one's worth, so a
    /// pool that is down still answers its 502).
    fn admit(app: &Arc<App>) -> Option<Self> {
        let was = app.metrics.in_flight.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight {
            app: Arc::clone(app),
        };
        let Some(per_replica) = app.options.max_in_flight else {
            return Some(guard);
        };
        let healthy = app.pool.status().iter().filter(|r| r.healthy).count();
        let capacity = per_replica.saturating_mul(healthy.max(1));
        // Dropping the guard takes the count back.
        (usize::try_from(was).unwrap_or(usize::MAX) < capacity).then_some(guard)
    }

    /// Counts what `piece` says: a call sent, calls that came from text.
    fn observe(&self, piece: &Piece) {
        match piece {
            Piece::Call(_) => {
                self.app.metrics.tool_calls.fetch_add(1, Ordering::Relaxed);
            }
            Piece::Repair(p) => self.app.metrics.repair(p),
            _ => {}
        }
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
