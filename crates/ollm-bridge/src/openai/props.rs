//! What an OpenAI-compatible server can tell about a model, and what it cannot do.
//!
//! The Chat Completions API has no `show`, `ps`, `pull` or `rm`. llama.cpp's server adds
//! `GET /props` (at the server root, not under `/v1`): the window per slot
//! (`default_generation_settings.n_ctx`), the chat template's capabilities
//! (`chat_template_caps`) and the input `modalities`. [`model_info`] turns it into a
//! [`ModelInfo`] (pure, table-tested); the commands the server cannot run are refused with
//! an `Unsupported` error that says what the server does offer ([`refusal`]).
//!
//! # Decisions
//! - `tools` is reported when the template supports tools or tool calls.
//! - `thinking` is reported when the template reads a thinking switch or writes think
//!   tags (`enable_thinking`, `<think>`, `reasoning_content`): `/props` has no such flag,
//!   and the runtime drops `think` for a model whose known capabilities lack it, which is
//!   right only when the template cannot think.
//! - `vision` comes from `modalities.vision`; `audio` is kept by name.

use std::collections::BTreeMap;

use ollm_types::{Capability, ModelDetails, ModelInfo, ProviderError, ProviderErrorKind};
use serde::Deserialize;
use serde_json::Value;

/// llama.cpp's `GET /props` (the fields ollm reads).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Props {
    #[serde(default)]
    default_generation_settings: Option<GenerationSettings>,
    #[serde(default)]
    chat_template_caps: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    modalities: Option<BTreeMap<String, Value>>,
    #[serde(default)]
    chat_template: Option<String>,
    #[serde(default)]
    total_slots: Option<u32>,
}

#[derive(Debug, Default, Deserialize)]
struct GenerationSettings {
    #[serde(default)]
    n_ctx: Option<u32>,
}

/// The [`ModelInfo`] of `model` on a llama.cpp server that answered `props`.
pub(crate) fn model_info(model: &str, props: Props) -> ModelInfo {
    let flag = |map: &Option<BTreeMap<String, Value>>, key: &str| {
        map.as_ref()
            .and_then(|m| m.get(key))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    let caps = &props.chat_template_caps;
    let template = props.chat_template.as_deref().unwrap_or("");
    let mut capabilities = vec![Capability::Completion];
    if flag(caps, "supports_tools") || flag(caps, "supports_tool_calls") {
        capabilities.push(Capability::Tools);
    }
    if ["enable_thinking", "<think>", "reasoning_content"]
        .iter()
        .any(|t| template.contains(t))
    {
        capabilities.push(Capability::Thinking);
    }
    if flag(&props.modalities, "vision") {
        capabilities.push(Capability::Vision);
    }
    if flag(&props.modalities, "audio") {
        capabilities.push(Capability::Other("audio".into()));
    }
    let slots = props.total_slots.map(|n| format!("slots {n}"));
    // The per-slot window is what a prompt must fit: it is the chat's window.
    let window = props.default_generation_settings.and_then(|g| g.n_ctx);
    ModelInfo {
        name: model.to_owned(),
        context_length: window,
        window,
        capabilities,
        details: ModelDetails {
            format: Some("gguf".into()),
            ..ModelDetails::default()
        },
        parameters: slots,
        ..ModelInfo::default()
    }
}

/// The refusal of `what` (`pull`, `ps`, `rm`, `show`) on the server at `base`, saying
/// what it offers instead.
pub(crate) fn refusal(what: &str, base: &str) -> ProviderError {
    let offer = match what {
        "show" => {
            "it serves no per-model details, and it has no llama.cpp /props (the context \
             window and the template's capabilities); `ollm list` shows what GET \
             {base}/models offers"
        }
        "pull" | "rm" => {
            "it serves the models it was started with; `ollm list` shows them (GET \
             {base}/models); add or remove models where the server is started"
        }
        _ => {
            "it does not say which models are loaded; `ollm list` shows what it serves (GET \
             {base}/models) and, on llama.cpp, `ollm show MODEL` its context window and \
             capabilities (/props)"
        }
    };
    ProviderError::new(
        ProviderErrorKind::Unsupported,
        format!(
            "the openai provider does not support `{what}`: an OpenAI-compatible server has \
             no such endpoint; {}",
            offer.replace("{base}", base)
        ),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(props: Value, context: Option<u32>, caps: &[&str]) {
        let props: Props = serde_json::from_value(props.clone()).unwrap();
        let info = model_info("m", props);
        assert_eq!(info.context_length, context);
        assert_eq!(info.window, context);
        let got: Vec<&str> = info.capabilities.iter().map(Capability::as_str).collect();
        assert_eq!(got, caps);
    }

    #[test]
    fn props_to_model_info() {
        // llama-server -c 8192 -np 2 --jinja with Qwen2.5-Coder's template.
        check(
            json!({"default_generation_settings": {"n_ctx": 4096}, "total_slots": 2,
                "chat_template_caps": {"supports_tools": true, "supports_tool_calls": true,
                    "supports_system_role": true},
                "modalities": {"vision": false, "audio": false},
                "chat_template": "{%- if tools %}<tool_call>{% endif %}"}),
            Some(4096),
            &["completion", "tools"],
        );
        // A thinking template with vision.
        check(
            json!({"default_generation_settings": {"n_ctx": 32768},
                "chat_template_caps": {"supports_tools": false},
                "modalities": {"vision": true},
                "chat_template": "{% if enable_thinking %}<think>{% endif %}"}),
            Some(32768),
            &["completion", "thinking", "vision"],
        );
        // An older server: nothing but the window.
        check(
            json!({"default_generation_settings": {"n_ctx": 2048}}),
            Some(2048),
            &["completion"],
        );
    }

    #[test]
    fn refusals_say_what_the_server_offers() {
        for what in ["show", "pull", "rm", "ps"] {
            let e = refusal(what, "http://h:8080/v1");
            assert_eq!(e.kind, ProviderErrorKind::Unsupported);
            assert!(e.message.contains("does not support"), "{}", e.message);
            assert!(
                e.message.contains("http://h:8080/v1/models"),
                "{}",
                e.message
            );
        }
    }
}
