//! The counters `GET /metrics` reports, in Prometheus' text format.
//!
//! # Decisions
//! - Hand-written text format (a dozen lines): no metrics crate for this few series.
//! - Request counts are keyed by path and status; the keys are a fixed set of paths and
//!   the statuses the server returns, so the map stays small.
//! - The pool's state is read at scrape time from [`ProviderPool::status`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ollm_bridge::{ProviderPool, ReplicaStatus};

/// A per-replica series: name, type, help, and its value for one replica.
type Series = (
    &'static str,
    &'static str,
    &'static str,
    fn(&ReplicaStatus) -> u64,
);

/// The server's counters.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    requests: Mutex<BTreeMap<(&'static str, u16), u64>>,
    /// Tool calls sent to clients.
    pub(crate) tool_calls: AtomicU64,
    /// Chat replies in progress.
    pub(crate) in_flight: AtomicU64,
}

impl Metrics {
    /// Counts a request to `path` answered with `status`.
    pub(crate) fn request(&self, path: &'static str, status: u16) {
        let mut requests = self
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *requests.entry((path, status)).or_default() += 1;
    }

    /// The text exposition.
    pub(crate) fn render(&self, pool: &ProviderPool) -> String {
        let mut out = String::new();
        let requests = self
            .requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let _ = writeln!(
            out,
            "# HELP ollm_serve_requests_total Requests answered, by path and status."
        );
        let _ = writeln!(out, "# TYPE ollm_serve_requests_total counter");
        for ((path, status), n) in requests {
            let _ = writeln!(
                out,
                "ollm_serve_requests_total{{path=\"{path}\",status=\"{status}\"}} {n}"
            );
        }
        let simple = [
            (
                "ollm_serve_tool_calls_total",
                "counter",
                "Tool calls sent to clients.",
                self.tool_calls.load(Ordering::Relaxed),
            ),
            (
                "ollm_serve_in_flight",
                "gauge",
                "Chat replies in progress.",
                self.in_flight.load(Ordering::Relaxed),
            ),
        ];
        for (name, kind, help, value) in simple {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        }
        render_replicas(&pool.status(), &mut out);
        out
    }
}

/// The per-replica series.
fn render_replicas(status: &[ReplicaStatus], out: &mut String) {
    let series: [Series; 4] = [
        (
            "ollm_pool_replica_healthy",
            "gauge",
            "1 when the replica passed its last check.",
            |s| u64::from(s.healthy),
        ),
        (
            "ollm_pool_replica_in_flight",
            "gauge",
            "Requests in flight on the replica.",
            |s| s.in_flight as u64,
        ),
        (
            "ollm_pool_replica_served_total",
            "counter",
            "Replies the replica started.",
            |s| s.served as u64,
        ),
        (
            "ollm_pool_replica_failovers_total",
            "counter",
            "Requests failed over away from the replica.",
            |s| s.failovers as u64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for s in status {
            let replica = s.name.replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(out, "{name}{{replica=\"{replica}\"}} {}", value(s));
        }
    }
}
