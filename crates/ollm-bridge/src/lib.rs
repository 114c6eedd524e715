//! ollm's adapters: each turns a [`ollm_types::ProviderRequest`] into one server's wire
//! format and that server's bytes back into [`ollm_types::ProviderEvent`]s.
//!
//! Each adapter is a set of pure translators (request to wire body, bytes to events) with
//! table tests, behind the thin I/O shell of [`transport`], which every adapter shares:
//! timeouts, retries with backoff and `Retry-After`, body streaming, proxy rules.

mod error;
pub mod lines;
pub mod ollama;
pub mod openai;
mod retrying;
pub mod transport;

pub use error::{BridgeError, TimeoutPhase, status_kind};
pub use lines::LineSplitter;
pub use ollama::{OllamaConfig, OllamaProvider};
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use transport::{Attempt, HttpConfig, RequestSpec, RetryPolicy, Secret, Transport};
