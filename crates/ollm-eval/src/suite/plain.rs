//! The plain column: the same tasks through a bare OpenAI-client loop, to show what ollm
//! adds.
//!
//! # Decisions
//!
//! - **No recovery, no guards, no nudges, no system prompt**: the user's prompt and the
//!   tool schemas go to `/v1/chat/completions` (not streamed); only calls the server
//!   parsed into `tool_calls` run; a reply without them is the answer. Up to the same
//!   turn limit as ollm's columns; past it the run ends `max_turns`.
//! - **The same tool schemas as ollm's built-in tools**, kept as data in
//!   `crates/ollm-eval/data/tools.json`, captured from the request `ollm run` sends (its `tools`
//!   array, unchanged). The tools behave like ollm's on this folder: paths confined to it
//!   (absolute paths and `..` refused), `list_dir` marks folders with `/`, `search_text`
//!   prints `path:line: text`, and `run_command` runs a few read-only programs without a
//!   shell. A refused or unknown call gets an `Error: ...` result and does not count as
//!   run.
//! - **The same generation cap** (`max_tokens` 4096, ollm's default) and sampling as the
//!   ollm columns of the same eval run.
//! - **HTTP by hand**: one HTTP/1.1 request per turn over `std::net::TcpStream` with
//!   `Content-Length` and `Connection: close`, as xtask's `llama::server` does. Written
//!   when the eval lived in xtask, which had no HTTP client; reqwest is in this crate's
//!   tree now (through `ollm-bridge`), but a request by hand keeps the plain column free
//!   of any client's retries and defaults, and it is all the loop needs.
//! - A refused connection or a broken reply is a harness failure (`Err`), not a model
//!   failure; a non-200 status is the run's `error` finish.

use std::fs;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use super::context::{RUN_TIMEOUT, RunContext};
use super::grade::{Call, Run};
use super::toolset::OllmTools;

/// `max_tokens` on every request: ollm's default cap.
const MAX_TOKENS: u32 = 4096;
/// Programs `run_command` runs here: read-only ones.
const PROGRAMS: &[&str] = &[
    "ls", "cat", "head", "tail", "wc", "pwd", "echo", "grep", "find",
];
/// The most bytes a tool result keeps.
const RESULT_LIMIT: usize = 16 * 1024;

/// Runs `prompt` through the bare loop in `project`, against the OpenAI base URL `url`
/// (the server's, or an `ollm serve` in front of it); its calls run on the bare tools
/// here, or on ollm's built-in tools when `ollm_tools` (`toolset.rs`).
pub(super) fn run(
    ctx: &RunContext,
    url: &str,
    prompt: &str,
    project: &Path,
    ollm_tools: bool,
) -> Result<Run> {
    let builtin = ollm_tools.then(|| OllmTools::new(project)).transpose()?;
    let deadline = Instant::now() + RUN_TIMEOUT;
    let mut messages = vec![json!({"role": "user", "content": prompt})];
    let mut seen = Run {
        exit_code: Some(0),
        ..Run::default()
    };
    for _ in 0..ctx.max_turns {
        let Some(reply) = ask(ctx, url, &messages, deadline)? else {
            seen.finish = Some("timeout".into());
            return Ok(seen);
        };
        seen.turns += 1;
        let (status, text) = reply;
        if status != 200 {
            seen.finish = Some("error".into());
            seen.answer = text;
            return Ok(seen);
        }
        let reply: Value = serde_json::from_str(&text).context("the reply is not JSON")?;
        seen.prompt_tokens += reply["usage"]["prompt_tokens"].as_u64().unwrap_or(0);
        seen.completion_tokens += reply["usage"]["completion_tokens"].as_u64().unwrap_or(0);
        note_coached(&mut seen, &reply);
        let choice = &reply["choices"][0];
        let message = &choice["message"];
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if calls.is_empty() {
            seen.answer = message["content"].as_str().unwrap_or_default().to_owned();
            seen.finish = choice["finish_reason"].as_str().map(str::to_owned);
            return Ok(seen);
        }
        messages.push(message.clone());
        for call in calls {
            let (result, ran) = run_call(project, builtin.as_ref(), &call, &mut seen);
            messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": result}));
            if let Some(last) = seen.calls.last_mut() {
                last.ran = ran;
            }
        }
    }
    seen.finish = Some("max_turns".into());
    Ok(seen)
}

/// One turn's request with `messages`: the reply's status and body, or `None` when the
/// run's `deadline` passed before or during it.
fn ask(
    ctx: &RunContext,
    url: &str,
    messages: &[Value],
    deadline: Instant,
) -> Result<Option<(u16, String)>> {
    let mut body = json!({"model": ctx.model, "messages": messages, "tools": ctx.tools,
        "max_tokens": MAX_TOKENS, "stream": false});
    if let Some(t) = ctx.temperature {
        body["temperature"] = json!(t);
    }
    let Some(left) = deadline.checked_duration_since(Instant::now()) else {
        return Ok(None);
    };
    match post(url, "/chat/completions", &body.to_string(), left) {
        Ok(reply) => Ok(Some(reply)),
        Err(_) if Instant::now() >= deadline => Ok(None),
        Err(err) => Err(err),
    }
}

/// Counts the coach's rule that `ollm serve` names in a reply (`ollm.repair.rule`: the
/// rule that kept calls back, or the nudge whose turn the reply came from).
fn note_coached(seen: &mut Run, reply: &Value) {
    if let Some(rule) = reply["ollm"]["repair"]["rule"].as_str() {
        *seen.coached.entry(rule.to_owned()).or_default() += 1;
    }
}

/// Records one server-parsed call in `seen` and runs it (on `builtin` when given): its
/// result text, and whether it ran.
fn run_call(
    project: &Path,
    builtin: Option<&OllmTools>,
    call: &Value,
    seen: &mut Run,
) -> (String, bool) {
    let name = call["function"]["name"].as_str().unwrap_or_default();
    let raw = call["function"]["arguments"].as_str().unwrap_or("{}");
    let args: Value = serde_json::from_str(raw).unwrap_or(Value::Null);
    seen.calls.push(Call {
        name: name.to_owned(),
        args: args.clone(),
        ran: false,
    });
    if !args.is_object() {
        return (
            format!("Error: the arguments are not a JSON object: {raw}"),
            false,
        );
    }
    let result = match builtin {
        Some(tools) => tools.execute(name, &args),
        None => execute(project, name, &args),
    };
    match result {
        Ok(mut text) => {
            text.truncate(floor_char_boundary(&text, RESULT_LIMIT));
            (text, true)
        }
        Err(err) => (format!("Error: {err}"), false),
    }
}

fn floor_char_boundary(text: &str, at: usize) -> usize {
    (0..=at.min(text.len()))
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0)
}

/// One call of a built-in tool, in `project`.
pub(super) fn execute(project: &Path, name: &str, args: &Value) -> Result<String, String> {
    let text = |key: &str| args[key].as_str().map(str::to_owned);
    let path = |key: &str| inside(project, text(key).as_deref().unwrap_or("."));
    match name {
        "read_file" => {
            let file = inside(project, &text("path").ok_or("missing path")?)?;
            fs::read_to_string(file).map_err(|e| e.to_string())
        }
        "list_dir" => list_dir(&path("path")?),
        "search_text" => {
            let pattern = text("pattern").ok_or("missing pattern")?;
            search_text(project, &path("path")?, &pattern)
        }
        "write_file" => {
            let file = inside(project, &text("path").ok_or("missing path")?)?;
            let content = text("content").ok_or("missing content")?;
            if let Some(parent) = file.parent() {
                fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            fs::write(&file, &content).map_err(|e| e.to_string())?;
            Ok(format!("wrote {} bytes", content.len()))
        }
        "run_command" => run_command(project, args),
        other => Err(format!("Unknown tool \"{other}\"")),
    }
}

/// `relative` inside `project`: no absolute path, no `..`.
fn inside(project: &Path, relative: &str) -> Result<PathBuf, String> {
    let path = Path::new(relative);
    let escapes = path
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir));
    if escapes {
        return Err(format!("{relative}: outside the working directory"));
    }
    Ok(project.join(path))
}

fn list_dir(dir: &Path) -> Result<String, String> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| e.to_string())? {
        let entry = entry.map_err(|e| e.to_string())?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            name.push('/');
        }
        names.push(name);
    }
    names.sort();
    Ok(names.join("\n"))
}

/// Lines holding `pattern` (literally) under `start`, as `path:line: text`.
fn search_text(project: &Path, start: &Path, pattern: &str) -> Result<String, String> {
    let mut files = Vec::new();
    walk(start, &mut files).map_err(|e| e.to_string())?;
    files.sort();
    let mut hits = Vec::new();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        let shown = file
            .strip_prefix(project)
            .unwrap_or(&file)
            .display()
            .to_string();
        for (n, line) in text.lines().enumerate() {
            if line.contains(pattern) {
                hits.push(format!("{shown}:{}: {line}", n + 1));
            }
        }
    }
    Ok(if hits.is_empty() {
        "no matches".into()
    } else {
        hits.join("\n")
    })
}

fn walk(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    for entry in fs::read_dir(path)? {
        walk(&entry?.path(), out)?;
    }
    Ok(())
}

/// A read-only program of [`PROGRAMS`], its path-like arguments confined, no shell.
fn run_command(project: &Path, args: &Value) -> Result<String, String> {
    let program = args["program"].as_str().ok_or("missing program")?;
    if !PROGRAMS.contains(&program) {
        return Err(format!(
            "{program} is not allowed; allowed: {}",
            PROGRAMS.join(", ")
        ));
    }
    let argv: Vec<String> = match &args["args"] {
        Value::Null => Vec::new(),
        Value::Array(items) => items
            .iter()
            .map(|a| a.as_str().map(str::to_owned).ok_or("args must be strings"))
            .collect::<Result<_, _>>()?,
        _ => return Err("args must be a list of strings".into()),
    };
    for arg in argv.iter().filter(|a| !a.starts_with('-')) {
        inside(project, arg)?;
    }
    let output = Command::new(program)
        .args(&argv)
        .current_dir(project)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| e.to_string())?;
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    if output.status.success() {
        Ok(text)
    } else {
        Err(format!("{program} failed ({}): {text}", output.status))
    }
}

/// One POST to `base_url` + `path` (`http://HOST:PORT/PREFIX`): the status and body.
pub(crate) fn post(
    base_url: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, String)> {
    let (host, prefix) = split_url(base_url)?;
    request(host, "POST", &format!("/{prefix}{path}"), body, timeout)
}

/// The server's `/props` (at the root, beside `/v1`).
pub(super) fn props(base_url: &str) -> Result<Value> {
    let (host, _) = split_url(base_url)?;
    let (status, body) = request(host, "GET", "/props", "", Duration::from_secs(10))?;
    if status != 200 {
        bail!("GET /props: HTTP {status}");
    }
    serde_json::from_str(&body).context("/props is not JSON")
}

/// `http://HOST:PORT/PREFIX` -> (`HOST:PORT`, `PREFIX`).
fn split_url(base_url: &str) -> Result<(&str, &str)> {
    let rest = base_url
        .strip_prefix("http://")
        .with_context(|| format!("{base_url}: only http:// is supported"))?;
    Ok(rest.split_once('/').unwrap_or((rest, "")))
}

/// One HTTP/1.1 request with `Connection: close`, read to its end.
fn request(
    host: &str,
    method: &str,
    path: &str,
    body: &str,
    timeout: Duration,
) -> Result<(u16, String)> {
    let mut stream = TcpStream::connect(host).with_context(|| format!("connecting to {host}"))?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .context("reading the reply")?;
    parse_response(&reply)
}

/// An HTTP/1.1 response read to its end: the status and the body, de-chunked if needed.
fn parse_response(bytes: &[u8]) -> Result<(u16, String)> {
    let text = String::from_utf8_lossy(bytes);
    let (head, body) = text.split_once("\r\n\r\n").context("no end of headers")?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("no status line")?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .starts_with("transfer-encoding: chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_owned()
    };
    Ok((status, body))
}

/// A chunked body's data.
fn dechunk(mut body: &str) -> Result<String> {
    let mut out = String::new();
    loop {
        let (size, rest) = body.split_once("\r\n").context("a chunk without a size")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .context("a bad chunk size")?;
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size {
            bail!("a chunk cut short");
        }
        out.push_str(&rest[..size]);
        body = rest[size..].trim_start_matches("\r\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Runs `name` with `args` in a folder holding `a.txt` and `sub/b.txt`.
    fn check(name: &str, args: Value, expected: Result<&str, &str>) {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("a.txt"), "alpha\nbeta\n").unwrap();
        fs::create_dir(dir.path().join("sub")).unwrap();
        fs::write(dir.path().join("sub/b.txt"), "beta two\n").unwrap();
        let got = execute(dir.path(), name, &args);
        match expected {
            Ok(want) => assert_eq!(got.as_deref(), Ok(want)),
            Err(want) => {
                let err = got.expect_err("should fail");
                assert!(err.contains(want), "{err}");
            }
        }
    }

    #[test]
    fn the_rule_serve_names_in_a_reply_is_counted() {
        let mut seen = Run::default();
        let coached =
            json!({"ollm": {"repair": {"status": "coached", "rule": "answer-after-idle"}}});
        note_coached(&mut seen, &coached);
        note_coached(&mut seen, &coached);
        note_coached(
            &mut seen,
            &json!({"ollm": {"repair": {"status": "recovered", "format": "fenced-json"}}}),
        );
        note_coached(&mut seen, &json!({"choices": []}));
        assert_eq!(
            seen.coached,
            BTreeMap::from([("answer-after-idle".to_owned(), 2)])
        );
    }

    #[test]
    fn the_tools_work_inside_the_folder() {
        check("read_file", json!({"path": "./a.txt"}), Ok("alpha\nbeta\n"));
        check("list_dir", json!({}), Ok("a.txt\nsub/"));
        check(
            "search_text",
            json!({"pattern": "beta"}),
            Ok("a.txt:2: beta\nsub/b.txt:1: beta two"),
        );
        check("search_text", json!({"pattern": "gamma"}), Ok("no matches"));
        check(
            "run_command",
            json!({"program": "wc", "args": ["-l", "a.txt"]}),
            Ok("2 a.txt\n"),
        );
    }

    #[test]
    fn paths_outside_the_folder_are_refused() {
        check("read_file", json!({"path": "/etc/passwd"}), Err("outside"));
        check("list_dir", json!({"path": "../"}), Err("outside"));
        check(
            "run_command",
            json!({"program": "cat", "args": ["/etc/passwd"]}),
            Err("outside"),
        );
    }

    #[test]
    fn unknown_tools_programs_and_missing_arguments_are_errors() {
        check(
            "launch_code",
            json!({}),
            Err("Unknown tool \"launch_code\""),
        );
        check(
            "run_command",
            json!({"program": "rm", "args": ["a.txt"]}),
            Err("not allowed"),
        );
        check("read_file", json!({"file": "a.txt"}), Err("missing path"));
    }

    #[test]
    fn responses_with_length_or_chunks_parse() {
        let plain = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
        assert_eq!(parse_response(plain).unwrap(), (200, "{}".into()));
        let chunked =
            b"HTTP/1.1 500 Internal\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{\"a\r\n3\r\n\":1\r\n1\r\n}\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (500, "{\"a\":1}".into()));
        assert!(parse_response(b"garbage").is_err());
    }
}
