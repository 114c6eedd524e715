//! An in-process HTTP server speaking the OpenAI-compatible API, for adapter tests.
//!
//! Replies to `POST /v1/chat/completions` are scripted in order with [`Reply`]: SSE bodies
//! sent in parts with per-part delays and optional byte splitting, error events, early EOF
//! (a script without `[DONE]`), stalls (a body that never ends), endless replies (a model
//! that never stops), and HTTP errors with `Retry-After`. `GET /v1/models` and
//! `POST /tokenize` (llama.cpp's or vLLM's dialect, or absent) answer from settings. Every chat request is recorded and validated the way real
//! servers (and the OpenAI API) would refuse it: streamed, tool-call arguments as JSON
//! strings holding objects, each tool message answering a call made earlier in the
//! conversation, and content as a string, `null` or an array of `text` and `image_url`
//! parts whose URL is `http(s)` or a base64 `data:image/...` URL. A request that breaks a rule is answered 400 and the problem is listed by
//! [`MockOpenAi::violations`].

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::Notify;

/// One scripted reply to a chat request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A 200 SSE body.
    Sse(SseScript),
    /// An error status with a JSON body.
    Http {
        /// The status.
        status: u16,
        /// The body.
        body: Value,
        /// A `Retry-After` header value.
        retry_after: Option<String>,
    },
}

impl Reply {
    /// An empty SSE script; add parts with its builder methods.
    pub fn sse() -> SseScript {
        SseScript::default()
    }

    /// An HTTP error with an OpenAI-style `{"error": {"message", "type"}}` body.
    pub fn http_error(status: u16, message: &str) -> Reply {
        Reply::Http {
            status,
            body: json!({"error": {"message": message, "type": "mock_error", "code": status}}),
            retry_after: None,
        }
    }

    /// The same error reply with a `Retry-After` header.
    pub fn with_retry_after(self, value: &str) -> Reply {
        match self {
            Reply::Http { status, body, .. } => Reply::Http {
                status,
                body,
                retry_after: Some(value.to_owned()),
            },
            other => other,
        }
    }
}

/// An SSE body: parts sent in order, each after its delay.
#[derive(Debug, Clone, Default)]
pub struct SseScript {
    parts: Vec<(Duration, Bytes)>,
    split: Option<usize>,
    stall: bool,
    forever: Option<Duration>,
    pending_delay: Duration,
    gate: Option<Arc<tokio::sync::Notify>>,
}

impl SseScript {
    /// A `data: <json>` event.
    pub fn data(self, chunk: Value) -> Self {
        self.raw(format!("data: {chunk}\n\n"))
    }

    /// A chunk whose delta has this content.
    pub fn content(self, text: &str) -> Self {
        self.data(json!({"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}))
    }

    /// A chunk with this finish reason.
    pub fn finish(self, reason: &str) -> Self {
        self.data(json!({"object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
    }

    /// The usage chunk.
    pub fn usage(self, prompt: u32, completion: u32) -> Self {
        self.data(json!({"object": "chat.completion.chunk", "choices": [],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion}}))
    }

    /// `data: [DONE]`.
    pub fn done(self) -> Self {
        self.raw("data: [DONE]\n\n")
    }

    /// An `event: error` event with an OpenAI-style error.
    pub fn error_event(self, message: &str) -> Self {
        self.raw(format!(
            "event: error\ndata: {}\n\n",
            json!({"error": {"message": message, "type": "server_error"}})
        ))
    }

    /// A keep-alive comment.
    pub fn keep_alive(self) -> Self {
        self.raw(": keep-alive\n\n")
    }

    /// Raw bytes, exactly as given (a whole recorded body, or a malformed one).
    pub fn raw(mut self, bytes: impl Into<Bytes>) -> Self {
        let delay = std::mem::take(&mut self.pending_delay);
        self.parts.push((delay, bytes.into()));
        self
    }

    /// Waits this long before the next part.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.pending_delay += delay;
        self
    }

    /// Sends every part in pieces of at most `n` bytes (cut anywhere, even mid-character).
    pub fn split_every(mut self, n: usize) -> Self {
        self.split = Some(n.max(1));
        self
    }

    /// Sends nothing until `gate` is notified (`notify_one`, which a later wait also
    /// sees): a reply held open for exactly as long as a test needs, with no timing.
    pub fn hold(mut self, gate: Arc<tokio::sync::Notify>) -> Self {
        self.gate = Some(gate);
        self
    }

    /// After the last part, keeps the connection open without sending anything.
    pub fn stall(mut self) -> Self {
        self.stall = true;
        self
    }

    /// After the last part, streams content chunks `0 `, `1 `, `2 `, ... one every
    /// `every`, until the client goes away: a model that never stops (each chunk differs,
    /// so no repetition guard ends it early).
    pub fn forever(mut self, every: Duration) -> Self {
        self.forever = Some(every);
        self
    }

    /// The finished reply.
    pub fn reply(self) -> Reply {
        Reply::Sse(self)
    }
}

/// Which `/tokenize` the mock offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Tokenizer {
    /// llama.cpp: `{"content"}` to `{"tokens"}`; other bodies get `{"tokens": []}`.
    #[default]
    LlamaCpp,
    /// vLLM: `{"model", "prompt"}` to `{"count", "tokens"}`; other bodies get 400.
    Vllm,
    /// No endpoint (404), as Ollama and LM Studio.
    Absent,
}

/// The count the mock tokenizers give: one token per whitespace-separated word.
pub fn mock_token_count(text: &str) -> usize {
    text.split_whitespace().count()
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    /// The headers of each chat request, in order, as (lower-case name, value).
    request_headers: Mutex<Vec<Vec<(String, String)>>>,
    requests: Mutex<Vec<Value>>,
    tokenize_requests: Mutex<Vec<Value>>,
    violations: Mutex<Vec<String>>,
    models: Mutex<Vec<String>>,
    /// llama.cpp's `GET /props`; `None` (the default) answers 404 like vLLM.
    props: Mutex<Option<Value>>,
    tokenizer: Mutex<Tokenizer>,
    /// Chat bodies that ended, completed or dropped (the client went away).
    bodies_ended: Mutex<usize>,
    /// How a request with `tools` is refused, when the server is started without tools.
    refuse_tools: Mutex<Option<ToolsOff>>,
    body_ended: Notify,
    /// Signalled on every chat request received.
    request_seen: Notify,
    /// llama.cpp's `GET /health` answers 503 "Loading model" while this is set.
    loading: std::sync::atomic::AtomicBool,
    /// vLLM's own rules, applied before the script ([`MockOpenAi::behave_as_vllm`]).
    vllm: Mutex<Option<crate::mock_vllm::VllmFlags>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A server started without native tool support: a request with `tools` is refused the
/// way that server refuses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsOff {
    /// llama-server without `--jinja`: 500 "tools param requires --jinja flag".
    LlamaWithoutJinja,
    /// vLLM without `--enable-auto-tool-choice --tool-call-parser`: 400 with its
    /// top-level `{"object": "error", ...}` body.
    VllmWithoutAutoToolChoice,
}

/// A running mock server; it stops when dropped.
pub struct MockOpenAi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockOpenAi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockOpenAi {
    /// Starts a server on a free loopback port with one model, `mock-model`.
    pub async fn start() -> anyhow::Result<Self> {
        let shared = Arc::new(Shared::default());
        lock(&shared.models).push("mock-model".into());
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .route("/v1/models", get(models))
            .route("/tokenize", post(tokenize))
            .route("/props", get(props))
            .route("/health", get(health))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockOpenAi { addr, shared, task })
    }

    /// The API base URL, `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Queues a reply for the next chat request (unscripted requests get a 500).
    pub fn push_reply(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Replaces the model list.
    pub fn set_models(&self, ids: &[&str]) {
        *lock(&self.shared.models) = ids.iter().map(|s| (*s).to_owned()).collect();
    }

    /// Serves `props` at `GET /props`, as llama.cpp's server does (the window per slot in
    /// `default_generation_settings.n_ctx`, `chat_template_caps`, `modalities`).
    pub fn set_props(&self, props: Value) {
        *lock(&self.shared.props) = Some(props);
    }

    /// Refuses requests with `tools` as the server started without tool support does;
    /// other requests are answered from the script as usual.
    pub fn refuse_tools(&self, how: ToolsOff) {
        *lock(&self.shared.refuse_tools) = Some(how);
    }

    /// Makes `GET /health` answer as llama.cpp does while its model loads (503) or once
    /// it is ready (200 `{"status": "ok"}`, the default).
    pub fn set_loading(&self, loading: bool) {
        self.shared
            .loading
            .store(loading, std::sync::atomic::Ordering::Relaxed);
    }

    /// Refuses what a vLLM server started with `flags` refuses, in its words and error
    /// shape (see [`crate::mock_vllm`]); other requests get the script as usual. Also
    /// switches the tokenizer to vLLM's and lists models with `flags.max_model_len`.
    pub fn behave_as_vllm(&self, flags: crate::mock_vllm::VllmFlags) {
        *lock(&self.shared.tokenizer) = Tokenizer::Vllm;
        *lock(&self.shared.vllm) = Some(flags);
    }

    /// Chooses the tokenizer dialect.
    pub fn set_tokenizer(&self, tokenizer: Tokenizer) {
        *lock(&self.shared.tokenizer) = tokenizer;
    }

    /// The chat request bodies received, in order.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared.requests).clone()
    }

    /// The headers of the chat requests received, in order, as (lower-case name, value).
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        lock(&self.shared.request_headers).clone()
    }

    /// The `/tokenize` bodies received, in order.
    pub fn tokenize_requests(&self) -> Vec<Value> {
        lock(&self.shared.tokenize_requests).clone()
    }

    /// The rule violations found in chat requests (see the module docs).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared.violations).clone()
    }

    /// Waits until `n` chat requests have been received (answered or not yet).
    pub async fn wait_requests(&self, n: usize) {
        loop {
            let notified = self.shared.request_seen.notified();
            if lock(&self.shared.requests).len() >= n {
                return;
            }
            notified.await;
        }
    }

    /// Waits until `n` chat bodies have ended (sent in full, or dropped because the client
    /// went away).
    pub async fn wait_bodies_ended(&self, n: usize) {
        loop {
            let notified = self.shared.body_ended.notified();
            if *lock(&self.shared.bodies_ended) >= n {
                return;
            }
            notified.await;
        }
    }
}

/// Checks a chat body against the rules of the module docs.
pub fn validate_chat_body(body: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    if body.get("stream") != Some(&Value::Bool(true)) {
        problems.push("`stream` is not true".to_owned());
    }
    if body.get("model").and_then(Value::as_str).is_none() {
        problems.push("`model` is missing".to_owned());
    }
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        problems.push("`messages` is not an array".to_owned());
        return problems;
    };
    let mut calls = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if !matches!(role, "system" | "user" | "assistant" | "tool") {
            problems.push(format!("message {i}: unknown role {role:?}"));
        }
        for call in m
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(id) = call.get("id").and_then(Value::as_str) {
                calls.insert(id.to_owned());
            } else {
                problems.push(format!("message {i}: a tool call without an id"));
            }
            match call.pointer("/function/arguments") {
                Some(Value::String(s)) => {
                    if !matches!(serde_json::from_str::<Value>(s), Ok(Value::Object(_))) {
                        problems.push(format!("message {i}: arguments {s:?} are not an object"));
                    }
                }
                other => problems.push(format!(
                    "message {i}: arguments must be a JSON string, got {other:?}"
                )),
            }
        }
        problems.extend(content_problems(i, m.get("content")));
        if role == "tool" {
            match m.get("tool_call_id").and_then(Value::as_str) {
                Some(id) if calls.contains(id) => {}
                Some(id) => problems.push(format!(
                    "message {i}: tool result for {id:?} answers no earlier call"
                )),
                None => problems.push(format!("message {i}: tool message without tool_call_id")),
            }
        }
    }
    problems
}

/// What is wrong with a message's `content`: a string, `null`, or an array of parts.
fn content_problems(i: usize, content: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(parts)) = content else {
        return match content {
            None | Some(Value::Null | Value::String(_)) => Vec::new(),
            Some(other) => vec![format!(
                "message {i}: content {} is not valid",
                short(other)
            )],
        };
    };
    let mut problems = Vec::new();
    for part in parts {
        let ok = match part.get("type").and_then(Value::as_str) {
            Some("text") => part.get("text").is_some_and(Value::is_string),
            Some("image_url") => part
                .pointer("/image_url/url")
                .and_then(Value::as_str)
                .is_some_and(valid_image_url),
            _ => false,
        };
        if !ok {
            problems.push(format!(
                "message {i}: content part {} is not valid",
                short(part)
            ));
        }
    }
    problems
}

/// The first 60 characters of `v` as JSON (an image is megabytes).
fn short(v: &Value) -> String {
    v.to_string().chars().take(60).collect()
}

/// An `http(s)` URL, or `data:image/<type>;base64,<base64>`.
fn valid_image_url(url: &str) -> bool {
    if url.starts_with("http://") || url.starts_with("https://") {
        return true;
    }
    let Some((head, data)) = url.split_once(',') else {
        return false;
    };
    head.strip_prefix("data:image/")
        .and_then(|h| h.strip_suffix(";base64"))
        .is_some_and(|t| !t.is_empty())
        && crate::mock_ollama::is_base64(data)
}

fn error_response(status: StatusCode, message: &str) -> Response {
    (
        status,
        axum::Json(json!({"error": {"message": message, "type": "invalid_request_error"}})),
    )
        .into_response()
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let pairs = headers
        .iter()
        .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
        .collect();
    lock(&shared.request_headers).push(pairs);
    let body: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, &e.to_string()),
    };
    let problems = validate_chat_body(&body);
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    lock(&shared.requests).push(body);
    shared.request_seen.notify_waiters();
    if !problems.is_empty() {
        let text = problems.join("; ");
        lock(&shared.violations).extend(problems);
        return error_response(StatusCode::BAD_REQUEST, &text);
    }
    if let (true, Some(how)) = (has_tools, *lock(&shared.refuse_tools)) {
        return tools_refusal(how);
    }
    let vllm = lock(&shared.vllm).clone();
    if let Some(flags) = vllm {
        let models = lock(&shared.models).clone();
        let last = lock(&shared.requests).last().cloned().unwrap_or_default();
        if let Some((status, body)) = crate::mock_vllm::refusal(&flags, &models, &last) {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST);
            return (status, axum::Json(body)).into_response();
        }
    }
    let Some(reply) = lock(&shared.replies).pop_front() else {
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, "no scripted reply left");
    };
    match reply {
        Reply::Http {
            status,
            body,
            retry_after,
        } => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = (status, axum::Json(body)).into_response();
            if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
                response.headers_mut().insert(header::RETRY_AFTER, value);
            }
            response
        }
        Reply::Sse(script) => sse_response(shared, script),
    }
}

/// The refusal of a request with `tools` by a server started without tool support.
fn tools_refusal(how: ToolsOff) -> Response {
    match how {
        ToolsOff::LlamaWithoutJinja => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"code": 500,
                "message": "tools param requires --jinja flag", "type": "server_error"}})),
        )
            .into_response(),
        ToolsOff::VllmWithoutAutoToolChoice => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({
                "object": "error",
                "message": "\"auto\" tool choice requires --enable-auto-tool-choice and \
                            --tool-call-parser to be set",
                "type": "BadRequestError",
                "param": null,
                "code": 400
            })),
        )
            .into_response(),
    }
}

/// Counts a body as ended when dropped, whether it finished or the client left.
struct EndGuard(Arc<Shared>);

impl Drop for EndGuard {
    fn drop(&mut self) {
        *lock(&self.0.bodies_ended) += 1;
        self.0.body_ended.notify_waiters();
    }
}

fn sse_response(shared: Arc<Shared>, script: SseScript) -> Response {
    let guard = EndGuard(shared);
    let stream = async_stream_body(script, guard);
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    response
}

impl SseScript {
    /// The script as a streamed response body, for other mock servers that play the
    /// same kind of script (the Messages API mock). `guard` is dropped when the body has
    /// ended or the client went away.
    pub fn into_body<G: Send + 'static>(self, guard: G) -> Body {
        Body::from_stream(async_stream_body(self, guard))
    }
}

fn async_stream_body<G: Send + 'static>(
    script: SseScript,
    guard: G,
) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send + 'static {
    let end = match (script.forever, script.stall) {
        (Some(every), _) => End::Forever(every, 0),
        (None, true) => End::Stall,
        (None, false) => End::Close,
    };
    let gate = script.gate.clone();
    let pieces = script.pieces();
    futures::stream::unfold(
        (pieces, guard, end, gate),
        |(mut pieces, guard, end, gate)| async move {
            if let Some(gate) = gate {
                gate.notified().await;
            }
            if let Some((delay, bytes)) = pieces.pop_front() {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                return Some((Ok(bytes), (pieces, guard, end, None)));
            }
            let (bytes, end) = end.next(guard).await?;
            Some((Ok(bytes), (pieces, end.1, end.0, None)))
        },
    )
}

impl SseScript {
    /// The parts as sent: each after its delay, cut into pieces of at most `split` bytes.
    fn pieces(self) -> VecDeque<(Duration, Bytes)> {
        let mut pieces = VecDeque::new();
        for (delay, mut rest) in self.parts {
            let n = self.split.unwrap_or(rest.len()).max(1);
            let mut delay = delay;
            loop {
                let piece = rest.split_to(n.min(rest.len()));
                pieces.push_back((std::mem::take(&mut delay), piece));
                if rest.is_empty() {
                    break;
                }
            }
        }
        pieces
    }
}

impl End {
    /// What follows the last part: the next chunk of an endless reply (and the state
    /// after it), or the end of the body (`None`; a stall never gets there).
    async fn next<G>(self, guard: G) -> Option<(Bytes, (End, G))> {
        match self {
            End::Forever(every, n) => {
                if every.is_zero() {
                    tokio::task::yield_now().await;
                } else {
                    tokio::time::sleep(every).await;
                }
                let chunk = json!({"object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"content": format!("{n} ")}, "finish_reason": null}]});
                let bytes = Bytes::from(format!("data: {chunk}\n\n"));
                Some((bytes, (End::Forever(every, n + 1), guard)))
            }
            End::Stall => {
                futures::future::pending::<()>().await;
                None
            }
            End::Close => {
                drop(guard);
                None
            }
        }
    }
}

/// What a script's body does after its last part.
enum End {
    /// Ends the body.
    Close,
    /// Keeps the connection open, silent.
    Stall,
    /// Streams numbered content chunks every so often (the next number).
    Forever(Duration, u64),
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let vllm = lock(&shared.vllm).clone();
    let data: Vec<Value> = lock(&shared.models)
        .iter()
        .map(|id| match &vllm {
            Some(flags) => crate::mock_vllm::model_entry(flags, id),
            None => json!({"id": id, "object": "model", "owned_by": "mock", "max_model_len": 4096}),
        })
        .collect();
    axum::Json(json!({"object": "list", "data": data})).into_response()
}

async fn health(State(shared): State<Arc<Shared>>) -> Response {
    if shared.loading.load(std::sync::atomic::Ordering::Relaxed) {
        let body = json!({"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}});
        return (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response();
    }
    axum::Json(json!({"status": "ok"})).into_response()
}

async fn props(State(shared): State<Arc<Shared>>) -> Response {
    match lock(&shared.props).clone() {
        Some(props) => axum::Json(props).into_response(),
        None => error_response(StatusCode::NOT_FOUND, "File Not Found"),
    }
}

async fn tokenize(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    lock(&shared.tokenize_requests).push(body.clone());
    let tokenizer = *lock(&shared.tokenizer);
    match tokenizer {
        Tokenizer::Absent => error_response(StatusCode::NOT_FOUND, "File Not Found"),
        Tokenizer::LlamaCpp => {
            let n = body
                .get("content")
                .and_then(Value::as_str)
                .map_or(0, mock_token_count);
            let tokens: Vec<u32> = (0..n as u32).collect();
            axum::Json(json!({"tokens": tokens})).into_response()
        }
        Tokenizer::Vllm => match (
            body.get("model").and_then(Value::as_str),
            body.get("prompt").and_then(Value::as_str),
        ) {
            (Some(_), Some(prompt)) => {
                let flags = lock(&shared.vllm).clone().unwrap_or_default();
                let n = mock_token_count(prompt);
                axum::Json(crate::mock_vllm::tokenize_reply(&flags, n)).into_response()
            }
            _ => error_response(StatusCode::BAD_REQUEST, "1 validation error: prompt"),
        },
    }
}
