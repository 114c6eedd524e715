//! Model management: `/api/tags`, `/api/show`, `/api/pull` (streamed), `/api/delete`,
//! `/api/ps`, `/api/version`. Reply parsing is split from the requests so it is testable
//! without a server.

use bytes::Bytes;
use futures::StreamExt;
use ollm_core::PullStream;
use ollm_types::{
    Capability, ModelDetails, ModelInfo, ProviderError, ProviderErrorKind, PullProgress,
    RunningModel,
};
use reqwest::Method;
use serde_json::{Value, json};

use super::errors::provider_error;
use super::wire::{PullLine, ShowResponse, TagModel, TagsResponse, VersionResponse, WireDetails};
use crate::retrying::{Attempts, Step};
use crate::{BridgeError, LineSplitter, RequestSpec, Transport};

fn details(d: Option<WireDetails>) -> ModelDetails {
    let d = d.unwrap_or_default();
    ModelDetails {
        format: d.format,
        family: d.family,
        parameter_size: d.parameter_size,
        quantization_level: d.quantization_level,
    }
}

fn model_name(m: &TagModel) -> String {
    if m.name.is_empty() {
        m.model.clone().unwrap_or_default()
    } else {
        m.name.clone()
    }
}

/// `/api/tags` -> models.
pub(super) fn parse_tags(reply: TagsResponse) -> Vec<ModelInfo> {
    reply
        .models
        .into_iter()
        .map(|m| ModelInfo {
            name: model_name(&m),
            size: m.size,
            modified_at: m.modified_at,
            digest: m.digest,
            details: details(m.details),
            ..ModelInfo::default()
        })
        .collect()
}

/// `/api/ps` -> running models.
pub(super) fn parse_ps(reply: TagsResponse) -> Vec<RunningModel> {
    reply
        .models
        .into_iter()
        .map(|m| RunningModel {
            name: model_name(&m),
            size: m.size,
            size_vram: m.size_vram,
            expires_at: m.expires_at,
            context_length: m.context_length,
        })
        .collect()
}

/// The `num_ctx` among a model's parameters (`num_ctx 16384`, one `name value` a line),
/// if its Modelfile sets one: the window the server runs it with when a request names
/// none.
fn num_ctx_parameter(parameters: &str) -> Option<u32> {
    parameters.lines().find_map(|line| {
        let mut words = line.split_whitespace();
        (words.next() == Some("num_ctx"))
            .then(|| words.next()?.parse().ok())
            .flatten()
            .filter(|n| *n > 0)
    })
}

/// `/api/show` -> model info, facts only: capabilities, `<arch>.context_length` (the
/// architecture from `general.architecture`; any `*.context_length` when that is
/// missing), parameters, a `num_ctx` parameter as the server's window, and that Ollama
/// sizes the window per request (`window_per_request`).
pub(super) fn parse_show(model: &str, reply: ShowResponse) -> ModelInfo {
    let info = reply.model_info.unwrap_or_default();
    let as_u32 = |v: &Value| v.as_u64().and_then(|n| u32::try_from(n).ok());
    let context_length = info
        .get("general.architecture")
        .and_then(Value::as_str)
        .and_then(|arch| info.get(&format!("{arch}.context_length")))
        .and_then(as_u32)
        .or_else(|| {
            info.iter()
                .find(|(k, _)| k.ends_with(".context_length"))
                .and_then(|(_, v)| as_u32(v))
        });
    ModelInfo {
        name: model.to_owned(),
        modified_at: reply.modified_at,
        details: details(reply.details),
        capabilities: reply
            .capabilities
            .into_iter()
            .map(Capability::from)
            .collect(),
        context_length,
        window: reply.parameters.as_deref().and_then(num_ctx_parameter),
        window_per_request: true,
        parameters: reply.parameters.filter(|p| !p.is_empty()),
        ..ModelInfo::default()
    }
}

fn post(path: &str, body: &Value) -> RequestSpec {
    RequestSpec::json(Method::POST, path, body)
}

pub(super) async fn show(t: &Transport, model: &str) -> Result<ModelInfo, BridgeError> {
    let reply = t
        .fetch_json(post("/api/show", &json!({"model": model})))
        .await?;
    Ok(parse_show(model, reply))
}

pub(super) async fn tags(t: &Transport) -> Result<Vec<ModelInfo>, BridgeError> {
    Ok(parse_tags(
        t.fetch_json(RequestSpec::get("/api/tags")).await?,
    ))
}

pub(super) async fn ps(t: &Transport) -> Result<Vec<RunningModel>, BridgeError> {
    Ok(parse_ps(t.fetch_json(RequestSpec::get("/api/ps")).await?))
}

pub(super) async fn version(t: &Transport) -> Result<String, BridgeError> {
    let reply: VersionResponse = t.fetch_json(RequestSpec::get("/api/version")).await?;
    Ok(reply.version)
}

pub(super) async fn delete(t: &Transport, model: &str) -> Result<(), BridgeError> {
    let spec = RequestSpec::json(Method::DELETE, "/api/delete", &json!({"model": model}));
    t.fetch(spec).await.map(|_| ())
}

/// One pull line -> a progress step, or the failure it reports (even under 200).
pub(super) fn pull_step(line: &[u8]) -> Result<Option<PullProgress>, ProviderError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let parsed: PullLine = crate::lines::parse_json(line).map_err(|e| {
        ProviderError::from(BridgeError::Decode {
            line: BridgeError::cap(&String::from_utf8_lossy(line), 200),
            message: e.to_string(),
        })
    })?;
    if let Some(error) = parsed.error {
        return Err(pull_error(error));
    }
    Ok(Some(PullProgress {
        status: parsed.status.unwrap_or_default(),
        digest: parsed.digest,
        total: parsed.total,
        completed: parsed.completed,
    }))
}

/// The error of a pull's error line. A name the registry does not have comes as a 200
/// stream ending in `{"error":"pull model manifest: file does not exist"}` (older servers:
/// `... not found`): that is `ModelNotFound`, with a hint to check the name.
fn pull_error(message: String) -> ProviderError {
    let missing = message.contains("file does not exist") || message.contains("not found");
    if !missing {
        return ProviderError::new(ProviderErrorKind::Server, message).with_retryable(false);
    }
    ProviderError::new(ProviderErrorKind::ModelNotFound, message)
        .with_retryable(false)
        .with_hint(
            "check the model name and tag: `ollm list` shows the models already here, \
             https://ollama.com/library the ones Ollama can pull",
        )
}

/// `/api/pull`, streamed: progress steps until `success`; an error line, a broken body or
/// a body ending without `success` is an error.
pub(super) fn pull(t: Transport, model: String, max_line: usize) -> PullStream {
    Box::pin(async_stream::stream! {
        let body = Bytes::from(json!({"model": model, "stream": true}).to_string());
        let spec = RequestSpec { method: Method::POST, path: "/api/pull".into(), body: Some(body), headers: Vec::new() };
        let mut attempts = Attempts::new(&t, spec);
        let response = loop {
            match attempts.next().await {
                // The stream carries progress or an error, so a retry is a progress step
                // whose status is the retry warning's text.
                Step::Retrying(warning) => yield Ok(PullProgress {
                    status: warning.message,
                    digest: None,
                    total: None,
                    completed: None,
                }),
                Step::Response(response) => break response,
                Step::Failed(e) => {
                    yield Err(provider_error(e, Some(&model)));
                    return;
                }
            }
        };
        drop(attempts);
        let mut chunks = t.body_chunks(response);
        let mut lines = LineSplitter::new(max_line);
        let mut steps = Vec::new();
        loop {
            let chunk = chunks.next().await;
            let last = match chunk {
                Some(Ok(chunk)) => {
                    lines.push(&chunk);
                    false
                }
                Some(Err(e)) => {
                    yield Err(provider_error(e, None));
                    return;
                }
                None => true,
            };
            let failure = pull_steps(&mut lines, last, &mut steps);
            for step in steps.drain(..) {
                let success = step.status == "success";
                yield Ok(step);
                if success {
                    return;
                }
            }
            if let Some(e) = failure {
                yield Err(e);
                return;
            }
            if last {
                yield Err(ProviderError::from(BridgeError::Incomplete {
                    message: format!("the pull of {model} ended without \"success\""),
                }));
                return;
            }
        }
    })
}

/// Reads the complete lines of a pull's body into `steps` (and the unfinished last line
/// too when the body ended, `last`); the first bad line's error, if any.
fn pull_steps(
    lines: &mut LineSplitter,
    last: bool,
    steps: &mut Vec<PullProgress>,
) -> Option<ProviderError> {
    loop {
        match lines.next_line() {
            Ok(Some(line)) => match pull_step(line) {
                Ok(step) => steps.extend(step),
                Err(e) => return Some(e),
            },
            Ok(None) => break,
            Err(e) => return Some(e.into()),
        }
    }
    if last {
        if let Some(line) = lines.finish() {
            match pull_step(line) {
                Ok(step) => steps.extend(step),
                Err(e) => return Some(e),
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_reads_capabilities_context_and_parameters() {
        let reply: ShowResponse = serde_json::from_value(json!({
            "parameters": "temperature 0.6\nstop \"<|im_end|>\"",
            "details": {"format": "gguf", "family": "qwen3", "parameter_size": "8.2B",
                "quantization_level": "Q4_K_M"},
            "model_info": {"general.architecture": "qwen3", "qwen3.context_length": 40960,
                "llama.context_length": 1},
            "capabilities": ["completion", "tools", "thinking"],
            "modified_at": "2025-01-01T00:00:00Z"
        }))
        .unwrap();
        let info = parse_show("qwen3:8b", reply);
        assert_eq!(info.context_length, Some(40960));
        assert!(info.has(&Capability::Thinking) && info.has(&Capability::Tools));
        assert_eq!(info.details.family.as_deref(), Some("qwen3"));
        assert!(info.parameters.unwrap().contains("temperature"));
        // Facts only: no num_ctx parameter, no window; the runtime decides.
        assert_eq!(info.window, None);
        assert!(info.window_per_request);
        let bare: ShowResponse =
            serde_json::from_value(json!({"model_info": {"x.context_length": 2048}})).unwrap();
        assert_eq!(parse_show("m", bare).context_length, Some(2048));
    }

    #[test]
    fn a_num_ctx_parameter_is_the_servers_window() {
        for (parameters, window) in [
            ("num_ctx 16384", Some(16384)),
            (
                "temperature 0.6\nnum_ctx     32768\nstop \"x\"",
                Some(32768),
            ),
            ("temperature 0.6", None),
            ("num_ctx lots", None),
            ("num_ctx 0", None),
            ("num_ctx_x 5", None),
            ("", None),
        ] {
            let reply: ShowResponse =
                serde_json::from_value(json!({ "parameters": parameters })).unwrap();
            assert_eq!(parse_show("m", reply).window, window, "{parameters:?}");
        }
    }

    #[test]
    fn pull_lines() {
        let step = pull_step(
            br#"{"status":"pulling abc","digest":"sha256:abc","total":10,"completed":4}"#,
        )
        .unwrap()
        .unwrap();
        assert_eq!((step.total, step.completed), (Some(10), Some(4)));
        let err =
            pull_step(br#"{"error":"pull model manifest: file does not exist"}"#).unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::ModelNotFound);
        assert_eq!(err.message, "pull model manifest: file does not exist");
        assert!(err.hint.is_some());
        let err = pull_step(br#"{"error":"max retries exceeded: EOF"}"#).unwrap_err();
        assert_eq!(err.kind, ProviderErrorKind::Server);
        assert_eq!(pull_step(b"  ").unwrap(), None);
        assert_eq!(
            pull_step(b"{nope").unwrap_err().kind,
            ProviderErrorKind::Protocol
        );
    }
}
