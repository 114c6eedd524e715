//! Ollama's errors in neutral terms: what its statuses and texts mean, with its hints.
//!
//! A leaf, so that the provider (`mod.rs`) and the model management calls
//! (`management.rs`) both use it without importing each other.

use ollm_types::{ProviderError, ProviderErrorKind};

use crate::BridgeError;

/// Maps a transport error to the neutral error with Ollama's hints (see [`refine`]); a
/// connection failure hints `ollama serve`.
pub(super) fn provider_error(err: BridgeError, model: Option<&str>) -> ProviderError {
    let connect = matches!(err, BridgeError::Connect { .. });
    let mut out = refine(ProviderError::from(err), model);
    if connect {
        out.kind = ProviderErrorKind::Connection;
        out.hint = Some("is Ollama running? start it with: ollama serve".to_owned());
    }
    out
}

/// Refines what Ollama's statuses and texts say, whether they came as an HTTP error or as
/// an error line inside a 200 stream: a missing model is `ModelNotFound` with the `ollama
/// pull` hint; "does not support tools/thinking" are capability errors.
pub(super) fn refine(mut error: ProviderError, model: Option<&str>) -> ProviderError {
    let in_stream = error.status.is_none() && error.kind == ProviderErrorKind::Server;
    let said = |text: &str| error.message.contains(text);
    let missing = match error.status {
        Some(404) => model.is_some() || said("not found"),
        _ => in_stream && said("not found") && said("model"),
    };
    let refused = error.status == Some(400) || in_stream;
    let kind = if missing {
        Some(ProviderErrorKind::ModelNotFound)
    } else if refused && said("does not support tools") {
        Some(ProviderErrorKind::ToolsUnsupported)
    } else if refused && said("does not support thinking") {
        Some(ProviderErrorKind::ThinkingUnsupported)
    } else {
        None
    };
    if let Some(kind) = kind {
        error.kind = kind;
        error.retryable = false;
    }
    if missing {
        if let Some(model) = model {
            error.hint = Some(format!("ollama pull {model}"));
        }
    }
    error
}
