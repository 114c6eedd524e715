//! How tools reach the model: natively, as ReAct text, or through a schema-constrained
//! reply. This is the seam between the turn loop and the tool-calling protocol.
//!
//! The loop in [`crate::chat`] is the same for every strategy: build a request, stream the
//! reply, turn it into a `TurnOutcome` (an answer, tool calls, or a correction to send),
//! run calls, record the turn. A `Strategy` decides four things, and the loop never
//! branches on which strategy it runs:
//! 1. how the request offers the tools (`Strategy::prepare`): native `tools`, ReAct
//!    instructions in the system prompt, or a `oneOf` output schema;
//! 2. how streamed text is shown while it arrives (`Strategy::text_filter`): possible call
//!    markup held back (native), Thought as thinking and Final Answer as text (ReAct), or held back until
//!    the JSON is complete (constrained);
//! 3. how the finished reply is read (`Strategy::interpret`);
//! 4. how the turn is recorded in the history (`Strategy::record`).
//!
//! Each strategy lives in its own module (`native`, `react`, `constrained`) with its
//! `prepare` and `record`; what they share (display pieces, the fence reader, the tool
//! list, the shape of a finished turn) lives in the leaf `common`, which imports none of
//! them. This module is the only one that imports the strategies, so there is no cycle.
//! Where later work belongs: recovering calls a model writes as text is `crate::recover`,
//! wired in by `native` (its `Hold` display and `interpret`); choosing a strategy
//! from more server facts goes in `Strategy::resolve` (called from `chat/settle.rs`).
//! Rules that help a small model whatever the strategy (refusing the same call over and
//! over, stopping a looping reply, the nudges) belong to the coach: [`crate::coach`].
//!
//! # Decisions
//! - [`ToolMode::Auto`], in order: ReAct when the server refused native tools for the
//!   model before; the [`AutoRules`] text-call rule (off by default) when the model's
//!   native replies keep writing calls as text; native when the model reports tool
//!   support *or the provider cannot say* (no capabilities, or `show_model` failed);
//!   ReAct when the server positively reports capabilities without `tools`. Each choice
//!   comes with its [`Reason`], which the run announces (typed, and in words).
//! - The tool choice is applied in `prepare` and `interpret` only: native sends it as
//!   the request's `tool_choice`; ReAct and constrained narrow what they offer (`none`:
//!   nothing; a name: that tool; `required`/a name: no answer branch, an instruction) and
//!   answer an answer with a correction when a call is due. When a call is due is the
//!   loop's business (`chat/settle.rs`: until the run's first call).

mod common;
mod constrained;
mod native;
mod react;

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use ollm_types::{
    Capability, Message, ModelInfo, ProviderError, ProviderErrorKind, ProviderRequest, ToolCall,
    ToolChoice, ToolSchema,
};
use serde::{Deserialize, Serialize};

use crate::CoreError;
use crate::coach::CoachConfig;
use crate::tool::ToolOutcome;
pub(crate) use common::{Shown, TextFilter, Turn};
pub(crate) use native::RepairedCall;

/// The tool-calling strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// Native when the model reports tool support (or the provider cannot say), ReAct
    /// otherwise.
    #[default]
    Auto,
    /// The server's native tool calling.
    Native,
    /// Tools described in text, calls parsed from `Action:` lines.
    React,
    /// The reply is constrained to a JSON schema naming a tool or a final answer.
    Constrained,
}

impl ToolMode {
    /// Every mode, in the order they are documented.
    pub const ALL: [ToolMode; 4] = [
        ToolMode::Auto,
        ToolMode::Native,
        ToolMode::React,
        ToolMode::Constrained,
    ];

    /// The mode's name, as [`FromStr`] reads it and [`fmt::Display`] writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolMode::Auto => "auto",
            ToolMode::Native => "native",
            ToolMode::React => "react",
            ToolMode::Constrained => "constrained",
        }
    }
}

impl fmt::Display for ToolMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ToolMode {
    type Err = CoreError;

    /// Reads a mode's name, in any case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ToolMode::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| CoreError::UnknownToolMode(s.to_owned()))
    }
}

/// A settled strategy for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// No tools are offered (none registered, or the call asked for none).
    NoTools,
    /// Native tool calling.
    Native,
    /// ReAct text protocol.
    React,
    /// Schema-constrained replies.
    Constrained,
}

/// Whether the model's reported capabilities are known (the server listed some).
pub(crate) fn capabilities_known(info: Option<&ModelInfo>) -> bool {
    info.is_some_and(|i| !i.capabilities.is_empty())
}

impl Strategy {
    /// Settles `mode` for a model with `info` (`None` when `show_model` failed or is not
    /// offered), with the reason. `has_tools` is false when no tools are to be offered;
    /// `learned` is what earlier runs of this client found out about the model, and
    /// `rules` how `Auto` weighs it.
    pub(crate) fn resolve(
        mode: ToolMode,
        info: Option<&ModelInfo>,
        has_tools: bool,
        learned: &Learned,
        rules: &AutoRules,
    ) -> (Self, Reason) {
        if !has_tools {
            return (Strategy::NoTools, Reason::NoTools);
        }
        let asked = |s| (s, Reason::Asked(mode));
        match mode {
            ToolMode::Native => asked(Strategy::Native),
            ToolMode::React => asked(Strategy::React),
            ToolMode::Constrained => asked(Strategy::Constrained),
            ToolMode::Auto if learned.native_refused => (Strategy::React, Reason::RefusedBefore),
            ToolMode::Auto => {
                if let Some(mode) = rules.switch_for_text_calls(learned) {
                    return (Strategy::of(mode), Reason::TextCalls(learned.text_calls));
                }
                if !capabilities_known(info) {
                    (Strategy::Native, Reason::CapabilitiesUnknown)
                } else if info.is_some_and(|i| i.has(&Capability::Tools)) {
                    (Strategy::Native, Reason::ReportsTools)
                } else {
                    (Strategy::React, Reason::ReportsNoTools)
                }
            }
        }
    }

    /// The strategy a fixed mode names (`Auto` is native until settled otherwise).
    fn of(mode: ToolMode) -> Self {
        match mode {
            ToolMode::Auto | ToolMode::Native => Strategy::Native,
            ToolMode::React => Strategy::React,
            ToolMode::Constrained => Strategy::Constrained,
        }
    }

    /// The mode this strategy runs, as users name it; `None` when no tools are offered.
    pub(crate) fn mode(self) -> Option<ToolMode> {
        match self {
            Strategy::NoTools => None,
            Strategy::Native => Some(ToolMode::Native),
            Strategy::React => Some(ToolMode::React),
            Strategy::Constrained => Some(ToolMode::Constrained),
        }
    }

    /// Offers `tools` in `request` the way this strategy does, as `choice` allows (see
    /// the module docs): native sends the choice as the request's `tool_choice`; ReAct
    /// and constrained offer no tools for `none`, only the named tool for a name, and
    /// oblige a call for `required`.
    pub(crate) fn prepare(
        self,
        request: &mut ProviderRequest,
        tools: &[ToolSchema],
        choice: &ToolChoice,
    ) {
        if self == Strategy::Native {
            native::prepare(request, tools);
            request.tool_choice = choice.clone();
            return;
        }
        let named: Vec<ToolSchema>;
        let tools = match choice {
            ToolChoice::None => return,
            ToolChoice::Tool(name) => {
                named = tools.iter().filter(|t| &t.name == name).cloned().collect();
                &named[..]
            }
            ToolChoice::Auto | ToolChoice::Required => tools,
        };
        let must_call = choice.requires_call();
        match self {
            Strategy::NoTools | Strategy::Native => {}
            Strategy::React => react::prepare(request, tools, must_call),
            Strategy::Constrained => constrained::prepare(request, tools, must_call),
        }
    }

    /// The strategy of the turn that is to call the tool the model chose (the coach's
    /// `routed-call`): the server holds the reply to a call to it, under its schema.
    pub(crate) fn routed_call() -> Strategy {
        Strategy::Constrained
    }

    /// Whether a run on this strategy can take a turn of [`Strategy::routed_call`]: its
    /// history carries native calls, as that turn records its call.
    pub(crate) fn takes_routed_calls(self) -> bool {
        matches!(self, Strategy::Native | Strategy::Constrained)
    }

    /// A fresh display filter for one reply.
    pub(crate) fn text_filter(self) -> Box<dyn TextFilter> {
        match self {
            Strategy::NoTools => Box::new(common::PassThrough),
            Strategy::Native => Box::new(native::Hold::default()),
            Strategy::React => Box::new(react::ReactStreamer::default()),
            Strategy::Constrained => Box::new(constrained::Hold),
        }
    }

    /// The messages that record `turn` in the history.
    pub(crate) fn record(self, turn: Turn<'_>) -> Vec<Message> {
        match self {
            Strategy::NoTools | Strategy::Native => native::record(turn),
            Strategy::React => react::record(turn),
            Strategy::Constrained => constrained::record(turn),
        }
    }

    /// Reads a finished reply: its whole text and the native calls that arrived.
    /// `tools` are the tools on offer; `mint` makes ids for calls parsed from text.
    /// `choice` is the turn's tool choice: ReAct and constrained answer a reply that
    /// gives an answer when the choice obliges a call with a correction.
    pub(crate) fn interpret(
        self,
        text: &str,
        native_calls: Vec<ToolCall>,
        tools: &[ToolSchema],
        mint: &mut dyn FnMut() -> String,
        choice: &ToolChoice,
        coach: &CoachConfig,
    ) -> TurnOutcome {
        let outcome = self.read(text, native_calls, tools, mint, coach);
        match (&outcome, self) {
            (TurnOutcome::Answer(_), Strategy::React | Strategy::Constrained)
                if choice.requires_call() =>
            {
                TurnOutcome::Retry {
                    correction: match self {
                        Strategy::React => react::must_call_message(choice),
                        _ => constrained::must_call_message(choice),
                    },
                    problem: format!(
                        "the model answered without calling a tool (tool choice {choice})"
                    ),
                }
            }
            _ => outcome,
        }
    }

    /// What this strategy falls back to when the server refused it with `error` before
    /// any output; `auto` says whether the strategy was chosen automatically (a strategy
    /// asked for by name never changes).
    pub(crate) fn fallback_for(self, error: &ProviderError, auto: bool) -> Option<Fallback> {
        match error.kind {
            ProviderErrorKind::ToolsUnsupported if auto && self == Strategy::Native => {
                Some(Fallback::NativeRefused(error.hint.clone()))
            }
            _ => None,
        }
    }

    /// Counts how a reply's calls came in `learned` (for [`AutoRules`]): structured, or
    /// written as text. Only native replies teach anything; `model` is the run's model.
    pub(crate) fn learn(
        self,
        learned: &mut HashMap<String, Learned>,
        model: &str,
        structured: bool,
    ) {
        if self != Strategy::Native {
            return;
        }
        let entry = learned.entry(model.to_owned()).or_default();
        let count = if structured {
            &mut entry.native_calls
        } else {
            &mut entry.text_calls
        };
        *count = count.saturating_add(1);
    }

    /// Whether an answer shows the user how to call a tool instead of calling it (see
    /// `recover::shows_call`, under the `coach`'s switches); only the native strategy
    /// reads calls from text.
    pub(crate) fn shows_call(
        self,
        answer: &str,
        tools: &[ToolSchema],
        coach: &CoachConfig,
    ) -> bool {
        self == Strategy::Native
            && crate::recover::shows_call(
                answer,
                &crate::recover::OfferedTools::new(
                    tools.iter().map(|t| (t.name.clone(), t.parameters.clone())),
                )
                .coached(coach),
            )
    }

    /// Reads a finished reply whatever the tool choice.
    fn read(
        self,
        text: &str,
        native_calls: Vec<ToolCall>,
        tools: &[ToolSchema],
        mint: &mut dyn FnMut() -> String,
        coach: &CoachConfig,
    ) -> TurnOutcome {
        if self == Strategy::Native {
            return match native::interpret(text, native_calls, tools, mint, coach) {
                native::Read::Answer(answer) => TurnOutcome::Answer(answer),
                native::Read::Calls {
                    calls,
                    answered,
                    prose,
                    repaired,
                } => TurnOutcome::TextCalls {
                    calls,
                    answered,
                    prose,
                    repaired,
                },
            };
        }
        if !native_calls.is_empty() {
            return TurnOutcome::Calls(native_calls);
        }
        match self {
            Strategy::NoTools | Strategy::Native => TurnOutcome::Answer(text.to_owned()),
            Strategy::React => match react::parse(text) {
                react::ReactStep::Action {
                    tool, arguments, ..
                } => TurnOutcome::Calls(vec![ToolCall {
                    id: mint(),
                    name: tool,
                    arguments,
                }]),
                react::ReactStep::InvalidInput { tool, error, .. } => TurnOutcome::Retry {
                    correction: react::correction_message(&tool, &error),
                    problem: format!("the Action Input for {tool} is not a JSON object: {error}"),
                },
                react::ReactStep::FinalAnswer { answer, .. } => TurnOutcome::Answer(answer),
                react::ReactStep::NoAction { text } => TurnOutcome::Answer(text),
            },
            Strategy::Constrained => match constrained::parse(text) {
                constrained::Reply::Call { tool, arguments } => {
                    TurnOutcome::Calls(vec![ToolCall {
                        id: mint(),
                        name: tool,
                        arguments,
                    }])
                }
                constrained::Reply::FinalAnswer(answer) => TurnOutcome::Answer(answer),
                constrained::Reply::Malformed(error) => TurnOutcome::Retry {
                    correction: constrained::correction_message(&error),
                    problem: format!("the reply does not follow the output schema: {error}"),
                },
            },
        }
    }
}

/// Why a run uses the strategy it does: announced by
/// [`ChatEvent::StrategyChosen`](crate::ChatEvent::StrategyChosen) beside its words
/// (its `Display`, which `ollm run --verbose` shows), so a caller can act on it
/// without parsing text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// No tools are to be offered.
    NoTools,
    /// The mode was asked for.
    Asked(ToolMode),
    /// Auto: the server reports the tools capability.
    ReportsTools,
    /// Auto: the server does not say what the model can do.
    CapabilitiesUnknown,
    /// Auto: the server reports capabilities without tools.
    ReportsNoTools,
    /// Auto: the server refused native tools for this model before.
    RefusedBefore,
    /// Auto: this many native replies of the model came back as calls written as text.
    TextCalls(u32),
    /// Auto: the server refused native tools just now; its hint, if any.
    Refused(Option<String>),
}

/// What a server needs to offer native tools, for a hint when it refused them and said
/// nothing itself.
pub(crate) const SERVER_FLAGS_HINT: &str = "llama-server needs --jinja; vLLM needs \
     --enable-auto-tool-choice --tool-call-parser <name>; Ollama needs a model whose \
     template supports tools";

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::NoTools => f.write_str("no tools are offered in this run"),
            Reason::Asked(mode) => write!(f, "tool mode {mode} was asked for"),
            Reason::ReportsTools => f.write_str("auto: the server reports tool support"),
            Reason::CapabilitiesUnknown => f.write_str(
                "auto: the server does not report the model's capabilities; trying native \
                 (ReAct if the server refuses tools)",
            ),
            Reason::ReportsNoTools => {
                f.write_str("auto: the server reports capabilities without tool support")
            }
            Reason::RefusedBefore => {
                f.write_str("auto: the server refused native tools for this model earlier")
            }
            Reason::TextCalls(n) => write!(
                f,
                "auto: {n} native replies of this model wrote their calls as text"
            ),
            Reason::Refused(hint) => write!(
                f,
                "auto: the server refused native tools ({})",
                hint.as_deref().unwrap_or(SERVER_FLAGS_HINT)
            ),
        }
    }
}

/// A strategy's answer to a server that refused it before any output: what the run uses
/// instead, why, and what the client remembers about the model
/// ([`Strategy::fallback_for`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fallback {
    /// Native tools were refused in `Auto` mode: ReAct. The server's hint, if it gave one.
    NativeRefused(Option<String>),
}

impl Fallback {
    /// The strategy the run switches to.
    pub(crate) fn strategy(&self) -> Strategy {
        match self {
            Fallback::NativeRefused(_) => Strategy::React,
        }
    }

    /// Why, as the run announces it.
    pub(crate) fn reason(&self) -> Reason {
        match self {
            Fallback::NativeRefused(hint) => Reason::Refused(hint.clone()),
        }
    }

    /// Remembers the refusal for the model, so later runs in `Auto` start with the
    /// fallback ([`Reason::RefusedBefore`]).
    pub(crate) fn learn(&self, learned: &mut Learned) {
        match self {
            Fallback::NativeRefused(_) => learned.native_refused = true,
        }
    }

    /// The warning the run sends about `model`.
    pub(crate) fn warning(&self, model: &str) -> String {
        match self {
            Fallback::NativeRefused(hint) => format!(
                "{model}: the server refused native tool calls; describing the tools as \
                 ReAct text instead ({})",
                hint.as_deref().unwrap_or(SERVER_FLAGS_HINT)
            ),
        }
    }
}

/// What a client learned about a model from earlier runs, which `Auto` goes by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Learned {
    /// The server refused native tools for the model.
    pub native_refused: bool,
    /// Native replies whose calls came as structured calls.
    pub native_calls: u32,
    /// Native replies whose calls were recovered from text.
    pub text_calls: u32,
}

impl AutoRules {
    /// The mode these rules switch to for a model whose native calls come back as text.
    fn switch_for_text_calls(&self, learned: &Learned) -> Option<ToolMode> {
        let after = self.text_calls_switch_after;
        (after > 0 && learned.text_calls >= after && learned.native_calls == 0)
            .then_some(self.text_calls_mode)
    }
}

/// How [`ToolMode::Auto`] chooses beyond what the server reports: the knobs the
/// tool-calling eval tunes (`docs/tool-calling.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AutoRules {
    /// After this many native replies of a model wrote their calls as text (recovered)
    /// and none came as structured calls, `Auto` uses [`AutoRules::text_calls_mode`] for
    /// that model in the client's later runs. `0` (the default) never switches: the
    /// native strategy recovers text calls, and no measurement yet says a switch wins.
    pub text_calls_switch_after: u32,
    /// The mode for such a model.
    pub text_calls_mode: ToolMode,
}

impl Default for AutoRules {
    fn default() -> Self {
        AutoRules {
            text_calls_switch_after: 0,
            text_calls_mode: ToolMode::Constrained,
        }
    }
}

/// What a finished reply means for the loop.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum TurnOutcome {
    /// The turn's answer; the run ends.
    Answer(String),
    /// Calls to run; the loop continues with their results.
    Calls(Vec<ToolCall>),
    /// Calls of a reply that also keeps text apart from them (the native strategy: calls
    /// recovered from the text, or the server's calls with fence debris around them).
    TextCalls {
        /// The calls, in order.
        calls: Vec<ToolCall>,
        /// Per call, the result decided without running it (an unknown tool, a malformed
        /// block), or `None` to run it.
        answered: Vec<Option<ToolOutcome>>,
        /// The reply's text without call markup: what is shown and recorded.
        prose: String,
        /// The calls the coach repaired, which the loop tells the caller of.
        repaired: Vec<RepairedCall>,
    },
    /// The reply could not be understood: send `correction` and continue.
    Retry {
        /// The message that tells the model what to fix.
        correction: String,
        /// What was wrong, for a warning.
        problem: String,
    },
}

impl TurnOutcome {
    /// The text to show of the reply: the answer, or the prose around text calls.
    pub(crate) fn shown(&self) -> Option<&str> {
        match self {
            TurnOutcome::Answer(answer) => Some(answer),
            TurnOutcome::TextCalls { prose, .. } => Some(prose),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolOutcome;

    fn info(caps: Vec<Capability>) -> ModelInfo {
        ModelInfo {
            capabilities: caps,
            ..ModelInfo::default()
        }
    }

    fn check_resolve(
        mode: ToolMode,
        info: Option<&ModelInfo>,
        learned: Learned,
        rules: AutoRules,
        expected: (Strategy, Reason),
    ) {
        let got = Strategy::resolve(mode, info, true, &learned, &rules);
        assert_eq!(got, expected, "{mode} {info:?} {learned:?} {rules:?}");
    }

    #[test]
    fn auto_resolution() {
        let auto = ToolMode::Auto;
        let none = Learned::default();
        let rules = AutoRules::default();
        let tools = info(vec![Capability::Tools]);
        let no_tools = info(vec![Capability::Completion]);
        let unknown = (Strategy::Native, Reason::CapabilitiesUnknown);
        check_resolve(auto, None, none, rules, unknown.clone());
        check_resolve(auto, Some(&info(vec![])), none, rules, unknown);
        let react = (Strategy::React, Reason::ReportsNoTools);
        check_resolve(auto, Some(&no_tools), none, rules, react);
        let native = (Strategy::Native, Reason::ReportsTools);
        check_resolve(auto, Some(&tools), none, rules, native.clone());
        let refused = Learned {
            native_refused: true,
            ..Learned::default()
        };
        let before = (Strategy::React, Reason::RefusedBefore);
        check_resolve(auto, Some(&tools), refused, rules, before);
        let asked = (Strategy::Native, Reason::Asked(ToolMode::Native));
        check_resolve(ToolMode::Native, Some(&no_tools), refused, rules, asked);
        // Text calls switch only when the rule is on and no structured call ever came.
        let text = Learned {
            text_calls: 2,
            ..Learned::default()
        };
        check_resolve(auto, Some(&tools), text, rules, native.clone());
        let on = AutoRules {
            text_calls_switch_after: 2,
            text_calls_mode: ToolMode::Constrained,
        };
        let switched = (Strategy::Constrained, Reason::TextCalls(2));
        check_resolve(auto, Some(&tools), text, on, switched);
        let mixed = Learned {
            native_calls: 1,
            ..text
        };
        check_resolve(auto, Some(&tools), mixed, on, native);
        assert_eq!(
            Strategy::resolve(auto, None, false, &none, &rules),
            (Strategy::NoTools, Reason::NoTools)
        );
    }

    #[test]
    fn a_refusal_without_a_hint_names_the_server_flags() {
        let shown = Reason::Refused(None).to_string();
        assert!(shown.contains("--jinja"), "{shown}");
        assert!(shown.contains("--enable-auto-tool-choice --tool-call-parser"));
        let own = Reason::Refused(Some("start vLLM with X".into())).to_string();
        assert!(own.contains("start vLLM with X"), "{own}");
    }

    /// What `prepare` offers for `choice`: the tool names in the request's `tools`, in the
    /// system prompt's tool list (`- name:`), and in the constrained schema's branches,
    /// and whether a final answer may end the reply.
    fn offered(strategy: Strategy, choice: &ToolChoice) -> (Vec<String>, bool) {
        let tools = [
            ToolSchema::new("a", "d", serde_json::json!({"type": "object"})),
            ToolSchema::new("b", "d", serde_json::json!({"type": "object"})),
        ];
        let mut request = ProviderRequest::new("m", vec![]);
        strategy.prepare(&mut request, &tools, choice);
        let system = request.system.clone().unwrap_or_default();
        let mut names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let mut answer = strategy == Strategy::Native && *choice != ToolChoice::Required;
        match &request.response_format {
            Some(ollm_types::ResponseFormat::JsonSchema { schema, .. }) => {
                for alt in schema["oneOf"].as_array().into_iter().flatten() {
                    match alt["properties"]["tool"]["const"].as_str() {
                        Some(name) => names.push(name.to_owned()),
                        None => answer = true,
                    }
                }
            }
            _ if strategy == Strategy::React => {
                for t in &tools {
                    if system.contains(&format!("- {}:", t.name)) {
                        names.push(t.name.clone());
                    }
                }
                answer = system.contains("Final Answer") && !system.contains("You must use a tool");
            }
            _ => {}
        }
        if strategy == Strategy::Native {
            assert_eq!(&request.tool_choice, choice);
        }
        (names, answer)
    }

    #[test]
    fn each_strategy_honours_the_tool_choice() {
        let both = || vec!["a".to_owned(), "b".to_owned()];
        let named = ToolChoice::Tool("b".into());
        let table = [
            (Strategy::Native, ToolChoice::Auto, (both(), true)),
            (Strategy::Native, ToolChoice::None, (both(), true)),
            (Strategy::Native, ToolChoice::Required, (both(), false)),
            (Strategy::React, ToolChoice::Auto, (both(), true)),
            (Strategy::React, ToolChoice::None, (vec![], false)),
            (Strategy::React, ToolChoice::Required, (both(), false)),
            (
                Strategy::React,
                named.clone(),
                (vec!["b".to_owned()], false),
            ),
            (Strategy::Constrained, ToolChoice::Auto, (both(), true)),
            (Strategy::Constrained, ToolChoice::None, (vec![], false)),
            (Strategy::Constrained, ToolChoice::Required, (both(), false)),
            (Strategy::Constrained, named, (vec!["b".to_owned()], false)),
        ];
        for (strategy, choice, expected) in table {
            assert_eq!(
                offered(strategy, &choice),
                expected,
                "{strategy:?} {choice}"
            );
        }
    }

    #[test]
    fn an_answer_is_corrected_when_a_call_is_required() {
        let read = |strategy: Strategy, text: &str, choice: ToolChoice| {
            let mut n = 0;
            let mut mint = || {
                n += 1;
                format!("c{n}")
            };
            strategy.interpret(
                text,
                vec![],
                &[],
                &mut mint,
                &choice,
                &CoachConfig::default(),
            )
        };
        let react = "Thought: easy\nFinal Answer: 42";
        let constrained = "{\"final_answer\": \"42\"}";
        for (strategy, text) in [
            (Strategy::React, react),
            (Strategy::Constrained, constrained),
        ] {
            let auto = read(strategy, text, ToolChoice::Auto);
            assert_eq!(auto, TurnOutcome::Answer("42".into()));
            for choice in [ToolChoice::Required, ToolChoice::Tool("t".into())] {
                let got = read(strategy, text, choice.clone());
                assert!(
                    matches!(got, TurnOutcome::Retry { .. }),
                    "{strategy:?} {choice}"
                );
            }
        }
        // Native leaves `required` to the server.
        let native = read(Strategy::Native, "42", ToolChoice::Required);
        assert_eq!(native, TurnOutcome::Answer("42".into()));
    }

    /// What each strategy records for `turn`, as (role, text, number of calls) per message.
    fn check(strategy: Strategy, turn: Turn<'_>, expected: &[(&str, &str, usize)]) {
        let got: Vec<(String, String, usize)> = strategy
            .record(turn)
            .iter()
            .map(|m| (format!("{:?}", m.role()), m.text(), m.tool_calls().count()))
            .collect();
        let expected: Vec<(String, String, usize)> = expected
            .iter()
            .map(|(r, t, n)| ((*r).to_owned(), (*t).to_owned(), *n))
            .collect();
        assert_eq!(got, expected, "{strategy:?} {turn:?}");
    }

    #[test]
    fn each_strategy_records_its_turns() {
        let calls = [ToolCall {
            id: "c1".into(),
            name: "t".into(),
            arguments: serde_json::Map::new(),
        }];
        let results = [ToolOutcome::ok("{\"n\":1}")];
        let raw = "Action: t\nAction Input: {}";
        let with_calls = Turn::Calls {
            raw,
            calls: &calls,
            results: &results,
        };
        let answer = Turn::Answer {
            raw: "Thought: x\nFinal Answer: 42",
            answer: "42",
        };
        let retry = Turn::Retry {
            raw: "junk",
            correction: "fix it",
        };
        let cut = Turn::Cut { raw: "half" };
        for native in [Strategy::Native, Strategy::NoTools] {
            check(
                native,
                with_calls,
                &[("Assistant", raw, 1), ("Tool", "{\"n\":1}", 0)],
            );
            check(native, answer, &[("Assistant", "42", 0)]);
            check(native, cut, &[("Assistant", "half", 0)]);
            check(native, Turn::Cut { raw: "" }, &[]);
        }
        let react = Strategy::React;
        check(
            react,
            with_calls,
            &[("Assistant", raw, 0), ("User", "Observation: {\"n\":1}", 0)],
        );
        check(
            react,
            answer,
            &[("Assistant", "Thought: x\nFinal Answer: 42", 0)],
        );
        check(
            react,
            retry,
            &[("Assistant", "junk", 0), ("User", "fix it", 0)],
        );
        check(react, cut, &[("Assistant", "half", 0)]);
        let constrained = Strategy::Constrained;
        check(
            constrained,
            with_calls,
            &[("Assistant", "", 1), ("Tool", "{\"n\":1}", 0)],
        );
        check(constrained, answer, &[("Assistant", "42", 0)]);
        check(
            constrained,
            retry,
            &[("Assistant", "junk", 0), ("User", "fix it", 0)],
        );
        check(constrained, cut, &[]);
    }

    #[test]
    fn mode_parses() {
        assert!(matches!("ReAct".parse::<ToolMode>(), Ok(ToolMode::React)));
        assert!("x".parse::<ToolMode>().is_err());
    }

    #[test]
    fn mode_names_round_trip() {
        for mode in ToolMode::ALL {
            assert_eq!(mode.to_string().parse::<ToolMode>().ok(), Some(mode));
            let json = serde_json::to_value(mode).ok();
            assert_eq!(json, Some(serde_json::Value::from(mode.to_string())));
        }
        assert!(matches!(
            "x".parse::<ToolMode>(),
            Err(CoreError::UnknownToolMode(name)) if name == "x"
        ));
    }

    fn check_fallback(
        strategy: Strategy,
        kind: ProviderErrorKind,
        auto: bool,
        expected: Option<Strategy>,
    ) {
        let mut error = ProviderError::new(kind, "refused");
        error.hint = Some("use --jinja".into());
        let got = strategy.fallback_for(&error, auto);
        assert_eq!(
            got.as_ref().map(Fallback::strategy),
            expected,
            "{strategy:?} {kind:?} {auto}"
        );
        if let Some(fallback) = got {
            assert_eq!(
                fallback.reason(),
                Reason::Refused(Some("use --jinja".into()))
            );
            let mut learned = Learned::default();
            fallback.learn(&mut learned);
            assert!(learned.native_refused);
            assert!(
                fallback.warning("m").ends_with("(use --jinja)"),
                "{}",
                fallback.warning("m")
            );
        }
    }

    #[test]
    fn only_an_automatic_native_strategy_falls_back_and_only_from_refused_tools() {
        use ProviderErrorKind::{ThinkingUnsupported, ToolsUnsupported};
        let react = Some(Strategy::React);
        check_fallback(Strategy::Native, ToolsUnsupported, true, react);
        check_fallback(Strategy::Native, ToolsUnsupported, false, None);
        check_fallback(Strategy::Native, ThinkingUnsupported, true, None);
        check_fallback(Strategy::Native, ProviderErrorKind::Other, true, None);
        for other in [Strategy::React, Strategy::Constrained, Strategy::NoTools] {
            check_fallback(other, ToolsUnsupported, true, None);
        }
    }

    #[test]
    fn only_native_replies_teach_how_calls_come() {
        let check = |strategy: Strategy, structured: bool, expected: Option<(u32, u32)>| {
            let mut learned = std::collections::HashMap::new();
            strategy.learn(&mut learned, "m", structured);
            let got = learned
                .get("m")
                .map(|l: &Learned| (l.native_calls, l.text_calls));
            assert_eq!(got, expected, "{strategy:?} {structured}");
        };
        check(Strategy::Native, true, Some((1, 0)));
        check(Strategy::Native, false, Some((0, 1)));
        for other in [Strategy::React, Strategy::Constrained, Strategy::NoTools] {
            check(other, true, None);
            check(other, false, None);
        }
    }
}
