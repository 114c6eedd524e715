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
//! - **Fallbacks** are settled here too, since they undo a settled decision: when the
//!   server refuses something before any output, [`RunSettings::fallback_for`] asks the
//!   strategy what it falls back to (`Strategy::fallback_for`) and otherwise drops
//!   `think` if that was refused, and [`RunSettings::fall_back`] applies it for this run
//!   and remembers it for the model, with a warning. Each fallback removes its own cause,
//!   so a turn is retried at most once per fallback.
//! - The strategy is announced with its reason ([`ChatEvent::StrategyChosen`]) before the
//!   first request.
//! - The generation cap: the call's `max_tokens`, else the sampling options', else the
//!   client's (see the chat module's Decisions); `chat/compact.rs` bounds it by the room
//!   the window leaves, per request.
//! - Per-call settings ([`ChatOptions`]: model, system prompt, tools) are applied here
//!   (the model before anything else is settled, by `turn.rs`); the client's stay.
//! - A tool choice naming a tool that is not offered is refused here, before anything is
//!   sent (an error event of kind `BadRequest`), so a typo never runs unconstrained.
//! - Images for a model whose known capabilities lack `vision` are refused here, before
//!   anything is sent (kind `VisionUnsupported`; the rule is [`crate::image::accepts_images`]).

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use ollm_types::{
    Capability, GenerationOptions, ModelInfo, ProviderError, ProviderErrorKind, Think, ToolChoice,
    ToolSchema, WarningKind,
};

use super::config::{CallMode, ChatConfig, ChatOptions};
use super::event::ChatEvent;
use super::shared::{Shared, Sink, lock};
use crate::ToolRegistry;
use crate::coach::Coach;
use crate::context::CompactionConfig;
use crate::strategy::{self, Reason, Strategy, ToolMode, capabilities_known};
use crate::tokens::ContextLimits;

/// The settled inputs of one run.
pub(super) struct RunSettings {
    pub(super) model: String,
    /// Whether the strategy was chosen automatically (and may fall back to ReAct).
    pub(super) auto: bool,
    pub(super) max_turns: u32,
    /// Sent as the request's `keep_alive`.
    pub(super) keep_alive: Option<String>,
    pub(super) strategy: Strategy,
    /// The tool choice the run was asked for.
    pub(super) choice: ToolChoice,
    /// Sent as the request's `parallel_tool_calls`.
    pub(super) parallel_tool_calls: Option<bool>,
    pub(super) options: GenerationOptions,
    pub(super) think: Option<Think>,
    /// The temperature of requests that offer tools when `options` sets none
    /// ([`super::ChatConfig::tool_temperature`]; `None` in a run that thinks), for the
    /// coach.
    pub(super) tool_temperature: Option<f32>,
    pub(super) limits: ContextLimits,
    pub(super) compaction: CompactionConfig,
    /// Put before the first user message of every request of a run that offers tools,
    /// as the coach says.
    pub(super) tools_context: Option<String>,
    pub(super) info: Option<ModelInfo>,
    /// The tools that may run (none with tool choice `none`).
    pub(super) tools: Arc<ToolRegistry>,
    /// The tools the strategy offers, as the tool choice narrows them.
    pub(super) offered: Vec<ToolSchema>,
    /// The call's system prompt, in place of the history's.
    pub(super) system: Option<String>,
    /// What happens to the model's calls.
    pub(super) calls: CallMode,
    /// How long a call may take when its tool does not say.
    pub(super) tool_timeout: Option<Duration>,
}

impl RunSettings {
    /// Settles `config` with `options` for a model the server describes as `info`, and
    /// announces the strategy; `None` (an error event sent) when the settings cannot run.
    pub(super) fn settle(
        shared: &Shared,
        config: &ChatConfig,
        options: &ChatOptions,
        info: Option<ModelInfo>,
        sink: &Sink,
    ) -> Option<Self> {
        let choice = options
            .tool_choice
            .clone()
            .unwrap_or_else(|| config.tool_choice.clone());
        // With tools off for this run (or `none` chosen), calls a model makes anyway meet
        // an empty registry: each is answered `Unknown tool` (1:1 kept), nothing runs.
        let all = (options.tools.clone()).unwrap_or_else(|| Arc::clone(&lock(&shared.tools)));
        if let Some((kind, message)) = refusal(&all, &choice, config, options, info.as_ref()) {
            sink.error(kind, message);
            return None;
        }
        let has_tools = !options.no_tools && !all.is_empty();
        let offered = if has_tools { all.schemas() } else { Vec::new() };
        let tools = if options.no_tools || choice == ToolChoice::None {
            Arc::new(ToolRegistry::default())
        } else {
            all
        };
        let mode = options.tool_mode.unwrap_or(config.tool_mode);
        let (strategy, reason) = strategy(shared, config, mode, info.as_ref(), has_tools);
        tracing::debug!(strategy = ?strategy.mode(), %reason, "tool strategy chosen");
        sink.send(ChatEvent::strategy_chosen(strategy.mode(), reason));
        let mut generation = options.options.clone().unwrap_or(config.options.clone());
        generation.max_tokens = options
            .max_tokens
            .or(generation.max_tokens)
            .or(config.max_tokens);
        let think = think(shared, config, options, info.as_ref(), sink);
        Some(RunSettings {
            model: config.model.clone(),
            auto: mode == ToolMode::Auto,
            max_turns: options.max_turns.unwrap_or(config.max_turns),
            keep_alive: config.keep_alive.clone(),
            strategy,
            choice,
            parallel_tool_calls: config.parallel_tool_calls,
            options: generation,
            tool_temperature: tool_temperature(config, think),
            think,
            limits: config.context_limits.clone(),
            compaction: config.compaction.clone(),
            tools_context: config.tools_context.clone().filter(|_| has_tools),
            info,
            tools,
            offered,
            system: options.system.clone(),
            calls: options.calls,
            tool_timeout: config.tool_timeout,
        })
    }

    /// What the next reply is offered: `required` and a named tool bind only until the
    /// run's first call (see the chat module's Decisions); no tools at all when the coach
    /// withholds them (the next reply is to answer); only the tool the model chose, by
    /// name, for the turn that is to call it (`routed-call`), its path argument one of
    /// the caller's paths (`known-paths`).
    pub(super) fn offer(&self, coach: &Coach) -> Offer<'_> {
        if coach.withholds_tools() {
            return Offer {
                choice: ToolChoice::None,
                tools: Cow::Borrowed(&[]),
            };
        }
        let routed = coach.routed_call();
        if let Some(at) = routed.and_then(|name| self.offered.iter().position(|t| t.name == name)) {
            let tools = match coach.routed_schema(&self.offered[at]) {
                Some(known) => Cow::Owned(vec![known]),
                None => Cow::Borrowed(&self.offered[at..=at]),
            };
            return Offer {
                choice: ToolChoice::Tool(self.offered[at].name.clone()),
                tools,
            };
        }
        let choice = if coach.made_calls() && self.choice.requires_call() {
            ToolChoice::Auto
        } else {
            self.choice.clone()
        };
        Offer {
            choice,
            tools: without(&self.offered, coach.withheld()),
        }
    }
}

impl RunSettings {
    /// The tools the `tool-or-none` choice lists: those offered, but for the ones the
    /// run withholds other than by `named-command` ([`Coach::withheld_from_choice`]).
    pub(super) fn choice_tools(&self, coach: &Coach) -> Vec<ToolSchema> {
        without(&self.offered, &coach.withheld_from_choice()).into_owned()
    }
}

/// What a run does without after the server refused it before any output.
pub(super) enum Fallback {
    /// Another strategy, as the strategy says.
    Strategy(strategy::Fallback),
    /// `think`.
    NoThink,
}

impl RunSettings {
    /// The fallback that answers `error`, a refusal before any output, if the run can do
    /// without what was refused.
    pub(super) fn fallback_for(&self, error: &ProviderError) -> Option<Fallback> {
        if let Some(fallback) = self.strategy.fallback_for(error, self.auto) {
            return Some(Fallback::Strategy(fallback));
        }
        (error.kind == ProviderErrorKind::ThinkingUnsupported && self.think.is_some())
            .then_some(Fallback::NoThink)
    }

    /// Does without what the server refused, for this run and later ones, with a warning.
    pub(super) fn fall_back(&mut self, shared: &Shared, sink: &Sink, fallback: Fallback) {
        let model = self.model.clone();
        let message = match fallback {
            Fallback::Strategy(fallback) => {
                fallback.learn(lock(&shared.learned).entry(model.clone()).or_default());
                self.strategy = fallback.strategy();
                let reason = fallback.reason();
                let to = self.strategy.mode();
                let what = "the server refused the strategy; falling back";
                tracing::info!(%model, %reason, ?to, "{what}");
                sink.send(ChatEvent::strategy_chosen(to, reason));
                fallback.warning(&model)
            }
            Fallback::NoThink => {
                tracing::info!(%model, "the server refused `think`; asking again without it");
                lock(&shared.no_think).insert(model.clone());
                self.think = None;
                format!("{model} does not support thinking; asking again without it")
            }
        };
        sink.warn(WarningKind::Other, message);
    }
}

/// Why a run cannot start with these settings, if it cannot: a tool choice naming a tool
/// that is not offered, or images for a model known not to read them.
fn refusal(
    all: &ToolRegistry,
    choice: &ToolChoice,
    config: &ChatConfig,
    options: &ChatOptions,
    info: Option<&ModelInfo>,
) -> Option<(ProviderErrorKind, String)> {
    if let ToolChoice::Tool(name) = choice {
        if !options.no_tools && !all.contains(name) {
            let offered: Vec<String> = all.schemas().into_iter().map(|t| t.name).collect();
            let message = format!(
                "the tool choice names {name:?}, which is not offered (offered: {})",
                offered.join(", ")
            );
            return Some((ProviderErrorKind::BadRequest, message));
        }
    }
    if !options.images.is_empty() && !crate::image::accepts_images(info) {
        let message = format!(
            "{} cannot read images (the server lists no vision capability for it); \
             nothing was sent",
            config.model
        );
        return Some((ProviderErrorKind::VisionUnsupported, message));
    }
    None
}

/// What one reply is offered: the tool choice and the tools.
pub(super) struct Offer<'a> {
    pub(super) choice: ToolChoice,
    pub(super) tools: Cow<'a, [ToolSchema]>,
}

/// `tools` but those `withheld` names (`changes-on-request`).
fn without<'a>(tools: &'a [ToolSchema], withheld: &[String]) -> Cow<'a, [ToolSchema]> {
    if withheld.is_empty() {
        return Cow::Borrowed(tools);
    }
    (tools.iter())
        .filter(|t| !withheld.contains(&t.name))
        .cloned()
        .collect()
}

/// The strategy for `mode` and why, going by what the client learned about the model.
fn strategy(
    shared: &Shared,
    config: &ChatConfig,
    mode: ToolMode,
    info: Option<&ModelInfo>,
    has_tools: bool,
) -> (Strategy, Reason) {
    let learned = lock(&shared.learned)
        .get(&config.model)
        .copied()
        .unwrap_or_default();
    Strategy::resolve(mode, info, has_tools, &learned, &config.auto)
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

/// The temperature of requests that offer tools: the config's, unless the run thinks
/// (greedy decoding sends reasoning models into loops).
fn tool_temperature(config: &ChatConfig, think: Option<Think>) -> Option<f32> {
    let thinks = think.is_some_and(|t| t != Think::Off);
    config.tool_temperature.filter(|_| !thinks)
}
