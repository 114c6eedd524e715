//! Messages and tool schemas (properties 11 and 12), and the tool registry's edges.

use std::sync::Arc;

use async_trait::async_trait;
use ollm_core::tool::{ToolOutcome, derive_parameters};
use ollm_core::{CoreError, History, Tool, ToolError, ToolRegistry, TypedTool};
use ollm_types::{ContentPart, Message, Role, ToolCall, ToolSchema};
use proptest::prelude::*;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::support::{block_on, config};

fn arb_call() -> impl Strategy<Value = ToolCall> {
    (
        "[a-z0-9_]{1,8}",
        "[a-z_]{1,8}",
        prop::collection::btree_map("[a-z]{1,5}", any::<i32>(), 0..4),
    )
        .prop_map(|(id, name, args)| ToolCall::new(id, name, json!(args)).unwrap())
}

pub(crate) fn arb_message() -> impl Strategy<Value = Message> {
    prop_oneof![
        ".{0,20}".prop_map(Message::user),
        ".{0,20}".prop_map(Message::system),
        (".{0,20}", prop::collection::vec(arb_call(), 0..3))
            .prop_map(|(t, calls)| Message::assistant_with_calls(t, calls)),
        ("[a-z0-9]{1,6}", "[a-z]{1,6}", ".{0,20}")
            .prop_map(|(id, name, c)| Message::tool_result(id, name, c)),
        (".{0,10}", "[A-Za-z0-9+/]{0,12}")
            .prop_map(|(t, data)| Message::user_with_images(t, vec![(data, "image/png".into())])),
    ]
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Inner {
    flag: bool,
    tags: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
struct Args {
    /// A name.
    name: String,
    count: u32,
    ratio: Option<f64>,
    inner: Inner,
}

fn arb_args() -> impl Strategy<Value = Args> {
    (
        ".{0,10}",
        any::<u32>(),
        prop::option::of(-1e6f64..1e6),
        any::<bool>(),
        prop::collection::vec("[a-z]{0,4}", 0..3),
    )
        .prop_map(|(name, count, ratio, flag, tags)| Args {
            name,
            count,
            ratio,
            inner: Inner { flag, tags },
        })
}

struct Typed;

#[async_trait]
impl TypedTool for Typed {
    type Args = Args;
    fn name(&self) -> &str {
        "typed"
    }
    fn description(&self) -> &str {
        "A typed tool."
    }
    async fn run(&self, args: Args) -> Result<Value, ToolError> {
        Ok(serde_json::to_value(args).unwrap())
    }
}

proptest! {
    #![proptest_config(config())]

    // Property 11: message round trip
    #[test]
    fn message_round_trip(msgs in prop::collection::vec(arb_message(), 0..8)) {
        for m in &msgs {
            let back: Message = serde_json::from_str(&serde_json::to_string(m).unwrap()).unwrap();
            prop_assert_eq!(&back, m);
        }
        let mut h = History::with_system("sys");
        h.extend(msgs);
        let back = History::from_json(&h.to_json().unwrap()).unwrap();
        prop_assert_eq!(back, h);
    }

    // Property 12: tool schema conversion
    #[test]
    fn tool_schema_conversion(args in arb_args()) {
        // The derived schema is an object schema, registers, accepts every value of the
        // Rust type and runs the tool with it; removing a required field is refused
        // before the tool runs.
        let params = derive_parameters::<Args>();
        prop_assert_eq!(params["type"].clone(), json!("object"));
        prop_assert!(params.get("$schema").is_none());
        let mut reg = ToolRegistry::new();
        reg.register_typed(Typed).unwrap();
        let schema = reg.schema("typed").unwrap().clone();
        prop_assert_eq!(schema.name.as_str(), "typed");
        prop_assert_eq!(&schema.parameters, &params);
        let value = serde_json::to_value(&args).unwrap();
        let call = ToolCall::new("c", "typed", value.clone()).unwrap();
        let outcome = block_on(reg.execute(&call));
        prop_assert!(!outcome.is_error, "{}", outcome.content);
        let back: Args = serde_json::from_str(&outcome.content).unwrap();
        prop_assert_eq!(back.name, args.name);
        let mut missing = value.as_object().unwrap().clone();
        missing.remove("count");
        let bad = ToolCall { id: "c".into(), name: "typed".into(), arguments: missing };
        let outcome = block_on(reg.execute(&bad));
        prop_assert!(outcome.is_error);
        prop_assert!(outcome.content.starts_with("Error: invalid arguments for typed"), "{}", outcome.content);
    }
}

mockall::mock! {
    Probe {}
    #[async_trait]
    impl Tool for Probe {
        fn schema(&self) -> ToolSchema;
        async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError>;
    }
}

fn probe(expect_runs: usize) -> MockProbe {
    let mut p = MockProbe::new();
    p.expect_schema().returning(|| {
        ToolSchema::new(
            "probe",
            "d",
            json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        )
    });
    p.expect_execute()
        .times(expect_runs)
        .returning(|args| Ok(json!(["text part", {"artifact": args}])));
    p
}

#[test]
fn invalid_arguments_never_reach_the_tool() {
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(probe(0))).unwrap();
    let call = ToolCall::new("c", "probe", json!({"n": "three"})).unwrap();
    let out = block_on(reg.execute(&call));
    assert!(out.is_error);
    assert!(out.content.contains("/n"), "{}", out.content);
}

#[test]
fn valid_arguments_run_once_and_mcp_pairs_become_text() {
    let mut reg = ToolRegistry::new();
    reg.register(Arc::new(probe(1))).unwrap();
    let call = ToolCall::new("c", "probe", json!({"n": 3})).unwrap();
    assert_eq!(block_on(reg.execute(&call)), ToolOutcome::ok("text part"));
}

#[test]
fn unknown_tool_result() {
    let reg = ToolRegistry::new();
    let call = ToolCall::new("c", "nope", json!({})).unwrap();
    let out = block_on(reg.execute(&call));
    assert_eq!(out.content, "Error: Unknown tool \"nope\"");
    assert!(out.is_error);
}

struct Fixed(ToolSchema);

#[async_trait]
impl Tool for Fixed {
    fn schema(&self) -> ToolSchema {
        self.0.clone()
    }
    async fn execute(&self, _: Map<String, Value>) -> Result<Value, ToolError> {
        Err(ToolError::Failed("disk full".into()))
    }
}

fn fixed(name: &str, params: Value) -> Arc<dyn Tool> {
    Arc::new(Fixed(ToolSchema::new(name, "d", params)))
}

#[test]
fn registration_errors_are_typed() {
    let mut reg = ToolRegistry::new();
    reg.register(fixed("a", json!({"type": "object"}))).unwrap();
    assert!(
        matches!(reg.register(fixed("a", json!({}))), Err(CoreError::DuplicateTool(n)) if n == "a")
    );
    assert!(matches!(
        reg.register(fixed("b", json!({"type": "string"}))),
        Err(CoreError::InvalidToolSchema { .. })
    ));
    assert!(matches!(
        reg.register(fixed(
            "c",
            json!({"type": "object", "properties": {"x": {"type": 12}}})
        )),
        Err(CoreError::InvalidToolSchema { .. })
    ));
    assert!(matches!(
        reg.register(fixed("d", json!("nope"))),
        Err(CoreError::InvalidToolSchema { .. })
    ));
    assert!(matches!(
        reg.register(fixed("", json!({}))),
        Err(CoreError::InvalidToolSchema { .. })
    ));
    assert_eq!(reg.names(), vec!["a"]);
}

#[test]
fn failures_become_error_text() {
    let mut reg = ToolRegistry::new();
    reg.register(fixed("f", json!({"type": "object"}))).unwrap();
    let out = block_on(reg.execute(&ToolCall::new("c", "f", json!({})).unwrap()));
    assert_eq!(out, ToolOutcome::error("disk full"));
    assert_eq!(out.content, "Error: disk full");
}

#[test]
fn assistant_message_keeps_parts_in_order() {
    let call = ToolCall::new("c", "t", json!({})).unwrap();
    let m = Message::assistant_with_calls("x", vec![call.clone()]);
    assert_eq!(m.role(), Role::Assistant);
    assert_eq!(m.parts()[1], ContentPart::ToolCall(call));
}
