//! Tools as the model sees them: schemas offered, calls made, and the choice of whether to
//! call one.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::TypesError;

/// A tool offered to the model: a name, what it does, and a JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// The name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema (an object schema) of its arguments.
    pub parameters: Value,
}

impl ToolSchema {
    /// A tool schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        ToolSchema {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

/// The argument key under which an adapter hands on tool-call arguments it could not
/// parse as a JSON object (the raw text is its value). The call still reaches the turn
/// loop, which must answer it with an error result instead of running the tool, so the
/// model learns its arguments were malformed and can try again.
pub const INVALID_ARGUMENTS_KEY: &str = "__ollm_invalid_arguments";

/// A call the model made: which tool, with which arguments, under which id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id results refer back to (from the server, or minted when it sent none).
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, always a JSON object.
    pub arguments: Map<String, Value>,
}

impl ToolCall {
    /// A call; `arguments` must be a JSON object (`null` counts as `{}`).
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Result<Self, TypesError> {
        let arguments = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return Err(TypesError::ArgumentsNotObject {
                    found: json_type(&other).into(),
                });
            }
        };
        Ok(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
        })
    }

    /// The arguments as a JSON value.
    pub fn arguments_value(&self) -> Value {
        Value::Object(self.arguments.clone())
    }
}

/// The JSON type name of a value (`"object"`, `"string"`, ...), for error messages.
pub fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether, and which, tool the model should call.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "type", content = "name")]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// This tool, by name.
    Tool(String),
}

impl std::fmt::Display for ToolChoice {
    /// `auto`, `none`, `required`, or the tool's name.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
            ToolChoice::Required => "required",
            ToolChoice::Tool(name) => name,
        })
    }
}

impl std::str::FromStr for ToolChoice {
    type Err = TypesError;

    /// Reads `auto`, `none` or `required` (in any case); any other non-empty word names a
    /// tool. Whether that tool exists is for the caller to check against what it offers.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        Ok(match s.to_ascii_lowercase().as_str() {
            "" => {
                return Err(TypesError::EmptyName {
                    what: "a tool choice",
                });
            }
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => ToolChoice::Tool(s.to_owned()),
        })
    }
}

impl ToolChoice {
    /// Whether the choice obliges the model to call a tool (`required` or a named tool).
    pub fn requires_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Tool(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Result<ToolChoice, TypesError>) {
        assert_eq!(input.parse::<ToolChoice>(), expected, "{input:?}");
    }

    #[test]
    fn tool_choices_parse() {
        check("auto", Ok(ToolChoice::Auto));
        check("NONE", Ok(ToolChoice::None));
        check("Required", Ok(ToolChoice::Required));
        check("read_file", Ok(ToolChoice::Tool("read_file".into())));
        check(
            " ",
            Err(TypesError::EmptyName {
                what: "a tool choice",
            }),
        );
    }

    #[test]
    fn tool_choice_names_round_trip() {
        for choice in [
            ToolChoice::Auto,
            ToolChoice::None,
            ToolChoice::Required,
            ToolChoice::Tool("list_dir".into()),
        ] {
            assert_eq!(choice.to_string().parse::<ToolChoice>(), Ok(choice));
        }
    }
}
