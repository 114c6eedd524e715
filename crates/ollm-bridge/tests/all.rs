//! The bridge's integration tests: one binary, one module per adapter.

mod ollama;
