//! One measured side in its own process: the floor or ollm's adapter reads `streams`
//! concurrent replies from the mock server and reports the text bytes it saw and its
//! memory (resident set before the streams, peak at the end).
//!
//! The floor is the least a correct streaming client does: a default `reqwest` client,
//! an incremental line split over the body chunks, and each line parsed into borrowed
//! typed serde structs (the text, the reasoning, the calls, the end and the usage a
//! client must read). ollm's side goes through `ProviderAdapter::chat` exactly as the
//! runtime does, adapter construction included.

use std::borrow::Cow;
use std::sync::Arc;

use futures::StreamExt;
use ollm_bridge::ollama::{OllamaConfig, OllamaProvider};
use ollm_bridge::openai::{OpenAiConfig, OpenAiProvider};
use ollm_core::ProviderAdapter;
use ollm_types::{Message, ProviderEvent, ProviderRequest};
use serde::Deserialize;
use serde::de::IgnoredAny;

use crate::bodies::Proto;

/// What a child reports: text bytes seen over all streams, resident KiB before the
/// streams started, and the peak resident KiB.
pub(crate) struct Report {
    pub(crate) text: usize,
    pub(crate) rss_before: u64,
    pub(crate) peak: u64,
}

/// Runs one side and reports.
pub(crate) fn run(ollm: bool, proto: Proto, addr: &str, streams: usize) -> Report {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    runtime.block_on(async move {
        let (text, rss_before) = if ollm {
            ollm_side(proto, addr, streams).await
        } else {
            floor_side(proto, addr, streams).await
        };
        Report {
            text,
            rss_before,
            peak: status_kib("VmHWM:"),
        }
    })
}

/// A `kB` line of `/proc/self/status`.
fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn join_all(tasks: Vec<tokio::task::JoinHandle<usize>>) -> usize {
    let mut text = 0;
    for task in tasks {
        text += task.await.unwrap_or_else(|e| panic!("stream task: {e}"));
    }
    text
}

async fn ollm_side(proto: Proto, addr: &str, streams: usize) -> (usize, u64) {
    let provider: Arc<dyn ProviderAdapter> = match proto {
        Proto::Ollama => Arc::new(
            OllamaProvider::new(OllamaConfig {
                base_url: format!("http://{addr}"),
                ..OllamaConfig::default()
            })
            .unwrap_or_else(|e| panic!("{e}")),
        ),
        Proto::OpenAi => Arc::new(
            OpenAiProvider::new(OpenAiConfig::new(format!("http://{addr}/v1")))
                .unwrap_or_else(|e| panic!("{e}")),
        ),
    };
    let rss_before = status_kib("VmRSS:");
    let tasks = (0..streams)
        .map(|_| {
            let provider = Arc::clone(&provider);
            tokio::spawn(async move {
                let mut request =
                    ProviderRequest::new("bench", vec![Message::user("Say something.")]);
                request.options.context_length = Some(4096);
                let mut events = provider.chat(request);
                let mut text = 0;
                while let Some(event) = events.next().await {
                    match event {
                        ProviderEvent::TextDelta { text: t } => text += t.len(),
                        ProviderEvent::Error { error } => panic!("ollm: {error}"),
                        _ => {}
                    }
                }
                text
            })
        })
        .collect();
    (join_all(tasks).await, rss_before)
}

async fn floor_side(proto: Proto, addr: &str, streams: usize) -> (usize, u64) {
    let client = reqwest::Client::new();
    let (url, body) = match proto {
        Proto::Ollama => (
            format!("http://{addr}/api/chat"),
            r#"{"model":"bench","messages":[{"role":"user","content":"Say something."}],"stream":true,"options":{"num_ctx":4096}}"#,
        ),
        Proto::OpenAi => (
            format!("http://{addr}/v1/chat/completions"),
            r#"{"model":"bench","messages":[{"role":"user","content":"Say something."}],"stream":true,"stream_options":{"include_usage":true}}"#,
        ),
    };
    let rss_before = status_kib("VmRSS:");
    let tasks = (0..streams)
        .map(|_| tokio::spawn(floor_stream(client.clone(), url.clone(), body, proto)))
        .collect();
    (join_all(tasks).await, rss_before)
}

/// One floor stream: send, split lines, parse each.
async fn floor_stream(
    client: reqwest::Client,
    url: String,
    body: &'static str,
    proto: Proto,
) -> usize {
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .and_then(reqwest::Response::error_for_status)
        .unwrap_or_else(|e| panic!("floor: {e}"));
    let mut chunks = response.bytes_stream();
    let mut carry: Vec<u8> = Vec::new();
    let mut seen = Seen::default();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.unwrap_or_else(|e| panic!("floor body: {e}"));
        let mut rest = &chunk[..];
        if !carry.is_empty() {
            let Some(i) = memchr::memchr(b'\n', rest) else {
                carry.extend_from_slice(rest);
                continue;
            };
            carry.extend_from_slice(&rest[..i]);
            rest = &rest[i + 1..];
            seen.line(proto, &carry);
            carry.clear();
        }
        while let Some(i) = memchr::memchr(b'\n', rest) {
            seen.line(proto, &rest[..i]);
            rest = &rest[i + 1..];
        }
        carry.extend_from_slice(rest);
        if seen.done {
            break;
        }
    }
    seen.text
}

#[derive(Default)]
struct Seen {
    text: usize,
    done: bool,
}

impl Seen {
    fn line(&mut self, proto: Proto, line: &[u8]) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match proto {
            Proto::Ollama if !line.is_empty() => {
                let line: OllamaLine<'_> =
                    serde_json::from_slice(line).unwrap_or_else(|e| panic!("floor: {e}"));
                if let Some(message) = line.message {
                    self.text += message.content.map_or(0, |c| c.len());
                    std::hint::black_box((message.thinking, message.tool_calls));
                }
                std::hint::black_box((line.done_reason, line.eval_count, line.prompt_eval_count));
                self.done |= line.done;
            }
            Proto::OpenAi => {
                let Some(data) = line.strip_prefix(b"data:") else {
                    return;
                };
                let data = data.strip_prefix(b" ").unwrap_or(data);
                if data == b"[DONE]" {
                    self.done = true;
                    return;
                }
                let chunk: SseChunk<'_> =
                    serde_json::from_slice(data).unwrap_or_else(|e| panic!("floor: {e}"));
                for choice in chunk.choices {
                    if let Some(delta) = choice.delta {
                        self.text += delta.content.map_or(0, |c| c.len());
                        std::hint::black_box((delta.reasoning_content, delta.tool_calls));
                    }
                    std::hint::black_box(choice.finish_reason);
                }
                if let Some(usage) = chunk.usage {
                    std::hint::black_box((usage.prompt_tokens, usage.completion_tokens));
                }
            }
            Proto::Ollama => {}
        }
    }
}

#[derive(Deserialize)]
struct OllamaLine<'a> {
    #[serde(borrow)]
    message: Option<OllamaMessage<'a>>,
    #[serde(default)]
    done: bool,
    #[serde(borrow)]
    done_reason: Option<Cow<'a, str>>,
    prompt_eval_count: Option<u32>,
    eval_count: Option<u32>,
}

#[derive(Deserialize)]
struct OllamaMessage<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    thinking: Option<Cow<'a, str>>,
    tool_calls: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct SseChunk<'a> {
    #[serde(borrow, default)]
    choices: Vec<SseChoice<'a>>,
    usage: Option<SseUsage>,
}

#[derive(Deserialize)]
struct SseChoice<'a> {
    #[serde(borrow)]
    delta: Option<SseDelta<'a>>,
    #[serde(borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct SseDelta<'a> {
    #[serde(borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    tool_calls: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct SseUsage {
    prompt_tokens: Option<u32>,
    completion_tokens: Option<u32>,
}
