//! The command table: which handler each `ollm` command runs, and what it needs first.
//!
//! # Decisions
//! - One `match` over the parsed [`Command`] ([`handler`]) picks the handler and hands it
//!   the command's own arguments, so no other code matches the command again (before,
//!   `real_main` matched it three times, two of the arms unreachable). Ripgrep's core
//!   crate is the model: raw arguments in, one dispatch, plain functions out.
//! - A handler says what it needs by its [`Handler`] variant, in the order `main` builds
//!   them: nothing (completions, man page), the config file's path, the settled
//!   [`Settled`] settings (config file read and validated once), or a [`Served`] runtime
//!   and provider as well. `main` builds exactly that much, so `ollm config path` works
//!   with a broken config file and `ollm sessions list` needs no server.
//! - Handlers print to the `out` they are given (stdout); `ollm run` drops it and prints
//!   through its renderer, which writes stdout and stderr itself.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use clap::CommandFactory;
use ollm_core::ProviderAdapter;

use crate::args::{self, Cli, Command, ConfigAction, McpAction, SessionsAction};
use crate::config::{self, Env, Settings};
use crate::exit::CliError;
use crate::mcp::McpServerEntry;
use crate::{ago, chat, context, errors, images, mcp, models, run, sessions, transcript, ui};
use ollm_serve::ServeEntry;

/// Where a handler writes: stdout, locked.
type Out<'a> = &'a mut dyn Write;

/// What a handler returns.
type Done = Result<(), CliError>;
/// A handler that needs only the config file's path.
type PathHandler = Box<dyn FnOnce(&Path, Out<'_>) -> Done>;
/// A handler that needs the settled settings.
type SettledHandler = Box<dyn FnOnce(&Settled, Out<'_>) -> Done>;

/// A command's handler, by what it needs before it runs.
pub(crate) enum Handler {
    /// Nothing: it only prints.
    Bare(Box<dyn FnOnce(Out<'_>) -> Done>),
    /// The config file's path, not its contents.
    Path(PathHandler),
    /// The settled settings.
    Settled(SettledHandler),
    /// The settings, a runtime and the provider. No `out`: `ollm run` must not hold
    /// stdout's lock while its tasks print, so each of these locks it itself.
    Served(Box<dyn FnOnce(&Served) -> Done>),
}

/// Flags, environment and config file, settled once: what every command past `config path`
/// reads.
pub(crate) struct Settled {
    pub(crate) settings: Settings,
    /// The config file's `[mcp_servers.NAME]` tables.
    pub(crate) mcp_servers: BTreeMap<String, McpServerEntry>,
    /// The config file's `[serve]` table.
    pub(crate) serve: ServeEntry,
}

impl Settled {
    /// Reads the config file and settles it with the flags and the environment.
    pub(crate) fn new(global: &args::GlobalArgs, env: &Env) -> Result<Self, CliError> {
        let path = config::config_path(global, env);
        let file = config::load_file(&path)?;
        let mcp_servers = file
            .as_ref()
            .map(|f| f.mcp_servers.clone())
            .unwrap_or_default();
        let serve = file.as_ref().map(|f| f.serve.clone()).unwrap_or_default();
        let settings = config::settle(global, env, path, file)?;
        Ok(Self {
            settings,
            mcp_servers,
            serve,
        })
    }
}

/// [`Settled`] with the runtime and the provider the commands that talk to a server use.
pub(crate) struct Served {
    pub(crate) settled: Settled,
    pub(crate) rt: tokio::runtime::Runtime,
    pub(crate) provider: Arc<dyn ProviderAdapter>,
}

impl Served {
    fn provider(&self) -> &dyn ProviderAdapter {
        self.provider.as_ref()
    }
}

/// The table: the handler for `command`, holding the command's arguments.
pub(crate) fn handler(command: Command) -> Handler {
    match command {
        Command::Completions { shell } => Handler::Bare(Box::new(move |out| {
            clap_complete::generate(shell, &mut Cli::command(), "ollm", out);
            Ok(())
        })),
        Command::Man => Handler::Bare(Box::new(|out| {
            Ok(clap_mangen::Man::new(Cli::command()).render(out)?)
        })),
        Command::Config {
            action: ConfigAction::Path,
        } => Handler::Path(Box::new(|path, out| {
            Ok(writeln!(out, "{}", path.display())?)
        })),
        Command::Config {
            action: ConfigAction::Show,
        } => Handler::Settled(Box::new(|s, out| {
            Ok(write!(out, "{}", config::render_settings(&s.settings))?)
        })),
        Command::Mcp {
            action: McpAction::Add(add),
        } => Handler::Settled(Box::new(move |s, out| mcp_add(&add, &s.settings, out))),
        Command::Mcp {
            action: McpAction::Remove { name },
        } => Handler::Settled(Box::new(move |s, out| mcp_remove(&name, &s.settings, out))),
        Command::Mcp {
            action: McpAction::List,
        } => served(|s| {
            let data_dir = &s.settled.settings.data_dir;
            let out = &mut std::io::stdout().lock();
            s.rt.block_on(mcp::list(&s.settled.mcp_servers, data_dir, out))
        }),
        Command::Sessions { action } => Handler::Settled(Box::new(move |s, out| {
            sessions_command(&action, &s.settings.data_dir, out)
        })),
        Command::List => served(|s| s.rt.block_on(models::list(s.provider(), &mut stdout()))),
        Command::Show { model } => served(move |s| show(&model, s)),
        Command::Rm { model } => served(move |s| {
            s.rt.block_on(models::remove(s.provider(), &model, &mut stdout()))
        }),
        Command::Ps => served(|s| s.rt.block_on(models::ps(s.provider(), &mut stdout()))),
        Command::Version => served(|s| {
            let url = &s.settled.settings.provider.base_url;
            s.rt.block_on(models::version(s.provider(), url, &mut stdout()))
        }),
        Command::Pull { model } => served(move |s| {
            let terminal = std::io::stderr().is_terminal() && std::io::stdout().is_terminal();
            s.rt.block_on(models::pull(s.provider(), &model, terminal, &mut stdout()))
        }),
        Command::Run(args) => served(move |s| run_command(args, s)),
        Command::Serve(args) => Handler::Settled(Box::new(move |s, _| {
            crate::serve::run(&args, &s.settings, &s.serve)
        })),
    }
}

fn served(handle: impl FnOnce(&Served) -> Result<(), CliError> + 'static) -> Handler {
    Handler::Served(Box::new(handle))
}

/// Stdout, locked for one command's output.
fn stdout() -> std::io::StdoutLock<'static> {
    std::io::stdout().lock()
}

/// `ollm mcp add`.
fn mcp_add(add: &args::AddArgs, settings: &Settings, out: Out<'_>) -> Result<(), CliError> {
    mcp::edit::add(&settings.config_path, add)?;
    writeln!(
        out,
        "added MCP server {:?} to {}",
        add.name,
        settings.config_path.display()
    )?;
    Ok(())
}

/// `ollm mcp remove`.
fn mcp_remove(name: &str, settings: &Settings, out: Out<'_>) -> Result<(), CliError> {
    mcp::edit::remove(&settings.config_path, name)?;
    writeln!(
        out,
        "removed MCP server {name:?} from {}",
        settings.config_path.display()
    )?;
    Ok(())
}

/// `ollm show MODEL`, with where its window comes from.
fn show(model: &str, s: &Served) -> Result<(), CliError> {
    let settings = &s.settled.settings;
    let window = |info: &ollm_types::ModelInfo| {
        context::for_show(&settings.context, settings.provider.kind, model, info)
    };
    let out = &mut stdout();
    s.rt.block_on(models::show(s.provider(), model, &window, out))
}

/// `ollm run`: one answer, or the interactive chat; the MCP servers never outlive it.
fn run_command(args: args::RunArgs, s: &Served) -> Result<(), CliError> {
    let (settings, rt) = (&s.settled.settings, &s.rt);
    let args = continue_last(args, settings)?;
    let term = run::Terminal::detect();
    let piped = if args.model.is_some() || settings.model.is_some() {
        run::read_piped(term)?
    } else {
        None
    };
    let mut plan = run::settle(&args, settings, term, piped)?;
    plan.images = images::load(&args.image)?;
    if plan.prompt.is_some() && errors::looks_openai(settings) {
        return Err(CliError::Usage(format!(
            "{} is an OpenAI-style address but the provider is ollama; {}",
            settings.provider.base_url,
            ui::hint::OPENAI_HINT
        )));
    }
    let mut parts = run::Parts::new(Arc::clone(&s.provider), settings, plan.approval)?;
    if !plan.no_tools {
        parts.mcp = rt.block_on(mcp::attach_or_interrupt(
            &s.settled.mcp_servers,
            &settings.data_dir,
            &mut parts.tools,
            &parts.approver,
        ))?;
    }
    let result = match plan.prompt.clone() {
        Some(prompt) => rt.block_on(run::one_shot(&plan, settings, &parts, &prompt)),
        None => chat::interactive(rt, plan, settings, &parts),
    };
    // Every way out of the run passes here: the servers never outlive it.
    if let Some(servers) = &parts.mcp {
        rt.block_on(servers.shutdown());
    }
    result
}

/// `ollm sessions list`.
fn sessions_list(data_dir: &Path, out: Out<'_>) -> Result<(), CliError> {
    let list = sessions::list(data_dir)?;
    if list.is_empty() {
        writeln!(out, "no sessions in {}", sessions::dir(data_dir).display())?;
    }
    // A header for people; piped output stays one session a line for scripts.
    if !list.is_empty() && std::io::stdout().is_terminal() {
        writeln!(out, "NAME\tSIZE\tMODIFIED")?;
    }
    let now = ago::now();
    for s in list {
        writeln!(
            out,
            "{}\t{}\t{}",
            s.name,
            models::human_bytes(s.bytes),
            s.modified.map_or(String::new(), |m| ago::relative(
                i64::try_from(m).unwrap_or(i64::MAX),
                now
            ))
        )?;
    }
    Ok(())
}

/// `ollm sessions ...`.
fn sessions_command(
    action: &SessionsAction,
    data_dir: &std::path::Path,
    out: Out<'_>,
) -> Result<(), CliError> {
    let open = |name: &str| sessions::Session::open(data_dir, name);
    let skipped = |n: usize, name: &str| {
        if n > 0 {
            crate::ui::warn(&format!(
                "{n} unreadable line(s) of session {name:?} skipped"
            ));
        }
    };
    match action {
        SessionsAction::List => sessions_list(data_dir, out)?,
        SessionsAction::Show { name } => {
            let (records, unreadable) = open(name)?.read_records()?;
            write!(out, "{}", transcript::show(name, &records, unreadable))?;
        }
        SessionsAction::Rm { name } => {
            let session = open(name)?;
            session.remove()?;
            writeln!(
                out,
                "removed session {name:?} ({})",
                session.path().display()
            )?;
        }
        SessionsAction::Export { name, format } => {
            let (records, unreadable) = open(name)?.read_records()?;
            skipped(unreadable, name);
            let loaded = sessions::fold(records);
            match format {
                args::ExportFormat::Json => {
                    let doc = transcript::json(name, &loaded);
                    let text = serde_json::to_string_pretty(&doc).map_err(anyhow::Error::from)?;
                    writeln!(out, "{text}")?;
                }
                args::ExportFormat::Markdown => {
                    write!(out, "{}", transcript::markdown(name, &loaded))?;
                }
            }
        }
    }
    Ok(())
}

/// `ollm run --continue`: the most recently saved session as `--session`, and its model
/// when no model is given anywhere; a clear error when there is none.
fn continue_last(
    args: args::RunArgs,
    settings: &config::Settings,
) -> Result<args::RunArgs, CliError> {
    if !args.continue_last {
        return Ok(args);
    }
    let Some(last) = sessions::most_recent(&settings.data_dir)? else {
        return Err(CliError::Usage(format!(
            "--continue: there is no saved session in {} (`--session NAME` starts one)",
            sessions::dir(&settings.data_dir).display()
        )));
    };
    let session = sessions::Session::open(&settings.data_dir, &last)?;
    let model = match (&args.model, &settings.model) {
        (None, None) => session
            .read_records()
            .map(|(r, _)| sessions::fold(r).model)?,
        _ => args.model.clone(),
    };
    if !args.prompt.is_empty() {
        // The chat says so itself, with the last exchange.
        eprintln!("continuing session {last:?}");
    }
    Ok(args::RunArgs {
        session: Some(last),
        model,
        ..args
    })
}
