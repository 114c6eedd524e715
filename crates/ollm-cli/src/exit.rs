//! Exit codes, and the one error type of the binary that decides them.
//!
//! The codes are part of the CLI's interface and documented in `docs/cli.md`; scripts match
//! on them, so they never change meaning.

use ollm_types::{ProviderError, ProviderErrorKind};

/// The run succeeded.
pub(crate) const SUCCESS: u8 = 0;
/// Something failed at run time (server error, tool failure, I/O...).
pub(crate) const RUNTIME: u8 = 1;
/// The command line or the config file is wrong.
pub(crate) const USAGE: u8 = 2;
/// The server could not be reached (or did not answer in time).
pub(crate) const CONNECTION: u8 = 3;
/// The model does not exist on the server.
pub(crate) const MODEL_NOT_FOUND: u8 = 4;
/// The server refused our credentials.
pub(crate) const AUTH: u8 = 5;
/// The user cancelled (Ctrl-C), as shells report SIGINT.
pub(crate) const CANCELLED: u8 = 130;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// The command line, environment or config file is wrong.
    #[error("{0}")]
    Usage(String),
    /// The provider failed.
    #[error(transparent)]
    Provider(#[from] ProviderError),
    /// The runtime refused something outside a run (a duplicate tool, a bad schema...).
    #[error(transparent)]
    Core(#[from] ollm_core::CoreError),
    /// The user cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The failure was shown already (by the run's output); exit with this code.
    #[error("exit status {0}")]
    Reported(u8),
    /// Anything else.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

impl From<std::io::Error> for CliError {
    fn from(e: std::io::Error) -> Self {
        CliError::Other(e.into())
    }
}

impl CliError {
    /// The process exit code for this error.
    pub(crate) fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => USAGE,
            CliError::Provider(e) => code_for_kind(e.kind),
            CliError::Core(ollm_core::CoreError::Provider(e)) => code_for_kind(e.kind),
            CliError::Core(_) => RUNTIME,
            CliError::Cancelled => CANCELLED,
            CliError::Reported(code) => *code,
            CliError::Other(_) => RUNTIME,
        }
    }
}

/// The exit code for a provider failure of this kind.
pub(crate) fn code_for_kind(kind: ProviderErrorKind) -> u8 {
    match kind {
        ProviderErrorKind::Connection | ProviderErrorKind::Timeout => CONNECTION,
        ProviderErrorKind::ModelNotFound => MODEL_NOT_FOUND,
        ProviderErrorKind::Auth => AUTH,
        ProviderErrorKind::Cancelled => CANCELLED,
        _ => RUNTIME,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_kinds_map_to_documented_codes() {
        let check = |kind, code| assert_eq!(code_for_kind(kind), code, "{kind:?}");
        check(ProviderErrorKind::Connection, 3);
        check(ProviderErrorKind::Timeout, 3);
        check(ProviderErrorKind::ModelNotFound, 4);
        check(ProviderErrorKind::Auth, 5);
        check(ProviderErrorKind::Cancelled, 130);
        check(ProviderErrorKind::Server, 1);
        check(ProviderErrorKind::BadRequest, 1);
        assert_eq!(CliError::Usage("x".into()).exit_code(), 2);
        assert_eq!(CliError::Cancelled.exit_code(), 130);
    }
}
