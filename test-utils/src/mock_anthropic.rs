//! An in-process HTTP server speaking Anthropic's Messages API, for adapter tests,
//! built from the published API reference.
//!
//! Replies to `POST /v1/messages` are scripted in order with the OpenAI mock's
//! [`Reply`] and [`SseScript`] (parts, delays, byte splitting, stalls, early EOF), written
//! with the [`MessagesEvents`] builder methods: `message_start`, `content_block_start` /
//! `delta` / `stop` (text, `tool_use` with `input_json_delta`, thinking with
//! `signature_delta`), `message_delta` with a stop reason and usage, `message_stop`,
//! `ping` and `error`. HTTP errors have Anthropic's body
//! (`{"type": "error", "error": {"type", "message"}}`, [`api_error`]).
//! `POST /v1/messages/count_tokens` answers `{"input_tokens"}` (one token per word of
//! every text the model reads, see [`mock_input_tokens`]), or 404 when switched off;
//! `GET /v1/models` lists the models in Anthropic's shape.
//!
//! Every request is recorded and validated as the API would refuse it
//! ([`validate_messages_body`]): the `anthropic-version` header present, the key in
//! `x-api-key` when one is required, `model` and a positive `max_tokens` (not for a
//! count), `stream: true`, no field the API does not know, `system` a string or text
//! blocks, roles only `user` and `assistant`, alternating and starting with `user`,
//! content a string or blocks of the kinds each role may send, images as base64
//! sources of a supported type, each `tool_use` answered by a `tool_result` in the very
//! next message (results first in it) and each result answering a call of the message
//! before, tools with a name and an object `input_schema`, and a known `tool_choice`.
//! A request that breaks a rule is answered 400 `invalid_request_error` and listed by
//! [`MockAnthropic::violations`].

use std::collections::{HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::Notify;

pub use crate::mock_openai::{Reply, SseScript};

/// The top-level fields of a Messages request the API knows (it refuses others).
const KNOWN_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "system",
    "stream",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "tools",
    "tool_choice",
    "thinking",
    "metadata",
    "service_tier",
];

/// The image types the API accepts.
const IMAGE_TYPES: &[&str] = &["image/jpeg", "image/png", "image/gif", "image/webp"];

/// An HTTP error in Anthropic's shape, for example `api_error(529, "overloaded_error",
/// "Overloaded")`.
pub fn api_error(status: u16, kind: &str, message: &str) -> Reply {
    Reply::Http {
        status,
        body: json!({"type": "error", "error": {"type": kind, "message": message}}),
        retry_after: None,
    }
}

/// The Messages API's streamed events, as builder methods of an [`SseScript`]. Each is
/// written as the API writes it: `event: <type>` and its JSON data.
pub trait MessagesEvents: Sized {
    /// One event: `event: <data.type>` and `data`.
    fn event(self, data: Value) -> Self;

    /// `message_start`, with `input` tokens read.
    fn message_start(self, input: u32) -> Self {
        self.event(json!({"type": "message_start", "message": {
            "id": "msg_mock", "type": "message", "role": "assistant", "content": [],
            "model": "mock-model", "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": input, "output_tokens": 1}}}))
    }

    /// A text block at `index`: its start, one delta per piece, its stop.
    fn text_block(self, index: u32, pieces: &[&str]) -> Self {
        let mut script = self.event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "text", "text": ""}}));
        for piece in pieces {
            script = script.event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "text_delta", "text": piece}}));
        }
        script.block_stop(index)
    }

    /// A thinking block at `index`: its reasoning pieces, then its signature.
    fn thinking_block(self, index: u32, pieces: &[&str]) -> Self {
        let mut script = self.event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "thinking", "thinking": ""}}));
        for piece in pieces {
            script = script.event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "thinking_delta", "thinking": piece}}));
        }
        script
            .event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "signature_delta", "signature": "RXFvQk1vY2s="}}))
            .block_stop(index)
    }

    /// A `tool_use` block at `index` whose arguments come as these `input_json_delta`
    /// fragments.
    fn tool_block(self, index: u32, id: &str, name: &str, fragments: &[&str]) -> Self {
        let mut script = self.event(json!({"type": "content_block_start", "index": index,
            "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}));
        for fragment in fragments {
            script = script.event(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": fragment}}));
        }
        script.block_stop(index)
    }

    /// `content_block_stop`.
    fn block_stop(self, index: u32) -> Self {
        self.event(json!({"type": "content_block_stop", "index": index}))
    }

    /// `message_delta` with a stop reason and the output tokens.
    fn message_delta(self, stop_reason: &str, output: u32) -> Self {
        self.event(json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": output}}))
    }

    /// `message_stop`.
    fn message_stop(self) -> Self {
        self.event(json!({"type": "message_stop"}))
    }

    /// `ping`.
    fn ping(self) -> Self {
        self.event(json!({"type": "ping"}))
    }

    /// An `error` event of this `type` (`overloaded_error`, `api_error`, ...).
    fn api_error_event(self, kind: &str, message: &str) -> Self {
        self.event(json!({"type": "error", "error": {"type": kind, "message": message}}))
    }
}

impl MessagesEvents for SseScript {
    fn event(self, data: Value) -> Self {
        let name = data["type"].as_str().unwrap_or("message").to_owned();
        self.raw(format!("event: {name}\ndata: {data}\n\n"))
    }
}

/// The mock's count of a request's input: one token per whitespace-separated word of
/// the system prompt, the texts, tool results, tool calls' names and tool definitions.
pub fn mock_input_tokens(body: &Value) -> usize {
    fn words(v: &Value) -> usize {
        match v {
            Value::String(s) => s.split_whitespace().count(),
            Value::Array(items) => items.iter().map(words).sum(),
            Value::Object(map) => map
                .iter()
                .filter(|(k, _)| !matches!(k.as_str(), "type" | "id" | "tool_use_id" | "source"))
                .map(|(_, v)| words(v))
                .sum(),
            _ => 0,
        }
    }
    ["system", "messages", "tools"]
        .iter()
        .filter_map(|k| body.get(*k))
        .map(words)
        .sum()
}

#[derive(Default)]
struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Value>>,
    count_requests: Mutex<Vec<Value>>,
    /// The `x-api-key` of each request (chat and count), `None` where it had none.
    keys: Mutex<Vec<Option<String>>>,
    /// The headers of each `/v1/messages` request, as (lower-case name, value).
    request_headers: Mutex<Vec<Vec<(String, String)>>>,
    violations: Mutex<Vec<String>>,
    models: Mutex<Vec<String>>,
    required_key: Mutex<Option<String>>,
    no_count_tokens: Mutex<bool>,
    bodies_ended: Mutex<usize>,
    body_ended: Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A running mock server; it stops when dropped.
pub struct MockAnthropic {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockAnthropic {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockAnthropic {
    /// Starts a server on a free loopback port with one model, `mock-model`.
    pub async fn start() -> anyhow::Result<Self> {
        let shared = Arc::new(Shared::default());
        lock(&shared.models).push("mock-model".into());
        let app = Router::new()
            .route("/v1/messages", post(messages))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/models", get(models))
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(MockAnthropic { addr, shared, task })
    }

    /// The server root, `http://127.0.0.1:PORT` (the API is under `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues a reply for the next `/v1/messages` request (unscripted ones get a 500).
    pub fn push_reply(&self, reply: Reply) {
        lock(&self.shared.replies).push_back(reply);
    }

    /// Refuses every request whose `x-api-key` is not `key` (401 `authentication_error`).
    pub fn require_key(&self, key: &str) {
        *lock(&self.shared.required_key) = Some(key.to_owned());
    }

    /// Answers `/v1/messages/count_tokens` with 404, as a server without it does.
    pub fn without_count_tokens(&self) {
        *lock(&self.shared.no_count_tokens) = true;
    }

    /// Replaces the model list.
    pub fn set_models(&self, ids: &[&str]) {
        *lock(&self.shared.models) = ids.iter().map(|s| (*s).to_owned()).collect();
    }

    /// The `/v1/messages` bodies received, in order.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.shared.requests).clone()
    }

    /// The `/v1/messages/count_tokens` bodies received, in order.
    pub fn count_requests(&self) -> Vec<Value> {
        lock(&self.shared.count_requests).clone()
    }

    /// The `x-api-key` of each request received (chat and count), in order.
    pub fn keys(&self) -> Vec<Option<String>> {
        lock(&self.shared.keys).clone()
    }

    /// The headers of the `/v1/messages` requests received, in order, as (lower-case
    /// name, value).
    pub fn request_headers(&self) -> Vec<Vec<(String, String)>> {
        lock(&self.shared.request_headers).clone()
    }

    /// The rule violations found (see the module docs).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared.violations).clone()
    }

    /// Waits until `n` streamed bodies have ended (sent in full, or dropped because the
    /// client went away).
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

/// Checks a request body against the rules of the module docs; `counting` is a
/// `count_tokens` body (no `max_tokens` or `stream`).
pub fn validate_messages_body(body: &Value, counting: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(map) = body.as_object() else {
        return vec!["the body is not a JSON object".into()];
    };
    for key in map.keys() {
        let known = KNOWN_FIELDS.contains(&key.as_str());
        if !known || (counting && matches!(key.as_str(), "max_tokens" | "stream")) {
            problems.push(format!("{key}: Extra inputs are not permitted"));
        }
    }
    if body.get("model").and_then(Value::as_str).is_none() {
        problems.push("model: Field required".into());
    }
    if !counting {
        let cap = body.get("max_tokens").and_then(Value::as_u64);
        if cap.is_none_or(|n| n == 0) {
            problems.push("max_tokens: a positive integer is required".into());
        }
        if body.get("stream") != Some(&Value::Bool(true)) {
            problems.push("stream: the mock serves streamed replies only".into());
        }
    }
    match body.get("system") {
        None | Some(Value::String(_)) => {}
        Some(Value::Array(blocks)) if blocks.iter().all(|b| b["type"] == "text") => {}
        Some(other) => problems.push(format!("system: {} is not valid", short(other))),
    }
    problems.extend(message_problems(body.get("messages")));
    problems.extend(tool_problems(body));
    problems
}

/// The rules on `messages`: roles, alternation, blocks, and calls answered in order.
fn message_problems(messages: Option<&Value>) -> Vec<String> {
    let Some(Value::Array(messages)) = messages else {
        return vec!["messages: Field required (an array)".into()];
    };
    let mut problems = Vec::new();
    if messages.first().is_some_and(|m| m["role"] != "user") {
        problems.push("messages.0: the first message must use the user role".into());
    }
    let mut calls = Calls::default();
    let mut previous = "";
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if !matches!(role, "user" | "assistant") {
            problems.push(format!("messages.{i}: unexpected role {role:?}"));
        }
        if role == previous {
            problems.push(format!("messages.{i}: roles must alternate ({role} twice)"));
        }
        previous = role;
        let blocks = match &m["content"] {
            Value::String(_) => Vec::new(),
            Value::Array(blocks) if !blocks.is_empty() => blocks.clone(),
            other => {
                let other = short(other);
                problems.push(format!("messages.{i}.content: {other} is not valid"));
                Vec::new()
            }
        };
        problems.extend(calls.message(i, role, &blocks));
    }
    problems
}

/// The tool calls of a conversation, as its messages are read in order.
#[derive(Default)]
struct Calls {
    /// Calls of the previous assistant message still waiting for their results.
    open: HashSet<String>,
    /// Every call id so far.
    seen: HashSet<String>,
}

impl Calls {
    /// The problems of message `i`'s blocks: kinds its role may not send, results out of
    /// place or answering nothing, calls left unanswered, ids reused.
    fn message(&mut self, i: usize, role: &str, blocks: &[Value]) -> Vec<String> {
        let mut problems = Vec::new();
        let mut answered = HashSet::new();
        let mut results_done = false;
        for (j, b) in blocks.iter().enumerate() {
            let kind = b["type"].as_str().unwrap_or("");
            let at = format!("messages.{i}.content.{j}");
            match (role, kind) {
                (_, "text") if b["text"].is_string() => results_done = true,
                ("user", "image") => {
                    results_done = true;
                    problems.extend(image_problems(&at, &b["source"]));
                }
                ("user", "tool_result") => {
                    let id = b["tool_use_id"].as_str().unwrap_or("");
                    if results_done {
                        problems.push(format!("{at}: tool_result blocks must come first"));
                    }
                    if !self.open.contains(id) {
                        problems.push(format!(
                            "{at}: tool_result {id:?} answers no call of the previous message"
                        ));
                    }
                    answered.insert(id.to_owned());
                }
                ("assistant", "tool_use") => problems.extend(self.call(&at, b)),
                ("assistant", "thinking" | "redacted_thinking") => {}
                _ => problems.push(format!("{at}: a {role} message cannot hold {kind:?}")),
            }
        }
        if role == "user" {
            let mut missing: Vec<&String> = self.open.difference(&answered).collect();
            missing.sort();
            if !missing.is_empty() {
                problems.push(format!(
                    "messages.{i}: tool_use ids were found without tool_result blocks \
                     immediately after: {missing:?}"
                ));
            }
            self.open.clear();
        } else {
            self.open = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .filter_map(|b| b["id"].as_str().map(str::to_owned))
                .collect();
        }
        problems
    }

    /// The problems of one `tool_use` block.
    fn call(&mut self, at: &str, block: &Value) -> Vec<String> {
        let mut problems = Vec::new();
        let id = block["id"].as_str().unwrap_or("").to_owned();
        if id.is_empty() || !self.seen.insert(id) {
            problems.push(format!("{at}: tool_use ids must be unique and non-empty"));
        }
        if !block["input"].is_object() || !block["name"].is_string() {
            problems.push(format!("{at}: tool_use needs a name and an object input"));
        }
        problems
    }
}

/// An image source: base64 data of a supported media type.
fn image_problems(at: &str, source: &Value) -> Vec<String> {
    let media = source["media_type"].as_str().unwrap_or("");
    let ok = source["type"] == "base64"
        && IMAGE_TYPES.contains(&media)
        && source["data"]
            .as_str()
            .is_some_and(crate::mock_ollama::is_base64);
    match ok {
        true => Vec::new(),
        false => vec![format!("{at}: image source {} is not valid", short(source))],
    }
}

/// The rules on `tools` and `tool_choice`.
fn tool_problems(body: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        if !t["name"].is_string() || !t["input_schema"].is_object() {
            problems.push(format!(
                "tools.{i}: a tool needs a name and an input_schema object"
            ));
        }
    }
    if let Some(choice) = body.get("tool_choice") {
        let ok = match choice["type"].as_str() {
            Some("auto" | "any" | "none") => true,
            Some("tool") => choice["name"].is_string(),
            _ => false,
        };
        if !ok {
            problems.push(format!("tool_choice: {} is not valid", short(choice)));
        }
    }
    problems
}

/// The first 60 characters of `v` as JSON (an image is megabytes).
fn short(v: &Value) -> String {
    v.to_string().chars().take(60).collect()
}

fn error_response(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, axum::Json(body)).into_response()
}

/// The header checks every endpoint makes; `Some` refusal when one fails.
fn check_headers(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let key = headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    lock(&shared.keys).push(key.clone());
    if headers.get("anthropic-version").is_none() {
        let problem = "anthropic-version: header is required";
        lock(&shared.violations).push(problem.into());
        return Some(error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            problem,
        ));
    }
    let required = lock(&shared.required_key).clone();
    match required {
        Some(want) if key.as_deref() != Some(want.as_str()) => Some(error_response(
            StatusCode::UNAUTHORIZED,
            "authentication_error",
            "invalid x-api-key",
        )),
        _ => None,
    }
}

/// Parses and validates a body; what is wrong with it (the text of a 400) when it
/// breaks a rule.
fn checked(shared: &Shared, body: &Bytes, counting: bool) -> Result<Value, String> {
    let body: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let problems = validate_messages_body(&body, counting);
    match counting {
        true => lock(&shared.count_requests).push(body.clone()),
        false => lock(&shared.requests).push(body.clone()),
    }
    if problems.is_empty() {
        return Ok(body);
    }
    let text = problems.join("; ");
    lock(&shared.violations).extend(problems);
    Err(text)
}

fn bad_request(text: &str) -> Response {
    error_response(StatusCode::BAD_REQUEST, "invalid_request_error", text)
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let seen = headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap_or("").to_owned()))
        .collect();
    lock(&shared.request_headers).push(seen);
    if let Some(refusal) = check_headers(&shared, &headers) {
        return refusal;
    }
    if let Err(text) = checked(&shared, &body, false) {
        return bad_request(&text);
    }
    let Some(reply) = lock(&shared.replies).pop_front() else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "api_error",
            "no scripted reply left",
        );
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
        Reply::Sse(script) => {
            let mut response = Response::new(script.into_body(EndGuard(shared)));
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            );
            response
        }
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

async fn count_tokens(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if *lock(&shared.no_count_tokens) {
        return error_response(StatusCode::NOT_FOUND, "not_found_error", "Not Found");
    }
    if let Some(refusal) = check_headers(&shared, &headers) {
        return refusal;
    }
    match checked(&shared, &body, true) {
        Ok(body) => axum::Json(json!({"input_tokens": mock_input_tokens(&body)})).into_response(),
        Err(text) => bad_request(&text),
    }
}

async fn models(State(shared): State<Arc<Shared>>) -> Response {
    let data: Vec<Value> = lock(&shared.models)
        .iter()
        .map(|id| {
            json!({"type": "model", "id": id, "display_name": id,
                         "created_at": "2025-02-19T00:00:00Z"})
        })
        .collect();
    let first = data.first().map(|m| m["id"].clone());
    let last = data.last().map(|m| m["id"].clone());
    axum::Json(json!({"data": data, "has_more": false, "first_id": first, "last_id": last}))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: Value, counting: bool, expected: &[&str]) {
        let got = validate_messages_body(&body, counting);
        let matches =
            got.len() == expected.len() && got.iter().zip(expected).all(|(g, e)| g.contains(e));
        assert!(matches, "{body:#}\n got: {got:#?}\n want: {expected:?}");
    }

    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "f", "input": {}})
    }
    fn result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": "ok"})
    }

    #[test]
    fn the_validator_follows_the_reference() {
        let ok = json!({"model": "m", "max_tokens": 5, "stream": true, "system": "s",
        "messages": [
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": [call("a"), call("b")]},
            {"role": "user", "content": [result("a"), result("b"),
                {"type": "text", "text": "go on"}]},
        ]});
        check(ok, false, &[]);
        check(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}], "seed": 1}),
            false,
            &["seed: Extra inputs", "max_tokens", "stream"],
        );
        check(
            json!({"model": "m", "max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}),
            true,
            &["max_tokens: Extra inputs"],
        );
        check(
            json!({"model": "m", "messages": [
                {"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                {"role": "system", "content": "c"}]}),
            true,
            &["roles must alternate", "unexpected role"],
        );
        check(
            json!({"model": "m", "messages": [
                {"role": "user", "content": "a"},
                {"role": "assistant", "content": [call("a")]},
                {"role": "user", "content": [{"type": "text", "text": "x"}, result("z")]}]}),
            true,
            &["must come first", "answers no call", "without tool_result"],
        );
        check(
            json!({"model": "m", "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/bmp",
                    "data": "QUJD"}}]}]}),
            true,
            &["image source"],
        );
        check(
            json!({"model": "m", "tools": [{"name": "f"}], "tool_choice": {"type": "required"},
                "messages": [{"role": "assistant", "content": "x"}]}),
            true,
            &["first message", "input_schema", "tool_choice"],
        );
    }

    #[test]
    fn the_count_is_one_token_a_word_of_what_the_model_reads() {
        let body = json!({"model": "m", "system": "be brief", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "one two three"}]}],
            "tools": [{"name": "f", "description": "does it", "input_schema": {}}]});
        assert_eq!(
            mock_input_tokens(&body),
            2 + 3 + 1 + 2 + 1 /* "user" */
        );
    }
}
