//! The one retry loop every adapter request goes through: [`Transport::send_retrying`]'s
//! attempts as [`Step`]s, each retry already worded as the one [`WarningKind::Retrying`]
//! warning, and a guaranteed last step (a response or a failure).
//!
//! Chat streams surface a retry as a `Warning` event; `pull` surfaces it as a progress
//! step whose `status` is the same text (its stream carries only progress or an error).

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use ollm_types::{Warning, WarningKind};

use crate::{Attempt, BridgeError, RequestSpec, Transport};

/// One step of a request with retries.
#[derive(Debug)]
pub(crate) enum Step {
    /// An attempt failed and another follows; the warning says when and why.
    Retrying(Warning),
    /// A successful response, body unread: the last step.
    Response(reqwest::Response),
    /// The request failed for good: the last step.
    Failed(BridgeError),
}

/// The attempts of one request.
pub(crate) struct Attempts {
    inner: BoxStream<'static, Attempt>,
}

impl std::fmt::Debug for Attempts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Attempts")
    }
}

impl Attempts {
    /// Starts sending `spec` through `transport` with its retry policy.
    pub(crate) fn new(transport: &Transport, spec: RequestSpec) -> Self {
        Attempts {
            inner: transport.send_retrying(spec),
        }
    }

    /// The next step. Ask again only after [`Step::Retrying`].
    pub(crate) async fn next(&mut self) -> Step {
        match self.inner.next().await {
            Some(Attempt::Retrying {
                retry,
                delay,
                error,
            }) => Step::Retrying(retry_warning(retry, delay, &error)),
            Some(Attempt::Response(response)) => Step::Response(response),
            Some(Attempt::Failed(error)) => Step::Failed(error),
            None => Step::Failed(BridgeError::Incomplete {
                message: "no attempt was made".into(),
            }),
        }
    }
}

/// The warning for a retry: `retry <n> in <delay>: <why>`.
pub(crate) fn retry_warning(retry: u32, delay: Duration, error: &BridgeError) -> Warning {
    Warning::new(
        WarningKind::Retrying,
        format!("retry {retry} in {delay:.1?}: {error}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_names_the_retry_the_delay_and_the_cause() {
        let error = BridgeError::Http {
            status: 503,
            message: "busy".into(),
            body: String::new(),
            retry_after: None,
        };
        let w = retry_warning(2, Duration::from_millis(1500), &error);
        assert_eq!(w.kind, WarningKind::Retrying);
        assert_eq!(w.message, format!("retry 2 in 1.5s: {error}"));
    }
}
