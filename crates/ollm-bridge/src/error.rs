//! The one error type of the bridge, and its mapping to the neutral [`ProviderError`].

use std::time::Duration;

use ollm_types::{ProviderError, ProviderErrorKind};

/// Which wait ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeoutPhase {
    /// Waiting for the response headers (a model may be loading).
    FirstByte,
    /// Waiting for the next chunk of a body.
    Idle,
}

impl std::fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutPhase::FirstByte => "waiting for the reply to start",
            TimeoutPhase::Idle => "between two parts of the reply",
        })
    }
}

/// What went wrong between ollm and a server.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BridgeError {
    /// The configured address is not a usable URL.
    #[error("invalid server address {url:?}: {message}")]
    InvalidUrl {
        /// The address as given.
        url: String,
        /// Why it is not usable.
        message: String,
    },
    /// A pool was given no replicas.
    #[error("a pool needs at least one replica")]
    EmptyPool,
    /// The server could not be reached.
    #[error("could not connect to {url}: {message}")]
    Connect {
        /// The URL tried.
        url: String,
        /// What the network layer said.
        message: String,
    },
    /// A wait ran out.
    #[error("the server sent nothing for {}s ({phase})", after.as_secs_f64())]
    Timeout {
        /// Which wait.
        phase: TimeoutPhase,
        /// How long it was.
        after: Duration,
    },
    /// The server answered with an error status.
    #[error("HTTP {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The server's error text (from a JSON `error` field when there is one).
        message: String,
        /// The raw body, capped.
        body: String,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// The connection broke while reading a body.
    #[error("the connection broke while reading the reply: {message}")]
    Body {
        /// What the network layer said.
        message: String,
    },
    /// A line or event of the body is not what the protocol says.
    #[error("malformed line from the server ({message}): {line}")]
    Decode {
        /// The offending line, capped.
        line: String,
        /// What the parser said.
        message: String,
    },
    /// A line grew past the cap without ending.
    #[error("a line from the server exceeded {limit} bytes")]
    LineTooLong {
        /// The cap in bytes.
        limit: usize,
    },
    /// One server-sent event's data grew past the cap without the event ending.
    #[error("an event from the server exceeded {limit} bytes")]
    EventTooLarge {
        /// The cap in bytes.
        limit: usize,
    },
    /// The body ended before the protocol's final message.
    #[error("the reply ended early: {message}")]
    Incomplete {
        /// What was missing.
        message: String,
    },
    /// The server reported an error inside a successful (200) stream.
    #[error("the server reported an error: {message}")]
    InStream {
        /// The server's text.
        message: String,
    },
}

impl BridgeError {
    /// Whether sending the same request again could succeed: connection failures and the
    /// statuses 408, 409, 429 and 5xx (but 501). Timeouts are not retried: a model that
    /// is still loading would be asked to load again; nor is a server's refusal of tools
    /// (llama-server answers it with a 500).
    pub fn is_retryable(&self) -> bool {
        match self {
            BridgeError::Connect { .. } => true,
            BridgeError::Http { status, .. } if self.tools_refusal().is_none() => {
                matches!(status, 408 | 409 | 429) || (*status >= 500 && *status != 501)
            }
            _ => false,
        }
    }

    /// When this is an OpenAI-compatible server refusing the request's `tools` because it
    /// was started without tool support: the hint naming the server flags that enable it.
    /// llama-server without `--jinja` says "tools param requires --jinja flag"; vLLM
    /// without `--enable-auto-tool-choice --tool-call-parser` answers 400 naming both.
    pub fn tools_refusal(&self) -> Option<&'static str> {
        let BridgeError::Http { body, message, .. } = self else {
            return None;
        };
        let said = |text: &str| body.contains(text) || message.contains(text);
        if said("requires --jinja") {
            Some(
                "llama-server offers native tool calls only when started with --jinja \
                 (restart it with --jinja); until then ollm describes the tools in the prompt",
            )
        } else if said("--enable-auto-tool-choice") || said("--tool-call-parser") {
            Some(
                "vLLM offers native tool calls only when started with \
                 --enable-auto-tool-choice --tool-call-parser <parser> (hermes for Qwen); \
                 until then ollm describes the tools in the prompt",
            )
        } else {
            None
        }
    }

    /// The server's `Retry-After`, when it sent one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            BridgeError::Http { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Caps `text` at `max` bytes (on a character boundary) for keeping in an error.
    pub(crate) fn cap(text: &str, max: usize) -> String {
        if text.len() <= max {
            return text.to_owned();
        }
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &text[..end])
    }
}

impl From<BridgeError> for ProviderError {
    fn from(err: BridgeError) -> Self {
        let retryable = err.is_retryable();
        let (kind, status) = match &err {
            BridgeError::InvalidUrl { .. } | BridgeError::EmptyPool => {
                (ProviderErrorKind::BadRequest, None)
            }
            BridgeError::Connect { .. } | BridgeError::Body { .. } => {
                (ProviderErrorKind::Connection, None)
            }
            BridgeError::Timeout { .. } => (ProviderErrorKind::Timeout, None),
            BridgeError::Http { status, .. } => (status_kind(*status), Some(*status)),
            BridgeError::Decode { .. }
            | BridgeError::LineTooLong { .. }
            | BridgeError::EventTooLarge { .. } => (ProviderErrorKind::Protocol, None),
            BridgeError::Incomplete { .. } => (ProviderErrorKind::IncompleteStream, None),
            BridgeError::InStream { .. } => (ProviderErrorKind::Server, None),
        };
        let message = match &err {
            BridgeError::Http { message, .. } => message.clone(),
            other => other.to_string(),
        };
        ProviderError {
            kind,
            message,
            status,
            retryable,
            hint: None,
        }
    }
}

/// The neutral kind of an HTTP error status. Adapters refine it where the body says more
/// (a missing model, a capability the model lacks).
pub fn status_kind(status: u16) -> ProviderErrorKind {
    match status {
        401 | 403 => ProviderErrorKind::Auth,
        404 => ProviderErrorKind::ModelNotFound,
        408 => ProviderErrorKind::Timeout,
        // 529: Anthropic's "overloaded".
        409 | 429 | 503 | 529 => ProviderErrorKind::Busy,
        400..=499 => ProviderErrorKind::BadRequest,
        _ => ProviderErrorKind::Server,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_statuses_follow_the_field_notes() {
        let http = |status| BridgeError::Http {
            status,
            message: String::new(),
            body: String::new(),
            retry_after: None,
        };
        for s in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert!(http(s).is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 422, 501] {
            assert!(!http(s).is_retryable(), "{s}");
        }
        let refusal = BridgeError::Http {
            status: 500,
            message: "tools param requires --jinja flag".into(),
            body: String::new(),
            retry_after: None,
        };
        assert!(!refusal.is_retryable());
    }

    #[test]
    fn cap_respects_char_boundaries() {
        assert_eq!(BridgeError::cap("héllo", 2), "h...");
        assert_eq!(BridgeError::cap("abc", 5), "abc");
    }
}
