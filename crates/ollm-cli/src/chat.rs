//! The interactive chat: a line editor with history, multi-line input, slash commands, and
//! Ctrl-C that cancels the answer being generated but keeps the chat.
//!
//! The loop is synchronous (the line editor blocks) and enters the async runtime for each
//! generation, so a Ctrl-C at the prompt is the editor's and one during an answer cancels
//! the run.
//!
//! Each slash command is one function, found by name in one table (`COMMANDS`); they all
//! take the same `Chat` (the state, the settings, the run's parts, the runtime), so a new
//! command is a function and a row.

use std::io::{IsTerminal, Write};

use ollm_core::{ChatClient, ChatOptions, History};
use ollm_types::Think;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use crate::config::Settings;
use crate::exit::CliError;
use crate::render::Summary;
use crate::run::{self, Parts, RunPlan};
use crate::sessions::{Record, Session};
use ollm_tools::Mode;

const HELP: &str = "\
Commands:
  /help                 this help
  /clear                forget the conversation
  /compact              summarise the older turns now, to make room in the window
  /model [NAME]         show or switch the model
  /think [LEVEL]        show or set thinking: on, off, low, medium, high
  /tools [on|off]       list the tools, or offer them or not
  /image PATH           attach an image to the next prompt (vision models)
  /mcp                  the MCP servers, their state and tools
  /status               model, context window and use, token counts
  /set system TEXT      set the system message (as in `ollama run`)
  /set parameter N V    set a sampling parameter: temperature, top_p, top_k,
                        repeat_penalty, seed, num_predict, num_ctx, stop
  /set think|nothink    thinking on or off
  /show info|parameters|system
                        what the model and this chat are set to
  /save NAME [--force]  save a snapshot of the conversation as session NAME
  /load NAME            continue session NAME
  /? or /help           this help
  /bye or /exit         leave (Ctrl-D works too)
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

/// What the chat keeps between prompts. No copy of the client's config: the plan's
/// `ChatConfig` goes into the client at the start, and the chat asks the client
/// (`config()`) and tells it (`set_config`, `set_model`), so `/set`, `/think` and
/// `/model` have one owner. Nor a copy of the session's name: the session has it.
struct State {
    /// How answers are shown.
    printing: run::Printing,
    /// Offer no tools (`--no-tools`, `/tools off`).
    no_tools: bool,
    /// `--context-length`, to say where the window came from.
    context_flag: Option<u32>,
    /// The conversation's client: core's history is the only copy of the conversation.
    client: ChatClient,
    session: Option<Session>,
    session_fresh: bool,
    last: Summary,
    total_prompt: u64,
    total_completion: u64,
    /// Images for the next prompt (`--image`, `/image`): sent with it, then dropped.
    images: Vec<(String, String)>,
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
    let mut state = start(plan, settings, parts)?;
    if let Some(problem) = preflight(rt, parts, settings, &state.client.config().model) {
        say(&problem);
    }
    say(&format!(
        "ollm chat with {} via {} — /help for commands, Ctrl-D or /bye to leave",
        state.client.config().model,
        settings.provider.name
    ));
    if std::io::stderr().is_terminal() {
        crate::ui::status::enable();
    }
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
        // Written as we go, so a crash or a killed terminal keeps what was typed.
        save_line_history(&mut editor, &history_file);
        match parse_input(&input) {
            Input::Empty => {}
            Input::Command(cmd, arg) => {
                match command(&cmd, arg.as_deref(), &mut state, settings, parts, rt) {
                    Flow::Continue => {}
                    Flow::Exit => break,
                }
            }
            Input::Prompt(text) => {
                crate::mcp::before_prompt(parts.mcp.as_deref(), &state.client, rt);
                parts.refresh_paths(&state.client);
                answer(&text, &mut state, settings, rt);
            }
        }
    }
    save_line_history(&mut editor, &history_file);
    Ok(())
}

/// The chat's state at its start: the session's conversation, if one is continued (its
/// last exchange shown), in a new client, and the images for the first prompt.
fn start(plan: RunPlan, settings: &Settings, parts: &Parts) -> Result<State, CliError> {
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
        say(&last_exchange(&history));
    }
    let client = parts.client(&plan.chat, &history)?;
    if !plan.images.is_empty() {
        say(&format!(
            "{} image(s) attached to your first prompt",
            plan.images.len()
        ));
    }
    Ok(State {
        printing: plan.printing,
        no_tools: plan.no_tools,
        context_flag: plan.context_flag,
        images: plan.images,
        session_fresh: history.is_empty(),
        client,
        session,
        last: Summary::default(),
        total_prompt: 0,
        total_completion: 0,
    })
}

/// Saves the line editor's history (owner-only, like sessions: it holds every prompt).
fn save_line_history(editor: &mut DefaultEditor, history_file: &std::path::Path) {
    if let Some(dir) = history_file.parent() {
        if let Ok(warnings) = ollm_tools::private::create_private_dir(dir) {
            crate::sessions::warn_once(&warnings);
        }
    }
    let _ = editor.save_history(history_file);
}

/// Checks the server before the first prompt, as `ollama run` does: what is wrong (one
/// line and a hint), if anything. The chat still starts either way, so slash commands
/// stay usable.
fn preflight(
    rt: &tokio::runtime::Runtime,
    parts: &Parts,
    settings: &Settings,
    model: &str,
) -> Option<String> {
    if crate::errors::looks_openai(settings) {
        return Some(format!(
            "error: {} is an OpenAI-style address but the provider is ollama\n  hint: {}",
            settings.provider.base_url,
            crate::ui::hint::OPENAI_HINT
        ));
    }
    let e = match rt.block_on(parts.provider.show_model(model)) {
        Ok(_) => return None,
        Err(e) if e.kind == ollm_types::ProviderErrorKind::Unsupported => return None,
        Err(e) => e,
    };
    let headline = crate::errors::headline(&e);
    Some(match crate::errors::hint(&e, settings) {
        Some(h) => format!("error: {headline}\n  hint: {h}"),
        None => format!("error: {headline}"),
    })
}

/// The terminal's width (`COLUMNS`, else 80), for text this module wraps itself.
fn width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|c| *c >= 20)
        .unwrap_or(80)
}

/// The last user prompt and answer of a resumed conversation, shortened and wrapped at
/// word boundaries.
fn last_exchange(history: &[ollm_types::Message]) -> String {
    use ollm_types::Role;
    let last = |role: Role| {
        history
            .iter()
            .rev()
            .find(|m| m.role() == role && !m.text().trim().is_empty())
            .map(|m| crate::ui::wrap::wrap(&crate::ui::wrap::shorten(&m.text(), 300), width()))
    };
    let mut lines = Vec::new();
    if let Some(u) = last(Role::User) {
        lines.push(format!(">>> {u}"));
    }
    if let Some(a) = last(Role::Assistant) {
        lines.push(a);
    }
    lines.join("\n")
}

/// Answers one prompt, then saves what the run added to the session.
fn answer(text: &str, state: &mut State, settings: &Settings, rt: &tokio::runtime::Runtime) {
    let options = ChatOptions {
        no_tools: state.no_tools,
        images: std::mem::take(&mut state.images),
        ..ChatOptions::default()
    };
    let mut sink = state.printing.sink();
    let model = state.client.config().model;
    crate::ui::status::set(format!("waiting for {model}…"));
    let outcome = rt.block_on(run::generate(
        &state.client,
        text,
        options,
        sink.as_mut(),
        &model,
    ));
    drop(sink);
    crate::learned::keep(
        &settings.data_dir,
        &settings.provider.base_url,
        &state.client,
    );
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
        let history = state.client.history();
        let change = run::Change::of(&outcome, history.messages());
        if !change.is_empty() {
            run::save_turn(s, settings, &model, state.session_fresh, change);
            state.session_fresh = false;
        }
    }
    if let Some(line) = usage_line(&outcome.summary) {
        say(&if state.printing.style.styled {
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

/// What a slash command works on: the chat's state and the run's parts.
struct Chat<'a> {
    state: &'a mut State,
    settings: &'a Settings,
    parts: &'a Parts,
    rt: &'a tokio::runtime::Runtime,
}

/// A slash command's handler, given the text after the command's name, if any.
type Slash = fn(&mut Chat<'_>, Option<&str>);

/// The slash commands: the names each answers to, and its handler. `/bye` (`/exit`,
/// `/quit`) is not here: it ends the loop rather than acting on the chat.
const COMMANDS: &[(&[&str], Slash)] = &[
    (&["help", "?"], |_, _| say(HELP)),
    (&["set"], set),
    (&["show"], show),
    (&["image"], |c, arg| attach(arg, c.state, c.parts, c.rt)),
    (&["clear"], clear),
    (&["model"], model),
    (&["think"], think),
    (&["tools"], tools),
    (&["mcp"], mcp),
    (&["status"], status),
    (&["compact"], |c, _| compact(c.state, c.settings, c.rt)),
    (&["save"], save),
    (&["load"], load),
];

/// Runs the slash command `cmd` through [`COMMANDS`].
fn command(
    cmd: &str,
    arg: Option<&str>,
    state: &mut State,
    settings: &Settings,
    parts: &Parts,
    rt: &tokio::runtime::Runtime,
) -> Flow {
    if matches!(cmd, "bye" | "exit" | "quit") {
        return Flow::Exit;
    }
    let mut chat = Chat {
        state,
        settings,
        parts,
        rt,
    };
    match COMMANDS.iter().find(|(names, _)| names.contains(&cmd)) {
        Some((_, handle)) => handle(&mut chat, arg),
        None => say(&format!("unknown command /{cmd}; /help lists them")),
    }
    Flow::Continue
}

/// `/set`: edits the client's config (the system prompt follows it into the history).
fn set(c: &mut Chat<'_>, arg: Option<&str>) {
    let mut config = c.state.client.config();
    match crate::slash::set(arg, &mut config) {
        Ok(done) => {
            c.state.client.set_config(config);
            say(&done);
        }
        Err(usage) => say(&usage),
    }
}

/// `/show info|parameters|system`.
fn show(c: &mut Chat<'_>, arg: Option<&str>) {
    let info = info_text(c.state, c.settings, c.parts, c.rt);
    say(&crate::slash::show(arg, &c.state.client.config(), &info));
}

/// `/clear`: forgets the conversation and the attached images, and records it.
fn clear(c: &mut Chat<'_>, _: Option<&str>) {
    let state = &mut *c.state;
    state.images.clear();
    state.client.clear_history();
    state.last = Summary::default();
    if let Some(s) = &state.session {
        if let Err(e) = s.append(&[Record::Clear]) {
            crate::ui::warn(&format!("could not record /clear in the session: {e}"));
        }
    }
    say("conversation cleared");
}

/// `/model [NAME]`: shows the model, or switches to one the server has.
fn model(c: &mut Chat<'_>, arg: Option<&str>) {
    let state = &mut *c.state;
    let Some(m) = arg else {
        return say(&format!("model: {}", state.client.config().model));
    };
    // The server is asked first: a model it does not have is refused (a server that
    // cannot be asked leaves the choice to the user).
    if let Err(e) = c.rt.block_on(c.parts.provider.show_model(m)) {
        if e.kind == ollm_types::ProviderErrorKind::ModelNotFound {
            return say(&format!(
                "error: {}; the model stays {}",
                crate::errors::headline(&e),
                state.client.config().model
            ));
        }
    }
    state.client.set_model(m);
    say(&format!("model: {m}"));
}

/// `/think [LEVEL]`.
fn think(c: &mut Chat<'_>, arg: Option<&str>) {
    let mut config = c.state.client.config();
    match arg.map(str::parse::<Think>) {
        None => say(&format!(
            "thinking: {}",
            config
                .think
                .map_or("model default".to_owned(), |t| t.to_string())
        )),
        Some(Err(_)) => say("usage: /think on|off|low|medium|high"),
        Some(Ok(t)) => {
            config.think = Some(t);
            c.state.client.set_config(config);
            say(&format!("thinking: {t}"));
        }
    }
}

/// `/tools [on|off|yes]`.
fn tools(c: &mut Chat<'_>, arg: Option<&str>) {
    let state = &mut *c.state;
    match arg {
        Some("on") => {
            state.no_tools = false;
            say("tools on");
        }
        Some("off") => {
            state.no_tools = true;
            say("tools off");
        }
        Some("yes") => {
            c.parts.approver.set_mode(Mode::Yes);
            say("tool calls are approved without asking for the rest of this chat");
        }
        Some(_) => say("usage: /tools [on|off|yes]"),
        None => {
            // The client's tools, after any MCP `tools/list_changed`, not the start's.
            crate::mcp::before_prompt(c.parts.mcp.as_deref(), &state.client, c.rt);
            let state_word = if state.no_tools { "off" } else { "on" };
            say(&format!("tools are {state_word}:"));
            say(&approval_text(c.parts));
            for s in state.client.tools().schemas() {
                say(&format!("  {:<12} {}", s.name, s.description));
            }
        }
    }
}

/// `/mcp`: the run's servers, refreshed first.
fn mcp(c: &mut Chat<'_>, _: Option<&str>) {
    crate::mcp::before_prompt(c.parts.mcp.as_deref(), &c.state.client, c.rt);
    say(&crate::mcp::describe_run(c.parts.mcp.as_deref()));
}

/// `/status`.
fn status(c: &mut Chat<'_>, _: Option<&str>) {
    let window = window_text(c.state, c.settings, c.rt);
    say(&status_text(c.state, c.settings, &window));
}

/// `/save NAME [--force]`.
fn save(c: &mut Chat<'_>, arg: Option<&str>) {
    let Some(words) = arg else {
        return say("usage: /save NAME [--force]");
    };
    match save_as(words, c.state, c.settings) {
        Ok(path) => say(&format!("saved to {}", path.display())),
        Err(e) => say(&format!("error: {e}")),
    }
}

/// `/load NAME`: the session's conversation replaces the chat's, and later turns are
/// saved to it.
fn load(c: &mut Chat<'_>, arg: Option<&str>) {
    let Some(name) = arg else {
        return say("usage: /load NAME");
    };
    let opened = Session::open(&c.settings.data_dir, name).and_then(|s| {
        if !s.path().exists() {
            return Err(CliError::Usage(format!(
                "no session named {name:?}; `ollm sessions list` shows them"
            )));
        }
        let msgs = run::load_session(&s)?;
        Ok((s, msgs))
    });
    let (s, msgs) = match opened {
        Ok(loaded) => loaded,
        Err(e) => return say(&format!("error: {e}")),
    };
    let state = &mut *c.state;
    say(&format!(
        "loaded session {name:?} ({} messages)",
        msgs.len()
    ));
    state.session_fresh = msgs.is_empty();
    let mut history = History::new();
    history.set_system(state.client.config().system);
    history.extend(msgs);
    state.client.set_history(history);
    let shown = last_exchange(state.client.history().messages());
    if !shown.is_empty() {
        say(&shown);
    }
    state.session = Some(s);
}

/// `/image PATH`: attaches an image to the next prompt, if the model may be sent one
/// (core's rule, asked now so the attachment is refused rather than the prompt);
/// `/image` alone says what is attached.
fn attach(arg: Option<&str>, state: &mut State, parts: &Parts, rt: &tokio::runtime::Runtime) {
    let Some(arg) = arg else {
        return say(&match state.images.len() {
            0 => "usage: /image PATH (PNG, JPEG, GIF or WebP, at most 20 MiB)".to_owned(),
            n => format!("{n} image(s) attached to the next prompt"),
        });
    };
    let model = &state.client.config().model;
    let info = rt.block_on(parts.provider.show_model(model)).ok();
    if !ollm_core::image::accepts_images(info.as_ref()) {
        return say(&format!(
            "error: {model} cannot read images (the server lists no vision capability for it); \
             `/model NAME` switches to one that can"
        ));
    }
    let path = crate::images::chat_path(arg);
    match ollm_core::Image::read(&path) {
        Ok(image) => {
            let what = crate::images::describe(&path, &image);
            state.images.push(image.into_attachment());
            say(&format!("attached {what} to your next prompt"));
        }
        Err(e) => say(&format!("error: {e}")),
    }
}

/// `/compact`: summarises the older turns now (the same as compaction near the window
/// does on its own), says what it did and records it in the session.
fn compact(state: &mut State, settings: &Settings, rt: &tokio::runtime::Runtime) {
    let model = state.client.config().model;
    crate::ui::status::set(format!("summarising the conversation with {model}…"));
    let done = rt.block_on(state.client.compact());
    crate::ui::status::clear();
    let c = match done {
        Ok(c) if c.turns_summarised == 0 => {
            return say("nothing to compact: the conversation is only its first and latest turns");
        }
        Ok(c) => c,
        Err(e) => {
            return say(&format!(
                "error: the conversation could not be compacted: {e}"
            ));
        }
    };
    say(&format!(
        "compacted: {} turns summarised, about {} → {} tokens ({:.1} s)",
        c.turns_summarised,
        c.tokens_before,
        c.tokens_after,
        c.summary_ms as f64 / 1000.0
    ));
    if let Some(s) = &state.session {
        let history = state.client.history();
        let change = run::Change::Compacted(&c, history.messages());
        run::save_turn(s, settings, &model, state.session_fresh, change);
        state.session_fresh = false;
    }
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

/// Whether tool calls are asked about, approved, or denied.
fn approval_text(parts: &Parts) -> String {
    let mode = match parts.approver.mode() {
        Mode::Ask => "write_file and run_command ask before they run",
        Mode::Yes => "every call is approved without asking (--yes or /tools yes)",
        Mode::Headless => "write_file and run_command are denied (no terminal to ask on)",
        _ => "approval mode unknown",
    };
    let auto = parts.approver.auto_approve();
    if auto.is_empty() {
        format!("approval: {mode}")
    } else {
        format!("approval: {mode}; auto-approved: {}", auto.join(", "))
    }
}

/// `/show info`: the model as the server describes it.
fn info_text(
    state: &mut State,
    settings: &Settings,
    parts: &Parts,
    rt: &tokio::runtime::Runtime,
) -> String {
    let model = state.client.config().model;
    match rt.block_on(parts.provider.show_model(&model)) {
        Ok(info) => {
            let window = window_text(state, settings, rt).1;
            format!(
                "model:    {model}\nprovider: {} ({})\ncontext:  {window}\ncapabilities: {}",
                settings.provider.name,
                settings.provider.base_url,
                info.capabilities
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
        Err(e) => format!("error: {}", crate::errors::headline(&e)),
    }
}

/// The window the next request gets (as core settles it) and, in words, where it came
/// from.
fn window_text(
    state: &State,
    settings: &Settings,
    rt: &tokio::runtime::Runtime,
) -> (usize, String) {
    let (window, info) = rt.block_on(async {
        let window = state.client.context_window().await;
        (window, state.client.model_info().await)
    });
    let chat = state.client.config();
    let origin = crate::context::Origin {
        chat: &chat,
        flag: state.context_flag,
        kind: settings.provider.kind,
    };
    let text = crate::context::describe(window, origin, info.as_ref());
    (window.tokens, text)
}

fn status_text(state: &State, settings: &Settings, (window, source): &(usize, String)) -> String {
    let used = state
        .last
        .usage
        .prompt_tokens
        .map(|p| u64::from(p) + u64::from(state.last.usage.completion_tokens.unwrap_or(0)));
    let window = *window as u64;
    let context = match used {
        Some(u) if window > 0 => format!("{u} / {window} tokens ({}%)", u * 100 / window),
        _ => format!("nothing sent yet / {window} tokens"),
    };
    let config = state.client.config();
    let compaction = &config.compaction;
    let compact = if compaction.enabled {
        format!("at {}% of the window", compaction.threshold_percent)
    } else {
        "off (/compact compacts by hand)".to_owned()
    };
    format!(
        "model:    {}\nprovider: {} ({})\nmessages: {}\nwindow:   {source}\ncontext:  {}\ncompact:  {compact}\ntokens:   {} in, {} out this chat\nsession:  {}",
        config.model,
        settings.provider.name,
        settings.provider.base_url,
        state.client.history().len(),
        context,
        state.total_prompt,
        state.total_completion,
        state.session.as_ref().map_or("(none)", Session::name)
    )
}

/// `/save NAME [--force]`: writes a snapshot of the conversation as session `NAME`. The
/// chat does not continue in it (a later `/clear` is not recorded there), and an existing
/// session is replaced only with `--force`.
fn save_as(
    words: &str,
    state: &mut State,
    settings: &Settings,
) -> Result<std::path::PathBuf, CliError> {
    let mut parts = words.split_whitespace();
    let name = parts.next().unwrap_or_default();
    let force = match parts.next() {
        None => false,
        Some("--force" | "-f" | "!") => true,
        Some(other) => {
            return Err(CliError::Usage(format!(
                "unexpected {other:?}: /save NAME [--force]"
            )));
        }
    };
    let session = Session::open(&settings.data_dir, name)?;
    let current = state.session.as_ref().map(Session::path) == Some(session.path());
    if session.path().exists() && !force && !current {
        return Err(CliError::Usage(format!(
            "session {name:?} exists; `/save {name} --force` replaces it"
        )));
    }
    let mut text = String::new();
    let meta = Record::Meta {
        version: 1,
        provider: settings.provider.name.clone(),
        model: state.client.config().model,
    };
    let history = state.client.history();
    for r in std::iter::once(meta).chain(history.messages().iter().map(Record::message)) {
        text.push_str(&serde_json::to_string(&r).map_err(|e| CliError::Other(e.into()))?);
        text.push('\n');
    }
    session.replace_with(text.as_bytes())?;
    if current {
        // Saving the session the chat is in: it goes on appending after the snapshot.
        state.session_fresh = false;
    }
    Ok(session.path().to_path_buf())
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
