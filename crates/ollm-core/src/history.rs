//! The conversation a client keeps: an optional system message and the messages after it.
//!
//! The chat loop appends to it only whole turns that keep the history valid for every
//! server: an assistant message with tool calls is always followed by exactly one tool
//! message per call, in call order. Its JSON form is the serde form of the messages, so a
//! saved conversation can be read back and continued; a file that does not parse gives a
//! typed [`CoreError::HistoryFormat`] keeping the raw text.

use ollm_types::{Message, Role};
use serde::{Deserialize, Serialize};

use crate::CoreError;
use crate::context::SUMMARY_HEADER;
use crate::context::split::{head_end, next_cut};
use crate::tokens::{WARNING_THRESHOLD_PERCENT, estimate_tokens, usage_percent};

/// A conversation: an optional system message and the messages after it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    system: Option<Message>,
    #[serde(default)]
    messages: Vec<Message>,
    /// The most messages kept (after the system message); older turns are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_messages: Option<usize>,
    /// The most estimated tokens kept; older turns are dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_tokens: Option<usize>,
}

/// Counts over a [`History`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HistoryStats {
    /// Messages after the system message.
    pub messages: usize,
    /// User messages.
    pub user: usize,
    /// Assistant messages.
    pub assistant: usize,
    /// Tool messages.
    pub tool: usize,
    /// Tool calls the assistant made.
    pub tool_calls: usize,
    /// Whether there is a system message.
    pub has_system: bool,
    /// Characters of everything, system message included.
    pub chars: usize,
    /// `ceil(chars / 4)`.
    pub estimated_tokens: usize,
}

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// A history that starts with a system message.
    pub fn with_system(text: impl Into<String>) -> Self {
        History {
            system: Some(Message::system(text)),
            ..History::default()
        }
    }

    /// The same history keeping at most `max_messages` messages and about `max_tokens`
    /// estimated tokens (`None`: no limit). Past a limit the oldest turns after the first
    /// user message are dropped whole (a call with its results), never the system
    /// message, the first user message or the newest turn.
    pub fn with_limits(mut self, max_messages: Option<usize>, max_tokens: Option<usize>) -> Self {
        self.max_messages = max_messages;
        self.max_tokens = max_tokens;
        self.enforce_limits();
        self
    }

    /// The limits set with [`History::with_limits`]: messages, tokens.
    pub fn limits(&self) -> (Option<usize>, Option<usize>) {
        (self.max_messages, self.max_tokens)
    }

    /// Drops the oldest turn after the first user message; `false` when only the newest
    /// turn is left after it.
    pub fn drop_oldest_turn(&mut self) -> bool {
        let head = head_end(&self.messages);
        let end = next_cut(&self.messages, head + 1);
        if head >= self.messages.len() || end >= self.messages.len() {
            return false;
        }
        self.messages.drain(head..end);
        true
    }

    fn over_limits(&self) -> bool {
        self.max_messages.is_some_and(|n| self.messages.len() > n)
            || self.max_tokens.is_some_and(|n| self.estimate_tokens() > n)
    }

    fn enforce_limits(&mut self) {
        while self.over_limits() && self.drop_oldest_turn() {}
    }

    /// Sets (or with `None`, removes) the system message.
    pub fn set_system(&mut self, text: Option<String>) {
        self.system = text.map(Message::system);
    }

    /// The system message.
    pub fn system(&self) -> Option<&Message> {
        self.system.as_ref()
    }

    /// The system message's text.
    pub fn system_text(&self) -> Option<String> {
        self.system.as_ref().map(Message::text)
    }

    /// Appends a message. A system message replaces the system message instead.
    /// Past a limit ([`History::with_limits`]) the oldest turns are dropped.
    pub fn push(&mut self, message: Message) {
        self.push_one(message);
        self.enforce_limits();
    }

    fn push_one(&mut self, message: Message) {
        if message.role() == Role::System {
            self.system = Some(message);
        } else {
            self.messages.push(message);
        }
    }

    /// Appends several messages (see [`History::push`]); limits apply once all are in,
    /// so a call is never separated from its results.
    pub fn extend(&mut self, messages: impl IntoIterator<Item = Message>) {
        for m in messages {
            self.push_one(m);
        }
        self.enforce_limits();
    }

    /// A one-paragraph description of the conversation: counts, size, and the latest
    /// compaction summary when there is one.
    pub fn summary(&self) -> String {
        let s = self.stats();
        let mut out = format!(
            "{} messages ({} user, {} assistant, {} tool; {} tool calls), about {} tokens",
            s.messages, s.user, s.assistant, s.tool, s.tool_calls, s.estimated_tokens
        );
        let compacted = self.messages.iter().rev().find_map(|m| {
            let text = m.text();
            text.strip_prefix(SUMMARY_HEADER)
                .map(|t| t.trim().to_owned())
        });
        if let Some(summary) = compacted {
            out.push_str("; earlier turns were compacted: ");
            out.push_str(&summary);
        }
        out
    }

    /// The messages after the system message.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// The message at `index` (after the system message).
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.messages.get(index)
    }

    /// The last `n` messages (fewer when there are fewer).
    pub fn last_n(&self, n: usize) -> &[Message] {
        let start = self.messages.len().saturating_sub(n);
        &self.messages[start..]
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.messages.last()
    }

    /// The number of messages after the system message.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether there are no messages after the system message.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Replaces `messages()[range]` with `with` (compaction; the caller keeps calls and
    /// their results together). A range past the end is clipped.
    pub fn splice(&mut self, range: std::ops::Range<usize>, with: Vec<Message>) {
        let end = range.end.min(self.messages.len());
        let start = range.start.min(end);
        self.messages.splice(start..end, with);
    }

    /// Drops the messages back to `len` (used to undo a run that added nothing usable).
    pub fn truncate(&mut self, len: usize) {
        self.messages.truncate(len);
    }

    /// Removes every message but keeps the system message.
    pub fn clear(&mut self) {
        self.messages.clear();
    }

    /// Removes everything, the system message included.
    pub fn clear_all(&mut self) {
        self.messages.clear();
        self.system = None;
    }

    /// Characters of everything the model would read, system message included.
    pub fn char_count(&self) -> usize {
        self.system
            .iter()
            .chain(&self.messages)
            .map(Message::char_count)
            .sum()
    }

    /// `ceil(chars / 4)` over the whole history.
    pub fn estimate_tokens(&self) -> usize {
        estimate_tokens(self.char_count())
    }

    /// The estimate as a percentage of `limit`.
    pub fn usage_percent(&self, limit: usize) -> f64 {
        usage_percent(self.estimate_tokens(), limit)
    }

    /// Whether the estimate is at 90% of `limit` or more.
    pub fn is_near_capacity(&self, limit: usize) -> bool {
        self.usage_percent(limit) >= WARNING_THRESHOLD_PERCENT
    }

    /// Counts by role, tool calls, characters and tokens.
    pub fn stats(&self) -> HistoryStats {
        let mut s = HistoryStats {
            messages: self.messages.len(),
            has_system: self.system.is_some(),
            chars: self.char_count(),
            estimated_tokens: self.estimate_tokens(),
            ..HistoryStats::default()
        };
        for m in &self.messages {
            match m.role() {
                Role::User => s.user += 1,
                Role::Assistant => s.assistant += 1,
                Role::Tool => s.tool += 1,
                Role::System => {}
            }
            s.tool_calls += m.tool_calls().count();
        }
        s
    }

    /// The history as JSON.
    pub fn to_json(&self) -> Result<String, CoreError> {
        serde_json::to_string_pretty(self).map_err(|e| CoreError::HistoryFormat {
            message: e.to_string(),
            raw: String::new(),
        })
    }

    /// Reads a history written by [`History::to_json`]; every message is checked.
    pub fn from_json(text: &str) -> Result<Self, CoreError> {
        serde_json::from_str(text).map_err(|e| CoreError::HistoryFormat {
            message: e.to_string(),
            raw: text.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_keeps_system_and_clear_all_does_not() {
        let mut h = History::with_system("be brief");
        h.push(Message::user("hi"));
        h.clear();
        assert!(h.is_empty());
        assert_eq!(h.system_text().as_deref(), Some("be brief"));
        h.clear_all();
        assert_eq!(h.system(), None);
    }

    #[test]
    fn last_n_saturates() {
        let mut h = History::new();
        h.push(Message::user("a"));
        h.push(Message::assistant("b"));
        assert_eq!(h.last_n(5).len(), 2);
        assert_eq!(h.last_n(1)[0].text(), "b");
        assert_eq!(h.last_n(0).len(), 0);
    }

    #[test]
    fn bad_json_keeps_raw_text() {
        match History::from_json("{not json") {
            Err(CoreError::HistoryFormat { raw, .. }) => assert_eq!(raw, "{not json"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn stats_and_capacity() {
        use ollm_types::ToolCall;
        let mut h = History::with_system("abcd");
        h.push(Message::user("abcdefgh"));
        let call = ToolCall::new("c", "t", serde_json::json!({})).unwrap_or_else(|e| panic!("{e}"));
        h.push(Message::assistant_with_calls("", vec![call]));
        h.push(Message::tool_result("c", "t", "ok"));
        let s = h.stats();
        assert_eq!(
            (s.messages, s.user, s.assistant, s.tool, s.tool_calls),
            (3, 1, 1, 1, 1)
        );
        assert!(s.has_system);
        // 4 + 8 + ("t" + "{}") 3 + 2 = 17 chars -> 5 tokens.
        assert_eq!(s.chars, 17);
        assert_eq!(h.estimate_tokens(), 5);
        assert!(h.is_near_capacity(5));
        assert!(!h.is_near_capacity(6));
        assert!((h.usage_percent(10) - 50.0).abs() < f64::EPSILON);
    }

    #[test]
    fn limits_drop_whole_old_turns() {
        use ollm_types::ToolCall;
        let call = ToolCall::new("c", "t", serde_json::json!({})).unwrap_or_else(|e| panic!("{e}"));
        let mut h = History::with_system("s").with_limits(Some(4), None);
        h.push(Message::user("first"));
        h.push(Message::assistant("a"));
        h.extend([
            Message::assistant_with_calls("", vec![call]),
            Message::tool_result("c", "t", "ok"),
        ]);
        h.push(Message::user("second"));
        // 5 messages: the oldest turn after the first user message ("a") goes.
        let texts: Vec<String> = h.messages().iter().map(Message::text).collect();
        assert_eq!(texts, ["first", "", "ok", "second"]);
        h.push(Message::assistant("b"));
        // The call and its result go together.
        let texts: Vec<String> = h.messages().iter().map(Message::text).collect();
        assert_eq!(texts, ["first", "second", "b"]);
        assert_eq!(h.system_text().as_deref(), Some("s"));
        let mut t = History::new().with_limits(None, Some(10));
        for i in 0..10 {
            t.push(Message::user(format!("message {i}")));
        }
        assert!(t.estimate_tokens() <= 10, "{}", t.estimate_tokens());
        assert_eq!(t.messages()[0].text(), "message 0");
        assert!(
            t.summary().starts_with("4 messages (4 user"),
            "{}",
            t.summary()
        );
    }

    #[test]
    fn summary_names_the_compaction() {
        let mut h = History::new();
        h.push(Message::user("hi"));
        h.push(Message::user(format!("{SUMMARY_HEADER}\nwe read a.txt")));
        assert!(
            h.summary()
                .ends_with("earlier turns were compacted: we read a.txt")
        );
    }

    #[test]
    fn pushing_a_system_message_replaces_it() {
        let mut h = History::new();
        h.push(Message::system("s"));
        assert!(h.is_empty());
        assert_eq!(h.system_text().as_deref(), Some("s"));
    }
}
