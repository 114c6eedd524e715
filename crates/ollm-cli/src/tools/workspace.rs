//! Confinement: the directory tools may touch, and the resolution of paths inside it.

use std::path::{Component, Path, PathBuf};

use ollm_core::ToolError;

/// The working directory the tools are confined to (canonical).
#[derive(Debug, Clone)]
pub(crate) struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace rooted at `root`, which must exist.
    pub(crate) fn new(root: &Path) -> std::io::Result<Self> {
        Ok(Workspace {
            root: root.canonicalize()?,
        })
    }

    /// The canonical root.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves an existing path, refusing anything that leaves the workspace.
    pub(crate) fn resolve_existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.join_checked(path)?;
        let real = joined
            .canonicalize()
            .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
        self.ensure_inside(path, &real)?;
        Ok(real)
    }

    /// Resolves a path that may not exist yet (for writing): its parent directory must
    /// exist inside the workspace, and if it exists it must resolve inside too.
    pub(crate) fn resolve_for_write(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.join_checked(path)?;
        let name = joined
            .file_name()
            .ok_or_else(|| ToolError::Failed(format!("{path}: not a file path")))?
            .to_owned();
        let parent = joined.parent().unwrap_or(&self.root);
        let parent = parent.canonicalize().map_err(|e| {
            ToolError::Failed(format!("{path}: the parent directory is unusable: {e}"))
        })?;
        self.ensure_inside(path, &parent)?;
        let target = parent.join(name);
        if std::fs::symlink_metadata(&target).is_ok() {
            let real = target
                .canonicalize()
                .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
            self.ensure_inside(path, &real)?;
            return Ok(real);
        }
        Ok(target)
    }

    /// `path` relative to the root, for display.
    pub(crate) fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    fn join_checked(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.contains('\0') {
            return Err(ToolError::Failed("the path contains a NUL byte".into()));
        }
        let p = Path::new(path);
        if p.components().any(|c| matches!(c, Component::ParentDir)) {
            return Err(ToolError::Failed(format!(
                "{path}: `..` is not allowed; paths stay inside the working directory"
            )));
        }
        if p.is_absolute() {
            // Absolute paths are accepted only when they name something inside.
            return Ok(p.to_path_buf());
        }
        Ok(self.root.join(p))
    }

    fn ensure_inside(&self, asked: &str, real: &Path) -> Result<(), ToolError> {
        if real.starts_with(&self.root) {
            Ok(())
        } else {
            Err(ToolError::Failed(format!(
                "{asked}: outside the working directory {}",
                self.root.display()
            )))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("a.txt"), "a").unwrap();
        std::fs::create_dir(root.path().join("sub")).unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        let ws = Workspace::new(root.path()).unwrap();
        (root, outside, ws)
    }

    #[test]
    fn inside_paths_resolve() {
        let (_r, _o, ws) = setup();
        assert!(ws.resolve_existing("a.txt").is_ok());
        assert!(ws.resolve_existing("./sub").is_ok());
        assert!(ws.resolve_existing(".").is_ok());
        assert!(ws.resolve_for_write("sub/new.txt").is_ok());
        let abs = ws.root().join("a.txt");
        assert!(ws.resolve_existing(abs.to_str().unwrap()).is_ok());
    }

    #[test]
    fn dot_dot_and_outside_absolute_paths_are_refused() {
        let (_r, o, ws) = setup();
        assert!(ws.resolve_existing("../x").is_err());
        assert!(ws.resolve_existing("sub/../a.txt").is_err());
        assert!(ws.resolve_for_write("../new").is_err());
        let secret = o.path().join("secret");
        assert!(ws.resolve_existing(secret.to_str().unwrap()).is_err());
        assert!(ws.resolve_for_write(secret.to_str().unwrap()).is_err());
        assert!(ws.resolve_existing("/etc/passwd").is_err());
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_that_escape_are_refused_and_inner_ones_followed() {
        let (r, o, ws) = setup();
        std::os::unix::fs::symlink(o.path(), r.path().join("out")).unwrap();
        std::os::unix::fs::symlink(o.path().join("secret"), r.path().join("s")).unwrap();
        std::os::unix::fs::symlink(r.path().join("a.txt"), r.path().join("in")).unwrap();
        assert!(ws.resolve_existing("out/secret").is_err());
        assert!(ws.resolve_existing("s").is_err());
        assert!(ws.resolve_for_write("s").is_err());
        assert!(ws.resolve_for_write("out/new").is_err());
        assert!(ws.resolve_existing("in").is_ok());
    }
}
