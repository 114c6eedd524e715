//! A run's events folded into one value ([`ChatReply`]): what [`crate::ChatClient::reply`]
//! returns, and what a caller that streams the events keeps beside them
//! ([`ChatReply::push`]). A leaf: it reads only the events.
//!
//! # Decisions
//! - **One fold.** The CLI's output, the examples and the gateway each folded the events
//!   by hand (issue 36 counted five copies); this is the one they share, so they cannot
//!   disagree on what a run produced.
//! - `answer` is the text of every turn, in order, as streamed (what the CLI prints); a
//!   caller that wants the last turn's text alone reads the last assistant message of
//!   `added`.
//! - A call's result is matched by id to the newest call still waiting for one, so a
//!   model that reuses an id across turns still gets each result on its own call.

use futures::{Stream, StreamExt};
use ollm_types::{FinishReason, Message, ProviderError, ToolCall, Usage, Warning};

use super::event::ChatEvent;
use crate::strategy::ToolMode;

/// One call of a run and its result.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CallRecord {
    /// The call.
    pub call: ToolCall,
    /// Its result text, once it finished (`None`: not answered, such as a call a
    /// [`CallMode::HandBack`](crate::CallMode::HandBack) run handed back).
    pub result: Option<String>,
    /// Whether the result is an error.
    pub is_error: bool,
}

/// What a run produced, folded from its [`ChatEvent`]s.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ChatReply {
    /// The answer text of every turn, in order.
    pub answer: String,
    /// The reasoning text of every turn.
    pub thinking: String,
    /// The tool calls, in order, each with its result.
    pub tool_calls: Vec<CallRecord>,
    /// Usage summed over the run (from its `Finish`).
    pub usage: Usage,
    /// Why the run ended (`None` while it runs, or if its stream ended without a
    /// `Finish`).
    pub finish_reason: Option<FinishReason>,
    /// The error that ended it, if any.
    pub error: Option<ProviderError>,
    /// Warnings, in order.
    pub warnings: Vec<Warning>,
    /// Turns completed.
    pub turns: u32,
    /// How the run offered tools, as last announced (`None`: no tools).
    pub strategy: Option<ToolMode>,
    /// The messages the run added to the client's history (from its `Finish`).
    pub added: Vec<Message>,
}

impl ChatReply {
    /// Folds a whole run.
    pub async fn collect(events: impl Stream<Item = ChatEvent>) -> Self {
        let mut reply = ChatReply::default();
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            reply.push(&event);
        }
        reply
    }

    /// Folds one event in.
    pub fn push(&mut self, event: &ChatEvent) {
        match event {
            ChatEvent::TextDelta { text } => self.answer.push_str(text),
            ChatEvent::ThinkingDelta { text } => self.thinking.push_str(text),
            ChatEvent::ToolCallStarted { call } => self.tool_calls.push(CallRecord {
                call: call.clone(),
                result: None,
                is_error: false,
            }),
            ChatEvent::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => {
                let waiting = (self.tool_calls.iter_mut().rev())
                    .find(|r| &r.call.id == call_id && r.result.is_none());
                if let Some(record) = waiting {
                    record.result = Some(content.clone());
                    record.is_error = *is_error;
                }
            }
            ChatEvent::TurnComplete { turn, .. } => self.turns = *turn,
            ChatEvent::StrategyChosen { strategy, .. } => self.strategy = *strategy,
            ChatEvent::Warning { warning } => self.warnings.push(warning.clone()),
            ChatEvent::Error { error } => self.error = Some(error.clone()),
            ChatEvent::Finish {
                reason,
                usage,
                added,
            } => {
                self.finish_reason = Some(*reason);
                self.usage = *usage;
                self.added.clone_from(added);
            }
            ChatEvent::Compacted { .. } | ChatEvent::Coached { .. } => {}
        }
    }

    /// The calls left without a result: those a [`CallMode::HandBack`] run handed back
    /// for the caller to run (and, in a cancelled stream, those that never finished).
    ///
    /// [`CallMode::HandBack`]: crate::CallMode::HandBack
    pub fn unanswered(&self) -> impl Iterator<Item = &ToolCall> {
        (self.tool_calls.iter())
            .filter(|r| r.result.is_none())
            .map(|r| &r.call)
    }

    /// Whether the run ended well: a `Finish` that is neither an error nor a cancel.
    pub fn is_ok(&self) -> bool {
        matches!(
            self.finish_reason,
            Some(reason) if reason != FinishReason::Error && reason != FinishReason::Cancelled
        )
    }
}
