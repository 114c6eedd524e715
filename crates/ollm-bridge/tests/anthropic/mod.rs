//! The Anthropic Messages adapter against the mock Messages server: streaming through
//! real HTTP, the bodies it sends, error mapping, retries, timeouts, cancellation,
//! counts, models, and a whole chat run with a tool call through `ollm-core`.

mod provider;
