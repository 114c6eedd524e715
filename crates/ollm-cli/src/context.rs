//! The context window as the CLI settles and shows it (issue 11): `--context-length`, the
//! config's `context_length` and `[models."NAME"]` tables, `--no-compact` and `compact`,
//! turned into core's [`ChatConfig`]; and the one line `ollm show` and `/status` print,
//! "2048 tokens (server: /props n_ctx)".
//!
//! Decisions:
//! - Core decides the window ([`ollm_core::context::settle_window`]); the CLI only fills
//!   its inputs, so the window shown is the window enforced and (on Ollama) the `num_ctx`
//!   sent. The flag becomes the run's `options.context_length` (it beats everything);
//!   `[models."NAME"]` the per-model table; the config's `context_length` (the
//!   provider's, else the top-level one) the window for every model. All of them go over
//!   what the server reports.
//! - Where a window came from is said in the words a user can act on: the flag, the
//!   config key, `/set parameter num_ctx`, or the server's endpoint (`/api/show` on
//!   Ollama, `/props` on llama.cpp, `max_model_len` in `/v1/models` on vLLM), or the
//!   default.

use ollm_core::ChatConfig;
use ollm_core::context::{Window, WindowSource, settle_window};
use ollm_core::tokens::ContextLimits;
use ollm_types::ModelInfo;

use crate::config::{ContextSettings, ProviderKind};

/// Core's table of windows from the config.
pub(crate) fn limits(context: &ContextSettings) -> ContextLimits {
    let mut limits = ContextLimits::default();
    for (model, n) in &context.models {
        limits = limits.with_model(model.clone(), *n as usize);
    }
    limits.every_model = context.length.map(|n| n as usize);
    limits
}

/// Fills `chat`'s window and compaction settings from the config, `--context-length`
/// (`flag`) and `--no-compact`.
pub(crate) fn apply(
    chat: &mut ChatConfig,
    context: &ContextSettings,
    flag: Option<u32>,
    no_compact: bool,
) {
    chat.context_limits = limits(context);
    if flag.is_some() {
        chat.options.context_length = flag;
    }
    chat.compaction.enabled = context.compact && !no_compact;
    chat.compaction.threshold_percent = context.compact_threshold;
}

/// Where the settings that reach core came from, for [`describe`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin<'a> {
    /// The chat's settings (the model, its `options.context_length`, the table).
    pub(crate) chat: &'a ChatConfig,
    /// `--context-length`, if given.
    pub(crate) flag: Option<u32>,
    /// The backend, which names the server's endpoint.
    pub(crate) kind: ProviderKind,
}

/// "2048 tokens (server: /props n_ctx)": the window and where it came from.
pub(crate) fn describe(window: Window, origin: Origin<'_>, info: Option<&ModelInfo>) -> String {
    format!(
        "{} tokens ({})",
        window.tokens,
        source(window, origin, info)
    )
}

/// `ollm show`'s window line: the window a run with `model` gets from the config and the
/// server's report `info` (no flags).
pub(crate) fn for_show(
    context: &ContextSettings,
    kind: ProviderKind,
    model: &str,
    info: &ModelInfo,
) -> String {
    let mut chat = ChatConfig::for_model(model);
    apply(&mut chat, context, None, false);
    let window = settle_window(&chat.context_limits, model, None, Some(info));
    let origin = Origin {
        chat: &chat,
        flag: None,
        kind,
    };
    describe(window, origin, Some(info))
}

fn source(window: Window, origin: Origin<'_>, info: Option<&ModelInfo>) -> String {
    let chat = origin.chat;
    match window.source {
        WindowSource::Setting => match chat.options.context_length {
            Some(n) if origin.flag == Some(n) => "--context-length".to_owned(),
            Some(_) => "/set parameter num_ctx".to_owned(),
            None if chat.context_limits.models.contains_key(&chat.model) => {
                format!("config [models.{:?}]", chat.model)
            }
            None => "config context_length".to_owned(),
        },
        // On Ollama the trained length capped (core's `context::window`) and a `num_ctx`
        // parameter both come from `/api/show`.
        WindowSource::Server | WindowSource::Trained => match origin.kind {
            ProviderKind::Ollama => "server: /api/show, sent as num_ctx".to_owned(),
            ProviderKind::Openai | ProviderKind::Anthropic
                if info.and_then(|i| i.details.format.as_deref()) == Some("gguf") =>
            {
                "server: /props n_ctx".to_owned()
            }
            ProviderKind::Openai => "server: /v1/models max_model_len".to_owned(),
            ProviderKind::Anthropic => "server: /v1/models meta.n_ctx".to_owned(),
        },
        _ => "default".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ollm_types::ModelDetails;

    /// Settles the window of model `m` as core does, then describes it.
    fn check(
        context: ContextSettings,
        flag: Option<u32>,
        kind: ProviderKind,
        info: Option<ModelInfo>,
        expected: &str,
    ) {
        let mut chat = ChatConfig::for_model("m");
        apply(&mut chat, &context, flag, false);
        let window = settle_window(
            &chat.context_limits,
            &chat.model,
            chat.options.context_length,
            info.as_ref(),
        );
        let origin = Origin {
            chat: &chat,
            flag,
            kind,
        };
        assert_eq!(describe(window, origin, info.as_ref()), expected);
    }

    fn server(window: u32, format: Option<&str>) -> Option<ModelInfo> {
        Some(ModelInfo {
            window: Some(window),
            details: ModelDetails {
                format: format.map(str::to_owned),
                ..ModelDetails::default()
            },
            ..ModelInfo::default()
        })
    }

    #[test]
    fn the_window_says_where_it_came_from() {
        use ProviderKind::*;
        let none = ContextSettings::default();
        let every = ContextSettings {
            length: Some(3000),
            ..ContextSettings::default()
        };
        let table = ContextSettings {
            models: [("m".to_owned(), 1500)].into(),
            ..every.clone()
        };
        let gguf = || server(2048, Some("gguf"));
        check(
            none.clone(),
            Some(999),
            Openai,
            gguf(),
            "999 tokens (--context-length)",
        );
        check(
            table.clone(),
            None,
            Openai,
            gguf(),
            "1500 tokens (config [models.\"m\"])",
        );
        check(
            every.clone(),
            None,
            Ollama,
            gguf(),
            "3000 tokens (config context_length)",
        );
        check(
            none.clone(),
            None,
            Openai,
            gguf(),
            "2048 tokens (server: /props n_ctx)",
        );
        check(
            none.clone(),
            None,
            Openai,
            server(32768, None),
            "32768 tokens (server: /v1/models max_model_len)",
        );
        check(
            none.clone(),
            None,
            Ollama,
            server(8192, None),
            "8192 tokens (server: /api/show, sent as num_ctx)",
        );
        check(none, None, Openai, None, "4096 tokens (default)");
    }

    #[test]
    fn no_compact_and_the_threshold_reach_core() {
        let context = ContextSettings {
            compact_threshold: 60,
            ..ContextSettings::default()
        };
        let mut chat = ChatConfig::default();
        apply(&mut chat, &context, None, false);
        assert!(chat.compaction.enabled);
        assert_eq!(chat.compaction.threshold_percent, 60);
        apply(&mut chat, &context, None, true);
        assert!(!chat.compaction.enabled);
        let off = ContextSettings {
            compact: false,
            ..ContextSettings::default()
        };
        apply(&mut chat, &off, None, false);
        assert!(!chat.compaction.enabled);
    }
}
