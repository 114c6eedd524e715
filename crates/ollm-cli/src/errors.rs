//! Short error lines for people: one line saying what happened and one hint, instead of
//! the transport's nested detail (which `--output-format json` and the logs keep).
//!
//! Decisions:
//! - The headline is chosen by the error's kind, never by its text; the server's own
//!   words are kept only where they are the point (a refused request, a missing model).
//! - A retry warning keeps its first clause (`retry 1 in 0.5s: could not connect to URL`;
//!   an HTTP status keeps the server's words after it),
//!   so three retries do not repeat the transport's chain three times. The full text is
//!   what `--verbose` prints (`ollm: detail: ...`) and what the JSON formats carry.
//! - Provider mix-ups are found from the settings (an Ollama provider pointed at an
//!   address ending in `/v1`) or from the shape of a 404 (a missing model on Ollama names
//!   the model; a server without `/api/*` answers a bare "Not Found").

use ollm_types::{ProviderError, ProviderErrorKind, Warning, WarningKind};

use crate::config::{ProviderKind, Settings};
use crate::ui::hint::{self, OPENAI_HINT};

/// One line saying what happened.
pub(crate) fn headline(e: &ProviderError) -> String {
    match e.kind {
        ProviderErrorKind::Connection => "cannot reach the server".to_owned(),
        ProviderErrorKind::IncompleteStream => {
            "the reply ended early (what was shown of it is partial)".to_owned()
        }
        // The rest are already one line in the adapters' words (a timeout says how long
        // it waited; an unsupported command names what the server offers instead).
        _ => e.message.lines().next().unwrap_or_default().to_owned(),
    }
}

/// A warning for people: a retry's cause cut to its first clause, others as they are.
pub(crate) fn short_warning(w: &Warning) -> String {
    let Some((head, cause)) = w.message.split_once(": ") else {
        return w.message.clone();
    };
    if w.kind != WarningKind::Retrying {
        return w.message.clone();
    }
    // An HTTP status keeps the server's words after it (`HTTP 503: server busy`).
    let clauses = if cause.starts_with("HTTP ") { 2 } else { 1 };
    let first = cause.splitn(clauses + 1, ": ").take(clauses);
    let first = first.collect::<Vec<_>>().join(": ");
    format!("{head}: {}", crate::ui::wrap::shorten(&first, 100))
}

/// Whether `settings` point an Ollama provider at an OpenAI-style address.
pub(crate) fn looks_openai(settings: &Settings) -> bool {
    settings.provider.kind == ProviderKind::Ollama && settings.provider.v1_address
}

/// The one hint for `e` under `settings`.
pub(crate) fn hint(e: &ProviderError, settings: &Settings) -> Option<String> {
    if looks_openai(settings) {
        return Some(OPENAI_HINT.to_owned());
    }
    hint::for_error(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the headline and whether the mix-up hint is given, for an error.
    fn check(e: ProviderError, headline_is: &str, foreign: bool) {
        assert_eq!(headline(&e), headline_is);
        assert_eq!(hint::is_foreign_404(&e), foreign, "{e:?}");
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
            "the reply ended early (what was shown of it is partial)",
            false,
        );
        check(
            ProviderError::new(K::Server, "first\nsecond"),
            "first",
            false,
        );
    }

    #[test]
    fn retry_warnings_keep_their_first_clause() {
        let check = |kind, message: &str, short: &str| {
            assert_eq!(short_warning(&Warning::new(kind, message)), short);
        };
        check(
            WarningKind::Retrying,
            "retry 1 in 0.5s: could not connect to http://x/api/chat: error sending request \
             for url (http://x/api/chat): client error (Connect): tcp connect error",
            "retry 1 in 0.5s: could not connect to http://x/api/chat",
        );
        check(
            WarningKind::Retrying,
            "retry 2 in 1.0s: HTTP 503: busy: more",
            "retry 2 in 1.0s: HTTP 503: busy",
        );
        check(WarningKind::Retrying, "no colon", "no colon");
        check(WarningKind::TokenLimit, "cut: at 10", "cut: at 10");
    }
}
