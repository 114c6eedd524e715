//! `ollm run`: settling its arguments, building the chat client, and driving one
//! generation with Ctrl-C cancellation. The interactive loop lives in [`crate::chat`].

use std::io::{IsTerminal, Read, Write};
use std::sync::Arc;

use futures::{Stream, StreamExt};
use ollm_core::{
    ChatClient, ChatConfig, ChatEvent, ChatOptions, Compaction, ProviderAdapter, Rule, ToolRegistry,
};
use ollm_types::{FinishReason, Message};

use crate::args::{OutputFormat, RunArgs};
use crate::config::Settings;
use crate::defaults::RunDefaults;
use crate::exit::CliError;
use crate::render::{self, Sink, Summary, TextStyle};
use crate::sessions::{Record, Session};
use crate::tools;
use ollm_tools::{Approver, Mode};

/// A settled `ollm run`. Each setting is kept once: the model and `think` live in
/// `chat`, where the client reads them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RunPlan {
    /// The prompt of a one-shot run; `None` for an interactive chat.
    pub(crate) prompt: Option<String>,
    /// How the run is shown.
    pub(crate) printing: Printing,
    /// Offer no tools.
    pub(crate) no_tools: bool,
    /// The chat settings (the model, `think`, the tool mode, ...).
    pub(crate) chat: ChatConfig,
    /// The session to continue.
    pub(crate) session: Option<String>,
    /// How tool calls are approved.
    pub(crate) approval: Mode,
    /// `--context-length`, to say where the window came from (it is in `chat` too).
    pub(crate) context_flag: Option<u32>,
    /// The `--image` files, read and encoded (`(base64, MIME type)`); filled in after
    /// settling, which reads no files.
    pub(crate) images: Vec<(String, String)>,
}

/// How a run is shown: what its sink is made of.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Printing {
    /// The output format.
    pub(crate) format: OutputFormat,
    /// Text styling.
    pub(crate) style: TextStyle,
    /// Explain the run on stderr (`-v`, or more).
    pub(crate) verbose: bool,
}

impl Printing {
    /// The sink a run is shown in: the format on stdout and stderr, with the
    /// `--verbose` lines on stderr.
    pub(crate) fn sink(&self) -> Box<dyn Sink> {
        let inner = render::sink(
            self.format,
            self.style,
            Box::new(std::io::stdout()),
            Box::new(std::io::stderr()),
        );
        if self.verbose {
            Box::new(Verbose {
                inner,
                err: Box::new(std::io::stderr()),
            })
        } else {
            inner
        }
    }
}

/// What the terminal looks like, for settling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Terminal {
    /// stdin is a terminal.
    pub(crate) stdin: bool,
    /// stdout is a terminal.
    pub(crate) stdout: bool,
    /// `NO_COLOR` is set.
    pub(crate) no_color: bool,
}

impl Terminal {
    /// The process's terminal.
    pub(crate) fn detect() -> Self {
        Terminal {
            stdin: std::io::stdin().is_terminal(),
            stdout: std::io::stdout().is_terminal(),
            no_color: std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()),
        }
    }
}

/// Settles `ollm run`'s arguments. `piped` is stdin's text when stdin is not a terminal
/// (read by the caller, so this stays pure).
pub(crate) fn settle(
    args: &RunArgs,
    settings: &Settings,
    term: Terminal,
    piped: Option<String>,
) -> Result<RunPlan, CliError> {
    let model = model_of(args, settings)?;
    let prompt = prompt_of(args, piped, term)?;
    let approval = if args.yes {
        Mode::Yes
    } else if term.stdin {
        Mode::Ask
    } else {
        Mode::Headless
    };
    // Flags over the config file's layers (`defaults.rs`), core's defaults under all.
    let settled = settings
        .defaults
        .resolve(&RunDefaults::of_flags(args), &model);
    let mut chat = chat_config(model, &settled);
    if let Some(choice) = &args.tool_choice {
        chat.tool_choice = choice.clone();
    }
    chat.coach.off.extend(settings.coach_off.iter().copied());
    chat.coach.on.extend(settings.coach_on.iter().copied());
    if let Some(rules) = settings.model_coach_off.get(&chat.model) {
        chat.coach.off.extend(rules.iter().copied());
    }
    if let Some(rules) = settings.model_coach_on.get(&chat.model) {
        chat.coach.on.extend(rules.iter().copied());
    }
    let flags = crate::config::rules_named(&args.coach_off, "--coach-off")?;
    chat.coach.off.extend(flags);
    let on = crate::config::rules_named(&args.coach_on, "--coach-on")?;
    on.into_iter().for_each(|rule| chat.coach.turn_on(rule));
    crate::context::apply(
        &mut chat,
        &settings.context,
        args.context_length,
        args.no_compact,
    );
    Ok(RunPlan {
        prompt,
        printing: Printing {
            format: args.output_format,
            style: TextStyle {
                styled: term.stdout && !term.no_color,
                terminal: term.stdout,
                hide_thinking: settled.hide_thinking.unwrap_or(false),
            },
            verbose: settings.verbose > 0,
        },
        no_tools: args.no_tools,
        chat,
        session: args.session.clone(),
        approval,
        context_flag: args.context_length,
        images: Vec::new(),
    })
}

/// The model to run: the argument, else the settings' (`OLLM_MODEL`, the config file).
fn model_of(args: &RunArgs, settings: &Settings) -> Result<String, CliError> {
    let model = args
        .model
        .clone()
        .or_else(|| settings.model.clone())
        .ok_or_else(|| {
            CliError::Usage(
                "no model given: `ollm run MODEL`, OLLM_MODEL, or default_model in the config"
                    .into(),
            )
        })?;
    if model.contains(char::is_whitespace) {
        return Err(CliError::Usage(format!(
            "{model:?} was taken as the model name (the first word after `run` is the model): \
             `ollm run MODEL {model:?}`"
        )));
    }
    Ok(model)
}

/// The one-shot prompt: the typed words, then stdin's text; `None` for a chat, which
/// needs a terminal and the text format.
fn prompt_of(
    args: &RunArgs,
    piped: Option<String>,
    term: Terminal,
) -> Result<Option<String>, CliError> {
    let typed = args.prompt.join(" ");
    let piped = piped.filter(|p| !p.trim().is_empty());
    let prompt = match (typed.trim().is_empty(), piped) {
        (true, None) => None,
        (true, Some(p)) => Some(p),
        (false, None) => Some(typed),
        (false, Some(p)) => Some(format!("{typed}\n\n{p}")),
    };
    if prompt.is_none() {
        if !term.stdin {
            return Err(CliError::Usage(
                "no prompt: give one as an argument or on stdin (an interactive chat needs a terminal)"
                    .into(),
            ));
        }
        if args.output_format != OutputFormat::Text {
            return Err(CliError::Usage(
                "--output-format json and stream-json need a prompt (one-shot runs only)".into(),
            ));
        }
    }
    Ok(prompt)
}

/// Core's settings for `model` with the settled run defaults `d`; core's own defaults
/// where `d` sets nothing.
fn chat_config(model: String, d: &RunDefaults) -> ChatConfig {
    let mut chat = ChatConfig {
        model,
        system: d.system.clone(),
        think: d.think,
        keep_alive: d.keep_alive.clone(),
        ..ChatConfig::default()
    };
    if let Some(n) = d.max_turns {
        chat.max_turns = n;
    }
    if let Some(m) = d.tool_mode {
        chat.tool_mode = m;
    }
    if let Some(n) = d.max_tokens {
        chat.max_tokens = Some(n);
    }
    chat.options = d.sampling.clone().options();
    if d.runaway_guard == Some(false) {
        chat.coach.off.extend(RUNAWAY_GUARD);
    }
    chat
}

/// The coach's rules that `--no-runaway-guard` (`runaway_guard = false`) turns off: the
/// runaway stop and both cuts of a reply written as calls, as before the coach had names.
const RUNAWAY_GUARD: [Rule; 3] = [Rule::RunawayStop, Rule::CallLoopCut, Rule::ListedToolsCut];

/// The pieces a chat is made of: the provider, the built-in tools and their approval policy.
pub(crate) struct Parts {
    /// The provider.
    pub(crate) provider: Arc<dyn ProviderAdapter>,
    /// The built-in tools.
    pub(crate) tools: ToolRegistry,
    /// The approval policy they share.
    pub(crate) approver: Arc<Approver>,
    /// The run's MCP servers, once started (their tools are in `tools`).
    pub(crate) mcp: Option<Arc<crate::mcp::RunServers>>,
    /// What the model is told about the working folder in runs with tools.
    pub(crate) tools_context: Option<String>,
    /// The built-in tools' folder.
    pub(crate) workspace: ollm_tools::Workspace,
    /// The programs `run_command` may start (the coach's `named-command`).
    pub(crate) programs: Vec<String>,
    /// Where what `auto` learned is kept, and the server it is keyed by.
    pub(crate) learned_at: (std::path::PathBuf, String),
}

impl Parts {
    /// Builds the tools for the working directory.
    pub(crate) fn new(
        provider: Arc<dyn ProviderAdapter>,
        settings: &Settings,
        approval: Mode,
    ) -> Result<Self, CliError> {
        let built = tools::build(settings, approval)?;
        Ok(Parts {
            provider,
            tools: built.registry,
            approver: built.approver,
            mcp: None,
            tools_context: built.context,
            workspace: built.workspace,
            programs: built.programs,
            learned_at: (
                settings.data_dir.clone(),
                settings.provider.base_url.clone(),
            ),
        })
    }

    /// A client with `history` as the conversation so far.
    pub(crate) fn client(
        &self,
        config: &ChatConfig,
        history: &[Message],
    ) -> Result<ChatClient, CliError> {
        let mut config = config.clone();
        config.tools_context.clone_from(&self.tools_context);
        tools::tell_coach(&mut config.coach, &self.programs);
        tools::tell_paths(&mut config.coach, &self.workspace);
        let client = ChatClient::new(Arc::clone(&self.provider), self.tools.clone(), config)
            .with_history(history.to_vec());
        crate::learned::seed(&self.learned_at.0, &self.learned_at.1, &client);
        Ok(client)
    }

    /// Before each prompt of a chat: the folder's paths as they are now, for the coach
    /// (files written since the chat began can be read).
    pub(crate) fn refresh_paths(&self, client: &ChatClient) {
        let mut config = client.config();
        tools::tell_paths(&mut config.coach, &self.workspace);
        client.set_config(config);
    }

    /// Keeps what `client`'s runs taught `auto` about its model (`learned.rs`).
    pub(crate) fn keep_learned(&self, client: &ChatClient) {
        crate::learned::keep(&self.learned_at.0, &self.learned_at.1, client);
    }
}

/// How a generation ended.
pub(crate) struct Outcome {
    /// What it produced.
    pub(crate) summary: Summary,
    /// The messages the run added to the client's history (the prompt first), as core
    /// reported them on `Finish`: nothing for a run that failed before recording a turn
    /// (or that was abandoned before it finished).
    pub(crate) messages: Vec<Message>,
    /// The run's last compaction, if it compacted the history (then `messages` is not
    /// enough to save: the whole history changed).
    pub(crate) compaction: Option<Compaction>,
}

/// Runs one prompt through `client`, showing events in `sink`; Ctrl-C cancels the run
/// (a second Ctrl-C stops waiting for it to wind down).
pub(crate) async fn generate(
    client: &ChatClient,
    prompt: &str,
    options: ChatOptions,
    sink: &mut dyn Sink,
    model: &str,
) -> Result<Outcome, CliError> {
    // The first listener is polled once before the run starts. Tokio's handler is
    // process-wide once installed (the MCP start installs it), and a listener hears only
    // the signals after its first poll, so one made lazily by `drive`'s select! missed a
    // Ctrl-C that came between the first text and that poll: the run went on, stalled
    // (seen once as `sigint_mid_answer_exits_130_and_closes_the_stream` hanging 20 s).
    let mut first = Box::pin(futures::future::maybe_done(tokio::signal::ctrl_c()));
    let _ = futures::poll!(first.as_mut());
    let first = futures::stream::once(async move {
        first.as_mut().await;
        first.as_mut().take_output().and_then(Result::ok)
    })
    .filter_map(std::future::ready);
    let later = futures::stream::unfold((), |()| async {
        tokio::signal::ctrl_c().await.ok().map(|()| ((), ()))
    });
    generate_with(client, prompt, options, first.chain(later), sink, model).await
}

/// [`generate`] with the interrupts given.
pub(crate) async fn generate_with(
    client: &ChatClient,
    prompt: &str,
    options: ChatOptions,
    interrupts: impl Stream<Item = ()>,
    sink: &mut dyn Sink,
    model: &str,
) -> Result<Outcome, CliError> {
    let run = client.chat(prompt.to_owned(), options);
    let cancel = run.cancel_token();
    let compacted = std::sync::Mutex::new(None);
    let run = run.inspect(|event| {
        if let ChatEvent::Compacted { compaction } = event {
            if let Ok(mut last) = compacted.lock() {
                *last = Some(compaction.clone());
            }
        }
    });
    let mut summary = drive(run, || cancel.cancel(), interrupts, sink, model).await?;
    let messages = std::mem::take(&mut summary.added);
    let compaction = compacted.into_inner().unwrap_or_else(|e| e.into_inner());
    Ok(Outcome {
        summary,
        messages,
        compaction,
    })
}

/// Shows `events` in `sink` until the run finishes; each item of `interrupts` (Ctrl-C)
/// calls `cancel`, and a second one stops waiting for the run to wind down.
pub(crate) async fn drive(
    events: impl Stream<Item = ChatEvent>,
    cancel: impl Fn(),
    interrupts: impl Stream<Item = ()>,
    sink: &mut dyn Sink,
    model: &str,
) -> Result<Summary, CliError> {
    let mut events = std::pin::pin!(events);
    let mut interrupts = std::pin::pin!(interrupts.fuse());
    let mut summary = Summary::default();
    let mut interrupted = 0;
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else { break };
                summary.push(&event);
                sink.event(&event)?;
                if matches!(event, ChatEvent::Finish { .. }) {
                    break;
                }
            }
            Some(()) = interrupts.next() => {
                interrupted += 1;
                cancel();
                if interrupted > 1 {
                    summary.finish_reason = Some(FinishReason::Cancelled);
                    break;
                }
            }
        }
    }
    sink.end(&summary, model)?;
    Ok(summary)
}

/// The exit status a finished run deserves (its error was shown already).
pub(crate) fn status_of(summary: &Summary) -> Result<(), CliError> {
    match summary.finish_reason {
        Some(FinishReason::Cancelled) => Err(CliError::Cancelled),
        Some(FinishReason::Error) | None => match &summary.error {
            Some(e) => Err(CliError::Reported(crate::exit::code_for_kind(e.kind))),
            None if summary.finish_reason.is_none() => Err(CliError::Other(anyhow::anyhow!(
                "the run ended without finishing"
            ))),
            None => Err(CliError::Reported(crate::exit::RUNTIME)),
        },
        _ => Ok(()),
    }
}

/// Reads piped stdin, if stdin is not a terminal.
pub(crate) fn read_piped(term: Terminal) -> Result<Option<String>, CliError> {
    if term.stdin {
        return Ok(None);
    }
    let mut text = String::new();
    std::io::stdin().read_to_string(&mut text)?;
    Ok(Some(text))
}

/// `ollm run` with a prompt.
pub(crate) async fn one_shot(
    plan: &RunPlan,
    settings: &Settings,
    parts: &Parts,
    prompt: &str,
) -> Result<(), CliError> {
    let session = match &plan.session {
        Some(name) => Some(Session::open(&settings.data_dir, name)?),
        None => None,
    };
    let loaded = match &session {
        Some(s) => load_session(s)?,
        None => Vec::new(),
    };
    let client = parts.client(&plan.chat, &loaded)?;
    let options = ChatOptions {
        no_tools: plan.no_tools,
        images: plan.images.clone(),
        ..ChatOptions::default()
    };
    let mut sink = plan.printing.sink();
    let model = &plan.chat.model;
    let outcome = generate(&client, prompt, options, sink.as_mut(), model).await?;
    drop(sink);
    parts.keep_learned(&client);
    if let Some(s) = &session {
        let history = client.history();
        let change = Change::of(&outcome, history.messages());
        save_turn(s, settings, model, loaded.is_empty(), change);
    }
    status_of(&outcome.summary)
}

/// A sink that also explains the run on `err` (`--verbose`): which tool strategy it
/// uses and why. Never on stdout, so a `json` or piped answer stays clean.
pub(crate) struct Verbose {
    /// The sink shown to.
    pub(crate) inner: Box<dyn Sink>,
    /// Where the explanations go.
    pub(crate) err: Box<dyn std::io::Write>,
}

/// The `--verbose` line for `event`, if it has one.
pub(crate) fn verbose_line(event: &ChatEvent) -> Option<String> {
    match event {
        ChatEvent::StrategyChosen {
            strategy, reason, ..
        } => {
            let name = strategy.map_or("none".to_owned(), |s| s.to_string());
            Some(format!("ollm: tool strategy: {name} ({reason})"))
        }
        // The short error and retry lines hide the transport's detail; here it is.
        ChatEvent::Error { error } => Some(format!("ollm: detail: {}", error.message)),
        ChatEvent::Warning { warning } if warning.kind == ollm_types::WarningKind::Retrying => {
            Some(format!("ollm: detail: {}", warning.message))
        }
        // The coach's short line (or none) hides what it did; here is all of it.
        ChatEvent::Coached { rule, detail, .. } => Some(format!("ollm: coach: {rule}: {detail}")),
        _ => None,
    }
}

impl Sink for Verbose {
    fn event(&mut self, event: &ChatEvent) -> std::io::Result<()> {
        if let Some(line) = verbose_line(event) {
            writeln!(self.err, "{line}")?;
            self.err.flush()?;
        }
        self.inner.event(event)
    }

    fn end(&mut self, summary: &Summary, model: &str) -> std::io::Result<()> {
        self.inner.end(summary, model)
    }
}

/// Loads a session's messages, telling the user about any damage.
pub(crate) fn load_session(session: &Session) -> Result<Vec<Message>, CliError> {
    let loaded = session.load()?;
    if let Some(aside) = &loaded.moved_aside {
        crate::ui::warn(&format!(
            "session {:?} was damaged ({} record(s) unreadable); the original was kept as {}",
            session.name(),
            loaded.dropped,
            aside.display()
        ));
    }
    Ok(loaded.messages)
}

/// What a run (or `/compact`) changed in the conversation, to append to its session.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Change<'a> {
    /// These messages were added at the end.
    Added(&'a [Message]),
    /// The history was compacted: it is now these messages (a `compact` record, so the
    /// session resumes with exactly what the model saw).
    Compacted(&'a Compaction, &'a [Message]),
}

impl<'a> Change<'a> {
    /// What `outcome` changed; `history` is the client's messages after it.
    pub(crate) fn of(outcome: &'a Outcome, history: &'a [Message]) -> Self {
        match &outcome.compaction {
            Some(c) => Change::Compacted(c, history),
            None => Change::Added(&outcome.messages),
        }
    }

    /// Whether there is nothing to save.
    pub(crate) fn is_empty(&self) -> bool {
        matches!(self, Change::Added(m) if m.is_empty())
    }
}

/// Appends a change of the conversation to a session (with a `meta` record first for a
/// new one); a failure to save is a warning, not a failed run.
pub(crate) fn save_turn(
    session: &Session,
    settings: &Settings,
    model: &str,
    fresh: bool,
    change: Change<'_>,
) {
    let mut records = Vec::new();
    if fresh {
        records.push(Record::Meta {
            version: 1,
            provider: settings.provider.name.clone(),
            model: model.to_owned(),
        });
    }
    match change {
        Change::Added(messages) => records.extend(messages.iter().map(Record::message)),
        Change::Compacted(c, messages) => records.push(Record::Compact {
            summary: c.summary.clone(),
            turns_summarised: c.turns_summarised,
            turns_dropped: c.turns_dropped,
            messages: messages
                .iter()
                .map(crate::sessions::without_images)
                .collect(),
        }),
    }
    if let Err(e) = session.append(&records) {
        crate::ui::warn(&format!(
            "could not save session {:?} to {}: {e}",
            session.name(),
            session.path().display()
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::GlobalArgs;
    use crate::args::OutputFormat;
    use crate::config::{Env, settle as settle_config};
    use ollm_core::ToolMode;
    use ollm_types::{Think, Usage, WarningKind};

    fn settings(env: &[(&str, &str)]) -> Settings {
        settle_config(
            &GlobalArgs::default(),
            &Env::from_pairs(env),
            "c".into(),
            None,
        )
        .unwrap()
    }

    const TTY: Terminal = Terminal {
        stdin: true,
        stdout: true,
        no_color: false,
    };
    const PIPED: Terminal = Terminal {
        stdin: false,
        stdout: false,
        no_color: false,
    };

    fn args(words: &[&str]) -> RunArgs {
        use clap::Parser;
        let mut argv = vec!["ollm", "run"];
        argv.extend_from_slice(words);
        match crate::args::Cli::try_parse_from(argv).unwrap().command {
            crate::args::Command::Run(r) => r,
            _ => unreachable!(),
        }
    }

    #[test]
    fn prompt_sources() {
        let s = settings(&[]);
        let p = settle(&args(&["m", "hello", "there"]), &s, TTY, None).unwrap();
        assert_eq!(p.prompt.as_deref(), Some("hello there"));
        assert_eq!(p.approval, Mode::Ask);
        let p = settle(&args(&["m"]), &s, PIPED, Some("from stdin".into())).unwrap();
        assert_eq!(p.prompt.as_deref(), Some("from stdin"));
        assert_eq!(p.approval, Mode::Headless);
        assert!(!p.printing.style.styled);
        let p = settle(&args(&["m", "sum up"]), &s, PIPED, Some("text".into())).unwrap();
        assert_eq!(p.prompt.as_deref(), Some("sum up\n\ntext"));
        let p = settle(&args(&["m"]), &s, TTY, None).unwrap();
        assert_eq!(p.prompt, None, "interactive");
        let p = settle(&args(&["m", "--yes", "x"]), &s, PIPED, None).unwrap();
        assert_eq!(p.approval, Mode::Yes);
    }

    #[test]
    fn usage_errors() {
        let s = settings(&[]);
        let check = |words: &[&str], term, piped: Option<&str>| {
            let err = settle(&args(words), &s, term, piped.map(str::to_owned)).unwrap_err();
            assert!(matches!(err, CliError::Usage(_)), "{words:?}");
        };
        check(&[], TTY, None);
        check(&["m"], PIPED, Some("  "));
        check(&["m", "--output-format", "json"], TTY, None);
    }

    #[test]
    fn model_falls_back_to_env_and_flags_fill_the_config() {
        let s = settings(&[("OLLM_MODEL", "qwen3")]);
        let p = settle(
            &args(&[
                "--think=low",
                "--max-turns",
                "3",
                "--tool-mode",
                "react",
                "--system",
                "be brief",
            ]),
            &s,
            TTY,
            None,
        )
        .unwrap();
        assert_eq!(p.chat.model, "qwen3");
        assert_eq!(p.chat.max_turns, 3);
        assert_eq!(p.chat.tool_mode, ToolMode::React);
        assert_eq!(p.chat.max_tokens, Some(ollm_core::DEFAULT_MAX_TOKENS));
        assert!(!p.printing.verbose);
        let words = ["m", "--tool-choice", "none", "--max-tokens", "9", "x"];
        // `-v` is global: the settled configuration carries it.
        let loud = Settings { verbose: 1, ..s };
        let q = settle(&args(&words), &loud, TTY, None).unwrap();
        assert_eq!(q.chat.tool_choice, ollm_types::ToolChoice::None);
        assert_eq!(q.chat.max_tokens, Some(9));
        assert!(q.printing.verbose);
        assert_eq!(p.chat.think, Some(Think::Low));
        assert_eq!(p.chat.system.as_deref(), Some("be brief"));
    }

    #[test]
    fn the_runaway_guard_is_on_unless_the_flag_or_the_config_turns_it_off() {
        let guarded = |p: &RunPlan| RUNAWAY_GUARD.iter().all(|&r| p.chat.coach.is_on(r));
        let s = settings(&[]);
        let on = settle(&args(&["m", "x"]), &s, TTY, None).unwrap();
        assert!(guarded(&on));
        let off = settle(&args(&["m", "--no-runaway-guard", "x"]), &s, TTY, None).unwrap();
        assert!(!guarded(&off));
        let mut config = settings(&[]);
        config.defaults.global.runaway_guard = Some(false);
        let off = settle(&args(&["m", "x"]), &config, TTY, None).unwrap();
        assert!(!guarded(&off));
        // Each of the three goes, and nothing else.
        assert_eq!(off.chat.coach.off, RUNAWAY_GUARD.into_iter().collect());
    }

    /// `[models."NAME".coach] off` holds for runs of that model only, beside `[coach]
    /// off` and the flags.
    #[test]
    fn a_models_own_rules_off_hold_for_that_model_only() {
        let mut s = settings(&[]);
        s.coach_off.insert(Rule::ActNudge);
        s.model_coach_off
            .insert("big".into(), [Rule::ToolsContext].into());
        let off = |model: &str| {
            let plan = settle(&args(&[model, "x"]), &s, TTY, None).unwrap();
            plan.chat.coach.off
        };
        assert_eq!(off("big"), [Rule::ActNudge, Rule::ToolsContext].into());
        assert_eq!(off("small"), [Rule::ActNudge].into());
    }

    /// `[coach] on` and `[models."NAME".coach] on` turn on rules off by default (the call
    /// repairs, say), the second for that model only; `--coach-off` still wins.
    #[test]
    fn the_configs_rules_on_hold_and_a_flag_off_outranks_them() {
        let mut s = settings(&[]);
        s.coach_on.insert(Rule::KeyHint);
        s.model_coach_on
            .insert("gpt".into(), [Rule::NameRepair].into());
        let coach = |argv: &[&str]| settle(&args(argv), &s, TTY, None).unwrap().chat.coach;
        let gpt = coach(&["gpt", "x"]);
        assert!(gpt.is_on(Rule::KeyHint) && gpt.is_on(Rule::NameRepair));
        let other = coach(&["qwen", "x"]);
        assert!(other.is_on(Rule::KeyHint) && !other.is_on(Rule::NameRepair));
        let flag = coach(&["gpt", "--coach-off", "name-repair", "x"]);
        assert!(!flag.is_on(Rule::NameRepair) && flag.is_on(Rule::KeyHint));
    }

    /// `--coach-off` (repeatable, `all`) adds to what `[coach] off` turns off; an unknown
    /// name is a usage error listing the rules; with neither every rule is on.
    #[test]
    fn coach_off_names_the_rules_turned_off() {
        let off = |flags: &[&str], file: &[Rule]| {
            let mut s = settings(&[]);
            s.coach_off.extend(file.iter().copied());
            let mut argv = vec!["m"];
            argv.extend(flags);
            argv.push("x");
            settle(&args(&argv), &s, TTY, None).map(|p| p.chat.coach.off)
        };
        assert!(off(&[], &[]).unwrap().is_empty());
        let both = off(&["--coach-off", "act-nudge"], &[Rule::RepeatGuard]).unwrap();
        assert_eq!(
            both,
            [Rule::RepeatGuard, Rule::ActNudge].into_iter().collect()
        );
        let two = off(
            &["--coach-off", "can-nudge", "--coach-off=tools-context"],
            &[],
        )
        .unwrap();
        assert_eq!(
            two,
            [Rule::CanNudge, Rule::ToolsContext].into_iter().collect()
        );
        let on = |flags: &[&str]| {
            let argv = [&["m"], flags, &["x"]].concat();
            settle(&args(&argv), &settings(&[]), TTY, None).map(|p| p.chat.coach)
        };
        let coach = on(&["--coach-on", "choice-both-orders"]).unwrap();
        assert!(coach.is_on(Rule::ChoiceBothOrders) && !coach.is_on(Rule::RoutedCall));
        let coach = on(&["--coach-on", "routed-call", "--coach-off", "routed-call"]).unwrap();
        assert!(!coach.is_on(Rule::RoutedCall), "off wins");
        assert!(
            !on(&[]).unwrap().is_on(Rule::ChoiceBothOrders),
            "off by default"
        );
        let all = off(&["--coach-off", "all"], &[]).unwrap();
        assert_eq!(all.len(), Rule::ALL.len());
        let Err(CliError::Usage(message)) = off(&["--coach-off", "repeat"], &[]) else {
            panic!("an unknown rule was accepted");
        };
        assert!(
            message.contains("--coach-off") && message.contains("repeat-guard"),
            "{message}"
        );
    }

    /// A run that streams some text, then waits to be cancelled.
    fn cancellable_run(
        token: tokio_util::sync::CancellationToken,
    ) -> impl Stream<Item = ChatEvent> {
        let head = futures::stream::iter([ChatEvent::TextDelta {
            text: "partial".into(),
        }]);
        let tail = futures::stream::once(async move {
            token.cancelled().await;
            ChatEvent::Finish {
                reason: FinishReason::Cancelled,
                usage: Usage::default(),
                added: Vec::new(),
            }
        });
        head.chain(tail)
    }

    #[test]
    fn verbose_explains_the_strategy_on_its_own_stream() {
        let err = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl std::io::Write for Shared {
            fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(buf);
                Ok(buf.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut sink = Verbose {
            inner: quiet_sink(),
            err: Box::new(Shared(err.clone())),
        };
        let chosen = ChatEvent::StrategyChosen {
            strategy: Some(ToolMode::React),
            reason: "auto: because".into(),
            cause: ollm_core::Reason::ReportsNoTools,
        };
        sink.event(&chosen).unwrap();
        sink.event(&ChatEvent::TextDelta { text: "hi".into() })
            .unwrap();
        let none = ChatEvent::StrategyChosen {
            strategy: None,
            reason: "no tools".into(),
            cause: ollm_core::Reason::NoTools,
        };
        sink.event(&none).unwrap();
        let written = String::from_utf8(err.lock().unwrap().clone()).unwrap();
        assert_eq!(
            written,
            "ollm: tool strategy: react (auto: because)\nollm: tool strategy: none (no tools)\n"
        );
    }

    /// What the coach did, in full, is a `--verbose` line naming its rule; the short line
    /// (or none) is the text sink's.
    #[test]
    fn verbose_tells_what_the_coach_did_in_full() {
        let coached = ChatEvent::Coached {
            rule: Rule::ListedToolsCut,
            call_id: None,
            detail: "the reply ... (after 81 of its 279 bytes so far)".into(),
        };
        assert_eq!(
            verbose_line(&coached).as_deref(),
            Some("ollm: coach: listed-tools-cut: the reply ... (after 81 of its 279 bytes so far)")
        );
    }

    fn quiet_sink() -> Box<dyn Sink> {
        render::sink(
            OutputFormat::Json,
            TextStyle {
                styled: false,
                terminal: false,
                hide_thinking: false,
            },
            Box::new(std::io::sink()),
            Box::new(std::io::sink()),
        )
    }

    #[tokio::test]
    async fn ctrl_c_cancels_the_run_and_exits_130() {
        let token = tokio_util::sync::CancellationToken::new();
        let t = token.clone();
        let mut sink = quiet_sink();
        let out = drive(
            cancellable_run(token.clone()),
            move || t.cancel(),
            futures::stream::once(async {}),
            sink.as_mut(),
            "m",
        )
        .await
        .unwrap();
        assert!(token.is_cancelled());
        assert_eq!(out.answer, "partial");
        assert_eq!(status_of(&out).unwrap_err().exit_code(), 130);
    }

    #[tokio::test]
    async fn a_second_ctrl_c_stops_waiting() {
        let mut sink = quiet_sink();
        // The run ignores cancellation; two interrupts end the wait anyway.
        let stuck = futures::stream::pending::<ChatEvent>();
        let out = drive(
            stuck,
            || {},
            futures::stream::iter([(), ()]),
            sink.as_mut(),
            "m",
        )
        .await
        .unwrap();
        assert_eq!(out.finish_reason, Some(FinishReason::Cancelled));
    }

    fn client_of(provider: Arc<test_utils::mock_provider::MockProvider>) -> ChatClient {
        let tool = test_utils::recording_tool::RecordingTool::new("list_dir").echoes();
        ChatClient::new(
            provider,
            test_utils::recording_tool::registry([tool]),
            ChatConfig {
                model: "m".into(),
                ..ChatConfig::default()
            },
        )
    }

    #[tokio::test]
    async fn a_failed_run_adds_nothing_to_save() {
        use test_utils::mock_provider::{MockProvider, ev};
        let provider = MockProvider::builder()
            .turn(vec![ev::error(
                ollm_types::ProviderErrorKind::Connection,
                "refused",
            )])
            .build();
        let client = client_of(provider);
        let mut sink = quiet_sink();
        let out = generate_with(
            &client,
            "q",
            ChatOptions::default(),
            futures::stream::pending(),
            sink.as_mut(),
            "m",
        )
        .await
        .unwrap();
        assert_eq!(out.summary.finish_reason, Some(FinishReason::Error));
        assert!(out.messages.is_empty(), "{:?}", out.messages);
        assert!(client.history().is_empty());
    }

    #[tokio::test]
    async fn saved_messages_are_what_core_recorded() {
        use test_utils::mock_provider::{MockProvider, ev};
        let provider = MockProvider::builder()
            .turn(vec![
                ev::call("c1", "list_dir", serde_json::json!({"path": "a"})),
                ev::call("c2", "list_dir", serde_json::json!({"path": "b"})),
                ev::finish(),
            ])
            .turn(vec![ev::text("done"), ev::finish()])
            .build();
        let client = client_of(provider)
            .with_history([Message::user("earlier"), Message::assistant("reply")]);
        let mut sink = quiet_sink();
        let out = generate_with(
            &client,
            "q",
            ChatOptions::default(),
            futures::stream::pending(),
            sink.as_mut(),
            "m",
        )
        .await
        .unwrap();
        let history = client.history();
        assert_eq!(out.messages, history.messages()[2..].to_vec());
        assert_eq!(out.messages[0], Message::user("q"));
        assert_eq!(out.messages.len(), 5, "{:?}", out.messages);
    }

    #[test]
    fn exit_status_of_runs() {
        let mut s = Summary::default();
        s.finish_reason = Some(FinishReason::Stop);
        assert!(status_of(&s).is_ok());
        s.finish_reason = Some(FinishReason::Cancelled);
        assert_eq!(status_of(&s).unwrap_err().exit_code(), 130);
        s.finish_reason = Some(FinishReason::Error);
        s.error = Some(ollm_types::ProviderError::new(
            ollm_types::ProviderErrorKind::Connection,
            "refused",
        ));
        assert_eq!(status_of(&s).unwrap_err().exit_code(), 3);
        s.finish_reason = None;
        s.error = None;
        assert_eq!(status_of(&s).unwrap_err().exit_code(), 1);
        s.warnings
            .push(ollm_types::Warning::new(WarningKind::Other, "x"));
        s.finish_reason = Some(FinishReason::MaxTurns);
        assert!(status_of(&s).is_ok());
    }
}
