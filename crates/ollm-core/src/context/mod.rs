//! The context window and what keeps a long conversation inside it.
//!
//! - [`window`]: the one window a chat with a model uses ([`Window`]), settled once per
//!   run from, in order, an explicit setting, what the server reports, and 4096.
//! - [`split`]: pure planning over the history: where the verbatim head ends, which
//!   recent messages stay, what is summarised or dropped; it only ever cuts before a
//!   message that is not a tool result, so a call and its result stay together.
//! - [`summary`]: the [`Compactor`] seam and its default, [`ModelSummary`], which asks
//!   the same model with a fixed prompt.
//! - [`bound`]: cutting a tool result that would take too much of the remaining window.
//! - `calibrate`: what a request really costs, corrected by the server's prompt counts
//!   (the one token-cost calibration in ollm).
//!
//! # Decisions
//! - The window is computed once per run ([`settle_window`]) and sent down as
//!   `options.context_length`, so the number core enforces and the `num_ctx` the Ollama
//!   adapter asks for are one number. OpenAI-compatible servers fix their window at start;
//!   they report it (`/props`, `/v1/models`) and the adapter sends nothing.
//! - Compaction is triggered at [`CompactionConfig::threshold_percent`] of the window
//!   (80% by default, as goose does). The system prompt and the first user message stay
//!   verbatim, and so do the most recent messages up to [`CompactionConfig::keep_percent`]
//!   of the window (at least the newest exchange). Everything between becomes one user
//!   message starting with [`SUMMARY_HEADER`].
//! - When summarising fails or the result is still over the window, the oldest whole
//!   turns after the head are dropped instead, with a `TurnsDropped` warning. A request
//!   over the window is never sent.

pub mod bound;
pub(crate) mod calibrate;
pub mod split;
pub mod summary;
pub mod window;

use serde::{Deserialize, Serialize};

pub use bound::cut_result;
pub use split::{Split, plan_split};
pub use summary::{Compactor, ModelSummary, SUMMARY_HEADER, SUMMARY_PROMPT};
pub use window::{Window, WindowSource, settle_window};

/// When and how a conversation is compacted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompactionConfig {
    /// Whether to compact automatically (`false`: a request over the window is refused,
    /// as before, with a hint to compact by hand).
    pub enabled: bool,
    /// Compact when a request would use more than this share of the window (percent).
    pub threshold_percent: u8,
    /// The share of the window (percent) the most recent messages may keep verbatim.
    pub keep_percent: u8,
    /// A tool result may take at most this share (percent) of the window that is left
    /// when it arrives; the rest is cut with a marker.
    pub tool_output_percent: u8,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            enabled: true,
            threshold_percent: 80,
            keep_percent: 30,
            tool_output_percent: 50,
        }
    }
}

/// What one compaction did (reported as [`crate::ChatEvent::Compacted`]).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Compaction {
    /// The request's size before, in tokens.
    pub tokens_before: usize,
    /// Its size after, in tokens.
    pub tokens_after: usize,
    /// Turns (a message, or a call with its results) replaced by the summary.
    pub turns_summarised: usize,
    /// Turns dropped without a summary.
    pub turns_dropped: usize,
    /// The summary text, when one was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// How long writing the summary took, in milliseconds.
    pub summary_ms: u64,
}
