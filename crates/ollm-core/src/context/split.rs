//! Where a compaction cuts the history: pure functions over the messages after the
//! system prompt.
//!
//! # Decisions
//! - A *turn* here is a message together with the tool results that answer it: the
//!   history may be cut only before a message that is not a tool result, so a call is
//!   never separated from its results (and the history stays valid for every server).
//! - **A ReAct observation is a result too.** ReAct records a call as the model's text
//!   and its results as a user message `Observation: ...` right after it
//!   (`strategy/react.rs`); a cut before that message would leave the `Action:` without
//!   its answer, or an observation of a call the summary swallowed. So a user message
//!   that opens with `Observation:` after an assistant message is no cut point either.
//! - The head kept verbatim ends after the first user message; the tail kept verbatim is
//!   the newest turns whose cost fits the budget, and always at least the newest turn.

use std::ops::Range;

use ollm_types::{Message, Role};

/// One compaction's plan: `messages[..head]` and `messages[tail..]` stay verbatim,
/// `messages[head..tail]` is summarised (or dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// The end of the verbatim head.
    pub head: usize,
    /// The start of the verbatim tail.
    pub tail: usize,
}

impl Split {
    /// The range that is summarised.
    pub fn middle(&self) -> Range<usize> {
        self.head..self.tail.max(self.head)
    }
}

/// Whether the history may be cut just before `index` (the end always may): not before
/// a tool result, nor before a ReAct observation (see the module docs).
pub fn is_cut_point(messages: &[Message], index: usize) -> bool {
    let Some(message) = messages.get(index) else {
        return true;
    };
    let after_assistant = index
        .checked_sub(1)
        .and_then(|i| messages.get(i))
        .is_some_and(|m| m.role() == Role::Assistant);
    let observation = message.role() == Role::User
        && after_assistant
        && message.text().trim_start().starts_with(OBSERVATION);
    message.role() != Role::Tool && !observation
}

/// How ReAct's user message with a call's results opens (`strategy/react.rs`).
const OBSERVATION: &str = "Observation:";

/// The end of the verbatim head: just after the first user message (and any tool
/// results that follow it), or 0 when there is no user message.
pub fn head_end(messages: &[Message]) -> usize {
    let Some(first) = messages.iter().position(|m| m.role() == Role::User) else {
        return 0;
    };
    next_cut(messages, first + 1)
}

/// The first cut point at or after `from`.
pub fn next_cut(messages: &[Message], from: usize) -> usize {
    (from..=messages.len())
        .find(|i| is_cut_point(messages, *i))
        .unwrap_or(messages.len())
}

/// The number of turns in `messages[range]` (cut points inside it).
pub fn turns_in(messages: &[Message], range: Range<usize>) -> usize {
    range.filter(|i| is_cut_point(messages, *i)).count()
}

/// Plans a compaction: the head as [`head_end`] says, the tail the newest turns whose
/// summed `cost` is within `keep` (always at least the newest turn after the head).
pub fn plan_split(messages: &[Message], keep: usize, cost: impl Fn(&Message) -> usize) -> Split {
    let head = head_end(messages);
    let len = messages.len();
    let mut tail = len;
    let mut kept = 0;
    let mut block = 0;
    for i in (head..len).rev() {
        block += cost(&messages[i]);
        if !is_cut_point(messages, i) {
            continue;
        }
        if tail != len && kept + block > keep {
            break;
        }
        kept += block;
        block = 0;
        tail = i;
    }
    Split { head, tail }
}

#[cfg(test)]
mod tests {
    use ollm_types::ToolCall;
    use proptest::prelude::*;

    use super::*;

    fn call_turn(id: &str, n: usize) -> Vec<Message> {
        let calls: Vec<ToolCall> = (0..n)
            .map(|k| ToolCall::new(format!("{id}{k}"), "t", serde_json::json!({})).unwrap())
            .collect();
        let mut out = vec![Message::assistant_with_calls("", calls.clone())];
        out.extend(
            calls
                .iter()
                .map(|c| Message::tool_result(&c.id, "t", "result")),
        );
        out
    }

    /// A ReAct call: the model's `Action:` text, then the observation as a user message.
    fn react_turn(i: usize) -> Vec<Message> {
        vec![
            Message::assistant(format!(
                "Thought: look\nAction: t\nAction Input: {{\"n\": {i}}}"
            )),
            Message::user(format!("Observation: {{\"n\": {i}}}")),
        ]
    }

    /// One piece of a generated history.
    fn piece() -> impl Strategy<Value = u8> {
        0u8..5
    }

    fn build(pieces: &[u8]) -> Vec<Message> {
        let mut out = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            match p {
                0 => out.push(Message::user(format!("question {i}"))),
                1 => out.push(Message::assistant(format!("answer {i}"))),
                4 => out.extend(react_turn(i)),
                n => out.extend(call_turn(&format!("c{i}_"), usize::from(*n) - 1)),
            }
        }
        out
    }

    /// Every tool result follows the assistant message that made its call (or another
    /// result of it), and every ReAct observation the assistant message it answers.
    fn pairs_intact(messages: &[Message]) -> bool {
        let mut open: Vec<String> = Vec::new();
        for (i, m) in messages.iter().enumerate() {
            let observation = m.role() == Role::User && m.text().starts_with("Observation:");
            if observation && (i == 0 || messages[i - 1].role() != Role::Assistant) {
                return false;
            }
            match m.role() {
                Role::Tool => {
                    let id = m.tool_call_id().unwrap_or_default().to_owned();
                    match open.iter().position(|o| *o == id) {
                        Some(p) => {
                            open.remove(p);
                        }
                        None => return false,
                    }
                }
                _ => {
                    if !open.is_empty() {
                        return false;
                    }
                    open = m.tool_calls().map(|c| c.id.clone()).collect();
                }
            }
        }
        open.is_empty()
    }

    #[test]
    fn keeps_first_user_and_newest_turn() {
        let mut m = vec![Message::user("first")];
        m.extend(call_turn("a", 2));
        m.push(Message::assistant("x"));
        m.push(Message::user("second"));
        m.extend(call_turn("b", 1));
        let split = plan_split(&m, 0, |_| 10);
        assert_eq!(split.head, 1);
        // The newest turn is the call of `b` and its result.
        assert_eq!(split.tail, m.len() - 2);
        assert_eq!(turns_in(&m, split.middle()), 3);
    }

    #[test]
    fn never_cuts_before_a_react_observation() {
        // Issue 36: a ReAct observation is a user message, which used to be a cut point,
        // so the newest turn kept was the observation without its `Action:`.
        let mut m = vec![Message::user("first")];
        m.extend(react_turn(1));
        m.extend(react_turn(2));
        let split = plan_split(&m, 0, |_| 10);
        assert_eq!(split.head, 1);
        assert_eq!(
            split.tail,
            m.len() - 2,
            "the newest turn is the action and its observation"
        );
        assert!(!is_cut_point(&m, 2) && !is_cut_point(&m, 4));
        assert!(is_cut_point(&m, 3));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn never_splits_a_call_from_its_result(
            pieces in proptest::collection::vec(piece(), 0..40),
            keep in 0usize..200,
        ) {
            let messages = build(&pieces);
            prop_assert!(pairs_intact(&messages));
            let split = plan_split(&messages, keep, |m| m.char_count());
            prop_assert!(split.head <= split.tail || split.tail == messages.len());
            // Summarised: the middle replaced by one user message.
            let mut summarised = messages[..split.head].to_vec();
            if !split.middle().is_empty() {
                summarised.push(Message::user("summary"));
            }
            summarised.extend_from_slice(&messages[split.tail.max(split.head)..]);
            prop_assert!(pairs_intact(&summarised));
            // Dropped turn by turn from the head, down to the newest turn.
            let mut dropped = messages.clone();
            let head = head_end(&dropped);
            while next_cut(&dropped, head + 1) < dropped.len() {
                let end = next_cut(&dropped, head + 1);
                dropped.drain(head..end);
                prop_assert!(pairs_intact(&dropped));
            }
            // The first user message stays where it was.
            let first = messages.iter().position(|m| m.role() == Role::User);
            if let Some(first) = first {
                prop_assert_eq!(&summarised[first], &messages[first]);
                prop_assert_eq!(&dropped[first], &messages[first]);
            }
        }
    }
}
