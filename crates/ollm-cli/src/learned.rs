//! What `auto` tool mode learned about a model, kept between runs: `learned.json` in
//! the data directory, one entry per server and model.
//!
//! # Decisions
//! - **Keyed by server and model** (`"<base_url> <model>"`, the redacted address): the
//!   same model name on another server may have another template, parser or flags.
//! - **Read before a run, written after it** with core's [`Learned`] as it stands then;
//!   runs in parallel may overwrite each other's counts, which only delays what they
//!   teach (the counts are hints, `native_refused` is found again at the next refusal).
//! - **Bad input loses nothing**: an unreadable or damaged file is ignored with one
//!   warning on stderr and replaced on the next write; writes go through a temporary
//!   file and a rename, owner-only like the sessions.
//! - **Bounded**: at most [`MAX_ENTRIES`] entries are kept (the most recently written),
//!   and a file larger than [`MAX_BYTES`] is not read.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use ollm_core::Learned;
use serde::{Deserialize, Serialize};

/// The most server-and-model entries kept.
const MAX_ENTRIES: usize = 256;
/// A larger file is not read.
const MAX_BYTES: u64 = 1 << 20;

/// The file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    /// By key, with the write order for trimming.
    #[serde(default)]
    models: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct Entry {
    learned: Learned,
    /// A counter of writes, so the oldest entries go first when trimming.
    #[serde(default)]
    written: u64,
}

/// Seeds `client` with what is known about its model on the server at `base_url`.
pub(crate) fn seed(data_dir: &Path, base_url: &str, client: &ollm_core::ChatClient) {
    let model = client.config().model;
    if let Some(known) = load(&path(data_dir), &key(base_url, &model)) {
        client.remember(model, known);
    }
}

/// Writes what `client` knows now about its model, if that differs from the file (a
/// failed write is a warning: the answer matters more than the hint).
pub(crate) fn keep(data_dir: &Path, base_url: &str, client: &ollm_core::ChatClient) {
    let model = client.config().model;
    let (file, key) = (path(data_dir), key(base_url, &model));
    let now = client.learned(&model);
    if load(&file, &key).unwrap_or_default() == now {
        return;
    }
    if let Err(e) = save(&file, &key, now) {
        eprintln!("ollm: warning: {}: {e}", file.display());
    }
}

/// The file in `data_dir`.
pub(crate) fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("learned.json")
}

/// The key of `model` on the server at `base_url`.
pub(crate) fn key(base_url: &str, model: &str) -> String {
    format!("{} {model}", base_url.trim_end_matches('/'))
}

/// What was learned under `key`, if anything (a damaged file counts as nothing).
pub(crate) fn load(file: &Path, key: &str) -> Option<Learned> {
    read(file).models.get(key).map(|e| e.learned)
}

/// Records `learned` under `key`.
pub(crate) fn save(file: &Path, key: &str, learned: Learned) -> std::io::Result<()> {
    let mut store = read(file);
    let next = store.models.values().map(|e| e.written).max().unwrap_or(0) + 1;
    store.models.insert(
        key.to_owned(),
        Entry {
            learned,
            written: next,
        },
    );
    while store.models.len() > MAX_ENTRIES {
        let oldest = store
            .models
            .iter()
            .min_by_key(|(_, e)| e.written)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => store.models.remove(&k),
            None => break,
        };
    }
    let text = serde_json::to_vec_pretty(&store).map_err(std::io::Error::other)?;
    let dir = file.parent().unwrap_or(Path::new("."));
    crate::sessions::warn_once(&ollm_tools::private::create_private_dir(dir)?);
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    tmp.write_all(&text)?;
    tmp.as_file().sync_all()?;
    tmp.persist(file).map_err(|e| e.error)?;
    Ok(())
}

/// The store in `file`; empty when missing, too large or damaged (with a warning).
fn read(file: &Path) -> Store {
    let Ok(meta) = std::fs::metadata(file) else {
        return Store::default();
    };
    if meta.len() > MAX_BYTES {
        eprintln!(
            "ollm: warning: {} is over {MAX_BYTES} bytes; not read (it is rewritten)",
            file.display()
        );
        return Store::default();
    }
    let parsed = std::fs::read(file)
        .map_err(|e| e.to_string())
        .and_then(|bytes| serde_json::from_slice::<Store>(&bytes).map_err(|e| e.to_string()));
    parsed.unwrap_or_else(|e| {
        eprintln!(
            "ollm: warning: {} is unreadable ({e}); what auto mode learned starts over",
            file.display()
        );
        Store::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learned(text_calls: u32, refused: bool) -> Learned {
        Learned {
            native_refused: refused,
            native_calls: 0,
            text_calls,
        }
    }

    #[test]
    fn what_was_learned_comes_back_per_server_and_model() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        assert_eq!(load(&file, "k"), None);
        let a = key("http://127.0.0.1:8080/", "qwen");
        let b = key("http://127.0.0.1:9090", "qwen");
        assert_eq!(a, "http://127.0.0.1:8080 qwen");
        save(&file, &a, learned(3, false)).unwrap();
        save(&file, &b, learned(0, true)).unwrap();
        save(&file, &a, learned(4, false)).unwrap();
        assert_eq!(load(&file, &a), Some(learned(4, false)));
        assert_eq!(load(&file, &b), Some(learned(0, true)));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o077, 0, "owner-only");
        }
    }

    #[test]
    fn a_damaged_file_is_ignored_and_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        std::fs::write(&file, "{not json").unwrap();
        assert_eq!(load(&file, "k"), None);
        save(&file, "k", learned(1, false)).unwrap();
        assert_eq!(load(&file, "k"), Some(learned(1, false)));
    }

    #[test]
    fn the_oldest_entries_go_past_the_bound() {
        let dir = tempfile::tempdir().unwrap();
        let file = path(dir.path());
        for i in 0..=MAX_ENTRIES {
            save(&file, &format!("m{i:04}"), learned(1, false)).unwrap();
        }
        assert_eq!(load(&file, "m0000"), None);
        assert!(load(&file, &format!("m{MAX_ENTRIES:04}")).is_some());
        assert_eq!(read(&file).models.len(), MAX_ENTRIES);
    }
}
