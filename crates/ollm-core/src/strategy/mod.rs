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
//! Guards that hold for every strategy (such as refusing the same call over and over)
//! belong to the loop, in `chat/turn.rs` before `chat/calls.rs` runs the calls.
//!
//! [`ToolMode::Auto`] picks native when the model reports tool support *or the provider
//! cannot say* (no capabilities, or `show_model` failed), and ReAct only when the server
//! positively reports capabilities without `tools`.

mod common;
mod constrained;
mod native;
mod react;

use std::fmt;
use std::str::FromStr;

use ollm_types::{Capability, Message, ModelInfo, ProviderRequest, ToolCall, ToolSchema};
use serde::{Deserialize, Serialize};

use crate::CoreError;
use crate::tool::ToolOutcome;
pub(crate) use common::{Shown, TextFilter, Turn};

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
    /// offered). `has_tools` is false when no tools are to be offered.
    pub(crate) fn resolve(mode: ToolMode, info: Option<&ModelInfo>, has_tools: bool) -> Self {
        if !has_tools {
            return Strategy::NoTools;
        }
        match mode {
            ToolMode::Native => Strategy::Native,
            ToolMode::React => Strategy::React,
            ToolMode::Constrained => Strategy::Constrained,
            ToolMode::Auto => {
                let native =
                    !capabilities_known(info) || info.is_some_and(|i| i.has(&Capability::Tools));
                if native {
                    Strategy::Native
                } else {
                    Strategy::React
                }
            }
        }
    }

    /// Offers `tools` in `request` the way this strategy does.
    pub(crate) fn prepare(self, request: &mut ProviderRequest, tools: &[ToolSchema]) {
        match self {
            Strategy::NoTools => {}
            Strategy::Native => native::prepare(request, tools),
            Strategy::React => react::prepare(request, tools),
            Strategy::Constrained => constrained::prepare(request, tools),
        }
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
    pub(crate) fn interpret(
        self,
        text: &str,
        native_calls: Vec<ToolCall>,
        tools: &[ToolSchema],
        mint: &mut dyn FnMut() -> String,
    ) -> TurnOutcome {
        if self == Strategy::Native {
            return match native::interpret(text, native_calls, tools, mint) {
                native::Read::Answer(answer) => TurnOutcome::Answer(answer),
                native::Read::Calls {
                    calls,
                    answered,
                    prose,
                } => TurnOutcome::TextCalls {
                    calls,
                    answered,
                    prose,
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

    #[test]
    fn auto_resolution() {
        let auto = ToolMode::Auto;
        assert_eq!(Strategy::resolve(auto, None, true), Strategy::Native);
        assert_eq!(
            Strategy::resolve(auto, Some(&info(vec![])), true),
            Strategy::Native
        );
        assert_eq!(
            Strategy::resolve(auto, Some(&info(vec![Capability::Completion])), true),
            Strategy::React
        );
        assert_eq!(
            Strategy::resolve(auto, Some(&info(vec![Capability::Tools])), true),
            Strategy::Native
        );
        assert_eq!(Strategy::resolve(auto, None, false), Strategy::NoTools);
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
}
