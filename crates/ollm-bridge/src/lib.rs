//! ollm's adapters: each turns a [`ollm_types::ProviderRequest`] into one server's wire
//! format and that server's bytes back into [`ollm_types::ProviderEvent`]s.
//!
//! ```no_run
//! use std::sync::Arc;
//!
//! use futures::StreamExt;
//! use ollm_bridge::{OllamaConfig, OllamaProvider};
//! use ollm_core::{ChatClient, ChatConfig, ChatEvent, ChatOptions, ToolRegistry};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // The server at `OLLAMA_HOST` (127.0.0.1:11434 when unset).
//! let provider = OllamaProvider::new(OllamaConfig::from_env()?)?;
//! let client = ChatClient::new(Arc::new(provider), ToolRegistry::new(), ChatConfig::for_model("qwen3"));
//! let mut run = client.chat("Why is the sky blue?", ChatOptions::default());
//! while let Some(event) = run.next().await {
//!     if let ChatEvent::TextDelta { text } = event {
//!         print!("{text}");
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! `OpenAiProvider` with an `OpenAiConfig` does the same for llama-server, vLLM and other
//! OpenAI-compatible servers, and `AnthropicProvider` with an `AnthropicConfig` for servers
//! of Anthropic's Messages API (llama-server, Ollama, Anthropic); `examples/ollama-agent` in the repository adds the built-in
//! tools of `ollm-tools`.
//!
//! Each adapter is a set of pure translators (request to wire body, bytes to events) with
//! table tests, behind one adapter shell every adapter shares: send, retry before output,
//! decode with the adapter's [`Decoder`] ([`ollama::NdjsonDecoder`],
//! [`openai::SseDecoder`], [`anthropic::MessagesDecoder`]), map errors with the adapter's hints. Under it, [`transport`]
//! holds timeouts, retries with backoff and `Retry-After`, body streaming and proxy rules.
//! Each adapter has one public address parser (`parse_host`) that the CLI uses.

pub mod anthropic;
mod error;
mod host;
pub mod lines;
pub mod ollama;
pub mod openai;
mod pool;
mod repair;
mod retrying;
mod shell;
pub mod transport;

pub use anthropic::{AnthropicConfig, AnthropicProvider};
pub use error::{BridgeError, TimeoutPhase, status_kind};
pub use host::redact_url;
pub use lines::LineSplitter;
pub use ollama::{OllamaConfig, OllamaProvider};
pub use openai::{OpenAiConfig, OpenAiProvider};
pub use pool::{PoolConfig, PoolEvent, ProviderPool, Replica, ReplicaKind, ReplicaStatus};
pub use shell::Decoder;
pub use transport::{
    Attempt, BodyChunks, HttpConfig, KeyHeader, RequestSpec, RetryPolicy, Secret, Transport,
};
