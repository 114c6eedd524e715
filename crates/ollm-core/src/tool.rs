//! Tools: the trait a tool implements, typed tools with derived schemas, and the registry
//! that validates a call's arguments against the schema before the tool runs.
//!
//! SKELETON: the registry's execution path is to be completed (see the foundation issue).

use async_trait::async_trait;
use ollm_types::ToolSchema;
use serde_json::{Map, Value};

/// Why a tool did not produce a result. The turn loop turns it into the call's result
/// text (`Error: <message>`), so the model can read it and carry on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The user (or policy) refused to let it run.
    #[error("denied by the user{}", .0.as_deref().map(|r| format!(": {r}")).unwrap_or_default())]
    Denied(Option<String>),
}

/// A tool the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    /// Its name, description and parameter schema.
    fn schema(&self) -> ToolSchema;

    /// Runs it. `arguments` have been validated against the schema already. The result is
    /// normalised to text for the model: strings as they are, MCP-style `[text, artifacts]`
    /// to their text, anything else as JSON.
    ///
    /// The future is dropped when the chat is cancelled; a tool that starts processes
    /// should make them die with it (`kill_on_drop`).
    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError>;
}

/// A tool whose arguments are a Rust type; its schema is derived with schemars.
#[async_trait]
pub trait TypedTool: Send + Sync + 'static {
    /// The arguments.
    type Args: serde::de::DeserializeOwned + schemars::JsonSchema + Send;
    /// Its name.
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// Runs it.
    async fn run(&self, args: Self::Args) -> Result<Value, ToolError>;
}

pub use registry::ToolRegistry;

mod registry {
    //! SKELETON placeholder; the registry is completed with the foundation issue.
    use std::sync::Arc;

    use super::Tool;

    /// Tools by name.
    #[derive(Default, Clone)]
    pub struct ToolRegistry {
        pub(super) tools: Vec<Arc<dyn Tool>>,
    }
}
