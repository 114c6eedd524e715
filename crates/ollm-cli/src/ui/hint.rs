//! The hints printed under an error: what to try next, in the CLI's words, after the
//! adapter's own hint when it has one.
//!
//! # Decisions
//! - Chosen by the error's kind and status, never by its text, except a 404 without the
//!   word "model", which is how a server without Ollama's `/api/*` answers.
//! - Part of the leaf [`crate::ui`]: the renderer, the chat and `main` all print these,
//!   and none of them may be imported by the others for it. The hint that also needs the
//!   settings (an Ollama provider at a `/v1` address) is `errors::hint`, over this one.

use ollm_types::{ProviderError, ProviderErrorKind};

/// The hint for a provider mix-up.
pub(crate) const OPENAI_HINT: &str =
    "this looks like an OpenAI-compatible server: add --provider openai";

/// Whether `e` is a 404 from a server that does not speak Ollama's `/api/*`.
pub(crate) fn is_foreign_404(e: &ProviderError) -> bool {
    e.kind == ProviderErrorKind::ModelNotFound
        && e.status == Some(404)
        && !e.message.to_ascii_lowercase().contains("model")
}

/// The hint shown with `e`: the adapter's (which speaks of the server), followed by this
/// CLI's own for the error's kind (which names `ollm` commands; adapters never do).
pub(crate) fn for_error(e: &ProviderError) -> Option<String> {
    if is_foreign_404(e) {
        return Some(OPENAI_HINT.to_owned());
    }
    let cli = match e.kind {
        ProviderErrorKind::ModelNotFound => Some("`ollm list` shows the models the server has"),
        ProviderErrorKind::Connection => {
            Some("`ollm config show` prints the provider and base URL in use")
        }
        ProviderErrorKind::VisionUnsupported => {
            Some("`ollm show MODEL` lists its capabilities; pick a model with `vision`")
        }
        ProviderErrorKind::ContextOverflow => Some(
            "ollm compacts a long conversation by itself unless `--no-compact` (or \
             `compact = false`) turns it off; in chat, `/compact` compacts it now and \
             `/clear` starts over",
        ),
        _ => None,
    };
    match (&e.hint, cli) {
        (Some(adapter), Some(cli)) => Some(format!("{adapter}; {cli}")),
        (Some(adapter), None) => Some(adapter.clone()),
        (None, cli) => cli.map(str::to_owned),
    }
}
