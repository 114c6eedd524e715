//! The [`Compactor`] seam and its default, [`ModelSummary`].
//!
//! # Decisions
//! - The default summary is written by the same model, through the same provider, with
//!   the fixed [`SUMMARY_PROMPT`] as the system prompt, no tools and no thinking, and
//!   the turns to summarise rendered as one plain transcript in a user message (every
//!   server and template reads that; tool-call formats differ).
//! - The summary request must itself fit the window: each message of the transcript gets
//!   an equal share of the room left (at least [`MIN_MESSAGE_CHARS`]), and the oldest
//!   entries are left out when that is still too much.
//! - An empty summary, an error or a stream without a finish is a failure: the caller
//!   then drops turns instead.

use async_trait::async_trait;
use futures::StreamExt;
use ollm_types::{
    ContentPart, GenerationOptions, Message, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderRequest, Role,
};

use crate::ProviderAdapter;

/// The system prompt of a summary request.
pub const SUMMARY_PROMPT: &str = "You summarise a conversation between a user and an \
assistant that uses tools, so the assistant can continue it without the original messages. \
Write a short summary in plain sentences: what the user asked for, the facts learned \
(file names and the contents that matter, command results), what was decided, and what is \
still to do. No preamble, at most 150 words.";

/// The first line of the message that replaces summarised turns.
pub const SUMMARY_HEADER: &str = "[Summary of the earlier conversation, which was compacted \
to fit the context window]";

/// The fewest characters a message keeps in a transcript.
pub const MIN_MESSAGE_CHARS: usize = 160;

/// Writes the summary that replaces older turns.
#[async_trait]
pub trait Compactor: Send + Sync + std::fmt::Debug {
    /// A summary of `messages` (turns of a conversation with `model`), asked of
    /// `provider` within a `window` of tokens.
    async fn summarise(
        &self,
        provider: &dyn ProviderAdapter,
        model: &str,
        messages: &[Message],
        window: usize,
    ) -> Result<String, ProviderError>;
}

/// The default [`Compactor`]: the same model, [`SUMMARY_PROMPT`].
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelSummary;

#[async_trait]
impl Compactor for ModelSummary {
    async fn summarise(
        &self,
        provider: &dyn ProviderAdapter,
        model: &str,
        messages: &[Message],
        window: usize,
    ) -> Result<String, ProviderError> {
        let request = summary_request(model, messages, window);
        let mut stream = provider.chat(request);
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event {
                ProviderEvent::TextDelta { text: t } => text.push_str(&t),
                ProviderEvent::Finish { .. } => return finished(text),
                ProviderEvent::Error { error } => return Err(error),
                _ => {}
            }
        }
        Err(ProviderError::new(
            ProviderErrorKind::IncompleteStream,
            "the summary's stream ended without a finish",
        ))
    }
}

fn finished(text: String) -> Result<String, ProviderError> {
    let text = text.trim().to_owned();
    if text.is_empty() {
        return Err(ProviderError::new(
            ProviderErrorKind::Other,
            "the model wrote an empty summary",
        ));
    }
    Ok(text)
}

/// The request that asks for a summary of `messages` within `window` tokens.
pub fn summary_request(model: &str, messages: &[Message], window: usize) -> ProviderRequest {
    // Room for the reply and the prompt, then three characters a token (conservative).
    let reply = (window / 6).clamp(64, 400);
    let room = window.saturating_sub(reply + 150 + SUMMARY_PROMPT.len() / 3);
    let mut request = ProviderRequest::new(
        model,
        vec![Message::user(format!(
            "The conversation to summarise:\n\n{}\n\nWrite the summary now.",
            transcript(messages, room * 3)
        ))],
    );
    request.system = Some(SUMMARY_PROMPT.to_owned());
    request.options = GenerationOptions {
        temperature: Some(0.2),
        max_tokens: u32::try_from(reply).ok(),
        context_length: u32::try_from(window).ok(),
        ..GenerationOptions::default()
    };
    request
}

/// `messages` as a plain transcript of at most about `max_chars` characters.
pub fn transcript(messages: &[Message], max_chars: usize) -> String {
    let per = (max_chars / messages.len().max(1)).max(MIN_MESSAGE_CHARS);
    let mut entries: Vec<String> = messages.iter().map(|m| entry(m, per)).collect();
    let mut total: usize = entries.iter().map(|e| e.chars().count() + 1).sum();
    let mut skipped = 0;
    while total > max_chars && entries.len() > 1 {
        total -= entries.remove(0).chars().count() + 1;
        skipped += 1;
    }
    if skipped > 0 {
        entries.insert(0, format!("({skipped} older messages left out)"));
    }
    entries.join("\n")
}

/// One message as a transcript line, its text cut to `max` characters.
fn entry(message: &Message, max: usize) -> String {
    let who = match message.role() {
        Role::User => "User".to_owned(),
        Role::Assistant => "Assistant".to_owned(),
        Role::System => "System".to_owned(),
        Role::Tool => format!("Result of {}", message.name().unwrap_or("a tool")),
    };
    let mut body = String::new();
    for part in message.parts() {
        match part {
            ContentPart::Text { text } => body.push_str(text),
            ContentPart::ToolCall(call) => {
                body.push_str(&format!(
                    " [calls {} {}]",
                    call.name,
                    call.arguments_value()
                ));
            }
            ContentPart::Image { .. } => body.push_str(" [image]"),
        }
    }
    let body = body.trim();
    let cut: String = body.chars().take(max).collect();
    if cut.len() < body.len() {
        format!("{who}: {cut} [...]")
    } else {
        format!("{who}: {cut}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_names_roles_and_fits() {
        let call =
            ollm_types::ToolCall::new("c1", "read_file", serde_json::json!({"path": "a"})).unwrap();
        let messages = vec![
            Message::user("read a"),
            Message::assistant_with_calls("", vec![call]),
            Message::tool_result("c1", "read_file", "x".repeat(5000)),
            Message::assistant("done"),
        ];
        let t = transcript(&messages, 2000);
        assert!(t.starts_with("User: read a\nAssistant: [calls read_file {\"path\":\"a\"}]"));
        assert!(t.contains("Result of read_file: xxx"));
        assert!(t.ends_with("Assistant: done"));
        assert!(t.chars().count() <= 2000 + 4 * 10, "{}", t.len());
    }

    #[test]
    fn the_oldest_entries_go_when_too_long() {
        let messages: Vec<Message> = (0..50)
            .map(|i| Message::user(format!("{i} {}", "y".repeat(300))))
            .collect();
        let t = transcript(&messages, 1000);
        assert!(t.starts_with("("), "{t}");
        assert!(t.contains("User: 49 "));
        assert!(!t.contains("User: 0 "));
    }

    #[test]
    fn the_request_fits_its_window() {
        let messages: Vec<Message> = (0..40)
            .map(|i| Message::user(format!("{i} {}", "z".repeat(900))))
            .collect();
        for window in [512usize, 2048, 8192] {
            let req = summary_request("m", &messages, window);
            let used = crate::tokens::estimate_text(&crate::tokens::request_text(&req));
            let reply = req.options.max_tokens.unwrap() as usize;
            assert!(used + reply <= window, "{window}: {used} + {reply}");
        }
    }
}
