//! The integration tests of `ollm-core`: one binary, one module per area. The 35
//! correctness properties of the foundation issue are proptest tests tagged
//! `// Property N: <name>`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test on unexpected values"
)]

#[path = "all/support.rs"]
mod support;

#[path = "all/coach.rs"]
mod coach;
#[path = "all/compaction.rs"]
mod compaction;
#[path = "all/constrained.rs"]
mod constrained;
#[path = "all/edges.rs"]
mod edges;
#[path = "all/guards.rs"]
mod guards;
#[path = "all/loop_invariants.rs"]
mod loop_invariants;
#[path = "all/providers.rs"]
mod providers;
#[path = "all/public_api.rs"]
mod public_api;
#[path = "all/react.rs"]
mod react;
#[path = "all/text_calls.rs"]
mod text_calls;
#[path = "all/tokens.rs"]
mod tokens;
#[path = "all/turn_loop.rs"]
mod turn_loop;
#[path = "all/types_and_tools.rs"]
mod types_and_tools;
