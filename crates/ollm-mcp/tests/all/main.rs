//! The integration tests: real MCP servers from npm, and an in-process rmcp server.

mod common;
mod inproc;
mod real;
