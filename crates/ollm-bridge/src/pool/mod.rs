//! A pool of replicas behind one [`ProviderAdapter`]: health checks per kind of server,
//! least-busy routing, session affinity and failover before the first byte.
//!
//! ```no_run
//! use std::sync::Arc;
//! use ollm_bridge::{OpenAiConfig, OpenAiProvider, ProviderPool, Replica, ReplicaKind};
//!
//! # fn demo() -> Result<(), ollm_bridge::BridgeError> {
//! let replica = |url: &str| -> Result<Replica, ollm_bridge::BridgeError> {
//!     let adapter = OpenAiProvider::new(OpenAiConfig::new(url))?;
//!     Ok(Replica::new(url, ReplicaKind::LlamaCpp, Arc::new(adapter)))
//! };
//! let pool = ProviderPool::new(vec![replica("http://a:8080/v1")?, replica("http://b:8080/v1")?])?;
//! # Ok(())
//! # }
//! ```
//!
//! # Decisions
//! - **The pool is an adapter**, so the chat loop, `ollm serve` and library users take it
//!   wherever they take one server. Each replica is an ordinary adapter; the pool never
//!   reads a wire format.
//! - **Failover only before the first byte of a reply.** A replica's reply is read up to
//!   its first event that is not a retry warning. If that is an error meaning "this
//!   replica cannot serve it now" (no connection, 503, 404 / model not found), the next
//!   replica is tried; a 400 is the request's fault and every replica would say the same,
//!   so it is returned as is. Once any text, reasoning or call has been delivered, the
//!   reply stays on its replica: a later break ends the stream with the adapter's
//!   partial-reply error, never a silent restart that would repeat text.
//! - **Every switch is logged** (`tracing` at `warn`), sent to subscribers ([`ProviderPool::subscribe`])
//!   as a [`PoolEvent::Switched`], and put in the reply as a `Retrying` warning.
//! - **Capabilities are re-checked on the new replica**: a request with tools is not
//!   failed over to a replica whose model reports no tool support (`show_model`); a
//!   replica that cannot say is tried.
//! - **Health** comes from checks ([`ProviderPool::check_health`], or periodically with
//!   [`ProviderPool::spawn_health_checks`]) and from traffic: a failover marks the
//!   replica unhealthy, a reply that started marks it healthy again.
//! - **Affinity** (see `route`): a session key given by the caller
//!   ([`ProviderPool::chat_in_session`]), else the hash of the conversation's prefix (model,
//!   system prompt, first message), keeps a conversation on one replica while it is
//!   healthy, so the replica's prompt cache stays warm. [`PoolConfig::prefix_affinity`]
//!   off routes requests without a session purely by load.
//! - Members should not retry on their own (`RetryPolicy { max_retries: 0, .. }`): the
//!   pool's failover is the retry, and a member's backoff only delays it.

mod health;
mod route;
#[cfg(test)]
mod tests;

use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use ollm_core::{ProviderAdapter, ProviderStream};
use ollm_types::{
    Capability, ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent, ProviderRequest,
    RunningModel, Warning, WarningKind,
};
use tokio::sync::broadcast;

pub use health::ReplicaKind;

use crate::BridgeError;

/// One server of a pool.
#[derive(Clone)]
pub struct Replica {
    name: String,
    kind: ReplicaKind,
    adapter: Arc<dyn ProviderAdapter>,
}

impl std::fmt::Debug for Replica {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replica")
            .field("name", &self.name)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

impl Replica {
    /// A replica at `base_url` (its adapter's address, which also names it in events),
    /// of `kind`, reached through `adapter`.
    pub fn new(
        base_url: impl Into<String>,
        kind: ReplicaKind,
        adapter: Arc<dyn ProviderAdapter>,
    ) -> Self {
        Replica {
            name: crate::redact_url(&base_url.into()),
            kind,
            adapter,
        }
    }

    /// Its name (the base URL, credentials redacted).
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Settings of a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolConfig {
    /// Whether requests without a session key stay on the replica their conversation's
    /// prefix hashes to (default `true`); off, they go to the least busy replica.
    pub prefix_affinity: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        PoolConfig {
            prefix_affinity: true,
        }
    }
}

/// Something the pool did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PoolEvent {
    /// A request left `from` for `to` before any of its reply was delivered.
    Switched {
        /// The replica that failed.
        from: String,
        /// The replica tried next.
        to: String,
        /// Why `from` was left.
        reason: String,
    },
    /// A replica was skipped because its model reports no tool support.
    Skipped {
        /// The replica.
        replica: String,
        /// Why.
        reason: String,
    },
}

/// The state of one replica now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaStatus {
    /// Its name.
    pub name: String,
    /// Whether it was healthy at the last check or request.
    pub healthy: bool,
    /// Requests in flight on it.
    pub in_flight: usize,
    /// Replies it started (served past the first byte).
    pub served: usize,
    /// Times a request failed over away from it.
    pub failovers: usize,
}

struct Slot {
    replica: Replica,
    healthy: AtomicBool,
    in_flight: AtomicUsize,
    served: AtomicUsize,
    failovers: AtomicUsize,
    loaded: Mutex<Vec<String>>,
}

struct Inner {
    slots: Vec<Slot>,
    config: PoolConfig,
    events: broadcast::Sender<PoolEvent>,
    http: reqwest::Client,
}

/// Replicas behind one adapter (see the module docs).
#[derive(Clone)]
pub struct ProviderPool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ProviderPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderPool")
            .field("replicas", &self.status())
            .finish_non_exhaustive()
    }
}

impl ProviderPool {
    /// A pool of `replicas` with the default [`PoolConfig`]; all start healthy.
    pub fn new(replicas: Vec<Replica>) -> Result<Self, BridgeError> {
        Self::with_config(replicas, PoolConfig::default())
    }

    /// A pool of `replicas` with `config`.
    pub fn with_config(replicas: Vec<Replica>, config: PoolConfig) -> Result<Self, BridgeError> {
        if replicas.is_empty() {
            return Err(BridgeError::EmptyPool);
        }
        let slots = replicas
            .into_iter()
            .map(|replica| Slot {
                replica,
                healthy: AtomicBool::new(true),
                in_flight: AtomicUsize::new(0),
                served: AtomicUsize::new(0),
                failovers: AtomicUsize::new(0),
                loaded: Mutex::new(Vec::new()),
            })
            .collect();
        let http =
            reqwest::Client::builder()
                .no_proxy()
                .build()
                .map_err(|e| BridgeError::Connect {
                    url: String::new(),
                    message: e.to_string(),
                })?;
        let (events, _) = broadcast::channel(256);
        Ok(ProviderPool {
            inner: Arc::new(Inner {
                slots,
                config,
                events,
                http,
            }),
        })
    }

    /// The pool's events from now on (a slow receiver loses the oldest).
    pub fn subscribe(&self) -> broadcast::Receiver<PoolEvent> {
        self.inner.events.subscribe()
    }

    /// Each replica's state now, in the order given.
    pub fn status(&self) -> Vec<ReplicaStatus> {
        self.inner
            .slots
            .iter()
            .map(|s| ReplicaStatus {
                name: s.replica.name.clone(),
                healthy: s.healthy.load(Ordering::Relaxed),
                in_flight: s.in_flight.load(Ordering::Relaxed),
                served: s.served.load(Ordering::Relaxed),
                failovers: s.failovers.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Checks every replica once, concurrently, and records what it found.
    pub async fn check_health(&self) {
        let inner = &self.inner;
        let checks = inner.slots.iter().map(|slot| async move {
            let r = &slot.replica;
            let found = health::probe(r.kind, &r.name, &r.adapter, &inner.http).await;
            let was = slot.healthy.swap(found.healthy, Ordering::Relaxed);
            if was != found.healthy {
                tracing::warn!(replica = %r.name, healthy = found.healthy, "replica health changed");
            }
            *lock(&slot.loaded) = found.loaded;
        });
        futures::future::join_all(checks).await;
    }

    /// Checks every replica every `interval` until the returned task is aborted.
    pub fn spawn_health_checks(&self, interval: Duration) -> tokio::task::JoinHandle<()> {
        let pool = self.clone();
        tokio::spawn(async move {
            loop {
                pool.check_health().await;
                tokio::time::sleep(interval).await;
            }
        })
    }

    /// [`ProviderAdapter::chat`] with the client's own session key for affinity (an
    /// `x-session-id` header, say); `None` falls back to the conversation's prefix.
    pub fn chat_in_session(
        &self,
        request: ProviderRequest,
        session: Option<&str>,
    ) -> ProviderStream {
        let key = match session {
            Some(s) => Some(route::session_key(s)),
            None if self.inner.config.prefix_affinity => Some(prefix_key(&request)),
            None => None,
        };
        routed(Arc::clone(&self.inner), request, key)
    }

    /// The replicas' indices in the order to try them.
    fn order(inner: &Inner, model: &str, key: Option<u64>) -> Vec<usize> {
        let loaded: Vec<bool> = inner
            .slots
            .iter()
            .map(|s| lock(&s.loaded).iter().any(|m| m == model))
            .collect();
        let views: Vec<route::View<'_>> = inner
            .slots
            .iter()
            .zip(&loaded)
            .map(|(s, &loaded)| route::View {
                name: &s.replica.name,
                healthy: s.healthy.load(Ordering::Relaxed),
                in_flight: s.in_flight.load(Ordering::Relaxed),
                loaded,
            })
            .collect();
        route::order(&views, key)
    }

    /// The replicas' adapters, healthy and idle ones first.
    fn adapters(&self) -> Vec<Arc<dyn ProviderAdapter>> {
        Self::order(&self.inner, "", None)
            .into_iter()
            .map(|i| Arc::clone(&self.inner.slots[i].replica.adapter))
            .collect()
    }
}

/// The affinity key of a conversation: its model, system prompt and first message.
fn prefix_key(request: &ProviderRequest) -> u64 {
    let mut hasher = DefaultHasher::new();
    request.model.hash(&mut hasher);
    request.system.hash(&mut hasher);
    if let Some(first) = request.messages.first() {
        first.role().hash(&mut hasher);
        first.text().hash(&mut hasher);
    }
    hasher.finish()
}

/// Whether `error`, as the first event of a reply, means another replica may serve it.
pub(crate) fn fails_over(error: &ProviderError) -> bool {
    match error.status {
        Some(400) => false,
        Some(404 | 503) => true,
        _ => matches!(
            error.kind,
            ProviderErrorKind::Connection | ProviderErrorKind::ModelNotFound
        ),
    }
}

/// Counts a request in flight on a replica while it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        InFlight(counter)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The reply to `request` from the first replica that starts one.
fn routed(inner: Arc<Inner>, request: ProviderRequest, key: Option<u64>) -> ProviderStream {
    Box::pin(async_stream::stream! {
        let order = ProviderPool::order(&inner, &request.model, key);
        let mut left: Option<(usize, String)> = None;
        let mut last_error = None;
        for (tried, &i) in order.iter().enumerate() {
            let slot = &inner.slots[i];
            if let Some((from, why)) = left.take() {
                if let Err(reason) = capable(slot, &request).await {
                    skipped(&inner, slot, &reason);
                    left = Some((from, why));
                    continue;
                }
                yield switched(&inner, from, i, &why);
            }
            let _in_flight = InFlight::new(&slot.in_flight);
            let mut reply = slot.replica.adapter.chat(request.clone());
            let mut held = Vec::new();
            let first = loop {
                match reply.next().await {
                    Some(event @ ProviderEvent::Warning { .. }) => held.push(event),
                    other => break other,
                }
            };
            if let Some(ProviderEvent::Error { error }) = &first {
                if fails_over(error) && tried + 1 < order.len() {
                    slot.healthy.store(false, Ordering::Relaxed);
                    slot.failovers.fetch_add(1, Ordering::Relaxed);
                    left = Some((i, error.to_string()));
                    last_error = Some(error.clone());
                    continue;
                }
            } else {
                slot.healthy.store(true, Ordering::Relaxed);
                slot.served.fetch_add(1, Ordering::Relaxed);
            }
            for event in held.into_iter().chain(first) {
                yield event;
            }
            while let Some(event) = reply.next().await {
                yield event;
            }
            return;
        }
        let error = last_error.unwrap_or_else(|| {
            ProviderError::new(ProviderErrorKind::Connection, "no replica of the pool could serve the request")
        });
        yield ProviderEvent::Error { error };
    })
}

/// Whether `slot` can serve `request`: a request with tools needs a model that does not
/// report lacking them.
async fn capable(slot: &Slot, request: &ProviderRequest) -> Result<(), String> {
    if request.tools.is_empty() {
        return Ok(());
    }
    match slot.replica.adapter.show_model(&request.model).await {
        Ok(info)
            if !info.capabilities.is_empty() && !info.capabilities.contains(&Capability::Tools) =>
        {
            Err(format!("{} reports no tool support", request.model))
        }
        _ => Ok(()),
    }
}

/// Records a switch from replica `from` to `to`: a log line, a pool event and the
/// warning the reply carries.
fn switched(inner: &Inner, from: usize, to: usize, why: &str) -> ProviderEvent {
    let (from, to) = (
        &inner.slots[from].replica.name,
        &inner.slots[to].replica.name,
    );
    tracing::warn!(%from, %to, reason = %why, "pool: switched replica before the first byte");
    let _ = inner.events.send(PoolEvent::Switched {
        from: from.clone(),
        to: to.clone(),
        reason: why.to_owned(),
    });
    ProviderEvent::Warning {
        warning: Warning::new(
            WarningKind::Retrying,
            format!("{from} failed before replying ({why}); trying {to}"),
        ),
    }
}

fn skipped(inner: &Inner, slot: &Slot, reason: &str) {
    let replica = &slot.replica.name;
    tracing::warn!(%replica, %reason, "pool: replica skipped");
    let _ = inner.events.send(PoolEvent::Skipped {
        replica: replica.clone(),
        reason: reason.to_owned(),
    });
}

/// The first answer of the pool's replicas to `$ask`, healthy ones first; else the last
/// error.
macro_rules! first_ok {
    ($pool:expr, |$a:ident| $ask:expr) => {{
        let mut last = None;
        for $a in $pool.adapters() {
            match $ask {
                Ok(v) => return Ok(v),
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| ProviderError::new(ProviderErrorKind::Connection, "empty pool")))
    }};
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[async_trait]
impl ProviderAdapter for ProviderPool {
    fn name(&self) -> &str {
        "pool"
    }

    fn chat(&self, request: ProviderRequest) -> ProviderStream {
        self.chat_in_session(request, None)
    }

    async fn count_tokens(&self, model: &str, text: &str) -> Result<Option<usize>, ProviderError> {
        first_ok!(self, |a| a.count_tokens(model, text).await)
    }

    async fn count_request(
        &self,
        request: &ProviderRequest,
    ) -> Result<Option<usize>, ProviderError> {
        first_ok!(self, |a| a.count_request(request).await)
    }

    async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
        first_ok!(self, |a| a.list_models().await)
    }

    async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        first_ok!(self, |a| a.show_model(model).await)
    }

    async fn running_models(&self) -> Result<Vec<RunningModel>, ProviderError> {
        first_ok!(self, |a| a.running_models().await)
    }

    async fn server_version(&self) -> Result<String, ProviderError> {
        first_ok!(self, |a| a.server_version().await)
    }
}
