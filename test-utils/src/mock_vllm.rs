//! vLLM's own rules for a chat request, as [`crate::mock_openai::MockOpenAi::behave_as_vllm`]
//! applies them before the scripted reply.
//!
//! Built from vLLM's documentation (`docs/features/tool_calling.md`) and the error
//! texts of its OpenAI-compatible server:
//! - **Auto tool choice needs two flags.** A request with `tools` whose `tool_choice` is
//!   `auto` (or absent: vLLM reads absent as `auto` when tools are given) is refused 400
//!   `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be
//!   set` unless the server was started with both. `none`, `required` and a named
//!   function are served without them (guided decoding).
//! - **`--max-model-len`** bounds prompt plus completion: a request whose prompt tokens
//!   plus `max_tokens` (or `max_completion_tokens`) exceed it is refused 400. Older
//!   servers word it `This model's maximum context length is N tokens. However, you
//!   requested T tokens (P in the messages, C in the completion). Please reduce the
//!   length of the messages or completion.`; newer ones `... However, you requested C
//!   output tokens and your prompt contains at least P input tokens, for a total of at
//!   least T tokens. Please reduce the length of the input prompt or the number of
//!   requested output tokens. (parameter=input_tokens, value=P)`. A prompt alone at or
//!   over the limit is refused the same way.
//! - **An unknown model** is 404 `The model `NAME` does not exist.` (`NotFoundError`).
//! - **Error shapes**: older servers answer the flat `{"object": "error", "message",
//!   "type", "param", "code"}`; newer ones OpenAI's nested `{"error": {...}}`, with the
//!   same fields. `type` is the exception's name (`BadRequestError`, `NotFoundError`).
//! - `GET /v1/models` lists each model with its `max_model_len`.
//!
//! Prompt tokens are one per whitespace-separated word of the messages' text, as the
//! OpenAI mock's tokenizers count (the template's own tokens are not modelled).

use serde_json::{Value, json};

/// Which generation of vLLM's server: its error shape and wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Generation {
    /// Flat `{"object": "error", ...}` bodies, the older context-length wording.
    Legacy,
    /// Nested `{"error": {...}}` bodies, the newer wording.
    #[default]
    Current,
}

/// How the mocked vLLM server was started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VllmFlags {
    /// `--enable-auto-tool-choice`.
    pub enable_auto_tool_choice: bool,
    /// `--tool-call-parser NAME`.
    pub tool_call_parser: Option<String>,
    /// `--max-model-len N`.
    pub max_model_len: u32,
    /// Its error shape and wording.
    pub generation: Generation,
}

impl Default for VllmFlags {
    /// `vllm serve MODEL --max-model-len 4096`, nothing else.
    fn default() -> Self {
        VllmFlags {
            enable_auto_tool_choice: false,
            tool_call_parser: None,
            max_model_len: 4096,
            generation: Generation::default(),
        }
    }
}

impl VllmFlags {
    /// The same server started with `--enable-auto-tool-choice --tool-call-parser PARSER`.
    pub fn with_auto_tool_choice(mut self, parser: &str) -> Self {
        self.enable_auto_tool_choice = true;
        self.tool_call_parser = Some(parser.to_owned());
        self
    }
}

/// vLLM's refusal of `body` (status and JSON body), or `None` when it would serve it.
pub fn refusal(flags: &VllmFlags, models: &[String], body: &Value) -> Option<(u16, Value)> {
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !models.iter().any(|m| m == model) {
        let message = format!("The model `{model}` does not exist.");
        return Some((
            404,
            error(flags.generation, 404, "NotFoundError", &message, None),
        ));
    }
    if auto_tools(body) && !(flags.enable_auto_tool_choice && flags.tool_call_parser.is_some()) {
        let message = "\"auto\" tool choice requires --enable-auto-tool-choice and \
                       --tool-call-parser to be set";
        return Some((
            400,
            error(flags.generation, 400, "BadRequestError", message, None),
        ));
    }
    let prompt = prompt_tokens(body);
    let completion = body
        .get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64)
        .unwrap_or(0);
    let limit = u64::from(flags.max_model_len);
    if prompt >= limit || prompt + completion > limit {
        let message = context_message(flags.generation, limit, prompt, completion);
        let param = (flags.generation == Generation::Current).then_some("input_tokens");
        return Some((
            400,
            error(flags.generation, 400, "BadRequestError", &message, param),
        ));
    }
    None
}

/// Whether the request asks for automatic tool choice.
fn auto_tools(body: &Value) -> bool {
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let choice = body.get("tool_choice");
    has_tools && (matches!(choice, None | Some(Value::Null)) || choice == Some(&json!("auto")))
}

/// The prompt's tokens: the words of every message's text.
pub fn prompt_tokens(body: &Value) -> u64 {
    let messages = body.get("messages").and_then(Value::as_array);
    let words: usize = messages
        .into_iter()
        .flatten()
        .map(|m| match m.get("content") {
            Some(Value::String(text)) => words(text),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .map(words)
                .sum(),
            _ => 0,
        })
        .sum();
    words as u64
}

/// One token per whitespace-separated word.
fn words(text: &str) -> usize {
    text.split_whitespace().count()
}

fn context_message(generation: Generation, limit: u64, prompt: u64, completion: u64) -> String {
    let total = prompt + completion;
    match generation {
        Generation::Legacy => format!(
            "This model's maximum context length is {limit} tokens. However, you requested \
             {total} tokens ({prompt} in the messages, {completion} in the completion). Please \
             reduce the length of the messages or completion."
        ),
        Generation::Current => format!(
            "This model's maximum context length is {limit} tokens. However, you requested \
             {completion} output tokens and your prompt contains at least {prompt} input \
             tokens, for a total of at least {total} tokens. Please reduce the length of the \
             input prompt or the number of requested output tokens. (parameter=input_tokens, \
             value={prompt})"
        ),
    }
}

/// vLLM's error body in `generation`'s shape.
pub fn error(
    generation: Generation,
    code: u16,
    kind: &str,
    message: &str,
    param: Option<&str>,
) -> Value {
    let fields = json!({"message": message, "type": kind, "param": param, "code": code});
    match generation {
        Generation::Legacy => {
            let mut flat = json!({"object": "error"});
            if let (Some(flat), Some(fields)) = (flat.as_object_mut(), fields.as_object()) {
                flat.extend(fields.clone());
            }
            flat
        }
        Generation::Current => json!({ "error": fields }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(flags: &VllmFlags, body: Value, want: Option<u16>) {
        let models = vec!["m".to_owned()];
        let got = refusal(flags, &models, &body).map(|(status, _)| status);
        assert_eq!(got, want, "{body}");
    }

    #[test]
    fn auto_tool_choice_needs_both_flags_and_the_other_choices_need_none() {
        let plain = VllmFlags::default();
        let tools = json!([{"type": "function", "function": {"name": "f"}}]);
        let ask = |choice: Value| {
            let mut body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": tools});
            if !choice.is_null() {
                body["tool_choice"] = choice;
            }
            body
        };
        check(&plain, ask(Value::Null), Some(400));
        check(&plain, ask(json!("auto")), Some(400));
        check(&plain, ask(json!("none")), None);
        check(&plain, ask(json!("required")), None);
        check(
            &plain,
            ask(json!({"type": "function", "function": {"name": "f"}})),
            None,
        );
        let only_flag = VllmFlags {
            enable_auto_tool_choice: true,
            ..VllmFlags::default()
        };
        check(&only_flag, ask(json!("auto")), Some(400));
        check(
            &plain.clone().with_auto_tool_choice("hermes"),
            ask(json!("auto")),
            None,
        );
        let no_tools = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        check(&plain, no_tools, None);
    }

    #[test]
    fn the_window_bounds_prompt_plus_completion_in_both_wordings() {
        for generation in [Generation::Legacy, Generation::Current] {
            let flags = VllmFlags {
                max_model_len: 10,
                generation,
                ..VllmFlags::default()
            };
            let body = |words: usize, max: Option<u64>| {
                let mut b = json!({"model": "m", "messages": [{"role": "user", "content": "w ".repeat(words)}]});
                if let Some(max) = max {
                    b["max_tokens"] = json!(max);
                }
                b
            };
            check(&flags, body(6, Some(4)), None);
            check(&flags, body(6, Some(5)), Some(400));
            check(&flags, body(10, None), Some(400));
            let (_, refused) =
                refusal(&flags, &["m".to_owned()], &body(6, Some(5))).unwrap_or_default();
            let text = refused.to_string();
            assert!(
                text.contains("maximum context length is 10 tokens"),
                "{text}"
            );
            match generation {
                Generation::Legacy => assert_eq!(refused["object"], "error", "{text}"),
                Generation::Current => {
                    assert_eq!(refused["error"]["type"], "BadRequestError", "{text}")
                }
            }
        }
    }

    #[test]
    fn an_unknown_model_is_not_found() {
        let flags = VllmFlags::default();
        check(&flags, json!({"model": "other", "messages": []}), Some(404));
    }
}
