//! The `ollm` command-line client.
//!
//! Flow: clap parses the raw arguments ([`args`]); [`config`] settles them with the
//! environment and the config file; [`providers`] builds the adapter; the command runs
//! ([`run`] and [`chat`] for chats, [`models`] for model management); [`exit`] turns the
//! outcome into a documented exit code. All user-visible output of ollm is printed here,
//! in the binary: the library crates never print.

// The binary is the one place that prints.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod ago;
mod args;
mod chat;
mod config;
mod context;
mod defaults;
mod errors;
mod exit;
mod images;
mod logging;
mod mcp;
mod models;
mod providers;
mod render;
mod run;
mod sessions;
mod slash;
mod tools;
mod transcript;
mod ui;
mod wrap;

use std::io::{IsTerminal, Write};
use std::process::ExitCode;

use clap::{CommandFactory, Parser};

use args::{Cli, Command, ConfigAction, SessionsAction};
use config::Env;
use exit::CliError;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() {
                exit::USAGE
            } else {
                exit::SUCCESS
            });
        }
    };
    match real_main(cli) {
        Ok(()) => ExitCode::from(exit::SUCCESS),
        // `ollm list | head -1`: the reader left; that is not an error.
        Err(CliError::Other(e)) if is_broken_pipe(&e) => ExitCode::from(exit::SUCCESS),
        Err(e) => {
            match &e {
                CliError::Reported(_) => {}
                CliError::Cancelled => eprintln!("cancelled"),
                CliError::Provider(p) => {
                    eprintln!("error: {}", errors::headline(p));
                    if let Some(hint) = ui::hint::for_error(p) {
                        eprintln!("  hint: {hint}");
                    }
                }
                other => eprintln!("error: {other:#}"),
            }
            ExitCode::from(e.exit_code())
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn real_main(cli: Cli) -> Result<(), CliError> {
    let env = Env::from_process();
    logging::init(&cli.global, &env)?;
    let stdout = std::io::stdout();
    match &cli.command {
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(*shell, &mut cmd, "ollm", &mut stdout.lock());
            return Ok(());
        }
        Command::Man => {
            clap_mangen::Man::new(Cli::command()).render(&mut stdout.lock())?;
            return Ok(());
        }
        _ => {}
    }
    let path = config::config_path(&cli.global, &env);
    if let Command::Config {
        action: ConfigAction::Path,
    } = &cli.command
    {
        writeln!(stdout.lock(), "{}", path.display())?;
        return Ok(());
    }
    let file = config::load_file(&path)?;
    let mcp_servers = file
        .as_ref()
        .map(|f| f.mcp_servers.clone())
        .unwrap_or_default();
    let settings = config::settle(&cli.global, &env, path, file)?;
    match &cli.command {
        Command::Config {
            action: ConfigAction::Show,
        } => {
            write!(stdout.lock(), "{}", config::render_settings(&settings))?;
            return Ok(());
        }
        Command::Mcp {
            action: args::McpAction::Add(add),
        } => {
            mcp::edit::add(&settings.config_path, add)?;
            writeln!(
                stdout.lock(),
                "added MCP server {:?} to {}",
                add.name,
                settings.config_path.display()
            )?;
            return Ok(());
        }
        Command::Mcp {
            action: args::McpAction::Remove { name },
        } => {
            mcp::edit::remove(&settings.config_path, name)?;
            writeln!(
                stdout.lock(),
                "removed MCP server {name:?} from {}",
                settings.config_path.display()
            )?;
            return Ok(());
        }
        Command::Sessions {
            action: SessionsAction::List,
        } => {
            let mut out = stdout.lock();
            let list = sessions::list(&settings.data_dir)?;
            if list.is_empty() {
                writeln!(
                    out,
                    "no sessions in {}",
                    sessions::dir(&settings.data_dir).display()
                )?;
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
            return Ok(());
        }
        Command::Sessions { action } => {
            return sessions_command(action, &settings.data_dir, &mut stdout.lock());
        }
        _ => {}
    }

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let provider = providers::connect(&settings.provider)?;
    let url = settings.provider.base_url.clone();
    let mut out = stdout.lock();
    let result = match cli.command {
        Command::List => rt.block_on(models::list(provider.as_ref(), &mut out)),
        Command::Show { model } => {
            let window = |info: &ollm_types::ModelInfo| {
                context::for_show(&settings.context, settings.provider.kind, &model, info)
            };
            rt.block_on(models::show(provider.as_ref(), &model, &window, &mut out))
        }
        Command::Rm { model } => rt.block_on(models::remove(provider.as_ref(), &model, &mut out)),
        Command::Ps => rt.block_on(models::ps(provider.as_ref(), &mut out)),
        Command::Version => rt.block_on(models::version(provider.as_ref(), &url, &mut out)),
        Command::Pull { model } => {
            let terminal = std::io::stderr().is_terminal() && std::io::stdout().is_terminal();
            rt.block_on(models::pull(provider.as_ref(), &model, terminal, &mut out))
        }
        Command::Run(args) => {
            drop(out);
            let args = continue_last(args, &settings)?;
            let term = run::Terminal::detect();
            let piped = if args.model.is_some() || settings.model.is_some() {
                run::read_piped(term)?
            } else {
                None
            };
            let mut plan = run::settle(&args, &settings, term, piped)?;
            plan.images = images::load(&args.image)?;
            if plan.prompt.is_some() && errors::looks_openai(&settings) {
                return Err(CliError::Usage(format!(
                    "{url} is an OpenAI-style address but the provider is ollama; {}",
                    ui::hint::OPENAI_HINT
                )));
            }
            let mut parts = run::Parts::new(provider, &settings, plan.approval)?;
            if !plan.no_tools {
                parts.mcp = rt.block_on(mcp::attach_or_interrupt(
                    &mcp_servers,
                    &settings.data_dir,
                    &mut parts.tools,
                    &parts.approver,
                ))?;
            }
            let result = match plan.prompt.clone() {
                Some(prompt) => rt.block_on(run::one_shot(&plan, &settings, &parts, &prompt)),
                None => chat::interactive(&rt, plan, &settings, &parts),
            };
            // Every way out of the run passes here: the servers never outlive it.
            if let Some(servers) = &parts.mcp {
                rt.block_on(servers.shutdown());
            }
            result
        }
        Command::Mcp { action } => match action {
            args::McpAction::List => {
                rt.block_on(mcp::list(&mcp_servers, &settings.data_dir, &mut out))
            }
            args::McpAction::Add(_) | args::McpAction::Remove { .. } => Ok(()),
        },
        Command::Completions { .. }
        | Command::Man
        | Command::Config { .. }
        | Command::Sessions { .. } => Ok(()),
    };
    shut_down(rt);
    result
}

/// `ollm sessions show|rm|export` (`list` is answered above).
fn sessions_command(
    action: &SessionsAction,
    data_dir: &std::path::Path,
    out: &mut dyn Write,
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
        SessionsAction::List => {}
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

/// Drops the runtime without waiting for its blocking tasks: an approval prompt's read of
/// stdin cannot be interrupted, and waiting for it would keep the process alive after a
/// Ctrl-C instead of exiting with 130.
fn shut_down(rt: tokio::runtime::Runtime) {
    rt.shutdown_background();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shutting_down_does_not_wait_for_a_blocked_read() {
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (_never_tx, never_rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .unwrap();
            // Stands in for a prompt's read of stdin that nobody answers.
            rt.spawn_blocking(move || never_rx.recv());
            shut_down(rt);
            done_tx.send(()).unwrap();
        });
        assert!(
            done_rx
                .recv_timeout(std::time::Duration::from_secs(10))
                .is_ok(),
            "the runtime waited for a blocked task"
        );
    }
}
