//! The `tool_choice` contract: a request whose `tool_choice` obliges a call (`"required"`
//! or a named function) gets a call, even from an engine that ignores the choice.
//!
//! # Decisions
//! - llama.cpp (issues #27217, #27767) and LM Studio accept `tool_choice: "required"`
//!   and answer in prose; vLLM honours it only under its grammar backend. So a reply
//!   without a call is asked for **once more under a constraint**: a JSON schema that
//!   admits only a call (the runtime's constrained strategy, without its `final_answer`
//!   branch, and only the named tool for a named choice), enforced by grammar on
//!   llama-server and guided decoding on vLLM, `format` on Ollama; where the upstream
//!   takes no schema (Anthropic's Messages API), the ReAct prompt obliging an `Action:`.
//! - The first reply is held until it ends (a reply that must be a call is not worth
//!   streaming as prose first): with a call it goes out as it was; without one the retry
//!   goes out if it made a call, else the first reply, whose `finish_reason` then says
//!   `stop` (the body has no calls; `wire_out.rs` keeps the two in agreement).
//! - Once: a model that cannot produce the call under a grammar will not on a third try,
//!   and each try costs the client a whole reply's time.
//! - **An engine that ignored the choice is remembered** per model for the server's life
//!   (as a refusal of native tools is): later requests that oblige a call for that model
//!   go to the constraint at once. Measured through serve on this machine's llama-server
//!   with Qwen2.5-Coder-0.5B: `"required"` was answered in prose every time, and that
//!   first reply (capped at 300 tokens) took most of the request's 39 s; uncapped, it ran
//!   past 2,000 tokens. Replies under the constraint are one call each, so a model that
//!   would have made several calls natively makes one per turn there.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use futures::stream::BoxStream;

use super::metrics::Metrics;
use super::through::InfoCache;
use super::wire_out::Piece;

/// Where the contract's lessons go: the metrics, and the models whose server ignores it.
pub(crate) struct Learn {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) cache: Arc<InfoCache>,
    pub(crate) model: String,
}

/// `first`, or when it makes no call, what `retry` makes (see the module docs).
pub(crate) fn kept(
    first: BoxStream<'static, Piece>,
    retry: impl FnOnce() -> BoxStream<'static, Piece> + Send + 'static,
    learn: Learn,
) -> BoxStream<'static, Piece> {
    Box::pin(async_stream::stream! {
        let held: Vec<Piece> = first.collect().await;
        if held.iter().any(|p| matches!(p, Piece::Call(_) | Piece::Error(_))) {
            for piece in held {
                yield piece;
            }
            return;
        }
        tracing::info!("serve: tool_choice obliges a call and the reply made none; asking once more under a constraint");
        learn.metrics.tool_choice_retries.fetch_add(1, Ordering::Relaxed);
        let again: Vec<Piece> = retry().collect().await;
        if again.iter().any(|p| matches!(p, Piece::Call(_))) {
            learn.cache.ignore_choice(&learn.model);
        } else {
            tracing::warn!("serve: the constrained retry made no call either; the first reply stands");
            for piece in held {
                yield piece;
            }
            return;
        }
        // The first reply's usage counts too (the client paid for it), told at the end
        // with the retry's, so a reply that is only a call begins with its mark.
        let mut paid: Vec<Piece> = held.into_iter().filter(|p| matches!(p, Piece::Usage(_))).collect();
        for piece in again {
            if matches!(piece, Piece::Finish(_)) {
                for usage in paid.drain(..) {
                    yield usage;
                }
            }
            yield piece;
        }
    })
}
