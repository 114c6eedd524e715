//! Exact token counts from the server's own tokenizer, where it has one.
//!
//! Two dialects exist, both at the server root (not under `/v1`):
//! - llama.cpp: `POST /tokenize {"content": text}` answers `{"tokens": [...]}`;
//! - vLLM: `POST /tokenize {"model": m, "prompt": text}` answers `{"count": n, ...}`.
//!
//! The first count probes llama.cpp's form, then vLLM's, and caches which one worked, or
//! that neither did (Ollama, LM Studio), in which case counting answers `Ok(None)` (the
//! caller falls back to its estimate) without asking again. Only answers that say "no
//! such endpoint" (404, 405, 400, 422, 501, a body that is not a tokenize reply) settle the
//! probe; a server that is down or failing leaves it open for the next call.

use std::sync::Mutex;

use reqwest::Method;
use serde_json::json;

use super::wire::TokenizeReply;
use crate::{BridgeError, RequestSpec, Transport};

/// Which tokenize dialect the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// Not probed yet.
    Unknown,
    /// llama.cpp's `{"content"}`.
    LlamaCpp,
    /// vLLM's `{"model", "prompt"}`.
    Vllm,
    /// No tokenizer endpoint.
    Absent,
}

/// The probed dialect, shared by all calls of one provider.
#[derive(Debug)]
pub(crate) struct Tokenizer {
    root: Transport,
    dialect: Mutex<Dialect>,
}

impl Tokenizer {
    /// A tokenizer client for the server whose root (without `/v1`) is `root`.
    pub(crate) fn new(root: Transport) -> Self {
        Tokenizer {
            root,
            dialect: Mutex::new(Dialect::Unknown),
        }
    }

    /// The dialect found so far.
    pub(crate) fn dialect(&self) -> Dialect {
        self.dialect.lock().map_or(Dialect::Unknown, |d| *d)
    }

    fn settle(&self, dialect: Dialect) {
        if let Ok(mut d) = self.dialect.lock() {
            *d = dialect;
        }
    }

    /// The token count of `text`, `Ok(None)` when the server has no tokenizer endpoint.
    pub(crate) async fn count(
        &self,
        model: &str,
        text: &str,
    ) -> Result<Option<usize>, BridgeError> {
        match self.dialect() {
            Dialect::LlamaCpp => self.ask(Dialect::LlamaCpp, model, text).await.map(Some),
            Dialect::Vllm => self.ask(Dialect::Vllm, model, text).await.map(Some),
            Dialect::Absent => Ok(None),
            Dialect::Unknown => {
                for dialect in [Dialect::LlamaCpp, Dialect::Vllm] {
                    match self.ask(dialect, model, text).await {
                        Ok(n) => {
                            self.settle(dialect);
                            return Ok(Some(n));
                        }
                        Err(e) if not_offered(&e) => {}
                        Err(e) => return Err(e),
                    }
                }
                self.settle(Dialect::Absent);
                Ok(None)
            }
        }
    }

    async fn ask(&self, dialect: Dialect, model: &str, text: &str) -> Result<usize, BridgeError> {
        let body = match dialect {
            Dialect::Vllm => json!({"model": model, "prompt": text}),
            _ => json!({"content": text}),
        };
        let reply: TokenizeReply = self
            .root
            .fetch_json(RequestSpec::json(Method::POST, "/tokenize", &body))
            .await?;
        reply.count().ok_or_else(|| BridgeError::Decode {
            line: String::new(),
            message: "the tokenize reply has neither `tokens` nor `count`".into(),
        })
    }
}

/// Whether `error` means "this endpoint or body form is not offered here".
fn not_offered(error: &BridgeError) -> bool {
    match error {
        BridgeError::Http { status, .. } => matches!(status, 400 | 404 | 405 | 415 | 422 | 501),
        BridgeError::Decode { .. } => true,
        _ => false,
    }
}
