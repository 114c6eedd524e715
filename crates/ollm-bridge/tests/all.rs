//! The bridge's integration tests, one binary with a module per area.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test loudly on setup errors"
)]

mod anthropic;
mod compliance;
mod ollama;
mod openai;
mod transport;
