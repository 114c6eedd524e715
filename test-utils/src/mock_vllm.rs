//! vLLM's own rules for a chat request, as [`crate::mock_openai::MockOpenAi::behave_as_vllm`]
//! applies them before the scripted reply, and the shape of its `/v1/models` and
//! `/tokenize` replies.
//!
//! [`Generation::Current`], the default, is vLLM 0.32.0 as recorded from the real server
//! (`test-utils/fixtures/vllm/`, made by `xtask/vllm/record_fixtures.py`; the tests below
//! replay every recorded request to these rules and compare status and body):
//! - **An unknown model** is 404 `The model `NAME` does not exist. Valid aliases: A, B.`
//!   with `param: "model"`.
//! - **Tools need the parser.** A request with `tools` whose `tool_choice` is `auto` (or
//!   absent, read as `auto`) is refused 400 `"auto" tool choice requires
//!   --enable-auto-tool-choice and --tool-call-parser to be set` unless the server has
//!   both; `required` or a named function without `--tool-call-parser` is refused 400
//!   `tool_choice="required" requires --tool-call-parser to be set` (or
//!   `tool_choice=function "NAME" ...`); only `none` is served without them.
//! - **`--max-model-len`** bounds the prompt: a prompt over it is refused 400 `This
//!   model's maximum context length is N tokens. However, your prompt contains at least
//!   N+1 input tokens, which exceeds this limit even without any output tokens. Please
//!   reduce the length of the input prompt. (parameter=input_tokens, value=N+1)` with
//!   `param: "input_tokens"` (the tokenizer stops at N+1, hence "at least"). A prompt
//!   that fits is served even when `max_tokens` would pass the window: the generation is
//!   cut to what is left and finishes `length`. `max_tokens` (or
//!   `max_completion_tokens`) over the window on its own is refused 400 `max_tokens=M
//!   cannot be greater than max_model_len=N. Please request fewer output tokens.
//!   (parameter=max_tokens, value=M)` with that parameter's name as `param`.
//! - Errors are OpenAI's nested `{"error": {"message", "type", "param", "code"}}`, with
//!   the exception's name as `type` (`BadRequestError`, `NotFoundError`), streamed
//!   requests too (refused before the stream starts, as `application/json`).
//! - `GET /v1/models` lists each model with `owned_by: "vllm"`, `root` (the model's path),
//!   `parent: null` and its `max_model_len`; `POST /tokenize` takes `{"model",
//!   "prompt"}` and answers `{"count", "max_model_len", "tokens", "token_strs"}`.
//!
//! Two older generations, from vLLM's documentation and error texts of earlier releases,
//! are kept for the adapter's tests, since servers of those releases still run:
//! - [`Generation::Reserving`]: nested bodies; a prompt plus `max_tokens` over the window
//!   is refused (`... However, you requested C output tokens and your prompt contains at
//!   least P input tokens, for a total of at least T tokens. ...
//!   (parameter=input_tokens, value=P)`); `required` and a named function are served
//!   without the tool flags (guided decoding); the 404 says only `The model `NAME` does
//!   not exist.`
//! - [`Generation::Legacy`]: the same rules with flat `{"object": "error", ...}` bodies
//!   and the older wording `... However, you requested T tokens (P in the messages, C in
//!   the completion). Please reduce the length of the messages or completion.`
//!
//! Prompt tokens are one per whitespace-separated word of the messages' text, as the
//! OpenAI mock's tokenizers count (the template's own tokens are not modelled).

use serde_json::{Value, json};

/// Which generation of vLLM's server: its error shape, wording and window rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Generation {
    /// Flat `{"object": "error", ...}` bodies, the oldest context-length wording, the
    /// prompt plus `max_tokens` bounded.
    Legacy,
    /// Nested bodies, the prompt plus `max_tokens` bounded.
    Reserving,
    /// vLLM 0.32.0 as recorded: the prompt bounded, `max_tokens` cut to fit.
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
    /// Its error shape, wording and rules.
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
        return Some((404, not_found(flags.generation, models, model)));
    }
    if let Some(message) = tools_refusal(flags, body) {
        return Some((
            400,
            error(flags.generation, 400, "BadRequestError", &message, None),
        ));
    }
    window_refusal(flags, body)
}

/// The refusal of a request that does not fit `--max-model-len`, by `flags`' rules.
fn window_refusal(flags: &VllmFlags, body: &Value) -> Option<(u16, Value)> {
    let (param, completion) = match body.get("max_completion_tokens").and_then(Value::as_u64) {
        Some(n) => ("max_completion_tokens", n),
        None => (
            "max_tokens",
            body.get("max_tokens").and_then(Value::as_u64).unwrap_or(0),
        ),
    };
    let limit = u64::from(flags.max_model_len);
    if flags.generation == Generation::Current && completion > limit {
        let message = format!(
            "{param}={completion} cannot be greater than max_model_len={limit}. Please \
             request fewer output tokens. (parameter={param}, value={completion})"
        );
        return Some((
            400,
            error(
                flags.generation,
                400,
                "BadRequestError",
                &message,
                Some(param),
            ),
        ));
    }
    let prompt = prompt_tokens(body);
    let over = match flags.generation {
        Generation::Current => prompt > limit,
        Generation::Legacy | Generation::Reserving => {
            prompt >= limit || prompt + completion > limit
        }
    };
    if over {
        let message = context_message(flags.generation, limit, prompt, completion);
        let param = (flags.generation != Generation::Legacy).then_some("input_tokens");
        return Some((
            400,
            error(flags.generation, 400, "BadRequestError", &message, param),
        ));
    }
    None
}

/// The 404 for a model not served.
fn not_found(generation: Generation, models: &[String], model: &str) -> Value {
    let (message, param) = match generation {
        Generation::Current => (
            format!(
                "The model `{model}` does not exist. Valid aliases: {}.",
                models.join(", ")
            ),
            Some("model"),
        ),
        Generation::Legacy | Generation::Reserving => {
            (format!("The model `{model}` does not exist."), None)
        }
    };
    error(generation, 404, "NotFoundError", &message, param)
}

/// Why a request with tools is refused by a server without the tool flags.
fn tools_refusal(flags: &VllmFlags, body: &Value) -> Option<String> {
    let has_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    if !has_tools {
        return None;
    }
    let auto_refused = "\"auto\" tool choice requires --enable-auto-tool-choice and \
                        --tool-call-parser to be set";
    match body.get("tool_choice") {
        None | Some(Value::Null) => {}
        Some(choice) if choice == "auto" => {}
        Some(choice) if choice == "none" => return None,
        Some(_) if flags.generation != Generation::Current => return None,
        Some(_) if flags.tool_call_parser.is_some() => return None,
        Some(choice) => {
            let described = match choice {
                Value::String(word) => format!("{word:?}"),
                named => format!(
                    "function {:?}",
                    named["function"]["name"].as_str().unwrap_or_default()
                ),
            };
            return Some(format!(
                "tool_choice={described} requires --tool-call-parser to be set"
            ));
        }
    }
    let auto_ok = flags.enable_auto_tool_choice && flags.tool_call_parser.is_some();
    (!auto_ok).then(|| auto_refused.to_owned())
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
        Generation::Reserving => format!(
            "This model's maximum context length is {limit} tokens. However, you requested \
             {completion} output tokens and your prompt contains at least {prompt} input \
             tokens, for a total of at least {total} tokens. Please reduce the length of the \
             input prompt or the number of requested output tokens. (parameter=input_tokens, \
             value={prompt})"
        ),
        Generation::Current => {
            // vLLM's tokenizer stops one token past the window, so a longer prompt is
            // counted as the window plus one, "at least".
            let counted = prompt.min(limit + 1);
            let qualifier = if counted == limit + 1 {
                "at least "
            } else {
                ""
            };
            format!(
                "This model's maximum context length is {limit} tokens. However, your prompt \
                 contains {qualifier}{counted} input tokens, which exceeds this limit even \
                 without any output tokens. Please reduce the length of the input prompt. \
                 (parameter=input_tokens, value={counted})"
            )
        }
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
        Generation::Current | Generation::Reserving => json!({ "error": fields }),
    }
}

/// One entry of vLLM's `GET /v1/models` for the model `id`.
pub fn model_entry(flags: &VllmFlags, id: &str) -> Value {
    json!({
        "id": id,
        "object": "model",
        "created": 1_795_675_495,
        "owned_by": "vllm",
        "root": format!("/models/{id}"),
        "parent": null,
        "max_model_len": flags.max_model_len,
        "permission": [],
    })
}

/// vLLM's `POST /tokenize` reply for `count` tokens.
pub fn tokenize_reply(flags: &VllmFlags, count: usize) -> Value {
    let tokens: Vec<usize> = (0..count).collect();
    json!({
        "count": count,
        "max_model_len": flags.max_model_len,
        "tokens": tokens,
        "token_strs": null,
    })
}

#[cfg(test)]
mod tests;
