//! File tools: `read_file`, `list_dir`, `search_text` (read-only) and `write_file`.
//!
//! # Decisions
//! - Reads are bounded: files over [`MAX_FILE_BYTES`] are neither read whole nor searched,
//!   listings and matches are capped, and every result is cut to the output limit.
//! - `read_file` puts the path on a line before the contents and the line count on one
//!   after (`data.csv:` ... `[data.csv ends: 6 lines]`): Qwen2.5-Coder models asked how
//!   many lines a file has counted wrong from the bare text (issue 24's eval), and with
//!   the count next to the path (`config.toml: 8 lines`) the 1.5B saved "port = 8" for
//!   "save the port from config.toml into port.txt" (issue 35, twice in two wordings).
//! - `list_dir` opens with a tally of the entries, files by extension and folders, and
//!   no total (`[3 .py files, 1 .md file, 1 folder]`): see `tally`.
//! - `search_text` walks without following symlinks and skips hidden entries and build
//!   output, so it cannot be led out of the folder or into `.git`.
//! - `search_text` meets the way small models search (issue 24's eval): smart case (a
//!   pattern without capitals ignores case); when nothing matched, a pattern that reads
//!   as a regex is tried as one and one with capitals is tried ignoring case (the result
//!   says so); and when still nothing matched, the lines that match elsewhere in the
//!   folder are shown for a search of one file or folder (`elsewhere`), a short file
//!   searched on its own is shown, a file the pattern names (`data.csv`) is shown, or else the paths whose
//!   name holds the pattern are named. A search of one short file, or for a file's
//!   name, that does match lines shows the file after them (`short_file`,
//!   `searched_for_a_file`).
//! - A file shown whole is said with what small models count or add up wrong from its
//!   text (`fs/summary.rs`): a table's totals under its name, a checklist's open and
//!   done items after its end line (`with_header`).
//! - `write_file` asks with the path and a short diff (or the head of a new file), writes
//!   a temporary file in the same folder and renames it over the target, so a reader never
//!   sees half a file; the replaced file's permissions are kept.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use ollm_core::{ToolError, TypedTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::approval::{Approver, Request};
use crate::workspace::Workspace;
use crate::{blocking, cap_output};

/// Files larger than this are not read whole or searched.
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// The most entries `list_dir` returns.
const MAX_ENTRIES: usize = 500;
/// The most matches `search_text` returns.
const MAX_MATCHES: usize = 200;
/// The most entries named when a folder is read as a file.
const FOLDER_ENTRIES: usize = 30;
/// A searched file this short is shown when nothing in it matched.
const SHORT_FILE_BYTES: u64 = 4096;
/// Matching lines longer than this are cut.
const MAX_LINE_CHARS: usize = 240;
/// Lines of a diff or of a new file's head shown when asking to write.
const PREVIEW_LINES: usize = 12;

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileArgs {
    /// Path relative to the working directory.
    pub path: String,
}

/// `read_file`: a text file's contents, capped.
#[derive(Debug)]
pub struct ReadFile {
    ws: Workspace,
    limit: usize,
}

impl ReadFile {
    /// The tool, returning at most `limit` bytes.
    pub fn new(ws: Workspace, limit: usize) -> Self {
        ReadFile { ws, limit }
    }
}

#[async_trait]
impl TypedTool for ReadFile {
    type Args = ReadFileArgs;

    fn name(&self) -> &str {
        "read_file"
    }

    fn description(&self) -> &str {
        "Read a UTF-8 text file inside the working directory."
    }

    async fn run(&self, args: ReadFileArgs) -> Result<Value, ToolError> {
        let path = self.ws.resolve_existing(&args.path)?;
        let shown = self.ws.display(&path);
        let limit = self.limit;
        let ws = self.ws.clone();
        blocking(move || {
            let meta = std::fs::metadata(&path).map_err(|e| ToolError::Failed(e.to_string()))?;
            if meta.is_dir() {
                return Err(ToolError::Failed(a_folder(&ws, &path)));
            }
            if !meta.is_file() {
                return Err(ToolError::Failed("not a regular file".into()));
            }
            if meta.len() > MAX_FILE_BYTES {
                return Err(ToolError::Failed(format!(
                    "the file has {} bytes; the limit is {MAX_FILE_BYTES}",
                    meta.len()
                )));
            }
            let bytes = std::fs::read(&path).map_err(|e| ToolError::Failed(e.to_string()))?;
            let text = String::from_utf8(bytes)
                .map_err(|_| ToolError::Failed("not a UTF-8 text file".into()))?;
            Ok(Value::String(cap_output(
                &with_header(&shown, &text, limit),
                limit,
            )))
        })
        .await
    }
}

/// `list_dir` on a file: the file, as `read_file` shows it, said to be one. The 0.5B
/// listed `config/app.toml`, got "Not a directory (os error 20)" and answered that the
/// port is 20. Files over the read limit are an error naming the file.
fn a_file(ws: &Workspace, path: &Path, limit: usize) -> Result<Value, ToolError> {
    let shown = ws.display(path);
    let too_big = std::fs::metadata(path).map_or(true, |m| m.len() > MAX_FILE_BYTES);
    let text = (!too_big)
        .then(|| {
            std::fs::read(path)
                .ok()
                .and_then(|b| String::from_utf8(b).ok())
        })
        .flatten()
        .ok_or_else(|| {
            ToolError::Failed(format!(
                "{shown} is a file, not a folder, and not a small text file"
            ))
        })?;
    let out = format!(
        "{shown} is a file, not a folder; its text: {}",
        with_header(&shown, &text, limit.saturating_sub(shown.len() + 40))
    );
    Ok(Value::String(cap_output(&out, limit)))
}

/// The error for `read_file` on a folder: what is in it, so the next call can name a
/// file (the 0.5B read the working folder itself, `/tmp/.../project`, and `config/`,
/// and a bare "not a regular file" led it nowhere).
fn a_folder(ws: &Workspace, dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| {
                    let mut name = e.file_name().to_string_lossy().into_owned();
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        name.push('/');
                    }
                    name
                })
                .filter(|name| !crate::map::skipped(name.trim_end_matches('/')))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    let more = names.len().saturating_sub(FOLDER_ENTRIES);
    names.truncate(FOLDER_ENTRIES);
    let mut listed = names.join(", ");
    if more > 0 {
        listed.push_str(&format!(", and {more} more"));
    }
    let shown = ws.display(dir);
    let inside = if shown == "." {
        String::new()
    } else {
        format!("{shown}/")
    };
    format!(
        "{shown} is a folder, not a file; read one of its files by its path (\
         {inside}NAME). It holds: {listed}"
    )
}

/// A file's contents under a line naming it and over one counting its lines
/// (`data.csv:` ... `[data.csv ends: 6 lines]`): small models asked "how many lines"
/// count badly, the name tells them which of several reads a result is, and a count next
/// to the name was read as the file's value (module docs). What small models count or
/// add up wrong (`fs/summary.rs`) is said with it, where they read it best:
/// - a table's totals first, under the name: asked which region sold the most units or
///   the total, the two models answered as well or better with them there (probes of
///   2026-11-28: 0.5B totals 6/6 against 4/6 at the end);
/// - a checklist's open and done items last, after the end line: asked how many items
///   are open, the 1.5B answered right 21 of 27 times with them there against 13 of 27
///   under the name (three wordings, the server's sampling and greedy, 2026-11-28).
///   When the whole would not fit in `room` bytes (the caller's output limit, less what
///   it writes around the file), the items go under the name, where the cut that
///   follows keeps them.
///
/// The repeat guard quotes only a result's head, but no repeat's result is kept in
/// the history (`skip-repeat-turn`, `skip-repeat-calls`), so the end is what the model
/// reads.
fn with_header(shown: &str, text: &str, room: usize) -> String {
    let lines = text.lines().count();
    let unit = if lines == 1 { "line" } else { "lines" };
    let end = if text.ends_with('\n') || text.is_empty() {
        ""
    } else {
        "\n"
    };
    let line = |said: Option<String>| said.map_or(String::new(), |s| format!("[{s}]\n"));
    let first = line(summary::totals(shown, text));
    let counts = line(summary::counts(text));
    let whole = format!("{shown}:\n{first}{text}{end}[{shown} ends: {lines} {unit}]");
    if whole.len() + 1 + counts.len() <= room {
        let last = counts.trim_end();
        return if last.is_empty() {
            whole
        } else {
            format!("{whole}\n{last}")
        };
    }
    format!("{shown}:\n{first}{counts}{text}{end}[{shown} ends: {lines} {unit}]")
}

/// Arguments of `list_dir`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct ListDirArgs {
    /// Directory, default ".".
    #[serde(default)]
    pub path: Option<String>,
}

/// `list_dir`: a directory's entries, directories marked with `/`.
#[derive(Debug)]
pub struct ListDir {
    ws: Workspace,
    limit: usize,
}

impl ListDir {
    /// The tool, returning at most `limit` bytes.
    pub fn new(ws: Workspace, limit: usize) -> Self {
        ListDir { ws, limit }
    }
}

#[async_trait]
impl TypedTool for ListDir {
    type Args = ListDirArgs;

    fn name(&self) -> &str {
        "list_dir"
    }

    fn description(&self) -> &str {
        "List a directory inside the working directory (directories end with /)."
    }

    async fn run(&self, args: ListDirArgs) -> Result<Value, ToolError> {
        let dir = self
            .ws
            .resolve_existing(args.path.as_deref().unwrap_or("."))?;
        let limit = self.limit;
        let ws = self.ws.clone();
        blocking(move || {
            if std::fs::metadata(&dir).is_ok_and(|m| m.is_file()) {
                return a_file(&ws, &dir, limit);
            }
            let mut names = Vec::new();
            for entry in std::fs::read_dir(&dir).map_err(|e| ToolError::Failed(e.to_string()))? {
                let entry = entry.map_err(|e| ToolError::Failed(e.to_string()))?;
                let mut name = entry.file_name().to_string_lossy().into_owned();
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    name.push('/');
                }
                names.push(name);
            }
            names.sort();
            let total = names.len();
            let tally = tally(&names);
            names.truncate(MAX_ENTRIES);
            let mut text = names.join("\n");
            if total > MAX_ENTRIES {
                text.push_str(&format!("\n[{} more entries]", total - MAX_ENTRIES));
            }
            if total == 0 {
                text = "(empty directory)".into();
            } else {
                text = format!("{tally}\n{text}");
            }
            Ok(Value::String(cap_output(&text, limit)))
        })
        .await
    }
}

/// The count of a listing's `names` (folders end in `/`), files by extension, most
/// first, and no total: `2 .py files, 1 .md file, 1 folder`. Small models asked "how
/// many python scripts" counted every entry of a bare listing (issue 35's eval: the 1.5B
/// said 5 of 3 `.py` files and 2 others, in all three wordings), and led by a total
/// they answered the total.
fn tally(names: &[String]) -> String {
    let folders = names.iter().filter(|n| n.ends_with('/')).count();
    let mut kinds: Vec<(String, usize)> = Vec::new();
    for name in names.iter().filter(|n| !n.ends_with('/')) {
        let kind = match name.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() => format!(".{}", ext.to_lowercase()),
            _ => String::new(),
        };
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
    }
    kinds.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let files = |n: usize| if n == 1 { "file" } else { "files" };
    let mut each: Vec<String> = (kinds.iter())
        .map(|(kind, n)| match kind.as_str() {
            "" => format!("{n} {} without an extension", files(*n)),
            _ => format!("{n} {kind} {}", files(*n)),
        })
        .collect();
    if folders > 0 {
        let unit = if folders == 1 { "folder" } else { "folders" };
        each.push(format!("{folders} {unit}"));
    }
    format!("[{}]", each.join(", "))
}

/// Arguments of `search_text`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchTextArgs {
    /// The text (or regular expression) to look for.
    pub pattern: String,
    /// Treat the pattern as a regular expression (default false).
    #[serde(default)]
    pub regex: Option<bool>,
    /// File or directory to search, default ".".
    #[serde(default)]
    pub path: Option<String>,
    /// The most matches to return (1 to 200, default 50).
    #[serde(default)]
    #[schemars(range(min = 1, max = 200))]
    pub max_results: Option<u64>,
}

/// `search_text`: lines matching a literal or a regex, under a path, bounded.
#[derive(Debug)]
pub struct SearchText {
    ws: Workspace,
    limit: usize,
}

impl SearchText {
    /// The tool, returning at most `limit` bytes.
    pub fn new(ws: Workspace, limit: usize) -> Self {
        SearchText { ws, limit }
    }
}

#[async_trait]
impl TypedTool for SearchText {
    type Args = SearchTextArgs;

    fn name(&self) -> &str {
        "search_text"
    }

    fn description(&self) -> &str {
        "Search text files inside the working directory for a literal string or a regex; returns path:line: text."
    }

    async fn run(&self, args: SearchTextArgs) -> Result<Value, ToolError> {
        let tries = attempts(&args.pattern, args.regex.unwrap_or(false))
            .map_err(|e| ToolError::Failed(format!("bad pattern: {e}")))?;
        let max = args.max_results.map_or(50, |n| {
            usize::try_from(n).map_or(MAX_MATCHES, |n| n.clamp(1, MAX_MATCHES))
        });
        let start = self
            .ws
            .resolve_existing(args.path.as_deref().unwrap_or("."))?;
        let ws = self.ws.clone();
        let limit = self.limit;
        let wanted = args.pattern.clone();
        blocking(move || {
            let (mut hits, mut more) = (Vec::new(), false);
            let mut note = "";
            for (re, why) in &tries {
                search(&ws, &start, re, max, &mut hits, &mut more);
                if !hits.is_empty() {
                    note = why;
                    break;
                }
            }
            if hits.is_empty() {
                let text = elsewhere(&ws, &tries, &start, (max, limit))
                    .unwrap_or_else(|| no_matches(&ws, &wanted, &start, limit, max));
                return Ok(Value::String(cap_output(&text, limit)));
            }
            let mut text = format!("{note}{}", hits.join("\n"));
            if more {
                text.push_str(&format!("\n[stopped after {max} matches]"));
            }
            let room = limit.saturating_sub(text.len() + 40);
            if let Some(file) = short_file(&ws, &start, room) {
                text.push_str(&format!("\n\nthat file is short; all of it: {file}"));
            } else if let Some(file) = searched_for_a_file(&ws, &wanted, room) {
                text.push_str(&format!("\n\nthat is also a file's name; {file}"));
            }
            Ok(Value::String(cap_output(&text, limit)))
        })
        .await
    }
}

/// The searches to try in order, each with the note its matches are shown under: the
/// pattern as asked (smart case); when it reads as a regex and was not asked as one, as
/// a regex (`.*`, `^port`: small models write one and leave `regex` out, or fill it with
/// its default); when it holds a capital, each of those ignoring case (the 1.5B
/// searched `Release.*` in a file that says "The release codename").
fn attempts(text: &str, as_regex: bool) -> Result<Vec<(regex::Regex, &'static str)>, regex::Error> {
    let smart = !text.chars().any(char::is_uppercase);
    let mut tries = vec![(pattern(text, as_regex, smart)?, "")];
    let also_regex = !as_regex && looks_like_regex(text);
    if also_regex {
        if let Ok(re) = pattern(text, true, smart) {
            tries.push((re, "no matches as text; as a regular expression:\n"));
        }
    }
    if !smart {
        tries.push((
            pattern(text, as_regex, true)?,
            "no matches with that case; ignoring case:\n",
        ));
        if also_regex {
            if let Ok(re) = pattern(text, true, true) {
                tries.push((
                    re,
                    "no matches as text; as a regular expression, ignoring case:\n",
                ));
            }
        }
    }
    Ok(tries)
}

/// The pattern as a regex, the text escaped unless `as_regex`. Smart case first (a
/// pattern without capitals ignores case, as ripgrep's `--smart-case`: asked who
/// maintains a project, the model searched `maintainer` and missed `Maintainer: ...`).
fn pattern(text: &str, as_regex: bool, ignore_case: bool) -> Result<regex::Regex, regex::Error> {
    let source = if as_regex {
        text.to_owned()
    } else {
        regex::escape(text)
    };
    regex::RegexBuilder::new(&source)
        .case_insensitive(ignore_case)
        .size_limit(1 << 20)
        .build()
}

/// Whether a pattern reads as a regex rather than text: it holds one of the constructs
/// people write (`.*`, `.+`, `\\d`, `\\s`, `\\w`, `^`, `$`, `[...]`, `|`).
fn looks_like_regex(text: &str) -> bool {
    [".*", ".+", "\\d", "\\s", "\\w", "\\b", "[", "|"]
        .iter()
        .any(|m| text.contains(m))
        || text.starts_with('^')
        || text.ends_with('$')
}

/// The text of the one file whose path or name the pattern is, when it has a `.` or a
/// `/` (`backup.py`, not `backup`), as `read_file` gives it: shown after the matches.
/// The 1.5B, asked "how many days of backups does backup.py keep?", searched for
/// `backup.py`, got the README's line that mentions it, and answered "1 day" (issue
/// 35's eval, twice); it meant to look at the file.
fn searched_for_a_file(ws: &Workspace, wanted: &str, room: usize) -> Option<String> {
    let needle = wanted.trim().trim_start_matches("./").to_lowercase();
    let base = needle.rsplit('/').next().unwrap_or_default();
    let file_like = needle.contains('/')
        || base
            .rsplit_once('.')
            .is_some_and(|(s, e)| !s.is_empty() && !e.is_empty());
    if !file_like || needle.contains(char::is_whitespace) {
        return None;
    }
    named_file(ws, &needle, room)
}

/// The result when a search of one file or folder found nothing and the rest of the
/// working folder has matching lines: those lines (at least 5, at most 20), under a
/// note that says where they are, and then the file searched, when it is short. The
/// 1.5B searched `Cargo.toml` for the port the service listens on (it is in
/// `config.toml`), and `cities.csv` for the units sold (they are in `sales.csv`), got
/// "no matches" and the file it had picked, and answered from memory (eval tuning
/// part, 2026-11-27). `None` when the search was of the whole folder or nothing else
/// matches either.
fn elsewhere(
    ws: &Workspace,
    tries: &[(regex::Regex, &'static str)],
    searched: &Path,
    (max, limit): (usize, usize),
) -> Option<String> {
    if searched == ws.root() {
        return None;
    }
    let shown = ws.display(searched);
    let inside = |hit: &String| {
        hit.strip_prefix(&shown)
            .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('/'))
    };
    let max = max.clamp(5, 20);
    let (mut hits, mut more) = (Vec::new(), false);
    for (re, _) in tries {
        search(ws, ws.root(), re, MAX_MATCHES, &mut hits, &mut more);
        hits.retain(|hit| !inside(hit));
        if !hits.is_empty() {
            break;
        }
    }
    if hits.is_empty() {
        return None;
    }
    let more = more || hits.len() > max;
    hits.truncate(max);
    let mut text = format!(
        "no matches in {shown}; elsewhere in the folder:\n{}",
        hits.join("\n")
    );
    if more {
        text.push_str(&format!("\n[stopped after {max} matches]"));
    }
    let room = limit.saturating_sub(text.len() + shown.len() + 20);
    if let Some(file) = short_file(ws, searched, room) {
        text.push_str(&format!("\n\n{shown}, which is short: {file}"));
    }
    Some(text)
}

/// The result when nothing matched: said plainly, with the paths whose name holds the
/// pattern (the model searched file contents for `data.csv`, the name of a file). When
/// one file is named by the pattern exactly (its path or its name), its text follows as
/// `read_file` gives it: the Qwen2.5-Coder models searched for `data.csv` or
/// `README.md`, then answered "0 lines" or "4597 lines" from a bare "no matches", or
/// searched again; they meant to look at the file.
fn no_matches(ws: &Workspace, wanted: &str, searched: &Path, limit: usize, max: usize) -> String {
    let room = limit.saturating_sub(100);
    if let Some(text) = short_file(ws, searched, room) {
        return cap_output(
            &format!("no matches in that file, which is short; {text}"),
            limit,
        );
    }
    let needle = wanted.trim().trim_start_matches("./").to_lowercase();
    if needle.is_empty() {
        return "no matches".to_owned();
    }
    if let Some(text) = named_file(ws, &needle, room) {
        return cap_output(
            &format!("no matches in the files' text, but that is a file; {text}"),
            limit,
        );
    }
    if let Some((name, text)) = mentioned_file(ws, &needle, room) {
        return cap_output(
            &format!("no matches in the files' text; the pattern names the file {name}: {text}"),
            limit,
        );
    }
    if let Some(text) = lines_with_words(ws, &needle, searched, max) {
        return text;
    }
    let named: Vec<String> = ws
        .walk()
        .into_iter()
        .filter(|p| {
            let name = p
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or_default();
            name.to_lowercase().contains(&needle)
        })
        .take(10)
        .collect();
    if named.is_empty() {
        "no matches".to_owned()
    } else {
        format!(
            "no matches in the files' text; paths whose name contains it: {}",
            named.join(", ")
        )
    }
}

/// Words that say nothing about what a line holds, left out of [`lines_with_words`].
const FILLER_WORDS: &[&str] = &[
    "about", "again", "all", "and", "any", "are", "but", "can", "could", "did", "does", "for",
    "from", "get", "had", "has", "have", "how", "its", "not", "our", "please", "the", "that",
    "their", "there", "these", "this", "those", "was", "were", "what", "when", "where", "which",
    "who", "why", "with", "would", "you", "your",
];

/// The lines that hold a word of a phrase no line holds whole, the lines with the most
/// of its words first, under a note that says so: `None` for a pattern of one word,
/// one with no word that says something (three letters or more, not [`FILLER_WORDS`]),
/// or when no line holds any. The 1.5B searched the notes for `plumber's number`, `launch to`
/// and `launch date?` (eval tuning part, 2026-11-27), found nothing, and answered that
/// the notes do not say; the lines were `Plumber: ... 5550 1234` and `The launch moves
/// to 18 April`. Each word is matched at the start of a word, ignoring case (`launch`
/// finds `launched`), a plural `s` of a longer word left off (`keeps` finds
/// `KEEP_DAYS`: the 1.5B searched `backup script keeps`). At least 5 lines are shown
/// whatever `max` says: the 1.5B asks for 1 in most searches, and this search is the
/// tool's guess, not the one it asked for.
fn lines_with_words(ws: &Workspace, needle: &str, searched: &Path, max: usize) -> Option<String> {
    let max = max.max(5);
    let mut words: Vec<String> = needle
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .map(|w| w.trim_matches('\'').trim_end_matches("'s"))
        .filter(|w| w.chars().count() >= 3 && !FILLER_WORDS.contains(w))
        .map(|w| match w.strip_suffix('s') {
            Some(stem) if stem.chars().count() >= 4 && !stem.ends_with('s') => stem,
            _ => w,
        })
        .map(str::to_owned)
        .collect();
    let mut seen = std::collections::HashSet::new();
    words.retain(|w| seen.insert(w.clone()));
    if words.is_empty() || needle.split_whitespace().count() < 2 {
        return None;
    }
    let any = words.iter().map(|w| regex::escape(w)).collect::<Vec<_>>();
    let re = regex::RegexBuilder::new(&format!(r"\b(?:{})", any.join("|")))
        .case_insensitive(true)
        .build()
        .ok()?;
    let (mut hits, mut more) = (Vec::new(), false);
    search(ws, searched, &re, MAX_MATCHES, &mut hits, &mut more);
    if hits.is_empty() {
        return None;
    }
    let held = |hit: &String| {
        let line = hit.to_lowercase();
        words.iter().filter(|w| line.contains(w.as_str())).count()
    };
    hits.sort_by_key(|hit| std::cmp::Reverse(held(hit)));
    let more = more || hits.len() > max;
    hits.truncate(max);
    let mut text = format!(
        "no line holds \"{}\"; lines with its words ({}), most first:\n{}",
        needle.trim(),
        words.join(", "),
        hits.join("\n")
    );
    if more {
        text.push_str(&format!("\n[stopped after {max} matches]"));
    }
    Some(text)
}

/// The text of `path`, as `read_file` shows it, when it is a file of at most
/// [`SHORT_FILE_BYTES`]: a search of one short file that found nothing is answered with
/// the file (the 1.5B searched `config/app.toml` for `server_port`, found nothing, and
/// answered without the port), and one that found lines shows the file after them (the
/// 1.5B, asked which region sold the most units, searched `sales.csv` for `units` with
/// `max_results` 1, got the header alone, and named no region: eval tuning part,
/// 2026-11-27, three wordings).
fn short_file(ws: &Workspace, path: &Path, room: usize) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() || meta.len() > SHORT_FILE_BYTES {
        return None;
    }
    let text = String::from_utf8(std::fs::read(path).ok()?).ok()?;
    Some(with_header(&ws.display(path), &text, room))
}

/// The one file that a word of `needle` (lower case, several words) names exactly, and
/// its text: the 0.5B searched for `launch code in notes.txt`, the question itself.
fn mentioned_file(ws: &Workspace, needle: &str, room: usize) -> Option<(String, String)> {
    let words: Vec<&str> = needle
        .split(|c: char| c.is_whitespace() || "\"'`,;()".contains(c))
        .map(|w| w.trim_end_matches(['.', '?', '!', ':']))
        .filter(|w| w.contains('.') && *w != needle)
        .collect();
    let mut found = words
        .iter()
        .filter_map(|w| named_file(ws, w, room).map(|text| ((*w).to_owned(), text)));
    let first = found.next()?;
    found.all(|(_, text)| text == first.1).then_some(first)
}

/// The text of the one file that `needle` (lower case) names exactly, by path, by
/// name or by name without its extension, as `read_file` shows it: `None` when no file
/// or several do, or it cannot be read as a small UTF-8 text. The stem too since the
/// 0.5B searched the notes for `todo`, asked what is still open on the to-do list, and
/// answered "no items" from the path `todo.md` named alone (eval tuning part,
/// 2026-11-27).
fn named_file(ws: &Workspace, needle: &str, room: usize) -> Option<String> {
    let mut named = ws.walk().into_iter().filter(|p| {
        let p = p.to_lowercase();
        let name = p.rsplit('/').next().unwrap_or_default();
        let stem = name.rsplit_once('.').map_or(name, |(stem, _)| stem);
        !p.ends_with('/') && (p == needle || name == needle || stem == needle)
    });
    let (one, None) = (named.next()?, named.next()) else {
        return None;
    };
    let path = ws.resolve_existing(&one).ok()?;
    let meta = std::fs::metadata(&path).ok()?;
    if !meta.is_file() || meta.len() > MAX_FILE_BYTES {
        return None;
    }
    let text = String::from_utf8(std::fs::read(&path).ok()?).ok()?;
    Some(with_header(&ws.display(&path), &text, room))
}

/// Walks `path` without following symlinks, skipping hidden entries and build output.
fn search(
    ws: &Workspace,
    path: &Path,
    re: &regex::Regex,
    max: usize,
    hits: &mut Vec<String>,
    more: &mut bool,
) {
    if *more {
        return;
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.is_dir() {
        let Ok(entries) = std::fs::read_dir(path) else {
            return;
        };
        let mut children: Vec<_> = entries.filter_map(Result::ok).collect();
        children.sort_by_key(std::fs::DirEntry::file_name);
        for child in children {
            let name = child.file_name();
            let name = name.to_string_lossy();
            if crate::map::skipped(&name) {
                continue;
            }
            search(ws, &child.path(), re, max, hits, more);
        }
    } else if meta.is_file() && meta.len() <= MAX_FILE_BYTES {
        search_file(ws, path, re, max, hits, more);
    }
}

fn search_file(
    ws: &Workspace,
    path: &Path,
    re: &regex::Regex,
    max: usize,
    hits: &mut Vec<String>,
    more: &mut bool,
) {
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    if bytes.iter().take(8192).any(|&b| b == 0) {
        return;
    }
    let text = String::from_utf8_lossy(&bytes);
    for (i, line) in text.lines().enumerate() {
        if re.is_match(line) {
            if hits.len() == max {
                *more = true;
                return;
            }
            let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
            hits.push(format!("{}:{}: {}", ws.display(path), i + 1, shown));
        }
    }
}

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct WriteFileArgs {
    /// Path relative to the working directory.
    pub path: String,
    /// The whole new content.
    pub content: String,
}

/// `write_file`: creates or replaces a file, after approval, atomically.
#[derive(Debug)]
pub struct WriteFile {
    ws: Workspace,
    approver: Arc<Approver>,
}

impl WriteFile {
    /// The tool.
    pub fn new(ws: Workspace, approver: Arc<Approver>) -> Self {
        WriteFile { ws, approver }
    }
}

#[async_trait]
impl TypedTool for WriteFile {
    type Args = WriteFileArgs;

    fn name(&self) -> &str {
        "write_file"
    }

    fn description(&self) -> &str {
        "Create or replace a text file inside the working directory (the user must approve)."
    }

    async fn run(&self, args: WriteFileArgs) -> Result<Value, ToolError> {
        let WriteFileArgs { path, content } = args;
        let target = self.ws.resolve_for_write(&path)?;
        let shown = self.ws.display(&target);
        let old = std::fs::read(&target).ok();
        let request = Request::WriteFile {
            path: shown.clone(),
            bytes: content.len(),
            preview: preview(old.as_deref(), &content),
        };
        if !self.approver.approve("write_file", &shown, request).await {
            return Err(self.approver.denial());
        }
        blocking(move || {
            replace_atomically(&target, content.as_bytes())?;
            let unit = if content.len() == 1 { "byte" } else { "bytes" };
            Ok(Value::String(format!(
                "wrote {} {unit} to {shown}",
                content.len()
            )))
        })
        .await
    }
}

/// Writes `bytes` to a temporary file beside `target`, gives it the target's permissions
/// if the target exists, and renames it over the target.
fn replace_atomically(target: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    let failed = |e: std::io::Error| ToolError::Failed(e.to_string());
    let dir = target
        .parent()
        .ok_or_else(|| ToolError::Failed("no parent directory".into()))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(failed)?;
    tmp.write_all(bytes).map_err(failed)?;
    if let Ok(meta) = std::fs::metadata(target) {
        tmp.as_file()
            .set_permissions(meta.permissions())
            .map_err(failed)?;
    }
    tmp.as_file().sync_all().map_err(failed)?;
    tmp.persist(target)
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    Ok(())
}

/// What the approval question shows: for a new file its first lines, for a replaced one
/// the lines that change (between the common head and tail), each capped.
pub(crate) fn preview(old: Option<&[u8]>, new: &str) -> String {
    let Some(old) = old else {
        return head("+ ", &new.lines().collect::<Vec<_>>());
    };
    let Ok(old) = std::str::from_utf8(old) else {
        return format!(
            "(replaces a binary file)\n{}",
            head("+ ", &new.lines().collect::<Vec<_>>())
        );
    };
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let front = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let back = old[front..]
        .iter()
        .rev()
        .zip(new[front..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let removed = &old[front..old.len() - back];
    let added = &new[front..new.len() - back];
    if removed.is_empty() && added.is_empty() {
        return "(no change)".to_owned();
    }
    let mut text = format!("@@ line {} @@", front + 1);
    for (sign, lines) in [("- ", removed), ("+ ", added)] {
        if !lines.is_empty() {
            text.push('\n');
            text.push_str(&head(sign, lines));
        }
    }
    text
}

fn head(sign: &str, lines: &[&str]) -> String {
    let mut shown: Vec<String> = lines
        .iter()
        .take(PREVIEW_LINES)
        .map(|l| {
            format!(
                "{sign}{}",
                l.chars().take(MAX_LINE_CHARS).collect::<String>()
            )
        })
        .collect();
    if lines.len() > PREVIEW_LINES {
        shown.push(format!("  [{} more lines]", lines.len() - PREVIEW_LINES));
    }
    shown.join("\n")
}

mod summary;
#[cfg(test)]
mod tests;
