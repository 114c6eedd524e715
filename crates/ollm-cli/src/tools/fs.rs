//! File tools: `read_file`, `list_dir`, `search_text` (read-only) and `write_file`.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use ollm_core::{Tool, ToolError};
use ollm_types::ToolSchema;
use serde_json::{Map, Value, json};

use super::approval::Approver;
use super::cap_output;
use super::workspace::Workspace;

/// Files larger than this are not read whole or searched.
const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// The most entries `list_dir` returns.
const MAX_ENTRIES: usize = 500;
/// The most matches `search_text` returns.
const MAX_MATCHES: usize = 200;
/// Matching lines longer than this are cut.
const MAX_LINE_CHARS: usize = 240;

fn str_arg<'a>(args: &'a Map<String, Value>, name: &str) -> Result<&'a str, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::Failed(format!("missing string argument `{name}`")))
}

fn opt_str<'a>(args: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

/// Runs blocking file work off the async threads.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ToolError::Failed(format!("the tool task failed: {e}")))?
}

/// `read_file`: a text file's contents, capped.
pub(crate) struct ReadFile {
    ws: Workspace,
    limit: usize,
}

impl ReadFile {
    /// The tool.
    pub(crate) fn new(ws: Workspace, limit: usize) -> Self {
        ReadFile { ws, limit }
    }
}

#[async_trait]
impl Tool for ReadFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "read_file",
            "Read a UTF-8 text file inside the working directory.",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Path relative to the working directory."}},
                "required": ["path"]
            }),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let path = self.ws.resolve_existing(str_arg(&arguments, "path")?)?;
        let limit = self.limit;
        blocking(move || {
            let meta = std::fs::metadata(&path).map_err(|e| ToolError::Failed(e.to_string()))?;
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
            Ok(Value::String(cap_output(&text, limit)))
        })
        .await
    }
}

/// `list_dir`: a directory's entries, directories marked with `/`.
pub(crate) struct ListDir {
    ws: Workspace,
    limit: usize,
}

impl ListDir {
    /// The tool.
    pub(crate) fn new(ws: Workspace, limit: usize) -> Self {
        ListDir { ws, limit }
    }
}

#[async_trait]
impl Tool for ListDir {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "list_dir",
            "List a directory inside the working directory (directories end with /).",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Directory, default \".\"."}}
            }),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let dir = self
            .ws
            .resolve_existing(opt_str(&arguments, "path").unwrap_or("."))?;
        let limit = self.limit;
        blocking(move || {
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
            names.truncate(MAX_ENTRIES);
            let mut text = names.join("\n");
            if total > MAX_ENTRIES {
                text.push_str(&format!("\n[{} more entries]", total - MAX_ENTRIES));
            }
            if total == 0 {
                text = "(empty directory)".into();
            }
            Ok(Value::String(cap_output(&text, limit)))
        })
        .await
    }
}

/// `search_text`: lines matching a literal or a regex, under a path, bounded.
pub(crate) struct SearchText {
    ws: Workspace,
    limit: usize,
}

impl SearchText {
    /// The tool.
    pub(crate) fn new(ws: Workspace, limit: usize) -> Self {
        SearchText { ws, limit }
    }
}

#[async_trait]
impl Tool for SearchText {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "search_text",
            "Search text files inside the working directory for a literal string or a regex; returns path:line: text.",
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string"},
                    "regex": {"type": "boolean", "description": "Treat the pattern as a regular expression (default false)."},
                    "path": {"type": "string", "description": "File or directory to search, default \".\"."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": MAX_MATCHES}
                },
                "required": ["pattern"]
            }),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let pattern = str_arg(&arguments, "pattern")?;
        let is_regex = arguments
            .get("regex")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let source = if is_regex {
            pattern.to_owned()
        } else {
            regex::escape(pattern)
        };
        let re = regex::RegexBuilder::new(&source)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| ToolError::Failed(format!("bad pattern: {e}")))?;
        let max = arguments
            .get("max_results")
            .and_then(Value::as_u64)
            .map_or(50, |n| (n as usize).clamp(1, MAX_MATCHES));
        let start = self
            .ws
            .resolve_existing(opt_str(&arguments, "path").unwrap_or("."))?;
        let ws = self.ws.clone();
        let limit = self.limit;
        blocking(move || {
            let mut hits = Vec::new();
            let mut more = false;
            search(&ws, &start, &re, max, &mut hits, &mut more);
            let mut text = if hits.is_empty() {
                "no matches".to_owned()
            } else {
                hits.join("\n")
            };
            if more {
                text.push_str(&format!("\n[stopped after {max} matches]"));
            }
            Ok(Value::String(cap_output(&text, limit)))
        })
        .await
    }
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
            if name.starts_with('.') || name == "target" || name == "node_modules" {
                continue;
            }
            search(ws, &child.path(), re, max, hits, more);
        }
    } else if meta.is_file() && meta.len() <= MAX_FILE_BYTES {
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
}

/// `write_file`: creates or replaces a file, after approval, atomically.
pub(crate) struct WriteFile {
    ws: Workspace,
    approver: Arc<Approver>,
}

impl WriteFile {
    /// The tool.
    pub(crate) fn new(ws: Workspace, approver: Arc<Approver>) -> Self {
        WriteFile { ws, approver }
    }
}

#[async_trait]
impl Tool for WriteFile {
    fn schema(&self) -> ToolSchema {
        ToolSchema::new(
            "write_file",
            "Create or replace a text file inside the working directory (the user must approve).",
            json!({
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"]
            }),
        )
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let asked = str_arg(&arguments, "path")?.to_owned();
        let content = str_arg(&arguments, "content")?.to_owned();
        let target = self.ws.resolve_for_write(&asked)?;
        let shown = self.ws.display(&target);
        let request = format!("write_file {shown} ({} bytes)", content.len());
        if !self.approver.approve("write_file", &shown, request).await {
            return Err(ToolError::Denied(None));
        }
        blocking(move || {
            let dir = target
                .parent()
                .ok_or_else(|| ToolError::Failed("no parent directory".into()))?;
            let mut tmp = tempfile::NamedTempFile::new_in(dir)
                .map_err(|e| ToolError::Failed(e.to_string()))?;
            tmp.write_all(content.as_bytes())
                .and_then(|()| tmp.as_file().sync_all())
                .map_err(|e| ToolError::Failed(e.to_string()))?;
            tmp.persist(&target)
                .map_err(|e| ToolError::Failed(e.to_string()))?;
            Ok(Value::String(format!(
                "wrote {} bytes to {shown}",
                content.len()
            )))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::super::approval::{Answer, Mode, tests::Scripted};
    use super::*;

    fn args(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn setup() -> (tempfile::TempDir, Workspace) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\ngamma beta\n").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b.rs"), "fn beta() {}\n").unwrap();
        std::fs::create_dir(dir.path().join(".git")).unwrap();
        std::fs::write(dir.path().join(".git/x"), "beta\n").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        (dir, ws)
    }

    #[tokio::test]
    async fn read_and_list() {
        let (_d, ws) = setup();
        let out = ReadFile::new(ws.clone(), 1000)
            .execute(args(json!({"path": "a.txt"})))
            .await
            .unwrap();
        assert_eq!(out, json!("alpha\nbeta\ngamma beta\n"));
        let out = ListDir::new(ws.clone(), 1000)
            .execute(Map::new())
            .await
            .unwrap();
        assert_eq!(out, json!(".git/\na.txt\nsub/"));
        let err = ReadFile::new(ws, 1000)
            .execute(args(json!({"path": "../a.txt"})))
            .await
            .unwrap_err();
        assert!(matches!(err, ToolError::Failed(_)));
    }

    #[tokio::test]
    async fn search_is_literal_by_default_and_bounded() {
        let (_d, ws) = setup();
        let tool = SearchText::new(ws, 10_000);
        let out = tool
            .execute(args(json!({"pattern": "beta"})))
            .await
            .unwrap();
        assert_eq!(
            out,
            json!("a.txt:2: beta\na.txt:3: gamma beta\nsub/b.rs:1: fn beta() {}")
        );
        let out = tool
            .execute(args(json!({"pattern": "b.ta\\(", "regex": true})))
            .await
            .unwrap();
        assert_eq!(out, json!("sub/b.rs:1: fn beta() {}"));
        let out = tool
            .execute(args(json!({"pattern": "b.ta"})))
            .await
            .unwrap();
        assert_eq!(out, json!("no matches"));
        let out = tool
            .execute(args(json!({"pattern": "beta", "max_results": 1})))
            .await
            .unwrap();
        assert_eq!(out, json!("a.txt:2: beta\n[stopped after 1 matches]"));
    }

    #[tokio::test]
    async fn write_needs_approval() {
        let (d, ws) = setup();
        let denied = Arc::new(Approver::new(Mode::Headless, &[], Scripted::new(&[])));
        let err = WriteFile::new(ws.clone(), denied)
            .execute(args(json!({"path": "new.txt", "content": "x"})))
            .await
            .unwrap_err();
        assert_eq!(err, ToolError::Denied(None));
        assert!(!d.path().join("new.txt").exists());
        let asked = Arc::new(Approver::new(
            Mode::Ask,
            &[],
            Scripted::new(&[Answer::Once]),
        ));
        WriteFile::new(ws, asked)
            .execute(args(json!({"path": "sub/new.txt", "content": "hello"})))
            .await
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(d.path().join("sub/new.txt")).unwrap(),
            "hello"
        );
    }
}
