//! The interactive chat: a line editor with history, multi-line input, slash commands, and
//! Ctrl-C that cancels the answer being generated but keeps the chat.
//!
//! The loop is synchronous (the line editor blocks) and enters the async runtime for each
//! generation, so a Ctrl-C at the prompt is the editor's and one during an answer cancels
//! the run.

use std::io::Write;

use ollm_core::{ChatClient, ChatOptions, History};
use ollm_types::Think;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use crate::config::Settings;
use crate::exit::CliError;
use crate::render::{self, Summary};
use crate::run::{self, Parts, RunPlan};
use crate::sessions::{Record, Session};
use ollm_tools::Mode;

const HELP: &str = "\
Commands:
  /help                 this help
  /clear                forget the conversation
  /model [NAME]         show or switch the model
  /think [LEVEL]        show or set thinking: on, off, low, medium, high
  /tools [on|off]       list the tools, or offer them or not
  /mcp                  the MCP servers, their state and tools
  /status               model, context use and token counts
  /save NAME            save the conversation as session NAME
  /load NAME            continue session NAME
  /bye                  leave (Ctrl-D works too)
Input:
  end a line with \\ to continue it; wrap a block in \"\"\" to paste several lines.
  Ctrl-C cancels the answer being written; at the prompt it clears the line.";

/// What a line of input asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Input {
    /// A prompt for the model.
    Prompt(String),
    /// A slash command and its argument.
    Command(String, Option<String>),
    /// Nothing.
    Empty,
}

/// Reads a line as a prompt or a slash command.
pub(crate) fn parse_input(line: &str) -> Input {
    let trimmed = line.trim();
    if trimmed.is_empty() {
        return Input::Empty;
    }
    if let Some(rest) = trimmed.strip_prefix('/') {
        if !rest.starts_with('/') && !rest.is_empty() {
            let mut words = rest.splitn(2, char::is_whitespace);
            let cmd = words.next().unwrap_or_default().to_ascii_lowercase();
            let arg = words.next().map(str::trim).filter(|a| !a.is_empty());
            return Input::Command(cmd, arg.map(str::to_owned));
        }
    }
    Input::Prompt(line.to_owned())
}

/// Joins continuation lines: a trailing `\` continues; a line starting `"""` opens a block
/// closed by a line ending `"""`. Returns `None` while more input is needed.
#[derive(Debug, Default)]
pub(crate) struct MultiLine {
    buffer: Vec<String>,
    in_block: bool,
}

impl MultiLine {
    /// Feeds one line; returns the whole input once complete.
    pub(crate) fn feed(&mut self, line: &str) -> Option<String> {
        if self.in_block {
            if let Some(head) = line.strip_suffix("\"\"\"") {
                self.buffer.push(head.to_owned());
                self.in_block = false;
                return Some(std::mem::take(&mut self.buffer).join("\n"));
            }
            self.buffer.push(line.to_owned());
            return None;
        }
        if self.buffer.is_empty() {
            if let Some(rest) = line.trim_start().strip_prefix("\"\"\"") {
                if let Some(one) = rest.strip_suffix("\"\"\"") {
                    return Some(one.to_owned());
                }
                self.in_block = true;
                if !rest.is_empty() {
                    self.buffer.push(rest.to_owned());
                }
                return None;
            }
        }
        if let Some(head) = line.strip_suffix('\\') {
            self.buffer.push(head.to_owned());
            return None;
        }
        self.buffer.push(line.to_owned());
        Some(std::mem::take(&mut self.buffer).join("\n"))
    }

    /// Whether a block or continuation is open.
    pub(crate) fn pending(&self) -> bool {
        self.in_block || !self.buffer.is_empty()
    }

    /// Drops what was gathered (Ctrl-C at the prompt).
    pub(crate) fn reset(&mut self) {
        self.buffer.clear();
        self.in_block = false;
    }
}

struct State {
    plan: RunPlan,
    /// The conversation's client: core's history is the only copy of the conversation.
    client: ChatClient,
    session: Option<Session>,
    session_fresh: bool,
    last: Summary,
    total_prompt: u64,
    total_completion: u64,
    context_length: Option<u32>,
}

fn say(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{text}");
}

/// The interactive chat.
pub(crate) fn interactive(
    rt: &tokio::runtime::Runtime,
    plan: RunPlan,
    settings: &Settings,
    parts: &Parts,
) -> Result<(), CliError> {
    let mut editor = DefaultEditor::new().map_err(|e| CliError::Other(e.into()))?;
    let history_file = settings.data_dir.join("history.txt");
    let _ = editor.load_history(&history_file);
    let session = match &plan.session {
        Some(name) => Some(Session::open(&settings.data_dir, name)?),
        None => None,
    };
    let history = match &session {
        Some(s) => run::load_session(s)?,
        None => Vec::new(),
    };
    if !history.is_empty() {
        say(&format!(
            "continuing session {:?} ({} messages)",
            plan.session.as_deref().unwrap_or_default(),
            history.len()
        ));
    }
    let client = parts.client(&plan.chat, &history)?;
    let mut state = State {
        session_fresh: history.is_empty(),
        client,
        session,
        plan,
        last: Summary::default(),
        total_prompt: 0,
        total_completion: 0,
        context_length: settings.provider.context_length,
    };
    say(&format!(
        "ollm chat with {} via {} — /help for commands, Ctrl-D or /bye to leave",
        state.plan.chat.model, settings.provider.name
    ));
    let mut multi = MultiLine::default();
    loop {
        let prompt = if multi.pending() { "... " } else { ">>> " };
        let line = match editor.readline(prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                multi.reset();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(CliError::Other(e.into())),
        };
        let Some(input) = multi.feed(&line) else {
            continue;
        };
        let _ = editor.add_history_entry(input.as_str());
        match parse_input(&input) {
            Input::Empty => {}
            Input::Command(cmd, arg) => {
                match command(&cmd, arg.as_deref(), &mut state, settings, parts, rt) {
                    Flow::Continue => {}
                    Flow::Exit => break,
                }
            }
            Input::Prompt(text) => {
                crate::mcp::before_prompt(parts, &state.client, rt);
                answer(&text, &mut state, settings, rt);
            }
        }
    }
    if let Some(dir) = history_file.parent() {
        // Owner-only, like sessions: the history holds every prompt typed.
        if let Ok(warnings) = ollm_tools::private::create_private_dir(dir) {
            crate::sessions::warn_once(&warnings);
        }
    }
    let _ = editor.save_history(&history_file);
    Ok(())
}

/// Answers one prompt, then saves what the run added to the session.
fn answer(text: &str, state: &mut State, settings: &Settings, rt: &tokio::runtime::Runtime) {
    let options = ChatOptions {
        no_tools: state.plan.no_tools,
        ..ChatOptions::default()
    };
    let mut sink = render::sink(
        state.plan.format,
        state.plan.style,
        Box::new(std::io::stdout()),
        Box::new(std::io::stderr()),
    );
    let model = state.plan.chat.model.clone();
    let outcome = rt.block_on(run::generate(
        &state.client,
        text,
        options,
        sink.as_mut(),
        &model,
    ));
    drop(sink);
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) => return say(&format!("error: {e}")),
    };
    if let Some(u) = outcome.summary.usage.prompt_tokens {
        state.total_prompt += u64::from(u);
    }
    if let Some(u) = outcome.summary.usage.completion_tokens {
        state.total_completion += u64::from(u);
    }
    if let Some(s) = &state.session {
        if !outcome.messages.is_empty() {
            run::save_turn(s, settings, &model, state.session_fresh, &outcome.messages);
            state.session_fresh = false;
        }
    }
    if let Some(line) = usage_line(&outcome.summary) {
        say(&if state.plan.style.styled {
            format!("\x1b[2m{line}\x1b[0m")
        } else {
            line
        });
    }
    state.last = outcome.summary;
}

enum Flow {
    Continue,
    Exit,
}

fn command(
    cmd: &str,
    arg: Option<&str>,
    state: &mut State,
    settings: &Settings,
    parts: &Parts,
    rt: &tokio::runtime::Runtime,
) -> Flow {
    match cmd {
        "help" | "?" => say(HELP),
        "bye" | "exit" | "quit" => return Flow::Exit,
        "clear" => {
            state.client.clear_history();
            state.last = Summary::default();
            if let Some(s) = &state.session {
                if let Err(e) = s.append(&[Record::Clear]) {
                    render::warn(&format!("could not record /clear in the session: {e}"));
                }
            }
            say("conversation cleared");
        }
        "model" => match arg {
            None => say(&format!("model: {}", state.plan.chat.model)),
            Some(m) => {
                state.plan.chat.model = m.to_owned();
                state.client.set_model(m);
                state.context_length = settings.provider.context_length;
                say(&format!("model: {m}"));
            }
        },
        "think" => match arg.map(str::parse::<Think>) {
            None => say(&format!(
                "thinking: {}",
                state
                    .plan
                    .chat
                    .think
                    .map_or("model default".to_owned(), |t| t.to_string())
            )),
            Some(Err(_)) => say("usage: /think on|off|low|medium|high"),
            Some(Ok(t)) => {
                state.plan.chat.think = Some(t);
                state.client.set_config(state.plan.chat.clone());
                say(&format!("thinking: {t}"));
            }
        },
        "tools" => match arg {
            Some("on") => {
                state.plan.no_tools = false;
                say("tools on");
            }
            Some("off") => {
                state.plan.no_tools = true;
                say("tools off");
            }
            Some("yes") => {
                parts.approver.set_mode(Mode::Yes);
                say("tool calls are approved without asking for the rest of this chat");
            }
            Some(_) => say("usage: /tools [on|off|yes]"),
            None => {
                let state_word = if state.plan.no_tools { "off" } else { "on" };
                say(&format!("tools are {state_word}:"));
                for s in parts.tools.schemas() {
                    say(&format!("  {:<12} {}", s.name, s.description));
                }
            }
        },
        "mcp" => say(&crate::mcp::describe_run(parts)),
        "status" => {
            if state.context_length.is_none() {
                state.context_length = rt
                    .block_on(parts.provider.show_model(&state.plan.chat.model))
                    .ok()
                    .and_then(|m| m.context_length);
            }
            say(&status_text(state, settings));
        }
        "save" => match arg {
            None => say("usage: /save NAME"),
            Some(name) => match save_as(name, state, settings) {
                Ok(path) => say(&format!("saved to {}", path.display())),
                Err(e) => say(&format!("error: {e}")),
            },
        },
        "load" => match arg {
            None => say("usage: /load NAME"),
            Some(name) => {
                match Session::open(&settings.data_dir, name).and_then(|s| {
                    let msgs = run::load_session(&s)?;
                    Ok((s, msgs))
                }) {
                    Ok((s, msgs)) => {
                        say(&format!(
                            "loaded session {name:?} ({} messages)",
                            msgs.len()
                        ));
                        state.session_fresh = msgs.is_empty();
                        let mut history = History::new();
                        history.set_system(state.plan.chat.system.clone());
                        history.extend(msgs);
                        state.client.set_history(history);
                        state.session = Some(s);
                        state.plan.session = Some(name.to_owned());
                    }
                    Err(e) => say(&format!("error: {e}")),
                }
            }
        },
        other => say(&format!("unknown command /{other}; /help lists them")),
    }
    Flow::Continue
}

/// The dim line after an answer: tokens and time, where the server said.
fn usage_line(summary: &Summary) -> Option<String> {
    let u = &summary.usage;
    let mut parts = Vec::new();
    if let Some(p) = u.prompt_tokens {
        parts.push(format!("{p} in"));
    }
    if let Some(c) = u.completion_tokens {
        parts.push(format!("{c} out"));
    }
    if let Some(d) = u.total_duration {
        parts.push(format!("{:.1} s", d.as_secs_f64()));
    }
    if let (Some(c), Some(d)) = (u.completion_tokens, u.eval_duration) {
        if d.as_secs_f64() > 0.0 {
            parts.push(format!("{:.1} tok/s", f64::from(c) / d.as_secs_f64()));
        }
    }
    (!parts.is_empty()).then(|| format!("[{}]", parts.join(" · ")))
}

fn status_text(state: &State, settings: &Settings) -> String {
    let used = state
        .last
        .usage
        .prompt_tokens
        .map(|p| u64::from(p) + u64::from(state.last.usage.completion_tokens.unwrap_or(0)));
    let context = match (used, state.context_length) {
        (Some(u), Some(c)) if c > 0 => format!("{u} / {c} tokens ({}%)", u * 100 / u64::from(c)),
        (Some(u), _) => format!("{u} tokens (limit unknown)"),
        (None, Some(c)) => format!("nothing sent yet / {c} tokens"),
        (None, None) => "nothing sent yet".to_owned(),
    };
    format!(
        "model:    {}\nprovider: {} ({})\nmessages: {}\ncontext:  {}\ntokens:   {} in, {} out this chat\nsession:  {}",
        state.plan.chat.model,
        settings.provider.name,
        settings.provider.base_url,
        state.client.history().len(),
        context,
        state.total_prompt,
        state.total_completion,
        state.plan.session.as_deref().unwrap_or("(none)")
    )
}

fn save_as(
    name: &str,
    state: &mut State,
    settings: &Settings,
) -> Result<std::path::PathBuf, CliError> {
    let session = Session::open(&settings.data_dir, name)?;
    let mut text = String::new();
    let meta = Record::Meta {
        version: 1,
        provider: settings.provider.name.clone(),
        model: state.plan.chat.model.clone(),
    };
    let history = state.client.history();
    for r in std::iter::once(meta).chain(
        history
            .messages()
            .iter()
            .map(|m| Record::Message { message: m.clone() }),
    ) {
        text.push_str(&serde_json::to_string(&r).map_err(|e| CliError::Other(e.into()))?);
        text.push('\n');
    }
    session.replace_with(text.as_bytes())?;
    let path = session.path().to_path_buf();
    state.session = Some(session);
    state.session_fresh = false;
    state.plan.session = Some(name.to_owned());
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_commands_and_prompts() {
        assert_eq!(parse_input("  "), Input::Empty);
        assert_eq!(
            parse_input("/model qwen3:8b "),
            Input::Command("model".into(), Some("qwen3:8b".into()))
        );
        assert_eq!(parse_input("/BYE"), Input::Command("bye".into(), None));
        assert_eq!(
            parse_input("//not a command"),
            Input::Prompt("//not a command".into())
        );
        assert_eq!(parse_input("hi /there"), Input::Prompt("hi /there".into()));
    }

    #[test]
    fn multi_line_input() {
        let mut m = MultiLine::default();
        assert_eq!(m.feed("one"), Some("one".into()));
        assert_eq!(m.feed("first \\"), None);
        assert!(m.pending());
        assert_eq!(m.feed("second"), Some("first \nsecond".into()));
        assert_eq!(m.feed("\"\"\"start"), None);
        assert_eq!(m.feed("middle \\"), None);
        assert_eq!(m.feed("end\"\"\""), Some("start\nmiddle \\\nend".into()));
        assert_eq!(m.feed("\"\"\"inline\"\"\""), Some("inline".into()));
        assert_eq!(m.feed("\"\"\""), None);
        m.reset();
        assert!(!m.pending());
    }

    #[test]
    fn usage_line_shows_what_the_server_reported() {
        let mut s = Summary::default();
        assert_eq!(usage_line(&s), None);
        s.usage.prompt_tokens = Some(25);
        s.usage.completion_tokens = Some(10);
        s.usage.eval_duration = Some(std::time::Duration::from_millis(500));
        assert_eq!(
            usage_line(&s).as_deref(),
            Some("[25 in · 10 out · 20.0 tok/s]")
        );
    }

    #[test]
    fn think_levels() {
        // `/think` reads levels with ollm-types' own parser.
        assert_eq!("HIGH".parse::<Think>().ok(), Some(Think::High));
        assert_eq!("off".parse::<Think>().ok(), Some(Think::Off));
        assert_eq!("max".parse::<Think>().ok(), None);
    }
}
