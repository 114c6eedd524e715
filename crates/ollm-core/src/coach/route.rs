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
//!   answered "when did we move the launch to?" with `none`). The prompt that won names
//!   the user's own things and the pronouns that point at them.
//! - **Only the run's prompt** is shown, not the history: the choice is about what this
//!   message asks, and a short request costs well under a second on the small models.
//! - **Anything but a clean `none` offers the tools**: a server that refuses the schema,
//!   a reply that is not the JSON asked for, an error or a name, so the rule can only
//!   take tools away from a run whose model said it needs none.
//! - **Not when a call is required** (`tool_choice` `required` or a named tool): the
//!   caller's word outranks the model's.

use ollm_types::{GenerationOptions, Message, ProviderRequest, ResponseFormat, ToolSchema};
use serde_json::{Value, json};

use super::rule::CoachConfig;

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

/// The system text of the choice: the tools, where they work, and the question: before
/// any call, or `after_results` of the run's calls.
fn instructions(tools: &[ToolSchema], scope: Option<&str>, after_results: bool) -> String {
    let list: Vec<String> = tools
        .iter()
        .map(|t| format!("- {}: {}", t.name, t.description))
        .collect();
    let (head, own) = match scope {
        Some(scope) => (
            format!("Tools that work on {scope}:"),
            format!(
                "\n\n{} holds the user's own things: their project, notes, plans, data and \
                 contacts.",
                capitalized(scope)
            ),
        ),
        None => ("Tools you can use:".to_owned(), String::new()),
    };
    if after_results {
        return format!(
            "{head}\n{}{own} The conversation holds the results of the tools called so far. \
             If they answer the user's message, say \"none\". If the message still needs a \
             tool (to read something the results do not show yet, or to create or change a \
             file the user asked for), name it. Answer as JSON {{\"tool\": ...}}.",
            list.join("\n")
        );
    }
    format!(
        "{head}\n{}{own} Does the user's message ask about something that may be written \
         in their files (words like we, my, our, this, here, or a file's name), or ask to \
         create or change a file, or to run a command? If so, name the tool to use first. \
         If not (greetings, thanks, general knowledge, arithmetic, how to do something in \
         general), say \"none\". Answer as JSON {{\"tool\": ...}}.",
        list.join("\n")
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

/// The request that asks the model to choose, for `model` and the run's `messages` since
/// its prompt (the prompt alone before any call).
pub(crate) fn request(
    config: &CoachConfig,
    model: &str,
    messages: &[Message],
    tools: &[ToolSchema],
) -> ProviderRequest {
    let after_results = messages.len() > 1;
    let mut request = ProviderRequest::new(model, messages.to_vec());
    request.system = Some(instructions(tools, config.scope.as_deref(), after_results));
    request.options = GenerationOptions {
        temperature: Some(0.0),
        max_tokens: Some(MAX_TOKENS),
        ..GenerationOptions::default()
    };
    request.response_format = Some(ResponseFormat::JsonSchema {
        name: "tool_or_none".to_owned(),
        schema: schema(tools),
    });
    request
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
        let request = request(&config, "m", std::slice::from_ref(&prompt), &tools());
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
            system.contains("This folder holds the user's own things"),
            "{system}"
        );
    }

    #[test]
    fn without_a_scope_the_text_names_no_folder() {
        let system = instructions(&tools(), None, false);
        assert!(system.starts_with("Tools you can use:"), "{system}");
        assert!(!system.contains("folder"), "{system}");
    }
}
