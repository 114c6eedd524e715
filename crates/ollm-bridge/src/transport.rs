//! The thin I/O shell every adapter shares: one HTTP client, timeouts, retries and body
//! streaming. Adapters build request bodies and decode bytes with pure functions; this
//! module only moves bytes and decides when to try again.
//!
//! - **Timeouts**: a generous wait for the response headers (a model may take minutes to
//!   load) and an idle timeout between body chunks; there is no total timeout, because a
//!   long answer is not a stuck one.
//! - **Retries**: connection failures and 408, 409, 429 and 5xx (not 501) are retried with
//!   bounded exponential backoff and equal jitter, honouring `Retry-After` (seconds or an
//!   HTTP date) when it is at most [`RetryPolicy::max_retry_after`] (a server asking for
//!   a longer pause is not retried). A request is retried only before
//!   any of its reply was handed on, so a consumer never sees output twice. Each retry is
//!   announced ([`Attempt::Retrying`]) so the user knows why nothing is happening.
//! - **Cancellation**: everything here is a future or a stream; dropping it drops the
//!   connection (the server stops generating) and ends any retry sleep at once.
//! - **Pooled connections** are reused for at most [`HttpConfig::pool_idle_timeout`]
//!   after their last reply, less than the 5 s after which llama-server and uvicorn close
//!   an idle one. Reused later, a request could cross the server's close and fail before
//!   any byte (one request in about 50 through `ollm serve`, issue 37).
//! - **A reused connection the server had closed** is not the request's failure: sent on
//!   a pooled connection, a request that fails before any reply, with the connection
//!   open and no timeout, is sent once more on a connection of its own (a client that
//!   never pools, built on first need). llama-server (cpp-httplib) closes the connection
//!   after every streamed reply while its headers say `Keep-Alive: timeout=5, max=100`;
//!   a client that pools it meets a closed connection on its next request unless it saw
//!   the close first. Measured 2026-11-27: a second request sent right after a streamed
//!   reply on the same connection failed every time, after a non-streamed one never;
//!   through `ollm serve` 14 requests of a 216-run eval pass failed so, the 3 s pool
//!   timeout above notwithstanding, and 3 times serve's own second try drew another
//!   closed connection from the pool (502s); the next pass, with this, logged none. The
//!   server never read the request, so sending it again repeats nothing.
//! - **Proxies**: traffic to a loopback address never goes through `HTTP_PROXY`
//!   (reqwest#2152); other hosts follow the environment as usual.
//! - **Logging** (`tracing`): each request at `debug` (method, URL, the names of the
//!   extra headers, whether it carries credentials, the body up to
//!   [`LOGGED_BODY`] bytes), each retry at `info`. Never a credential: the URL has none
//!   (they became basic authentication in [`Transport::new`]), header values and the API
//!   key are not logged, and every header value that may be one is marked sensitive.

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use reqwest::{Method, Url};

use crate::BridgeError;
use crate::error::TimeoutPhase;

/// The most bytes read from a non-streamed body (model lists, show): 32 MiB.
const MAX_BODY: usize = 32 * 1024 * 1024;
/// The most bytes of an error body kept in an error.
const MAX_ERROR_BODY: usize = 4096;
/// The most bytes of a request body logged at `debug` (an image makes a body megabytes).
pub const LOGGED_BODY: usize = 16 * 1024;

/// How often and how long to retry.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// The first backoff; each retry doubles it.
    pub base_delay: Duration,
    /// The longest backoff.
    pub max_delay: Duration,
    /// The longest `Retry-After` waited for; a server asking for more is not retried.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// The wait before retry number `retry` (from 0) after `error`, or `None` when the error
    /// is not retryable or the retries are used up.
    pub fn delay(&self, retry: u32, error: &BridgeError) -> Option<Duration> {
        if retry >= self.max_retries || !error.is_retryable() {
            return None;
        }
        if let Some(asked) = error.retry_after() {
            // A server asking for a longer pause than we are willing to wait gets it: we
            // give up now rather than knock again before it allows.
            return (asked <= self.max_retry_after).then_some(asked);
        }
        let backoff = self
            .base_delay
            .saturating_mul(2u32.saturating_pow(retry))
            .min(self.max_delay);
        // Equal jitter: half fixed, half random, so retries from many clients spread out
        // while each still waits at least half the backoff.
        let half = backoff / 2;
        Some(half + half.mul_f64(fastrand::f64()))
    }
}

impl RetryPolicy {
    /// `error` as it is given up on: a server that asked for a longer wait than
    /// [`RetryPolicy::max_retry_after`] is named with its wait, so the user knows why
    /// ollm did not try again.
    pub fn explain(&self, mut error: BridgeError) -> BridgeError {
        if let BridgeError::Http {
            message,
            retry_after: Some(asked),
            ..
        } = &mut error
        {
            if *asked > self.max_retry_after {
                message.push_str(&format!(
                    " (the server asked to wait {:.0} s, longer than the {:.0} s ollm waits; \
                     try again later)",
                    asked.as_secs_f64(),
                    self.max_retry_after.as_secs_f64()
                ));
            }
        }
        error
    }
}

/// Parses a `Retry-After` value: delta-seconds (fractions too, as some servers send
/// them) or an HTTP date (relative to `now`).
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    if value.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return value
            .parse::<f64>()
            .ok()
            .and_then(|s| Duration::try_from_secs_f64(s).ok());
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The wait a response asks for: `retry-after-ms` (milliseconds, as OpenAI-compatible
/// servers send it) when present and valid, else `Retry-After`.
pub fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let ms = text("retry-after-ms")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok());
    ms.or_else(|| text(RETRY_AFTER.as_str()).and_then(|v| parse_retry_after(v, now)))
}

/// A secret (an API key): never shown by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

/// HTTP settings shared by the adapters.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpConfig {
    /// How long to wait for a TCP connection.
    pub connect_timeout: Duration,
    /// How long to wait for the response headers (default 10 minutes: loading a large
    /// model from disk can take minutes before the first byte).
    pub first_byte_timeout: Duration,
    /// How long a body may go without a byte (default 2 minutes).
    pub idle_timeout: Duration,
    /// How long an idle connection stays in the pool for reuse (default 3 s). llama-server
    /// and uvicorn (vLLM) close a connection idle for 5 s; a request sent on it just then
    /// fails with "connection closed before message completed", so a connection is never
    /// reused after the server may have begun to close it.
    pub pool_idle_timeout: Duration,
    /// Retries.
    pub retry: RetryPolicy,
    /// Headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// The API key, sent as [`HttpConfig::api_key_header`] says.
    pub api_key: Option<Secret>,
    /// How the API key is sent: `Authorization: Bearer` (OpenAI-compatible servers) or a
    /// header of its own (Anthropic's `x-api-key`).
    pub api_key_header: KeyHeader,
}

/// The header an API key travels in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum KeyHeader {
    /// `Authorization: Bearer <key>`.
    #[default]
    Bearer,
    /// `x-api-key: <key>` (Anthropic's Messages API).
    XApiKey,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(600),
            idle_timeout: Duration::from_secs(120),
            pool_idle_timeout: Duration::from_secs(3),
            retry: RetryPolicy::default(),
            headers: Vec::new(),
            api_key: None,
            api_key_header: KeyHeader::Bearer,
        }
    }
}

/// What one step of [`Transport::send_retrying`] produced.
#[derive(Debug)]
pub enum Attempt {
    /// An attempt failed and another follows after `delay`.
    Retrying {
        /// Which retry comes next (from 1).
        retry: u32,
        /// How long until it.
        delay: Duration,
        /// Why the attempt failed.
        error: BridgeError,
    },
    /// A successful (2xx) response, body unread.
    Response(reqwest::Response),
    /// The request failed for good.
    Failed(BridgeError),
}

/// A request to send: method, path under the base URL, and an optional JSON body.
#[derive(Debug, Clone)]
pub struct RequestSpec {
    /// The method.
    pub method: Method,
    /// The path, starting with `/`, appended to the base URL.
    pub path: String,
    /// The body, already serialised as JSON.
    pub body: Option<Bytes>,
    /// Headers for this request only, after the client's own (a gateway's forwarded
    /// routing headers: [`ProviderRequest::headers`](ollm_types::ProviderRequest::headers)).
    pub headers: Vec<(String, String)>,
}

impl RequestSpec {
    /// A `GET`.
    pub fn get(path: impl Into<String>) -> Self {
        RequestSpec {
            method: Method::GET,
            path: path.into(),
            body: None,
            headers: Vec::new(),
        }
    }

    /// A request with a JSON body.
    pub fn json(method: Method, path: impl Into<String>, body: &serde_json::Value) -> Self {
        RequestSpec {
            method,
            path: path.into(),
            body: Some(Bytes::from(body.to_string())),
            headers: Vec::new(),
        }
    }
}

/// An HTTP client bound to one server.
#[derive(Debug, Clone)]
pub struct Transport {
    client: reqwest::Client,
    /// The client that never reuses a connection, for a request whose reused connection
    /// the server had closed (see the module docs); shared by clones and rebased copies.
    fresh: Arc<Fresh>,
    /// The base URL without credentials: what errors and hints print.
    base: String,
    /// Credentials the address carried (`http://user:key@host`), sent as basic
    /// authentication.
    basic: Option<(String, Secret)>,
    config: HttpConfig,
}

impl Transport {
    /// A transport for the server at `base_url` (`http://host:port` or with a path prefix
    /// such as `/v1`).
    pub fn new(base_url: &str, config: HttpConfig) -> Result<Self, BridgeError> {
        let invalid = |message: String| BridgeError::InvalidUrl {
            url: crate::redact_url(base_url),
            message,
        };
        let mut url = Url::parse(base_url).map_err(|e| invalid(e.to_string()))?;
        let basic = (!url.username().is_empty() || url.password().is_some()).then(|| {
            let user = percent_decode(url.username());
            let key = percent_decode(url.password().unwrap_or_default());
            (user, Secret::new(key))
        });
        // Cannot fail for http(s) URLs, which have a host.
        let _ = url.set_username("");
        let _ = url.set_password(None);
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!("unsupported scheme {:?}", url.scheme())));
        }
        let headers = default_headers(&config).map_err(invalid)?;
        let fresh = Fresh {
            headers,
            loopback: is_loopback(&url),
            connect_timeout: config.connect_timeout,
            client: OnceLock::new(),
        };
        let client = fresh
            .builder()
            .pool_idle_timeout(config.pool_idle_timeout)
            .build()
            .map_err(|e| invalid(e.to_string()))?;
        Ok(Transport {
            client,
            fresh: Arc::new(fresh),
            base: url.as_str().trim_end_matches('/').to_owned(),
            basic,
            config,
        })
    }

    /// The same client (connection pool, TLS roots, headers, credentials) bound to
    /// another base URL on the same server, such as the server root beside `/v1`.
    /// Building a second client would load the system's TLS roots again, which costs a
    /// one-request run about a third of its CPU.
    pub fn rebased(&self, base_url: &str) -> Transport {
        Transport {
            client: self.client.clone(),
            fresh: Arc::clone(&self.fresh),
            base: base_url.trim_end_matches('/').to_owned(),
            basic: self.basic.clone(),
            config: self.config.clone(),
        }
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The settings.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    /// Sends `spec` once: a 2xx response or a typed error (non-2xx statuses become
    /// [`BridgeError::Http`] with the server's message and `Retry-After`).
    pub async fn send_once(&self, spec: &RequestSpec) -> Result<reqwest::Response, BridgeError> {
        let url = format!("{}{}", self.base, spec.path);
        self.log_request(spec, &url);
        let response = match self.send_on(&self.client, spec, &url).await? {
            Err(e) if closed_unanswered(&e) => match self.fresh.client() {
                Some(fresh) => {
                    tracing::debug!(url = %crate::redact_url(&url), error = %error_chain(&e),
                        "a pooled connection was closed unanswered; sending on a new one");
                    self.send_on(fresh, spec, &url).await?
                }
                None => Err(e),
            },
            sent => sent,
        }
        .map_err(|e| BridgeError::Connect {
            url: url.clone(),
            message: error_chain(&e),
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let retry_after = retry_after(response.headers(), SystemTime::now());
        let body = read_capped(response, MAX_ERROR_BODY, self.config.idle_timeout)
            .await
            .unwrap_or_default();
        let body = String::from_utf8_lossy(&body).into_owned();
        Err(BridgeError::Http {
            status: status.as_u16(),
            message: server_message(&body)
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned()),
            body,
            retry_after,
        })
    }

    /// `spec` sent on `client`: its response or the client's error, within the wait for
    /// the response headers.
    async fn send_on(
        &self,
        client: &reqwest::Client,
        spec: &RequestSpec,
        url: &str,
    ) -> Result<Result<reqwest::Response, reqwest::Error>, BridgeError> {
        let mut request = client.request(spec.method.clone(), url);
        if let Some((user, key)) = &self.basic {
            request = request.basic_auth(user, Some(key.expose()));
        }
        if let Some(body) = &spec.body {
            request = request
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        for (name, value) in &spec.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        tokio::time::timeout(self.config.first_byte_timeout, request.send())
            .await
            .map_err(|_| BridgeError::Timeout {
                phase: TimeoutPhase::FirstByte,
                after: self.config.first_byte_timeout,
            })
    }

    /// Logs `spec` at `debug`, credentials left out (see the module docs).
    fn log_request(&self, spec: &RequestSpec, url: &str) {
        if !tracing::enabled!(tracing::Level::DEBUG) {
            return;
        }
        let headers: Vec<&str> = self
            .config
            .headers
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        let body = spec
            .body
            .as_ref()
            .map(|b| BridgeError::cap(&String::from_utf8_lossy(b), LOGGED_BODY));
        tracing::debug!(
            method = %spec.method,
            url = %crate::redact_url(url),
            credentials = self.config.api_key.is_some() || self.basic.is_some(),
            ?headers,
            body = body.as_deref().unwrap_or(""),
            "request"
        );
    }

    /// Sends `spec`, retrying by the policy. The stream yields a [`Attempt::Retrying`] per
    /// retry, then one [`Attempt::Response`] or [`Attempt::Failed`], and ends.
    pub fn send_retrying(&self, spec: RequestSpec) -> BoxStream<'static, Attempt> {
        let this = self.clone();
        Box::pin(async_stream::stream! {
            let mut retry = 0;
            loop {
                match this.send_once(&spec).await {
                    Ok(response) => {
                        yield Attempt::Response(response);
                        return;
                    }
                    Err(error) => match this.config.retry.delay(retry, &error) {
                        Some(delay) => {
                            retry += 1;
                            tracing::info!(retry, ?delay, %error, "retrying");
                            yield Attempt::Retrying { retry, delay, error };
                            tokio::time::sleep(delay).await;
                        }
                        None => {
                            yield Attempt::Failed(this.config.retry.explain(error));
                            return;
                        }
                    },
                }
            }
        })
    }

    /// Sends `spec` with retries and reads the whole (capped) body.
    pub async fn fetch(&self, spec: RequestSpec) -> Result<Bytes, BridgeError> {
        let mut attempts = self.send_retrying(spec);
        while let Some(attempt) = attempts.next().await {
            match attempt {
                Attempt::Retrying { .. } => {}
                Attempt::Response(response) => {
                    return read_capped(response, MAX_BODY, self.config.idle_timeout).await;
                }
                Attempt::Failed(error) => return Err(error),
            }
        }
        Err(BridgeError::Incomplete {
            message: "no attempt was made".into(),
        })
    }

    /// Sends `spec` with retries and parses the JSON reply into `T` (the raw body is kept
    /// in the error when it does not parse).
    pub async fn fetch_json<T: serde::de::DeserializeOwned>(
        &self,
        spec: RequestSpec,
    ) -> Result<T, BridgeError> {
        let body = self.fetch(spec).await?;
        serde_json::from_slice(&body).map_err(|e| BridgeError::Decode {
            // Cap the bytes before the lossy copy: the body may be 32 MiB.
            line: BridgeError::cap(&String::from_utf8_lossy(&body[..body.len().min(2048)]), 512),
            message: e.to_string(),
        })
    }

    /// The body of `response` as chunks, each within the idle timeout (see [`BodyChunks`]).
    pub fn body_chunks(&self, response: reqwest::Response) -> BodyChunks {
        BodyChunks::new(response, self.config.idle_timeout)
    }
}

/// The chunks of a response body, each within an idle timeout; ends after the first error.
///
/// # Decisions
/// - One timer serves the whole body: each chunk only notes the time, and the timer is
///   looked at only when the body has nothing ready; when it fires early (chunks came
///   meanwhile) it is moved to the last chunk's time plus the timeout. A timer armed and
///   cancelled per chunk cost a streamed token two trips to the runtime's timer wheel.
/// - A hand-written `Stream`, not a generator: a chunk costs one poll of the body and
///   nothing else (a generator added a resume and a thread-local hand-off per chunk).
pub struct BodyChunks {
    body: BoxStream<'static, reqwest::Result<Bytes>>,
    idle: Duration,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    /// The waker the armed timer will wake; `None` until it is armed.
    armed_for: Option<std::task::Waker>,
    last: tokio::time::Instant,
    ended: bool,
}

impl fmt::Debug for BodyChunks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BodyChunks")
            .field("idle", &self.idle)
            .field("ended", &self.ended)
            .finish_non_exhaustive()
    }
}

impl BodyChunks {
    fn new(response: reqwest::Response, idle: Duration) -> Self {
        Self::over(Box::pin(response.bytes_stream()), idle)
    }

    /// The chunks of any body stream (the tests drive one by hand).
    fn over(body: BoxStream<'static, reqwest::Result<Bytes>>, idle: Duration) -> Self {
        BodyChunks {
            body,
            idle,
            timer: Box::pin(tokio::time::sleep(idle)),
            armed_for: None,
            last: tokio::time::Instant::now(),
            ended: false,
        }
    }

    /// Nothing is ready and the timer fired or was armed for another task: `Ready` with
    /// the timeout once the body has been silent for the whole idle time, else `Pending`
    /// with the timer armed for that moment and this task.
    #[inline(never)]
    fn poll_idle(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Bytes, BridgeError>>> {
        use std::future::Future;
        while self.timer.as_mut().poll(cx).is_ready() {
            let deadline = self.last + self.idle;
            if tokio::time::Instant::now() >= deadline {
                self.ended = true;
                return std::task::Poll::Ready(Some(Err(BridgeError::Timeout {
                    phase: TimeoutPhase::Idle,
                    after: self.idle,
                })));
            }
            self.timer.as_mut().reset(deadline);
        }
        self.armed_for = Some(cx.waker().clone());
        std::task::Poll::Pending
    }

    /// The body ended or broke: the last item.
    #[cold]
    #[inline(never)]
    fn end(&mut self, last: Option<reqwest::Result<Bytes>>) -> Option<Result<Bytes, BridgeError>> {
        self.ended = true;
        match last {
            Some(Err(e)) => Some(Err(BridgeError::Body {
                message: error_chain(&e),
            })),
            Some(Ok(chunk)) => Some(Ok(chunk)),
            None => None,
        }
    }
}

impl futures::Stream for BodyChunks {
    type Item = Result<Bytes, BridgeError>;

    /// The hot path is a chunk or a `Pending` with the timer already armed for this
    /// task (an armed timer that has not fired would only store the same waker again:
    /// a tenth of the cost of a token read one chunk at a time); the rest is out of line.
    #[inline]
    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Self::Item>> {
        use std::task::Poll;
        if self.ended {
            return Poll::Ready(None);
        }
        match self.body.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                self.last = tokio::time::Instant::now();
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Pending => {
                let armed = self
                    .armed_for
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()));
                if armed && !self.timer.is_elapsed() {
                    return Poll::Pending;
                }
                self.poll_idle(cx)
            }
            Poll::Ready(last) => Poll::Ready(self.end(last)),
        }
    }
}

/// Reads a body up to `max` bytes (the rest is dropped), each chunk within `idle`.
async fn read_capped(
    response: reqwest::Response,
    max: usize,
    idle: Duration,
) -> Result<Bytes, BridgeError> {
    let mut body = response.bytes_stream();
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(idle, body.next()).await {
            Err(_) => {
                return Err(BridgeError::Timeout {
                    phase: TimeoutPhase::Idle,
                    after: idle,
                });
            }
            Ok(None) => return Ok(Bytes::from(out)),
            Ok(Some(Err(e))) => {
                return Err(BridgeError::Body {
                    message: error_chain(&e),
                });
            }
            Ok(Some(Ok(chunk))) => {
                let room = max.saturating_sub(out.len());
                out.extend_from_slice(&chunk[..chunk.len().min(room)]);
                if out.len() >= max {
                    return Ok(Bytes::from(out));
                }
            }
        }
    }
}

/// The message in an error body: Ollama's `{"error": "..."}`, OpenAI's
/// `{"error": {"message": "..."}}` or vLLM's older `{"object": "error", "message": ...}`;
/// `None` when the body is none of these.
pub fn server_message(body: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    match value.get("error") {
        Some(serde_json::Value::String(s)) => Some(s.clone()),
        Some(serde_json::Value::Object(o)) => o.get("message")?.as_str().map(str::to_owned),
        Some(_) => None,
        None => value.get("message")?.as_str().map(str::to_owned),
    }
}

/// Whether `url` names this machine (loopback addresses and `localhost`).
pub fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Some(url::Host::Ipv6(ip)) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || ip
                    .to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
        }
        None => false,
    }
}

/// A URL's userinfo part, percent-decoded (as typed in the address).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An error and its sources on one line (reqwest's top-level text alone says little).
/// The headers every request carries: the configured ones and the API key, each marked
/// sensitive; an error names the one that is not a valid header.
fn default_headers(config: &HttpConfig) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    for (name, value) in &config.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|e| format!("header name {name:?}: {e}"))?;
        let mut value = HeaderValue::from_str(value).map_err(|e| format!("header {name}: {e}"))?;
        // Custom headers often carry tokens; no `Debug` of a request shows them.
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    if let Some(key) = &config.api_key {
        let (name, text) = match config.api_key_header {
            KeyHeader::Bearer => (
                reqwest::header::AUTHORIZATION,
                format!("Bearer {}", key.expose()),
            ),
            KeyHeader::XApiKey => (
                HeaderName::from_static("x-api-key"),
                key.expose().to_owned(),
            ),
        };
        let mut value = HeaderValue::from_str(&text)
            .map_err(|_| "the API key is not a valid header value".to_owned())?;
        value.set_sensitive(true);
        headers.insert(name, value);
    }
    Ok(headers)
}

/// Whether `e` is a request that failed before any reply on a connection that was open:
/// not a refused or timed-out connect, not a timeout (a pooled connection the server had
/// closed, see the module docs).
fn closed_unanswered(e: &reqwest::Error) -> bool {
    e.is_request() && !e.is_connect() && !e.is_timeout()
}

/// What building a client takes, kept for the client that never pools (see
/// [`Transport`]'s `fresh`).
#[derive(Debug)]
struct Fresh {
    headers: HeaderMap,
    loopback: bool,
    connect_timeout: Duration,
    /// Built on first need: building a client loads the system's TLS roots.
    client: OnceLock<Option<reqwest::Client>>,
}

impl Fresh {
    /// A builder with the transport's headers, connect timeout and proxy rule.
    fn builder(&self) -> reqwest::ClientBuilder {
        let builder = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .default_headers(self.headers.clone())
            .user_agent(concat!("ollm/", env!("CARGO_PKG_VERSION")));
        if self.loopback {
            builder.no_proxy()
        } else {
            builder
        }
    }

    /// The client that never keeps a connection; `None` if it cannot be built (the
    /// pooled client's error then stands).
    fn client(&self) -> Option<&reqwest::Client> {
        self.client
            .get_or_init(|| self.builder().pool_max_idle_per_host(0).build().ok())
            .as_ref()
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod idle_tests {
    //! The idle timer of [`BodyChunks`], on tokio's paused clock: exact and without sleeps.

    use std::time::Duration;

    use bytes::Bytes;
    use futures::StreamExt;
    use futures::channel::mpsc;

    use super::{BodyChunks, BridgeError, TimeoutPhase};

    const IDLE: Duration = Duration::from_millis(100);

    fn body() -> (mpsc::UnboundedSender<reqwest::Result<Bytes>>, BodyChunks) {
        let (tx, rx) = mpsc::unbounded();
        (tx, BodyChunks::over(rx.boxed(), IDLE))
    }

    fn is_idle_timeout(item: Option<Result<Bytes, BridgeError>>) -> bool {
        matches!(
            item,
            Some(Err(BridgeError::Timeout {
                phase: TimeoutPhase::Idle,
                ..
            }))
        )
    }

    #[tokio::test(start_paused = true)]
    async fn chunks_move_the_deadline_and_silence_after_the_last_ends_the_body() {
        let (tx, mut chunks) = body();
        for _ in 0..5 {
            // 60 ms apart: the body is 300 ms old, past the first deadline, but never
            // silent for the idle time.
            tokio::time::advance(Duration::from_millis(60)).await;
            tx.unbounded_send(Ok(Bytes::from_static(b"x"))).unwrap();
            match futures::poll!(chunks.next()) {
                std::task::Poll::Ready(Some(Ok(chunk))) => assert_eq!(chunk, &b"x"[..]),
                other => panic!("a chunk, not {other:?}"),
            }
        }
        tokio::time::advance(Duration::from_millis(90)).await;
        assert!(
            futures::poll!(chunks.next()).is_pending(),
            "90 ms of silence is not idle"
        );
        tokio::time::advance(Duration::from_millis(20)).await;
        assert!(is_idle_timeout(chunks.next().await));
        assert!(chunks.next().await.is_none(), "nothing after the timeout");
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_polled_from_another_task_still_times_out() {
        let (_tx, mut chunks) = body();
        // Armed with this task's waker...
        assert!(futures::poll!(chunks.next()).is_pending());
        // ...then read by another task: the timer must wake that one. Were it left armed
        // for this task, the read would only end when something else woke it (here the
        // hour's timeout, whose poll finds the timer elapsed).
        let start = tokio::time::Instant::now();
        let read = tokio::spawn(async move {
            let item = tokio::time::timeout(Duration::from_secs(3600), chunks.next()).await;
            (item, start.elapsed())
        });
        let (item, after) = read.await.unwrap();
        assert!(is_idle_timeout(item.unwrap()));
        assert_eq!(after, IDLE, "woken by the idle timer itself");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_seconds_and_dates() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(parse_retry_after(" 7 ", now), Some(Duration::from_secs(7)));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        assert_eq!(
            parse_retry_after(&later, now),
            Some(Duration::from_secs(30))
        );
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon", now), None);
        // Issue 12: fractions were ignored (a 1.5 s request retried after 0.24 s).
        assert_eq!(
            parse_retry_after("1.5", now),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(parse_retry_after("-1", now), None);
        let headers = |pairs: &[(&'static str, &str)]| {
            let mut map = HeaderMap::new();
            for (k, v) in pairs {
                map.insert(*k, HeaderValue::from_str(v).unwrap());
            }
            map
        };
        let check = |pairs: &[(&'static str, &str)], want: Option<Duration>| {
            assert_eq!(retry_after(&headers(pairs), now), want, "{pairs:?}");
        };
        check(
            &[("retry-after-ms", "1500")],
            Some(Duration::from_millis(1500)),
        );
        check(
            &[("retry-after-ms", "250.5"), ("retry-after", "9")],
            Some(Duration::from_micros(250_500)),
        );
        check(
            &[("retry-after-ms", "x"), ("retry-after", "2")],
            Some(Duration::from_secs(2)),
        );
        check(&[], None);
    }

    fn http(status: u16, retry_after: Option<Duration>) -> BridgeError {
        BridgeError::Http {
            status,
            message: String::new(),
            body: String::new(),
            retry_after,
        }
    }

    #[test]
    fn backoff_grows_is_capped_and_honours_retry_after() {
        let policy = RetryPolicy {
            max_retries: 10,
            ..RetryPolicy::default()
        };
        for retry in 0..10 {
            let d = policy.delay(retry, &http(503, None)).unwrap();
            let full = policy
                .base_delay
                .saturating_mul(1 << retry)
                .min(policy.max_delay);
            assert!(
                d >= full / 2 && d <= full,
                "retry {retry}: {d:?} vs {full:?}"
            );
        }
        let asked = policy
            .delay(0, &http(429, Some(Duration::from_secs(3))))
            .unwrap();
        assert_eq!(asked, Duration::from_secs(3));
        let too_long = policy.delay(0, &http(429, Some(Duration::from_secs(3600))));
        assert_eq!(too_long, None, "retrying before the server allows");
        let at_cap = policy.delay(0, &http(429, Some(policy.max_retry_after)));
        assert_eq!(at_cap, Some(policy.max_retry_after));
        assert_eq!(policy.delay(0, &http(404, None)), None);
        let explained = policy.explain(http(429, Some(Duration::from_secs(3600))));
        assert!(
            explained.to_string().contains("asked to wait 3600 s"),
            "{explained}"
        );
        assert_eq!(
            policy.explain(http(429, Some(Duration::from_secs(3)))),
            http(429, Some(Duration::from_secs(3)))
        );
        assert_eq!(policy.delay(10, &http(503, None)), None);
    }

    #[test]
    fn loopback_hosts() {
        for (url, expected) in [
            ("http://127.0.0.1:11434", true),
            ("http://localhost:8080/v1", true),
            ("http://[::1]:1", true),
            ("http://[::ffff:127.0.0.1]:8080", true),
            ("http://[::ffff:10.0.0.2]:8080", false),
            ("http://0.0.0.0:11434", true),
            ("http://example.com", false),
            ("http://10.0.0.2:11434", false),
        ] {
            assert_eq!(is_loopback(&Url::parse(url).unwrap()), expected, "{url}");
        }
    }

    #[test]
    fn server_messages_of_both_dialects() {
        assert_eq!(
            server_message(r#"{"error":"model 'x' not found"}"#).as_deref(),
            Some("model 'x' not found")
        );
        assert_eq!(
            server_message(r#"{"error":{"message":"bad","type":"x"}}"#).as_deref(),
            Some("bad")
        );
        assert_eq!(server_message("oops"), None);
        assert_eq!(
            server_message(r#"{"object":"error","message":"no","type":"BadRequestError"}"#)
                .as_deref(),
            Some("no")
        );
    }

    #[test]
    fn secrets_do_not_debug_print() {
        let config = HttpConfig {
            api_key: Some(Secret::new("sk-123")),
            ..HttpConfig::default()
        };
        assert!(!format!("{config:?}").contains("sk-123"));
    }

    #[tokio::test]
    async fn credentials_in_the_address_are_sent_but_never_printed() {
        // Issue 12: `http://user:key@host` was printed in errors. Port 9 on loopback
        // refuses the connection, so the error path runs without a server.
        let transport = Transport::new(
            "http://me:sk-canary%2Fx@127.0.0.1:9/v1",
            HttpConfig {
                retry: RetryPolicy::none(),
                ..HttpConfig::default()
            },
        )
        .unwrap();
        assert_eq!(transport.base_url(), "http://127.0.0.1:9/v1");
        assert_eq!(
            transport
                .basic
                .as_ref()
                .map(|(u, k)| (u.as_str(), k.expose())),
            Some(("me", "sk-canary/x"))
        );
        assert!(!format!("{transport:?}").contains("sk-canary"));
        let error = transport
            .send_once(&RequestSpec::get("/models"))
            .await
            .unwrap_err();
        assert!(matches!(error, BridgeError::Connect { .. }), "{error:?}");
        assert!(
            !format!("{error} {error:?}").contains("sk-canary"),
            "{error}"
        );
        let invalid = Transport::new("ftp://me:sk-canary@h", HttpConfig::default()).unwrap_err();
        assert!(
            !format!("{invalid} {invalid:?}").contains("sk-canary"),
            "{invalid}"
        );
    }
}
