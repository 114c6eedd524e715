//! The Anthropic Messages adapter: recorded and reference streams through the pure
//! decoder, and the provider against the mock Messages server: streaming through
//! real HTTP, the bodies it sends, error mapping, retries, timeouts, cancellation,
//! counts, models, and a whole chat run with a tool call through `ollm-core`.

mod fixtures;
mod provider;
