//! The ReAct fallback for models without native tool calling.
//!
//! Tools are described in the system prompt ([`system_prompt`]) and the model answers in
//! lines headed `Thought:`, `Action:`, `Action Input:` and `Final Answer:`. Only these
//! markers at the **start of a line** count: JSON that is merely quoted in prose, or an
//! `Action:` in the middle of a sentence, is never executed. The `Action Input` must be a
//! JSON object; it is checked here and validated against the tool's schema by the registry
//! before anything runs. Text after a line-anchored `Observation:` (a model imagining the
//! tool's answer) is ignored, and `\nObservation:` is sent as a stop sequence.
//!
//! Results go back in a user message `Observation: <json>` ([`format_observation`]); an
//! Action Input that is not a JSON object draws a correction message
//! ([`correction_message`]) and the loop continues.
//!
//! A ReAct turn is recorded as the model's own text followed by a user message of
//! `Observation: <json>` lines ([`record`]), which is what a model without tool support
//! can read.

use ollm_types::{Message, ProviderRequest, ToolChoice, ToolSchema};
use serde_json::{Map, Value};

use super::common::{self, Shown, TextFilter, Turn};

/// The stop sequence that keeps a model from inventing observations.
pub(crate) const STOP_SEQUENCE: &str = "\nObservation:";

const THOUGHT: &str = "Thought:";
const ACTION: &str = "Action:";
const ACTION_INPUT: &str = "Action Input:";
const OBSERVATION: &str = "Observation:";
const FINAL_ANSWER: &str = "Final Answer:";

/// Offers `tools` as ReAct instructions in the system prompt, with the stop sequence;
/// `must_call` (tool choice `required` or a named tool) adds that a tool must be used
/// before the answer.
pub(crate) fn prepare(request: &mut ProviderRequest, tools: &[ToolSchema], must_call: bool) {
    let mut prompt = system_prompt(tools);
    if must_call {
        prompt.push_str(MUST_CALL);
    }
    common::append_system(&mut request.system, prompt);
    let stop = STOP_SEQUENCE.to_owned();
    if !request.options.stop.contains(&stop) {
        request.options.stop.push(stop);
    }
}

/// The instructions that describe `tools` and the format to the model.
pub(crate) fn system_prompt(tools: &[ToolSchema]) -> String {
    let mut out = String::from("You can use the following tools:\n\n");
    out.push_str(&common::tool_list(tools));
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    out.push_str(&format!(
        "\nTo use a tool, answer with exactly these lines and then stop:\n\
         Thought: what you are thinking\n\
         Action: the tool to use, one of [{}]\n\
         Action Input: the arguments as one JSON object on one line\n\n\
         The result comes back as:\n\
         Observation: the result as JSON\n\n\
         When you know the answer, reply with:\n\
         Thought: what you concluded\n\
         Final Answer: your answer",
        names.join(", ")
    ));
    out
}

/// What a ReAct reply asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ReactStep {
    /// Call `tool` with `arguments`.
    Action {
        /// The Thought before it, if any.
        thought: Option<String>,
        /// The tool's name.
        tool: String,
        /// The arguments (a JSON object).
        arguments: Map<String, Value>,
    },
    /// An Action whose input is missing, not JSON or not an object.
    InvalidInput {
        /// The Thought before it, if any.
        thought: Option<String>,
        /// The tool's name.
        tool: String,
        /// The input as written.
        raw: String,
        /// What was wrong.
        error: String,
    },
    /// The answer.
    FinalAnswer {
        /// The Thought before it, if any.
        thought: Option<String>,
        /// The answer text.
        answer: String,
    },
    /// No marker at all: the whole text is taken as the answer.
    NoAction {
        /// The text.
        text: String,
    },
}

/// A line-anchored marker found in a reply: which, where its line starts, where its
/// content starts.
struct Marker {
    name: &'static str,
    line_start: usize,
    content_start: usize,
}

fn markers(text: &str) -> Vec<Marker> {
    let mut out = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let lead = line.len() - trimmed.len();
        for name in [THOUGHT, ACTION_INPUT, ACTION, OBSERVATION, FINAL_ANSWER] {
            if trimmed.starts_with(name) {
                out.push(Marker {
                    name,
                    line_start: offset,
                    content_start: offset + lead + name.len(),
                });
                break;
            }
        }
        offset += line.len();
    }
    out
}

/// The content of marker `i`: up to the next marker's line, or the end.
fn section<'a>(text: &'a str, ms: &[Marker], i: usize) -> &'a str {
    let end = ms.get(i + 1).map_or(text.len(), |m| m.line_start);
    text[ms[i].content_start..end].trim()
}

/// Reads the arguments of an Action Input: the first JSON value of the text, which must be
/// an object.
pub(crate) fn parse_action_input(raw: &str) -> Result<Map<String, Value>, String> {
    let body = common::strip_fence(raw);
    if body.is_empty() {
        return Err("the Action Input is missing".into());
    }
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    match values.next() {
        Some(Ok(Value::Object(map))) => Ok(map),
        Some(Ok(other)) => Err(format!(
            "expected a JSON object, got {}",
            match other {
                Value::Null => "null",
                Value::Bool(_) => "a boolean",
                Value::Number(_) => "a number",
                Value::String(_) => "a string",
                Value::Array(_) => "an array",
                Value::Object(_) => "an object",
            }
        )),
        Some(Err(e)) => Err(format!("invalid JSON: {e}")),
        None => Err("the Action Input is missing".into()),
    }
}

/// Reads a whole ReAct reply (see the module docs for the rules).
pub(crate) fn parse(text: &str) -> ReactStep {
    let mut ms = markers(text);
    // Nothing after an imagined observation counts.
    if let Some(cut) = ms.iter().position(|m| m.name == OBSERVATION) {
        let end = ms[cut].line_start;
        ms.truncate(cut);
        return parse_markers(&text[..end], &ms);
    }
    parse_markers(text, &ms)
}

fn parse_markers(text: &str, ms: &[Marker]) -> ReactStep {
    let thought = ms
        .iter()
        .position(|m| m.name == THOUGHT)
        .map(|i| section(text, ms, i).to_owned())
        .filter(|t| !t.is_empty());
    let action = ms.iter().position(|m| m.name == ACTION);
    let fin = ms.iter().position(|m| m.name == FINAL_ANSWER);
    match (action, fin) {
        (Some(a), f) if f.is_none_or(|f| a < f) => {
            let tool = section(text, ms, a)
                .lines()
                .next()
                .unwrap_or_default()
                .trim()
                .trim_matches(|c| c == '`' || c == '"' || c == '\'')
                .to_owned();
            let input = ms[a + 1..]
                .iter()
                .position(|m| m.name == ACTION_INPUT)
                .map(|j| section(text, ms, a + 1 + j))
                .unwrap_or_default();
            match parse_action_input(input) {
                Ok(arguments) => ReactStep::Action {
                    thought,
                    tool,
                    arguments,
                },
                Err(error) => ReactStep::InvalidInput {
                    thought,
                    tool,
                    raw: input.to_owned(),
                    error,
                },
            }
        }
        (_, Some(f)) => {
            let end = text.len();
            let answer = text[ms[f].content_start..end].trim().to_owned();
            ReactStep::FinalAnswer { thought, answer }
        }
        _ => ReactStep::NoAction {
            text: text.trim().to_owned(),
        },
    }
}

/// The user message that carries a tool's result back: `Observation: <json>`, where the
/// JSON is the result itself when it is JSON, else the result as a JSON string.
pub(crate) fn format_observation(content: &str) -> String {
    let value = serde_json::from_str::<Value>(content)
        .unwrap_or_else(|_| Value::String(content.to_owned()));
    format!("{OBSERVATION} {value}")
}

/// The instruction added when the tool choice obliges a call.
const MUST_CALL: &str = "\n\nYou must use a tool now: reply with an Action, not a Final Answer.";

/// The user message sent when the model answered although the tool choice obliges a
/// call (`required`, or the tool named).
pub(crate) fn must_call_message(choice: &ToolChoice) -> String {
    let which = match choice {
        ToolChoice::Tool(name) => format!("`Action: {name}`"),
        _ => "an `Action:` line naming one of the tools".to_owned(),
    };
    format!(
        "{OBSERVATION} {}",
        Value::String(format!(
            "Error: you must use a tool before answering. Reply with {which} and \
             `Action Input:` followed by the arguments as one JSON object."
        ))
    )
}

/// The user message sent when an Action Input could not be read.
pub(crate) fn correction_message(tool: &str, error: &str) -> String {
    format!(
        "{OBSERVATION} {}",
        Value::String(format!(
            "Error: the Action Input for {tool} could not be used ({error}). Reply again with \
             `Action: {tool}` and `Action Input:` followed by the arguments as one JSON \
             object, or give your Final Answer."
        ))
    )
}

/// Shows a ReAct reply while it streams: Thought lines as thinking, the Final Answer as
/// text (as soon as its marker is seen), Action lines not at all.
#[derive(Debug, Default)]
pub(crate) struct ReactStreamer {
    pending: String,
    state: StreamState,
    answer_shown: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum StreamState {
    /// Before any marker.
    #[default]
    Start,
    Thought,
    Action,
    Answer,
    /// After an imagined observation: nothing more is shown.
    Stopped,
}

impl ReactStreamer {
    /// What to show for a new piece of text.
    fn push(&mut self, delta: &str) -> Vec<Shown> {
        let mut out = Vec::new();
        if self.state == StreamState::Answer {
            self.show_answer(delta, &mut out);
            return out;
        }
        if self.state == StreamState::Stopped {
            return out;
        }
        self.pending.push_str(delta);
        while let Some(nl) = self.pending.find('\n') {
            let line: String = self.pending.drain(..=nl).collect();
            self.line(&line, &mut out);
            if self.state == StreamState::Answer {
                let rest = std::mem::take(&mut self.pending);
                self.show_answer(&rest, &mut out);
                return out;
            }
            if self.state == StreamState::Stopped {
                self.pending.clear();
                return out;
            }
        }
        // A Final Answer line may stream before its newline arrives.
        if self.pending.trim_start().starts_with(FINAL_ANSWER) {
            let line = std::mem::take(&mut self.pending);
            self.line(&line, &mut out);
        }
        out
    }

    /// What is left of the streamed text to show when the reply ends.
    fn flush(&mut self) -> Vec<Shown> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.pending);
        if !rest.is_empty() && self.state != StreamState::Stopped {
            self.line(&rest, &mut out);
        }
        out
    }

    fn show_answer(&mut self, text: &str, out: &mut Vec<Shown>) {
        if !text.is_empty() {
            self.answer_shown = true;
            out.push(Shown::Text(text.to_owned()));
        }
    }

    fn line(&mut self, line: &str, out: &mut Vec<Shown>) {
        let trimmed = line.trim_start();
        if let Some(rest) = trimmed.strip_prefix(THOUGHT) {
            self.state = StreamState::Thought;
            let rest = rest.trim_start();
            if !rest.is_empty() {
                out.push(Shown::Thinking(rest.to_owned()));
            }
        } else if trimmed.starts_with(ACTION_INPUT) || trimmed.starts_with(ACTION) {
            self.state = StreamState::Action;
        } else if trimmed.starts_with(OBSERVATION) {
            self.state = StreamState::Stopped;
        } else if let Some(rest) = trimmed.strip_prefix(FINAL_ANSWER) {
            self.state = StreamState::Answer;
            let rest = rest.trim_start();
            self.show_answer(rest, out);
        } else if self.state == StreamState::Thought && !line.is_empty() {
            out.push(Shown::Thinking(line.to_owned()));
        }
    }
}

impl TextFilter for ReactStreamer {
    fn feed(&mut self, delta: &str) -> Vec<Shown> {
        self.push(delta)
    }

    /// The rest of the streamed text, then the answer if none of it was shown yet (a
    /// reply without markers is all answer).
    fn finish(&mut self, answer: Option<&str>) -> Vec<Shown> {
        let mut out = self.flush();
        if let Some(answer) = answer {
            if !self.answer_shown && !answer.is_empty() {
                out.push(Shown::Text(answer.to_owned()));
            }
        }
        out
    }
}

/// Records a ReAct turn: calls as the model's own text (its Action lines) followed by a
/// user message of observations, one line per result; everything else as the model's
/// text.
pub(crate) fn record(turn: Turn<'_>) -> Vec<Message> {
    match turn {
        Turn::Calls { raw, results, .. } if !raw.is_empty() => {
            let observations: Vec<String> = results
                .iter()
                .map(|r| format_observation(&r.content))
                .collect();
            vec![
                Message::assistant(raw),
                Message::user(observations.join("\n")),
            ]
        }
        Turn::Calls { raw, .. } => common::record_default(turn, raw),
        Turn::Answer { raw, .. } => vec![Message::assistant(raw)],
        Turn::Retry { .. } | Turn::Cut { .. } => common::record_default(turn, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
    use test_utils::split::split_text;

    fn config() -> ProptestConfig {
        ProptestConfig {
            cases: 100,
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    fn tool_name() -> impl Strategy<Value = String> {
        "[a-z][a-z_]{0,10}"
    }

    fn arb_args() -> impl Strategy<Value = Map<String, Value>> {
        prop::collection::btree_map(
            "[a-z]{1,6}",
            prop_oneof![
                any::<i64>().prop_map(Value::from),
                "[ -~]{0,10}".prop_map(Value::from),
                any::<bool>().prop_map(Value::from),
            ],
            0..4,
        )
        .prop_map(|m| m.into_iter().collect())
    }

    proptest! {
        #![proptest_config(config())]

        // Property 13: ReAct formatting (the run's side is in tests/all/react.rs).
        #[test]
        fn react_formatting(tools in prop::collection::vec((tool_name(), "[A-Za-z ]{0,20}"), 1..5)) {
            let schemas: Vec<ToolSchema> = tools
                .iter()
                .map(|(n, d)| ToolSchema::new(n, d, json!({"type": "object", "properties": {"q": {"type": "string"}}})))
                .collect();
            let prompt = system_prompt(&schemas);
            for s in &schemas {
                let line = format!("- {}: {}", s.name, s.description);
                prop_assert!(prompt.contains(&line));
                prop_assert!(prompt.contains(&s.parameters.to_string()));
            }
            for marker in ["Thought:", "Action:", "Action Input:", "Observation:", "Final Answer:"] {
                prop_assert!(prompt.contains(marker));
            }
        }

        // Property 14: parsing
        #[test]
        fn react_parsing(thought in "[a-zA-Z ]{0,20}", tool in tool_name(), args in arb_args(), indent in " {0,2}") {
            let text = format!(
                "Thought: {thought}\n{indent}Action: {tool}\n{indent}Action Input: {}\n",
                Value::Object(args.clone())
            );
            match parse(&text) {
                ReactStep::Action { tool: t, arguments, thought: th } => {
                    prop_assert_eq!(t, tool);
                    prop_assert_eq!(arguments, args);
                    prop_assert_eq!(th.unwrap_or_default(), thought.trim().to_owned());
                }
                other => prop_assert!(false, "{:?}", other),
            }
        }

        // Property 15: validation (the registry's side is in tests/all/react.rs).
        #[test]
        fn react_validation(value in prop_oneof![
            any::<i64>().prop_map(Value::from),
            "[a-z]{0,5}".prop_map(Value::from),
            prop::collection::vec(any::<u8>().prop_map(Value::from), 0..3).prop_map(Value::from),
            Just(Value::Null),
            arb_args().prop_map(Value::Object),
        ]) {
            // Only a JSON object is accepted as an Action Input.
            let parsed = parse_action_input(&value.to_string());
            prop_assert_eq!(parsed.is_ok(), value.is_object());
        }

        // Property 16: observation
        #[test]
        fn react_observation(content in prop_oneof![
            ".{0,30}",
            arb_args().prop_map(|m| Value::Object(m).to_string()),
        ]) {
            let obs = format_observation(&content);
            let body = obs.strip_prefix("Observation: ").unwrap();
            let value: Value = serde_json::from_str(body).unwrap();
            match serde_json::from_str::<Value>(&content) {
                Ok(json) => prop_assert_eq!(value, json),
                Err(_) => prop_assert_eq!(value, Value::String(content.clone())),
            }
            prop_assert!(!body.contains('\n'));
        }

        // Property 17: final answer (the run's side is in tests/all/react.rs).
        #[test]
        fn react_final_answer(thought in "[a-z ]{1,20}", answer in "[a-zA-Z0-9 .,]{1,40}") {
            let text = format!("Thought: {thought}\nFinal Answer: {answer}");
            let expected_answer = answer.trim().to_owned();
            match parse(&text) {
                ReactStep::FinalAnswer { answer: a, .. } => prop_assert_eq!(&a, &expected_answer),
                other => prop_assert!(false, "{:?}", other),
            }
        }

        /// What the ReAct display shows does not depend on how the reply was split.
        #[test]
        fn react_display_is_split_invariant(
            thought in "[a-z ]{0,15}",
            answer in "[a-z ]{0,15}",
            cuts in prop::collection::vec(any::<usize>(), 0..8),
        ) {
            let text = format!("Thought: {thought}\nmore thought\nFinal Answer: {answer}");
            let flatten = |chunks: &[String]| {
                let mut s = ReactStreamer::default();
                let mut shown: Vec<Shown> = chunks.iter().flat_map(|c| s.feed(c)).collect();
                shown.extend(s.finish(None));
                let (mut t, mut k) = (String::new(), String::new());
                for piece in shown {
                    match piece {
                        Shown::Text(x) => t.push_str(&x),
                        Shown::Thinking(x) => k.push_str(&x),
                    }
                }
                (t, k)
            };
            let whole = flatten(std::slice::from_ref(&text));
            let pieces: Vec<String> = split_text(&text, &cuts).into_iter().map(str::to_owned).collect();
            let split_up = flatten(&pieces);
            prop_assert_eq!(&split_up.0.trim(), &answer.trim());
            prop_assert_eq!(whole.0.trim(), split_up.0.trim());
            prop_assert_eq!(whole.1, split_up.1);
        }
    }

    #[test]
    fn parses_an_action() {
        let step = parse(
            "Thought: I should add\nAction: add\nAction Input: {\"a\": 1, \"b\": 2}\n\
             Observation: 3\nFinal Answer: 3",
        );
        let ReactStep::Action {
            tool,
            arguments,
            thought,
        } = step
        else {
            panic!("{step:?}")
        };
        assert_eq!(tool, "add");
        assert_eq!(Value::Object(arguments), json!({"a": 1, "b": 2}));
        assert_eq!(thought.as_deref(), Some("I should add"));
    }

    #[test]
    fn json_in_prose_is_not_an_action() {
        let text = "You could call it like Action: add with {\"a\": 1}.\n\
                    For example: Action Input: {\"a\": 1}";
        assert!(matches!(parse(text), ReactStep::NoAction { .. }));
    }

    #[test]
    fn fenced_input_is_read() {
        let step = parse("Action: t\nAction Input: ```json\n{\"x\": true}\n```");
        assert!(matches!(step, ReactStep::Action { .. }), "{step:?}");
    }

    #[test]
    fn non_object_input_is_invalid() {
        assert!(matches!(
            parse("Action: t\nAction Input: [1,2]"),
            ReactStep::InvalidInput { .. }
        ));
        assert!(matches!(
            parse("Action: t\nAction Input: {oops"),
            ReactStep::InvalidInput { .. }
        ));
        assert!(matches!(parse("Action: t"), ReactStep::InvalidInput { .. }));
    }

    #[test]
    fn streamer_splits_thought_and_answer() {
        let mut s = ReactStreamer::default();
        let mut shown = Vec::new();
        for piece in ["Thou", "ght: hm\nFinal An", "swer: forty", "-two"] {
            shown.extend(s.feed(piece));
        }
        shown.extend(s.finish(None));
        assert_eq!(
            shown,
            vec![
                Shown::Thinking("hm\n".into()),
                Shown::Text("forty".into()),
                Shown::Text("-two".into())
            ]
        );
    }
}
