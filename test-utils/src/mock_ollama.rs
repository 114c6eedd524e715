//! An in-process mock of Ollama's native API, built from Ollama's `docs/api.md`,
//! `api/types.go` and the server's error texts, on raw tokio TCP so that tests control
//! every byte: scripted NDJSON replies (chunked, like Ollama) with per-chunk delays,
//! byte-split delivery, error lines, HTTP errors with `Retry-After`, stalls, early EOF and
//! aborted connections.
//!
//! Built-in behaviour, used when no reply is scripted for a path:
//! - `POST /api/chat`: 404 `model "<m>" not found, try pulling it first` for unknown
//!   models; 400 `... does not support tools` / `... does not support thinking` when the
//!   model lacks the capability; else a short streamed answer whose `prompt_eval_count`
//!   comes from [`mock_token_count`], cut at the window the way Ollama silently
//!   truncates: the request's `options.num_ctx`, else the model's `num_ctx` parameter
//!   ([`MockModel::num_ctx`]), else the server's default, [`MOCK_DEFAULT_NUM_CTX`]. Like Ollama's prompt cache, when the previous prompt to the same model
//!   (same tools) is a prefix of this one, only the new messages are counted.
//! - `POST /api/show`, `GET /api/tags`, `GET /api/ps`, `GET /api/version`,
//!   `POST /api/pull` (streamed progress, the model is added on success),
//!   `DELETE /api/delete`.
//!
//! The recorder keeps every request and checks every `/api/chat` body the way Ollama's
//! decoder and templates would: tool-call arguments must be JSON objects (a string is a
//! 400 in Ollama), every `tool` message must answer an earlier call (by id when it has
//! one, else by name), and the calls of an assistant message must each be answered
//! exactly once by the `tool` messages that follow it, before the next other message;
//! `images` must be plain base64 strings (Ollama decodes them as Go `[]byte`, so a `data:`
//! URL is a 400). A failed check is recorded in [`MockOllama::violations`] and
//! answered with 400. Connections the client closes before the reply ended are recorded
//! too ([`MockOllama::wait_closed_early`]).

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// The window the mock runs a model with when neither the request (`options.num_ctx`)
/// nor the model's parameters name one: Ollama's default (`OLLAMA_CONTEXT_LENGTH`,
/// 4096 in recent versions, 2048 before).
pub const MOCK_DEFAULT_NUM_CTX: u32 = 4096;

/// A model the mock has.
#[derive(Debug, Clone, PartialEq)]
pub struct MockModel {
    /// Its name, for example `qwen3:8b`.
    pub name: String,
    /// `completion`, `tools`, `thinking`, `vision`, ...
    pub capabilities: Vec<String>,
    /// Its trained context length (`<family>.context_length` in `model_info`).
    pub context_length: u32,
    /// Its family (also the architecture in `model_info`).
    pub family: String,
    /// Default parameters as `/api/show` lists them.
    pub parameters: String,
    /// Size on disk.
    pub size: u64,
}

impl MockModel {
    /// A completion-only model with a 4096 context.
    pub fn new(name: &str) -> Self {
        MockModel {
            name: name.to_owned(),
            capabilities: vec!["completion".to_owned()],
            context_length: 4096,
            family: "llama".to_owned(),
            parameters: "temperature 0.7".to_owned(),
            size: 1_000_000,
        }
    }

    /// The same model with these capabilities added.
    pub fn with(mut self, capabilities: &[&str]) -> Self {
        self.capabilities
            .extend(capabilities.iter().map(|c| (*c).to_owned()));
        self
    }

    /// The same model with this context length.
    pub fn context(mut self, context_length: u32) -> Self {
        self.context_length = context_length;
        self
    }

    /// The same model with a `num_ctx` among its parameters (a Modelfile's
    /// `PARAMETER num_ctx`): the window the server runs it with when a request names none.
    pub fn num_ctx(mut self, num_ctx: u32) -> Self {
        self.parameters.push_str(&format!("\nnum_ctx {num_ctx}"));
        self
    }

    /// The `num_ctx` among its parameters, if any.
    fn num_ctx_parameter(&self) -> Option<u32> {
        self.parameters.lines().find_map(|line| {
            let rest = line.strip_prefix("num_ctx ")?;
            rest.trim().parse().ok()
        })
    }
}

/// One piece of a scripted body.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Bytes(Vec<u8>),
    Delay(Duration),
}

/// How a scripted body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// The chunked body ends properly.
    Complete,
    /// The connection is closed without ending the chunked body (a crash).
    Abort,
    /// Nothing more is sent and the connection stays open until the client closes it.
    Stall,
}

/// A scripted reply: a status, headers, and a body delivered in parts.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    parts: Vec<Part>,
    ending: Ending,
    streamed: bool,
}

impl Reply {
    /// A 200 NDJSON stream, one line per value, each line sent as its own chunk.
    pub fn ndjson(lines: &[Value]) -> Self {
        Reply::stream_text(
            &lines
                .iter()
                .map(|l| format!("{l}\n"))
                .collect::<Vec<_>>()
                .concat(),
        )
    }

    /// A 200 NDJSON stream of raw text, one chunk per line (lines keep their `\n`).
    pub fn stream_text(text: &str) -> Self {
        Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "application/x-ndjson".into())],
            parts: text
                .split_inclusive('\n')
                .map(|l| Part::Bytes(l.as_bytes().to_vec()))
                .collect(),
            ending: Ending::Complete,
            streamed: true,
        }
    }

    /// A 200 NDJSON stream read from a fixture file.
    pub fn from_file(path: &Path) -> std::io::Result<Self> {
        Ok(Reply::stream_text(&std::fs::read_to_string(path)?))
    }

    /// A 200 JSON reply (not streamed).
    pub fn json(value: &Value) -> Self {
        Reply {
            status: 200,
            headers: vec![("Content-Type".into(), "application/json".into())],
            parts: vec![Part::Bytes(value.to_string().into_bytes())],
            ending: Ending::Complete,
            streamed: false,
        }
    }

    /// An HTTP error with Ollama's `{"error": "..."}` body.
    pub fn error(status: u16, message: &str) -> Self {
        Reply {
            status,
            ..Reply::json(&json!({ "error": message }))
        }
    }

    /// The same reply with a header (for example `Retry-After`).
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The same body re-cut into pieces of `n` bytes (mid-line, mid-character), each sent
    /// as its own chunk. Delays are kept in place.
    pub fn split_every(mut self, n: usize) -> Self {
        let n = n.max(1);
        let mut parts = Vec::new();
        let mut pending = Vec::new();
        let flush = |pending: &mut Vec<u8>, parts: &mut Vec<Part>| {
            parts.extend(pending.chunks(n).map(|c| Part::Bytes(c.to_vec())));
            pending.clear();
        };
        for part in self.parts {
            match part {
                Part::Bytes(b) => pending.extend(b),
                delay @ Part::Delay(_) => {
                    flush(&mut pending, &mut parts);
                    parts.push(delay);
                }
            }
        }
        flush(&mut pending, &mut parts);
        self.parts = parts;
        self
    }

    /// The same reply waiting `delay` before each chunk.
    pub fn delay_each(mut self, delay: Duration) -> Self {
        self.parts = self
            .parts
            .into_iter()
            .flat_map(|p| [Part::Delay(delay), p])
            .collect();
        self
    }

    /// Only the first `n` chunks are sent; then the body ends properly (early EOF).
    pub fn truncate_after(mut self, n: usize) -> Self {
        let mut seen = 0;
        self.parts.retain(|p| match p {
            Part::Bytes(_) => {
                seen += 1;
                seen <= n
            }
            Part::Delay(_) => seen < n,
        });
        self
    }

    /// After its chunks the reply sends nothing more and keeps the connection open.
    pub fn then_stall(mut self) -> Self {
        self.ending = Ending::Stall;
        self
    }

    /// After its chunks the connection is closed without ending the body.
    pub fn then_abort(mut self) -> Self {
        self.ending = Ending::Abort;
        self
    }
}

/// A request the mock received.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// `GET`, `POST`, `DELETE`.
    pub method: String,
    /// The path.
    pub path: String,
    /// The JSON body (`null` when empty or not JSON).
    pub body: Value,
    /// The headers, names in lower case, in the order sent.
    pub headers: Vec<(String, String)>,
}

impl Recorded {
    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Debug, Default)]
struct State {
    models: Vec<MockModel>,
    running: Vec<String>,
    scripts: HashMap<String, VecDeque<Reply>>,
    requests: Vec<Recorded>,
    violations: Vec<String>,
    closed_early: Vec<usize>,
    /// Per model, the last `/api/chat` body answered (the prompt cache).
    cached: HashMap<String, Value>,
}

/// The mock server; it stops when dropped.
#[derive(Debug)]
pub struct MockOllama {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    closed: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockOllama {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl MockOllama {
    /// Starts a mock on a free loopback port with two models: `qwen3:8b` (tools,
    /// thinking, 40960 context) and `gemma:2b` (completion only, 8192 context).
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            models: vec![
                MockModel {
                    family: "qwen3".into(),
                    ..MockModel::new("qwen3:8b")
                        .with(&["tools", "thinking"])
                        .context(40960)
                },
                MockModel {
                    family: "gemma".into(),
                    ..MockModel::new("gemma:2b").context(8192)
                },
            ],
            ..State::default()
        }));
        let closed = Arc::new(Notify::new());
        let task = tokio::spawn(accept_loop(
            listener,
            Arc::clone(&state),
            Arc::clone(&closed),
        ));
        Ok(MockOllama {
            addr,
            state,
            closed,
            task,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `127.0.0.1:<port>`, the `OLLAMA_HOST` form.
    pub fn host_port(&self) -> String {
        self.addr.to_string()
    }

    /// Adds (or replaces) a model.
    pub fn add_model(&self, model: MockModel) {
        let mut s = lock(&self.state);
        s.models.retain(|m| m.name != model.name);
        s.models.push(model);
    }

    /// Marks a model as loaded (listed by `/api/ps`).
    pub fn set_running(&self, name: &str) {
        lock(&self.state).running.push(name.to_owned());
    }

    /// Queues `reply` for the next request to `path` (after the built-in checks of
    /// `/api/chat`: body validity, model, capabilities).
    pub fn script(&self, path: &str, reply: Reply) {
        lock(&self.state)
            .scripts
            .entry(path.to_owned())
            .or_default()
            .push_back(reply);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).requests.clone()
    }

    /// The requests to `path`.
    pub fn requests_to(&self, path: &str) -> Vec<Recorded> {
        lock(&self.state)
            .requests
            .iter()
            .filter(|r| r.path == path)
            .cloned()
            .collect()
    }

    /// What the request checks found wrong (empty when every body was valid).
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state).violations.clone()
    }

    /// The indices (into [`MockOllama::requests`]) of requests whose connection the client
    /// closed before the reply ended.
    pub fn closed_early(&self) -> Vec<usize> {
        lock(&self.state).closed_early.clone()
    }

    /// Waits until the client has closed the connection of request `index` before its
    /// reply ended.
    pub async fn wait_closed_early(&self, index: usize) {
        loop {
            let notified = self.closed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if lock(&self.state).closed_early.contains(&index) {
                return;
            }
            notified.await;
        }
    }
}

/// The mock's tokenizer: `ceil(chars / 3)` over every message's content plus 4 tokens of
/// template per message, plus `ceil(chars / 3)` of the tools' JSON.
pub fn mock_token_count(body: &Value) -> u32 {
    let mut tokens = 0usize;
    for m in body["messages"].as_array().into_iter().flatten() {
        let mut chars = m["content"].as_str().map_or(0, |c| c.chars().count());
        if let Some(calls) = m["tool_calls"].as_array() {
            chars += calls
                .iter()
                .map(|c| c.to_string().chars().count())
                .sum::<usize>();
        }
        tokens += chars.div_ceil(3) + 4;
    }
    if let Some(tools) = body.get("tools") {
        tokens += tools.to_string().chars().count().div_ceil(3);
    }
    u32::try_from(tokens).unwrap_or(u32::MAX)
}

/// Checks a `/api/chat` body the way Ollama would read it.
pub fn validate_chat(body: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(messages) = body["messages"].as_array() else {
        return vec!["`messages` is not an array".into()];
    };
    if body["model"].as_str().is_none_or(str::is_empty) {
        problems.push("`model` is missing".into());
    }
    let mut book = CallBook::default();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if !matches!(role, "system" | "user" | "assistant" | "tool") {
            problems.push(format!("message {i}: unknown role {role:?}"));
        }
        if role != "tool" {
            book.unanswered(i, &mut problems);
        }
        if let Some(list) = m.get("tool_calls") {
            if role != "assistant" {
                problems.push(format!("message {i}: tool_calls on a {role} message"));
            }
            book.record(i, list, &mut problems);
        }
        if role == "tool" {
            book.answer(i, m, &mut problems);
        }
    }
    for tool in body["tools"].as_array().into_iter().flatten() {
        if tool["type"] != "function" || tool["function"]["name"].as_str().is_none() {
            problems.push(format!("tool {tool} is not in the function format"));
        }
    }
    for (i, m) in messages.iter().enumerate() {
        problems.extend(image_problems(i, m.get("images")));
    }
    problems
}

/// The calls a conversation made so far, to match its tool results against.
#[derive(Default)]
struct CallBook {
    /// Every call, as (id, name).
    calls: Vec<(Option<String>, String)>,
    /// The calls of the latest assistant message, with how often each was answered.
    pending: Vec<(Option<String>, String, usize)>,
}

/// Whether a tool result with `id` and `name` answers the call (`cid`, `cname`).
fn answers_call(id: Option<&str>, name: Option<&str>, cid: &Option<String>, cname: &str) -> bool {
    match (id, cid) {
        (Some(id), Some(cid)) => id == cid && name.is_none_or(|n| n == cname),
        _ => name == Some(cname),
    }
}

impl CallBook {
    /// Before message `i`, which is no tool result: every call of the previous assistant
    /// message must have been answered.
    fn unanswered(&mut self, i: usize, problems: &mut Vec<String>) {
        for (id, name, _) in self.pending.drain(..).filter(|(_, _, n)| *n == 0) {
            problems.push(format!(
                "message {i}: the call (id {id:?}, name {name:?}) before it has no tool result"
            ));
        }
    }

    /// Takes in the `tool_calls` of message `i`.
    fn record(&mut self, i: usize, list: &Value, problems: &mut Vec<String>) {
        for call in list.as_array().into_iter().flatten() {
            let f = &call["function"];
            if !f["arguments"].is_object() {
                problems.push(format!(
                    "message {i}: tool call arguments must be a JSON object, got {}",
                    f["arguments"]
                ));
            }
            let name = f["name"].as_str().unwrap_or("").to_owned();
            let id = call["id"].as_str().map(str::to_owned);
            self.calls.push((id.clone(), name.clone()));
            self.pending.push((id, name, 0));
        }
    }

    /// Matches the tool result `m` (message `i`) to the call it answers.
    fn answer(&mut self, i: usize, m: &Value, problems: &mut Vec<String>) {
        let name = m["tool_name"].as_str();
        let id = m["tool_call_id"].as_str();
        let matches = |cid: &Option<String>, cname: &str| answers_call(id, name, cid, cname);
        let answers = self.calls.iter().any(|(cid, cname)| matches(cid, cname));
        // The first unanswered matching call of the latest assistant message, else any
        // matching one (which this answers a second time).
        let pending = &mut self.pending;
        let open = pending
            .iter()
            .position(|(cid, cname, n)| *n == 0 && matches(cid, cname))
            .or_else(|| {
                pending
                    .iter()
                    .position(|(cid, cname, _)| matches(cid, cname))
            });
        match open {
            _ if !answers => problems.push(format!(
                "message {i}: tool result (tool_name {name:?}, tool_call_id {id:?}) answers no earlier call"
            )),
            Some(k) if pending[k].2 > 0 => {
                pending[k].2 += 1;
                problems.push(format!(
                    "message {i}: tool result (tool_name {name:?}, tool_call_id {id:?}) answers a call a second time"
                ));
            }
            Some(k) => pending[k].2 += 1,
            None => problems.push(format!(
                "message {i}: tool result (tool_name {name:?}, tool_call_id {id:?}) answers a call of an earlier assistant message"
            )),
        }
    }
}

/// What is wrong with a message's `images`: absent is fine, otherwise an array of
/// standard, padded base64 strings.
fn image_problems(i: usize, images: Option<&Value>) -> Vec<String> {
    let Some(images) = images else {
        return Vec::new();
    };
    let Some(list) = images.as_array() else {
        return vec![format!("message {i}: `images` is not an array")];
    };
    list.iter()
        .filter(|img| !img.as_str().is_some_and(is_base64))
        .map(|img| {
            let shown: String = img.to_string().chars().take(40).collect();
            format!("message {i}: image {shown} is not base64 data")
        })
        .collect()
}

/// Whether `text` is standard base64 with padding (what Go's `encoding/base64` and
/// OpenAI's `data:` URLs accept), and not empty.
pub fn is_base64(text: &str) -> bool {
    let body = text.trim_end_matches('=');
    !text.is_empty()
        && text.len() % 4 == 0
        && text.len() - body.len() <= 2
        && body
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

async fn accept_loop(listener: TcpListener, state: Arc<Mutex<State>>, closed: Arc<Notify>) {
    while let Ok((socket, _)) = listener.accept().await {
        tokio::spawn(serve(socket, Arc::clone(&state), Arc::clone(&closed)));
    }
}

/// One request as read: method, path, headers, body.
type RawRequest = (String, String, Vec<(String, String)>, Vec<u8>);

/// Reads one HTTP/1.1 request: method, path, headers, body (by `Content-Length`).
async fn read_request(socket: &mut TcpStream) -> Option<RawRequest> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let path = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((method, path, headers, body))
}

async fn serve(mut socket: TcpStream, state: Arc<Mutex<State>>, closed: Arc<Notify>) {
    let Some((method, path, headers, body)) = read_request(&mut socket).await else {
        return;
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (index, reply) = {
        let mut s = lock(&state);
        s.requests.push(Recorded {
            method: method.clone(),
            path: path.clone(),
            body: body.clone(),
            headers,
        });
        let index = s.requests.len() - 1;
        (index, route(&mut s, &method, &path, &body))
    };
    let (mut reader, mut writer) = socket.into_split();
    // The client closing its side ends the read with 0 bytes (or an error).
    let client_gone = async move {
        let mut sink = [0u8; 512];
        loop {
            match reader.read(&mut sink).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let write = write_reply(&mut writer, &reply);
    tokio::select! {
        finished = write => {
            if finished {
                let _ = writer.shutdown().await;
            }
            // An aborted reply just drops the socket.
        }
        () = client_gone => {
            lock(&state).closed_early.push(index);
            closed.notify_waiters();
        }
    }
}

/// Writes `reply`; `true` when it ended properly, `false` when it was aborted. A stalled
/// reply never returns.
async fn write_reply(w: &mut tokio::net::tcp::OwnedWriteHalf, reply: &Reply) -> bool {
    if w.write_all(reply_head(reply).as_bytes()).await.is_err() {
        return false;
    }
    for part in &reply.parts {
        match part {
            Part::Delay(d) => tokio::time::sleep(*d).await,
            Part::Bytes(b) if reply.streamed => {
                let mut chunk = format!("{:x}\r\n", b.len()).into_bytes();
                chunk.extend_from_slice(b);
                chunk.extend_from_slice(b"\r\n");
                if w.write_all(&chunk).await.is_err() || w.flush().await.is_err() {
                    return false;
                }
            }
            Part::Bytes(b) => {
                if w.write_all(b).await.is_err() {
                    return false;
                }
            }
        }
    }
    match reply.ending {
        Ending::Complete => {
            if reply.streamed && w.write_all(b"0\r\n\r\n").await.is_err() {
                return false;
            }
            true
        }
        Ending::Abort => false,
        Ending::Stall => std::future::pending().await,
    }
}

/// The status line and headers of `reply`, with its length or chunked encoding.
fn reply_head(reply: &Reply) -> String {
    let reason = match reply.status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    };
    let mut head = format!(
        "HTTP/1.1 {} {reason}\r\nConnection: close\r\n",
        reply.status
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !reply.streamed {
        let len: usize = reply
            .parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.len(),
                Part::Delay(_) => 0,
            })
            .sum();
        head.push_str(&format!("Content-Length: {len}\r\n\r\n"));
    } else {
        head.push_str("Transfer-Encoding: chunked\r\n\r\n");
    }
    head
}

fn find<'a>(s: &'a State, name: &str) -> Option<&'a MockModel> {
    s.models
        .iter()
        .find(|m| m.name == name || m.name == format!("{name}:latest"))
}

fn scripted(s: &mut State, path: &str) -> Option<Reply> {
    s.scripts.get_mut(path).and_then(VecDeque::pop_front)
}

fn details(m: &MockModel) -> Value {
    json!({"parent_model": "", "format": "gguf", "family": m.family, "families": [m.family],
        "parameter_size": "8.2B", "quantization_level": "Q4_K_M"})
}

/// `/api/show` for `model`.
fn show(s: &State, model: &str) -> Reply {
    match find(s, model) {
        Some(m) => Reply::json(&json!({
            "license": "", "modelfile": "", "template": "{{ .Prompt }}",
            "parameters": m.parameters,
            "details": details(m),
            "model_info": {
                "general.architecture": m.family,
                "general.parameter_count": 8_190_735_360u64,
                format!("{}.context_length", m.family): m.context_length,
                format!("{}.embedding_length", m.family): 4096,
            },
            "capabilities": m.capabilities,
            "modified_at": "2025-05-01T12:00:00.000000000Z",
        })),
        None => Reply::error(404, &format!("model '{model}' not found")),
    }
}

/// `/api/tags`: the models.
fn tags(s: &State) -> Reply {
    let models: Vec<Value> = s
        .models
        .iter()
        .map(|m| {
            json!({"name": m.name, "model": m.name,
                "modified_at": "2025-05-01T12:00:00.000000000Z", "size": m.size,
                "digest": format!("sha256:{:064x}", m.size), "details": details(m)})
        })
        .collect();
    Reply::json(&json!({ "models": models }))
}

/// `/api/ps`: the running models.
fn ps(s: &State) -> Reply {
    let models: Vec<Value> = s
        .running
        .iter()
        .filter_map(|name| find(s, name))
        .map(|m| {
            json!({"name": m.name, "model": m.name, "size": m.size * 2,
                "digest": format!("sha256:{:064x}", m.size), "details": details(m),
                "expires_at": "2025-05-01T12:05:00.000000000Z",
                "size_vram": m.size, "context_length": m.context_length.min(8192)})
        })
        .collect();
    Reply::json(&json!({ "models": models }))
}

fn route(s: &mut State, method: &str, path: &str, body: &Value) -> Reply {
    let model = body["model"].as_str().unwrap_or("").to_owned();
    match (method, path) {
        ("POST", "/api/chat") => chat(s, body, &model),
        ("POST", "/api/show") => scripted(s, path).unwrap_or_else(|| show(s, &model)),
        ("GET", "/api/tags") => scripted(s, path).unwrap_or_else(|| tags(s)),
        ("GET", "/api/ps") => scripted(s, path).unwrap_or_else(|| ps(s)),
        ("GET", "/api/version") => scripted(s, path)
            .unwrap_or_else(|| Reply::json(&json!({"version": "0.12.6"}))),
        ("POST", "/api/pull") => scripted(s, path).unwrap_or_else(|| {
            s.models.retain(|m| m.name != model);
            s.models.push(MockModel::new(&model));
            let digest = "sha256:6a0746a1ec1aef3e7ec53868f220ff6e389f6f8ef87a01d77c96807de94ca2aa";
            Reply::ndjson(&[
                json!({"status": "pulling manifest"}),
                json!({"status": format!("pulling {}", &digest[7..19]), "digest": digest, "total": 100}),
                json!({"status": format!("pulling {}", &digest[7..19]), "digest": digest, "total": 100, "completed": 60}),
                json!({"status": format!("pulling {}", &digest[7..19]), "digest": digest, "total": 100, "completed": 100}),
                json!({"status": "verifying sha256 digest"}),
                json!({"status": "writing manifest"}),
                json!({"status": "success"}),
            ])
        }),
        ("DELETE", "/api/delete") => scripted(s, path).unwrap_or_else(|| {
            if find(s, &model).is_some() {
                s.models.retain(|m| m.name != model);
                Reply {
                    parts: Vec::new(),
                    ..Reply::json(&Value::Null)
                }
            } else {
                Reply::error(404, &format!("model '{model}' not found"))
            }
        }),
        _ => Reply {
            status: 404,
            headers: vec![("Content-Type".into(), "text/plain".into())],
            parts: vec![Part::Bytes(b"404 page not found".to_vec())],
            ending: Ending::Complete,
            streamed: false,
        },
    }
}

/// Ollama's refusal of a chat `body` for `model`: an unknown model, tools or thinking
/// the model does not support.
fn refusal(s: &State, body: &Value, model: &str) -> Option<Reply> {
    let Some(m) = find(s, model) else {
        return Some(Reply::error(
            404,
            &format!("model \"{model}\" not found, try pulling it first"),
        ));
    };
    let has = |c: &str| m.capabilities.iter().any(|x| x == c);
    if body["tools"].as_array().is_some_and(|t| !t.is_empty()) && !has("tools") {
        return Some(Reply::error(
            400,
            &format!("registry.ollama.ai/library/{model} does not support tools"),
        ));
    }
    let thinks = match &body["think"] {
        Value::Bool(b) => *b,
        Value::String(_) => true,
        _ => false,
    };
    if thinks && !has("thinking") {
        return Some(Reply::error(
            400,
            &format!("\"{model}\" does not support thinking"),
        ));
    }
    None
}

fn chat(s: &mut State, body: &Value, model: &str) -> Reply {
    let problems = validate_chat(body);
    if !problems.is_empty() {
        let message = problems.join("; ");
        s.violations.extend(problems);
        return Reply::error(400, &message);
    }
    if let Some(refused) = refusal(s, body, model) {
        return refused;
    }
    if let Some(r) = scripted(s, "/api/chat") {
        return r;
    }
    let mut read = mock_token_count(body);
    // The prompt cache: when the previous prompt to this model (same tools) is a prefix
    // of this one, only the new messages are read, as Ollama counts them.
    if let Some(prev) = s.cached.insert(model.to_owned(), body.clone()) {
        let (old, new) = (prev["messages"].as_array(), body["messages"].as_array());
        if let (Some(old), Some(new)) = (old, new) {
            if prev.get("tools") == body.get("tools") && new.starts_with(old) {
                let prefix = json!({"messages": old, "tools": prev.get("tools")});
                read = read.saturating_sub(mock_token_count(&prefix)).max(1);
            }
        }
    }
    let window = body["options"]["num_ctx"]
        .as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .or_else(|| find(s, model).and_then(MockModel::num_ctx_parameter))
        .unwrap_or(MOCK_DEFAULT_NUM_CTX);
    read = read.min(window);
    let msg = |content: &str| {
        json!({"model": model, "created_at": "2025-05-01T12:00:00Z",
            "message": {"role": "assistant", "content": content}, "done": false})
    };
    Reply::ndjson(&[
        msg("Hello"),
        msg(" from"),
        msg(" mock"),
        json!({"model": model, "created_at": "2025-05-01T12:00:01Z",
            "message": {"role": "assistant", "content": ""}, "done": true,
            "done_reason": "stop", "total_duration": 5_000_000u64, "load_duration": 1_000_000u64,
            "prompt_eval_count": read, "prompt_eval_duration": 2_000_000u64,
            "eval_count": 3, "eval_duration": 2_000_000u64}),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(body: Value, expected: usize) {
        let problems = validate_chat(&body);
        assert_eq!(problems.len(), expected, "{problems:?}");
    }

    #[test]
    fn the_recorder_catches_what_ollama_would_refuse() {
        let call = |id: &str, args: Value| {
            json!({"role": "assistant", "content": "",
                "tool_calls": [{"id": id, "function": {"name": "f", "arguments": args}}]})
        };
        let result = |id: &str| json!({"role": "tool", "content": "1", "tool_name": "f", "tool_call_id": id});
        let user = json!({"role": "user", "content": "x"});
        for (messages, expected) in [
            (vec![user.clone(), call("c1", json!({})), result("c1")], 0),
            // OpenAI-style string arguments: a 400 in Ollama.
            (vec![user.clone(), call("c1", json!("{}")), result("c1")], 1),
            // A result answering no call, or a call made later.
            (vec![user.clone(), result("c1")], 1),
            (vec![user.clone(), result("c1"), call("c1", json!({}))], 1),
            (vec![user.clone(), call("c1", json!({})), result("c2")], 1),
            // Every call answered exactly once before the next user or assistant message.
            (vec![user.clone(), call("c1", json!({})), user.clone()], 1),
            (
                vec![
                    user.clone(),
                    call("c1", json!({})),
                    result("c1"),
                    result("c1"),
                ],
                1,
            ),
            (
                vec![
                    user.clone(),
                    call("c1", json!({})),
                    call("c2", json!({})),
                    result("c2"),
                    result("c1"),
                ],
                2,
            ),
            (
                vec![
                    user.clone(),
                    call("c1", json!({})),
                    result("c1"),
                    json!({"role": "assistant", "content": "ok"}),
                    user.clone(),
                ],
                0,
            ),
            (
                vec![
                    user.clone(),
                    json!({"role": "assistant", "content": "", "tool_calls": [
                        {"id": "a", "function": {"name": "f", "arguments": {}}},
                        {"id": "b", "function": {"name": "f", "arguments": {}}}]}),
                    result("b"),
                    result("a"),
                    user.clone(),
                ],
                0,
            ),
            // Older servers: no id, matched by name.
            (
                vec![
                    user.clone(),
                    json!({"role": "assistant", "content": "",
                        "tool_calls": [{"function": {"name": "f", "arguments": {}}}]}),
                    json!({"role": "tool", "content": "1", "tool_name": "f"}),
                ],
                0,
            ),
        ] {
            check(json!({"model": "m", "messages": messages}), expected);
        }
        check(
            json!({"model": "m", "messages": [user], "tools": [{"name": "f"}]}),
            1,
        );
    }

    #[test]
    fn split_and_truncate_keep_the_bytes() {
        let reply = Reply::stream_text("ab\ncd\n")
            .split_every(1)
            .truncate_after(3);
        let bytes: Vec<u8> = reply
            .parts
            .iter()
            .flat_map(|p| match p {
                Part::Bytes(b) => b.clone(),
                Part::Delay(_) => Vec::new(),
            })
            .collect();
        assert_eq!(bytes, b"ab\n");
    }
}
