//! What `ollm serve` itself adds to a request's latency ([`Clock`]): the time since the
//! request arrived, less the time its upstream requests were running. A leaf.
//!
//! # Decisions
//! - An upstream request runs from when serve asks the pool to the last of its events
//!   received so far; the rest is serve's: reading the request, the turn loop's work
//!   before it sends (including its own round trips, such as a model's description when
//!   not cached), what it does between an upstream event and the client's bytes, and a
//!   retry's wait. A reply that is only a call is held until the upstream's reply ends,
//!   and that wait is the upstream's, not serve's.
//! - Told as `x-ollm-overhead-ms` (as LiteLLM's `x-litellm-overhead-duration-ms`) when the
//!   headers go: a stream's at its first byte, a whole reply's at its end; and observed in
//!   the `ollm_serve_overhead_seconds` histogram at the same moment.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
// Tokio's instant: the real one, except in a test that pauses time.
use tokio::time::Instant;

/// One request's clock (see the module docs).
#[derive(Debug)]
pub(crate) struct Clock {
    arrived: Instant,
    /// Each upstream request: when it started and when its last event so far came.
    spans: Mutex<Vec<(Instant, Instant)>>,
}

impl Clock {
    /// A clock for a request that arrived now.
    pub(crate) fn start() -> Arc<Clock> {
        Arc::new(Clock {
            arrived: Instant::now(),
            spans: Mutex::new(Vec::new()),
        })
    }

    /// `stream`, an upstream request starting now, timed.
    pub(crate) fn time<S: Stream + Unpin>(self: &Arc<Self>, stream: S) -> Timed<S> {
        let now = Instant::now();
        let span = {
            let mut spans = lock(&self.spans);
            spans.push((now, now));
            spans.len() - 1
        };
        Timed {
            inner: stream,
            clock: Arc::clone(self),
            span,
        }
    }

    /// Serve's own time so far: since the request arrived, less its upstream requests'.
    pub(crate) fn overhead(&self) -> Duration {
        let upstream: Duration = lock(&self.spans)
            .iter()
            .map(|(start, last)| last.saturating_duration_since(*start))
            .sum();
        self.arrived.elapsed().saturating_sub(upstream)
    }
}

/// An upstream request's events, each moving the end of its span.
pub(crate) struct Timed<S> {
    inner: S,
    clock: Arc<Clock>,
    span: usize,
}

impl<S: Stream + Unpin> Stream for Timed<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        let polled = Pin::new(&mut self.inner).poll_next(cx);
        if polled.is_ready() {
            if let Some(span) = lock(&self.clock.spans).get_mut(self.span) {
                span.1 = Instant::now();
            }
        }
        polled
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;

    #[tokio::test]
    async fn the_upstreams_time_is_not_serves() {
        let clock = Clock::start();
        // Serve's own work before the request goes up.
        std::thread::sleep(Duration::from_millis(20));
        let slow = futures::stream::unfold(0, |n| async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            (n < 2).then_some((n, n + 1))
        });
        let mut timed = clock.time(Box::pin(slow));
        while timed.next().await.is_some() {}
        let (overhead, total) = (clock.overhead(), clock.arrived.elapsed());
        assert!(total >= Duration::from_millis(220), "{total:?}");
        // The upstream's 300 ms (two events, then its end) are not serve's; its 20 ms are.
        assert!(
            overhead >= Duration::from_millis(20) && overhead <= total - Duration::from_millis(300),
            "{overhead:?} of {total:?}"
        );
    }
}
