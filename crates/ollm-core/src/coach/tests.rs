//! Every rule of the coach, as tables through one [`check`] helper: a run's moments go in
//! as [`Step`]s, what the coach decided at each comes out as a [`Heard`], and the whole
//! list is compared. No provider, no turn loop: the coach's decisions alone, each case
//! once with its rule on and once with it off.

use std::sync::Arc;

use ollm_types::{Message, ProviderRequest, ToolCall, ToolSchema};
use serde_json::{Map, Value, json};

use super::*;
use crate::recover::{OfferedTools, Recovered, recover};
use crate::tool::{Tool, ToolError};

/// A tool that answers `result of NAME`, with a schema declaring `path` (required, a
/// string) and `regex` (a boolean).
#[derive(Debug)]
struct Fake(&'static str);

#[async_trait::async_trait]
impl Tool for Fake {
    fn schema(&self) -> ToolSchema {
        let parameters = json!({
            "type": "object",
            "properties": {"path": {"type": "string"}, "regex": {"type": "boolean"}},
            "required": ["path"],
        });
        ToolSchema::new(self.0, "a fake", parameters)
    }

    async fn execute(&self, _: Map<String, Value>) -> Result<Value, ToolError> {
        Ok(json!(format!("result of {}", self.0)))
    }
}

fn tools() -> ToolRegistry {
    let mut tools = ToolRegistry::new();
    for name in ["read_file", "list_dir", "search_text"] {
        tools.register(Arc::new(Fake(name))).unwrap();
    }
    tools
}

fn call(name: &str, args: Value) -> ToolCall {
    ToolCall::new(format!("id-{name}"), name, args).unwrap()
}

/// One moment of a run, as the coach hears of it.
enum Step {
    /// A request, offering tools or not.
    Request { offers_tools: bool },
    /// A streamed reply, in one delta.
    Stream(&'static str),
    /// A finished reply's text, as read.
    Read(&'static str),
    /// An answer, whether it shows a call, whether the run offers tools.
    Answer(&'static str, bool, bool),
    /// A reply stopped for repeating itself, with calls or not.
    Stopped(bool),
    /// The run reached its turn limit.
    AtLimit,
    /// A reply's calls: bounded, planned, answered and learned.
    Calls(Vec<ToolCall>),
    /// A reply's text read for calls: what it calls.
    Recover(&'static str),
    /// One call run by the registry: its result.
    Execute(ToolCall),
    /// A reply read by the native strategy: the results it decided without running.
    Interpret(&'static str),
    /// A reply a proxy would send its client: whether it has text, how many declared calls.
    Delivered(bool, usize),
}

/// What the coach decided at one step.
#[derive(Debug, PartialEq)]
enum Heard {
    /// The first user message, and the temperature, of the request.
    Request(String, Option<f32>),
    /// The rule that stopped or cut the reply.
    Stream(Option<Rule>),
    Read(String),
    /// The nudge said, by which rule, and whether the reply is dropped.
    Said(Option<(Nudge, Rule, bool)>),
    /// At the turn limit: whether one more reply is asked for, and the nudge said.
    AtLimit(Option<Option<(Nudge, Rule, bool)>>),
    Calls {
        /// How many calls were dropped past the bound.
        dropped: usize,
        sources: Vec<Source>,
        /// Per call, whether the history keeps it.
        recorded: Vec<bool>,
        nudge: Option<Rule>,
        stuck: Option<usize>,
        /// Whether the next request withholds the tools.
        withholds: bool,
    },
    /// The calls read: name and arguments, `?NAME` for an unknown tool, `!malformed`.
    Recovered(Vec<String>),
    Result(String),
}

/// The coach's decisions on `steps`, in a run with the rules `off` turned off (and the
/// CLI's words), against `expected`. `seed` is the conversation it starts from.
fn check(off: &[Rule], seed: &[Message], steps: Vec<Step>, expected: Vec<Heard>) {
    check_with(&[], off, seed, steps, expected);
}

/// [`check`] with the rules `on` of those off by default turned on.
fn check_with(on: &[Rule], off: &[Rule], seed: &[Message], steps: Vec<Step>, expected: Vec<Heard>) {
    let mut config = CoachConfig {
        scope: Some("this folder".into()),
        path_argument: Some("path".into()),
        ..CoachConfig::default()
    };
    config.on.extend(on.iter().copied());
    config.off.extend(off.iter().copied());
    let tools = tools();
    let mut coach = Coach::seeded(config, seed, &tools)
        .for_requests(Some("[Working folder: /w]".into()), Some(0.0));
    let heard: Vec<Heard> = steps
        .into_iter()
        .map(|step| hear(&mut coach, &tools, step))
        .collect();
    assert_eq!(heard, expected, "on: {on:?}, off: {off:?}");
}

fn hear(coach: &mut Coach, tools: &ToolRegistry, step: Step) -> Heard {
    match step {
        Step::Request { offers_tools } => {
            let mut request = ProviderRequest::new("m", vec![Message::user("q")]);
            coach.before_request(&mut request, offers_tools);
            Heard::Request(request.messages[0].text(), request.options.temperature)
        }
        Step::Stream(text) => {
            let mut watch = coach.watch();
            let stopped = watch.text(text).then_some(Rule::RunawayStop);
            Heard::Stream(stopped.or_else(|| watch.reply(text).map(|c| c.rule)))
        }
        Step::Read(text) => {
            let mut raw = text.to_owned();
            coach.read_reply(&mut raw);
            Heard::Read(raw)
        }
        Step::Answer(text, shows, offers) => {
            let said = coach.after_answer(text, shows, offers);
            Heard::Said(said.map(|s| (s.nudge, s.rule, s.drops_reply)))
        }
        Step::Stopped(has_calls) => {
            let said = coach.after_stopped(has_calls);
            Heard::Said(said.map(|s| (s.nudge, s.rule, s.drops_reply)))
        }
        Step::AtLimit => {
            let said = coach.at_limit();
            Heard::AtLimit(said.map(|s| s.map(|s| (s.nudge, s.rule, s.drops_reply))))
        }
        Step::Calls(calls) => hear_calls(coach, tools, calls),
        Step::Recover(text) => hear_recovery(coach, tools, text),
        Step::Execute(call) => {
            let result = futures::executor::block_on(tools.execute_coached(&call, coach.config()));
            Heard::Result(result.content)
        }
        Step::Interpret(text) => hear_interpretation(coach, tools, text),
        Step::Delivered(has_text, calls) => {
            let nudge = coach.after_nothing(has_text, calls);
            Heard::Said(nudge.map(|n| (n, Rule::AnswerAfterNothing, true)))
        }
    }
}

/// What the native strategy answers a reply's calls with, without running them.
fn hear_interpretation(coach: &Coach, tools: &ToolRegistry, text: &str) -> Heard {
    let strategy = crate::strategy::Strategy::Native;
    let mut mint = || "id".to_owned();
    let choice = ollm_types::ToolChoice::Auto;
    let schemas = tools.schemas();
    let read = strategy.interpret(text, vec![], &schemas, &mut mint, &choice, coach.config());
    let answered = match read {
        crate::strategy::TurnOutcome::TextCalls { answered, .. } => answered,
        _ => Vec::new(),
    };
    let results = answered.into_iter().flatten().map(|r| r.content).collect();
    Heard::Recovered(results)
}

/// Plays one turn of calls: each planned to run gets its tool's result (an error for a
/// tool not in `tools`).
fn hear_calls(coach: &mut Coach, tools: &ToolRegistry, mut calls: Vec<ToolCall>) -> Heard {
    let dropped = coach.bound(&mut calls).len();
    let plan = coach.plan(tools, &calls);
    let mut results: Vec<ToolOutcome> = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let result = match &plan.sources()[i] {
            Source::Run if !tools.contains(&call.name) => ToolOutcome::error("unknown tool"),
            Source::Run => ToolOutcome::ok(format!("result of {}", call.name)),
            Source::Earlier => coach.earlier(&plan, i).unwrap(),
            Source::Twin(j) => Coach::twin(&call.name, &results[*j]),
        };
        results.push(result);
    }
    let after = coach.after_calls(tools, &calls, &plan, &results);
    Heard::Calls {
        dropped,
        sources: plan.sources().to_vec(),
        recorded: after.recorded,
        nudge: after.nudge.map(|s| s.rule),
        stuck: after.stuck,
        withholds: coach.withholds_tools(),
    }
}

fn hear_recovery(coach: &Coach, tools: &ToolRegistry, text: &str) -> Heard {
    let offered = tools.schemas().into_iter().map(|t| (t.name, t.parameters));
    let offered = OfferedTools::new(offered).coached(coach.config());
    let names = recover(text, &offered)
        .calls
        .into_iter()
        .map(|r| match r {
            Recovered::Call { name, arguments } => format!("{name} {}", Value::Object(arguments)),
            Recovered::UnknownTool { name, .. } => format!("?{name}"),
            Recovered::Malformed { .. } => "!malformed".to_owned(),
        })
        .collect();
    Heard::Recovered(names)
}

/// A turn of calls as heard: none dropped, these sources, each recorded or none, and
/// the rest.
fn calls(sources: &[Source], record: bool, nudge: Option<Rule>, stuck: Option<usize>) -> Heard {
    kept(sources, &vec![record; sources.len()], nudge, stuck)
}

/// [`calls`], with the calls the history keeps given one by one.
fn kept(sources: &[Source], recorded: &[bool], nudge: Option<Rule>, stuck: Option<usize>) -> Heard {
    Heard::Calls {
        dropped: 0,
        sources: sources.to_vec(),
        recorded: recorded.to_vec(),
        nudge,
        stuck,
        withholds: nudge.is_some(),
    }
}

fn read_a() -> ToolCall {
    call("read_file", json!({"path": "a"}))
}

use Source::{Earlier, Run, Twin};

#[test]
fn repeat_guard() {
    let steps = || {
        vec![
            Step::Calls(vec![read_a(), read_a()]),
            Step::Calls(vec![read_a()]),
        ]
    };
    check(
        &[],
        &[],
        steps(),
        vec![
            kept(&[Run, Twin(0)], &[true, false], None, None),
            calls(&[Earlier], false, Some(Rule::AnswerAfterIdle), None),
        ],
    );
    check(
        &[Rule::RepeatGuard],
        &[],
        steps(),
        vec![
            calls(&[Run, Run], true, None, None),
            calls(&[Run], true, None, None),
        ],
    );
}

#[test]
fn repeat_ignores_undeclared() {
    let with_port = call("read_file", json!({"path": "a", "port": 8123}));
    let steps = || {
        vec![
            Step::Calls(vec![read_a()]),
            Step::Calls(vec![with_port.clone()]),
        ]
    };
    check(
        &[],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            calls(&[Earlier], false, Some(Rule::AnswerAfterIdle), None),
        ],
    );
    check(
        &[Rule::RepeatIgnoresUndeclared],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            calls(&[Run], true, None, None),
        ],
    );
}

#[test]
fn repeat_limit() {
    let steps = || {
        (0..3)
            .map(|_| Step::Calls(vec![read_a()]))
            .collect::<Vec<_>>()
    };
    let repeat = |stuck| calls(&[Earlier], false, stuck, None);
    let idle = Some(Rule::AnswerAfterIdle);
    check(
        &[],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            repeat(idle),
            calls(&[Earlier], false, None, Some(0)),
        ],
    );
    check(
        &[Rule::RepeatLimit],
        &[],
        steps(),
        vec![calls(&[Run], true, None, None), repeat(idle), repeat(idle)],
    );
}

#[test]
fn answer_at_repeat_limit() {
    // The 0.5B's loop: its first call, then that call again beside a fresh one (no turn
    // idle, so no nudge yet), then the first call a third time.
    let list = || call("list_dir", json!({"path": "."}));
    let steps = || {
        vec![
            Step::Calls(vec![read_a()]),
            Step::Calls(vec![read_a(), list()]),
            Step::Calls(vec![list(), read_a()]),
        ]
    };
    let first = || calls(&[Run], true, None, None);
    let mixed = || kept(&[Earlier, Run], &[false, true], None, None);
    let third = |nudge, stuck| calls(&[Earlier, Earlier], false, nudge, stuck);
    let last_word = Some(Rule::AnswerAtRepeatLimit);
    let on = [Rule::AnswerAtRepeatLimit];
    check_with(
        &on,
        &[],
        &[],
        steps(),
        vec![first(), mixed(), third(last_word, Some(1))],
    );
    // Off by default (on request: no lift measured).
    check(
        &[],
        &[],
        steps(),
        vec![first(), mixed(), third(None, Some(1))],
    );
    // Without the limit nothing is stuck, and the idle turn gets the idle nudge.
    let idle = Some(Rule::AnswerAfterIdle);
    check_with(
        &on,
        &[Rule::RepeatLimit],
        &[],
        steps(),
        vec![first(), mixed(), third(idle, None)],
    );
    // A reply asked for as the answer that still repeats the call ends the run: the model
    // was told once. After the idle nudge:
    let told = (0..3).map(|_| Step::Calls(vec![read_a()])).collect();
    let repeat = |nudge, stuck| calls(&[Earlier], false, nudge, stuck);
    check_with(
        &on,
        &[],
        &[],
        told,
        vec![first(), repeat(idle, None), repeat(None, Some(0))],
    );
    // After the nudge that follows a stopped reply:
    let steps = vec![
        Step::Calls(vec![read_a()]),
        Step::Calls(vec![read_a(), list()]),
        Step::Stopped(false),
        Step::Calls(vec![read_a()]),
    ];
    let said = Some((Nudge::AnswerFromResults, Rule::AnswerAfterRunaway, true));
    check_with(
        &on,
        &[],
        &[],
        steps,
        vec![first(), mixed(), Heard::Said(said), repeat(None, Some(0))],
    );
}

#[test]
fn skip_repeat_calls() {
    // A turn that ran a fresh call keeps it; its repeat (of an earlier turn's call, or
    // of a twin in the same reply) is left out of the history with the switch on.
    let list = || call("list_dir", json!({"path": "."}));
    let steps = || {
        vec![
            Step::Calls(vec![read_a()]),
            Step::Calls(vec![read_a(), list(), list()]),
        ]
    };
    let sources = [Earlier, Run, Twin(1)];
    for (off, recorded) in [
        (None, [false, true, false]),
        (Some(Rule::SkipRepeatCalls), [true, true, true]),
    ] {
        check(
            off.as_slice(),
            &[],
            steps(),
            vec![
                calls(&[Run], true, None, None),
                kept(&sources, &recorded, None, None),
            ],
        );
    }
}

#[test]
fn skip_repeat_turn() {
    let steps = || {
        vec![
            Step::Calls(vec![read_a()]),
            Step::Calls(vec![read_a(), read_a()]),
        ]
    };
    let idle = Some(Rule::AnswerAfterIdle);
    check(
        &[],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            calls(&[Earlier, Earlier], false, idle, None),
        ],
    );
    check(
        &[Rule::SkipRepeatTurn],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            calls(&[Earlier, Earlier], true, idle, None),
        ],
    );
}

#[test]
fn answer_after_idle() {
    // A turn of an unknown tool is recorded (the model reads the unknown-tool result),
    // then the answer is asked for without tools; a fresh call offers them again.
    let steps = || {
        vec![
            Step::Calls(vec![call("multiply", json!({}))]),
            Step::Calls(vec![read_a()]),
            Step::Calls(vec![read_a(), call("list_dir", json!({"path": "."}))]),
        ]
    };
    check(
        &[],
        &[],
        steps(),
        vec![
            calls(&[Run], true, Some(Rule::AnswerAfterIdle), None),
            calls(&[Run], true, None, None),
            kept(&[Earlier, Run], &[false, true], None, None),
        ],
    );
    check(
        &[Rule::AnswerAfterIdle],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            calls(&[Run], true, None, None),
            kept(&[Earlier, Run], &[false, true], None, None),
        ],
    );
}

#[test]
fn answer_at_limit() {
    let nudge = Some((Nudge::AnswerFromResults, Rule::AnswerAtLimit, false));
    // Before any call there is nothing to answer from; after one, the nudge; once the
    // answer is due (here by the limit itself) one more reply but no second nudge.
    let steps = || {
        vec![
            Step::AtLimit,
            Step::Calls(vec![read_a()]),
            Step::AtLimit,
            Step::AtLimit,
        ]
    };
    check_with(
        &[Rule::AnswerAtLimit],
        &[],
        &[],
        steps(),
        vec![
            Heard::AtLimit(None),
            calls(&[Run], true, None, None),
            Heard::AtLimit(Some(nudge)),
            Heard::AtLimit(Some(None)),
        ],
    );
    // Off by default.
    check(
        &[],
        &[],
        steps(),
        vec![
            Heard::AtLimit(None),
            calls(&[Run], true, None, None),
            Heard::AtLimit(None),
            Heard::AtLimit(None),
        ],
    );
}

#[test]
fn answer_after_runaway() {
    let said = Some((Nudge::AnswerFromResults, Rule::AnswerAfterRunaway, true));
    let steps = || {
        vec![
            Step::Stopped(false),
            Step::Calls(vec![read_a()]),
            Step::Stopped(true),
            Step::Stopped(false),
            Step::Stopped(false),
        ]
    };
    check(
        &[],
        &[],
        steps(),
        vec![
            Heard::Said(None),
            calls(&[Run], true, None, None),
            Heard::Said(None),
            Heard::Said(said),
            Heard::Said(None),
        ],
    );
    check(
        &[Rule::AnswerAfterRunaway],
        &[],
        steps(),
        vec![
            Heard::Said(None),
            calls(&[Run], true, None, None),
            Heard::Said(None),
            Heard::Said(None),
            Heard::Said(None),
        ],
    );
}

/// `answer-after-echo`: the 0.5B, offered no tools, asked "Could you explain how to
/// create a virtual environment for Python?" back (eval tuning part, `python-venv`, two
/// wordings of three in most passes, and in the plain column too).
#[test]
fn answer_after_echo() {
    const ECHO: &str = "Can you explain how to create a virtual environment for Python?";
    let seed = [Message::user(
        "Could you explain how to create a virtual environment for Python?",
    )];
    let said = Some((Nudge::Answer, Rule::AnswerAfterEcho, true));
    let offers_none = || Step::Request {
        offers_tools: false,
    };
    let unoffered = || {
        vec![
            offers_none(),
            Step::Answer(ECHO, false, false),
            offers_none(),
            Step::Answer(ECHO, false, false),
        ]
    };
    // Once a run, only for a reply asked for without tools, and the request after it
    // is greedy.
    let request = |t| Heard::Request("[Working folder: /w]\n\nq".into(), t);
    let asked_again = vec![
        request(None),
        Heard::Said(said),
        request(Some(0.0)),
        Heard::Said(None),
    ];
    check(&[], &seed, unoffered(), asked_again);
    let offered = vec![Step::Answer(ECHO, false, true)];
    check(&[], &seed, offered, vec![Heard::Said(None)]);
    let answered = vec![Step::Answer("Run `python -m venv .venv`.", false, false)];
    check(&[], &seed, answered, vec![Heard::Said(None)]);
    let off = vec![
        request(None),
        Heard::Said(None),
        request(None),
        Heard::Said(None),
    ];
    check(&[Rule::AnswerAfterEcho], &seed, unoffered(), off);
}

#[test]
fn answer_after_empty() {
    let said = Some((Nudge::AnswerFromResults, Rule::AnswerAfterEmpty, true));
    let steps = || {
        vec![
            Step::Calls(vec![read_a()]),
            Step::Answer("  ", false, true),
            Step::Answer("", false, true),
        ]
    };
    check(
        &[],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            Heard::Said(said),
            Heard::Said(None),
        ],
    );
    check(
        &[Rule::AnswerAfterEmpty],
        &[],
        steps(),
        vec![
            calls(&[Run], true, None, None),
            Heard::Said(None),
            Heard::Said(None),
        ],
    );
    // Before any call an empty answer is the answer.
    check(
        &[],
        &[],
        vec![Step::Answer("", false, true)],
        vec![Heard::Said(None)],
    );
}

/// `answer-from-results`: the answer nudge asks from the results above once a call of
/// the run got a result that is not an error; after an unknown tool's only, as before
/// (the 0.5B answered "6 times 7" after `multiply` in 4 of 6 probes with the plain
/// nudge, 0 of 6 with this one).
#[test]
fn answer_from_results() {
    let nothing = || vec![Step::Delivered(false, 0)];
    let said = |nudge| vec![Heard::Said(Some((nudge, Rule::AnswerAfterNothing, true)))];
    let answered = |name: &str| {
        let asked = Message::assistant_with_calls("", vec![call(name, json!({"path": "a"}))]);
        let answer = Message::tool_result(format!("id-{name}"), name, "result");
        vec![Message::user("q"), asked, answer]
    };
    let from = Nudge::AnswerFromResults;
    check(&[], &[], nothing(), said(Nudge::Answer));
    check(&[], &answered("read_file"), nothing(), said(from));
    check(&[], &answered("multiply"), nothing(), said(Nudge::Answer));
    let off = [Rule::AnswerFromResults];
    check(&off, &answered("read_file"), nothing(), said(Nudge::Answer));
    // In a run: an unknown tool's error holds nothing; a result then does.
    let steps = vec![
        Step::Calls(vec![call("multiply", json!({}))]),
        Step::AtLimit,
        Step::Calls(vec![read_a()]),
        Step::Stopped(false),
    ];
    let idle = Some(Rule::AnswerAfterIdle);
    let runaway = Some((from, Rule::AnswerAfterRunaway, true));
    let on = [Rule::AnswerAtLimit];
    let expected = vec![
        calls(&[Run], true, idle, None),
        Heard::AtLimit(Some(None)),
        calls(&[Run], true, None, None),
        Heard::Said(runaway),
    ];
    check_with(&on, &[], &[], steps, expected);
}

#[test]
fn answer_after_nothing() {
    let said = Some((Nudge::Answer, Rule::AnswerAfterNothing, true));
    let steps = || {
        vec![
            Step::Delivered(false, 0),
            Step::Delivered(true, 0),
            Step::Delivered(false, 1),
            Step::Delivered(true, 2),
        ]
    };
    check(
        &[],
        &[],
        steps(),
        vec![
            Heard::Said(said),
            Heard::Said(None),
            Heard::Said(None),
            Heard::Said(None),
        ],
    );
    check(
        &[Rule::AnswerAfterNothing],
        &[],
        steps(),
        (0..4).map(|_| Heard::Said(None)).collect(),
    );
}

#[test]
fn act_nudge() {
    let example = "Here's how: ```json {\"name\": \"read_file\"}```";
    let said = Some((Nudge::Act, Rule::ActNudge, false));
    let twice = || {
        vec![
            Step::Answer(example, true, true),
            Step::Answer(example, true, true),
        ]
    };
    check(
        &[],
        &[],
        twice(),
        vec![Heard::Said(said), Heard::Said(None)],
    );
    check(
        &[Rule::ActNudge],
        &[],
        twice(),
        vec![Heard::Said(None), Heard::Said(None)],
    );
    // Only before the run's first call.
    let late = vec![
        Step::Calls(vec![read_a()]),
        Step::Answer(example, true, true),
    ];
    check(
        &[],
        &[],
        late,
        vec![calls(&[Run], true, None, None), Heard::Said(None)],
    );
}

#[test]
fn can_nudge() {
    let cannot = "I'm sorry, but I cannot read files on your computer.";
    let said = Some((Nudge::Can, Rule::CanNudge, false));
    check(
        &[],
        &[],
        vec![Step::Answer(cannot, false, true)],
        vec![Heard::Said(said)],
    );
    check(
        &[Rule::CanNudge],
        &[],
        vec![Step::Answer(cannot, false, true)],
        vec![Heard::Said(None)],
    );
    // Not without tools on offer, and not for an answer that answers.
    check(
        &[],
        &[],
        vec![Step::Answer(cannot, false, false)],
        vec![Heard::Said(None)],
    );
    let tokyo = vec![Step::Answer("Tokyo.", false, true)];
    check(&[], &[], tokyo, vec![Heard::Said(None)]);
}

#[test]
fn runaway_stop() {
    let looping: &'static str = "The port is 8080.\n".repeat(500).leak();
    check(
        &[],
        &[],
        vec![Step::Stream(looping)],
        vec![Heard::Stream(Some(Rule::RunawayStop))],
    );
    check(
        &[Rule::RunawayStop],
        &[],
        vec![Step::Stream(looping)],
        vec![Heard::Stream(None)],
    );
}

const SEARCH: &str = r#"{"name": "search_text", "arguments": {"pattern": "x"}}"#;
const LIST: &str = r#"{"name": "list_dir", "arguments": {"path": "."}}"#;
const READ: &str = r#"{"name": "read_file", "arguments": {"path": "a"}}"#;

#[test]
fn call_loop_cut() {
    let looping: &'static str = format!("{SEARCH}\n{LIST}\n").repeat(3).leak();
    let cut = Heard::Stream(Some(Rule::CallLoopCut));
    check(&[], &[], vec![Step::Stream(looping)], vec![cut]);
    let off = [Rule::CallLoopCut];
    check(
        &off,
        &[],
        vec![Step::Stream(looping)],
        vec![Heard::Stream(None)],
    );
}

#[test]
fn listed_tools_cut() {
    let listing: &'static str = format!("{READ}\n{LIST}\n{SEARCH}\n").leak();
    let cut = Heard::Stream(Some(Rule::ListedToolsCut));
    check(&[], &[], vec![Step::Stream(listing)], vec![cut]);
    let off = [Rule::ListedToolsCut];
    check(
        &off,
        &[],
        vec![Step::Stream(listing)],
        vec![Heard::Stream(None)],
    );
}

#[test]
fn calls_per_reply() {
    let many: Vec<ToolCall> = (0..20)
        .map(|i| call("read_file", json!({"path": format!("f{i}")})))
        .collect();
    let heard = |dropped: usize| Heard::Calls {
        dropped,
        sources: vec![Run; 20 - dropped],
        recorded: vec![true; 20 - dropped],
        nudge: None,
        stuck: None,
        withholds: false,
    };
    let steps = || vec![Step::Calls(many.clone())];
    check(&[], &[], steps(), vec![heard(20 - MAX_CALLS_PER_REPLY)]);
    check(&[Rule::CallsPerReply], &[], steps(), vec![heard(0)]);
}

#[test]
fn tools_context_and_greedy_tool_turns() {
    let steps = || {
        vec![
            Step::Request { offers_tools: true },
            Step::Request {
                offers_tools: false,
            },
        ]
    };
    let framed = "[Working folder: /w]\n\nq".to_owned();
    check(
        &[],
        &[],
        steps(),
        vec![
            Heard::Request(framed.clone(), Some(0.0)),
            Heard::Request(framed.clone(), None),
        ],
    );
    check(
        &[Rule::ToolsContext],
        &[],
        steps(),
        vec![
            Heard::Request("q".into(), Some(0.0)),
            Heard::Request("q".into(), None),
        ],
    );
    check(
        &[Rule::GreedyToolTurns],
        &[],
        steps(),
        vec![
            Heard::Request(framed.clone(), None),
            Heard::Request(framed, None),
        ],
    );
}

#[test]
fn greedy_answers() {
    let steps = || {
        vec![
            Step::Request {
                offers_tools: false,
            },
            Step::Calls(vec![call("read_file", json!({"path": "a"}))]),
            Step::Request {
                offers_tools: false,
            },
            Step::Request { offers_tools: true },
        ]
    };
    let framed = "[Working folder: /w]\n\nq".to_owned();
    let ran = || Heard::Calls {
        dropped: 0,
        sources: vec![Run],
        recorded: vec![true],
        nudge: None,
        stuck: None,
        withholds: false,
    };
    // Rows: the rules off, then the temperature of the request before any call, of the
    // answer to the results, and of a request with tools. The answer is greedy unless
    // `greedy-answers` is off; the rule leaves requests with tools to `greedy-tool-turns`.
    let rows: [(&[Rule], [Option<f32>; 3]); 3] = [
        (&[], [None, Some(0.0), Some(0.0)]),
        (&[Rule::GreedyAnswers], [None, None, Some(0.0)]),
        (&[Rule::GreedyToolTurns], [None, Some(0.0), None]),
    ];
    for (off, [before, answer, tools]) in rows {
        let heard = |t| Heard::Request(framed.clone(), t);
        let expected = vec![heard(before), ran(), heard(answer), heard(tools)];
        check(off, &[], steps(), expected);
    }
}

#[test]
fn drop_echo() {
    let echo = "[Working folder: /w]\n```json\n{}\n```";
    check(
        &[],
        &[],
        vec![Step::Read(echo)],
        vec![Heard::Read("\n```json\n{}\n```".into())],
    );
    check(
        &[Rule::DropEcho],
        &[],
        vec![Step::Read(echo)],
        vec![Heard::Read(echo.into())],
    );
}

#[test]
fn the_recovery_rules() {
    let read = |path: &str| format!("read_file {}", json!({"path": path}));
    let loose = r#"{"name": "functions.READ_FILE:0", "arguments": {"path": "a"}}"#;
    let in_name = r#"{"name": "read_a.txt", "arguments": {}}"#;
    let invented = "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\nThe file says 42.";
    let steps = || {
        vec![
            Step::Recover(loose),
            Step::Recover(in_name),
            Step::Recover(invented),
        ]
    };
    check_with(
        &[Rule::NameRepair, Rule::PathInName],
        &[],
        &[],
        steps(),
        vec![
            Heard::Recovered(vec![read("a")]),
            Heard::Recovered(vec![read("a.txt")]),
            Heard::Recovered(vec![read("a")]),
        ],
    );
    // By default `name-repair` and `path-in-name` are off; the invented result is cut.
    check(
        &[],
        &[],
        steps(),
        vec![
            Heard::Recovered(vec!["?functions.READ_FILE:0".into()]),
            Heard::Recovered(vec!["?read_a.txt".into()]),
            Heard::Recovered(vec![read("a")]),
        ],
    );
    // Off, the invented result makes the whole reply a call that cannot be read.
    let off = [Rule::FileAsName, Rule::InventedResultCut];
    check(
        &off,
        &[],
        steps(),
        vec![
            Heard::Recovered(vec!["?functions.READ_FILE:0".into()]),
            Heard::Recovered(vec!["?read_a.txt".into()]),
            Heard::Recovered(vec!["!malformed".into()]),
        ],
    );
}

#[test]
fn typed_strings_and_key_hint() {
    let quoted = call("read_file", json!({"path": "a", "regex": "true"}));
    let invented = call("read_file", json!({"file": "a"}));
    let steps = || {
        vec![
            Step::Execute(quoted.clone()),
            Step::Execute(invented.clone()),
        ]
    };
    let missing = "Error: invalid arguments for read_file: \"path\" is a required property";
    let hint = ". Valid arguments: path (string, required), regex (boolean)";
    check_with(
        &[Rule::TypedStrings, Rule::KeyHint],
        &[],
        &[],
        steps(),
        vec![
            Heard::Result("result of read_file".into()),
            Heard::Result(format!("{missing}{hint}")),
        ],
    );
    let quoted_error = "Error: invalid arguments for read_file: /regex: \"true\" is not of type \
                        \"boolean\"";
    check(
        &[],
        &[],
        steps(),
        vec![
            Heard::Result(quoted_error.into()),
            Heard::Result(missing.into()),
        ],
    );
}

#[test]
fn a_coach_seeded_from_a_conversation_remembers_its_calls_since_the_last_prompt() {
    let earlier = call("list_dir", json!({"path": "."}));
    let seed = vec![
        Message::user("first question"),
        Message::assistant_with_calls("", vec![earlier.clone()]),
        Message::tool_result(&earlier.id, "list_dir", "a.txt"),
        Message::user("second question"),
        Message::assistant_with_calls("", vec![read_a()]),
        Message::tool_result(&read_a().id, "read_file", "port = 8080"),
    ];
    let steps = || vec![Step::Calls(vec![read_a(), earlier.clone()])];
    // The call since the last prompt is a repeat; the one before it is new again.
    check(
        &[],
        &seed,
        steps(),
        vec![kept(&[Earlier, Run], &[false, true], None, None)],
    );
    check(
        &[],
        &seed[..4],
        steps(),
        vec![calls(&[Run, Run], true, None, None)],
    );
}

#[test]
fn tools_hint() {
    let unknown = "{\"name\": \"launch_code\", \"arguments\": {}}";
    let steps = || vec![Step::Interpret(unknown)];
    let available = "; available: read_file, list_dir, search_text";
    check_with(
        &[Rule::ToolsHint],
        &[],
        &[],
        steps(),
        vec![Heard::Recovered(vec![format!(
            "Error: Unknown tool \"launch_code\"{available}"
        )])],
    );
    check(
        &[],
        &[],
        steps(),
        vec![Heard::Recovered(vec![
            "Error: Unknown tool \"launch_code\"".into(),
        ])],
    );
}

/// `read-named`: right after a choice that offers tools, the message's file is read by
/// the one offered tool that only reads and requires the path alone; once a run; not
/// after a `none`, with two such tools (which one is not guessed), or with the rule off.
#[test]
fn read_named() {
    let schemas: Vec<ToolSchema> = tools().schemas();
    let check = |case: &str, on: bool, read_only: &[&str], route: Route, want: Option<&str>| {
        let mut config = CoachConfig::default();
        config.turn_on(Rule::ToolOrNone);
        if on {
            config.turn_on(Rule::ReadNamed);
        }
        config.path_argument = Some("path".into());
        config.read_only = read_only.iter().map(|n| (*n).to_owned()).collect();
        for tool in ["read_file", "list_dir", "search_text"] {
            config
                .paths
                .insert(tool.into(), vec!["backup.py".into(), "src/".into()]);
        }
        let mut coach = Coach::new(config);
        let text = match &route {
            Route::None => r#"{"tool": "none"}"#,
            _ => r#"{"tool": "read_file"}"#,
        };
        coach.routed(Some(text), &schemas);
        let first = coach.named_read("backup.py keep days?", &schemas);
        let made = first.map(|(c, _)| format!("{} {}", c.name, Value::Object(c.arguments)));
        assert_eq!(made.as_deref(), want, "{case}");
        assert_eq!(
            coach.named_read("backup.py keep days?", &schemas),
            None,
            "{case}: once"
        );
    };
    let read = Some(r#"read_file {"path":"backup.py"}"#);
    let tools = Route::Tools(Some("read_file".into()));
    check("one reader", true, &["read_file"], tools.clone(), read);
    check("rule off", false, &["read_file"], tools.clone(), None);
    check("a none", true, &["read_file"], Route::None, None);
    check(
        "two readers",
        true,
        &["read_file", "list_dir"],
        tools.clone(),
        None,
    );
    check("none read-only", true, &[], tools, None);
}

/// `asked-command`: the 0.5B chose `write_file` for "run wc -l on sales.csv" (every
/// wording, every tuning pass), and `changes-on-request` then withheld `run_command`,
/// which the task needs; offered beside the write, it overwrote `sales.csv` first. A
/// choice of a tool that changes things, for a message that names one of a command
/// tool's programs, reads as a choice of that tool, and the write is withheld; not a
/// choice of `none` or of a read, not for a message that names no program, not with
/// the rule off.
#[test]
fn asked_command() {
    let mut registry = tools();
    registry.register(Arc::new(Fake("run_command"))).unwrap();
    registry.register(Arc::new(Fake("write_file"))).unwrap();
    let schemas = registry.schemas();
    let check = |case: &str, on: bool, prompt: &str, chosen: &str, want: Option<&str>| {
        let mut config = choosing();
        if !on {
            config.turn_off(Rule::AskedCommand);
        }
        let programs = ["ls", "wc", "git"].map(str::to_owned).to_vec();
        config.programs.insert("run_command".into(), programs);
        let mut coach = Coach::seeded(config, &[Message::user(prompt)], &registry);
        let route = coach.routed(Some(&format!(r#"{{"tool": "{chosen}"}}"#)), &schemas);
        let overruled = coach
            .overruled()
            .map(|(rule, tool)| (rule, tool.to_owned()));
        let swapped = want.is_some_and(|w| w != chosen);
        let told = swapped.then(|| (Rule::AskedCommand, chosen.to_owned()));
        assert_eq!(overruled, told, "{case}");
        let route_now = want.map_or(Route::None, |w| Route::Tools(Some(w.to_owned())));
        assert_eq!(route, route_now, "{case}");
        let withheld = |name: &str| coach.withheld().contains(&name.to_owned());
        let run = call("run_command", json!({"path": "."}));
        let refused = coach.withheld_answer(&run, &schemas).is_some();
        assert_eq!(refused, withheld("run_command"), "{case}: the call");
        if swapped {
            assert!(withheld("write_file") && !withheld("run_command"), "{case}");
        }
        if chosen == "write_file" && !swapped {
            assert!(withheld("run_command") && !withheld("write_file"), "{case}");
        }
    };
    let wc = "run wc -l on sales.csv, what does it say?";
    let command = Some("run_command");
    check("a write chosen", true, wc, "write_file", command);
    check("rule off", false, wc, "write_file", Some("write_file"));
    check("none chosen", true, wc, "none", None);
    check("it chosen", true, wc, "run_command", command);
    check("a read chosen", true, wc, "read_file", Some("read_file"));
    let todo = "save my todo count into count.txt";
    check(
        "no program named",
        true,
        todo,
        "write_file",
        Some("write_file"),
    );
}

/// `named-command`: a tool that runs programs is withheld for a run whose user message
/// names none of them (the 1.5B ran `python -m venv venv` for "python venv how?" in
/// every tuning pass; the 0.5B ran `ls` for "how many things are still open on my todo
/// list?"): from the run's requests, before and after any choice, and its call
/// answered "not offered", but listed in the choice, where naming it reads as `none`;
/// offered when the message names one (`wc`, `git`), with the rule off, without the
/// caller's list of programs, or for a coach made without the conversation.
#[test]
fn named_command() {
    let mut registry = tools();
    registry.register(Arc::new(Fake("run_command"))).unwrap();
    let schemas = registry.schemas();
    let check = |case: &str, on: bool, listed: bool, prompt: &str, chosen: &str, want: bool| {
        let mut config = choosing();
        if !on {
            config.turn_off(Rule::NamedCommand);
        }
        if listed {
            let programs = ["ls", "wc", "git"].map(str::to_owned).to_vec();
            config.programs.insert("run_command".into(), programs);
        }
        let mut coach = Coach::seeded(config, &[Message::user(prompt)], &registry);
        let withheld = |coach: &Coach| coach.withheld().contains(&"run_command".to_owned());
        assert_eq!(withheld(&coach), want, "{case}: before the choice");
        assert_eq!(!coach.unnamed().is_empty(), want, "{case}: told");
        let listed = coach.withheld_from_choice();
        assert!(listed.is_empty(), "{case}: the choice lists every tool");
        let route = coach.routed(Some(&format!(r#"{{"tool": "{chosen}"}}"#)), &schemas);
        assert_eq!(withheld(&coach), want, "{case}: after choosing {chosen}");
        let overruled = want && chosen == "run_command";
        assert_eq!(
            route == Route::None,
            overruled || chosen == "none",
            "{case}"
        );
        let rule = coach.overruled().map(|(rule, _)| rule);
        assert_eq!(rule, overruled.then_some(Rule::NamedCommand), "{case}");
        let run = call("run_command", json!({"path": "."}));
        let refused = coach.withheld_answer(&run, &schemas).map(|r| r.is_error);
        assert_eq!(refused, want.then_some(true), "{case}: the call");
    };
    let venv = "python venv how?";
    check("names none", true, true, venv, "read_file", true);
    check("names none, none chosen", true, true, venv, "none", true);
    check(
        "names none, it chosen",
        true,
        true,
        venv,
        "run_command",
        true,
    );
    check("rule off", false, true, venv, "read_file", false);
    check("no programs listed", true, false, venv, "read_file", false);
    check(
        "names wc",
        true,
        true,
        "run wc -l on sales.csv",
        "run_command",
        false,
    );
    check(
        "names git",
        true,
        true,
        "what does git log say?",
        "read_file",
        false,
    );
    check(
        "a word inside another",
        true,
        true,
        "my github page?",
        "read_file",
        true,
    );
    // A coach made without the conversation knows no message: it withholds nothing.
    let mut config = CoachConfig::default();
    config
        .programs
        .insert("run_command".into(), vec!["ls".into()]);
    assert!(Coach::new(config).withheld().is_empty());
}

/// `write-needs-file`: a choice of a tool that changes things and requires the path,
/// for a message that names no file, reads as `none` (the 0.5B chose `write_file` for
/// "thx, done" and listed the folder 12 times); not when the message names one of the
/// caller's files, a new file or a dotfile, not for a tool that takes no path or only
/// reads, and not with the rule off.
#[test]
fn write_needs_file() {
    let mut registry = tools();
    registry.register(Arc::new(Fake("write_file"))).unwrap();
    registry.register(Arc::new(Fake("run_command"))).unwrap();
    let mut schemas = registry.schemas();
    let run = schemas
        .iter_mut()
        .find(|t| t.name == "run_command")
        .unwrap();
    run.parameters = json!({"type": "object", "required": ["program"]});
    let check = |case: &str, on: bool, prompt: &str, chosen: &str, want: bool| {
        let mut config = choosing();
        config.path_argument = Some("path".into());
        config
            .paths
            .insert("read_file".into(), vec!["backup.py".into(), "src/".into()]);
        if !on {
            config.turn_off(Rule::WriteNeedsFile);
        }
        let mut coach = Coach::seeded(config, &[Message::user(prompt)], &registry);
        let route = coach.routed(Some(&format!(r#"{{"tool": "{chosen}"}}"#)), &schemas);
        assert_eq!(route == Route::None, want, "{case}: {route:?}");
        let rule = coach.overruled().map(|(rule, _)| rule);
        assert_eq!(rule, want.then_some(Rule::WriteNeedsFile), "{case}");
    };
    check("names no file", true, "thx, done", "write_file", true);
    check("rule off", false, "thx, done", "write_file", false);
    check(
        "a file of the caller's",
        true,
        "backup.py keep days?",
        "write_file",
        false,
    );
    check(
        "a new file",
        true,
        "make me a shopping.txt",
        "write_file",
        false,
    );
    check(
        "a dotfile",
        true,
        ".gitignore for __pycache__",
        "write_file",
        false,
    );
    check("an ellipsis", true, "hmm... done", "write_file", true);
    check("a tool that reads", true, "thx, done", "read_file", false);
    check("no path required", true, "thx, done", "run_command", false);
}

/// `read-source`: after a choice that offers tools, for a message that names an
/// existing file and one that does not exist, the existing one is read first (the 1.5B
/// chose `write_file` or `read_file` for "save the port from config.toml into port.txt"
/// and wrote an invented port, every wording, every pass); not for a message naming
/// only the existing file ("run wc -l on sales.csv", which the 0.5B chose `write_file`
/// for), after a choice of `none`, nor with the rule off.
#[test]
fn read_source() {
    let mut schemas: Vec<ToolSchema> = tools().schemas();
    schemas.push(Fake("write_file").schema());
    let check = |case: &str, on: bool, chosen: &str, prompt: &str, want: Option<&str>| {
        let mut config = CoachConfig::default();
        config.turn_on(Rule::ToolOrNone);
        if on {
            config.turn_on(Rule::ReadSource);
        } else {
            config.turn_off(Rule::ReadSource);
        }
        config.path_argument = Some("path".into());
        config.read_only = ["read_file".to_owned()].into();
        config
            .paths
            .insert("read_file".into(), vec!["config.toml".into()]);
        let mut coach = Coach::new(config);
        coach.routed(Some(&format!(r#"{{"tool": "{chosen}"}}"#)), &schemas);
        let made = coach.named_read(prompt, &schemas);
        let made =
            made.map(|(c, rule)| format!("{rule}: {} {}", c.name, Value::Object(c.arguments)));
        assert_eq!(made.as_deref(), want, "{case}");
    };
    let into = "save the port from config.toml into port.txt";
    let read = Some(r#"read-source: read_file {"path":"config.toml"}"#);
    check("a write from a file", true, "write_file", into, read);
    check("rule off", false, "write_file", into, None);
    check("a read chosen", true, "read_file", into, read);
    check("none chosen", true, "none", into, None);
    check(
        "the file's name without its extension",
        true,
        "write_file",
        "config port -> port.txt",
        read,
    );
    let only = "run wc -l on config.toml";
    check("no new file", true, "write_file", only, None);
    check(
        "no file",
        true,
        "write_file",
        "save hello into port.txt",
        None,
    );
}

/// `change-after-idle`: the 1.5B read config.toml for "save the port from config.toml
/// into port.txt", repeated the read, and answered the port under the answer nudge,
/// with no tools to write it (eval tuning part, every wording, most passes). After the
/// idle turn, the write is obliged, once, only when the message names a new file, the
/// run chose tools and has not called the writer, and one writer takes a path.
#[test]
fn change_after_idle() {
    let mut registry = tools();
    registry.register(Arc::new(Fake("write_file"))).unwrap();
    let schemas = registry.schemas();
    let into = "save the port from config.toml into port.txt";
    let check_need = |case: &str,
                      on: bool,
                      chosen: &str,
                      prompt: &str,
                      made: &[&str],
                      need: &str,
                      want: Option<&str>| {
        let mut config = CoachConfig::default();
        config.turn_on(Rule::ToolOrNone);
        if on {
            config.turn_on(Rule::ChangeAfterIdle);
        } else {
            config.turn_off(Rule::ChangeAfterIdle);
        }
        config.path_argument = Some("path".into());
        config.read_only = ["read_file".to_owned(), "list_dir".to_owned()].into();
        config.read_only.insert("search_text".to_owned());
        config
            .paths
            .insert("read_file".into(), vec!["config.toml".into()]);
        let mut coach = Coach::seeded(config, &[Message::user(prompt)], &registry);
        coach.routed(Some(&format!(r#"{{"tool": "{chosen}"}}"#)), &schemas);
        let mut turn = |names: &[&str]| {
            let calls: Vec<ToolCall> = names
                .iter()
                .map(|n| call(n, json!({"path": "config.toml"})))
                .collect();
            let plan = coach.plan(&registry, &calls);
            if coach.change_check("m", &registry, &calls, &plan).is_some() {
                coach.confirm_change(Some(&format!(r#"{{"asks": "{need}"}}"#)));
            }
            let results: Vec<ToolOutcome> =
                calls.iter().map(|c| ToolOutcome::ok(&c.name)).collect();
            coach.after_calls(&registry, &calls, &plan, &results)
        };
        for name in made {
            turn(&[name]);
        }
        let after = turn(&["read_file"]);
        let rule = after.nudge.map(|s| s.rule);
        let obliged = coach.routed_call().map(str::to_owned);
        assert_eq!(obliged.as_deref(), want, "{case}");
        let said = if want.is_some() {
            Rule::ChangeAfterIdle
        } else {
            Rule::AnswerAfterIdle
        };
        assert_eq!(rule, Some(said), "{case}: the nudge");
        assert_eq!(coach.withholds_tools(), want.is_none(), "{case}: tools");
        if want.is_some() {
            // The call may only write the new file the message names: the schema holds
            // the path to it, and a call to any other path or tool does not run.
            let writer = Fake("write_file").schema();
            let held = coach.routed_schema(&writer).unwrap();
            assert_eq!(
                held.parameters["properties"]["path"]["enum"],
                json!(["port.txt"])
            );
            let to = |coach: &Coach, name: &str, path: &str| {
                let c = call(name, json!({"path": path, "content": "7341"}));
                coach.withheld_answer(&c, &schemas).map(|r| r.is_error)
            };
            assert_eq!(to(&coach, "write_file", "port.txt"), None, "{case}");
            assert_eq!(
                to(&coach, "write_file", "config.toml"),
                Some(true),
                "{case}"
            );
            assert_eq!(to(&coach, "read_file", "port.txt"), Some(true), "{case}");
            let said = coach.routed_call_played(true).map(|s| (s.nudge, s.rule));
            assert_eq!(said, Some((Nudge::Answer, Rule::ChangeAfterIdle)), "{case}");
            let after = to(&coach, "write_file", "config.toml");
            assert_eq!(after, None, "{case}: after the turn");
        }
    };
    let check =
        |case: &str, on: bool, chosen: &str, prompt: &str, made: &[&str], want: Option<&str>| {
            check_need(case, on, chosen, prompt, made, "write", want);
        };
    let write = Some("write_file");
    check(
        "a read chosen",
        true,
        "read_file",
        into,
        &["read_file"],
        write,
    );
    check(
        "a write chosen",
        true,
        "write_file",
        into,
        &["read_file"],
        write,
    );
    check("rule off", false, "read_file", into, &["read_file"], None);
    check(
        "no new file",
        true,
        "read_file",
        "which port does config.toml set?",
        &["read_file"],
        None,
    );
    check(
        "written already",
        true,
        "read_file",
        into,
        &["write_file", "read_file"],
        None,
    );
    check(
        "no clean choice",
        true,
        "nothing",
        into,
        &["read_file"],
        write,
    );
    let about = "is there a port.txt next to config.toml?";
    check_need(
        "an answer asked",
        true,
        "read_file",
        about,
        &["read_file"],
        "answer",
        None,
    );
    check_need(
        "no clean reply",
        true,
        "read_file",
        into,
        &["read_file"],
        "writ",
        None,
    );
}

/// `change-after-idle` acts once a run: a second idle turn gets the answer nudge.
#[test]
fn change_after_idle_acts_once() {
    let mut registry = tools();
    registry.register(Arc::new(Fake("write_file"))).unwrap();
    let mut config = CoachConfig::default();
    config.turn_on(Rule::ToolOrNone);
    config.turn_on(Rule::ChangeAfterIdle);
    config.path_argument = Some("path".into());
    config.read_only = ["read_file", "list_dir", "search_text"]
        .map(str::to_owned)
        .into();
    config
        .paths
        .insert("read_file".into(), vec!["config.toml".into()]);
    let asked = [Message::user("config port -> port.txt")];
    let mut coach = Coach::seeded(config, &asked, &registry);
    coach.routed(Some(r#"{"tool": "read_file"}"#), &registry.schemas());
    let read = call("read_file", json!({"path": "config.toml"}));
    let list = call("list_dir", json!({"path": "."}));
    let mut rules = Vec::new();
    for call in [&read, &list, &read, &list] {
        let calls = [call.clone()];
        let plan = coach.plan(&registry, &calls);
        if coach.change_check("m", &registry, &calls, &plan).is_some() {
            coach.confirm_change(Some(r#"{"asks": "write"}"#));
        }
        let after = coach.after_calls(&registry, &calls, &plan, &[ToolOutcome::ok("port = 7341")]);
        rules.push(after.nudge.map(|s| s.rule));
        coach.routed_call_played(false);
    }
    let change = Some(Rule::ChangeAfterIdle);
    assert_eq!(rules, [None, None, change, Some(Rule::AnswerAfterIdle)]);
}

/// The coach's config as the CLI sets it for a choice: `tool-or-none` on, the built-in
/// tools that only read named so.
fn choosing() -> CoachConfig {
    let mut config = CoachConfig::default();
    config.turn_on(Rule::ToolOrNone);
    config.read_only = ["read_file", "list_dir", "search_text"]
        .map(str::to_owned)
        .into();
    config
}

/// A coach for `prompt` whose choice was `write_file`, with the CLI's read-only tools,
/// `file` the one path listed and `hidden` as [`CoachConfig::hidden`].
fn writing_coach(
    registry: &ToolRegistry,
    prompt: &str,
    file: &str,
    hidden: Option<Vec<String>>,
) -> Coach {
    let mut config = choosing();
    config.path_argument = Some("path".into());
    config.paths.insert("read_file".into(), vec![file.into()]);
    config.hidden = hidden;
    let mut coach = Coach::seeded(config, &[Message::user(prompt)], registry);
    coach.routed(Some(r#"{"tool": "write_file"}"#), &registry.schemas());
    coach
}

/// One turn of `calls` with `results`, the change check answered `write`.
fn turn_of(
    coach: &mut Coach,
    registry: &ToolRegistry,
    calls: &[ToolCall],
    results: &[ToolOutcome],
) -> AfterCalls {
    let plan = coach.plan(registry, calls);
    if coach.change_check("m", registry, calls, &plan).is_some() {
        coach.confirm_change(Some(r#"{"asks": "write"}"#));
    }
    coach.after_calls(registry, calls, &plan, results)
}

/// `change-after-idle` with a dotfile: the 0.5B chose `write_file` for "add a
/// .gitignore that ignores __pycache__", then called `add_gitignore` or `gitignore`
/// (tools that do not exist) and was asked to answer (eval tuning part, two wordings,
/// both passes of 2026-11-29). A dotfile the message names is a new file to write only
/// when the caller listed the hidden entries and it is none of them.
#[test]
fn change_after_idle_takes_a_dotfile_only_when_it_is_known_to_be_new() {
    let mut registry = tools();
    registry.register(Arc::new(Fake("write_file"))).unwrap();
    let check = |case: &str, prompt: &str, hidden: Option<&[&str]>, want: Option<&str>| {
        let hidden = hidden.map(|h| h.iter().map(|&n| n.to_owned()).collect());
        let mut coach = writing_coach(&registry, prompt, "backup.py", hidden);
        let calls = [call("add_gitignore", json!({"path": "."}))];
        let failed = [ToolOutcome::error("Unknown tool")];
        let after = turn_of(&mut coach, &registry, &calls, &failed);
        let held = coach
            .routed_schema(&Fake("write_file").schema())
            .map(|s| s.parameters["properties"]["path"]["enum"].clone());
        assert_eq!(held, want.map(|w| json!([w])), "{case}");
        let rule = want.map_or(Rule::AnswerAfterIdle, |_| Rule::ChangeAfterIdle);
        assert_eq!(after.nudge.map(|s| s.rule), Some(rule), "{case}: the nudge");
    };
    let add = "add a .gitignore that ignores __pycache__";
    let new = Some(".gitignore");
    check("a new dotfile", add, Some(&[".git/", ".env"]), new);
    check("no hidden entries", add, Some(&[]), new);
    check("hidden entries unknown", add, None, None);
    check("it exists", add, Some(&[".GITIGNORE"]), None);
    let nested = "add a src/.gitignore that ignores __pycache__";
    check("not at the top", nested, Some(&[]), None);
    check(
        "a folder's name",
        "what is .git for?",
        Some(&[".git/"]),
        None,
    );
    // The 1.5B's first pass with the rule asked whether these wanted a write.
    check("a kind of file", "number of .py files?", Some(&[]), None);
    let toml = "what does a .toml file usually hold?";
    check("a known kind", toml, Some(&[]), None);
}

/// `change-after-idle` after a refused write: the 1.5B wrote `README.md` for "add a
/// .gitignore that ignores __pycache__"; `overwrite-needs-name` refused it, the model
/// repeated the call, and the run ended with the answer nudge and no `.gitignore`
/// (eval tuning part, 2026-11-29), since the writer counted as called. A write that did
/// not run (its result an error) leaves the change due; one that ran does not.
#[test]
fn change_after_idle_follows_a_write_that_did_not_run() {
    let mut registry = tools();
    registry.register(Arc::new(Fake("write_file"))).unwrap();
    let check = |case: &str, first: ToolOutcome, want: Option<Rule>| {
        let prompt = "add a .gitignore that ignores __pycache__";
        let mut coach = writing_coach(&registry, prompt, "README.md", Some(Vec::new()));
        let calls = [call("write_file", json!({"path": "README.md"}))];
        let rules: Vec<Option<Rule>> = [first, ToolOutcome::error("not run again")]
            .into_iter()
            .map(|result| turn_of(&mut coach, &registry, &calls, &[result]))
            .map(|after| after.nudge.map(|s| s.rule))
            .collect();
        assert_eq!(rules, [None, want], "{case}");
    };
    let refused = ToolOutcome::error("not run: the user's message does not name README.md");
    check("refused", refused, Some(Rule::ChangeAfterIdle));
    let wrote = ToolOutcome::ok("wrote 9 bytes to README.md");
    check("it ran", wrote, Some(Rule::AnswerAfterIdle));
}

/// `dotted-path`: the 1.5B wrote `gitignore` for "add a .gitignore that ignores
/// __pycache__" (eval tuning part, two wordings of three, every pass of the day).
#[test]
fn dotted_path() {
    let check = |case: &str, on: bool, key: Option<&str>, path: &str, want: &str| {
        let mut config = CoachConfig::default();
        if !on {
            config.turn_off(Rule::DottedPath);
        }
        config.path_argument = key.map(str::to_owned);
        let asked = [Message::user("add a .gitignore that ignores __pycache__")];
        let coach = Coach::seeded(config, &asked, &tools());
        let mut call = ToolCall {
            id: "c1".into(),
            name: "write_file".into(),
            arguments: json!({"path": path, "content": "x"})
                .as_object()
                .unwrap()
                .clone(),
        };
        let told = coach.dotted_path(&mut call);
        assert_eq!(call.arguments["path"], json!(want), "{case}");
        assert_eq!(told.is_some(), path != want, "{case}: told");
    };
    check(
        "the dot put back",
        true,
        Some("path"),
        "gitignore",
        ".gitignore",
    );
    check(
        "./ and no dot",
        true,
        Some("path"),
        "./gitignore",
        ".gitignore",
    );
    check(
        "already dotted",
        true,
        Some("path"),
        ".gitignore",
        ".gitignore",
    );
    check("another name", true, Some("path"), "ignore", "ignore");
    check("rule off", false, Some("path"), "gitignore", "gitignore");
    check(
        "no path argument known",
        true,
        None,
        "gitignore",
        "gitignore",
    );
    check(
        "another argument",
        true,
        Some("file"),
        "gitignore",
        "gitignore",
    );
}

/// `restate-question`: a coach seeded from a proxy's history, which carries a nudge it
/// replayed as a user message, restates the user's own message, never the nudge.
#[test]
fn restate_question_restates_the_users_message_not_a_replayed_nudge() {
    let mut config = CoachConfig::default();
    config.turn_on(Rule::RestateQuestion);
    let nudge = Nudge::AnswerFromResults.text(&config);
    let asked = [
        Message::user("which port does config.toml set?"),
        Message::assistant("I will look."),
        Message::user(nudge.clone()),
    ];
    let coach = Coach::seeded(config.clone(), &asked, &tools());
    let want = format!("{nudge} My question: which port does config.toml set?");
    assert_eq!(coach.message(Nudge::AnswerFromResults).text(), want);
    let only_nudges = Coach::seeded(config, &asked[2..], &tools());
    assert_eq!(only_nudges.message(Nudge::AnswerFromResults).text(), nudge);
}

/// `overwrite-needs-name`: the 1.5B wrote `README.md` for "add a .gitignore that
/// ignores __pycache__" (eval tuning part, `22-07-08Z` and `00-31-02Z`). A change to an
/// existing file runs only when the message names it, or names no file at all.
#[test]
fn overwrite_needs_name() {
    let check = |case: &str, on: bool, asked: &str, tool: &str, path: &str, refused: bool| {
        let mut config = CoachConfig::default();
        if !on {
            config.turn_off(Rule::OverwriteNeedsName);
        }
        config.path_argument = Some("path".into());
        config.read_only = ["read_file", "list_dir"].map(str::to_owned).into();
        let files = ["README.md", "backup.py", "notes/todo.md", "notes/"];
        let files = files.map(str::to_owned).to_vec();
        config.paths.insert("read_file".into(), files);
        let coach = Coach::seeded(config, &[Message::user(asked)], &tools());
        let answer = coach.unnamed_overwrite(&call(tool, json!({"path": path, "content": "x"})));
        assert_eq!(answer.is_some(), refused, "{case}");
        if let Some(answer) = answer {
            assert!(answer.is_error, "{case}");
            let name = path.rsplit('/').next().unwrap();
            assert!(answer.content.contains(name), "{case}: {}", answer.content);
        }
    };
    let gitignore = "add a .gitignore that ignores __pycache__";
    check(
        "a file not named, beside a dotfile",
        true,
        gitignore,
        "write_file",
        "README.md",
        true,
    );
    check(
        "the rule off",
        false,
        gitignore,
        "write_file",
        "README.md",
        false,
    );
    check(
        "./ and an absolute path",
        true,
        gitignore,
        "write_file",
        "./README.md",
        true,
    );
    check(
        "absolute",
        true,
        gitignore,
        "write_file",
        "/tmp/w/README.md",
        true,
    );
    check(
        "the named new file",
        true,
        gitignore,
        "write_file",
        ".gitignore",
        false,
    );
    check(
        "a new file not named",
        true,
        gitignore,
        "write_file",
        "other.txt",
        false,
    );
    check("a read", true, gitignore, "read_file", "README.md", false);
    let named = "put the port from config.toml into README.md";
    check(
        "named by path",
        true,
        named,
        "write_file",
        "README.md",
        false,
    );
    check(
        "named by stem",
        true,
        "fix the readme, see port.txt",
        "write_file",
        "README.md",
        false,
    );
    check(
        "a nested file by name",
        true,
        "tick todo.md's first item",
        "write_file",
        "notes/todo.md",
        false,
    );
    check(
        "another file named",
        true,
        "tick todo.md's first item",
        "write_file",
        "backup.py",
        true,
    );
    check(
        "no file named",
        true,
        "tidy up the backup script",
        "write_file",
        "README.md",
        false,
    );
    check(
        "no file named at all",
        true,
        "tidy things up",
        "write_file",
        "README.md",
        false,
    );
}
