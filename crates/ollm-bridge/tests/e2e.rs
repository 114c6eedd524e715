//! End-to-end tests against a real OpenAI-compatible server (filled in below).
