//! One run's settled inputs ([`RunSettings`]): the client's settings with the call's
//! overrides applied, the strategy resolved for the model, and `think` decided.
//!
//! # Decisions
//! - Whether to send `think` is decided here, once per run, and nowhere else in ollm:
//!   not when the server refused it for this model before, not (with a warning) when
//!   the model's capabilities are known and lack `thinking`, otherwise as asked.
//!   Adapters send what the request carries.
//! - A model the server refused native tools for runs ReAct in `Auto` mode for the rest
//!   of the client's life.

use std::sync::Arc;

use ollm_types::{Capability, GenerationOptions, ModelInfo, Think, WarningKind};

use super::client::{Shared, lock};
use super::run::Sink;
use super::{ChatConfig, ChatOptions};
use crate::ToolRegistry;
use crate::context::CompactionConfig;
use crate::strategy::{Strategy, ToolMode, capabilities_known};
use crate::tokens::ContextLimits;

/// The settled inputs of one run.
pub(super) struct RunSettings {
    pub(super) model: String,
    /// Whether the strategy was chosen automatically (and may fall back to ReAct).
    pub(super) auto: bool,
    pub(super) max_turns: u32,
    pub(super) strategy: Strategy,
    pub(super) options: GenerationOptions,
    pub(super) think: Option<Think>,
    pub(super) limits: ContextLimits,
    pub(super) compaction: CompactionConfig,
    pub(super) info: Option<ModelInfo>,
    pub(super) tools: Arc<ToolRegistry>,
}

impl RunSettings {
    /// Settles `config` with `options` for a model the server describes as `info`.
    pub(super) fn settle(
        shared: &Shared,
        config: &ChatConfig,
        options: &ChatOptions,
        info: Option<ModelInfo>,
        sink: &Sink,
    ) -> Self {
        // With tools turned off for this run, calls a model makes anyway meet an empty
        // registry: each is answered `Unknown tool` (1:1 kept) and nothing runs.
        let tools = if options.no_tools {
            Arc::new(ToolRegistry::default())
        } else {
            Arc::clone(&lock(&shared.tools))
        };
        let mode = options.tool_mode.unwrap_or(config.tool_mode);
        let has_tools = !options.no_tools && !tools.is_empty();
        RunSettings {
            model: config.model.clone(),
            auto: mode == ToolMode::Auto,
            max_turns: options.max_turns.unwrap_or(config.max_turns),
            strategy: strategy(shared, &config.model, mode, info.as_ref(), has_tools),
            options: options.options.clone().unwrap_or(config.options.clone()),
            think: think(shared, config, options, info.as_ref(), sink),
            limits: config.context_limits.clone(),
            compaction: config.compaction.clone(),
            info,
            tools,
        }
    }
}

/// The strategy for `mode`, remembering a server's refusal of native tools.
fn strategy(
    shared: &Shared,
    model: &str,
    mode: ToolMode,
    info: Option<&ModelInfo>,
    has_tools: bool,
) -> Strategy {
    let strategy = Strategy::resolve(mode, info, has_tools);
    if mode == ToolMode::Auto
        && strategy == Strategy::Native
        && lock(&shared.no_native_tools).contains(model)
    {
        return Strategy::React;
    }
    strategy
}

/// Whether to send `think` (see the module docs).
fn think(
    shared: &Shared,
    config: &ChatConfig,
    options: &ChatOptions,
    info: Option<&ModelInfo>,
    sink: &Sink,
) -> Option<Think> {
    let think = options.think.or(config.think)?;
    if lock(&shared.no_think).contains(&config.model) {
        return None;
    }
    if capabilities_known(info) && info.is_some_and(|i| !i.has(&Capability::Thinking)) {
        sink.warn(
            WarningKind::Other,
            format!(
                "{} does not report the thinking capability; thinking was not requested",
                config.model
            ),
        );
        return None;
    }
    Some(think)
}
