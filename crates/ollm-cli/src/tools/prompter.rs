//! The terminal side of approval: [`TerminalPrompter`] asks on stderr and reads a line
//! from stdin; the policy itself (modes, "always", auto-approve) lives in `ollm-tools`.
//!
//! Order on screen (issue 17): the run's events are shown by the sink on the main task
//! while the tool asks from the run's own task, so without care the question could print
//! before the `⚙ write_file ...` line. The text sink records each tool line it printed
//! ([`shown`]) and the prompter waits (bounded) until the line of a call of its tool is on
//! screen, so the order is always: tool line, question, answer on the question's line.

use std::io::Write;
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// Tool names whose `⚙` line is on screen and whose result is not yet shown.
static SHOWN: Mutex<Vec<String>> = Mutex::new(Vec::new());
static CHANGED: Condvar = Condvar::new();

/// The longest the question waits for its tool line (a sink that shows no tool lines,
/// such as the JSON formats, never records one).
const LINE_WAIT: Duration = Duration::from_secs(2);

/// The text sink printed the line of a call of `tool`.
pub(crate) fn shown(tool: &str) {
    if let Ok(mut v) = SHOWN.lock() {
        v.push(tool.to_owned());
    }
    CHANGED.notify_all();
}

/// The text sink printed the result of a call of `tool`.
pub(crate) fn finished(tool: &str) {
    if let Ok(mut v) = SHOWN.lock() {
        if let Some(i) = v.iter().position(|t| t == tool) {
            v.remove(i);
        }
    }
}

/// Waits until a line of `tool` is on screen, or [`LINE_WAIT`] passed.
async fn wait_shown(tool: &'static str) {
    let _ = tokio::task::spawn_blocking(move || {
        if let Ok(guard) = SHOWN.lock() {
            let _ = CHANGED.wait_timeout_while(guard, LINE_WAIT, |v| !v.iter().any(|t| t == tool));
        }
    })
    .await;
}

fn tool_of(request: &Request) -> Option<&'static str> {
    match request {
        Request::WriteFile { .. } => Some("write_file"),
        Request::RunCommand { .. } => Some("run_command"),
        _ => None,
    }
}

use ollm_tools::{Answer, Prompter, Request};

/// Asks on stderr and reads a line from stdin.
#[derive(Debug, Default)]
pub(crate) struct TerminalPrompter;

#[async_trait::async_trait]
impl Prompter for TerminalPrompter {
    async fn ask(&self, request: &Request) -> Answer {
        if let Some(tool) = tool_of(request) {
            wait_shown(tool).await;
        }
        // No status line over the question until it is answered (or dropped).
        let _held = crate::ui::status::hold();
        {
            let mut err = std::io::stderr().lock();
            // `NO_COLOR` turns styling off here too, as it does for the rest of the output.
            let (on, off) = if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
                ("", "")
            } else {
                ("\x1b[1;33m", "\x1b[0m")
            };
            // The first line is the question; the rest (a diff, the head of a file) is
            // shown plain beneath it.
            let text = request.to_string();
            let (first, rest) = text.split_once('\n').unwrap_or((&text, ""));
            let _ = writeln!(err, "{on}? {first}{off}");
            if !rest.is_empty() {
                let _ = writeln!(err, "{rest}");
            }
            let _ = write!(err, "  [y] allow once  [a] always for this  [N] deny: ");
            let _ = err.flush();
        }
        match read_answer_line().await {
            Some(line) => parse_answer(&line),
            None => Answer::Deny,
        }
    }

    fn warn(&self, message: &str) {
        crate::ui::warn(message);
    }
}

/// Reads one line from stdin (a terminal), waiting for it without a blocked read: the
/// wait is on the descriptor's readiness, so a cancelled question reads nothing.
#[cfg(unix)]
// `with_interest` is deprecated because the descriptor could be closed and reused while
// registered; fd 0 stays open for the life of the process, and the safe replacement
// needs `unsafe`, which this workspace forbids.
#[allow(deprecated)]
async fn read_answer_line() -> Option<String> {
    use std::io::BufRead;
    let Ok(fd) =
        tokio::io::unix::AsyncFd::with_interest(std::io::stdin(), tokio::io::Interest::READABLE)
    else {
        return read_answer_line_blocking().await;
    };
    loop {
        let mut guard = fd.readable().await.ok()?;
        let mut line = String::new();
        // A terminal in canonical mode is readable once a whole line was entered.
        match guard.try_io(|stdin| stdin.get_ref().lock().read_line(&mut line)) {
            Ok(Ok(_)) => return Some(line),
            Ok(Err(_)) => return None,
            Err(_would_block) => continue,
        }
    }
}

#[cfg(not(unix))]
async fn read_answer_line() -> Option<String> {
    read_answer_line_blocking().await
}

/// The fallback: a blocking read (which a cancel cannot take back).
async fn read_answer_line_blocking() -> Option<String> {
    tokio::task::spawn_blocking(|| {
        use std::io::BufRead;
        let mut line = String::new();
        std::io::stdin()
            .lock()
            .read_line(&mut line)
            .ok()
            .map(|_| line)
    })
    .await
    .ok()
    .flatten()
}

/// Reads an answer; anything unclear is a denial.
pub(crate) fn parse_answer(line: &str) -> Answer {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" | "o" | "once" => Answer::Once,
        "a" | "always" => Answer::Always,
        _ => Answer::Deny,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse_strictly() {
        assert_eq!(parse_answer("y\n"), Answer::Once);
        assert_eq!(parse_answer(" A "), Answer::Always);
        assert_eq!(parse_answer(""), Answer::Deny);
        assert_eq!(parse_answer("maybe"), Answer::Deny);
    }
}
