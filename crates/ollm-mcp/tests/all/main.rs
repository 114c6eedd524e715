//! The integration tests, one binary with a module per area: the real npm servers
//! (`real`) and an in-process rmcp server over streamable HTTP (`inproc`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers fail the test loudly on setup errors"
)]

mod common;
mod inproc;
mod real;
