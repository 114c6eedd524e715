//! End-to-end tests against a real vLLM on the CPU serving Qwen2.5-Coder-0.5B-Instruct
//! (converted from the same GGUF as llama-server's), started by `cargo xtask e2e --engine
//! vllm` with `--max-model-len 8192 --enable-auto-tool-choice --tool-call-parser hermes`.
//!
//! The contract is llama-server's (`OLLM_E2E_BASE_URL`, `OLLM_E2E_MODEL`; see
//! `tests/e2e.rs`) plus `OLLM_E2E_MAX_MODEL_LEN`, the window the server was started with.
//! `runs` is llama-server's module unchanged: whole chat runs through every tool strategy,
//! the auto one recovering the model's fenced-JSON call. `vllm` holds what differs on
//! this server or is its own: the whole reply beside the stream, tool choice auto,
//! required and named, a context overflow, an unknown model, the window from
//! `max_model_len` and vLLM's `/tokenize`.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test loudly on setup errors"
)]

// Whole runs through every strategy, as against llama-server; `runs` reaches `setup` as
// its sibling, here as there.
#[path = "e2e/runs.rs"]
mod runs;
#[path = "e2e/setup.rs"]
mod setup;
// What is vLLM's own.
#[path = "e2e_vllm/vllm.rs"]
mod vllm;
