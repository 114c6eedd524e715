//! Table tests over the corpus of real replies in `tests/data/textcalls/*.json` (each case
//! cites the public thread or model doc it comes from), and the properties: quoting any
//! call inside a fence within prose runs nothing, and the streaming hold-back gives the
//! same prose and calls as the whole-text parse however the reply is chunked.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test on unexpected values"
)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{Format, HoldBack, OfferedTools, Recovered, Recovery, recover};
use crate::coach::{CoachConfig, Rule};

const CORPUS: &[(&str, &str)] = &[
    (
        "hermes",
        include_str!("../../tests/data/textcalls/hermes.json"),
    ),
    (
        "qwen_xml",
        include_str!("../../tests/data/textcalls/qwen_xml.json"),
    ),
    (
        "mistral",
        include_str!("../../tests/data/textcalls/mistral.json"),
    ),
    (
        "llama",
        include_str!("../../tests/data/textcalls/llama.json"),
    ),
    (
        "pythonic",
        include_str!("../../tests/data/textcalls/pythonic.json"),
    ),
    (
        "functionary",
        include_str!("../../tests/data/textcalls/functionary.json"),
    ),
    (
        "deepseek",
        include_str!("../../tests/data/textcalls/deepseek.json"),
    ),
    ("lfm", include_str!("../../tests/data/textcalls/lfm.json")),
    ("json", include_str!("../../tests/data/textcalls/json.json")),
    (
        "mentions",
        include_str!("../../tests/data/textcalls/mentions.json"),
    ),
];

#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    source: String,
    tools: Value,
    text: String,
    expect: Vec<Value>,
    prose: Option<String>,
}

fn corpus() -> Vec<(&'static str, Case)> {
    CORPUS
        .iter()
        .flat_map(|(family, data)| {
            let cases: Vec<Case> = serde_json::from_str(data).expect(family);
            cases.into_iter().map(move |c| (*family, c))
        })
        .collect()
}

/// The tools as the corpus lists them, under every rule of the coach, with `path` as the
/// path argument (the CLI's word, and the corpus tools').
fn offered(tools: &Value) -> OfferedTools {
    let tools = match tools {
        Value::Array(names) => OfferedTools::new(
            names
                .iter()
                .map(|n| (n.as_str().unwrap().to_owned(), json!({"type": "object"}))),
        ),
        Value::Object(map) => OfferedTools::new(map.iter().map(|(n, s)| (n.clone(), s.clone()))),
        other => panic!("tools must be a list or a map, got {other}"),
    };
    tools.coached(&repairing())
}

/// The CLI's word for the path argument, with the name repairs (off by default) on.
fn repairing() -> CoachConfig {
    let mut coach = CoachConfig {
        path_argument: Some("path".into()),
        ..CoachConfig::default()
    };
    coach.on.extend([Rule::NameRepair, Rule::PathInName]);
    coach
}

/// The recovery as the corpus spells it: `{"call", "arguments"}`, `{"unknown"}`,
/// `{"malformed": true}`.
fn spelled(recovery: &Recovery) -> Vec<Value> {
    recovery
        .calls
        .iter()
        .map(|c| match c {
            Recovered::Call { name, arguments } => json!({"call": name, "arguments": arguments}),
            Recovered::UnknownTool { name, .. } => json!({"unknown": name}),
            Recovered::Malformed { .. } => json!({"malformed": true}),
        })
        .collect()
}

/// Whether `case` is recovered exactly; the failure message otherwise.
fn check(case: &Case) -> Result<(), String> {
    let got = recover(&case.text, &offered(&case.tools));
    let calls = spelled(&got);
    if calls != case.expect {
        return Err(format!(
            "{} ({}): calls {calls:?}, expected {:?}",
            case.id, case.source, case.expect
        ));
    }
    if let Some(prose) = &case.prose {
        if &got.prose != prose {
            return Err(format!(
                "{}: prose {:?}, expected {prose:?}",
                case.id, got.prose
            ));
        }
    }
    if calls.is_empty() && got.prose != case.text {
        return Err(format!(
            "{}: a reply without calls must stay as it is",
            case.id
        ));
    }
    Ok(())
}

#[test]
fn corpus_is_recovered_exactly() {
    let cases = corpus();
    assert!(cases.len() >= 60, "the corpus needs at least 60 cases");
    let mentions = cases.iter().filter(|(_, c)| c.expect.is_empty()).count();
    assert!(
        mentions >= 20,
        "the corpus needs at least 20 replies that only mention calls"
    );
    let failures: Vec<String> = cases.iter().filter_map(|(_, c)| check(c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn corpus_figures_per_format() {
    // (exact, total, false calls) per family, the figures docs/tool-calling.md reports.
    let mut figures: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for (family, case) in corpus() {
        let entry = figures.entry(family).or_default();
        entry.1 += 1;
        let got = recover(&case.text, &offered(&case.tools));
        if check(&case).is_ok() {
            entry.0 += 1;
        }
        if case.expect.is_empty() && !got.calls.is_empty() {
            entry.2 += 1;
        }
    }
    let calls: (usize, usize) = figures
        .iter()
        .filter(|(f, _)| **f != "mentions")
        .fold((0, 0), |(e, t), (_, v)| (e + v.0, t + v.1));
    assert!(
        calls.0 * 10 >= calls.1 * 9,
        "exact recovery below 90%: {figures:?}"
    );
    assert!(
        figures.values().all(|v| v.2 == 0),
        "false calls: {figures:?}"
    );
}

#[test]
fn malformed_reasons_tell_the_model_what_was_wrong() {
    let tools = offered(&json!(["read_file"]));
    let got = recover(
        "<tool_call>\n{\"name\": \"read_file\", \"arguments\": [1]}\n</tool_call>",
        &tools,
    );
    let [
        Recovered::Malformed {
            format: Format::Hermes,
            reason,
        },
    ] = got.calls.as_slice()
    else {
        panic!("{got:?}");
    };
    assert!(reason.contains("must be a JSON object"), "{reason}");
}

#[test]
fn names_resolve_to_the_offered_spelling() {
    let tools = offered(&json!(["read_file", "Bash"]));
    assert_eq!(tools.resolve("READ_FILE"), Some("read_file"));
    assert_eq!(tools.resolve("functions.read_file:3"), Some("read_file"));
    assert_eq!(tools.resolve("bash"), Some("Bash"));
    assert_eq!(tools.resolve("read"), None);
    assert_eq!(tools.names().collect::<Vec<_>>(), ["read_file", "Bash"]);
    // Without `name-repair` (the default) only a server's own spelling is read.
    let strict = tools.coached(&CoachConfig::default());
    assert_eq!(strict.resolve("functions.read_file:3"), Some("read_file"));
    assert_eq!(strict.resolve("Bash"), Some("Bash"));
    assert_eq!(strict.resolve("READ_FILE"), None);
    assert_eq!(strict.resolve("bash"), None);
}

/// The positive cases: replies that make calls.
fn positives() -> Vec<Case> {
    corpus()
        .into_iter()
        .map(|(_, c)| c)
        .filter(|c| c.expect.iter().any(|e| e.get("call").is_some()))
        .collect()
}

fn stream(text: &str, cuts: &[usize], tools: &OfferedTools) -> (String, Recovery) {
    let mut hold = HoldBack::default();
    let mut shown = String::new();
    let mut at = 0;
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (text.len() + 1)).collect();
    cuts.sort_unstable();
    for cut in cuts {
        if cut > at && text.is_char_boundary(cut) {
            shown.push_str(hold.push(&text[at..cut]));
            at = cut;
        }
    }
    shown.push_str(hold.push(&text[at..]));
    let (rest, recovery) = hold.finish(tools);
    shown.push_str(&rest);
    (shown, recovery)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// A string written as valid JSON reads as itself, whatever it holds: the repair of
    /// lone backslashes never touches valid escapes.
    #[test]
    fn valid_json_strings_read_unchanged(pattern in "\\PC{0,40}") {
        let text = format!(
            r#"{{"name": "search_text", "arguments": {{"pattern": {}}}}}"#,
            serde_json::to_string(&pattern).unwrap()
        );
        let got = recover(&text, &offered(&json!(["search_text"])));
        prop_assert_eq!(spelled(&got), vec![json!({"call": "search_text", "arguments": {"pattern": pattern}})]);
    }

    /// A regex written into JSON without escaping its backslashes reads as written.
    #[test]
    fn unescaped_regexes_read_as_written(pattern in r"([a-z0-9 =*+()\[\].]|\\[sdwSDW.()\[])*") {
        let text = format!(r#"{{"name": "search_text", "arguments": {{"pattern": "{pattern}"}}}}"#);
        let got = recover(&text, &offered(&json!(["search_text"])));
        prop_assert_eq!(spelled(&got), vec![json!({"call": "search_text", "arguments": {"pattern": pattern}})]);
    }

    /// Quoting any call inside a fence within prose runs nothing.
    #[test]
    fn quoted_calls_never_run(index in 0usize..1000, info in "(json|xml|text|)") {
        let cases = positives();
        let case = &cases[index % cases.len()];
        let text = format!("For example, a model may write:\n\n```{info}\n{}\n```\n\nThat is how it looks.", case.text);
        let got = recover(&text, &offered(&case.tools));
        prop_assert!(got.calls.is_empty(), "{}: {:?}", case.id, got.calls);
        prop_assert_eq!(got.prose, text);
    }

    /// However the reply is chunked, the display shows exactly the prose of the
    /// whole-text parse (nothing lost, nothing twice) and the calls are the same.
    #[test]
    fn hold_back_matches_the_whole_parse(index in 0usize..1000, cuts in proptest::collection::vec(0usize..4000, 0..12)) {
        let cases: Vec<Case> = corpus().into_iter().map(|(_, c)| c).collect();
        let case = &cases[index % cases.len()];
        let tools = offered(&case.tools);
        let whole = recover(&case.text, &tools);
        let (shown, recovery) = stream(&case.text, &cuts, &tools);
        prop_assert_eq!(&shown, &whole.prose, "{}", case.id);
        prop_assert_eq!(recovery, whole);
    }

    /// The same over arbitrary text built from marker fragments.
    #[test]
    fn hold_back_on_arbitrary_text(
        parts in proptest::collection::vec(prop_oneof![
            Just("<tool_call>"), Just("</tool_call>"), Just("\n"), Just("```"), Just("{\"name\": \"read_file\", \"arguments\": {}}"),
            Just("<think>"), Just("</think>"), Just(">>>read_file\n"), Just("[TOOL_CALLS]"), Just("<function=read_file>"),
            Just("prose "), Just("  "), Just("["), Just("read_file(path='a')"), Just("]"), Just("é"),
            Just("`"), Just("<|python_tag|>"), Just("<|tool_call_start|>"), Just("[ARGS]"),
        ], 0..16),
        cuts in proptest::collection::vec(0usize..400, 0..10),
    ) {
        let text: String = parts.concat();
        let tools = offered(&json!(["read_file"]));
        let whole = recover(&text, &tools);
        let (shown, recovery) = stream(&text, &cuts, &tools);
        prop_assert_eq!(&shown, &whole.prose);
        prop_assert_eq!(recovery, whole);
    }
}

#[test]
fn hold_back_releases_prose_early_and_holds_markup() {
    let mut hold = HoldBack::default();
    assert_eq!(hold.push("Let me look.\n"), "Let me look.\n");
    assert_eq!(hold.push("<tool_"), "");
    assert_eq!(
        hold.push("call>\n{\"name\": \"read_file\", \"arguments\": {}}\n</tool_call>"),
        ""
    );
    let (rest, recovery) = hold.finish(&offered(&json!(["read_file"])));
    assert_eq!(rest, "");
    assert_eq!(
        recovery.calls,
        [Recovered::Call {
            name: "read_file".to_owned(),
            arguments: Map::new()
        }]
    );
}

#[test]
fn hold_back_releases_held_text_that_is_no_call() {
    let mut hold = HoldBack::default();
    assert_eq!(hold.push("{\"answer\": "), "");
    assert_eq!(hold.push("42}"), "");
    let (rest, recovery) = hold.finish(&offered(&json!(["read_file"])));
    assert_eq!(rest, "{\"answer\": 42}");
    assert!(recovery.calls.is_empty());
}

/// Shapes from the format descriptions that no collected reply shows.
#[test]
fn shapes_from_the_format_descriptions() {
    let case = |text: &str, expect: Value| Case {
        id: text.chars().take(30).collect(),
        source: "issue 10 format list".to_owned(),
        tools: json!(["get_weather"]),
        text: text.to_owned(),
        expect: serde_json::from_value(expect).unwrap(),
        prose: None,
    };
    let weather = json!([{"call": "get_weather", "arguments": {"city": "Rome"}}]);
    let table = [
        case(
            "<tool_call>\n```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n```\n</tool_call>",
            weather.clone(),
        ),
        case(
            "{\"function\": \"get_weather\", \"parameters\": {\"city\": \"Rome\"}}",
            weather.clone(),
        ),
        case(
            "  <tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}</tool_call>  ",
            weather.clone(),
        ),
        case(
            "<|python_tag|>get_weather.call(city=\"Rome\")",
            weather.clone(),
        ),
        case(
            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>\nDone; the result follows.",
            weather,
        ),
        case(
            "Sure.\n<tool_call>\nnot json\n</tool_call>\nMore prose after it.",
            json!([]),
        ),
        case("Sure.\n<tool_call>\nnot json", json!([{"malformed": true}])),
        case("{\"name\": \"Alice\"}", json!([])),
        case("[get_weather(\"Rome\")]", json!([])),
    ];
    for case in &table {
        check(case).unwrap();
    }
}

/// Marker fragments of every format, with the JSON, XML and pythonic bodies they carry
/// (well-formed and broken), for the long-running check below.
const FRAGMENTS: &[&str] = &[
    "<tool_call>",
    "</tool_call>",
    "\n",
    "```",
    "```json\n",
    "<think>",
    "</think>",
    "{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}",
    "{\"name\": \"nope\"}",
    "{\"tool_calls\": [",
    "]}",
    "{\"function\": {\"name\": \"read_file\", \"arguments\": \"{}\"}}",
    ">>>read_file\n",
    ">>>all\n",
    "[TOOL_CALLS]",
    "[TOOL_CALLS]read_file[ARGS]",
    "[ARGS]",
    "<function=read_file>",
    "<parameter=path>",
    "</parameter>",
    "</function>",
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "<|eom_id|>",
    "<|tool_call_start|>",
    "<|tool_call_end|>",
    "<｜tool▁calls▁begin｜>",
    "<｜tool▁call▁begin｜>",
    "function<｜tool▁sep｜>read_file\n",
    "<｜tool▁call▁end｜>",
    "<｜tool▁calls▁end｜>",
    "[",
    "]",
    "read_file(path='a')",
    "read_file(path=",
    "(",
    ")",
    ", ",
    "'",
    "\"",
    "{",
    "}",
    "prose ",
    "  ",
    "é",
    "`",
    "\\",
    "\r\n",
];

proptest! {
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// `cargo xtask fuzz` (issue 12): on any text, recovery never panics, keeps no more
    /// prose than the reply had, runs only offered tools, and the streaming hold-back
    /// agrees with the whole-text parse however the reply is cut.
    #[test]
    #[ignore = "long-running: cargo xtask fuzz"]
    fn fuzz_text_call_recovery(
        parts in proptest::collection::vec(prop_oneof![
            4 => proptest::sample::select(FRAGMENTS).prop_map(str::to_owned),
            1 => "\\PC{0,12}",
        ], 0..40),
        cuts in proptest::collection::vec(any::<usize>(), 0..16),
    ) {
        let text: String = parts.concat();
        let tools = offered(&json!({"read_file": {"type": "object",
            "properties": {"path": {"type": "string"}, "n": {"type": "integer"}}}, "all": {"type": "object"}}));
        let whole = recover(&text, &tools);
        prop_assert!(whole.prose.len() <= text.len(), "{:?}", whole);
        for call in &whole.calls {
            if let Recovered::Call { name, .. } = call {
                prop_assert!(name == "read_file" || name == "all", "{:?}", call);
            }
        }
        let (shown, recovery) = stream(&text, &cuts, &tools);
        prop_assert_eq!(&shown, &whole.prose);
        prop_assert_eq!(recovery, whole);
    }
}

/// Issue 17: a reply that opens with a fence in another language (or with a run of
/// backticks) streams as it arrives; only a fence calls are written in is held.
#[test]
fn a_reply_opening_with_code_streams() {
    let check = |chunks: &[&str], shown: &str| {
        let mut hold = HoldBack::default();
        let got: String = chunks.iter().map(|c| hold.push(c).to_owned()).collect();
        assert_eq!(got, shown, "{chunks:?}");
    };
    let code = ["```python\n", "print(1)\n", "```\n", "Done."];
    check(&code, &code.concat());
    check(&["```", "pyth"], "");
    check(&["```json\n", "{\"name\": \"read_file\"}\n"], "");
    check(&["```tool_call\n", "{"], "");
    let flood = "`".repeat(3000);
    check(&[&flood], &flood);
    // The fenced code is no call, but a marker line after it still is.
    check(
        &[
            "```sh\nls\n```\n",
            "<tool_call>\n{\"name\": \"read_file\"}\n",
        ],
        "```sh\nls\n```\n",
    );
}

/// A schema taking a `path`, and a `check` of what a reply recovers against `read_file`
/// and `list_dir` (which take it) and `search_text`.
fn path_tools() -> (Value, impl Fn(&str, Value)) {
    let path = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let tools = offered(&json!({"read_file": path, "list_dir": path, "search_text": {}}));
    let check = move |reply: &str, expected: Value| {
        let got = Value::Array(spelled(&recover(reply, &tools)));
        assert_eq!(got, expected, "{reply}");
    };
    (path, check)
}

/// A small model's call whose name carries the path (`read_config.toml`) is the offered
/// `read_*` tool that takes a path, with that path; nothing else is guessed.
#[test]
fn a_path_in_the_name_is_the_path_argument() {
    let (_, check) = path_tools();
    check(
        r#"{"name": "read_config.toml", "arguments": {}}"#,
        json!([{"call": "read_file", "arguments": {"path": "config.toml"}}]),
    );
    check(
        r#"{"name": "read_docs/guide.md", "arguments": {}}"#,
        json!([{"call": "read_file", "arguments": {"path": "docs/guide.md"}}]),
    );
    // No path-like rest, a path already given, no tool of that verb, a verb that is not a
    // tool's prefix: the unknown-tool answer stands.
    check(
        r#"{"name": "read_config", "arguments": {}}"#,
        json!([{"unknown": "read_config"}]),
    );
    check(
        r#"{"name": "read_a.txt", "arguments": {"path": "b.txt"}}"#,
        json!([{"unknown": "read_a.txt"}]),
    );
    check(
        r#"{"name": "search_a.txt", "arguments": {}}"#,
        json!([{"unknown": "search_a.txt"}]),
    );
}

/// A call named like a file (`config.toml`, as the 0.5B writes for "which port does
/// config.toml set?"; `backup.py` with `{"days": 7}` for "backup.py keep days?") reads
/// that file with the one offered `read*` tool, keeping only the arguments it declares;
/// anything more than a bare file name, or a second path, stays unknown.
#[test]
fn a_file_as_the_name_reads_it() {
    let (path, check) = path_tools();
    for file in ["settings.json", "src/main.rs", ".env", "docs/notes"] {
        check(
            &format!(r#"{{"name": "{file}", "arguments": {{}}}}"#),
            json!([{"call": "read_file", "arguments": {"path": file}}]),
        );
    }
    let names = [
        "gitignore",
        "make shopping.txt",
        "os.listdir",
        "src/",
        "backup.py!",
    ];
    for name in names.into_iter().chain(["search_a.txt", "search_src/"]) {
        check(
            &format!(r#"{{"name": "{name}", "arguments": {{}}}}"#),
            json!([{"unknown": name}]),
        );
    }
    check(
        r#"{"name": "backup.py", "arguments": {"days": 7}}"#,
        json!([{"call": "read_file", "arguments": {"path": "backup.py"}}]),
    );
    check(
        r#"{"name": "settings.json", "arguments": {"path": "other.json"}}"#,
        json!([{"unknown": "settings.json"}]),
    );
    // The arguments the read tool declares are kept, typed by its schema.
    let lines = json!({"type": "object", "properties": {
        "path": {"type": "string"}, "max_lines": {"type": "integer"}}});
    let tools = offered(&json!({"read_file": lines}));
    let got = recover(
        "<tool_call>\n<function=notes.md>\n<parameter=max_lines>\n5\n</parameter>\n\
         <parameter=topic>\ndates\n</parameter>\n</function>\n</tool_call>",
        &tools,
    );
    assert_eq!(
        Value::Array(spelled(&got)),
        json!([{"call": "read_file", "arguments": {"path": "notes.md", "max_lines": 5}}])
    );
    // Two tools that read: which one is not guessed.
    let two = offered(&json!({"read_file": path, "read_lines": path}));
    assert_eq!(
        Value::Array(spelled(&recover(
            r#"{"name": "a.txt", "arguments": {}}"#,
            &two
        ))),
        json!([{"unknown": "a.txt"}])
    );
}

#[test]
fn a_reply_that_shows_a_call_instead_of_making_it_is_told_apart() {
    // Replies of Qwen2.5-Coder-1.5B through llama-server, asked in plain words (the eval).
    let tools = offered(&json!(["read_file", "search_text", "list_dir"]));
    let check = |text: &str, shows: bool| {
        assert!(recover(text, &tools).calls.is_empty(), "no call: {text:?}");
        assert_eq!(super::shows_call(text, &tools), shows, "{text:?}");
    };
    check(
        "To find which file mentions \"Bluebird\", you can use the `search_text` function. \
         Here's how you can call it:\n\n```json\n{\n  \"name\": \"search_text\",\n  \
         \"arguments\": {\n    \"pattern\": \"Bluebird\"\n  }\n}\n```\n\nThe response will be:",
        true,
    );
    check(
        "1. List the contents using `list_dir`:\n{\"name\": \"list_dir\", \"arguments\": {}}\n2. Then read it.",
        true,
    );
    check(
        "<think>maybe ```json\n{\"name\": \"read_file\", \"arguments\": {}}\n```</think>The port is 8123.",
        false,
    );
    // An invented tool, JSON that is no call, plain code: nothing to act on.
    check(
        "Here is an example:\n```json\n{\"name\": \"launch_code\", \"arguments\": {}}\n```\nDone.",
        false,
    );
    check(
        "The config is:\n```json\n{\"name\": \"tally\", \"port\": 8123}\n```\nSo 8123.",
        false,
    );
    check("Run it:\n```sh\nls src\n```\nThat lists them.", false);
    check("The capital of Japan is Tokyo.", false);
    // Empty call markup: no call and no malformed one, but meant to act.
    check("<tools></tools>", true);
    check("<tool_call>\n</tool_call>", true);
}

/// `tool-from-arguments`: a call to a tool not offered is the one offered tool its
/// arguments fit (all declared, all required given); arguments that fit none, or two,
/// or none at all leave it unknown, and so does the switch off.
#[test]
fn tool_from_arguments_names_the_one_tool_they_fit() {
    let string = json!({"type": "string"});
    let schema = |props: &[&str], required: &[&str]| {
        let props: serde_json::Map<String, Value> = props
            .iter()
            .map(|p| ((*p).to_owned(), string.clone()))
            .collect();
        json!({"type": "object", "properties": props, "required": required})
    };
    let tools = json!({
        "read_file": schema(&["path"], &["path"]),
        "list_dir": {"type": "object", "properties": {"path": string}},
        "search_text": schema(&["pattern", "path", "regex"], &["pattern"]),
        "write_file": schema(&["path", "content"], &["path", "content"]),
        "run_command": schema(&["program", "args"], &["program"]),
    });
    let check = |off: bool, call: Value, expected: Value| {
        let mut coach = repairing();
        if off {
            coach.off.insert(Rule::ToolFromArguments);
        } else {
            coach.on.insert(Rule::ToolFromArguments);
        }
        let offered = offered(&tools).coached(&coach);
        let reply = call.to_string();
        let got = Value::Array(spelled(&recover(&reply, &offered)));
        assert_eq!(got, json!([expected]), "off: {off}, {reply}");
    };
    let wc = json!({"program": "wc", "args": ["-l", "sales.csv"]});
    let search = json!({"path": ".", "pattern": "port", "regex": false});
    for (name, arguments, fits) in [
        ("wc", wc.clone(), Some("run_command")),
        (
            "save_port_from_config_toml",
            search.clone(),
            Some("search_text"),
        ),
        (
            "make_shopping",
            json!({"path": "s.txt", "content": "eggs"}),
            Some("write_file"),
        ),
        // Two tools take a path alone; a write needs its path; an argument no tool has.
        ("src", json!({"path": "src"}), None),
        ("make me shopping.txt", json!({"content": "eggs"}), None),
        ("weather", json!({"city": "Oslo"}), None),
        ("wc", json!({"program": "wc", "lines": true}), None),
        ("gitignore", json!({}), None),
    ] {
        let call = json!({"name": name, "arguments": arguments});
        let unknown = json!({"unknown": name});
        let expected = fits.map_or(
            unknown.clone(),
            |tool| json!({"call": tool, "arguments": arguments}),
        );
        check(false, call.clone(), expected);
        check(true, call, unknown);
    }
}

/// Each of the coach's recovery rules does what it says with its switch on, and nothing
/// with it off (or, for `path-in-name` and `file-as-name`, without the caller's word for
/// the path argument).
#[test]
fn the_coachs_recovery_rules_each_have_their_switch() {
    let path = json!({"type": "object", "properties": {"path": {"type": "string"}}});
    let all = offered(&json!({"read_file": path}));
    let check = |off: &[Rule], path_argument: Option<&str>, reply: &str, expected: Value| {
        let mut coach = CoachConfig {
            path_argument: path_argument.map(str::to_owned),
            ..repairing()
        };
        coach.off.extend(off.iter().copied());
        // Its arguments fit the one tool offered: `tool-from-arguments` would name it.
        coach.off.insert(Rule::ToolFromArguments);
        let tools = all.clone().coached(&coach);
        let got = Value::Array(spelled(&recover(reply, &tools)));
        assert_eq!(got, expected, "{off:?} {reply}");
    };
    let read = json!([{"call": "read_file", "arguments": {"path": "a"}}]);
    let loose = r#"{"name": "functions.Read_File:0", "arguments": {"path": "a"}}"#;
    check(&[], Some("path"), loose, read.clone());
    check(
        &[Rule::NameRepair],
        Some("path"),
        loose,
        json!([{"unknown": "functions.Read_File:0"}]),
    );
    let named = r#"{"name": "read_a", "arguments": {}}"#;
    let named = named.replace("read_a", "read_a.txt");
    let as_path = json!([{"call": "read_file", "arguments": {"path": "a.txt"}}]);
    check(&[], Some("path"), &named, as_path.clone());
    check(
        &[Rule::PathInName],
        Some("path"),
        &named,
        json!([{"unknown": "read_a.txt"}]),
    );
    let file = r#"{"name": "a.txt", "arguments": {}}"#;
    check(&[], Some("path"), file, as_path.clone());
    check(
        &[Rule::FileAsName],
        Some("path"),
        file,
        json!([{"unknown": "a.txt"}]),
    );
    check(&[], None, file, json!([{"unknown": "a.txt"}]));
    check(&[], None, &named, json!([{"unknown": "read_a.txt"}]));
    check(
        &[],
        Some("file"),
        &named,
        json!([{"unknown": "read_a.txt"}]),
    );
    let invented = r#"{"name": "read_file", "arguments": {"path": "a"}}
{"type": "error", "message": "No such file"}"#;
    check(&[], Some("path"), invented, read.clone());
    check(
        &[Rule::InventedResultCut],
        Some("path"),
        invented,
        json!([]),
    );
    // By default the name repairs are off: a server's `functions.` spelling is still read,
    // another case or a path in the name is not; a file's name is.
    let mut default = CoachConfig {
        path_argument: Some("path".into()),
        ..CoachConfig::default()
    };
    default.off.insert(Rule::ToolFromArguments);
    let tools = all.clone().coached(&default);
    let spelling = r#"{"name": "functions.read_file:0", "arguments": {"path": "a"}}"#;
    for (reply, expected) in [
        (spelling, read),
        (loose, json!([{"unknown": "functions.Read_File:0"}])),
        (named.as_str(), json!([{"unknown": "read_a.txt"}])),
        (file, as_path),
    ] {
        let got = Value::Array(spelled(&recover(reply, &tools)));
        assert_eq!(got, expected, "default: {reply}");
    }
}
