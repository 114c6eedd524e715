//! Short error lines for people: one line saying what happened and one hint, instead of
//! the transport's nested detail (which `--output-format json` and the logs keep).
//!
//! Decisions:
//! - The headline is chosen by the error's kind, never by its text; the server's own
//!   words are kept only where they are the point (a refused request, a missing model).
//! - Provider mix-ups are found from the settings (an Ollama provider pointed at an
//!   address ending in `/v1`) or from the shape of a 404 (a missing model on Ollama names
//!   the model; a server without `/api/*` answers a bare "Not Found").

use ollm_types::{ProviderError, ProviderErrorKind};

use crate::config::{ProviderKind, Settings};

/// The hint for a provider mix-up.
pub(crate) const OPENAI_HINT: &str =
    "this looks like an OpenAI-compatible server: add --provider openai";

/// One line saying what happened.
pub(crate) fn headline(e: &ProviderError) -> String {
    match e.kind {
        ProviderErrorKind::Connection => "cannot reach the server".to_owned(),
        ProviderErrorKind::Timeout => "the server stopped answering".to_owned(),
        ProviderErrorKind::IncompleteStream => "the reply ended early".to_owned(),
        _ => crate::wrap::shorten(e.message.lines().next().unwrap_or_default(), 160),
    }
}

/// Whether `settings` point an Ollama provider at an OpenAI-style address.
pub(crate) fn looks_openai(settings: &Settings) -> bool {
    settings.provider.kind == ProviderKind::Ollama && settings.provider.v1_address
}

/// Whether `e` is a 404 from a server that does not speak Ollama's `/api/*`.
pub(crate) fn is_foreign_404(e: &ProviderError) -> bool {
    e.kind == ProviderErrorKind::ModelNotFound
        && e.status == Some(404)
        && !e.message.to_ascii_lowercase().contains("model")
}

/// The one hint for `e` under `settings`.
pub(crate) fn hint(e: &ProviderError, settings: &Settings) -> Option<String> {
    if looks_openai(settings) || is_foreign_404(e) {
        return Some(OPENAI_HINT.to_owned());
    }
    crate::render::hint_for(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the headline and whether the mix-up hint is given, for an error.
    fn check(e: ProviderError, headline_is: &str, foreign: bool) {
        assert_eq!(headline(&e), headline_is);
        assert_eq!(is_foreign_404(&e), foreign, "{e:?}");
    }

    #[test]
    fn headlines_are_one_line_and_mixups_are_named() {
        use ProviderErrorKind as K;
        check(
            ProviderError::new(
                K::Connection,
                "error sending request for url (http://x/api/chat): client error (Connect)",
            ),
            "cannot reach the server",
            false,
        );
        check(
            ProviderError::new(K::ModelNotFound, "File Not Found").with_status(404),
            "File Not Found",
            true,
        );
        check(
            ProviderError::new(K::ModelNotFound, "model 'q' not found").with_status(404),
            "model 'q' not found",
            false,
        );
        check(
            ProviderError::new(K::IncompleteStream, "the reply stopped (EOF)\nmore"),
            "the reply ended early",
            false,
        );
        check(
            ProviderError::new(K::Server, "first\nsecond"),
            "first",
            false,
        );
    }
}
