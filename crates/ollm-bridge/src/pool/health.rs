//! Health checks, one per kind of server.
//!
//! # Decisions
//! - llama.cpp: `GET /health` (beside `/v1`): 200 is healthy; 503 while the model loads
//!   is not. Ollama: `GET /api/version` answers, then `GET /api/ps` lists the models
//!   loaded, which routing prefers. Any other OpenAI-compatible server (vLLM, LM Studio):
//!   `GET /v1/models` answers.
//! - The checks go through the replica's own adapter where it has the call (version, ps,
//!   models), so they use its address, key and headers; llama.cpp's `/health` is not an
//!   adapter call and is a plain GET with a short timeout.

use std::sync::Arc;
use std::time::Duration;

use ollm_core::ProviderAdapter;

/// The kind of server a replica is, which decides its health check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReplicaKind {
    /// llama.cpp's `llama-server`: `GET /health`.
    LlamaCpp,
    /// Ollama's native API: `GET /api/version` and `GET /api/ps`.
    Ollama,
    /// Any other OpenAI-compatible server (vLLM, LM Studio): `GET /v1/models`.
    OpenAi,
}

/// What one check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Health {
    /// Whether the replica answered as working.
    pub(crate) healthy: bool,
    /// The models it reports loaded in memory (Ollama only).
    pub(crate) loaded: Vec<String>,
}

/// How long one check may take.
pub(crate) const CHECK_TIMEOUT: Duration = Duration::from_secs(3);

/// Checks one replica.
pub(crate) async fn probe(
    kind: ReplicaKind,
    base_url: &str,
    adapter: &Arc<dyn ProviderAdapter>,
    http: &reqwest::Client,
) -> Health {
    let checked = tokio::time::timeout(CHECK_TIMEOUT, async {
        match kind {
            ReplicaKind::LlamaCpp => Health {
                healthy: llama_health(base_url, http).await,
                loaded: Vec::new(),
            },
            ReplicaKind::Ollama => match adapter.server_version().await {
                Ok(_) => Health {
                    healthy: true,
                    loaded: adapter
                        .running_models()
                        .await
                        .map(|r| r.into_iter().map(|m| m.name).collect())
                        .unwrap_or_default(),
                },
                Err(_) => Health::default(),
            },
            ReplicaKind::OpenAi => Health {
                healthy: adapter.list_models().await.is_ok(),
                loaded: Vec::new(),
            },
        }
    })
    .await;
    checked.unwrap_or_default()
}

/// llama.cpp's `/health` at the server's root (the base URL without its `/v1`).
async fn llama_health(base_url: &str, http: &reqwest::Client) -> bool {
    let url = format!("{}/health", server_root(base_url));
    match http.get(url).timeout(CHECK_TIMEOUT).send().await {
        Ok(response) => response.status().is_success(),
        Err(_) => false,
    }
}

/// `base_url` without a trailing `/` and `/v1`.
pub(crate) fn server_root(base_url: &str) -> &str {
    let trimmed = base_url.trim_end_matches('/');
    trimmed.strip_suffix("/v1").unwrap_or(trimmed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_drops_the_api_path() {
        let check = |url, want| assert_eq!(server_root(url), want, "{url}");
        check("http://h:8080/v1", "http://h:8080");
        check("http://h:8080/v1/", "http://h:8080");
        check("http://h:8080", "http://h:8080");
        check("http://h:8080/proxy/v1", "http://h:8080/proxy");
    }
}
