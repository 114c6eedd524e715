//! Saved conversations: one append-only JSON Lines file per session.
//!
//! Each line is one [`Record`]; a line is written with a single `write` and synced, so a
//! crash leaves at worst a torn last line. Loading never rewrites a file in place: a file
//! with a torn tail is copied aside (`NAME.jsonl.damaged-<unix time>`) and the valid
//! records are written to a temporary file that replaces it by rename; a file with a bad
//! line in the middle is moved aside whole and the session starts empty. Either way the
//! user is told where the original went.
//!
//! Images are not stored (issue 14): a message's image parts are saved as a text note
//! (`[image: image/png, 34.0 KB, not kept in the session]`), so one attached photo cannot
//! grow a session by megabytes on every save, and a resumed conversation tells the model
//! an image was there. The running chat keeps the images it was given.
//!
//! `ollm sessions show` and `export` read a session without repairing it (they never
//! write); unreadable lines are skipped and counted.

use std::io::Write;
use std::path::{Path, PathBuf};

use ollm_types::{ContentPart, Message};
use serde::{Deserialize, Serialize};

use crate::exit::CliError;

/// One line of a session file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Record {
    /// Written first: who the conversation was with.
    Meta {
        /// The file format version.
        version: u32,
        /// The provider name.
        provider: String,
        /// The model.
        model: String,
    },
    /// A message of the conversation.
    Message {
        /// The message.
        message: Message,
    },
    /// `/clear`: the messages before this line are no longer part of the conversation.
    Clear,
    /// The conversation was compacted (automatically or by `/compact`): from here on it
    /// is `messages`, the history the model saw after the compaction, summary included.
    Compact {
        /// The summary written, if one was (turns may be dropped without one).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        summary: Option<String>,
        /// How many turns the summary replaced.
        turns_summarised: usize,
        /// How many turns were dropped without a summary.
        turns_dropped: usize,
        /// The whole conversation after the compaction.
        messages: Vec<Message>,
    },
}

impl Record {
    /// A message record, its images replaced by a note (see the module docs).
    pub(crate) fn message(message: &Message) -> Self {
        Record::Message {
            message: without_images(message),
        }
    }
}

/// `message` with each image part replaced by a text note saying what it was.
pub(crate) fn without_images(message: &Message) -> Message {
    if message.images().next().is_none() {
        return message.clone();
    }
    let parts = message
        .parts()
        .iter()
        .map(|p| match p {
            ContentPart::Image { data, mime_type } => ContentPart::Text {
                text: image_note(mime_type, data),
            },
            other => other.clone(),
        })
        .collect();
    let id = message.tool_call_id().map(str::to_owned);
    let name = message.name().map(str::to_owned);
    Message::new(message.role(), parts, id, name).unwrap_or_else(|_| message.clone())
}

/// The note an image leaves in a saved session: its type and decoded size.
fn image_note(mime_type: &str, data: &str) -> String {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    let bytes = (data.len() / 4 * 3).saturating_sub(padding) as u64;
    format!(
        "\n[image: {mime_type}, {}, not kept in the session]",
        crate::models::human_bytes(bytes)
    )
}

/// The conversation `records` leave, as loading folds them: the model of the last `meta`
/// record, and the messages after the last `/clear` or from the last compaction on.
pub(crate) fn fold(records: impl IntoIterator<Item = Record>) -> Loaded {
    let mut loaded = Loaded::default();
    for r in records {
        match r {
            Record::Meta {
                model, provider, ..
            } => {
                loaded.model = Some(model);
                loaded.provider = Some(provider);
            }
            Record::Message { message } => loaded.messages.push(message),
            Record::Clear => loaded.messages.clear(),
            Record::Compact { messages, .. } => loaded.messages = messages,
        }
    }
    loaded
}

/// What loading a session found.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Loaded {
    /// The conversation (after the last `Clear`).
    pub(crate) messages: Vec<Message>,
    /// The model recorded, if any.
    pub(crate) model: Option<String>,
    /// The provider recorded, if any.
    pub(crate) provider: Option<String>,
    /// Where a damaged original was moved, if it was.
    pub(crate) moved_aside: Option<PathBuf>,
    /// How many records were lost to the damage.
    pub(crate) dropped: usize,
}

/// A session file.
#[derive(Debug, Clone)]
pub(crate) struct Session {
    path: PathBuf,
    name: String,
}

/// The directory sessions live in.
pub(crate) fn dir(data_dir: &Path) -> PathBuf {
    data_dir.join("sessions")
}

/// Checks a session name: letters, digits, `-`, `_`, `.`, not starting with `.`, at most
/// 64 characters.
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Session {
    /// The session `name` under `data_dir`.
    pub(crate) fn open(data_dir: &Path, name: &str) -> Result<Self, CliError> {
        if !valid_name(name) {
            return Err(CliError::Usage(format!(
                "invalid session name {name:?}: use letters, digits, '-', '_' or '.'"
            )));
        }
        Ok(Session {
            path: dir(data_dir).join(format!("{name}.jsonl")),
            name: name.to_owned(),
        })
    }

    /// Its name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the conversation, repairing or moving aside a damaged file (see the module
    /// docs). A missing file is an empty session.
    pub(crate) fn load(&self) -> std::io::Result<Loaded> {
        let bytes = match std::fs::read(&self.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Loaded::default()),
            Err(e) => return Err(e),
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut records = Vec::new();
        let mut bad_line = None;
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Record>(line.trim_end()) {
                Ok(r) if line.ends_with('\n') => records.push(r),
                _ => {
                    bad_line = Some(i);
                    break;
                }
            }
        }
        let mut loaded = Loaded::default();
        if let Some(i) = bad_line {
            let aside = self.aside_path();
            if i + 1 == lines.len() {
                // A torn tail: keep the original aside, write the good part back.
                std::fs::copy(&self.path, &aside)?;
                let mut good = String::new();
                for r in &records {
                    good.push_str(&serde_json::to_string(r).map_err(std::io::Error::other)?);
                    good.push('\n');
                }
                self.replace_with(good.as_bytes())?;
                loaded.dropped = 1;
            } else {
                std::fs::rename(&self.path, &aside)?;
                loaded.dropped = lines.len() - records.len();
                records.clear();
            }
            loaded.moved_aside = Some(aside);
        }
        Ok(Loaded {
            moved_aside: loaded.moved_aside,
            dropped: loaded.dropped,
            ..fold(records)
        })
    }

    /// Whether the session has a file.
    pub(crate) fn exists(&self) -> bool {
        self.path.is_file()
    }

    /// The session's file, or a usage error naming the session when there is none.
    fn existing(&self) -> Result<&Path, CliError> {
        if self.exists() {
            Ok(&self.path)
        } else {
            Err(CliError::Usage(format!(
                "no session named {:?}; `ollm sessions list` shows them",
                self.name
            )))
        }
    }

    /// Every readable record, in order, without repairing anything; and how many lines
    /// could not be read. An unknown session is a usage error.
    pub(crate) fn read_records(&self) -> Result<(Vec<Record>, usize), CliError> {
        let bytes = std::fs::read(self.existing()?)?;
        let text = String::from_utf8_lossy(&bytes);
        let mut records = Vec::new();
        let mut unreadable = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            match serde_json::from_str::<Record>(line) {
                Ok(r) => records.push(r),
                Err(_) => unreadable += 1,
            }
        }
        Ok((records, unreadable))
    }

    /// Deletes the session's file; an unknown session is a usage error.
    pub(crate) fn remove(&self) -> Result<(), CliError> {
        std::fs::remove_file(self.existing()?)?;
        Ok(())
    }

    /// Appends records, one line each, and syncs.
    pub(crate) fn append(&self, records: &[Record]) -> std::io::Result<()> {
        if records.is_empty() {
            return Ok(());
        }
        let mut buf = String::new();
        for r in records {
            buf.push_str(&serde_json::to_string(r).map_err(std::io::Error::other)?);
            buf.push('\n');
        }
        // Sessions hold whatever the model and the tools saw: owner-only (0600 in 0700).
        let opened = ollm_tools::private::open_private_append(&self.path)?;
        warn_once(&opened.warnings);
        let mut f = opened.file;
        f.write_all(buf.as_bytes())?;
        f.sync_data()
    }

    /// Replaces the whole file atomically (temp file in the same directory, then rename).
    pub(crate) fn replace_with(&self, contents: &[u8]) -> std::io::Result<()> {
        let d = self.path.parent().unwrap_or(Path::new("."));
        warn_once(&ollm_tools::private::create_private_dir(d)?);
        // The temporary file is created 0600, so the replaced session stays private.
        let mut tmp = tempfile::NamedTempFile::new_in(d)?;
        tmp.write_all(contents)?;
        tmp.as_file().sync_all()?;
        tmp.persist(&self.path).map_err(|e| e.error)?;
        Ok(())
    }

    fn aside_path(&self) -> PathBuf {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut n = 0;
        loop {
            let suffix = if n == 0 {
                format!("damaged-{secs}")
            } else {
                format!("damaged-{secs}-{n}")
            };
            let p = self.path.with_extension(format!("jsonl.{suffix}"));
            if !p.exists() {
                return p;
            }
            n += 1;
        }
    }
}

/// A saved session, for `ollm sessions list`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Listed {
    /// Its name.
    pub(crate) name: String,
    /// Size in bytes.
    pub(crate) bytes: u64,
    /// Last modified, seconds since the epoch.
    pub(crate) modified: Option<u64>,
}

/// The saved sessions, by name.
pub(crate) fn list(data_dir: &Path) -> std::io::Result<Vec<Listed>> {
    let d = dir(data_dir);
    let entries = match std::fs::read_dir(&d) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(stem) = name.strip_suffix(".jsonl") else {
            continue;
        };
        let meta = entry.metadata()?;
        out.push(Listed {
            name: stem.to_owned(),
            bytes: meta.len(),
            modified: meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs()),
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// The name of the session saved to last (`ollm run --continue`), if there is one: by
/// the file's modification time at full precision (two runs a second apart are told
/// apart); among equal times the name decides, so the choice is stable.
pub(crate) fn most_recent(data_dir: &Path) -> std::io::Result<Option<String>> {
    let mut latest: Option<(std::time::SystemTime, String)> = None;
    for s in list(data_dir)? {
        let path = dir(data_dir).join(format!("{}.jsonl", s.name));
        let modified = std::fs::metadata(&path)?.modified()?;
        if latest.as_ref().is_none_or(|(t, _)| modified > *t) {
            latest = Some((modified, s.name));
        }
    }
    Ok(latest.map(|(_, name)| name))
}

/// Shows each permission warning once per process (appends happen every turn).
pub(crate) fn warn_once(warnings: &[String]) {
    static SHOWN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    for w in warnings {
        if let Ok(mut shown) = SHOWN.lock() {
            if !shown.contains(w) {
                crate::ui::warn(w);
                shown.push(w.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msgs(s: &Session, n: usize) {
        let records: Vec<Record> = (0..n)
            .map(|i| Record::Message {
                message: Message::user(format!("m{i}")),
            })
            .collect();
        s.append(&records).unwrap();
    }

    #[test]
    fn round_trip_and_clear() {
        let d = tempfile::tempdir().unwrap();
        let s = Session::open(d.path(), "work").unwrap();
        assert_eq!(s.load().unwrap(), Loaded::default());
        s.append(&[Record::Meta {
            version: 1,
            provider: "ollama".into(),
            model: "qwen3".into(),
        }])
        .unwrap();
        msgs(&s, 2);
        let l = s.load().unwrap();
        assert_eq!(l.messages.len(), 2);
        assert_eq!(l.model.as_deref(), Some("qwen3"));
        s.append(&[Record::Clear]).unwrap();
        msgs(&s, 1);
        assert_eq!(s.load().unwrap().messages, vec![Message::user("m0")]);
        assert_eq!(list(d.path()).unwrap()[0].name, "work");
    }

    /// Issue 11: a `compact` record replaces what came before it, and the messages after
    /// it follow, so a resumed session is what the model saw.
    #[test]
    fn a_compact_record_replaces_the_conversation_before_it() {
        let d = tempfile::tempdir().unwrap();
        let s = Session::open(d.path(), "long").unwrap();
        msgs(&s, 5);
        let compacted = vec![
            Message::user("m0"),
            Message::user("[Summary] m1 to m3"),
            Message::user("m4"),
        ];
        let record = Record::Compact {
            summary: Some("m1 to m3".into()),
            turns_summarised: 3,
            turns_dropped: 0,
            messages: compacted.clone(),
        };
        s.append(std::slice::from_ref(&record)).unwrap();
        let line = std::fs::read_to_string(s.path()).unwrap();
        assert!(
            line.contains(r#"{"type":"compact","summary":"m1 to m3","#),
            "{line}"
        );
        assert_eq!(s.load().unwrap().messages, compacted);
        s.append(&[Record::Message {
            message: Message::user("after"),
        }])
        .unwrap();
        let mut expected = compacted;
        expected.push(Message::user("after"));
        assert_eq!(s.load().unwrap().messages, expected);
    }

    #[cfg(unix)]
    #[test]
    fn sessions_are_private() {
        // Issue 12, finding 2: sessions were created 0644 in 0755 folders.
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("data");
        let s = Session::open(&data, "t").unwrap();
        msgs(&s, 1);
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(s.path()), 0o600);
        assert_eq!(mode(s.path().parent().unwrap()), 0o700);
        assert_eq!(mode(&data), 0o700);
        s.replace_with(b"").unwrap();
        assert_eq!(mode(s.path()), 0o600);
    }

    #[test]
    fn a_torn_tail_is_repaired_and_the_original_kept() {
        let d = tempfile::tempdir().unwrap();
        let s = Session::open(d.path(), "t").unwrap();
        msgs(&s, 2);
        let original = {
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(s.path())
                .unwrap();
            f.write_all(br#"{"type":"message","mess"#).unwrap();
            std::fs::read(s.path()).unwrap()
        };
        let l = s.load().unwrap();
        assert_eq!(l.messages.len(), 2);
        assert_eq!(l.dropped, 1);
        let aside = l.moved_aside.unwrap();
        assert_eq!(std::fs::read(&aside).unwrap(), original);
        // The repaired file takes appends cleanly.
        msgs(&s, 1);
        assert_eq!(s.load().unwrap().messages.len(), 3);
        assert_eq!(s.load().unwrap().moved_aside, None);
    }

    #[test]
    fn a_damaged_middle_is_moved_aside_never_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let s = Session::open(d.path(), "t").unwrap();
        msgs(&s, 1);
        std::fs::OpenOptions::new()
            .append(true)
            .open(s.path())
            .unwrap()
            .write_all(b"garbage\n")
            .unwrap();
        msgs(&s, 1);
        let original = std::fs::read(s.path()).unwrap();
        let l = s.load().unwrap();
        assert!(l.messages.is_empty());
        assert_eq!(std::fs::read(l.moved_aside.unwrap()).unwrap(), original);
        assert!(!s.path().exists());
    }

    /// A line of a session file for the fuzz check: a record, or damage.
    #[derive(Debug, Clone)]
    enum Piece {
        Record(Record),
        Blank,
        Bytes(Vec<u8>),
    }

    fn piece() -> impl proptest::strategy::Strategy<Value = Piece> {
        use proptest::prelude::*;
        let record = prop_oneof![
            "\\PC{0,12}".prop_map(|t| Record::Message {
                message: Message::user(t)
            }),
            "[a-z:0-9]{0,8}".prop_map(|model| Record::Meta {
                version: 1,
                provider: "ollama".into(),
                model
            }),
            Just(Record::Clear),
            "\\PC{0,12}".prop_map(|t| Record::Compact {
                summary: Some(t.clone()),
                turns_summarised: 1,
                turns_dropped: 0,
                messages: vec![Message::user(t)],
            }),
        ];
        prop_oneof![
            6 => record.prop_map(Piece::Record),
            1 => Just(Piece::Blank),
            1 => proptest::collection::vec(any::<u8>(), 0..32).prop_map(Piece::Bytes),
        ]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// `cargo xtask fuzz` (issue 12): whatever a session file holds, loading never
        /// fails on its content or panics, a damaged original is kept byte for byte, a
        /// repaired file loads again the same and clean, and an undamaged file loads
        /// exactly its records.
        #[test]
        #[ignore = "long-running: cargo xtask fuzz"]
        fn fuzz_session_loader(
            pieces in proptest::collection::vec(piece(), 0..24),
            torn in proptest::prelude::any::<usize>(),
        ) {
            let mut bytes = Vec::new();
            let mut records = Vec::new();
            for p in &pieces {
                match p {
                    Piece::Record(r) => {
                        bytes.extend(serde_json::to_vec(r).unwrap());
                        records.push(r.clone());
                    }
                    Piece::Blank => bytes.extend(b"  "),
                    Piece::Bytes(b) => bytes.extend(b),
                }
                bytes.push(b'\n');
            }
            // A crash tears at most the last line: cut 0 to 8 bytes off the end.
            let cut = (torn % 9).min(bytes.len());
            bytes.truncate(bytes.len() - cut);
            let d = tempfile::tempdir().unwrap();
            let s = Session::open(d.path(), "f").unwrap();
            std::fs::create_dir_all(s.path().parent().unwrap()).unwrap();
            std::fs::write(s.path(), &bytes).unwrap();
            let first = s.load().unwrap();
            if let Some(aside) = &first.moved_aside {
                proptest::prop_assert_eq!(&std::fs::read(aside).unwrap(), &bytes);
            }
            let again = s.load().unwrap();
            proptest::prop_assert_eq!(again.moved_aside, None);
            proptest::prop_assert_eq!(&again.messages, &first.messages);
            proptest::prop_assert_eq!(&again.model, &first.model);
            let clean = cut == 0 && pieces.iter().all(|p| !matches!(p, Piece::Bytes(_)));
            if clean {
                proptest::prop_assert_eq!(first, fold(records));
            }
        }
    }

    #[test]
    fn names_are_checked() {
        let d = tempfile::tempdir().unwrap();
        for bad in ["", "../x", "a/b", ".hidden", &"x".repeat(65)] {
            assert!(Session::open(d.path(), bad).is_err(), "{bad}");
        }
        assert!(Session::open(d.path(), "my-chat_2.v1").is_ok());
    }
}
