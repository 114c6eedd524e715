//! A `tools/call` result, as the model reads it.
//!
//! # Decisions
//! - A pure translator over the result's wire JSON (`CallToolResult` serialised), so it
//!   follows the protocol text rather than one SDK version's Rust types, with table tests.
//! - Text parts as they are, joined by newlines. Images, audio and binary resources are
//!   summarised with their MIME type and decoded size (a model cannot read base64); text
//!   resources are shown with their URI; resource links by URI.
//! - `structuredContent` is added as compact JSON unless a text part already is that same
//!   JSON, or only wraps the text in a one-field object (servers are told to send both,
//!   and the model needs it once).
//! - `isError: true` makes the text an error result (`Err`), so the model reads
//!   `Error: ...` like for any failing tool.

use serde_json::Value;

/// The result text, `Err` when the server flagged it as an error.
pub fn result_text(result: &Value) -> Result<String, String> {
    let parts = result
        .get("content")
        .and_then(Value::as_array)
        .map(|c| c.iter().map(part_text).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut text = parts.join("\n");
    if let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null()) {
        let repeated = parts
            .iter()
            .any(|p| serde_json::from_str::<Value>(p).is_ok_and(|v| &v == structured))
            || wraps(structured, &text);
        if !repeated {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&structured.to_string());
        }
    }
    if result.get("isError").and_then(Value::as_bool) == Some(true) {
        Err(text)
    } else {
        Ok(text)
    }
}

/// Whether `structured` is only `text` wrapped in a one-field object (`{"content": text}`,
/// as the filesystem server sends).
fn wraps(structured: &Value, text: &str) -> bool {
    structured
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.values().next())
        .and_then(Value::as_str)
        .is_some_and(|s| s == text)
}

fn part_text(part: &Value) -> String {
    let field = |name: &str| part.get(name).and_then(Value::as_str);
    let mime = |v: &Value| {
        v.get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or("unknown type")
            .to_owned()
    };
    match field("type") {
        Some("text") => field("text").unwrap_or_default().to_owned(),
        Some(kind @ ("image" | "audio")) => {
            let size = field("data").map_or(0, base64_len);
            format!("[{kind}: {}, {size} bytes]", mime(part))
        }
        Some("resource") => resource_text(part.get("resource").unwrap_or(&Value::Null)),
        Some("resource_link") => {
            format!(
                "[resource link: {} ({})]",
                field("uri").unwrap_or_default(),
                mime(part)
            )
        }
        _ => part.to_string(),
    }
}

fn resource_text(resource: &Value) -> String {
    let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
    if let Some(text) = resource.get("text").and_then(Value::as_str) {
        return format!("[resource: {uri}]\n{text}");
    }
    let mime = resource
        .get("mimeType")
        .and_then(Value::as_str)
        .unwrap_or("unknown type");
    let size = resource
        .get("blob")
        .and_then(Value::as_str)
        .map_or(0, base64_len);
    format!("[resource: {uri}, {mime}, {size} bytes]")
}

/// The number of bytes a base64 text decodes to.
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    trimmed.len() * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(result: Value, expected: Result<&str, &str>) {
        let expected = expected.map(str::to_owned).map_err(str::to_owned);
        assert_eq!(result_text(&result), expected, "{result}");
    }

    #[test]
    fn results() {
        check(
            json!({"content": [{"type": "text", "text": "hi"}]}),
            Ok("hi"),
        );
        check(
            json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            Ok("a\nb"),
        );
        check(json!({"content": []}), Ok(""));
        check(
            json!({"content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}]}),
            Ok("[image: image/png, 3 bytes]"),
        );
        check(
            json!({"content": [{"type": "audio", "data": "AAA=", "mimeType": "audio/wav"}]}),
            Ok("[audio: audio/wav, 2 bytes]"),
        );
        check(
            json!({"content": [{"type": "resource", "resource":
                {"uri": "file:///a", "mimeType": "application/pdf", "blob": "AAAAAAAA"}}]}),
            Ok("[resource: file:///a, application/pdf, 6 bytes]"),
        );
        check(
            json!({"content": [{"type": "resource", "resource":
                {"uri": "file:///a.txt", "text": "body"}}]}),
            Ok("[resource: file:///a.txt]\nbody"),
        );
        check(
            json!({"content": [{"type": "resource_link", "uri": "file:///b",
                "mimeType": "text/plain", "name": "b"}]}),
            Ok("[resource link: file:///b (text/plain)]"),
        );
    }

    #[test]
    fn structured_content_once() {
        check(
            json!({"content": [], "structuredContent": {"sum": 3}}),
            Ok(r#"{"sum":3}"#),
        );
        check(
            json!({"content": [{"type": "text", "text": "{\"sum\": 3}"}],
                "structuredContent": {"sum": 3}}),
            Ok(r#"{"sum": 3}"#),
        );
        check(
            json!({"content": [{"type": "text", "text": "sum"}], "structuredContent": {"sum": 3}}),
            Ok("sum\n{\"sum\":3}"),
        );
        check(
            json!({"content": [{"type": "text", "text": "a\n"}],
                "structuredContent": {"content": "a\n"}}),
            Ok("a\n"),
        );
    }

    #[test]
    fn error_results() {
        check(
            json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
            Err("no such file"),
        );
        check(
            json!({"content": [{"type": "text", "text": "fine"}], "isError": false}),
            Ok("fine"),
        );
    }
}
