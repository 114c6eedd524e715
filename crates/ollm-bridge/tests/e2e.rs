//! End-to-end tests against a real OpenAI-compatible server: llama.cpp's `llama-server`
//! serving Qwen2.5-Coder-0.5B-Instruct (Q4_K_M) with its own chat template, started by
//! `cargo xtask e2e`.
//!
//! They read `OLLM_E2E_BASE_URL` (`http://127.0.0.1:PORT/v1`) and `OLLM_E2E_MODEL`, and
//! fail loudly when either is unset. `adapter` covers the adapter alone (streaming, usage,
//! token counts, structured output, cancellation, concurrency, errors); `constrained` and
//! `runs` drive whole chat runs with tools through `ollm-core`, at temperature 0 with a
//! fixed seed. Protocol is always asserted; answer facts only where the model reliably
//! gets them (each test says which). `constrained` and the two-step task in `runs`
//! are behind the `e2e-pending` feature (`cargo xtask e2e --pending`): each says why.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test loudly on setup errors"
)]

mod e2e {
    pub(crate) mod adapter;
    // Issue 27: the Messages API adapter against the same server's /v1/messages.
    pub(crate) mod anthropic;
    // Issue 11: a 12-prompt chat with file reads in the server's small window.
    pub(crate) mod context;
    // On Qwen2.5-Coder-0.5B the constrained reply picks the final answer with an invented
    // time ("2023-04-15T14:30:00Z") instead of calling get_time: pending with `runs`.
    #[cfg(feature = "e2e-pending")]
    pub(crate) mod constrained;
    // Whole runs through every strategy (issue 9); the two-step task is still pending.
    pub(crate) mod runs;
    // The model calls a real MCP server's read tool (issue 13): 16-19 s once the guard
    // ignored undeclared arguments and counted twins in one reply once.
    pub(crate) mod mcp;
    pub(crate) mod setup;
}
