//! The crate's one error type: what makes a gateway's settings unusable.
//!
//! # Decisions
//! - Settings are checked once, when the router is built ([`crate::router`]), so a bad
//!   header name or a zero limit is the caller's error at start-up, not a 500 on the
//!   first request. Errors while serving a request are answered to the client in
//!   OpenAI's error shape and logged (`http.rs`); they never reach this type.

use thiserror::Error;

/// Why a gateway could not be built from its settings.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ServeError {
    /// A repair policy that is not `off`, `flag` or `on`.
    #[error("repair is `off`, `flag` or `on`, not {0:?}")]
    UnknownPolicy(String),
    /// `max_in_flight` of zero would refuse every request.
    #[error("max_in_flight must be at least 1")]
    NoCapacity,
    /// A header to forward whose name is not a valid HTTP header name.
    #[error("forward_headers: {0:?} is not a valid HTTP header name")]
    HeaderName(String),
}
