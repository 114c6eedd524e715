//! What the model is told about the working folder: a one-line overview (the CLI puts it
//! before the first prompt, see core's `ChatConfig::tools_context`), and the existing
//! paths nearest to one it asked for that does not exist.
//!
//! Small models invent paths (`/path/to/file.txt`, `/config/app.toml` for
//! `config/app.toml`) and then explain the bare "No such file" to the user instead of
//! retrying. Coding agents tell the model where it works and what is there; a failed
//! lookup that names the nearest real paths gives it something to retry with.
//!
//! # Decisions
//! - **One walk rule** for everything that looks around the folder (`search_text` too):
//!   no symlinks followed, hidden entries and build output (`target`, `node_modules`)
//!   skipped, so neither the overview nor a suggestion ever points into `.git` or outside.
//! - **Bounded**: the overview reads one directory and shows at most [`OVERVIEW_ENTRIES`];
//!   the search for near paths stops after [`WALK_ENTRIES`] entries or [`WALK_DEPTH`]
//!   levels, whatever the folder holds.
//! - **Top level only** in the overview: deeper entries are what the tools are for, and a
//!   listing of every folder would answer "which files are in src?" without looking.
//! - **Nearest** ranks an existing path by what small models get wrong: a leading `/`
//!   (`/config/app.toml`), an invented prefix (`/path/to/notes.txt`), the case, a
//!   near-miss in the name (`note.txt`). With no near path at all, the top entries are
//!   offered instead, so the reply always says what exists.

use std::path::Path;

use crate::workspace::Workspace;

/// The most top-level entries the overview names.
pub(crate) const OVERVIEW_ENTRIES: usize = 40;
/// The most entries the search for near paths looks at.
const WALK_ENTRIES: usize = 5000;
/// How deep the search for near paths goes.
const WALK_DEPTH: usize = 6;
/// The most near paths suggested.
const SUGGESTIONS: usize = 3;
/// The most paths [`Workspace::paths`] lists: past it, a list to choose from is too long
/// for a small model's constrained reply and the folder is not listed at all.
pub const PATH_CHOICES: usize = 256;

/// The folder's paths, relative ([`Workspace::paths`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paths {
    /// `.` and every folder, without a trailing `/`.
    pub folders: Vec<String>,
    /// Every file.
    pub files: Vec<String>,
}

/// Whether a directory entry named `name` is left out of every walk: hidden entries
/// (`.git`, `.env`) and build output.
pub(crate) fn skipped(name: &str) -> bool {
    name.starts_with('.') || name == "target" || name == "node_modules"
}

/// The entries of `dir` that walks keep, sorted, directories marked with a trailing `/`.
fn entries(dir: &Path) -> Vec<String> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = read
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if skipped(&name) {
                return None;
            }
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            Some(if dir { format!("{name}/") } else { name })
        })
        .collect();
    names.sort();
    names
}

impl Workspace {
    /// A short description of the folder for the model, one line: where the tools work
    /// and the top entries there (`[Working folder: /p` newline `Top entries: README.md,
    /// src/]`).
    pub fn overview(&self) -> String {
        let mut top = entries(self.root());
        let more = top.len().saturating_sub(OVERVIEW_ENTRIES);
        top.truncate(OVERVIEW_ENTRIES);
        let listing = if top.is_empty() {
            "(empty)".to_owned()
        } else if more > 0 {
            format!("{}, and {more} more", top.join(", "))
        } else {
            top.join(", ")
        };
        // No punctuation right after the path: Qwen2.5-Coder-0.5B called
        // `list_dir "/tmp/.../project."` from "Working folder: /tmp/.../project. Top ...".
        format!(
            "[Working folder: {}\nTop entries: {listing}]",
            self.root().display()
        )
    }

    /// The tool result for `asked`, which does not exist: what exists that is nearest.
    pub fn not_found(&self, asked: &str) -> String {
        let near = self.nearest(asked);
        if near.is_empty() {
            let mut top = entries(self.root());
            top.truncate(OVERVIEW_ENTRIES);
            format!(
                "{asked}: no such file or directory. Paths are relative to the working \
                 folder, whose top entries are: {}",
                top.join(", ")
            )
        } else {
            format!(
                "{asked}: no such file or directory. Paths are relative to the working \
                 folder. Nearest existing: {}",
                near.join(", ")
            )
        }
    }

    /// Existing paths (relative, directories with `/`) nearest to `asked`, best first.
    pub fn nearest(&self, asked: &str) -> Vec<String> {
        // Trailing punctuation copied from a sentence, and the folder's own absolute path
        // in front of a relative one, are what a model meant least.
        let asked = asked.trim().trim_end_matches(['.', ',', ';', ':']);
        let root = self.root().to_string_lossy();
        let asked = match asked.strip_prefix(root.as_ref()) {
            Some("") => return vec![".".to_owned()],
            Some(rest) if rest.starts_with('/') => rest,
            _ => asked,
        };
        let wanted = Wanted::new(asked);
        let mut scored: Vec<(u32, String)> = self
            .walk()
            .into_iter()
            .filter_map(|path| wanted.score(&path).map(|s| (s, path)))
            .collect();
        scored.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        scored
            .into_iter()
            .take(SUGGESTIONS)
            .map(|(_, p)| p)
            .collect()
    }

    /// Every path a tool may be asked for, for a call constrained to existing paths (core's
    /// `known-paths`): the folders, `.` first, and the files, each kept path under the
    /// root, relative, folders without their `/`; `None` when the folder holds more than
    /// [`PATH_CHOICES`], since a list that leaves paths out would force a wrong choice
    /// where it should allow any.
    pub fn paths(&self) -> Option<Paths> {
        let walked = self.walk();
        if walked.len() >= PATH_CHOICES {
            return None;
        }
        let mut paths = Paths {
            folders: vec![".".to_owned()],
            files: Vec::new(),
        };
        for path in walked {
            match path.strip_suffix('/') {
                Some(folder) => paths.folders.push(folder.to_owned()),
                None => paths.files.push(path),
            }
        }
        Some(paths)
    }

    /// The hidden entries at the top of the folder (`.env`, `.git/`), folders with a
    /// trailing `/`, sorted: names only, never read, so that core's `change-after-idle`
    /// knows a dotfile the user names (`.gitignore`) already exists and is no new file to
    /// write whole. Names past [`PATH_CHOICES`] are left out, and `None` says so, since a
    /// short list would call an existing file new.
    pub fn hidden(&self) -> Option<Vec<String>> {
        let read = std::fs::read_dir(self.root()).ok()?;
        let mut names: Vec<String> = read
            .filter_map(Result::ok)
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let dir = e.file_type().is_ok_and(|t| t.is_dir());
                name.starts_with('.')
                    .then(|| if dir { format!("{name}/") } else { name })
            })
            .take(PATH_CHOICES + 1)
            .collect();
        if names.len() > PATH_CHOICES {
            return None;
        }
        names.sort();
        Some(names)
    }

    /// Every kept path under the root, breadth first, within the walk's bounds.
    pub(crate) fn walk(&self) -> Vec<String> {
        let mut found = Vec::new();
        let mut level = vec![String::new()];
        for _ in 0..WALK_DEPTH {
            let mut next = Vec::new();
            for prefix in &level {
                for name in entries(&self.root().join(prefix)) {
                    if found.len() == WALK_ENTRIES {
                        return found;
                    }
                    let path = format!("{prefix}{name}");
                    if name.ends_with('/') {
                        next.push(path.clone());
                    }
                    found.push(path);
                }
            }
            level = next;
        }
        found
    }
}

/// The path asked for, normalised the ways small models get it wrong.
struct Wanted {
    /// Lower case, without a leading `/` or `./` and without a trailing `/`.
    path: String,
    /// Its last component, lower case.
    name: String,
}

impl Wanted {
    fn new(asked: &str) -> Self {
        let path = asked
            .trim()
            .trim_start_matches("./")
            .trim_start_matches('/')
            .trim_end_matches('/')
            .to_lowercase();
        let name = path.rsplit('/').next().unwrap_or_default().to_owned();
        Wanted { path, name }
    }

    /// How near `candidate` is (lower is nearer), or `None` when it is not near at all.
    fn score(&self, candidate: &str) -> Option<u32> {
        let cand = candidate.trim_end_matches('/').to_lowercase();
        let cand_name = cand.rsplit('/').next().unwrap_or_default();
        if self.name.is_empty() {
            return None;
        }
        if cand == self.path {
            return Some(0);
        }
        if self.path.ends_with(&format!("/{cand}")) {
            // `/path/to/config/app.toml` for `config/app.toml`.
            return Some(1);
        }
        if cand_name == self.name {
            return Some(2 + depth(&cand));
        }
        let distance = edit_distance(cand_name, &self.name);
        let allowed = u32::try_from(self.name.chars().count() / 4)
            .unwrap_or(u32::MAX)
            .max(1);
        (distance <= allowed).then(|| 10 + 2 * distance + depth(&cand))
    }
}

/// The number of `/`-separated folders above a path's last component.
fn depth(path: &str) -> u32 {
    u32::try_from(path.matches('/').count()).unwrap_or(u32::MAX / 4)
}

/// Levenshtein distance by characters; names are short (a file name), so the quadratic
/// table is small, and longer inputs are cut first.
fn edit_distance(a: &str, b: &str) -> u32 {
    let a: Vec<char> = a.chars().take(128).collect();
    let b: Vec<char> = b.chars().take(128).collect();
    let mut row: Vec<u32> = (0..=b.len()).map(|j| j as u32).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i as u32 + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            let cost = u32::from(ca != cb);
            row[j + 1] = (diagonal + cost).min(above + 1).min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in [
            ("notes.txt", "n"),
            ("README.md", "r"),
            ("config/app.toml", "a"),
            ("src/main.rs", "m"),
            ("src/storage.rs", "s"),
            (".env", "SECRET=1"),
            (".git/config", "c"),
            ("target/debug/notes.txt", "t"),
        ] {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    fn check(asked: &str, expected: &[&str]) {
        let (_dir, ws) = project();
        assert_eq!(ws.nearest(asked), expected, "nearest to {asked:?}");
    }

    #[test]
    fn the_nearest_paths_are_what_small_models_meant() {
        check("/config/app.toml", &["config/app.toml"]);
        check("/path/to/notes.txt", &["notes.txt"]);
        check("/path/to/config/app.toml", &["config/app.toml"]);
        check("app.toml", &["config/app.toml"]);
        check("Notes.TXT", &["notes.txt"]);
        check("note.txt", &["notes.txt"]);
        check("src/storage.rs/", &["src/storage.rs"]);
        check("storage.rs", &["src/storage.rs"]);
        check("/src", &["src/"]);
        check("/path/to/file.txt", &[]);
        check("", &[]);
        check("zzzz.qqq", &[]);
    }

    #[test]
    fn hidden_entries_and_build_output_are_never_suggested_or_listed() {
        let (_dir, ws) = project();
        assert_eq!(ws.nearest(".env"), Vec::<String>::new());
        assert_eq!(ws.nearest("config"), ["config/"]);
        let root = ws.root().display();
        let want =
            format!("[Working folder: {root}\nTop entries: README.md, config/, notes.txt, src/]");
        assert_eq!(ws.overview(), want);
    }

    #[test]
    fn the_hidden_entries_at_the_top_are_named_not_walked() {
        let (_dir, ws) = project();
        assert_eq!(
            ws.hidden(),
            Some(vec![".env".to_owned(), ".git/".to_owned()])
        );
        let empty = tempfile::tempdir().unwrap();
        let bare = Workspace::new(empty.path()).unwrap();
        assert_eq!(bare.hidden(), Some(Vec::new()));
    }

    #[test]
    fn the_folder_s_own_path_copied_with_punctuation_is_the_folder() {
        let (_dir, ws) = project();
        let root = ws.root().display().to_string();
        assert_eq!(ws.nearest(&format!("{root}.")), ["."]);
        assert_eq!(ws.nearest(&format!("{root}/notes.txt")), ["notes.txt"]);
        assert_eq!(
            ws.nearest(&format!("{root}/config/app.toml,")),
            ["config/app.toml"]
        );
    }

    #[test]
    fn a_miss_without_a_near_path_names_the_top_entries() {
        let (_dir, ws) = project();
        let text = ws.not_found("/path/to/file.txt");
        assert!(
            text.starts_with("/path/to/file.txt: no such file"),
            "{text}"
        );
        assert!(
            text.contains("README.md, config/, notes.txt, src/"),
            "{text}"
        );
        let text = ws.not_found("/config/app.toml");
        assert!(
            text.ends_with("Nearest existing: config/app.toml"),
            "{text}"
        );
    }

    #[test]
    fn the_paths_to_choose_from_are_every_kept_path_or_none_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("src/bin")).unwrap();
        std::fs::create_dir_all(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join("src/bin/a.rs"), "").unwrap();
        std::fs::write(dir.path().join(".env"), "KEY=1").unwrap();
        std::fs::write(dir.path().join("config.toml"), "").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let paths = ws.paths().unwrap();
        assert_eq!(paths.folders, [".", "src", "src/bin"]);
        assert_eq!(paths.files, ["config.toml", "src/bin/a.rs"]);
        for i in 0..PATH_CHOICES {
            std::fs::write(dir.path().join(format!("f{i}.txt")), "").unwrap();
        }
        assert_eq!(ws.paths(), None, "past the bound, no list");
    }

    #[test]
    fn a_large_folder_is_cut_in_the_overview_and_the_walk() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(OVERVIEW_ENTRIES + 5) {
            std::fs::write(dir.path().join(format!("f{i:03}.txt")), "").unwrap();
        }
        let ws = Workspace::new(dir.path()).unwrap();
        assert!(ws.overview().contains(", and 5 more"));
        assert!(ws.walk().len() <= WALK_ENTRIES);
    }

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("notes", "notes"), 0);
        assert_eq!(edit_distance("note", "notes"), 1);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
