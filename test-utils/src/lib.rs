//! Test doubles for ollm, shared by every crate's tests.
//!
//! - [`mock_provider`]: providers that replay scripted event sequences.
//! - [`recording_tool`]: tools that record what ran, with which arguments and when.
//! - [`mock_anthropic`]: an in-process HTTP server speaking Anthropic's Messages API.
//! - [`mock_ollama`]: an in-process HTTP server speaking Ollama's native API.
//! - [`mock_openai`]: an in-process HTTP server speaking the OpenAI-compatible API.
//! - [`mock_vllm`]: vLLM's own refusals (auto tool choice flags, `--max-model-len`,
//!   unknown models, its error shapes), applied by the OpenAI mock on request.
//! - [`split`]: byte streams cut at arbitrary points, for split-invariance tests.
//! - [`fixtures`]: paths to the data files under `test-utils/fixtures/`.

pub mod fixtures;
pub mod mock_anthropic;
pub mod mock_ollama;
pub mod mock_openai;
pub mod mock_provider;
pub mod mock_vllm;
pub mod recording_tool;
pub mod split;
