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
//! - What the coach did is one short line in the user's terms, chosen by its rule
//!   ([`coach_warning`]), never by the event's text: a first-run user read "the reply
//!   called one tool after another as if listing them; only its first tool's calls are
//!   read; it was stopped there (after 81 of its 279 bytes so far)" (issue 34). The
//!   detail (bytes, counts, the call) is what `--verbose` prints and the JSON formats
//!   carry. Rules that only nudge the model say nothing at the default verbosity.
//! - Provider mix-ups are found from the settings (an Ollama provider pointed at an
//!   address ending in `/v1`) or from the shape of a 404 (a missing model on Ollama names
//!   the model; a server without `/api/*` answers a bare "Not Found").

use ollm_core::Rule;
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

/// The warning line for what the coach did under `rule`, in the user's terms; `None`
/// for the rules that only steer the model (nudges, repairs), which print nothing
/// unless `--verbose`.
pub(crate) fn coach_warning(rule: Rule) -> Option<&'static str> {
    Some(match rule {
        Rule::RepeatGuard => "the model repeated a call; answered from the earlier result",
        Rule::RepeatLimit => "the model kept asking for the same call; stopped its calls",
        Rule::RunawayStop => "the model's reply kept repeating itself; stopped it",
        Rule::CallLoopCut => "the model kept writing calls; ran the ones before it looped",
        Rule::ListedToolsCut => "the model listed several tools at once; ran only the first",
        Rule::CallsPerReply => "the model made too many calls at once; ran the first 16",
        _ => return None,
    })
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

    /// The rules that warn are the ones whose events warn in core (kind `Repetition`),
    /// plus the repeat guard, whose answer replaces the call's result line; each line is
    /// one short line without counts.
    #[test]
    fn the_coach_warns_in_the_users_terms_for_the_rules_that_stop_or_skip() {
        let warns = [
            Rule::RepeatGuard,
            Rule::RepeatLimit,
            Rule::RunawayStop,
            Rule::CallLoopCut,
            Rule::ListedToolsCut,
            Rule::CallsPerReply,
        ];
        for &rule in Rule::ALL {
            let line = coach_warning(rule);
            assert_eq!(line.is_some(), warns.contains(&rule), "{rule}");
            if let Some(line) = line {
                assert!(line.starts_with("the model") && line.len() < 80, "{line}");
                assert!(!line.contains("bytes"), "{line}");
            }
        }
    }
}
