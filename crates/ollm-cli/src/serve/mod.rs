//! `ollm serve`: an OpenAI-compatible server in front of a pool of model servers, which
//! repairs tool calls on the way through (docs/serve.md).
//!
//! # Decisions
//! - The pool is the library's [`ProviderPool`]; each `--upstream` is one replica,
//!   reached through the adapter `--provider` names, without the adapter's own retries
//!   (the pool's failover is the retry).
//! - It listens on loopback only unless an API key is given: an open proxy to a model
//!   server on a LAN is a gift to anyone on it.
//! - The health checks run every `--health-interval` seconds in the background; traffic
//!   also marks replicas (see the pool's docs).
//! - The address it listens on is printed on stdout (`listening on http://...`) once the
//!   socket is bound, so scripts and tests can start it on port 0 and read the port.

#[cfg(test)]
mod fidelity;
mod http;
mod metrics;
mod repair;
#[cfg(test)]
mod tests;
mod wire_in;
mod wire_out;

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use ollm_bridge::{ProviderPool, Replica, ReplicaKind};

use crate::args::{HealthArg, ServeArgs};
use crate::config::{self, ProviderKind, ProviderSettings};
use crate::exit::CliError;
use crate::providers;

pub(crate) use http::App;

/// Runs the server until Ctrl-C.
pub(crate) fn run(args: &ServeArgs, provider: &ProviderSettings) -> Result<(), CliError> {
    if !args.listen.ip().is_loopback() && args.api_key.is_none() {
        return Err(CliError::Usage(format!(
            "refusing to listen on {} without --api-key: only loopback addresses are open",
            args.listen
        )));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let pool = pool(args, provider)?;
    let app = Arc::new(App::new(
        pool.clone(),
        !args.no_repair,
        args.api_key.clone(),
    ));
    let router = http::router(app, args.max_body_bytes);
    rt.block_on(async {
        let checks = pool.spawn_health_checks(Duration::from_secs(args.health_interval.max(1)));
        let listener = tokio::net::TcpListener::bind(args.listen).await?;
        let addr = listener.local_addr()?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on http://{addr}")?;
            out.flush()?;
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        let served = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        checks.abort();
        served.map_err(CliError::from)
    })
}

/// The pool of `--upstream`s (or the provider's own address).
fn pool(args: &ServeArgs, provider: &ProviderSettings) -> Result<ProviderPool, CliError> {
    let kind = match (args.health, provider.kind) {
        (Some(HealthArg::Llama), _) => ReplicaKind::LlamaCpp,
        (Some(HealthArg::Models), _) => ReplicaKind::OpenAi,
        (Some(HealthArg::Ollama), _) | (None, ProviderKind::Ollama) => ReplicaKind::Ollama,
        (None, _) => ReplicaKind::OpenAi,
    };
    let addresses = if args.upstreams.is_empty() {
        vec![provider.address.expose().to_owned()]
    } else {
        args.upstreams
            .iter()
            .map(|raw| {
                config::normalise_host(raw, provider.kind)
                    .ok_or_else(|| CliError::Usage(format!("unusable --upstream address {raw:?}")))
            })
            .collect::<Result<_, _>>()?
    };
    let replicas = addresses
        .iter()
        .map(|address| {
            let adapter = providers::connect_member(provider, address)?;
            Ok(Replica::new(address, kind, adapter))
        })
        .collect::<Result<Vec<_>, CliError>>()?;
    ProviderPool::new(replicas).map_err(|e| CliError::Usage(e.to_string()))
}
