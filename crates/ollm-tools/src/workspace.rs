//! Confinement: the directory tools may touch, and the resolution of paths inside it.
//!
//! # Decisions
//! - `..` is refused outright rather than normalised: a path that needs it is never the
//!   simplest way to name something inside.
//! - Absolute paths are accepted only when they resolve inside; symlinks are followed only
//!   when their target is inside too.
//! - Nothing is ever written into a `.git` file or folder at any depth (compared without
//!   case, for case-insensitive file systems): git runs hooks and programs named in its
//!   config, so writing there is running code.
//! - A path that does not exist is answered with the nearest existing ones
//!   ([`Workspace::not_found`], in `map.rs`), so a model that invented a path can retry.

use std::path::{Component, Path, PathBuf};

use ollm_core::ToolError;

/// The working directory the tools are confined to (canonical).
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// A workspace rooted at `root`, which must exist.
    pub fn new(root: &Path) -> Result<Self, crate::ToolsError> {
        let root = root
            .canonicalize()
            .map_err(|source| crate::ToolsError::Workspace {
                path: root.to_path_buf(),
                source,
            })?;
        Ok(Workspace { root })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves an existing path, refusing anything that leaves the workspace.
    ///
    /// A path that does not exist but starts with the working folder's own name
    /// (`project/notes.txt`, or `project`, in a folder named `project`) is read without
    /// it: Qwen2.5-Coder-1.5B listed `project` after the working-folder line named
    /// `/tmp/.../project` (issue 24's eval), and got "no such file".
    pub fn resolve_existing(&self, path: &str) -> Result<PathBuf, ToolError> {
        let joined = self.join_checked(path)?;
        let real = match joined.canonicalize() {
            Ok(real) => real,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return match self.without_own_name(path) {
                    Some(rest) => self.resolve_existing(rest),
                    None => Err(ToolError::Failed(self.not_found(path))),
                };
            }
            Err(e) => return Err(ToolError::Failed(format!("{path}: {e}"))),
        };
        self.ensure_inside(path, &real)?;
        Ok(real)
    }

    /// `path` without the working folder's own name in front (`.` for the name alone);
    /// `None` when it does not start with it. Always shorter than `path`.
    fn without_own_name<'a>(&self, path: &'a str) -> Option<&'a str> {
        let name = self.root.file_name()?.to_str()?;
        let rest = path.trim().trim_start_matches("./").strip_prefix(name)?;
        match rest.trim_start_matches('/') {
            "" => Some("."),
            inner if rest.starts_with('/') => Some(inner),
            _ => None,
        }
    }

    /// Resolves a path that may not exist yet (for writing): its parent directory must
    /// exist inside the workspace, if it exists it must resolve inside too, and neither
    /// the path asked for nor the one resolved may pass through a `.git` entry.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, ToolError> {
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
        let mut target = parent.join(name);
        if std::fs::symlink_metadata(&target).is_ok() {
            target = target
                .canonicalize()
                .map_err(|e| ToolError::Failed(format!("{path}: {e}")))?;
            self.ensure_inside(path, &target)?;
        }
        let relative = target.strip_prefix(&self.root).unwrap_or(&target);
        if names_git(Path::new(path)) || names_git(relative) {
            return Err(ToolError::Failed(format!(
                "{path}: writing into .git is refused (git would run what it finds there)"
            )));
        }
        Ok(target)
    }

    /// `path` relative to the root, for display.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => rel.display().to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// The top of the git work tree holding the root (the nearest folder, the root or
    /// above, with a `.git` entry), if any.
    pub fn git_toplevel(&self) -> Option<&Path> {
        self.root
            .ancestors()
            .find(|dir| std::fs::symlink_metadata(dir.join(".git")).is_ok())
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

/// Whether any component of `path` is `.git` (in any case).
pub(crate) fn names_git(path: &Path) -> bool {
    path.components().any(|c| match c {
        Component::Normal(name) => name.to_string_lossy().eq_ignore_ascii_case(".git"),
        _ => false,
    })
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
    fn the_folder_s_own_name_in_front_is_read_without_it() {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("project");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("notes.txt"), "n").unwrap();
        std::fs::write(parent.path().join("secret"), "s").unwrap();
        let ws = Workspace::new(&root).unwrap();
        let check = |asked: &str, expected: Option<&str>| {
            let got = ws.resolve_existing(asked).ok().map(|p| ws.display(&p));
            assert_eq!(got.as_deref(), expected, "{asked}");
        };
        check("project", Some("."));
        check("project/", Some("."));
        check("./project/notes.txt", Some("notes.txt"));
        check("project/sub", Some("sub"));
        // Only the name whole, only when the path does not exist, never out of the folder.
        check("projectx/notes.txt", None);
        check("project/missing.txt", None);
        check("project/../secret", None);
        // A real subfolder of that name wins.
        std::fs::create_dir(root.join("project")).unwrap();
        check("project", Some("project"));
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

    #[test]
    fn nothing_is_written_into_git_at_any_depth() {
        // Issue 12, finding 1: `write_file .git/config` set core.fsmonitor, and the next
        // allowlisted `git status` ran it.
        let (r, _o, ws) = setup();
        std::fs::create_dir_all(r.path().join(".git/hooks")).unwrap();
        std::fs::create_dir_all(r.path().join("sub/vendored/.git")).unwrap();
        std::fs::write(r.path().join("sub/.git"), "gitdir: elsewhere").unwrap();
        assert!(ws.resolve_for_write("sub/.git").is_err(), "a .git file");
        for bad in [
            ".git/config",
            ".git/hooks/pre-commit",
            "./.git/config",
            ".GIT/config",
            "sub/vendored/.git/config",
            ".git",
        ] {
            assert!(ws.resolve_for_write(bad).is_err(), "{bad}");
        }
        let abs = ws.root().join(".git/config");
        assert!(ws.resolve_for_write(abs.to_str().unwrap()).is_err());
        #[cfg(unix)]
        {
            // A symlink whose name looks harmless still lands in .git.
            std::os::unix::fs::symlink(r.path().join(".git"), r.path().join("g")).unwrap();
            assert!(ws.resolve_for_write("g/config").is_err());
            std::fs::write(r.path().join(".git/config"), "").unwrap();
            std::os::unix::fs::symlink(r.path().join(".git/config"), r.path().join("c")).unwrap();
            assert!(ws.resolve_for_write("c").is_err());
        }
        assert!(ws.resolve_for_write(".gitignore").is_ok());
        assert!(ws.resolve_for_write("sub/my.git.txt").is_ok());
    }
}
