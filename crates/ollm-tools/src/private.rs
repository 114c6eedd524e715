//! Files only their owner may read: the audit log here, sessions and history in the CLI.
//!
//! # Decisions
//! - New folders are created `0700` and new files `0600` (on Unix); what tools print can
//!   hold anything the model was shown.
//! - An existing folder or file with wider permissions is used as it is, and reported: a
//!   mode the user chose is theirs to change, but they should know.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::Path;

/// A file opened for appending, and what looked wrong about it.
#[derive(Debug)]
pub struct Opened {
    /// The file.
    pub file: File,
    /// Warnings about permissions wider than owner-only.
    pub warnings: Vec<String>,
}

/// Creates `dir` and its missing parents `0700`; returns a warning if it already existed
/// and others may read it.
pub fn create_private_dir(dir: &Path) -> io::Result<Vec<String>> {
    let mut warnings = Vec::new();
    if dir.is_dir() {
        warnings.extend(too_wide(dir, 0o077)?);
        return Ok(warnings);
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    Ok(warnings)
}

/// Opens `path` for appending, creating it `0600` (and its folder `0700`).
pub fn open_private_append(path: &Path) -> io::Result<Opened> {
    let mut warnings = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => create_private_dir(dir)?,
        _ => Vec::new(),
    };
    let mut options = OpenOptions::new();
    options.create(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    warnings.extend(too_wide(path, 0o077)?);
    Ok(Opened { file, warnings })
}

/// A warning when `path`'s mode has any of `mask`'s bits.
#[cfg(unix)]
fn too_wide(path: &Path, mask: u32) -> io::Result<Option<String>> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)?.permissions().mode() & 0o777;
    Ok((mode & mask != 0).then(|| {
        format!(
            "{} is readable by others (mode {mode:o}); `chmod go-rwx` it to keep it private",
            path.display()
        )
    }))
}

#[cfg(not(unix))]
fn too_wide(_path: &Path, _mask: u32) -> io::Result<Option<String>> {
    Ok(None)
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn new_files_are_owner_only_in_owner_only_folders() {
        // Issue 12, finding 2: the audit log was created 0644 in a 0755 folder.
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("data/ollm/audit.log");
        let mut opened = open_private_append(&log).unwrap();
        opened.file.write_all(b"x\n").unwrap();
        assert!(opened.warnings.is_empty(), "{:?}", opened.warnings);
        assert_eq!(mode(&log), 0o600);
        assert_eq!(mode(&dir.path().join("data/ollm")), 0o700);
        assert_eq!(mode(&dir.path().join("data")), 0o700);
    }

    #[test]
    fn wider_existing_modes_are_reported_not_changed() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("shared");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = folder.join("audit.log");
        std::fs::write(&log, "").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        let opened = open_private_append(&log).unwrap();
        assert_eq!(opened.warnings.len(), 2, "{:?}", opened.warnings);
        assert!(opened.warnings[0].contains("mode 755"));
        assert!(opened.warnings[1].contains("mode 644"));
        assert_eq!(mode(&log), 0o644);
    }
}
