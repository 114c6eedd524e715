//! ollm's measurements as a crate of their own (issue 36): the tool-calling eval and the
//! BFCL checker, run against any OpenAI-compatible server given by its URL.
//!
//! - The task eval: the tasks of `data/tasks.json` and
//!   `data/held-out.json`, graded the same way in every column: `plain` (a bare
//!   OpenAI-client loop with ollm's tool schemas), `served` (the same loop through an
//!   `ollm serve` the eval starts in front of the server) and ollm's tool modes (the built
//!   `ollm` binary, one process per run); `--ablate` switches coach rules off one at a time. It
//!   writes a result file under `docs/eval/` and regenerates the tables of
//!   `docs/tool-calling.md`, `docs/small-models.md` (the newest figures) and
//!   `docs/eval/history.md` from those files.
//! - BFCL (`--bfcl`): the Berkeley Function-Calling Leaderboard's simple, multiple,
//!   parallel and irrelevance questions, AST-checked, in the plain column and through the
//!   library itself (`ollm-core` with `ollm-bridge`'s OpenAI adapter).
//!
//! [`run`] takes the binary's arguments; `ollm-eval --help` lists them.
//!
//! # Decisions
//!
//! - **The server comes from outside** (`--url`, `--model`): the eval starts no model
//!   server, only, for the served columns, an `ollm serve` of the `ollm` it measures.
//!   `cargo xtask eval` starts the pinned llama-server and runs this binary against it, so
//!   xtask keeps no dependency on the runtime, and a downstream user measures their own
//!   server the same way.
//! - **The `ollm` columns run the binary**, as a user runs it, built from this workspace
//!   unless `--ollm PATH` names another; BFCL's library columns link the library, as a
//!   Rust user calls it.
//! - **It prints.** A measuring tool's progress lines and tables are its output; the lint
//!   against printing in libraries is lifted for this crate alone, which is never
//!   published and which no crate depends on (`cargo xtask tidy` bans it from xtask).
//! - **One public error, [`EvalError`]**: wrong flags apart from a run that could not
//!   finish. Inside, the steps carry `anyhow` context (which file, which run, which
//!   command), and the whole chain reaches the caller in [`EvalError::Run`].

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a measuring tool: its progress lines and tables are its output"
)]

mod bfcl;
mod suite;
mod util;

/// Why the eval did not finish: a scoreless run is not an error, a broken one is.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EvalError {
    /// The arguments are wrong: an unknown flag, a missing value, an unknown column.
    #[error("{0}")]
    Usage(String),
    /// The run could not finish or its harness broke: no server at the URL, no `ollm`
    /// binary, a task file that does not parse, a run the harness could not grade.
    #[error(transparent)]
    Run(anyhow::Error),
}

/// Runs the eval as `ollm-eval ARGS` does: with `--bfcl`, BFCL; else the task eval
/// (`--list`, `--table` and `--regrade` need no server). Scores never fail it.
pub fn run(args: &[String]) -> Result<(), EvalError> {
    let root = util::workspace_root();
    match parse(args)? {
        Parsed::Bfcl(options) => bfcl::run(&root, &options),
        Parsed::Suite(options) => suite::run(&root, &options),
    }
    .map_err(EvalError::Run)
}

/// Checks the arguments as [`run`] reads them, and that the task eval's `--tasks` and
/// `--part` select a task, running nothing (`ollm-eval --check`): `cargo xtask eval` asks
/// before it starts a server.
pub fn check(args: &[String]) -> Result<(), EvalError> {
    match parse(args)? {
        Parsed::Bfcl(_) => Ok(()),
        Parsed::Suite(options) => {
            suite::check(&util::workspace_root(), &options).map_err(EvalError::Run)
        }
    }
}

/// The options of one of the two measurements.
enum Parsed {
    Bfcl(bfcl::Options),
    Suite(suite::Options),
}

fn parse(args: &[String]) -> Result<Parsed, EvalError> {
    let usage = |err: anyhow::Error| EvalError::Usage(format!("{err:#}"));
    if args.iter().any(|a| a == "--bfcl") {
        bfcl::Options::parse(args).map(Parsed::Bfcl).map_err(usage)
    } else {
        suite::Options::parse(args)
            .map(Parsed::Suite)
            .map_err(usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `check` says of `args`: `Ok`, `Usage` or `Run`.
    fn check_says(args: &[&str], want: &str) {
        let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        let got = match check(&args) {
            Ok(()) => "ok",
            Err(EvalError::Usage(_)) => "usage",
            Err(EvalError::Run(_)) => "run",
        };
        assert_eq!(got, want, "{args:?}");
    }

    #[test]
    fn check_refuses_bad_flags_and_an_empty_selection_without_a_server() {
        check_says(&["--smoke"], "ok");
        check_says(&["--part", "held-out", "--columns", "auto"], "ok");
        check_says(&["--bfcl", "--limit", "3"], "ok");
        check_says(&["--bogus"], "usage");
        check_says(&["--bfcl", "--columns", "react"], "usage");
        check_says(&["--repeats", "0"], "usage");
        check_says(&["--tasks", "no-such-task"], "run");
    }
}
