//! The one error type of this crate: data that breaks an invariant of the vocabulary.

/// Why a value could not be built or read: it would break an invariant of the types.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TypesError {
    /// A message must have at least one part.
    #[error("a message needs at least one part")]
    EmptyMessage,
    /// A thinking level's name was not one of `off`, `on`, `low`, `medium`, `high`.
    #[error("unknown thinking level {0:?} (expected on, off, low, medium or high)")]
    UnknownThink(String),
    /// A tool message must name the call it answers.
    #[error("a tool message needs the id and name of the call it answers")]
    ToolMessageWithoutCall,
    /// Only tool messages answer calls.
    #[error("only tool messages carry a tool_call_id or name; this one is a {role} message")]
    CallFieldsOnNonTool {
        /// The role of the offending message.
        role: String,
    },
    /// Only assistant messages carry tool calls.
    #[error("only assistant messages carry tool calls; this one is a {role} message")]
    ToolCallOnNonAssistant {
        /// The role of the offending message.
        role: String,
    },
    /// Tool call arguments must be a JSON object.
    #[error("tool call arguments must be a JSON object, got {found}")]
    ArgumentsNotObject {
        /// The JSON type that was found instead.
        found: String,
    },
    /// A name (tool, model) was empty.
    #[error("{what} must not be empty")]
    EmptyName {
        /// Which name was empty.
        what: &'static str,
    },
}
