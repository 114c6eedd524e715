//! How tools reach the model: natively, as ReAct text, or through a schema-constrained
//! reply. This is the seam between the turn loop and the tool-calling protocol.
//!
//! The loop in [`crate::chat`] is the same for every strategy: build a request, stream the
//! reply, turn it into a [`TurnOutcome`] (an answer, tool calls, or a correction to send),
//! run calls, record the turn. A [`Strategy`] decides only three things:
//! 1. how the request offers the tools ([`Strategy::prepare`]): native `tools`, ReAct
//!    instructions in the system prompt, or a `oneOf` output schema;
//! 2. how streamed text is shown while it arrives ([`TextFilter`]): as is (native), Thought
//!    as thinking and Final Answer as text (ReAct), or held back until the JSON is complete
//!    (constrained);
//! 3. how the finished reply is read ([`Strategy::interpret`]).
//!
//! [`ToolMode::Auto`] picks native when the model reports tool support *or the provider
//! cannot say* (no capabilities, or `show_model` failed), and ReAct only when the server
//! positively reports capabilities without `tools`.

use ollm_types::{ModelInfo, ProviderRequest, ResponseFormat, ToolCall, ToolSchema};
use serde::{Deserialize, Serialize};

use crate::{constrained, react, textcalls};

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

impl std::str::FromStr for ToolMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(ToolMode::Auto),
            "native" => Ok(ToolMode::Native),
            "react" => Ok(ToolMode::React),
            "constrained" => Ok(ToolMode::Constrained),
            other => Err(format!(
                "unknown tool mode {other:?} (expected auto, native, react or constrained)"
            )),
        }
    }
}

/// A settled strategy for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
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
pub fn capabilities_known(info: Option<&ModelInfo>) -> bool {
    info.is_some_and(|i| !i.capabilities.is_empty())
}

impl Strategy {
    /// Settles `mode` for a model with `info` (`None` when `show_model` failed or is not
    /// offered). `has_tools` is false when no tools are to be offered.
    pub fn resolve(mode: ToolMode, info: Option<&ModelInfo>, has_tools: bool) -> Self {
        if !has_tools {
            return Strategy::NoTools;
        }
        match mode {
            ToolMode::Native => Strategy::Native,
            ToolMode::React => Strategy::React,
            ToolMode::Constrained => Strategy::Constrained,
            ToolMode::Auto => {
                let native = !capabilities_known(info)
                    || info.is_some_and(|i| i.has(&ollm_types::Capability::Tools));
                if native {
                    Strategy::Native
                } else {
                    Strategy::React
                }
            }
        }
    }

    /// Offers `tools` in `request` the way this strategy does.
    pub fn prepare(self, request: &mut ProviderRequest, tools: &[ToolSchema]) {
        let append = |system: &mut Option<String>, extra: String| {
            *system = Some(match system.take() {
                Some(s) if !s.is_empty() => format!("{s}\n\n{extra}"),
                _ => extra,
            });
        };
        match self {
            Strategy::NoTools => {}
            Strategy::Native => request.tools = tools.to_vec(),
            Strategy::React => {
                append(&mut request.system, react::system_prompt(tools));
                let stop = react::STOP_SEQUENCE.to_owned();
                if !request.options.stop.contains(&stop) {
                    request.options.stop.push(stop);
                }
            }
            Strategy::Constrained => {
                append(&mut request.system, constrained::system_prompt(tools));
                request.response_format = Some(ResponseFormat::JsonSchema {
                    name: constrained::SCHEMA_NAME.to_owned(),
                    schema: constrained::response_schema(tools),
                });
            }
        }
    }

    /// A fresh display filter for one reply.
    pub fn text_filter(self) -> TextFilter {
        match self {
            Strategy::NoTools | Strategy::Native => TextFilter::PassThrough,
            Strategy::React => TextFilter::React(react::ReactStreamer::default()),
            Strategy::Constrained => TextFilter::Hold,
        }
    }

    /// Reads a finished reply: its whole text and the native calls that arrived.
    /// `mint` makes ids for calls parsed from text.
    pub fn interpret(
        self,
        text: &str,
        native_calls: Vec<ToolCall>,
        offered: &dyn Fn(&str) -> bool,
        mint: &mut dyn FnMut() -> String,
    ) -> TurnOutcome {
        if !native_calls.is_empty() {
            return TurnOutcome::Calls(native_calls);
        }
        match self {
            Strategy::NoTools => TurnOutcome::Answer(text.to_owned()),
            Strategy::Native => match textcalls::recover(text, offered) {
                Some(calls) => TurnOutcome::Calls(
                    calls
                        .into_iter()
                        .map(|(name, arguments)| ToolCall {
                            id: mint(),
                            name,
                            arguments,
                        })
                        .collect(),
                ),
                None => TurnOutcome::Answer(text.to_owned()),
            },
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
pub enum TurnOutcome {
    /// The turn's answer; the run ends.
    Answer(String),
    /// Calls to run; the loop continues with their results.
    Calls(Vec<ToolCall>),
    /// The reply could not be understood: send `correction` and continue.
    Retry {
        /// The message that tells the model what to fix.
        correction: String,
        /// What was wrong, for a warning.
        problem: String,
    },
}

/// How streamed text is shown while a reply arrives.
#[derive(Debug)]
pub enum TextFilter {
    /// Text is the answer.
    PassThrough,
    /// ReAct: Thought lines go out as thinking, the Final Answer as text.
    React(react::ReactStreamer),
    /// Constrained: nothing is shown until the JSON reply is read.
    Hold,
}

/// A piece of text to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shown {
    /// Answer text.
    Text(String),
    /// Reasoning text.
    Thinking(String),
}

impl TextFilter {
    /// What to show for a new piece of text.
    pub fn feed(&mut self, delta: &str) -> Vec<Shown> {
        match self {
            TextFilter::PassThrough => vec![Shown::Text(delta.to_owned())],
            TextFilter::React(s) => s.feed(delta),
            TextFilter::Hold => Vec::new(),
        }
    }

    /// What is left to show when the reply ends with `outcome`.
    pub fn finish(&mut self, outcome: &TurnOutcome) -> Vec<Shown> {
        match self {
            TextFilter::PassThrough => Vec::new(),
            TextFilter::React(s) => {
                let mut out = s.finish();
                if let TurnOutcome::Answer(answer) = outcome {
                    if !s.answer_shown() && !answer.is_empty() {
                        out.push(Shown::Text(answer.clone()));
                    }
                }
                out
            }
            TextFilter::Hold => match outcome {
                TurnOutcome::Answer(answer) if !answer.is_empty() => {
                    vec![Shown::Text(answer.clone())]
                }
                _ => Vec::new(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ollm_types::Capability;

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

    #[test]
    fn mode_parses() {
        assert_eq!("ReAct".parse::<ToolMode>(), Ok(ToolMode::React));
        assert!("x".parse::<ToolMode>().is_err());
    }
}
