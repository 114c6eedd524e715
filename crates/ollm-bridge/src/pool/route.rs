//! Which replica a request goes to, and in which order the others are tried: pure
//! functions over a snapshot of the replicas' state, so every rule has a table test.
//!
//! # Decisions
//! - **Affinity by rendezvous hashing.** A request with an affinity key (a client's session
//!   header, or the hash of its conversation prefix) goes to the candidate whose
//!   `hash(key, replica)` is highest. Nothing is stored per session (no map to bound or
//!   expire), and when a replica leaves the healthy set only its own sessions move.
//! - **Least busy otherwise**: the candidate with the fewest requests in flight; ties go to
//!   the lowest index, so an idle pool is deterministic.
//! - **Candidates** are the healthy replicas; for a model some healthy replica reports
//!   loaded (Ollama's `/api/ps`), only those, so the request skips a cold load. When no
//!   replica is healthy, all of them are candidates: a stale health mark must not turn
//!   the pool into a certain failure.
//! - **Failover order**: the chosen replica, then the other candidates least busy first,
//!   then the remaining replicas (unhealthy or without the model loaded) in index order.

use std::hash::{DefaultHasher, Hash, Hasher};

/// What routing needs to know about one replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View<'a> {
    /// Its stable name (the base URL).
    pub(crate) name: &'a str,
    /// Whether the last health check or request found it working.
    pub(crate) healthy: bool,
    /// Requests in flight on it now.
    pub(crate) in_flight: usize,
    /// Whether it reports the request's model loaded in memory.
    pub(crate) loaded: bool,
}

/// The indices of `replicas` in the order to try them for a request with `affinity`.
pub(crate) fn order(replicas: &[View<'_>], affinity: Option<u64>) -> Vec<usize> {
    let healthy: Vec<usize> = (0..replicas.len())
        .filter(|&i| replicas[i].healthy)
        .collect();
    let loaded: Vec<usize> = healthy
        .iter()
        .copied()
        .filter(|&i| replicas[i].loaded)
        .collect();
    let mut candidates = match (loaded.is_empty(), healthy.is_empty()) {
        (false, _) => loaded,
        (true, false) => healthy,
        (true, true) => (0..replicas.len()).collect(),
    };
    candidates.sort_by_key(|&i| (replicas[i].in_flight, i));
    if let Some(key) = affinity {
        let best = candidates
            .iter()
            .copied()
            .max_by_key(|&i| (weight(key, replicas[i].name), std::cmp::Reverse(i)));
        if let Some(best) = best {
            candidates.retain(|&i| i != best);
            candidates.insert(0, best);
        }
    }
    let rest: Vec<usize> = (0..replicas.len())
        .filter(|i| !candidates.contains(i))
        .collect();
    candidates.extend(rest);
    candidates
}

/// The rendezvous weight of `replica` for `key`.
fn weight(key: u64, replica: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    key.hash(&mut hasher);
    replica.hash(&mut hasher);
    hasher.finish()
}

/// The affinity key of a client's session header value.
pub(crate) fn session_key(session: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    "session".hash(&mut hasher);
    session.hash(&mut hasher);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(name: &str, healthy: bool, in_flight: usize, loaded: bool) -> View<'_> {
        View {
            name,
            healthy,
            in_flight,
            loaded,
        }
    }

    fn check(replicas: &[View<'_>], affinity: Option<u64>, want: &[usize]) {
        assert_eq!(order(replicas, affinity), want, "{replicas:?} {affinity:?}");
    }

    #[test]
    fn without_affinity_the_least_busy_healthy_replica_comes_first() {
        let (a, b, c) = ("http://a", "http://b", "http://c");
        check(
            &[
                view(a, true, 2, false),
                view(b, true, 0, false),
                view(c, true, 1, false),
            ],
            None,
            &[1, 2, 0],
        );
        // Ties go to the lowest index.
        check(
            &[view(a, true, 0, false), view(b, true, 0, false)],
            None,
            &[0, 1],
        );
        // Unhealthy replicas come last, however idle.
        check(
            &[view(a, false, 0, false), view(b, true, 5, false)],
            None,
            &[1, 0],
        );
        // None healthy: all are tried, least busy first.
        check(
            &[view(a, false, 3, false), view(b, false, 1, false)],
            None,
            &[1, 0],
        );
        // A replica with the model loaded wins over an idler cold one.
        check(
            &[view(a, true, 0, false), view(b, true, 4, true)],
            None,
            &[1, 0],
        );
        // ...but an unhealthy one with the model loaded does not.
        check(
            &[view(a, true, 0, false), view(b, false, 0, true)],
            None,
            &[0, 1],
        );
    }

    #[test]
    fn a_key_keeps_its_replica_however_busy_while_it_is_healthy() {
        let names = ["http://a", "http://b", "http://c"];
        for key in 0..50u64 {
            let idle: Vec<View<'_>> = names.iter().map(|n| view(n, true, 0, false)).collect();
            let first = order(&idle, Some(key))[0];
            let mut busy = idle.clone();
            busy[first].in_flight = 100;
            assert_eq!(order(&busy, Some(key))[0], first, "key {key}");
            // The replica goes down: the key moves, and only then.
            let mut down = idle.clone();
            down[first].healthy = false;
            let moved = order(&down, Some(key));
            assert_ne!(moved[0], first, "key {key}");
            assert_eq!(*moved.last().unwrap_or(&usize::MAX), first, "key {key}");
        }
    }

    #[test]
    fn keys_spread_over_the_replicas() {
        let names = ["http://a", "http://b", "http://c"];
        let idle: Vec<View<'_>> = names.iter().map(|n| view(n, true, 0, false)).collect();
        let mut hits = [0usize; 3];
        for key in 0..300u64 {
            hits[order(&idle, Some(session_key(&key.to_string())))[0]] += 1;
        }
        assert!(hits.iter().all(|&h| h > 50), "{hits:?}");
    }

    #[test]
    fn every_replica_appears_once() {
        let names = ["http://a", "http://b", "http://c", "http://d"];
        for mask in 0..16u32 {
            let views: Vec<View<'_>> = names
                .iter()
                .enumerate()
                .map(|(i, n)| view(n, mask & (1 << i) != 0, i, i == 2))
                .collect();
            for affinity in [None, Some(7)] {
                let mut got = order(&views, affinity);
                got.sort_unstable();
                assert_eq!(got, vec![0, 1, 2, 3], "mask {mask}");
            }
        }
    }
}
