//! The terminal's shared voice: warnings, the status line, hints, and fitting text to the
//! terminal ([`wrap`]: one-line shortening and word wrap), used by every part of the CLI
//! that prints.
//!
//! # Decisions
//! - A leaf: nothing here imports another module of the CLI; its files import only each
//!   other (the status line is cut to fit by `wrap`). `wrap` moved in from the CLI's top
//!   level so that the leaf has no way out. Before `ui`, `render::warn` was called from
//!   mcp, models, sessions, logging and the prompter, and the renderer and the prompter,
//!   the renderer and `errors`, imported each other (issue 26); `cargo xtask tidy` keeps
//!   the CLI free of such circles.
//! - Warnings go to stderr as `warning: ...`, one line each, so stdout keeps only answers.

use std::io::{self, Write};

pub(crate) mod hint;
pub(crate) mod status;
pub(crate) mod wrap;

/// Prints a warning on stderr (outside a run's renderer).
pub(crate) fn warn(message: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "warning: {message}");
}
