//! Where a reply's calls came from, told to the client: a call `ollm serve` read out of
//! the model's text (recovered), one it found there and only reported (flagged, under
//! the `flag` policy), or calls the coach kept from the client and answered for it
//! (coached). A leaf: the reply writers and the repair paths both use it.
//!
//! # Decisions
//! - **Every repair is visible.** Some agents refuse recovered calls as unsafe (text that
//!   only looks like a call becomes an action), so each one is marked three ways: the
//!   `x-ollm-repair` header (`recovered; format=fenced-json; calls=1`), an `ollm`
//!   extension object in the body (`{"repair": {"status", "format", "calls"}}`, top level
//!   in a whole reply, in the finish chunk of a stream), and a metric per format.
//! - The calls are the runtime's recovery (`ollm-core`'s, through the turn loop); the
//!   format is a label for people and dashboards: the format core's
//!   [`ollm_core::recover_calls`] reads the upstream's text in ([`format_of`]; `text`
//!   where the plain reading finds no call the coached one did). Calls from the ReAct
//!   fallback are `react`, from a schema-constrained retry `json-schema`.
//! - **What the coach does is a repair too** (`coached`): a reply made only of calls the
//!   conversation already has results for never reaches the client; the answer the coach
//!   asked for does (`repair.rs`). It is marked like the others, with the coach's rule in
//!   place of the format (`coached; rule=answer-after-idle; calls=1`, `{"repair":
//!   {"status": "coached", "rule": ..., "calls": [the calls kept back]}}`), and counted in
//!   its own series, `ollm_serve_coached_calls_total{rule}`.
//! - **Calls recovered from a reply the coach asked for** (a nudge turn, `repair.rs`)
//!   carry both: the format, and the rule that nudged (`recovered; format=fenced-json;
//!   calls=1; rule=can-nudge`, `"rule"` beside `"format"` in the body). A reply has one
//!   mark, so the rule must not be lost to the format.

use ollm_core::{CallFormat, Rejected, recover_calls};
use ollm_types::{ToolCall, ToolSchema};
use serde_json::{Value, json};

/// What was done with calls found in text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Read out of the text and sent as `tool_calls`.
    Recovered,
    /// Found in the text and only reported; the text went out untouched.
    Flagged,
    /// Kept from the client by the coach, which asked the model for its answer instead.
    Coached,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Recovered => "recovered",
            Status::Flagged => "flagged",
            Status::Coached => "coached",
        }
    }

    /// The name of what [`Provenance::format`] holds: the markup, or the coach's rule.
    fn label(self) -> &'static str {
        match self {
            Status::Recovered | Status::Flagged => "format",
            Status::Coached => "rule",
        }
    }
}

/// The calls of one reply that came from its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Provenance {
    pub(crate) status: Status,
    /// The markup they were written in ([`format_of`]); for `coached`, the coach's rule.
    pub(crate) format: &'static str,
    pub(crate) calls: Vec<ToolCall>,
    /// The coach's rule that asked for the reply these calls came from, when the status
    /// is not `coached` itself (which names its rule in `format`).
    pub(crate) nudged: Option<&'static str>,
}

impl Provenance {
    /// The `x-ollm-repair` header's value.
    pub(crate) fn header(&self) -> String {
        let mut header = format!(
            "{}; {}={}; calls={}",
            self.status.as_str(),
            self.status.label(),
            self.format,
            self.calls.len()
        );
        if let Some(rule) = self.nudged {
            header.push_str("; rule=");
            header.push_str(rule);
        }
        header
    }

    /// The body's `ollm` extension object.
    pub(crate) fn extension(&self) -> Value {
        let calls: Vec<Value> = self.calls.iter().map(call_json).collect();
        let mut repair = json!({"status": self.status.as_str(), "calls": calls});
        repair[self.status.label()] = Value::from(self.format);
        if let Some(rule) = self.nudged {
            repair["rule"] = Value::from(rule);
        }
        json!({ "repair": repair })
    }
}

/// A call in OpenAI's `tool_calls` shape (arguments as a JSON string).
pub(crate) fn call_json(call: &ToolCall) -> Value {
    json!({
        "id": call.id, "type": "function",
        "function": {"name": call.name, "arguments": call.arguments_value().to_string()},
    })
}

/// The markup a reply's calls were written in: the format of the first call (or
/// unreadable call markup) core's recovery reads in `text` for the declared `tools`.
pub(crate) fn format_of(text: &str, tools: &[ToolSchema]) -> &'static str {
    let read = recover_calls(text, tools);
    let malformed = || {
        read.rejected.iter().find_map(|r| match r {
            Rejected::Malformed { format, .. } => Some(*format),
            _ => None,
        })
    };
    (read.calls.first().map(|c| c.format))
        .or_else(malformed)
        .map_or("text", CallFormat::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_format_is_named_after_the_markup_in_the_text() {
        let tools = [ToolSchema::new("f", "", json!({"type": "object"}))];
        let check = |text: &str, want: &str| assert_eq!(format_of(text, &tools), want, "{text:?}");
        check(
            "```json\n{\"name\": \"f\", \"arguments\": {}}\n```",
            "fenced-json",
        );
        check("<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "hermes");
        check(
            "<think>maybe ```x```</think><tool_call>{\"name\": \"f\"}</tool_call>",
            "hermes",
        );
        check(
            "<function=f>\n<parameter=a>1</parameter>\n</function>",
            "qwen3-xml",
        );
        check("[TOOL_CALLS][{\"name\": \"f\"}]", "mistral");
        check("  {\"name\": \"f\", \"arguments\": {}}", "json");
        check("[{\"name\": \"f\"}]", "json");
        check("[f(a=1)]", "pythonic");
        check("nothing recognisable", "text");
    }

    #[test]
    fn the_header_counts_the_calls_and_the_body_lists_them() {
        let call = ToolCall::new("c1", "read_file", json!({"path": "a"})).expect("object");
        let p = Provenance {
            status: Status::Flagged,
            format: "fenced-json",
            calls: vec![call],
            nudged: None,
        };
        assert_eq!(p.header(), "flagged; format=fenced-json; calls=1");
        let body = p.extension();
        assert_eq!(body["repair"]["status"], "flagged");
        assert_eq!(body["repair"]["calls"][0]["function"]["name"], "read_file");
        assert_eq!(
            body["repair"]["calls"][0]["function"]["arguments"],
            "{\"path\":\"a\"}"
        );
        let coached = Provenance {
            status: Status::Coached,
            format: "answer-after-idle",
            ..p
        };
        assert_eq!(coached.header(), "coached; rule=answer-after-idle; calls=1");
        let body = coached.extension();
        assert_eq!(body["repair"]["rule"], "answer-after-idle");
        assert!(body["repair"].get("format").is_none(), "{body}");
        let nudged = Provenance {
            status: Status::Recovered,
            format: "fenced-json",
            nudged: Some("can-nudge"),
            ..coached
        };
        assert_eq!(
            nudged.header(),
            "recovered; format=fenced-json; calls=1; rule=can-nudge"
        );
        let body = nudged.extension();
        assert_eq!(body["repair"]["format"], "fenced-json", "{body}");
        assert_eq!(body["repair"]["rule"], "can-nudge", "{body}");
    }
}
