//! The ollm runtime: everything between a program and a model server that is not HTTP.
//!
//! ```
//! use std::sync::Arc;
//!
//! use futures::StreamExt;
//! use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ProviderAdapter};
//! use ollm_core::{ProviderStream, ToolRegistry};
//! use ollm_types::{FinishReason, ProviderEvent, ProviderRequest};
//!
//! /// A backend is one trait: this one echoes the last message back.
//! struct Echo;
//!
//! impl ProviderAdapter for Echo {
//!     fn name(&self) -> &str {
//!         "echo"
//!     }
//!
//!     fn chat(&self, request: ProviderRequest) -> ProviderStream {
//!         let text = request.messages.last().map(|m| m.text()).unwrap_or_default();
//!         Box::pin(futures::stream::iter([
//!             ProviderEvent::TextDelta { text },
//!             ProviderEvent::Finish { reason: FinishReason::Stop },
//!         ]))
//!     }
//! }
//!
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let client = ChatClient::new(Arc::new(Echo), ToolRegistry::new(), ChatConfig::for_model("any"));
//! let events: Vec<ChatEvent> =
//!     runtime.block_on(client.chat("hello", ChatOptions::default()).collect());
//!
//! // A run opens by saying how it offers tools (here: none), then streams the reply.
//! assert!(matches!(events[0], ChatEvent::StrategyChosen { strategy: None, .. }));
//! assert_eq!(events[1], ChatEvent::TextDelta { text: "hello".into() });
//! assert!(matches!(events.last(), Some(ChatEvent::Finish { reason: FinishReason::Stop, .. })));
//! assert_eq!(client.history().messages().len(), 2); // the prompt and the answer
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! A tool is a [`TypedTool`] whose arguments are a struct (schemars derives the schema the
//! model sees); `examples/custom-provider` in the repository shows a model calling one.
//!
//! # Modules
//! - [`provider`]: the [`ProviderAdapter`] trait every backend implements, and the
//!   [`ProviderRegistry`] that names them.
//! - [`tool`]: the [`Tool`] trait, typed tools whose schema schemars derives, and the
//!   [`ToolRegistry`] that validates arguments before anything runs.
//! - [`chat`]: the [`ChatClient`] and its turn loop, which streams [`ChatEvent`]s, runs the
//!   model's tool calls concurrently after each reply, feeds results back and stops at a
//!   turn limit or on cancellation.
//! - [`coach`]: every rule by which ollm helps a small model (repeat guard, cuts, nudges,
//!   the tools context, repairs of calls written as text), each named and switched on
//!   its own in [`ChatConfig::coach`].
//! - [`strategy`]: how tools reach the model: natively, as ReAct text, or through a
//!   schema-constrained reply; the seam the turn loop calls (public: [`ToolMode`], and [`Reason`], why a run chose one).
//! - [`recover_calls`]: the tool calls a model wrote as text (every format local models
//!   use), read out of a reply for the tools a request declared; pure, usable on its own.
//! - [`tokens`]: token estimates and per-model context limits.
//! - [`context`]: the one context window of a chat, compaction (the [`Compactor`] seam)
//!   and bounded tool output.
//! - [`history`]: the conversation a client keeps.
//! - [`image`]: images for a prompt, checked and encoded, and which models take them.
//!
//! Adapters live in `ollm-bridge`; this crate never speaks HTTP, so its tests use the
//! scripted providers of `test-utils`.
//!
//! # Design in brief
//! - A chat run is a spawned task feeding a channel; the caller holds a [`ChatRun`]
//!   (a `Stream` of [`ChatEvent`]s plus a cancellation token). Every run ends with exactly
//!   one `Finish`, and every tool call gets exactly one `ToolResult`, whatever happens.
//! - Nothing in a run panics through to the caller or returns `Err`: provider failures,
//!   tool failures and even panics become events or `Error: ...` tool results, and the
//!   client stays usable. Errors outside a run are [`CoreError`] variants.
//! - The history only ever holds whole turns (calls followed by their results, 1:1), so
//!   it can be sent to any server and saved as JSON. See [`chat`] for what a cancelled or
//!   failed run leaves in it, and [`tokens`] for where the context limit comes from.

pub mod chat;
pub mod coach;
pub mod context;
mod error;
pub mod history;
pub mod image;
pub mod provider;
mod recover;
pub mod strategy;
pub mod tokens;
pub mod tool;

pub use chat::{
    CallMode, CallRecord, ChatClient, ChatConfig, ChatEvent, ChatOptions, ChatReply, ChatRun,
    DEFAULT_MAX_TOKENS, DEFAULT_TOOL_TIMEOUT, MAX_CALLS_PER_REPLY,
};
pub use coach::{CoachConfig, Nudge, Rule};
pub use context::{Compaction, CompactionConfig, Compactor, ModelSummary, Window, WindowSource};
pub use error::CoreError;
pub use history::{History, HistoryStats};
pub use image::{Image, ImageFormat};
pub use provider::{ProviderAdapter, ProviderRegistry, ProviderStream, PullStream};
pub use recover::{CallFormat, Rejected, TextCall, TextCalls, recover_calls};
pub use strategy::{AutoRules, Learned, Reason, ToolMode};
pub use tokens::ContextLimits;
pub use tool::{Tool, ToolError, ToolOutcome, ToolRegistry, TypedTool};
