//! How tools reach the model: natively, as ReAct text, or through a schema-constrained
//! reply. SKELETON: completed with the foundation issue.

use serde::{Deserialize, Serialize};

/// The tool-calling strategy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolMode {
    /// Native when the model reports tool support (or the provider cannot say), ReAct
    /// otherwise.
    #[default]
    Auto,
    /// The server's native tool calling.
    Native,
    /// Tools described in text, calls parsed from `Action:` lines.
    React,
    /// The reply is constrained to a JSON schema naming a tool or a final answer.
    Constrained,
}
