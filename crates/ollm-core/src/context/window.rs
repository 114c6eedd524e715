//! The one context window of a chat with a model.
//!
//! # Decisions
//! - Order: an explicit setting (the run's `options.context_length`, which the CLI fills
//!   from `--context-length`; then the per-model table [`ContextLimits::models`]; then
//!   [`ContextLimits::every_model`], the CLI's config `context_length`) > what the server reports as the window it runs with
//!   ([`ModelInfo::window`]) > [`ContextLimits::default`] (4096), capped by the model's
//!   trained length when that is smaller. A trained length is never used to *raise*
//!   the window: servers run with less than the model was trained for and cut the front.

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
    /// The server's report (`/props`, `/v1/models`, Ollama's `/api/show` capped).
    Server,
    /// The default.
    Default,
}

impl WindowSource {
    /// A short name for display (`setting`, `server`, `default`).
    pub fn as_str(self) -> &'static str {
        match self {
            WindowSource::Setting => "setting",
            WindowSource::Server => "server",
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
            ..ModelInfo::default()
        };
        let got = settle_window(&limits, "m", requested, Some(&info));
        assert_eq!((got.tokens, got.source), want);
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
}
