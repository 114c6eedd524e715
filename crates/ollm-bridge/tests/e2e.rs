//! End-to-end tests against a real OpenAI-compatible server (llama.cpp's `llama-server`
//! with a 270M base model, started by `cargo xtask e2e`).
//!
//! They read `OLLM_E2E_BASE_URL` (`http://127.0.0.1:PORT/v1`) and `OLLM_E2E_MODEL`, and
//! fail loudly when either is unset. They assert protocol behaviour, not answer quality:
//! a 270M base model answers poorly.
#![cfg(feature = "e2e")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test loudly on setup errors"
)]

mod e2e {
    pub(crate) mod adapter;
    pub(crate) mod constrained;
    pub(crate) mod setup;
}
