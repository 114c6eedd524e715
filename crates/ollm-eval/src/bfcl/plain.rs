//! The plain column: one bare OpenAI-compatible request with the functions as `tools`.
//!
//! # Decisions
//!
//! - As the eval's plain loop ([`crate::eval`]'s `plain`): no system prompt, no recovery of
//!   calls written as text; only the `tool_calls` the server parsed count. One request,
//!   not streamed, over the same hand-written HTTP/1.1 `post`.
//! - A non-200 status is the question's `error` finish (no calls); a refused connection
//!   or a reply that is not JSON is a harness failure (`Err`).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};

use super::tools::{Outcome, call_from_openai};
use crate::suite::plain::post;

/// Asks `question` with `tools` offered; the calls the server parsed.
pub(crate) fn ask(
    base_url: &str,
    model: &str,
    question: &str,
    tools: &[Value],
    settings: (f64, u32, Duration),
) -> Result<Outcome> {
    let (temperature, max_tokens, timeout) = settings;
    let body = json!({"model": model, "messages": [{"role": "user", "content": question}],
        "tools": tools, "temperature": temperature, "max_tokens": max_tokens, "stream": false});
    let started = Instant::now();
    let (status, text) = match post(base_url, "/chat/completions", &body.to_string(), timeout) {
        Ok(reply) => reply,
        // A read that waited the whole timeout: the model, not the harness.
        Err(_) if started.elapsed() >= timeout => {
            return Ok(Outcome {
                finish: "timeout".into(),
                ..Outcome::default()
            });
        }
        Err(err) => return Err(err),
    };
    if status != 200 {
        return Ok(Outcome {
            text,
            finish: "error".into(),
            ..Outcome::default()
        });
    }
    let reply: Value = serde_json::from_str(&text).context("the reply is not JSON")?;
    let choice = &reply["choices"][0];
    let message = &choice["message"];
    let calls = message["tool_calls"]
        .as_array()
        .map(|calls| calls.iter().map(call_from_openai).collect())
        .unwrap_or_default();
    Ok(Outcome {
        calls,
        text: message["content"].as_str().unwrap_or_default().to_owned(),
        finish: choice["finish_reason"]
            .as_str()
            .unwrap_or("none")
            .to_owned(),
        ..Outcome::default()
    })
}
