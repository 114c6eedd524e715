//! The log: the one `tracing` subscriber of ollm, installed here, in the binary (the
//! library crates only emit through the `tracing` facade and never pick a subscriber).
//!
//! Decisions:
//! - `-v` counts: none logs ollm's warnings (an unknown tool, ...), `-v` info (runs and
//!   turns, retries, fallbacks) and explains the run (`run.rs`' `Verbose` sink), `-vv`
//!   debug (each request sent, the tool strategy chosen), `-vvv` trace (the raw stream,
//!   chunk by chunk, and every decoded event).
//! - Other crates (reqwest, hyper, rmcp) are silent by default, since their shutdown
//!   chatter is no news to a user; from `-v` their warnings show.
//! - `RUST_LOG`, when set, replaces the whole filter (tracing's `EnvFilter` syntax, for
//!   example `RUST_LOG=ollm_bridge=trace`); a value it cannot read is a usage error,
//!   not silently ignored.
//! - The log goes to stderr, or with `--log-file` to that file (appended, created
//!   owner-only: at debug it holds the conversation). Never to stdout, so `--output-format
//!   json` and `stream-json` stay machine-readable at any verbosity.
//! - No line carries a secret: the transport logs requests without credentials (see
//!   `ollm_bridge::transport`), and the settled configuration is never logged.

use std::path::Path;
use std::sync::Mutex;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;

use crate::args::GlobalArgs;
use crate::config::Env;
use crate::exit::CliError;

/// The filter for `verbose` (the `-v` count), as `EnvFilter` directives. Targets match
/// by prefix, so `ollm` covers the binary and every `ollm_*` crate.
pub(crate) fn directives(verbose: u8) -> &'static str {
    match verbose {
        0 => "ollm=warn",
        1 => "warn,ollm=info",
        2 => "warn,ollm=debug",
        _ => "warn,ollm=trace",
    }
}

/// The filter: `RUST_LOG` when set (it overrides `-v`), else the verbosity's.
pub(crate) fn filter(verbose: u8, rust_log: Option<&str>) -> Result<EnvFilter, CliError> {
    match rust_log {
        Some(spec) => EnvFilter::try_new(spec)
            .map_err(|e| CliError::Usage(format!("RUST_LOG={spec:?} is not a log filter: {e}"))),
        None => EnvFilter::try_new(directives(verbose))
            .map_err(|e| CliError::Other(anyhow::anyhow!("the built-in log filter: {e}"))),
    }
}

/// Installs the subscriber for the process: the filter of `-v` and `RUST_LOG`, writing
/// to `--log-file` or stderr.
pub(crate) fn init(global: &GlobalArgs, env: &Env) -> Result<(), CliError> {
    let filter = filter(global.verbose, env.get("RUST_LOG"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    let installed = match &global.log_file {
        Some(path) => builder.with_writer(open(path)?).try_init(),
        None => builder
            .without_time()
            .with_target(global.verbose >= 2)
            .with_writer(BoxMakeWriter::new(std::io::stderr))
            .try_init(),
    };
    // Only a second installation fails (tests that run `main`'s code twice).
    let _ = installed;
    Ok(())
}

/// The log file, opened for appending and created owner-only.
fn open(path: &Path) -> Result<BoxMakeWriter, CliError> {
    let opened = ollm_tools::private::open_private_append(path).map_err(|e| {
        CliError::Usage(format!("cannot open the log file {}: {e}", path.display()))
    })?;
    for warning in &opened.warnings {
        crate::ui::warn(warning);
    }
    Ok(BoxMakeWriter::new(Mutex::new(opened.file)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// Whether an event of `level` from `target` passes the filter of `verbose` and
    /// `rust_log`.
    fn passes(verbose: u8, rust_log: Option<&str>, target: &str, level: tracing::Level) -> bool {
        use tracing_subscriber::layer::SubscriberExt;
        let seen = Arc::new(Mutex::new(Vec::<u8>::new()));
        let writer = {
            let seen = Arc::clone(&seen);
            BoxMakeWriter::new(move || Shared(Arc::clone(&seen)))
        };
        let subscriber = tracing_subscriber::registry()
            .with(filter(verbose, rust_log).unwrap())
            .with(tracing_subscriber::fmt::layer().with_writer(writer));
        tracing::subscriber::with_default(subscriber, || {
            // `tracing`'s macros need a constant target and level: name the cases.
            macro_rules! at {
                ($t:literal) => {
                    match level {
                        tracing::Level::ERROR => tracing::error!(target: $t, "x"),
                        tracing::Level::WARN => tracing::warn!(target: $t, "x"),
                        tracing::Level::INFO => tracing::info!(target: $t, "x"),
                        tracing::Level::DEBUG => tracing::debug!(target: $t, "x"),
                        tracing::Level::TRACE => tracing::trace!(target: $t, "x"),
                    }
                };
            }
            match target {
                "ollm" => at!("ollm"),
                "ollm_core::tool" => at!("ollm_core::tool"),
                "ollm_bridge::shell" => at!("ollm_bridge::shell"),
                "rmcp::service" => at!("rmcp::service"),
                other => panic!("no case for {other}"),
            }
        });
        !seen.lock().unwrap().is_empty()
    }

    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn verbosity_and_rust_log_decide_what_is_logged() {
        use tracing::Level;
        let check = |verbose, rust_log, target, level, expected: bool| {
            assert_eq!(
                passes(verbose, rust_log, target, level),
                expected,
                "-v x{verbose}, RUST_LOG={rust_log:?}: {target} at {level}"
            );
        };
        // By default: ollm's warnings only, nothing from other crates.
        check(0, None, "ollm_core::tool", Level::WARN, true);
        check(0, None, "ollm_core::tool", Level::INFO, false);
        check(0, None, "ollm", Level::WARN, true);
        check(0, None, "rmcp::service", Level::ERROR, false);
        // Each -v one level more for ollm; other crates' warnings from -v.
        check(1, None, "ollm_bridge::shell", Level::INFO, true);
        check(1, None, "ollm_bridge::shell", Level::DEBUG, false);
        check(1, None, "rmcp::service", Level::WARN, true);
        check(1, None, "rmcp::service", Level::INFO, false);
        check(2, None, "ollm_bridge::shell", Level::DEBUG, true);
        check(2, None, "ollm_bridge::shell", Level::TRACE, false);
        check(3, None, "ollm_bridge::shell", Level::TRACE, true);
        check(9, None, "rmcp::service", Level::DEBUG, false);
        // RUST_LOG replaces the filter, whatever -v says.
        let only_bridge = Some("ollm_bridge=trace");
        check(0, only_bridge, "ollm_bridge::shell", Level::TRACE, true);
        check(3, only_bridge, "ollm_core::tool", Level::WARN, false);
        check(0, Some("rmcp=debug"), "rmcp::service", Level::DEBUG, true);
    }

    #[test]
    fn an_unreadable_rust_log_is_a_usage_error() {
        let err = filter(0, Some("ollm=loud")).unwrap_err();
        assert!(matches!(err, CliError::Usage(_)), "{err:?}");
    }
}
