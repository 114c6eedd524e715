//! What a provider's stream yields, and the neutral error every backend failure maps to.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ToolCall;

/// One event of a provider's streamed reply.
///
/// A well-formed stream is any number of deltas, tool calls, usage and warnings, closed by
/// exactly one [`ProviderEvent::Finish`] or [`ProviderEvent::Error`]; nothing follows it.
/// How text is cut into deltas is not part of the contract: an adapter may join the pieces
/// that arrive together (ollm's adapters join those of one network read).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
#[non_exhaustive]
pub enum ProviderEvent {
    /// Answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// Reasoning text, shown apart from the answer.
    ThinkingDelta {
        /// The new reasoning text.
        text: String,
    },
    /// A complete tool call.
    ToolCall {
        /// The call.
        call: ToolCall,
    },
    /// Token counts and timings, usually just before the finish.
    Usage {
        /// The counts.
        usage: Usage,
    },
    /// Something the user should know that does not stop the reply.
    Warning {
        /// The warning.
        warning: Warning,
    },
    /// The reply ended normally.
    Finish {
        /// Why it ended.
        reason: FinishReason,
    },
    /// The reply ended with an error.
    Error {
        /// What went wrong.
        error: ProviderError,
    },
}

/// Token counts and server-side timings of one reply; `None` where the server said nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens the server read (the prompt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    /// Tokens the server generated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u32>,
    /// Time for the whole request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_duration: Option<Duration>,
    /// Time spent loading the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_duration: Option<Duration>,
    /// Time spent reading the prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_eval_duration: Option<Duration>,
    /// Time spent generating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_duration: Option<Duration>,
}

impl Usage {
    /// Adds `other`'s counts and durations to this one (for totals over several turns).
    pub fn accumulate(&mut self, other: &Usage) {
        // Saturating: the counts come from servers, and a huge one must not panic.
        fn add<T: Copy>(a: Option<T>, b: Option<T>, sum: fn(T, T) -> T) -> Option<T> {
            match (a, b) {
                (Some(x), Some(y)) => Some(sum(x, y)),
                (x, None) => x,
                (None, y) => y,
            }
        }
        let tokens = u32::saturating_add;
        let time = Duration::saturating_add;
        self.prompt_tokens = add(self.prompt_tokens, other.prompt_tokens, tokens);
        self.completion_tokens = add(self.completion_tokens, other.completion_tokens, tokens);
        self.total_duration = add(self.total_duration, other.total_duration, time);
        self.load_duration = add(self.load_duration, other.load_duration, time);
        self.prompt_eval_duration =
            add(self.prompt_eval_duration, other.prompt_eval_duration, time);
        self.eval_duration = add(self.eval_duration, other.eval_duration, time);
    }
}

/// Why a reply (or a whole chat run) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// The model finished its answer.
    Stop,
    /// The token limit was reached.
    Length,
    /// The model stopped to call tools.
    ToolCalls,
    /// The consumer cancelled.
    Cancelled,
    /// The chat loop reached its turn limit (chat runs only).
    MaxTurns,
    /// The run ended on an error (chat runs only).
    Error,
    /// The model repeated itself and the run was stopped (chat runs only): it asked for
    /// the same tool call a third time, or its reply kept repeating the same text. A
    /// `Warning` of kind [`WarningKind::Repetition`] says which.
    Repetition,
}

/// A warning that does not end the reply.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// What kind of warning, for programs.
    pub kind: WarningKind,
    /// What happened, for people.
    pub message: String,
}

impl Warning {
    /// A warning.
    pub fn new(kind: WarningKind, message: impl Into<String>) -> Self {
        Warning {
            kind,
            message: message.into(),
        }
    }
}

/// The kinds of [`Warning`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WarningKind {
    /// The prompt uses 90% or more of the context window.
    ContextNearLimit,
    /// The server evidently dropped part of the prompt (it read fewer tokens than sent).
    PromptTruncated,
    /// A request is being retried.
    Retrying,
    /// The model's output had to be repaired or part of it was not understood.
    MalformedOutput,
    /// The model repeated itself: a tool call it already made was not run again, or a
    /// reply that kept repeating the same text was stopped.
    Repetition,
    /// A reply was cut at the generation cap (`max_tokens`).
    TokenLimit,
    /// A tool's result was cut to fit the context window (the text says how much).
    ToolOutputCut,
    /// The oldest turns were dropped to fit the context window (summarising failed or
    /// was not enough).
    TurnsDropped,
    /// Anything else.
    Other,
}

/// A backend failure in neutral terms: what kind, the message, and whether retrying could
/// help. Adapters map their own errors to this; the runtime and the CLI match on `kind`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ProviderError {
    /// What kind of failure.
    pub kind: ProviderErrorKind,
    /// What happened, in the server's words where it gave any.
    pub message: String,
    /// The HTTP status, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Whether the same request could succeed later.
    pub retryable: bool,
    /// What the user can do about it (for example `ollama pull qwen3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl ProviderError {
    /// An error of `kind`, retryable as the kind usually is.
    pub fn new(kind: ProviderErrorKind, message: impl Into<String>) -> Self {
        ProviderError {
            kind,
            message: message.into(),
            status: None,
            retryable: kind.usually_retryable(),
            hint: None,
        }
    }

    /// The same error with an HTTP status.
    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }

    /// The same error with a hint for the user.
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }

    /// The same error, marked retryable or not.
    pub fn with_retryable(mut self, retryable: bool) -> Self {
        self.retryable = retryable;
        self
    }
}

/// The kinds of [`ProviderError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ProviderErrorKind {
    /// The server could not be reached.
    Connection,
    /// The server did not answer in time (first byte or between chunks).
    Timeout,
    /// The model does not exist on the server.
    ModelNotFound,
    /// The model cannot use tools.
    ToolsUnsupported,
    /// The model cannot think.
    ThinkingUnsupported,
    /// The model cannot read images (its reported capabilities lack `vision`).
    VisionUnsupported,
    /// The server is busy or rate limiting (429, 503).
    Busy,
    /// The server refused the request (other 4xx).
    BadRequest,
    /// Authentication failed (401, 403).
    Auth,
    /// The server failed (5xx, or an error inside a 200 stream).
    Server,
    /// The server sent something that does not follow the protocol.
    Protocol,
    /// The stream ended before its final message.
    IncompleteStream,
    /// The request would not fit the model's context window.
    ContextOverflow,
    /// The operation is not offered by this provider.
    Unsupported,
    /// The consumer cancelled.
    Cancelled,
    /// A tool's result was cut to fit the context window (the text says how much).
    ToolOutputCut,
    /// The oldest turns were dropped to fit the context window (summarising failed or
    /// was not enough).
    TurnsDropped,
    /// Anything else.
    Other,
}

impl ProviderErrorKind {
    /// Whether an error of this kind is usually worth retrying.
    pub fn usually_retryable(self) -> bool {
        matches!(
            self,
            Self::Connection | Self::Timeout | Self::Busy | Self::Server
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulating_huge_counts_saturates() {
        let huge = Usage {
            prompt_tokens: Some(u32::MAX),
            total_duration: Some(Duration::MAX),
            ..Usage::default()
        };
        let mut total = huge;
        total.accumulate(&huge);
        assert_eq!(total.prompt_tokens, Some(u32::MAX));
        assert_eq!(total.total_duration, Some(Duration::MAX));
        let mut sum = Usage {
            completion_tokens: Some(2),
            ..Usage::default()
        };
        sum.accumulate(&Usage {
            completion_tokens: Some(3),
            ..Usage::default()
        });
        assert_eq!(sum.completion_tokens, Some(5));
    }
}
