//! Conversation messages: a role and a non-empty list of parts.

use serde::{Deserialize, Serialize};

use crate::{ToolCall, TypesError};

/// Who said a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions that frame the conversation.
    System,
    /// The person (or program) asking.
    User,
    /// The model.
    Assistant,
    /// The result of a tool call, answering an assistant's call.
    Tool,
}

impl Role {
    /// The lowercase wire name of the role (`"system"`, `"user"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    Image {
        /// Base64 data, without a `data:` prefix.
        data: String,
        /// The MIME type, for example `image/png`.
        mime_type: String,
    },
    /// A tool call the assistant made (assistant messages only).
    ToolCall(ToolCall),
}

/// A message in a conversation.
///
/// Build one with the constructors ([`Message::user`], [`Message::tool_result`], ...) or
/// [`Message::new`]; all of them, and deserialisation, check the invariants listed in the
/// crate docs, so a `Message` in hand is always valid.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawMessage", into = "RawMessage")]
pub struct Message {
    role: Role,
    parts: Vec<ContentPart>,
    tool_call_id: Option<String>,
    name: Option<String>,
}

/// The unchecked serde shape of a [`Message`].
#[derive(Serialize, Deserialize)]
struct RawMessage {
    role: Role,
    parts: Vec<ContentPart>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

impl TryFrom<RawMessage> for Message {
    type Error = TypesError;
    fn try_from(raw: RawMessage) -> Result<Self, Self::Error> {
        Message::new(raw.role, raw.parts, raw.tool_call_id, raw.name)
    }
}

impl From<Message> for RawMessage {
    fn from(m: Message) -> Self {
        RawMessage {
            role: m.role,
            parts: m.parts,
            tool_call_id: m.tool_call_id,
            name: m.name,
        }
    }
}

impl Message {
    /// Builds a message, checking every invariant.
    pub fn new(
        role: Role,
        parts: Vec<ContentPart>,
        tool_call_id: Option<String>,
        name: Option<String>,
    ) -> Result<Self, TypesError> {
        if parts.is_empty() {
            return Err(TypesError::EmptyMessage);
        }
        match role {
            Role::Tool => {
                let has_id = tool_call_id.as_deref().is_some_and(|s| !s.is_empty());
                let has_name = name.as_deref().is_some_and(|s| !s.is_empty());
                if !(has_id && has_name) {
                    return Err(TypesError::ToolMessageWithoutCall);
                }
            }
            _ if tool_call_id.is_some() || name.is_some() => {
                return Err(TypesError::CallFieldsOnNonTool {
                    role: role.to_string(),
                });
            }
            _ => {}
        }
        if role != Role::Assistant && parts.iter().any(|p| matches!(p, ContentPart::ToolCall(_))) {
            return Err(TypesError::ToolCallOnNonAssistant {
                role: role.to_string(),
            });
        }
        Ok(Message {
            role,
            parts,
            tool_call_id,
            name,
        })
    }

    /// A system message with one text part.
    pub fn system(text: impl Into<String>) -> Self {
        Self::text_only(Role::System, text.into())
    }

    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Self::text_only(Role::User, text.into())
    }

    /// An assistant message with one text part.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self::text_only(Role::Assistant, text.into())
    }

    /// An assistant message with optional text followed by the tool calls it made.
    ///
    /// With no text and no calls, the message holds one empty text part, so that it stays
    /// valid.
    pub fn assistant_with_calls(text: impl Into<String>, calls: Vec<ToolCall>) -> Self {
        let text = text.into();
        let mut parts = Vec::with_capacity(calls.len() + 1);
        if !text.is_empty() || calls.is_empty() {
            parts.push(ContentPart::Text { text });
        }
        parts.extend(calls.into_iter().map(ContentPart::ToolCall));
        Message {
            role: Role::Assistant,
            parts,
            tool_call_id: None,
            name: None,
        }
    }

    /// A tool message answering call `call_id` of tool `name` with `content`.
    ///
    /// Empty ids or names are replaced by `"unknown"` so the message stays valid; use
    /// [`Message::new`] to have them refused instead.
    pub fn tool_result(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        let non_empty = |s: String| {
            if s.is_empty() {
                "unknown".to_owned()
            } else {
                s
            }
        };
        Message {
            role: Role::Tool,
            parts: vec![ContentPart::Text {
                text: content.into(),
            }],
            tool_call_id: Some(non_empty(call_id.into())),
            name: Some(non_empty(name.into())),
        }
    }

    /// A user message with text and images (`(base64 data, MIME type)` pairs).
    pub fn user_with_images(text: impl Into<String>, images: Vec<(String, String)>) -> Self {
        let mut parts = vec![ContentPart::Text { text: text.into() }];
        parts.extend(
            images
                .into_iter()
                .map(|(data, mime_type)| ContentPart::Image { data, mime_type }),
        );
        Message {
            role: Role::User,
            parts,
            tool_call_id: None,
            name: None,
        }
    }

    fn text_only(role: Role, text: String) -> Self {
        Message {
            role,
            parts: vec![ContentPart::Text { text }],
            tool_call_id: None,
            name: None,
        }
    }

    /// Who said it.
    pub fn role(&self) -> Role {
        self.role
    }

    /// Its parts, never empty.
    pub fn parts(&self) -> &[ContentPart] {
        &self.parts
    }

    /// For tool messages, the id of the call answered.
    pub fn tool_call_id(&self) -> Option<&str> {
        self.tool_call_id.as_deref()
    }

    /// For tool messages, the name of the tool that answered.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// All text parts, joined without separator.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.parts {
            if let ContentPart::Text { text } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls this message made (empty unless it is an assistant message).
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.parts.iter().filter_map(|p| match p {
            ContentPart::ToolCall(call) => Some(call),
            _ => None,
        })
    }

    /// The images of this message as `(base64 data, MIME type)`.
    pub fn images(&self) -> impl Iterator<Item = (&str, &str)> {
        self.parts.iter().filter_map(|p| match p {
            ContentPart::Image { data, mime_type } => Some((data.as_str(), mime_type.as_str())),
            _ => None,
        })
    }

    /// The number of characters of text, tool-call and image payload, the basis of the
    /// `ceil(chars / 4)` token estimate.
    pub fn char_count(&self) -> usize {
        self.parts
            .iter()
            .map(|p| match p {
                ContentPart::Text { text } => text.chars().count(),
                ContentPart::Image { .. } => 0,
                ContentPart::ToolCall(call) => {
                    call.name.chars().count()
                        + serde_json::Value::Object(call.arguments.clone())
                            .to_string()
                            .chars()
                            .count()
                }
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deserialising_an_empty_message_is_refused() {
        let err = serde_json::from_str::<Message>(r#"{"role":"user","parts":[]}"#).unwrap_err();
        assert!(err.to_string().contains("at least one part"), "{err}");
    }

    #[test]
    fn tool_message_needs_its_call() {
        let parts = vec![ContentPart::Text { text: "x".into() }];
        assert_eq!(
            Message::new(Role::Tool, parts.clone(), None, Some("t".into())),
            Err(TypesError::ToolMessageWithoutCall)
        );
        assert!(Message::new(Role::Tool, parts, Some("c".into()), Some("t".into())).is_ok());
    }

    #[test]
    fn round_trip_keeps_everything() {
        let call = ToolCall::new("c1", "add", serde_json::json!({"a": 1})).unwrap();
        let m = Message::assistant_with_calls("thinking aloud", vec![call]);
        let back: Message = serde_json::from_str(&serde_json::to_string(&m).unwrap()).unwrap();
        assert_eq!(m, back);
    }
}
