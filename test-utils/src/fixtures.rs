//! Paths to the data files under `test-utils/fixtures/`.

use std::path::PathBuf;

/// The fixtures folder.
pub fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A fixture file's path, relative to the fixtures folder.
pub fn path(relative: &str) -> PathBuf {
    dir().join(relative)
}
