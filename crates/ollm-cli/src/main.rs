//! The `ollm` command-line client.
//!
//! Flow: clap parses the raw arguments ([`args`]); [`commands`] maps the command to its
//! handler, in one table, and says what the handler needs; `real_main` builds exactly
//! that: the config file's path, the [`commands::Settled`] settings ([`config`] settles the
//! flags with the environment and the config file, once), a runtime and the adapter
//! ([`providers`]). The handlers are plain functions ([`run`] and [`chat`] for chats,
//! [`models`] for model management); [`exit`] turns the outcome into a documented exit
//! code. All user-visible output of ollm is printed here,
//! in the binary: the library crates never print.

// The binary is the one place that prints.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod ago;
mod args;
mod chat;
mod commands;
mod config;
mod context;
mod defaults;
mod errors;
mod exit;
mod images;
mod learned;
mod logging;
mod mcp;
mod models;
mod providers;
mod render;
mod run;
mod sampling;
mod serve;
mod sessions;
mod slash;
mod tools;
mod transcript;
mod ui;

use std::process::ExitCode;

use clap::Parser;

use args::Cli;
use commands::{Handler, Served, Settled};
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
    match commands::handler(cli.command) {
        Handler::Bare(handle) => handle(&mut stdout.lock()),
        Handler::Path(handle) => {
            handle(&config::config_path(&cli.global, &env), &mut stdout.lock())
        }
        Handler::Settled(handle) => handle(&Settled::new(&cli.global, &env)?, &mut stdout.lock()),
        Handler::Served(handle) => {
            let settled = Settled::new(&cli.global, &env)?;
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?;
            let provider = providers::connect(&settled.settings.provider)?;
            let served = Served {
                settled,
                rt,
                provider,
            };
            let result = handle(&served);
            shut_down(served.rt);
            result
        }
    }
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
