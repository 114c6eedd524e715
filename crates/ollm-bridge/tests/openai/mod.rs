//! The OpenAI-compatible adapter: recorded-style fixtures through the pure decoder, and the
//! provider against the mock server.

mod fixtures;
mod provider;
mod vllm;
