//! What a run tells its caller: the [`ChatEvent`]s, and the results recorded for calls
//! that never ran to the end. A leaf: every other part of the chat module may use it.

use ollm_types::{FinishReason, Message, ProviderError, ToolCall, Usage, Warning};
use serde::{Deserialize, Serialize};

use crate::coach::Rule;
use crate::context::Compaction;
use crate::strategy::{Reason, ToolMode};

/// The result recorded for a call whose tool had not finished when the run was cancelled.
pub const CANCELLED_RESULT: &str = "Error: cancelled before the tool finished";

/// The result recorded for a call of a reply stopped because it kept repeating itself.
pub const STOPPED_RESULT: &str = "Error: not run: the reply was stopped because it kept \
     repeating itself";

/// One event of a chat run, in the order things happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type")]
#[non_exhaustive]
pub enum ChatEvent {
    /// Answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// Reasoning text.
    ThinkingDelta {
        /// The new text.
        text: String,
    },
    /// The model asked for a tool call; it runs after the reply ends.
    ToolCallStarted {
        /// The call.
        call: ToolCall,
    },
    /// A tool call finished (exactly one per call).
    ToolResult {
        /// The call answered.
        call_id: String,
        /// The tool.
        name: String,
        /// The tool's whole result text. The model reads it, unless it was cut to fit
        /// the window: then a `ToolOutputCut` warning follows and the history holds the
        /// cut text (see the module docs).
        content: String,
        /// Whether it is an error result (unknown tool, invalid arguments, failure,
        /// denial, cancellation).
        is_error: bool,
    },
    /// One provider round trip (and its tool calls) is done.
    TurnComplete {
        /// The turn's number, from 1.
        turn: u32,
        /// The turn's usage, where the server reported it.
        usage: Usage,
    },
    /// How this run offers tools, and why; sent once at the start of a run that got as
    /// far as settling its settings, and again if a fallback changes it.
    StrategyChosen {
        /// The strategy (`native`, `react` or `constrained`); `None` when no tools are
        /// offered.
        strategy: Option<ToolMode>,
        /// Why, in words for people (`ollm run --verbose` prints it): `cause`'s text.
        reason: String,
        /// Why, typed.
        cause: Reason,
    },
    /// The history was compacted to fit the context window (before a request, or by
    /// [`ChatClient::compact`](crate::ChatClient::compact)): older turns replaced by a
    /// summary, or dropped.
    Compacted {
        /// What was done, with the sizes before and after.
        compaction: Compaction,
    },
    /// The coach acted on the model's behalf (see [`crate::coach`]): which rule, and what
    /// it did. A front end words it for its users from `rule`; `detail` is the whole
    /// story (counts, sizes, the text said), for logs and `--verbose`. A rule that also
    /// warns (kind `Repetition`: `repeat-limit`, `runaway-stop`, `call-loop-cut`,
    /// `listed-tools-cut`, `calls-per-reply`) sends this event first, then the warning.
    Coached {
        /// The rule that acted.
        rule: Rule,
        /// The call it answered, when it answered one (`repeat-guard`: the call's
        /// `ToolResult` follows).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        call_id: Option<String>,
        /// What it did, in full.
        detail: String,
    },
    /// Something the user should know.
    Warning {
        /// The warning.
        warning: Warning,
    },
    /// The run failed; a `Finish` with reason `error` follows.
    Error {
        /// What went wrong.
        error: ProviderError,
    },
    /// The run ended; always the last event.
    Finish {
        /// Why.
        reason: FinishReason,
        /// Usage summed over the run's turns.
        usage: Usage,
        /// The messages the run added to the client's history, in order (the prompt
        /// first); empty when the run left the history as it was.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        added: Vec<Message>,
    },
}

impl ChatEvent {
    /// The announcement of `strategy`, chosen for `cause` (its words as `reason`).
    pub(crate) fn strategy_chosen(strategy: Option<ToolMode>, cause: Reason) -> Self {
        ChatEvent::StrategyChosen {
            strategy,
            reason: cause.to_string(),
            cause,
        }
    }
}
