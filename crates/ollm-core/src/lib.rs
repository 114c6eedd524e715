//! The ollm runtime: everything between a program and a model server that is not HTTP.
//!
//! - [`provider`]: the [`ProviderAdapter`] trait every backend implements, and the
//!   [`ProviderRegistry`] that names them.
//! - [`tool`]: the [`Tool`] trait, typed tools whose schema schemars derives, and the
//!   [`ToolRegistry`] that validates arguments before anything runs.
//! - [`chat`]: the [`ChatClient`] and its turn loop, which streams [`ChatEvent`]s, runs the
//!   model's tool calls concurrently after each reply, feeds results back and stops at a
//!   turn limit or on cancellation.
//! - [`strategy`]: how tools reach the model: natively, as ReAct text, or through a
//!   schema-constrained reply.
//! - [`tokens`]: token estimates and per-model context limits.
//! - [`history`]: the conversation a client keeps.
//!
//! Adapters live in `ollm-bridge`; this crate never speaks HTTP, so its tests use the
//! scripted providers of `test-utils`.

pub mod chat;
pub mod constrained;
mod error;
pub mod history;
pub mod provider;
pub mod react;
pub mod strategy;
pub mod tokens;
pub mod tool;

pub use chat::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ChatRun};
pub use error::CoreError;
pub use history::History;
pub use provider::{ProviderAdapter, ProviderRegistry, ProviderStream, PullStream};
pub use tool::{Tool, ToolError, ToolRegistry, TypedTool};
