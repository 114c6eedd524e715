//! The bridge's integration tests, one binary with a module per area.

mod transport;
