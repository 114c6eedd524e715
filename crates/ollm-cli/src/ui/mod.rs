//! The terminal's shared voice: warnings, the status line and hints, used by every part
//! of the CLI that prints outside a run's renderer.
//!
//! # Decisions
//! - A leaf: nothing here imports another module of the CLI but the pure text helpers of
//!   `wrap`. Before it, `render::warn` was called from mcp, models, sessions, logging and
//!   the prompter, and the renderer and the prompter, the renderer and `errors`, imported
//!   each other (issue 26); `cargo xtask tidy` keeps the CLI free of such circles.
//! - Warnings go to stderr as `warning: ...`, one line each, so stdout keeps only answers.

use std::io::{self, Write};

pub(crate) mod hint;
pub(crate) mod status;

/// Prints a warning on stderr (outside a run's renderer).
pub(crate) fn warn(message: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "warning: {message}");
}
