//! ollm's adapters: each turns a [`ollm_types::ProviderRequest`] into one server's wire
//! format and that server's bytes back into [`ollm_types::ProviderEvent`]s.
//!
//! Each adapter is a set of pure translators (request to wire body, bytes to events) with
//! table tests, behind one adapter shell every adapter shares: send, retry before output,
//! decode with the adapter's [`Decoder`] ([`ollama::NdjsonDecoder`],
//! [`openai::SseDecoder`]), map errors with the adapter's hints. Under it, [`transport`]
//! holds timeouts, retries with backoff and `Retry-After`, body streaming and proxy rules.
//! Each adapter has one public address parser (`parse_host`) that the CLI uses.

mod error;
mod host;
pub mod lines;
pub mod ollama;
pub mod openai;
mod repair;
mod retrying;
mod shell;
pub mod transport;

pub use error::{BridgeError, TimeoutPhase, status_kind};
pub use host::redact_url;
pub use lines::LineSplitter;
pub use ollama::{OllamaConfig, OllamaProvider};
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use shell::Decoder;
pub use transport::{Attempt, HttpConfig, RequestSpec, RetryPolicy, Secret, Transport};
