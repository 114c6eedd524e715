//! `ollm-serve`: an OpenAI-compatible gateway in front of a pool of model servers, which
//! repairs tool calls on the way through (docs/serve.md). [`router`] turns a
//! [`ProviderPool`] and [`Options`] into an [`axum::Router`] to serve as it is (what
//! `ollm serve` does) or to mount inside another axum application.
//!
//! ```no_run
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use ollm_bridge::{OpenAiConfig, OpenAiProvider, ProviderPool, Replica, ReplicaKind};
//!
//! # async fn mount() -> Result<(), Box<dyn std::error::Error>> {
//! let url = "http://127.0.0.1:8080/v1";
//! let adapter = OpenAiProvider::new(OpenAiConfig::new(url))?;
//! let pool = ProviderPool::new(vec![Replica::new(url, ReplicaKind::LlamaCpp, Arc::new(adapter))])?;
//! let _checks = pool.spawn_health_checks(Duration::from_secs(10));
//! // `/llm/v1/chat/completions`, `/llm/v1/models`, `/llm/health`, `/llm/metrics`.
//! let app = axum::Router::new().nest("/llm", ollm_serve::router(pool, ollm_serve::Options::default())?);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! # Decisions
//! - **The gateway does not own the pool's life.** The caller builds the
//!   [`ProviderPool`] (adapters, replicas) and starts its health checks; traffic also
//!   marks replicas (see the pool's docs). So the gateway is one router among the
//!   caller's, with no task of its own running in the background.
//! - **Settings are plain data** ([`Options`], [`Policy`], [`ClientKey`]): the CLI settles
//!   its flags, the config file's `[serve]` table ([`ServeEntry`]) and the environment
//!   into them; nothing here reads a file, a flag or a variable.
//! - What this crate must not know is in its README: the CLI, the tools, terminals.

mod clock;
mod config;
mod contract;
mod error;
#[cfg(test)]
mod fidelity;
mod http;
mod metrics;
mod policy;
mod provenance;
mod repair;
mod routes;
#[cfg(test)]
mod tests;
mod through;
mod turns;
mod unparsed;
mod wire_in;
mod wire_out;

use std::sync::Arc;

use axum::http::HeaderName;
use ollm_bridge::ProviderPool;

pub use config::{READ_ONLY_BY_NAME, ServeEntry, ServeKeyEntry, ServeModelEntry};
pub use error::ServeError;
pub use http::Options;
pub use policy::{ClientKey, Policy, Repair};

/// The largest request body accepted by default, in bytes (16 MiB: a long conversation
/// with a few images as `data:` URLs).
pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;

/// The gateway's routes in front of `pool`: `POST /v1/chat/completions`,
/// `GET /v1/models`, `GET /health` and `GET /metrics`, with the API key check, the body
/// limit and the repairs `options` ask for. Mount it with [`axum::Router::nest`] to put
/// the routes under a prefix.
///
/// # Errors
/// [`ServeError`] when `options` cannot work: a `max_in_flight` of zero, or a header to
/// forward whose name is not a header name.
pub fn router(pool: ProviderPool, mut options: Options) -> Result<axum::Router, ServeError> {
    if options.max_in_flight == Some(0) {
        return Err(ServeError::NoCapacity);
    }
    for name in &mut options.forward_headers {
        let parsed = HeaderName::try_from(name.as_str())
            .map_err(|_| ServeError::HeaderName(name.clone()))?;
        *name = parsed.as_str().to_owned();
    }
    let max_body = options.max_body_bytes;
    Ok(http::router(
        Arc::new(http::App::new(pool, options)),
        max_body,
    ))
}
