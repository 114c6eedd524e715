//! Tool-call assembly from streamed fragments (pure).
//!
//! Servers stream a call as fragments keyed by `index`, but not all the same way: Ollama's
//! `/v1` sends `index: 0` for every call of a parallel batch, continuation chunks usually
//! carry no `id`, fragments of parallel calls may alternate between their indices (the
//! OpenAI stream format allows it), several calls may come in one chunk, and calls may come
//! together with the `finish_reason`. The rule that is right on all of them:
//!
//! - a fragment with no `id` (or the `id` of the call open there) continues the call open
//!   at its `index`; without an `index`, the call opened last;
//! - a fragment at an `index` no open call has starts a new call, and so does a fragment
//!   whose `id` differs from the one of the call open at its `index` (that call is then
//!   complete);
//! - a call without an `id` gets a minted one;
//! - the arguments are parsed when the reply is complete, and the calls are emitted in the
//!   order they started.
//!
//! # Unparseable arguments
//! A call whose arguments are not a JSON object is not dropped and does not end the reply:
//! it is emitted with the arguments `{"__ollm_invalid_arguments": "<the raw text>"}`
//! ([`INVALID_ARGUMENTS_KEY`]), after a [`WarningKind::MalformedOutput`] warning. The
//! key is defined in `ollm-types` so that the turn loop can answer such a call with an
//! error result instead of running the tool; the model is told why and can try again.

use ollm_types::{ProviderEvent, ToolCall, Warning, WarningKind};
use serde_json::{Map, Value};

use super::wire::{FunctionDelta, ToolCallDelta};
use crate::repair::Offered;

/// The slot index of the legacy `function_call` (no real `index` comes that high).
const LEGACY_INDEX: u32 = u32::MAX;

pub use ollm_types::INVALID_ARGUMENTS_KEY;

/// One call being assembled.
#[derive(Debug, Default)]
struct Slot {
    index: Option<u32>,
    id: Option<String>,
    name: String,
    arguments: String,
    /// Arguments sent as a JSON object rather than a string.
    object: Option<Map<String, Value>>,
    /// A later call took its `index` (a new `id` there): nothing continues it any more.
    superseded: bool,
}

/// Assembles streamed tool-call fragments into complete [`ToolCall`]s.
#[derive(Debug)]
pub struct ToolCallAssembler {
    /// The calls of this reply, in the order they started.
    slots: Vec<Slot>,
    /// Prefix of minted ids.
    id_prefix: String,
    minted: u32,
    emitted: usize,
    offered: Offered,
}

impl ToolCallAssembler {
    /// An assembler minting ids `<prefix>_0`, `<prefix>_1`, ... for calls that come
    /// without one.
    pub fn new(id_prefix: impl Into<String>) -> Self {
        ToolCallAssembler {
            slots: Vec::new(),
            id_prefix: id_prefix.into(),
            minted: 0,
            emitted: 0,
            offered: Offered::default(),
        }
    }

    /// The same assembler bringing call names back to these offered tool names (see
    /// `repair`).
    pub fn with_offered(mut self, names: impl IntoIterator<Item = String>) -> Self {
        self.offered = Offered::new(names);
        self
    }

    /// How many calls were emitted so far.
    pub fn emitted(&self) -> usize {
        self.emitted
    }

    /// Takes one fragment (see the module docs for which call it belongs to). A flat
    /// fragment (`name` and `arguments` beside `id`, no `function`) counts the same.
    pub(crate) fn push(&mut self, delta: &ToolCallDelta<'_>) {
        let function = delta.function.as_ref();
        let name = function
            .and_then(|f| f.name.as_deref())
            .or(delta.name.as_deref());
        let arguments = function
            .and_then(|f| f.arguments.as_ref())
            .or(delta.arguments.as_ref());
        self.push_parts(delta.index, delta.id.as_deref(), name, arguments);
    }

    /// Takes a fragment of OpenAI's legacy `function_call` (one call per reply, streamed
    /// or whole): it gets a slot of its own and a minted id.
    pub(crate) fn push_legacy(&mut self, function: &FunctionDelta<'_>) {
        let (name, arguments) = (function.name.as_deref(), function.arguments.as_ref());
        self.push_parts(Some(LEGACY_INDEX), None, name, arguments);
    }

    /// Takes one fragment given by its parts (the Anthropic adapter's `tool_use` blocks
    /// and `input_json_delta`s come this way, keyed by their block index).
    pub(crate) fn push_parts(
        &mut self,
        index: Option<u32>,
        id: Option<&str>,
        name: Option<&str>,
        arguments: Option<&Value>,
    ) {
        let id = id.filter(|id| !id.is_empty());
        let at = self.slot_for(index, id);
        let slot = &mut self.slots[at];
        if slot.id.is_none() {
            slot.id = id.map(str::to_owned);
        }
        if let Some(name) = name {
            // Some servers repeat the whole name on every fragment; others stream it.
            if name != slot.name {
                slot.name.push_str(name);
            }
        }
        match arguments {
            Some(Value::String(fragment)) => slot.arguments.push_str(fragment),
            Some(Value::Object(map)) => slot.object = Some(map.clone()),
            Some(Value::Null) | None => {}
            Some(other) => slot.arguments.push_str(&other.to_string()),
        }
    }

    /// The position of the call a fragment at `index` with `id` belongs to, starting a
    /// new call where the rules say so.
    fn slot_for(&mut self, index: Option<u32>, id: Option<&str>) -> usize {
        let open = |s: &Slot| !s.superseded;
        let found = match index {
            Some(i) => self
                .slots
                .iter()
                .rposition(|s| open(s) && s.index == Some(i)),
            None => self.slots.iter().rposition(open),
        };
        if let Some(at) = found {
            match (id, self.slots[at].id.as_deref()) {
                (Some(new), Some(old)) if new != old => self.slots[at].superseded = true,
                _ => return at,
            }
        }
        self.slots.push(Slot {
            index,
            ..Slot::default()
        });
        self.slots.len() - 1
    }

    /// The reply is complete: pushes every call to `out`, in the order they started.
    pub fn close(&mut self, out: &mut Vec<ProviderEvent>) {
        for slot in std::mem::take(&mut self.slots) {
            let call = self.finish_call(slot, out);
            self.emitted += 1;
            out.push(ProviderEvent::ToolCall { call });
        }
    }

    /// A complete call: its id (minted if none came) and its parsed arguments.
    fn finish_call(&mut self, slot: Slot, out: &mut Vec<ProviderEvent>) -> ToolCall {
        let id = match slot.id {
            Some(id) => id,
            None => {
                let id = format!("{}_{}", self.id_prefix, self.minted);
                self.minted += 1;
                id
            }
        };
        let arguments = match slot.object {
            Some(map) if slot.arguments.trim().is_empty() => map,
            _ => match parse_arguments(&slot.arguments) {
                Ok(map) => map,
                Err(why) => {
                    out.push(ProviderEvent::Warning {
                        warning: Warning::new(
                            WarningKind::MalformedOutput,
                            format!(
                                "the arguments of call {id} to {:?} are not a JSON object \
                                 ({why}); the call is answered with an error",
                                slot.name
                            ),
                        ),
                    });
                    let mut map = Map::new();
                    map.insert(
                        INVALID_ARGUMENTS_KEY.to_owned(),
                        Value::String(slot.arguments),
                    );
                    map
                }
            },
        };
        ToolCall {
            id,
            name: self.offered.normalise(slot.name),
            arguments,
        }
    }
}

/// Parses complete arguments: empty text is `{}`; anything else must be a JSON object.
fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(Value::Null) => Ok(Map::new()),
        Ok(other) => Err(format!("found a JSON {}", ollm_types::json_type(&other))),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// Feeds fragments written as JSON (`{"index":..,"id":..,"function":{..}}`), one inner
    /// list per chunk, and returns the events.
    fn assemble(chunks: &[Value]) -> Vec<ProviderEvent> {
        let mut asm = ToolCallAssembler::new("m");
        let mut out = Vec::new();
        let texts: Vec<String> = chunks.iter().map(Value::to_string).collect();
        for text in &texts {
            let deltas: Vec<ToolCallDelta<'_>> = serde_json::from_str(text).unwrap();
            for d in &deltas {
                asm.push(d);
            }
        }
        asm.close(&mut out);
        out
    }

    fn call(id: &str, name: &str, args: Value) -> ProviderEvent {
        ProviderEvent::ToolCall {
            call: ToolCall::new(id, name, args).unwrap(),
        }
    }

    fn check(chunks: &[Value], expected: &[ProviderEvent]) {
        assert_eq!(assemble(chunks), expected, "chunks: {chunks:#?}");
    }

    #[test]
    fn assembly_rules() {
        // vLLM: id and name first, arguments streamed id-less under the same index.
        check(
            &[
                json!([{"index":0,"id":"a","function":{"name":"add","arguments":""}}]),
                json!([{"index":0,"function":{"arguments":"{\"x\":"}}]),
                json!([{"index":0,"function":{"arguments":"1}"}}]),
                json!([{"index":1,"id":"b","function":{"name":"neg","arguments":"{}"}}]),
            ],
            &[
                call("a", "add", json!({"x":1})),
                call("b", "neg", json!({})),
            ],
        );
        // Ollama /v1: every call of a batch has index 0, told apart by id.
        check(
            &[
                json!([{"index":0,"id":"a","function":{"name":"f","arguments":"{\"q\":1}"}}]),
                json!([{"index":0,"id":"b","function":{"name":"f","arguments":"{\"q\":2}"}}]),
            ],
            &[
                call("a", "f", json!({"q":1})),
                call("b", "f", json!({"q":2})),
            ],
        );
        // Several calls in one chunk, no ids at all: minted.
        check(
            &[json!([
                {"index":0,"function":{"name":"f","arguments":"{}"}},
                {"index":1,"function":{"name":"g","arguments":"{}"}}
            ])],
            &[call("m_0", "f", json!({})), call("m_1", "g", json!({}))],
        );
        // Index-less fragments extend the open call; a repeated id does too.
        check(
            &[
                json!([{"id":"a","function":{"name":"f","arguments":"{\"s\":"}}]),
                json!([{"id":"a","function":{"arguments":"\"x\"}"}}]),
            ],
            &[call("a", "f", json!({"s":"x"}))],
        );
        // Arguments sent as an object, and a repeated name.
        check(
            &[
                json!([{"index":0,"id":"a","function":{"name":"f","arguments":{"k":true}}}]),
                json!([{"index":0,"function":{"name":"f"}}]),
            ],
            &[call("a", "f", json!({"k":true}))],
        );
        // No arguments at all is {}.
        check(
            &[json!([{"index":0,"id":"a","function":{"name":"now"}}])],
            &[call("a", "now", json!({}))],
        );
        check(&[], &[]);
    }

    #[test]
    fn interleaved_fragments_continue_the_call_open_at_their_index() {
        // Issue 16: two calls opened, then argument fragments alternating between them.
        check(
            &[
                json!([{"index":0,"id":"call_a","function":{"name":"read","arguments":""}}]),
                json!([{"index":1,"id":"call_b","function":{"name":"list","arguments":""}}]),
                json!([{"index":0,"function":{"arguments":"{\"pa"}}]),
                json!([{"index":1,"function":{"arguments":"{\"di"}}]),
                json!([{"index":0,"function":{"arguments":"th\":\"a\"}"}}]),
                json!([{"index":1,"function":{"arguments":"r\":\".\"}"}}]),
            ],
            &[
                call("call_a", "read", json!({"path":"a"})),
                call("call_b", "list", json!({"dir":"."})),
            ],
        );
        // Both rules together: an Ollama-style batch at index 0 (new id, new call), then a
        // vLLM-style call at index 1 whose id-less fragments interleave with index 0's.
        check(
            &[
                json!([{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]),
                json!([{"index":0,"id":"b","function":{"name":"g","arguments":"{\"x\""}}]),
                json!([{"index":1,"id":"c","function":{"name":"h","arguments":"{\"y\""}}]),
                json!([{"index":0,"function":{"arguments":":1}"}}]),
                json!([{"index":1,"function":{"arguments":":2}"}}]),
            ],
            &[
                call("a", "f", json!({})),
                call("b", "g", json!({"x":1})),
                call("c", "h", json!({"y":2})),
            ],
        );
    }

    proptest! {
        /// However the fragments of N parallel calls interleave (each call's own fragments
        /// in order, only its first carrying the id and name), the N calls come out whole,
        /// in the order they started.
        #[test]
        fn any_interleaving_of_parallel_calls_assembles_each_call(
            (args, order) in proptest::collection::vec(
                proptest::collection::vec(0u32..1000, 1..5), 1..6,
            ).prop_flat_map(|args| {
                let slots: Vec<usize> = args
                    .iter()
                    .enumerate()
                    .flat_map(|(k, v)| std::iter::repeat_n(k, v.len() + 1))
                    .collect();
                (Just(args), Just(slots).prop_shuffle())
            })
        ) {
            let mut sent = vec![0usize; args.len()];
            let mut chunks = Vec::new();
            let mut started = Vec::new();
            for &k in &order {
                let n = sent[k];
                sent[k] += 1;
                let fragment = if n == 0 {
                    started.push(k);
                    json!([{"index":k,"id":format!("id{k}"),
                        "function":{"name":format!("f{k}"),"arguments":"{"}}])
                } else {
                    let last = n == args[k].len();
                    let arg = format!("\"a{}\":{}{}", n - 1, args[k][n - 1], if last { "}" } else { "," });
                    json!([{"index":k,"function":{"arguments":arg}}])
                };
                chunks.push(fragment);
            }
            let expected: Vec<ProviderEvent> = started
                .iter()
                .map(|&k| {
                    let map: Map<String, Value> = args[k]
                        .iter()
                        .enumerate()
                        .map(|(i, v)| (format!("a{i}"), json!(v)))
                        .collect();
                    call(&format!("id{k}"), &format!("f{k}"), Value::Object(map))
                })
                .collect();
            prop_assert_eq!(assemble(&chunks), expected);
        }
    }

    #[test]
    fn unparseable_arguments_become_a_marked_call_after_a_warning() {
        for raw in ["{\"x\":", "[1,2]", "\"text\""] {
            let events = assemble(&[json!([
                {"index":0,"id":"a","function":{"name":"f","arguments":raw}}
            ])]);
            assert!(
                matches!(&events[0], ProviderEvent::Warning { warning }
                    if warning.kind == WarningKind::MalformedOutput),
                "{events:?}"
            );
            assert_eq!(
                events[1],
                call("a", "f", json!({ INVALID_ARGUMENTS_KEY: raw })),
                "{raw}"
            );
        }
    }
}
