//! The provider-neutral vocabulary of ollm.
//!
//! ```
//! use ollm_types::{Message, ProviderRequest, Role, ToolCall, ToolSchema};
//! use serde_json::json;
//!
//! // A conversation in which the model called a tool and got its result back.
//! let call = ToolCall::new("call-1", "read_file", json!({ "path": "Cargo.toml" }))?;
//! let messages = vec![
//!     Message::user("What is the crate called?"),
//!     Message::assistant_with_calls("", vec![call.clone()]),
//!     Message::tool_result(&call.id, &call.name, "[package]\nname = \"demo\""),
//! ];
//! let mut request = ProviderRequest::new("qwen3", messages);
//! request.tools.push(ToolSchema::new(
//!     "read_file",
//!     "Reads a file",
//!     json!({ "type": "object", "properties": { "path": { "type": "string" } } }),
//! ));
//!
//! // Plain data: it round-trips through JSON; arguments that are not an object are refused.
//! let saved = serde_json::to_string(&request)?;
//! let back: ProviderRequest = serde_json::from_str(&saved)?;
//! assert_eq!(back, request);
//! assert_eq!(back.messages[2].role(), Role::Tool);
//! assert!(ToolCall::new("call-2", "read_file", json!("not an object")).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Everything here is plain data: it can be built, compared, cloned and serialised with
//! serde, and it knows nothing about how it travels. There is no async runtime and no HTTP
//! in this crate, so that a program that only wants to build or store conversations pays
//! for neither. The runtime (`ollm-core`) and the adapters (`ollm-bridge`) speak in these
//! types; each adapter translates them to and from one wire format.
//!
//! Invariants the types keep for their users:
//! - a [`Message`] always has at least one part, and only tool messages carry the id and
//!   name of the call they answer (checked on construction *and* on deserialisation);
//! - a [`ToolCall`]'s arguments are a JSON object, never a string;
//! - durations are [`std::time::Duration`], token counts are `u32`.

mod error;
mod event;
mod message;
mod model;
mod request;
mod tool;

pub use error::TypesError;
pub use event::{
    FinishReason, ProviderError, ProviderErrorKind, ProviderEvent, Usage, Warning, WarningKind,
};
pub use message::{ContentPart, Message, Role};
pub use model::{Capability, ModelDetails, ModelInfo, PullProgress, RunningModel};
pub use request::{GenerationOptions, ProviderRequest, ResponseFormat, Think};
pub use tool::{INVALID_ARGUMENTS_KEY, ToolCall, ToolChoice, ToolSchema, json_type};
