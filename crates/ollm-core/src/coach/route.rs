//! The `tool-or-none` rule: before a run's first request with tools, one short request
//! whose reply the server constrains to a JSON object naming an offered tool or `none`.
//! On `none` the run offers no tools, so the model answers in plain words. A leaf.
//!
//! # Decisions
//! - **Why a separate, constrained choice.** Offered tools, the 0.5B called them on
//!   questions that need none ("thanks, that's all for now!": `list_dir` seven times; "What
//!   is 6 times 7?": `search_text` twice), and the 1.5B wrote files on "How do you say
//!   hello in French?" (issue 35). Asked only to choose, with the server's JSON schema
//!   limiting the reply to the offered names and `none`, at temperature 0, the 0.5B chose
//!   right on 48 of 54 tuning-part wordings (tool 26/30, write 8/9, none 14/15), against
//!   4/15 `none` right with a prompt that listed the folder's entries (the names pull it
//!   to the tools) and 13/15 with one that did not name the user's own things (then it
//!   answered "when did we move the launch to?" with `none`). The prompt that won named
//!   the user's own things and the pronouns that point at them. Since 2026-11-27 the
//!   sentence on the user's own things is the `own-things` rule, off by default: on the
//!   1.5B, asked the same way, it cost tool and write questions and saved no restraint,
//!   and the 0.5B did as well without it (coach docs).
//! - **`general-check`** asks a second question, by kind (`need_request`), only after a
//!   read was chosen: the kinds put the 1.5B's terse general questions right where the
//!   tool names did not, but cost tool questions, so it is on request.
//! - **Only the run's prompt** is shown, not the history: the choice is about what this
//!   message asks, and a short request costs well under a second on the small models.
//! - **Anything but a clean `none` offers the tools**: a server that refuses the schema,
//!   a reply that is not the JSON asked for, an error or a name, so the rule can only
//!   take tools away from a run whose model said it needs none.
//! - **Not when a call is required** (`tool_choice` `required` or a named tool): the
//!   caller's word outranks the model's.

use ollm_types::{GenerationOptions, Message, ProviderRequest, ResponseFormat, ToolSchema};
use serde_json::{Value, json};

use super::rule::{CoachConfig, Rule};

/// The most tokens the choice may take: `{"tool": "search_text"}` is about ten.
const MAX_TOKENS: u32 = 32;

/// What the model chose before the run's first request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// No tool: the run offers none.
    None,
    /// A tool (or no clean answer): the run offers its tools as usual.
    Tools(Option<String>),
}

/// The tools and where they work, then (with `own`) the sentence that says the scope
/// holds the user's own things: how both questions open, up to the question.
fn opening(tools: &[ToolSchema], scope: Option<&str>, own: bool) -> String {
    let list: Vec<String> = tools
        .iter()
        .map(|t| format!("- {}: {}", t.name, t.description))
        .collect();
    let (head, end) = match scope {
        Some(scope) if own => (
            format!("Tools that work on {scope}:"),
            format!(
                "\n\n{} holds the user's own things: their project, notes, plans, data and \
                 contacts. ",
                capitalized(scope)
            ),
        ),
        Some(scope) => (format!("Tools that work on {scope}:"), "\n".to_owned()),
        None => ("Tools you can use:".to_owned(), " ".to_owned()),
    };
    format!("{head}\n{}{end}", list.join("\n"))
}

/// The system text of the choice: the tools, where they work, and the question.
fn instructions(tools: &[ToolSchema], scope: Option<&str>, own: bool) -> String {
    format!(
        "{}Does the user's message ask about something that may be written \
         in their files (words like we, my, our, this, here, or a file's name), or ask to \
         create or change a file, or to run a command? If so, name the tool to use first. \
         If not (greetings, thanks, general knowledge, arithmetic, how to do something in \
         general), say \"none\". Answer as JSON {{\"tool\": ...}}.",
        opening(tools, scope, own)
    )
}

/// The system text of `general-check`: what the message needs, by kind.
fn need_instructions(tools: &[ToolSchema], scope: Option<&str>) -> String {
    format!(
        "{}What does the user's message need? \"general\": small talk, thanks, general \
         knowledge, arithmetic, or how something is done in general, answered without their \
         files. \"files\": anything about their own project, notes, plans, contacts or data \
         (a date, a name, a number, a setting, a list, a file), even without words like my \
         or our. \"change\": create or change a file, or run a command. Answer as JSON \
         {{\"need\": ...}}.",
        opening(tools, scope, true)
    )
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The schema the reply must match: `{"tool": <an offered name or "none">}`.
fn schema(tools: &[ToolSchema]) -> Value {
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    names.push("none");
    json!({
        "type": "object",
        "properties": {"tool": {"enum": names}},
        "required": ["tool"],
    })
}

/// The request that asks the model to choose, for `model` and the run's `prompt`.
pub(crate) fn request(
    config: &CoachConfig,
    model: &str,
    prompt: &Message,
    tools: &[ToolSchema],
) -> ProviderRequest {
    let own = config.is_on(Rule::OwnThings);
    let scope = config
        .scope
        .as_deref()
        .filter(|_| config.is_on(Rule::ScopedChoice));
    let system = instructions(tools, scope, own);
    constrained(model, prompt, system, "tool_or_none", schema(tools))
}

/// The request of `general-check`: whether the run's `prompt` needs the user's files.
pub(crate) fn need_request(
    config: &CoachConfig,
    model: &str,
    prompt: &Message,
    tools: &[ToolSchema],
) -> ProviderRequest {
    let system = need_instructions(tools, config.scope.as_deref());
    let schema = json!({
        "type": "object",
        "properties": {"need": {"enum": ["general", "files", "change"]}},
        "required": ["need"],
    });
    constrained(model, prompt, system, "general_or_files", schema)
}

/// A short, greedy request whose reply the server holds to `schema`.
fn constrained(
    model: &str,
    prompt: &Message,
    system: String,
    name: &str,
    schema: Value,
) -> ProviderRequest {
    let mut request = ProviderRequest::new(model, vec![prompt.clone()]);
    request.system = Some(system);
    request.options = GenerationOptions {
        temperature: Some(0.0),
        max_tokens: Some(MAX_TOKENS),
        ..GenerationOptions::default()
    };
    request.response_format = Some(ResponseFormat::JsonSchema {
        name: name.to_owned(),
        schema,
    });
    request
}

/// Whether the reply to [`need_request`] is a clean `{"need": "general"}`.
pub(crate) fn read_general(text: &str) -> bool {
    serde_json::from_str::<Value>(text.trim())
        .ok()
        .is_some_and(|v| v.get("need").and_then(Value::as_str) == Some("general"))
}

/// The system text of `change-after-idle`'s question: an answer, or a file written?
/// No tools are listed: their names pulled the answer to the files. Asked alone on the
/// tuning part's 54 wordings (temperature 0), the 1.5B said `write` for 7 of the 9
/// writes (not two `.gitignore` wordings), for none of the 30 tool questions and one
/// of the 15 that need no tool; asked by kind as `general-check` asks, it said `files`
/// for "save the port from config.toml into port.txt".
const CHANGE_INSTRUCTIONS: &str = "What does the user's message ask for? \"answer\": an \
    answer or information, about their files or anything else. \"write\": a file \
    created, written or changed, or something saved into one. Answer as JSON \
    {\"asks\": ...}.";

/// The request of `change-after-idle`: whether the run's `prompt` asks for a file
/// written.
pub(crate) fn change_request(model: &str, prompt: &Message) -> ProviderRequest {
    let schema = json!({
        "type": "object",
        "properties": {"asks": {"enum": ["answer", "write"]}},
        "required": ["asks"],
    });
    let system = CHANGE_INSTRUCTIONS.to_owned();
    constrained(model, prompt, system, "answer_or_write", schema)
}

/// Whether the reply to [`change_request`] is a clean `{"asks": "write"}`.
pub(crate) fn read_change(text: &str) -> bool {
    serde_json::from_str::<Value>(text.trim())
        .ok()
        .is_some_and(|v| v.get("asks").and_then(Value::as_str) == Some("write"))
}

/// What the reply's text chose: `None` only for a clean `{"tool": "none"}`.
pub(crate) fn read(text: &str, tools: &[ToolSchema]) -> Route {
    let chosen = serde_json::from_str::<Value>(text.trim())
        .ok()
        .and_then(|v| v.get("tool").and_then(Value::as_str).map(str::to_owned));
    match chosen {
        Some(name) if name == "none" => Route::None,
        Some(name) if tools.iter().any(|t| t.name == name) => Route::Tools(Some(name)),
        _ => Route::Tools(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools() -> Vec<ToolSchema> {
        ["read_file", "list_dir"]
            .into_iter()
            .map(|n| ToolSchema::new(n, format!("{n} does it"), json!({"type": "object"})))
            .collect()
    }

    fn check(text: &str, expected: Route) {
        assert_eq!(read(text, &tools()), expected, "{text}");
    }

    #[test]
    fn only_a_clean_none_takes_the_tools_away() {
        check(r#"{"tool": "none"}"#, Route::None);
        check(" {\"tool\":\"none\"}\n", Route::None);
        check(
            r#"{"tool": "read_file"}"#,
            Route::Tools(Some("read_file".into())),
        );
        check(r#"{"tool": "write_file"}"#, Route::Tools(None));
        check(r#"{"tool": "None"}"#, Route::Tools(None));
        check("none", Route::Tools(None));
        check(r#"{"tool": "none""#, Route::Tools(None));
        check("", Route::Tools(None));
    }

    #[test]
    fn the_request_is_greedy_short_and_limited_to_the_offered_names() {
        let config = CoachConfig {
            scope: Some("this folder".into()),
            ..CoachConfig::default()
        };
        let prompt = Message::user("thanks!");
        let request = request(&config, "m", &prompt, &tools());
        assert_eq!(request.messages, vec![prompt]);
        assert_eq!(request.options.temperature, Some(0.0));
        assert_eq!(request.options.max_tokens, Some(MAX_TOKENS));
        let Some(ResponseFormat::JsonSchema { schema, .. }) = &request.response_format else {
            panic!("no schema: {:?}", request.response_format);
        };
        assert_eq!(
            schema["properties"]["tool"]["enum"],
            json!(["read_file", "list_dir", "none"])
        );
        let system = request.system.unwrap();
        assert!(
            system.starts_with("Tools that work on this folder:\n- read_file: read_file does it\n"),
            "{system}"
        );
        assert!(
            !system.contains("own things"),
            "own-things is off: {system}"
        );
        assert!(
            system.contains("list_dir does it\nDoes the user's"),
            "{system}"
        );
    }

    #[test]
    fn scoped_choice_off_names_no_scope() {
        let mut config = CoachConfig {
            scope: Some("this folder".into()),
            ..CoachConfig::default()
        };
        config.off.insert(Rule::ScopedChoice);
        let system = request(&config, "m", &Message::user("hi"), &tools())
            .system
            .unwrap();
        assert!(system.starts_with("Tools you can use:\n"), "{system}");
        assert!(!system.contains("folder"), "{system}");
    }

    #[test]
    fn own_things_says_the_scope_holds_the_users_things() {
        let mut config = CoachConfig {
            scope: Some("this folder".into()),
            ..CoachConfig::default()
        };
        config.turn_on(Rule::OwnThings);
        let system = request(&config, "m", &Message::user("hi"), &tools())
            .system
            .unwrap();
        assert!(
            system.contains("list_dir does it\n\nThis folder holds the user's own things"),
            "{system}"
        );
        assert!(system.contains("contacts. Does the user's"), "{system}");
    }

    #[test]
    fn the_check_asks_what_the_message_needs_and_only_a_clean_general_counts() {
        let prompt = Message::user("toml files: what for?");
        let request = need_request(&CoachConfig::default(), "m", &prompt, &tools());
        assert_eq!(request.messages, vec![prompt]);
        assert_eq!(request.options.temperature, Some(0.0));
        let Some(ResponseFormat::JsonSchema { schema, .. }) = &request.response_format else {
            panic!("no schema: {:?}", request.response_format);
        };
        assert_eq!(
            schema["properties"]["need"]["enum"],
            json!(["general", "files", "change"])
        );
        for (text, general) in [
            (r#"{"need": "general"}"#, true),
            ("\n{\"need\":\"general\"} ", true),
            (r#"{"need": "files"}"#, false),
            (r#"{"need": "change"}"#, false),
            ("general", false),
            (r#"{"tool": "none"}"#, false),
            ("", false),
        ] {
            assert_eq!(read_general(text), general, "{text}");
        }
    }

    #[test]
    fn the_change_question_asks_answer_or_write_and_only_a_clean_write_counts() {
        let prompt = Message::user("config port -> port.txt");
        let request = change_request("m", &prompt);
        assert_eq!(request.messages, vec![prompt]);
        assert_eq!(request.options.temperature, Some(0.0));
        assert!(
            request
                .system
                .unwrap()
                .starts_with("What does the user's message ask for?")
        );
        let Some(ResponseFormat::JsonSchema { schema, .. }) = &request.response_format else {
            panic!("no schema: {:?}", request.response_format);
        };
        assert_eq!(
            schema["properties"]["asks"]["enum"],
            json!(["answer", "write"])
        );
        for (text, write) in [
            (r#"{"asks": "write"}"#, true),
            ("\n{\"asks\":\"write\"} ", true),
            (r#"{"asks": "answer"}"#, false),
            (r#"{"need": "change"}"#, false),
            ("write", false),
            ("", false),
        ] {
            assert_eq!(read_change(text), write, "{text}");
        }
    }

    #[test]
    fn without_a_scope_the_text_names_no_folder() {
        let system = instructions(&tools(), None, true);
        assert!(system.starts_with("Tools you can use:"), "{system}");
        assert!(!system.contains("folder"), "{system}");
        assert!(
            system.contains("list_dir does it Does the user's"),
            "{system}"
        );
    }
}
