//! `ollm sessions show` and `ollm sessions export`: a saved conversation as text for
//! people, as Markdown, or as one JSON document.
//!
//! Decisions:
//! - `show` walks the records as saved, so the whole story is there: every message, each
//!   `/clear` and each compaction (its counts and summary; the history it carried is the
//!   one shown above it, so it is not repeated). `export` writes the conversation as it
//!   would resume (after the last `/clear`, from the last compaction on), because that is
//!   what another program or a later chat would use.
//! - Control characters (other than newlines and tabs) in `show`'s text are shown as
//!   escapes: a session holds model and tool output, which must not drive the terminal.
//! - Tool results are cut in `show` to [`RESULT_LINES`] lines (the count cut is said);
//!   `export` keeps everything.
//! - JSON is `{"session", "provider", "model", "messages"}` with the messages in ollm's
//!   own serde form (`role`, `parts`, ...), which `ollm_types::Message` reads back.
//! - All of it is pure (records in, text out), so it is tested without files.

use ollm_types::{ContentPart, Message, Role};
use serde_json::{Value, json};

use crate::sessions::{Loaded, Record};

/// How many lines of a tool result `show` prints.
pub(crate) const RESULT_LINES: usize = 12;

/// `text` with control characters other than newlines and tabs shown as escapes.
fn clean(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\n' && c != '\t' {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// `text` indented by two spaces on every line after the first.
fn indent(text: &str) -> String {
    text.trim_end().replace('\n', "\n  ")
}

/// The first [`RESULT_LINES`] lines of a tool result, saying how many were left out.
fn cut(text: &str) -> String {
    let lines: Vec<&str> = text.trim_end().lines().collect();
    if lines.len() <= RESULT_LINES {
        return lines.join("\n");
    }
    format!(
        "{}\n… ({} more lines)",
        lines[..RESULT_LINES].join("\n"),
        lines.len() - RESULT_LINES
    )
}

/// One message for `show`: `role: text`, then its tool calls and images.
fn show_message(m: &Message) -> String {
    let mut out = Vec::new();
    let text = clean(&m.text());
    match m.role() {
        Role::Tool => out.push(format!(
            "tool result {} [{}]:\n  {}",
            clean(m.name().unwrap_or("?")),
            clean(m.tool_call_id().unwrap_or("?")),
            indent(&cut(&text))
        )),
        role if !text.trim().is_empty() => out.push(format!("{role}: {}", indent(&text))),
        _ => {}
    }
    for part in m.parts() {
        match part {
            ContentPart::ToolCall(c) => out.push(format!(
                "{} called {} {} [{}]",
                m.role(),
                clean(&c.name),
                clean(&c.arguments_value().to_string()),
                clean(&c.id)
            )),
            ContentPart::Image { mime_type, .. } => {
                out.push(format!("{}: [image: {}]", m.role(), clean(mime_type)));
            }
            ContentPart::Text { .. } => {}
        }
    }
    out.join("\n")
}

/// `ollm sessions show`: every record of session `name`, readable.
pub(crate) fn show(name: &str, records: &[Record], unreadable: usize) -> String {
    let mut blocks = Vec::new();
    for r in records {
        blocks.push(match r {
            Record::Meta {
                provider, model, ..
            } => format!("session {name}: {} via {}", clean(model), clean(provider)),
            Record::Message { message } => show_message(message),
            Record::Clear => "--- /clear: the conversation above was forgotten ---".to_owned(),
            Record::Compact {
                summary,
                turns_summarised,
                turns_dropped,
                ..
            } => {
                let head = format!(
                    "--- compacted: {turns_summarised} turns summarised, {turns_dropped} dropped ---"
                );
                match summary {
                    Some(s) => format!("{head}\nsummary: {}", indent(&clean(s))),
                    None => head,
                }
            }
        });
    }
    if records.is_empty() {
        blocks.push(format!("session {name} is empty"));
    }
    if unreadable > 0 {
        blocks.push(format!("({unreadable} unreadable line(s) skipped)"));
    }
    let mut text = blocks
        .into_iter()
        .filter(|b| !b.is_empty())
        .collect::<Vec<_>>()
        .join("\n\n");
    text.push('\n');
    text
}

/// `ollm sessions export --format json`: one document.
pub(crate) fn json(name: &str, loaded: &Loaded) -> Value {
    json!({
        "session": name,
        "provider": loaded.provider,
        "model": loaded.model,
        "messages": loaded.messages,
    })
}

/// A fenced block of `text`, with a fence longer than any backtick run inside it.
fn fenced(lang: &str, text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("{fence}{lang}\n{}\n{fence}", text.trim_end())
}

/// One message as Markdown.
fn markdown_message(m: &Message) -> String {
    let mut out = Vec::new();
    let text = m.text();
    match m.role() {
        Role::Tool => {
            out.push(format!(
                "### Tool result: `{}` ({})",
                m.name().unwrap_or("?"),
                m.tool_call_id().unwrap_or("?")
            ));
            out.push(fenced("", &text));
        }
        role => {
            let mut title: Vec<char> = role.as_str().chars().collect();
            title[0] = title[0].to_ascii_uppercase();
            out.push(format!("### {}", title.into_iter().collect::<String>()));
            if !text.trim().is_empty() {
                out.push(text.trim().to_owned());
            }
        }
    }
    for part in m.parts() {
        match part {
            ContentPart::ToolCall(c) => {
                out.push(format!("Tool call `{}` ({}):", c.name, c.id));
                let args = serde_json::to_string_pretty(&c.arguments_value()).unwrap_or_default();
                out.push(fenced("json", &args));
            }
            ContentPart::Image { mime_type, .. } => out.push(format!("*[image: {mime_type}]*")),
            ContentPart::Text { .. } => {}
        }
    }
    out.join("\n\n")
}

/// `ollm sessions export --format markdown`: a transcript.
pub(crate) fn markdown(name: &str, loaded: &Loaded) -> String {
    let mut blocks = vec![format!("# Session {name}")];
    if let (Some(model), Some(provider)) = (&loaded.model, &loaded.provider) {
        blocks.push(format!("Model `{model}` via {provider}."));
    }
    blocks.extend(loaded.messages.iter().map(markdown_message));
    let mut text = blocks.join("\n\n");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use ollm_types::ToolCall;

    fn conversation() -> Vec<Record> {
        let call = ToolCall::new("c1", "read_file", json!({"path": "a.txt"})).unwrap();
        vec![
            Record::Meta {
                version: 1,
                provider: "ollama".into(),
                model: "qwen3:8b".into(),
            },
            Record::message(&Message::user("old question")),
            Record::Clear,
            Record::message(&Message::user("read a.txt\nplease")),
            Record::message(&Message::assistant_with_calls("", vec![call])),
            Record::message(&Message::tool_result("c1", "read_file", "one\ntwo\x1b[31m")),
            Record::message(&Message::assistant("It says one, two.")),
            Record::Compact {
                summary: Some("The user read a.txt.".into()),
                turns_summarised: 1,
                turns_dropped: 0,
                messages: vec![Message::user("[Summary] The user read a.txt.")],
            },
        ]
    }

    #[test]
    fn show_tells_the_whole_story_readably() {
        let expected = "\
session s: qwen3:8b via ollama

user: old question

--- /clear: the conversation above was forgotten ---

user: read a.txt
  please

assistant called read_file {\"path\":\"a.txt\"} [c1]

tool result read_file [c1]:
  one
  two\\u{1b}[31m

assistant: It says one, two.

--- compacted: 1 turns summarised, 0 dropped ---
summary: The user read a.txt.
";
        assert_eq!(show("s", &conversation(), 0), expected);
        assert_eq!(
            show("e", &[], 2),
            "session e is empty\n\n(2 unreadable line(s) skipped)\n"
        );
    }

    #[test]
    fn long_tool_results_are_cut_in_show() {
        let long: Vec<String> = (1..=20).map(|i| format!("line {i}")).collect();
        let r = Record::message(&Message::tool_result("c", "t", long.join("\n")));
        let text = show("s", &[r], 0);
        assert!(text.contains("line 12\n  … (8 more lines)"), "{text}");
        assert!(!text.contains("line 13"), "{text}");
    }

    #[test]
    fn export_is_the_conversation_as_it_resumes() {
        let loaded = crate::sessions::fold(conversation());
        let doc = json("s", &loaded);
        assert_eq!(doc["session"], "s");
        assert_eq!(doc["model"], "qwen3:8b");
        assert_eq!(doc["provider"], "ollama");
        let back: Vec<Message> = serde_json::from_value(doc["messages"].clone()).unwrap();
        assert_eq!(back, vec![Message::user("[Summary] The user read a.txt.")]);

        let before = crate::sessions::fold(conversation()[..7].to_vec());
        let md = markdown("s", &before);
        let expected = "\
# Session s

Model `qwen3:8b` via ollama.

### User

read a.txt
please

### Assistant

Tool call `read_file` (c1):

```json
{
  \"path\": \"a.txt\"
}
```

### Tool result: `read_file` (c1)

```
one
two\x1b[31m
```

### Assistant

It says one, two.
";
        assert_eq!(md, expected);
    }

    #[test]
    fn fences_outgrow_the_backticks_inside() {
        assert_eq!(fenced("", "a ``` b"), "````\na ``` b\n````");
        assert_eq!(fenced("json", "{}"), "```json\n{}\n```");
    }
}
