//! The one context window of a chat with a model: decided here and nowhere else.
//!
//! # Decisions
//! - Adapters report facts only ([`ModelInfo`]): the trained length
//!   (`context_length`), the window the server says it runs with (`window`: llama.cpp's
//!   `n_ctx`, vLLM's `max_model_len`, a `num_ctx` among an Ollama model's parameters),
//!   and whether the server sizes the window per request (`window_per_request`:
//!   Ollama). The window settled here goes down on every request as
//!   `options.context_length`, and an adapter sends exactly that (Ollama: as `num_ctx`)
//!   or nothing, so what core enforces and what the server is asked for are one number.
//! - Order: an explicit setting (the run's `options.context_length`, which the CLI fills
//!   from `--context-length`; then the per-model table [`ContextLimits::models`]; then
//!   [`ContextLimits::every_model`], the CLI's config `context_length`) > what the server
//!   reports as the window it runs with ([`ModelInfo::window`]) > on a server that sizes
//!   the window per request, the trained length capped at [`ContextLimits::trained_cap`]
//!   (8192: memory grows with the window; Ollama's own default, 2048-4096, cuts the
//!   front of longer prompts silently) > [`ContextLimits::default`] (4096), capped by
//!   the trained length when that is smaller. On a server that fixes its window at
//!   start, a trained length is never used to *raise* the window: such servers run with
//!   less than the model was trained for and cut the front.
//! - Until issue 26 the Ollama adapter made the trained-length-and-cap decision itself
//!   (`OllamaConfig::num_ctx`, `num_ctx_cap`) and reported its result as the window;
//!   now it only reports the facts above.

use ollm_types::ModelInfo;
use serde::{Deserialize, Serialize};

use crate::tokens::ContextLimits;

/// Where a [`Window`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WindowSource {
    /// A setting: the run's `context_length` or the per-model table.
    Setting,
    /// The server's report (`/props`, `/v1/models`, a `num_ctx` in Ollama's `/api/show`).
    Server,
    /// The trained length the server reports, capped at [`ContextLimits::trained_cap`],
    /// on a server that sizes the window per request.
    Trained,
    /// The default.
    Default,
}

impl WindowSource {
    /// A short name for display (`setting`, `server`, `trained`, `default`).
    pub fn as_str(self) -> &'static str {
        match self {
            WindowSource::Setting => "setting",
            WindowSource::Server => "server",
            WindowSource::Trained => "trained",
            WindowSource::Default => "default",
        }
    }
}

/// The context window a chat uses, in tokens, and where it came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// Tokens.
    pub tokens: usize,
    /// Its source.
    pub source: WindowSource,
}

/// The window for `model` (see the module docs for the order).
pub fn settle_window(
    limits: &ContextLimits,
    model: &str,
    requested: Option<u32>,
    info: Option<&ModelInfo>,
) -> Window {
    let setting = requested
        .filter(|n| *n > 0)
        .map(|n| n as usize)
        .or_else(|| limits.setting_for(model));
    if let Some(tokens) = setting {
        return Window {
            tokens,
            source: WindowSource::Setting,
        };
    }
    if let Some(tokens) = info.and_then(|i| i.window).filter(|n| *n > 0) {
        return Window {
            tokens: tokens as usize,
            source: WindowSource::Server,
        };
    }
    let trained = info
        .and_then(|i| i.context_length)
        .filter(|n| *n > 0)
        .map(|n| n as usize);
    if let Some(trained) = trained.filter(|_| info.is_some_and(|i| i.window_per_request)) {
        return Window {
            tokens: trained.min(limits.trained_cap),
            source: WindowSource::Trained,
        };
    }
    Window {
        tokens: trained.map_or(limits.default, |t| t.min(limits.default)),
        source: WindowSource::Default,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        (table, every): (Option<usize>, Option<usize>),
        requested: Option<u32>,
        window: Option<u32>,
        trained: Option<u32>,
        want: (usize, WindowSource),
    ) {
        check_server(false, (table, every), requested, window, trained, want);
    }

    fn check_server(
        per_request: bool,
        (table, every): (Option<usize>, Option<usize>),
        requested: Option<u32>,
        window: Option<u32>,
        trained: Option<u32>,
        want: (usize, WindowSource),
    ) {
        let mut limits = ContextLimits::default();
        if let Some(t) = table {
            limits = limits.with_model("m", t);
        }
        if let Some(e) = every {
            limits = limits.with_every_model(e);
        }
        let info = ModelInfo {
            window,
            context_length: trained,
            window_per_request: per_request,
            ..ModelInfo::default()
        };
        let got = settle_window(&limits, "m", requested, Some(&info));
        assert_eq!((got.tokens, got.source), want, "per request: {per_request}");
    }

    #[test]
    fn a_server_sized_per_request_gets_the_trained_length_capped() {
        use WindowSource::*;
        let none = (None, None);
        // (server window, trained, want): Ollama's facts.
        for (window, trained, want) in [
            (None, Some(40960), (8192, Trained)),
            (None, Some(2048), (2048, Trained)),
            // A `num_ctx` among the model's parameters is the server's window.
            (Some(16384), Some(40960), (16384, Server)),
            // No trained length (an old server): the default.
            (None, None, (4096, Default)),
        ] {
            check_server(true, none, None, window, trained, want);
        }
        // A setting still wins.
        check_server(true, none, Some(3000), None, Some(40960), (3000, Setting));
        check_server(
            true,
            (None, Some(2500)),
            None,
            None,
            Some(1024),
            (2500, Setting),
        );
        // A lower cap.
        let limits = ContextLimits {
            trained_cap: 4000,
            ..ContextLimits::default()
        };
        let info = ModelInfo {
            context_length: Some(40960),
            window_per_request: true,
            ..ModelInfo::default()
        };
        let got = settle_window(&limits, "m", None, Some(&info));
        assert_eq!((got.tokens, got.source), (4000, Trained));
    }

    #[test]
    fn order() {
        use WindowSource::*;
        let none = (None, None);
        check(
            (Some(1000), None),
            Some(8000),
            Some(2048),
            None,
            (8000, Setting),
        );
        check((Some(1000), None), None, Some(2048), None, (1000, Setting));
        check(
            (Some(1000), Some(3000)),
            None,
            Some(2048),
            None,
            (1000, Setting),
        );
        check((None, Some(3000)), None, Some(2048), None, (3000, Setting));
        check(
            (None, Some(3000)),
            Some(500),
            Some(2048),
            None,
            (500, Setting),
        );
        check(none, None, Some(2048), Some(32768), (2048, Server));
        check(none, None, None, Some(2048), (2048, Default));
        check(none, None, None, Some(131072), (4096, Default));
        check(none, None, None, None, (4096, Default));
        check(none, Some(0), Some(0), None, (4096, Default));
    }

    proptest::proptest! {
        /// With no setting and no window reported, the window never exceeds the trained
        /// length; on a server sized per request it is the trained length capped, and
        /// elsewhere it never goes over the default.
        #[test]
        fn a_trained_length_never_raises_past_its_cap(
            trained in 1u32..200_000,
            cap in 1usize..100_000,
            per_request: bool,
        ) {
            let limits = ContextLimits {
                trained_cap: cap,
                ..ContextLimits::default()
            };
            let info = ModelInfo {
                context_length: Some(trained),
                window_per_request: per_request,
                ..ModelInfo::default()
            };
            let got = settle_window(&limits, "m", None, Some(&info));
            let trained = trained as usize;
            proptest::prop_assert!(got.tokens <= trained);
            let want = if per_request {
                trained.min(cap)
            } else {
                trained.min(limits.default)
            };
            proptest::prop_assert_eq!(got.tokens, want);
        }
    }
}
