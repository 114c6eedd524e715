//! Printing a chat run: streamed text for people, one JSON object, or JSON lines.
//!
//! Every format sees the same [`ChatEvent`]s through [`Sink::event`]; a [`Summary`] of the
//! run is kept alongside whatever the format, for the exit code, sessions and `json`.
//!
//! In `text` the answer goes to stdout and everything else (thinking, tool calls, warnings,
//! errors) to stderr, so `ollm run m "q" > answer.txt` holds the answer alone; on a
//! terminal both streams show, styled, and the answer's markdown is rendered as it streams
//! and wrapped at word boundaries to the terminal's width ([`crate::ui::wrap::StreamWrap`]);
//! piped output keeps the model's lines as they are.
//! The JSON shapes are written out by hand here rather than derived from the runtime's
//! serde, so that they stay what `docs/output-formats.md` says whatever the runtime does.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{self, Write};

use ollm_core::ChatEvent;
use ollm_types::{FinishReason, ProviderError, ToolCall, Usage, Warning, WarningKind};
use serde_json::{Value, json};

use crate::args::OutputFormat;
use crate::ui::wrap::StreamWrap;

/// The version of the JSON shapes; bumped only with an incompatible change.
pub(crate) const SCHEMA_VERSION: u32 = 1;

const DIM: &str = "\x1b[2m";
const BOLD: &str = "\x1b[1m";
const CYAN: &str = "\x1b[36m";
const YELLOW: &str = "\x1b[33m";
const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const RESET: &str = "\x1b[0m";

/// What a run produced, whatever the output format: the runtime's one fold of its
/// events ([`ollm_core::ChatReply`]), so the CLI and library callers never disagree.
pub(crate) type Summary = ollm_core::ChatReply;

/// The `--output-format json` object of a run.
pub(crate) fn summary_json(summary: &Summary, model: &str) -> Value {
    json!({
        "schema_version": SCHEMA_VERSION,
        "model": model,
        "answer": summary.answer,
        "thinking": summary.thinking,
        "tool_calls": summary.tool_calls.iter().map(|r| json!({
            "id": r.call.id,
            "name": r.call.name,
            "arguments": r.call.arguments_value(),
            "result": r.result,
            "is_error": r.is_error,
        })).collect::<Vec<_>>(),
        "usage": usage_json(&summary.usage),
        "finish_reason": summary.finish_reason.map(finish_str),
        "error": summary.error.as_ref().map(error_json),
        "warnings": summary.warnings.iter().map(warning_json).collect::<Vec<_>>(),
    })
}

fn finish_str(r: FinishReason) -> &'static str {
    match r {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::Cancelled => "cancelled",
        FinishReason::MaxTurns => "max_turns",
        FinishReason::Error => "error",
        FinishReason::Repetition => "repetition",
        _ => "other",
    }
}

fn usage_json(u: &Usage) -> Value {
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_millis() as u64);
    json!({
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_duration_ms": ms(u.total_duration),
        "load_duration_ms": ms(u.load_duration),
        "prompt_eval_duration_ms": ms(u.prompt_eval_duration),
        "eval_duration_ms": ms(u.eval_duration),
    })
}

fn kind_str<T: serde::Serialize>(kind: &T) -> Value {
    serde_json::to_value(kind).unwrap_or(Value::Null)
}

fn error_json(e: &ProviderError) -> Value {
    json!({
        "kind": kind_str(&e.kind),
        "message": e.message,
        "status": e.status,
        "retryable": e.retryable,
        "hint": crate::ui::hint::for_error(e),
    })
}

fn warning_json(w: &Warning) -> Value {
    json!({"kind": kind_str(&w.kind), "message": w.message})
}

/// The `stream-json` line of a `Coached` event: the rule by name, and the detail.
fn coached_json(rule: ollm_core::Rule, call_id: Option<&str>, detail: &str) -> Value {
    json!({"type": "coached", "rule": rule.name(), "call_id": call_id, "detail": detail})
}

/// One `--output-format stream-json` line for `event`.
pub(crate) fn event_json(event: &ChatEvent) -> Value {
    match event {
        ChatEvent::TextDelta { text } => json!({"type": "text_delta", "text": text}),
        ChatEvent::ThinkingDelta { text } => json!({"type": "thinking_delta", "text": text}),
        ChatEvent::ToolCallStarted { call } => json!({
            "type": "tool_call_started",
            "id": call.id,
            "name": call.name,
            "arguments": call.arguments_value(),
        }),
        ChatEvent::ToolResult {
            call_id,
            name,
            content,
            is_error,
        } => json!({
            "type": "tool_result",
            "id": call_id,
            "name": name,
            "content": content,
            "is_error": is_error,
        }),
        ChatEvent::TurnComplete { turn, usage } => {
            json!({"type": "turn_complete", "turn": turn, "usage": usage_json(usage)})
        }
        ChatEvent::Warning { warning } => {
            json!({"type": "warning", "warning": warning_json(warning)})
        }
        ChatEvent::Coached {
            rule,
            call_id,
            detail,
        } => coached_json(*rule, call_id.as_deref(), detail),
        ChatEvent::Error { error } => json!({"type": "error", "error": error_json(error)}),
        ChatEvent::StrategyChosen {
            strategy, reason, ..
        } => json!({
            "type": "strategy_chosen",
            "strategy": strategy.map(|s| s.to_string()),
            "reason": reason,
        }),
        ChatEvent::Compacted { compaction: c } => json!({
            "type": "compacted",
            "tokens_before": c.tokens_before,
            "tokens_after": c.tokens_after,
            "turns_summarised": c.turns_summarised,
            "turns_dropped": c.turns_dropped,
            "summary": c.summary,
            "summary_ms": c.summary_ms,
        }),
        ChatEvent::Finish { reason, usage, .. } => json!({
            "type": "finish",
            "finish_reason": finish_str(*reason),
            "usage": usage_json(usage),
        }),
        other => {
            json!({"type": "other", "event": serde_json::to_value(other).unwrap_or(Value::Null)})
        }
    }
}

/// Where a run's events go.
///
/// Sinks take unlocked `Stdout`/`Stderr` handles (each write locks briefly): tools print
/// approval questions and warnings from other threads while a run is being shown, and a
/// lock held for the whole run would deadlock them.
pub(crate) trait Sink {
    /// Shows one event.
    fn event(&mut self, event: &ChatEvent) -> io::Result<()>;
    /// The run ended (after its last event, or when the stream just stopped).
    fn end(&mut self, summary: &Summary, model: &str) -> io::Result<()>;
}

/// How the text format looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TextStyle {
    /// ANSI styling and markdown rendering (a terminal, and `NO_COLOR` unset).
    pub(crate) styled: bool,
    /// stdout is a terminal, shared with stderr: a status line in the middle of the answer
    /// first ends the answer's screen line. When stdout is piped its text is left whole.
    pub(crate) terminal: bool,
    /// Keep thinking off screen.
    pub(crate) hide_thinking: bool,
}

/// A sink for the chosen format writing to `out` (answer, JSON) and `err` (the rest).
pub(crate) fn sink<'a>(
    format: OutputFormat,
    style: TextStyle,
    out: Box<dyn Write + 'a>,
    err: Box<dyn Write + 'a>,
) -> Box<dyn Sink + 'a> {
    match format {
        OutputFormat::Text => Box::new(TextSink::new(style, out, err)),
        OutputFormat::Json => Box::new(JsonSink { out }),
        OutputFormat::StreamJson => Box::new(StreamJsonSink { out }),
    }
}

struct JsonSink<'a> {
    out: Box<dyn Write + 'a>,
}

impl Sink for JsonSink<'_> {
    fn event(&mut self, _event: &ChatEvent) -> io::Result<()> {
        Ok(())
    }
    fn end(&mut self, summary: &Summary, model: &str) -> io::Result<()> {
        writeln!(self.out, "{}", summary_json(summary, model))?;
        self.out.flush()
    }
}

struct StreamJsonSink<'a> {
    out: Box<dyn Write + 'a>,
}

impl Sink for StreamJsonSink<'_> {
    fn event(&mut self, event: &ChatEvent) -> io::Result<()> {
        writeln!(self.out, "{}", event_json(event))?;
        self.out.flush()
    }
    fn end(&mut self, _summary: &Summary, _model: &str) -> io::Result<()> {
        self.out.flush()
    }
}

/// The human format.
pub(crate) struct TextSink<'a> {
    style: TextStyle,
    out: Box<dyn Write + 'a>,
    err: Box<dyn Write + 'a>,
    thinking_open: bool,
    err_at_line_start: bool,
    answer_written: bool,
    answer_ends_with_newline: bool,
    markdown: Markdown,
    /// Word wrapping of the answer to the terminal's width (on a terminal only).
    wrap: Option<StreamWrap>,
    pending_calls: BTreeMap<String, ToolCall>,
    /// Calls the coach answered from an earlier result: their warning line stands for
    /// their result line.
    repeats: BTreeSet<String>,
}

impl<'a> TextSink<'a> {
    /// A text sink.
    pub(crate) fn new(
        style: TextStyle,
        out: Box<dyn Write + 'a>,
        err: Box<dyn Write + 'a>,
    ) -> Self {
        TextSink {
            style,
            out,
            err,
            thinking_open: false,
            err_at_line_start: true,
            answer_written: false,
            answer_ends_with_newline: true,
            markdown: Markdown::default(),
            wrap: style
                .terminal
                .then(|| StreamWrap::new(crate::ui::wrap::terminal_width())),
            pending_calls: BTreeMap::new(),
            repeats: BTreeSet::new(),
        }
    }

    /// The answer text held back by the styler and the wrapper, styles closed.
    fn answer_tail(&mut self) -> String {
        let tail = self.markdown.flush(self.style.styled);
        match &mut self.wrap {
            Some(w) => w.feed(&tail) + &w.flush(),
            None => tail,
        }
    }

    fn paint(&self, color: &str, text: &str) -> String {
        if self.style.styled {
            format!("{color}{text}{RESET}")
        } else {
            text.to_owned()
        }
    }

    /// Ends the thinking section and any open answer line before a status line.
    fn break_line(&mut self, end: bool) -> io::Result<()> {
        self.close_thinking()?;
        if self.answer_written && !self.answer_ends_with_newline && (end || self.style.terminal) {
            let tail = self.answer_tail();
            self.out.write_all(tail.as_bytes())?;
            writeln!(self.out)?;
            if let Some(w) = &mut self.wrap {
                w.at_line_start();
            }
            self.answer_ends_with_newline = true;
        }
        self.out.flush()?;
        if !self.err_at_line_start {
            writeln!(self.err)?;
            self.err_at_line_start = true;
        }
        Ok(())
    }

    fn close_thinking(&mut self) -> io::Result<()> {
        if self.thinking_open {
            self.thinking_open = false;
            let end = if self.style.styled {
                format!("{RESET}\n{DIM}...done thinking.{RESET}\n\n")
            } else {
                "\n...done thinking.\n\n".to_owned()
            };
            self.err.write_all(end.as_bytes())?;
            self.err.flush()?;
            self.err_at_line_start = true;
        }
        Ok(())
    }

    fn status_line(&mut self, line: &str) -> io::Result<()> {
        self.break_line(false)?;
        writeln!(self.err, "{line}")?;
        self.err.flush()
    }
}

impl Sink for TextSink<'_> {
    fn event(&mut self, event: &ChatEvent) -> io::Result<()> {
        self.status_before(event);
        self.show(event)?;
        self.status_after(event);
        Ok(())
    }

    fn end(&mut self, _summary: &Summary, _model: &str) -> io::Result<()> {
        crate::ui::status::clear();
        self.break_line(true)?;
        self.out.flush()?;
        self.err.flush()
    }
}

/// The coach's rules that drop a reply already streamed and ask for another: the
/// model asked the question back (`answer-after-echo`) or looped in its text
/// (`answer-after-runaway`).
const DROPS_STREAMED_REPLY: &[ollm_core::Rule] = &[
    ollm_core::Rule::AnswerAfterEcho,
    ollm_core::Rule::AnswerAfterRunaway,
];

impl TextSink<'_> {
    /// Erases the transient status line before an event that prints.
    fn status_before(&self, event: &ChatEvent) {
        let silent = match event {
            ChatEvent::TextDelta { text } => text.is_empty(),
            ChatEvent::ThinkingDelta { text } => text.is_empty() || self.style.hide_thinking,
            // Bookkeeping events print nothing in text mode (`--verbose` lines go
            // through their own path), so they must not erase the status line.
            ChatEvent::TurnComplete { .. } | ChatEvent::StrategyChosen { .. } => true,
            ChatEvent::Coached { rule, .. } => crate::errors::coach_warning(*rule).is_none(),
            ChatEvent::Warning { warning } => warning.kind == WarningKind::Repetition,
            _ => false,
        };
        if !silent {
            crate::ui::status::clear();
        }
    }

    /// Says what the run waits for next, after an event that changes it.
    fn status_after(&self, event: &ChatEvent) {
        match event {
            ChatEvent::ToolCallStarted { call } => {
                crate::ui::status::set(format!("running {}…", call.name));
            }
            ChatEvent::ToolResult { .. } => crate::ui::status::set("waiting for the model…"),
            ChatEvent::Finish { .. } | ChatEvent::Error { .. } => crate::ui::status::clear(),
            _ => {}
        }
    }

    fn show(&mut self, event: &ChatEvent) -> io::Result<()> {
        match event {
            ChatEvent::ThinkingDelta { text } => self.show_thinking(text),
            ChatEvent::TextDelta { text } => self.show_text(text),
            ChatEvent::ToolCallStarted { call } => self.show_call(call),
            ChatEvent::ToolResult {
                call_id,
                name,
                content,
                is_error,
            } => self.show_result(call_id, name, content, *is_error),
            // Each `Repetition` warning follows the `Coached` event of the rule that
            // acted (core's contract), whose line says it in the user's terms.
            ChatEvent::Warning { warning } if warning.kind == WarningKind::Repetition => Ok(()),
            ChatEvent::Warning { warning } => {
                let short = crate::errors::short_warning(warning);
                let line = self.paint(YELLOW, &format!("warning: {short}"));
                self.status_line(&line)
            }
            ChatEvent::Coached { rule, call_id, .. } => self.show_coached(*rule, call_id),
            ChatEvent::Compacted { compaction: c } => {
                let line = format!(
                    "[context compacted: {} -> {} tokens; {} turns summarised, {} dropped]",
                    c.tokens_before, c.tokens_after, c.turns_summarised, c.turns_dropped
                );
                self.status_line(&self.paint(DIM, &line))
            }
            ChatEvent::Error { error } => {
                let headline = crate::errors::headline(error);
                let mut line = self.paint(RED, &format!("error: {headline}"));
                if let Some(hint) = crate::ui::hint::for_error(error) {
                    line.push_str(&format!("\n  hint: {hint}"));
                }
                self.status_line(&line)
            }
            ChatEvent::TurnComplete { .. } => {
                // Each turn's text is its own message: a fence its prose left open (the
                // markup of a call cut out of it) must not style the next turn as code.
                let tail = self.answer_tail();
                self.out.write_all(tail.as_bytes())?;
                self.markdown = Markdown::default();
                self.out.flush()
            }
            ChatEvent::Finish { reason, .. } => self.show_finish(reason),
            _ => Ok(()),
        }
    }

    /// Reasoning on stderr, dimmed, under a "Thinking..." head (unless hidden).
    fn show_thinking(&mut self, text: &str) -> io::Result<()> {
        if self.style.hide_thinking || text.is_empty() {
            return Ok(());
        }
        if !self.thinking_open {
            self.break_line(false)?;
            self.thinking_open = true;
            let head = self.paint(DIM, "Thinking...");
            writeln!(self.err, "{head}")?;
            if self.style.styled {
                self.err.write_all(DIM.as_bytes())?;
            }
        }
        self.err.write_all(text.as_bytes())?;
        self.err_at_line_start = text.ends_with('\n');
        self.err.flush()
    }

    /// Answer text on stdout, styled and wrapped on a terminal.
    fn show_text(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.close_thinking()?;
        let mut shown = if self.style.styled {
            self.markdown.feed(text)
        } else {
            text.to_owned()
        };
        if let Some(w) = &mut self.wrap {
            shown = w.feed(&shown);
        }
        self.out.write_all(shown.as_bytes())?;
        self.answer_written = true;
        self.answer_ends_with_newline = text.ends_with('\n');
        self.out.flush()
    }

    /// The `⚙` line of a call; an approval question waits for it (`tools/prompter.rs`).
    fn show_call(&mut self, call: &ToolCall) -> io::Result<()> {
        self.pending_calls.insert(call.id.clone(), call.clone());
        let args = crate::ui::wrap::shorten(&call.arguments_value().to_string(), 160);
        let line = format!(
            "{} {}{}",
            self.paint(CYAN, "⚙"),
            self.paint(BOLD, &call.name),
            self.paint(DIM, &format!(" {args}"))
        );
        self.status_line(&line)?;
        crate::tools::prompter::shown(&call.name);
        Ok(())
    }

    /// What the coach did, in one line when it is worth a warning; a call it answered
    /// from an earlier result gets that line instead of its result line.
    fn show_coached(&mut self, rule: ollm_core::Rule, call_id: &Option<String>) -> io::Result<()> {
        // A reply the coach drops and asks for again is not the answer: the answer
        // that follows starts on a line of its own, piped or not.
        if DROPS_STREAMED_REPLY.contains(&rule) {
            self.break_line(true)?;
        }
        let Some(line) = crate::errors::coach_warning(rule) else {
            return Ok(());
        };
        if let Some(id) = call_id {
            self.repeats.insert(id.clone());
        }
        let line = self.paint(YELLOW, &format!("warning: {line}"));
        self.status_line(&line)
    }

    /// A call's result: a mark and its first characters (nothing for a call the coach
    /// answered, whose warning said so).
    fn show_result(
        &mut self,
        call_id: &str,
        name: &str,
        content: &str,
        is_error: bool,
    ) -> io::Result<()> {
        self.pending_calls.remove(call_id);
        crate::tools::prompter::finished(name);
        if self.repeats.remove(call_id) {
            return Ok(());
        }
        let (mark, color) = if is_error {
            ("✗", RED)
        } else {
            ("✓", GREEN)
        };
        let line = format!(
            "  {} {} {}",
            self.paint(color, mark),
            name,
            self.paint(DIM, &crate::ui::wrap::shorten(content, 120))
        );
        self.status_line(&line)
    }

    /// The end of the run, and why when it is not a plain stop.
    fn show_finish(&mut self, reason: &FinishReason) -> io::Result<()> {
        self.break_line(true)?;
        match reason {
            FinishReason::Cancelled => self.status_line(&self.paint(DIM, "[cancelled]")),
            FinishReason::MaxTurns => self.status_line(
                &self.paint(YELLOW, "warning: stopped at the turn limit (--max-turns)"),
            ),
            FinishReason::Length => self
                .status_line(&self.paint(YELLOW, "warning: the answer was cut at the token limit")),
            FinishReason::Repetition => self.status_line(
                &self.paint(YELLOW, "warning: stopped: the model kept repeating itself"),
            ),
            _ => Ok(()),
        }
    }
}

/// The longest heading marker (`######`); a longer run of `#` is plain text.
const MAX_HEADING: usize = 6;

/// A streaming markdown styler for terminals: headings, fenced code, `inline code` and
/// **bold**, decided as the text arrives (a marker split across chunks is held back until
/// the next chunk settles it: at most a heading marker, one `*` or one backtick). A run of
/// two or more backticks mid-line is shown as typed, so a flood of them stays visible. Line-level styles are known from the first characters of a
/// line, so nothing already printed ever needs restyling.
#[derive(Debug, Default)]
pub(crate) struct Markdown {
    /// Characters held back at the start of a line or after a `*`.
    pending: String,
    at_line_start: bool,
    started: bool,
    in_fence: bool,
    heading: bool,
    bold: bool,
    code: bool,
    /// Backticks in the current run: one is held (it may be inline code's marker), a
    /// second shows the run is text, so the run is printed as it arrives.
    ticks: u8,
}

impl Markdown {
    /// Styles `text`, returning what can be printed now.
    pub(crate) fn feed(&mut self, text: &str) -> String {
        if !self.started {
            self.started = true;
            self.at_line_start = true;
        }
        let mut out = String::new();
        for c in text.chars() {
            self.push(c, &mut out);
        }
        out
    }

    /// Prints what is held back and closes any open style.
    pub(crate) fn flush(&mut self, styled: bool) -> String {
        let mut out = String::new();
        self.settle_tick(&mut out);
        out.push_str(&std::mem::take(&mut self.pending));
        if styled && (self.bold || self.code || self.heading || self.in_fence) {
            out.push_str(RESET);
        }
        self.bold = false;
        self.code = false;
        self.heading = false;
        out
    }

    fn style(&self) -> String {
        let mut s = String::from(RESET);
        if self.in_fence || self.code {
            s.push_str(CYAN);
        }
        if self.heading || self.bold {
            s.push_str(BOLD);
        }
        s
    }

    fn push(&mut self, c: char, out: &mut String) {
        if self.at_line_start {
            if c == '\n' {
                out.push_str(&std::mem::take(&mut self.pending));
                out.push('\n');
                return;
            }
            self.pending.push(c);
            let p = self.pending.as_str();
            // Still possibly a fence or a heading marker: wait for more.
            // Bounded: a heading marker is at most six `#`, so a flood of them is released.
            if ("```".starts_with(p) && p.len() < 3)
                || (p.len() <= MAX_HEADING && p.chars().all(|ch| ch == '#'))
            {
                return;
            }
            self.at_line_start = false;
            let line_start = std::mem::take(&mut self.pending);
            if line_start.starts_with("```") {
                self.in_fence = !self.in_fence;
                out.push_str(RESET);
                out.push_str(DIM);
                out.push_str(&line_start);
                self.pending.clear();
                return;
            }
            if !self.in_fence && line_start.starts_with('#') && line_start.ends_with(' ') {
                self.heading = true;
                out.push_str(&self.style());
                out.push_str(&line_start);
                return;
            }
            for ch in line_start.chars() {
                self.inline(ch, out);
            }
            return;
        }
        self.inline(c, out);
    }

    fn inline(&mut self, c: char, out: &mut String) {
        if c == '\n' {
            self.settle_tick(out);
            out.push_str(&std::mem::take(&mut self.pending));
            self.bold = false;
            self.code = false;
            self.heading = false;
            out.push_str(RESET);
            if self.in_fence {
                out.push_str(CYAN);
            }
            out.push('\n');
            self.at_line_start = true;
            return;
        }
        if self.in_fence {
            out.push(c);
            return;
        }
        if self.pending == "*" {
            self.pending.clear();
            if c == '*' {
                self.bold = !self.bold;
                out.push_str(&self.style());
                return;
            }
            out.push('*');
        }
        if c == '`' {
            match self.ticks {
                0 => self.ticks = 1,
                1 => {
                    out.push_str("``");
                    self.ticks = 2;
                }
                _ => out.push('`'),
            }
            return;
        }
        self.settle_tick(out);
        match c {
            '*' if !self.code => self.pending.push('*'),
            _ => out.push(c),
        }
    }

    /// Decides a held backtick once the next character shows it stands alone: it opens
    /// or closes inline code (and is not shown). A run of two or more is shown as it is.
    fn settle_tick(&mut self, out: &mut String) {
        if self.ticks == 1 {
            self.code = !self.code;
            out.push_str(&self.style());
        }
        self.ticks = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ollm_types::{ProviderErrorKind, WarningKind};
    use std::sync::{Arc, Mutex};

    /// A writer tests can read back.
    #[derive(Clone, Default)]
    pub(crate) struct Shared(pub(crate) Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        pub(crate) fn text(&self) -> String {
            String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
        }
    }

    fn call() -> ToolCall {
        ToolCall::new("c1", "read_file", json!({"path": "a.txt"})).unwrap()
    }

    fn events() -> Vec<ChatEvent> {
        vec![
            ChatEvent::ThinkingDelta { text: "hmm".into() },
            ChatEvent::ToolCallStarted { call: call() },
            ChatEvent::ToolResult {
                call_id: "c1".into(),
                name: "read_file".into(),
                content: "alpha\nbeta".into(),
                is_error: false,
            },
            ChatEvent::TurnComplete {
                turn: 1,
                usage: Usage {
                    prompt_tokens: Some(10),
                    completion_tokens: Some(3),
                    ..Usage::default()
                },
            },
            ChatEvent::Warning {
                warning: Warning::new(WarningKind::ContextNearLimit, "context 91% full"),
            },
            ChatEvent::TextDelta {
                text: "The file ".into(),
            },
            ChatEvent::TextDelta {
                text: "says alpha.".into(),
            },
            ChatEvent::Finish {
                reason: FinishReason::Stop,
                usage: Usage {
                    prompt_tokens: Some(25),
                    completion_tokens: Some(7),
                    total_duration: Some(std::time::Duration::from_millis(1500)),
                    ..Usage::default()
                },
                added: Vec::new(),
            },
        ]
    }

    fn run(format: OutputFormat, style: TextStyle) -> (String, String) {
        let (out, err) = (Shared::default(), Shared::default());
        let mut summary = Summary::default();
        {
            let mut s = sink(format, style, Box::new(out.clone()), Box::new(err.clone()));
            for e in events() {
                summary.push(&e);
                s.event(&e).unwrap();
            }
            s.end(&summary, "m").unwrap();
        }
        (out.text(), err.text())
    }

    const PLAIN: TextStyle = TextStyle {
        styled: false,
        terminal: false,
        hide_thinking: false,
    };

    #[test]
    fn text_puts_the_answer_alone_on_stdout() {
        let (out, err) = run(OutputFormat::Text, PLAIN);
        assert_eq!(out, "The file says alpha.\n");
        assert_eq!(
            err,
            "Thinking...\nhmm\n...done thinking.\n\n⚙ read_file {\"path\":\"a.txt\"}\n  ✓ read_file alpha beta\nwarning: context 91% full\n"
        );
        let (_, err) = run(
            OutputFormat::Text,
            TextStyle {
                styled: false,
                terminal: false,
                hide_thinking: true,
            },
        );
        assert!(!err.contains("hmm"));
    }

    /// What a text sink prints on stderr for `events`.
    fn stderr_of(events: Vec<ChatEvent>) -> String {
        let (out, err) = (Shared::default(), Shared::default());
        let mut s = TextSink::new(PLAIN, Box::new(out.clone()), Box::new(err.clone()));
        for e in events {
            s.event(&e).unwrap();
        }
        err.text()
    }

    /// A reply the coach dropped and asked for again ends its line, piped too: the
    /// 0.5B's question asked back and the answer after it used to run together.
    #[test]
    fn the_answer_after_a_dropped_reply_starts_its_own_line() {
        use ollm_core::Rule;
        for (rule, expected) in [
            (Rule::AnswerAfterEcho, "How?\nThus.\n"),
            (Rule::AnswerAfterRunaway, "la la\nThus.\n"),
            (Rule::AnswerAfterIdle, "How?Thus.\n"),
        ] {
            let first = if rule == Rule::AnswerAfterRunaway {
                "la la"
            } else {
                "How?"
            };
            let (out, err) = (Shared::default(), Shared::default());
            let mut s = TextSink::new(PLAIN, Box::new(out.clone()), Box::new(err.clone()));
            let text = |t: &str| ChatEvent::TextDelta { text: t.into() };
            let coached = ChatEvent::Coached {
                rule,
                call_id: None,
                detail: "told the model: ...".into(),
            };
            for e in [text(first), coached, text("Thus.")] {
                s.event(&e).unwrap();
            }
            s.end(&Summary::default(), "m").unwrap();
            assert_eq!(out.text(), expected, "{rule}");
        }
    }

    /// The coach's events print its rule's line, not the detail; a repeated call's line
    /// stands for its result line; a rule that only nudges prints nothing.
    #[test]
    fn the_coach_speaks_in_one_line_chosen_by_its_rule() {
        use ollm_core::Rule;
        let coached = |rule, call_id: Option<&str>| ChatEvent::Coached {
            rule,
            call_id: call_id.map(str::to_owned),
            detail: "the reply ... (after 81 of its 279 bytes so far)".into(),
        };
        let repetition = ChatEvent::Warning {
            warning: Warning::new(WarningKind::Repetition, "after 81 of its 279 bytes"),
        };
        let line = |rule| format!("warning: {}\n", crate::errors::coach_warning(rule).unwrap());
        let listed = stderr_of(vec![coached(Rule::ListedToolsCut, None), repetition]);
        assert_eq!(listed, line(Rule::ListedToolsCut));
        let repeat = stderr_of(vec![
            ChatEvent::ToolCallStarted { call: call() },
            coached(Rule::RepeatGuard, Some("c1")),
            ChatEvent::ToolResult {
                call_id: "c1".into(),
                name: "read_file".into(),
                content: "Error: not run again: ...".into(),
                is_error: true,
            },
        ]);
        let call_line = "⚙ read_file {\"path\":\"a.txt\"}\n";
        assert_eq!(repeat, format!("{call_line}{}", line(Rule::RepeatGuard)));
        assert_eq!(stderr_of(vec![coached(Rule::AnswerAfterIdle, None)]), "");
    }

    #[test]
    fn a_warning_mid_answer_leaves_piped_text_whole() {
        let check = |terminal: bool, expected_out: &str| {
            let (out, err) = (Shared::default(), Shared::default());
            let style = TextStyle {
                styled: false,
                terminal,
                hide_thinking: false,
            };
            let mut s = TextSink::new(style, Box::new(out.clone()), Box::new(err.clone()));
            for e in [
                ChatEvent::TextDelta {
                    text: "Hello ".into(),
                },
                ChatEvent::Warning {
                    warning: Warning::new(WarningKind::Retrying, "retrying in 1 s"),
                },
                ChatEvent::TextDelta {
                    text: "world.".into(),
                },
                ChatEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: Usage::default(),
                    added: Vec::new(),
                },
            ] {
                s.event(&e).unwrap();
            }
            s.end(&Summary::default(), "m").unwrap();
            assert_eq!(out.text(), expected_out);
            assert_eq!(err.text(), "warning: retrying in 1 s\n");
        };
        check(false, "Hello world.\n");
        check(true, "Hello \nworld.\n");
    }

    /// Pins the `json` schema documented in docs/output-formats.md.
    #[test]
    fn json_schema_is_pinned() {
        let (out, err) = run(OutputFormat::Json, PLAIN);
        assert_eq!(err, "");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v,
            json!({
                "schema_version": 1,
                "model": "m",
                "answer": "The file says alpha.",
                "thinking": "hmm",
                "tool_calls": [{
                    "id": "c1", "name": "read_file", "arguments": {"path": "a.txt"},
                    "result": "alpha\nbeta", "is_error": false
                }],
                "usage": {
                    "prompt_tokens": 25, "completion_tokens": 7, "total_duration_ms": 1500,
                    "load_duration_ms": null, "prompt_eval_duration_ms": null, "eval_duration_ms": null
                },
                "finish_reason": "stop",
                "error": null,
                "warnings": [{"kind": "context_near_limit", "message": "context 91% full"}]
            })
        );
        assert_eq!(out.lines().count(), 1);
    }

    /// Pins the `stream-json` schema documented in docs/output-formats.md.
    #[test]
    fn stream_json_schema_is_pinned() {
        let (out, _) = run(OutputFormat::StreamJson, PLAIN);
        let lines: Vec<Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let nulls = json!({"load_duration_ms": null, "prompt_eval_duration_ms": null, "eval_duration_ms": null});
        let mut turn_usage =
            json!({"prompt_tokens": 10, "completion_tokens": 3, "total_duration_ms": null});
        let mut finish_usage =
            json!({"prompt_tokens": 25, "completion_tokens": 7, "total_duration_ms": 1500});
        for u in [&mut turn_usage, &mut finish_usage] {
            u.as_object_mut()
                .unwrap()
                .extend(nulls.as_object().unwrap().clone());
        }
        assert_eq!(
            lines,
            vec![
                json!({"type": "thinking_delta", "text": "hmm"}),
                json!({"type": "tool_call_started", "id": "c1", "name": "read_file", "arguments": {"path": "a.txt"}}),
                json!({"type": "tool_result", "id": "c1", "name": "read_file", "content": "alpha\nbeta", "is_error": false}),
                json!({"type": "turn_complete", "turn": 1, "usage": turn_usage}),
                json!({"type": "warning", "warning": {"kind": "context_near_limit", "message": "context 91% full"}}),
                json!({"type": "text_delta", "text": "The file "}),
                json!({"type": "text_delta", "text": "says alpha."}),
                json!({"type": "finish", "finish_reason": "stop", "usage": finish_usage}),
            ]
        );
    }

    #[test]
    fn strategy_and_repetition_lines_are_pinned() {
        let chosen = ChatEvent::StrategyChosen {
            strategy: Some(ollm_core::ToolMode::React),
            reason: "auto: why".into(),
            cause: ollm_core::Reason::ReportsNoTools,
        };
        let expected =
            json!({"type": "strategy_chosen", "strategy": "react", "reason": "auto: why"});
        assert_eq!(event_json(&chosen), expected);
        let none = ChatEvent::StrategyChosen {
            strategy: None,
            reason: "no tools".into(),
            cause: ollm_core::Reason::NoTools,
        };
        assert_eq!(event_json(&none)["strategy"], Value::Null);
        let finish = ChatEvent::Finish {
            reason: FinishReason::Repetition,
            usage: Usage::default(),
            added: Vec::new(),
        };
        assert_eq!(event_json(&finish)["finish_reason"], "repetition");
        let compacted = ChatEvent::Compacted {
            compaction: ollm_core::Compaction {
                tokens_before: 1750,
                tokens_after: 716,
                turns_summarised: 5,
                turns_dropped: 0,
                summary: Some("the user read beta.txt".into()),
                summary_ms: 10194,
            },
        };
        assert_eq!(
            event_json(&compacted),
            json!({"type": "compacted", "tokens_before": 1750, "tokens_after": 716,
                   "turns_summarised": 5, "turns_dropped": 0,
                   "summary": "the user read beta.txt", "summary_ms": 10194})
        );
        let warning = Warning::new(WarningKind::TokenLimit, "cut");
        assert_eq!(warning_json(&warning)["kind"], "token_limit");
    }

    #[test]
    fn errors_carry_kind_and_hint() {
        let e = ProviderError::new(ProviderErrorKind::ModelNotFound, "model 'x' not found")
            .with_status(404)
            .with_hint("ollm pull x");
        assert_eq!(
            event_json(&ChatEvent::Error { error: e }),
            json!({"type": "error", "error": {
                "kind": "model_not_found", "message": "model 'x' not found",
                "status": 404, "retryable": false,
                "hint": "ollm pull x; `ollm list` shows the models the server has"
            }})
        );
    }

    #[test]
    fn model_not_found_hints_name_ollm_list() {
        let bare = ProviderError::new(ProviderErrorKind::ModelNotFound, "no model x");
        let hint = crate::ui::hint::for_error(&bare).unwrap();
        assert!(hint.contains("`ollm list`"), "{hint}");
        let from_bridge = bare.clone().with_hint("ollama pull x");
        let hint = crate::ui::hint::for_error(&from_bridge).unwrap();
        assert!(hint.starts_with("ollama pull x"), "{hint}");
        assert!(hint.contains("`ollm list`"), "{hint}");
        assert_eq!(
            event_json(&ChatEvent::Error { error: bare })["error"]["hint"],
            json!(crate::ui::hint::for_error(&ProviderError::new(
                ProviderErrorKind::ModelNotFound,
                "no model x"
            )))
        );
        assert_eq!(
            crate::ui::hint::for_error(&ProviderError::new(ProviderErrorKind::Other, "x")),
            None
        );
    }

    /// A turn whose call the model wrote as text, as the runtime reports it: any prose
    /// as text, the call as a tool call. No fence marker (```` ```json ````, a bare `json`,
    /// a closing fence) reaches either stream, styled or not, and a fence the prose left
    /// open does not style the next turn's answer as code.
    #[test]
    fn calls_written_as_text_leave_no_fence_markers() {
        for styled in [false, true] {
            let (out, err) = (Shared::default(), Shared::default());
            let style = TextStyle {
                styled,
                terminal: styled,
                hide_thinking: false,
            };
            let mut s = TextSink::new(style, Box::new(out.clone()), Box::new(err.clone()));
            let turn = |turn| ChatEvent::TurnComplete {
                turn,
                usage: Usage::default(),
            };
            for e in [
                ChatEvent::ToolCallStarted { call: call() },
                ChatEvent::ToolResult {
                    call_id: "c1".into(),
                    name: "read_file".into(),
                    content: "port = 8080".into(),
                    is_error: false,
                },
                turn(1),
                ChatEvent::TextDelta {
                    text: "Checking:\n```".into(),
                },
                ChatEvent::ToolCallStarted { call: call() },
                turn(2),
                ChatEvent::TextDelta {
                    text: "The port is 8080.".into(),
                },
                ChatEvent::Finish {
                    reason: FinishReason::Stop,
                    usage: Usage::default(),
                    added: Vec::new(),
                },
            ] {
                s.event(&e).unwrap();
            }
            s.end(&Summary::default(), "m").unwrap();
            let (out, err) = (out.text(), err.text());
            assert!(
                strip(&err)
                    .starts_with("⚙ read_file {\"path\":\"a.txt\"}\n  ✓ read_file port = 8080\n"),
                "{err:?}"
            );
            assert!(!err.contains("json") && !err.contains("```"), "{err:?}");
            assert!(strip(&out).ends_with("The port is 8080.\n"), "{out:?}");
            let last = out.rsplit("\n").nth(1).unwrap_or_default();
            assert!(
                !last.contains(CYAN),
                "the answer is not styled as code: {out:?}"
            );
        }
    }

    fn strip(s: &str) -> String {
        let re = regex::Regex::new("\x1b\\[[0-9;]*m").unwrap();
        re.replace_all(s, "").into_owned()
    }

    #[test]
    fn markdown_keeps_the_text_however_it_is_split() {
        let text = "# Title\nSome **bold** and `code` here * star.\n```rust\nfn x() {}\n```\ndone";
        for split in 0..=text.len() {
            if !text.is_char_boundary(split) {
                continue;
            }
            let mut md = Markdown::default();
            let mut out = md.feed(&text[..split]);
            out.push_str(&md.feed(&text[split..]));
            out.push_str(&md.flush(true));
            let plain = strip(&out);
            assert_eq!(
                plain, "# Title\nSome bold and code here * star.\n```rust\nfn x() {}\n```\ndone",
                "split at {split}"
            );
        }
    }

    /// Issue 17: a flood of markers is shown as it arrives, never held to the line's end.
    #[test]
    fn marker_floods_stream() {
        for flood in ["`", "#", "*", "\n#"] {
            let mut md = Markdown::default();
            for _ in 0..5000 {
                md.feed(flood);
                assert!(
                    md.pending.len() <= MAX_HEADING,
                    "{flood:?}: {:?}",
                    md.pending
                );
            }
        }
    }

    /// Issue 17: single backticks style inline code; runs of them are shown as typed, as
    /// they arrive.
    #[test]
    fn backtick_runs_show_and_single_ones_style() {
        let mut md = Markdown::default();
        let mut shown = md.feed("ticks: ");
        for i in 1..=100 {
            shown.push_str(&md.feed("``````````"));
            assert_eq!(
                strip(&shown).matches('`').count(),
                10 * i,
                "nothing is held"
            );
        }
        assert_eq!(strip(&shown), format!("ticks: {}", "`".repeat(1000)));
        let out = md.feed(" a `b` c\n") + &md.flush(true);
        assert_eq!(strip(&out), " a b c\n");
        assert!(out.contains(CYAN), "{out:?}");
    }

    proptest::proptest! {
        /// Whatever the text, at most a heading marker's worth is ever held back.
        #[test]
        fn held_back_text_is_bounded(text in "[`#* a\n]{0,300}") {
            let mut md = Markdown::default();
            for c in text.chars() {
                md.feed(&c.to_string());
                proptest::prop_assert!(md.pending.chars().count() <= MAX_HEADING);
            }
        }
    }

    #[test]
    fn markdown_styles_bold_and_code() {
        let mut md = Markdown::default();
        let out = md.feed("a **b** `c`\n");
        assert!(out.contains(BOLD), "{out:?}");
        assert!(out.contains(CYAN), "{out:?}");
    }
}
