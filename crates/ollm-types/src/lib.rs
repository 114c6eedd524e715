//! The provider-neutral vocabulary of ollm.
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
