//! Tools: the trait a tool implements, typed tools with derived schemas, and the registry
//! that validates a call's arguments against the schema before the tool runs.
//!
//! # Decisions
//! - Schemas are compiled into validators once, at registration, so a bad schema is a
//!   typed error when the program starts ([`CoreError::InvalidToolSchema`]), not a
//!   surprise in the middle of a chat. A tool's parameters must be an object schema.
//! - [`ToolRegistry::execute`] never fails: every call yields one [`ToolOutcome`] whose
//!   text the model reads. Unknown tools, invalid arguments and failures become
//!   `Error: ...` results so the model can correct itself and the loop carries on.
//! - An invalid-arguments result ends with the valid argument keys, their types and which
//!   are required, so a model that invented a key learns the real ones, and string values
//!   the schema types otherwise are typed before validation: the coach's `key-hint` and
//!   `typed-strings` rules ([`crate::coach`], where the evidence is), which a chat run
//!   switches through [`ToolRegistry::execute_coached`]; [`ToolRegistry::execute`] and
//!   [`ToolRegistry::validate`] apply both.
//! - Results are normalised to text: strings as they are, MCP-style `[text, artifacts]`
//!   pairs to their text, anything else as compact JSON.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use ollm_types::{ToolCall, ToolSchema};
use serde_json::{Map, Value};

use crate::CoreError;
use crate::coach::{CoachConfig, Rule};

/// Why a tool did not produce a result. The turn loop turns it into the call's result
/// text (`Error: <message>`), so the model can read it and carry on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The user (or policy) refused to let it run. A reason, when given, is the whole text
    /// (a policy denial must not claim that a user was asked).
    #[error("{}", .0.as_deref().unwrap_or("denied by the user"))]
    Denied(Option<String>),
    /// The tool did not finish in the time it was given ([`Tool::timeout`], else
    /// [`ChatConfig::tool_timeout`](crate::ChatConfig::tool_timeout)); it was stopped.
    #[error("the tool did not finish within {} s and was stopped", .0.as_secs_f64())]
    TimedOut(std::time::Duration),
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

    /// How long one call may take in a chat run; `None` (the default) leaves it to the
    /// client's [`ChatConfig::tool_timeout`](crate::ChatConfig::tool_timeout). A call past
    /// it is dropped and answered with [`ToolError::TimedOut`].
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }
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

    /// How long one call may take ([`Tool::timeout`]; default `None`: the client's).
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }
}

/// The JSON Schema schemars derives for `T`, as an object schema for tool parameters
/// (`$schema` and `title` are dropped: servers and models do not need them).
pub fn derive_parameters<T: schemars::JsonSchema>() -> Value {
    let schema = schemars::schema_for!(T);
    let mut value = schema.to_value();
    if let Value::Object(map) = &mut value {
        map.remove("$schema");
        map.remove("title");
        if !map.contains_key("type") && map.contains_key("properties") {
            map.insert("type".into(), Value::String("object".into()));
        }
    }
    value
}

/// A [`TypedTool`] seen as a [`Tool`].
struct Typed<T: TypedTool> {
    tool: T,
    parameters: Value,
    _args: PhantomData<fn() -> T::Args>,
}

#[async_trait]
impl<T: TypedTool> Tool for Typed<T> {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            self.tool.name(),
            self.tool.description(),
            self.parameters.clone(),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let args: T::Args = serde_json::from_value(Value::Object(arguments))
            .map_err(|e| ToolError::Failed(format!("invalid arguments: {e}")))?;
        self.tool.run(args).await
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        self.tool.timeout()
    }
}

/// A tool known only by its schema ([`ToolRegistry::declared`]).
struct Declared(ToolSchema);

#[async_trait]
impl Tool for Declared {
    fn schema(&self) -> ToolSchema {
        self.0.clone()
    }

    async fn execute(&self, _arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let name = &self.0.name;
        Err(ToolError::Failed(format!(
            "{name} is declared here, not run here"
        )))
    }
}

/// The result of one call, as the model will read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The result text.
    pub content: String,
    /// Whether it reports an error (unknown tool, invalid arguments, failure).
    pub is_error: bool,
}

impl ToolOutcome {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutcome {
            content: content.into(),
            is_error: false,
        }
    }

    /// An error result; the text is prefixed with `Error: `.
    pub fn error(message: impl std::fmt::Display) -> Self {
        ToolOutcome {
            content: format!("Error: {message}"),
            is_error: true,
        }
    }
}

/// The text the model reads for a tool's result value (see the module docs).
pub fn normalize_result(value: Value) -> String {
    match value {
        Value::String(s) => s,
        Value::Array(items) if items.len() == 2 && items[0].is_string() => {
            match items.into_iter().next() {
                Some(Value::String(s)) => s,
                _ => String::new(),
            }
        }
        other => other.to_string(),
    }
}

/// The text of an error result for a call to a tool that is not registered.
pub fn unknown_tool_message(name: &str) -> String {
    format!("Error: Unknown tool \"{name}\"")
}

/// The argument keys a parameter schema names, each with its type and whether it is
/// required (`path (string, required), limit (integer)`), so a model that invented a key
/// learns the real ones; `None` when the schema names none.
fn valid_arguments(schema: &Value) -> Option<String> {
    let properties = schema.get("properties")?.as_object()?;
    if properties.is_empty() {
        return None;
    }
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let described: Vec<String> = properties
        .iter()
        .map(|(key, property)| {
            let kind = match property.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(types)) => types
                    .iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" or "),
                _ => "any".to_owned(),
            };
            if required.contains(&key.as_str()) {
                format!("{key} ({kind}, required)")
            } else {
                format!("{key} ({kind})")
            }
        })
        .collect();
    Some(described.join(", "))
}

/// A registered tool with its compiled validator.
struct Entry {
    tool: Arc<dyn Tool>,
    schema: ToolSchema,
    validator: jsonschema::Validator,
}

/// Tools by name, in registration order, each with a compiled argument validator.
#[derive(Default, Clone)]
pub struct ToolRegistry {
    entries: Vec<Arc<Entry>>,
    index: HashMap<String, usize>,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool. Fails on an empty or duplicate name and on a parameter schema that
    /// is not a valid object schema.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), CoreError> {
        let schema = tool.schema();
        if schema.name.is_empty() {
            return Err(CoreError::InvalidToolSchema {
                name: schema.name,
                message: "the tool name is empty".into(),
            });
        }
        if self.index.contains_key(&schema.name) {
            return Err(CoreError::DuplicateTool(schema.name));
        }
        let invalid = |message: String| CoreError::InvalidToolSchema {
            name: schema.name.clone(),
            message,
        };
        let Value::Object(map) = &schema.parameters else {
            return Err(invalid("the parameter schema must be a JSON object".into()));
        };
        match map.get("type") {
            None => {}
            Some(Value::String(t)) if t == "object" => {}
            Some(other) => {
                return Err(invalid(format!(
                    "the parameter schema must have type \"object\", not {other}"
                )));
            }
        }
        let validator =
            jsonschema::validator_for(&schema.parameters).map_err(|e| invalid(e.to_string()))?;
        self.index.insert(schema.name.clone(), self.entries.len());
        self.entries.push(Arc::new(Entry {
            tool,
            schema,
            validator,
        }));
        Ok(())
    }

    /// A registry of tools that are only declared: offered to the model with `schemas`,
    /// run by someone else (a gateway's client, a harness). Meant for
    /// [`CallMode::HandBack`](crate::CallMode::HandBack) runs, which run nothing; run
    /// anyway, each call is answered `Error: ...` ([`ToolError::Failed`]). Fails as
    /// [`Self::register`] does.
    pub fn declared(schemas: impl IntoIterator<Item = ToolSchema>) -> Result<Self, CoreError> {
        let mut registry = Self::new();
        for schema in schemas {
            registry.register(Arc::new(Declared(schema)))?;
        }
        Ok(registry)
    }

    /// Registers a typed tool; its parameter schema is derived from `T::Args`.
    pub fn register_typed<T: TypedTool>(&mut self, tool: T) -> Result<(), CoreError> {
        let parameters = derive_parameters::<T::Args>();
        self.register(Arc::new(Typed {
            tool,
            parameters,
            _args: PhantomData,
        }))
    }

    /// The same registry with `tool` added (builder style).
    pub fn with(mut self, tool: Arc<dyn Tool>) -> Result<Self, CoreError> {
        self.register(tool)?;
        Ok(self)
    }

    /// The tool registered under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.index
            .get(name)
            .map(|&i| Arc::clone(&self.entries[i].tool))
    }

    /// Whether a tool of that name is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    /// The schema of the tool registered under `name`, as it was at registration.
    pub fn schema(&self, name: &str) -> Option<&ToolSchema> {
        self.index.get(name).map(|&i| &self.entries[i].schema)
    }

    /// Every tool's schema, in registration order.
    pub fn schemas(&self) -> Vec<ToolSchema> {
        self.entries.iter().map(|e| e.schema.clone()).collect()
    }

    /// The names, in registration order.
    pub fn names(&self) -> Vec<String> {
        self.entries.iter().map(|e| e.schema.name.clone()).collect()
    }

    /// The number of tools.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Checks `arguments` against the schema of `name`: `Ok` when valid, else the text
    /// the model reads (`Error: Unknown tool ...` or `Error: invalid arguments ...`,
    /// ending with the valid keys).
    pub fn validate(&self, name: &str, arguments: &Map<String, Value>) -> Result<(), String> {
        self.validate_coached(name, arguments, &CoachConfig::default())
    }

    /// [`Self::validate`], naming the valid keys only with the coach's `key-hint` on.
    fn validate_coached(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        coach: &CoachConfig,
    ) -> Result<(), String> {
        let Some(&i) = self.index.get(name) else {
            return Err(unknown_tool_message(name));
        };
        if let Some(raw) = arguments.get(ollm_types::INVALID_ARGUMENTS_KEY) {
            // The adapter could not parse the arguments the model wrote; the raw text is
            // shown back so the model can correct itself. Such a call never runs.
            let raw = raw.as_str().map_or_else(|| raw.to_string(), str::to_owned);
            return Err(format!(
                "Error: invalid arguments for {name}: not a JSON object: {raw}"
            ));
        }
        let entry = &self.entries[i];
        let instance = Value::Object(arguments.clone());
        let errors: Vec<String> = entry
            .validator
            .iter_errors(&instance)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() {
                    e.to_string()
                } else {
                    format!("{path}: {e}")
                }
            })
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        let valid = valid_arguments(&entry.schema.parameters)
            .filter(|_| coach.is_on(Rule::KeyHint))
            .map(|v| format!(". Valid arguments: {v}"))
            .unwrap_or_default();
        Err(format!(
            "Error: invalid arguments for {name}: {}{valid}",
            errors.join("; ")
        ))
    }

    /// Runs one call under the coach's defaults: looks the tool up, validates the
    /// arguments, runs it and normalises its result. Never fails; see [`ToolOutcome`]. A panicking tool is not caught here
    /// (the chat loop runs tools in tasks and reports panics as error results).
    pub async fn execute(&self, call: &ToolCall) -> ToolOutcome {
        self.execute_coached(call, &CoachConfig::default()).await
    }

    /// [`Self::execute`] under the coach's switches: the string values the schema types
    /// otherwise are typed (`"regex": "true"` as `true`, as Qwen2.5-Coder-1.5B writes
    /// them; `recover::typed_strings`) only with `typed-strings` on, the valid keys named
    /// in an invalid-arguments result only with `key-hint` on.
    pub async fn execute_coached(&self, call: &ToolCall, coach: &CoachConfig) -> ToolOutcome {
        if !self.contains(&call.name) {
            tracing::warn!(tool = %call.name, "the model called an unknown tool");
        }
        let arguments = match self.index.get(&call.name) {
            Some(&i) if coach.is_on(Rule::TypedStrings) => {
                crate::recover::typed_strings(&call.arguments, &self.entries[i].schema.parameters)
            }
            _ => call.arguments.clone(),
        };
        if let Err(content) = self.validate_coached(&call.name, &arguments, coach) {
            return ToolOutcome {
                content,
                is_error: true,
            };
        }
        let Some(tool) = self.get(&call.name) else {
            return ToolOutcome {
                content: unknown_tool_message(&call.name),
                is_error: true,
            };
        };
        match tool.execute(arguments).await {
            Ok(value) => ToolOutcome::ok(normalize_result(value)),
            Err(e) => ToolOutcome::error(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn normalisation() {
        assert_eq!(normalize_result(json!("plain")), "plain");
        assert_eq!(normalize_result(json!(["text", {"a": 1}])), "text");
        assert_eq!(normalize_result(json!({"a": 1})), r#"{"a":1}"#);
        assert_eq!(normalize_result(json!([1, 2])), "[1,2]");
        assert_eq!(normalize_result(json!(null)), "null");
    }

    #[tokio::test]
    async fn quoted_booleans_and_numbers_are_typed_by_the_schema_before_validation() {
        struct Search;
        #[async_trait::async_trait]
        impl Tool for Search {
            fn schema(&self) -> ToolSchema {
                ToolSchema::new(
                    "search",
                    "",
                    json!({"type": "object", "properties": {
                        "pattern": {"type": "string"},
                        "regex": {"type": ["boolean", "null"]},
                        "max": {"type": ["integer", "null"]}},
                        "required": ["pattern"], "additionalProperties": false}),
                )
            }
            async fn execute(&self, args: Map<String, Value>) -> Result<Value, ToolError> {
                Ok(Value::Object(args))
            }
        }
        let mut registry = ToolRegistry::new();
        registry.register(std::sync::Arc::new(Search)).unwrap();
        let mut typing = CoachConfig::default();
        typing.turn_on(Rule::TypedStrings);
        let run = |args: Value| {
            let call = ToolCall::new("1", "search", args).unwrap();
            let (registry, typing) = (&registry, &typing);
            async move { registry.execute_coached(&call, typing).await }
        };
        let quoted = json!({"pattern": "50", "regex": "true", "max": "50"});
        // Off by default: the quoted boolean is refused as written.
        let call = ToolCall::new("1", "search", quoted.clone()).unwrap();
        let out = registry.execute(&call).await;
        assert!(
            out.is_error && out.content.contains("/regex"),
            "{}",
            out.content
        );
        let out = run(quoted).await;
        assert!(!out.is_error, "{}", out.content);
        assert_eq!(out.content, r#"{"max":50,"pattern":"50","regex":true}"#);
        // What does not read as the type is still refused, with the reason.
        let out = run(json!({"pattern": "p", "regex": "yes"})).await;
        assert!(
            out.is_error && out.content.contains("/regex"),
            "{}",
            out.content
        );
    }

    #[tokio::test]
    async fn unparseable_arguments_never_run_even_for_an_open_schema() {
        struct Open;
        #[async_trait::async_trait]
        impl Tool for Open {
            fn schema(&self) -> ToolSchema {
                ToolSchema::new("open", "takes anything", json!({"type": "object"}))
            }
            async fn execute(&self, _: Map<String, Value>) -> Result<Value, ToolError> {
                Ok(json!("ran"))
            }
        }
        let mut registry = ToolRegistry::default();
        registry.register(std::sync::Arc::new(Open)).unwrap();
        let call = ToolCall::new(
            "c1",
            "open",
            json!({ollm_types::INVALID_ARGUMENTS_KEY: "{\"path\": "}),
        )
        .unwrap();
        let outcome = registry.execute(&call).await;
        assert!(outcome.is_error);
        assert_eq!(
            outcome.content,
            "Error: invalid arguments for open: not a JSON object: {\"path\": "
        );
    }

    #[test]
    fn invalid_arguments_name_the_valid_ones() {
        struct Read;
        #[async_trait::async_trait]
        impl Tool for Read {
            fn schema(&self) -> ToolSchema {
                ToolSchema::new(
                    "read_file",
                    "reads",
                    json!({"type": "object", "additionalProperties": false,
                        "properties": {"path": {"type": "string"},
                            "limit": {"type": ["integer", "null"]}},
                        "required": ["path"]}),
                )
            }
            async fn execute(&self, _: Map<String, Value>) -> Result<Value, ToolError> {
                Ok(json!("ran"))
            }
        }
        let mut registry = ToolRegistry::default();
        registry.register(std::sync::Arc::new(Read)).unwrap();
        // Qwen2.5-Coder-0.5B copies the schema's `type` into its arguments.
        let args = json!({"type": "object", "file": "notes.txt"});
        let plain = registry
            .validate("read_file", args.as_object().unwrap())
            .unwrap_err();
        assert!(
            !plain.contains("Valid arguments"),
            "off by default: {plain}"
        );
        let mut hinting = CoachConfig::default();
        hinting.turn_on(Rule::KeyHint);
        let error = registry
            .validate_coached("read_file", args.as_object().unwrap(), &hinting)
            .unwrap_err();
        assert!(
            error.starts_with("Error: invalid arguments for read_file: "),
            "{error}"
        );
        assert!(
            error.ends_with(". Valid arguments: limit (integer or null), path (string, required)"),
            "{error}"
        );
    }

    #[test]
    fn unknown_tool_text() {
        assert_eq!(unknown_tool_message("x"), "Error: Unknown tool \"x\"");
    }
}
