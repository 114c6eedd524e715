//! The counters `GET /metrics` reports, in Prometheus' text format.
//!
//! # Decisions
//! - Hand-written text format (a dozen lines): no metrics crate for this few series.
//! - Request counts are keyed by path and status; the keys are a fixed set of paths and
//!   the statuses the server returns, so the map stays small.
//! - The pool's state is read at scrape time from [`ProviderPool::status`].
//! - Calls found in text are counted by what was done with them (`recovered` or
//!   `flagged`) and by format, a small fixed set of labels (`provenance.rs`). The coach's
//!   repairs are counted by rule twice: the calls it kept back, and the replies it
//!   replaced (`answer-after-nothing` replaces a reply that had no call to keep back).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use ollm_bridge::{ProviderPool, ReplicaStatus};

use super::provenance::{Provenance, Status};

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
    /// Calls found in text, by status and format.
    repairs: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
    /// Replies the coach replaced, by rule (one may keep back no call:
    /// `answer-after-nothing` replaces an empty reply).
    coached: Mutex<BTreeMap<&'static str, u64>>,
    /// Calls to tools the client never declared, kept from it.
    undeclared: AtomicU64,
    /// Replies retried under a constraint because `tool_choice` obliged a call.
    pub(crate) tool_choice_retries: AtomicU64,
    /// What serve added to each chat reply's latency (`clock.rs`).
    overhead: Mutex<Histogram>,
}

/// The upper bounds of the overhead histogram's buckets, in seconds: loopback gateways
/// add a fraction of a millisecond (TensorZero 0.35 ms p50, 0.94 ms p99), a slow one a
/// few (LiteLLM 4.3 ms), and a turn loop's own round trip more.
const OVERHEAD_BUCKETS: [f64; 12] = [
    0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
];

/// A Prometheus histogram over [`OVERHEAD_BUCKETS`].
#[derive(Debug, Default)]
struct Histogram {
    /// Observations at most each bound (not cumulative; summed when rendered).
    counts: [u64; OVERHEAD_BUCKETS.len()],
    sum: f64,
    count: u64,
}

impl Metrics {
    /// Counts a request to `path` answered with `status`.
    pub(crate) fn request(&self, path: &'static str, status: u16) {
        *lock(&self.requests).entry((path, status)).or_default() += 1;
    }

    /// Counts the calls of a reply that came from its text.
    pub(crate) fn repair(&self, provenance: &Provenance) {
        let key = (provenance.status.as_str(), provenance.format);
        *lock(&self.repairs).entry(key).or_default() += provenance.calls.len() as u64;
        if provenance.status == Status::Coached {
            *lock(&self.coached).entry(provenance.format).or_default() += 1;
        }
    }

    /// Observes what serve added to one reply.
    pub(crate) fn overhead(&self, added: std::time::Duration) {
        let seconds = added.as_secs_f64();
        let mut h = lock(&self.overhead);
        if let Some(i) = OVERHEAD_BUCKETS.iter().position(|le| seconds <= *le) {
            h.counts[i] += 1;
        }
        h.sum += seconds;
        h.count += 1;
    }

    /// Counts `n` calls to undeclared tools.
    pub(crate) fn undeclared(&self, n: usize) {
        self.undeclared.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// The text exposition.
    pub(crate) fn render(&self, pool: &ProviderPool) -> String {
        let mut out = String::new();
        let requests = lock(&self.requests).clone();
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
        self.render_repairs(&mut out);
        self.render_overhead(&mut out);
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
            (
                "ollm_serve_undeclared_calls_total",
                "counter",
                "Calls to tools the client never declared, answered inside the request.",
                self.undeclared.load(Ordering::Relaxed),
            ),
            (
                "ollm_serve_tool_choice_retries_total",
                "counter",
                "Replies without a call retried under a constraint (tool_choice).",
                self.tool_choice_retries.load(Ordering::Relaxed),
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

impl Metrics {
    fn render_overhead(&self, out: &mut String) {
        let name = "ollm_serve_overhead_seconds";
        let h = lock(&self.overhead);
        let _ = writeln!(
            out,
            "# HELP {name} What serve added to a chat reply's latency (not the upstream's \
             time).\n# TYPE {name} histogram"
        );
        let mut below = 0;
        for (le, n) in OVERHEAD_BUCKETS.iter().zip(h.counts) {
            below += n;
            let _ = writeln!(out, "{name}_bucket{{le=\"{le}\"}} {below}");
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum {}\n{name}_count {}", h.sum, h.count);
    }

    fn render_repairs(&self, out: &mut String) {
        let name = "ollm_serve_repaired_calls_total";
        let _ = writeln!(
            out,
            "# HELP {name} Calls found in the model's text, by what was done (recovered, \
             flagged) and format.\n# TYPE {name} counter"
        );
        let repairs = lock(&self.repairs);
        let coached = Status::Coached.as_str();
        for ((status, format), n) in repairs.iter().filter(|((s, _), _)| *s != coached) {
            let _ = writeln!(out, "{name}{{status=\"{status}\",format=\"{format}\"}} {n}");
        }
        let name = "ollm_serve_coached_calls_total";
        let _ = writeln!(
            out,
            "# HELP {name} Calls the coach kept from clients and answered for them, by rule.\n\
             # TYPE {name} counter"
        );
        for ((_, rule), n) in repairs.iter().filter(|((s, _), _)| *s == coached) {
            let _ = writeln!(out, "{name}{{rule=\"{rule}\"}} {n}");
        }
        let name = "ollm_serve_coached_replies_total";
        let _ = writeln!(
            out,
            "# HELP {name} Replies the coach replaced with the answer it asked for, by rule.\n\
             # TYPE {name} counter"
        );
        for (rule, n) in lock(&self.coached).iter() {
            let _ = writeln!(out, "{name}{{rule=\"{rule}\"}} {n}");
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
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
