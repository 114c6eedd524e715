//! The chat client and its turn loop.
//!
//! SKELETON: the public shape below is settled; the loop is completed with the foundation
//! issue.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use futures::stream::BoxStream;
use ollm_types::{FinishReason, GenerationOptions, ProviderError, Think, ToolCall, Usage, Warning};
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::strategy::ToolMode;
use crate::tokens::ContextLimits;
use crate::{ProviderAdapter, ToolRegistry};

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
        /// The result text the model will read.
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
    },
}

/// Settings of a chat client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ChatConfig {
    /// The model to talk to.
    pub model: String,
    /// The system prompt.
    pub system: Option<String>,
    /// The most provider round trips one `chat` call may make (default 10).
    pub max_turns: u32,
    /// How tools reach the model.
    pub tool_mode: ToolMode,
    /// Sampling options.
    pub options: GenerationOptions,
    /// Whether to think.
    pub think: Option<Think>,
    /// Context limits per model.
    pub context_limits: ContextLimits,
}

impl Default for ChatConfig {
    fn default() -> Self {
        ChatConfig {
            model: String::new(),
            system: None,
            max_turns: 10,
            tool_mode: ToolMode::default(),
            options: GenerationOptions::default(),
            think: None,
            context_limits: ContextLimits::default(),
        }
    }
}

/// Per-call overrides of a [`ChatConfig`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ChatOptions {
    /// Tool mode for this call.
    pub tool_mode: Option<ToolMode>,
    /// Sampling options for this call.
    pub options: Option<GenerationOptions>,
    /// Thinking for this call.
    pub think: Option<Think>,
    /// Turn limit for this call.
    pub max_turns: Option<u32>,
    /// Offer no tools in this call.
    pub no_tools: bool,
    /// Images attached to the prompt (base64 data, MIME type).
    pub images: Vec<(String, String)>,
}

/// A running chat: a stream of [`ChatEvent`]s ending with `Finish`, and a handle to
/// cancel it. Dropping it cancels too.
pub struct ChatRun {
    events: BoxStream<'static, ChatEvent>,
    cancel: CancellationToken,
}

impl ChatRun {
    /// Cancels the run: the stream ends with `Finish { reason: cancelled }` promptly,
    /// running tools are stopped and none starts after.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// A token that cancels this run (for signal handlers).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }
}

impl Stream for ChatRun {
    type Item = ChatEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ChatEvent>> {
        self.events.as_mut().poll_next(cx)
    }
}

/// A conversation with one model through one provider, with tools.
pub struct ChatClient {
    provider: Arc<dyn ProviderAdapter>,
    tools: Arc<ToolRegistry>,
    config: ChatConfig,
}

impl ChatClient {
    /// A client.
    pub fn new(
        provider: Arc<dyn ProviderAdapter>,
        tools: ToolRegistry,
        config: ChatConfig,
    ) -> Self {
        ChatClient {
            provider,
            tools: Arc::new(tools),
            config,
        }
    }

    /// Sends `prompt` and runs turns until the model answers without tool calls, the turn
    /// limit is reached, an error occurs or the run is cancelled.
    pub fn chat(&self, prompt: impl Into<String>, options: ChatOptions) -> ChatRun {
        let _ = (
            prompt.into(),
            options,
            &self.provider,
            &self.tools,
            &self.config,
        );
        let cancel = CancellationToken::new();
        ChatRun {
            events: Box::pin(futures::stream::empty()),
            cancel,
        }
    }
}
