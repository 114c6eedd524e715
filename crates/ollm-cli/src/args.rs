//! The raw command line, exactly as clap parses it.
//!
//! Nothing here is validated beyond what clap checks; [`crate::config::settle`] turns these
//! values, the environment and the config file into the settled [`crate::config::Settings`]
//! the commands use (ripgrep's low-level / high-level split).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use ollm_core::ToolMode;
use ollm_types::{Think, ToolChoice};

use crate::sampling::Sampling;

/// What `ollm --help` and `ollm man` add after the options: the chat's commands, the
/// environment and the exit codes (documented in full in docs/cli.md).
const MORE: &str = "\
Running a model:
  ollm run MODEL \"PROMPT\"   one answer (piped input is added to the prompt)
  ollm run MODEL            an interactive chat (the first word after run is the model)

Chat commands:
  /help or /?  /clear  /compact  /model [NAME]  /think [LEVEL]  /tools [on|off|yes]  /status
  /set system TEXT  /set parameter NAME VALUE  /set think  /set nothink  /image PATH
  /show info|parameters|system  /save NAME [--force]  /load NAME  /bye or /exit

Environment:
  OLLAMA_HOST    the Ollama address (127.0.0.1:11434)
  ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY  the `anthropic` provider's address and key
  OLLM_HOST      the server address, for any provider
  OLLM_PROVIDER  the provider (ollama, openai, anthropic, or a name in the config)
  OLLM_MODEL     the model when none is given
  OLLM_CONFIG    the config file;  OLLM_DATA_DIR  sessions and history
  NO_COLOR       no styling

Exit codes:
  0 success  1 runtime failure  2 usage or config  3 server unreachable
  4 model not found  5 credentials refused  130 cancelled";

/// Chat with local models, with tools, from the terminal.
#[derive(Debug, Parser)]
#[command(name = "ollm", version, about, long_about = None, after_long_help = MORE)]
pub(crate) struct Cli {
    /// The options every command shares.
    #[command(flatten)]
    pub(crate) global: GlobalArgs,
    /// What to do.
    #[command(subcommand)]
    pub(crate) command: Command,
}

/// Options every command accepts.
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct GlobalArgs {
    /// The provider to use: `ollama`, `openai`, `anthropic`, or a name from the config file.
    #[arg(long, global = true, value_name = "NAME")]
    pub(crate) provider: Option<String>,
    /// The server address (for example `127.0.0.1:11434` or `http://host:8080/v1`).
    #[arg(long, global = true, value_name = "URL")]
    pub(crate) host: Option<String>,
    /// The config file to read instead of the default one.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Say more on stderr: `-v` explains the run (which tool strategy and why) and logs at
    /// info level, `-vv` at debug (the requests sent, secrets left out), `-vvv` at trace
    /// (the raw stream). `RUST_LOG` overrides the level.
    #[arg(long, short = 'v', global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Write the log to this file (appended, owner-only) instead of stderr.
    #[arg(long, global = true, value_name = "FILE")]
    pub(crate) log_file: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Chat with a model: one-shot with a prompt or piped input, interactive otherwise.
    Run(RunArgs),
    /// List the models the server has.
    #[command(alias = "ls")]
    List,
    /// Download a model.
    Pull {
        /// The model, for example `qwen3:8b`.
        model: String,
    },
    /// Show a model's capabilities, context length and parameters.
    Show {
        /// The model.
        model: String,
    },
    /// Delete a model.
    #[command(alias = "delete")]
    Rm {
        /// The model.
        model: String,
    },
    /// List the models loaded in memory.
    Ps,
    /// Serve an OpenAI-compatible API in front of one or more model servers, repairing
    /// tool calls on the way through (docs/serve.md).
    Serve(ServeArgs),
    /// Print the client's and the server's versions.
    Version,
    /// Inspect the configuration.
    Config {
        /// What to show.
        #[command(subcommand)]
        action: ConfigAction,
    },
    /// Saved conversations.
    Sessions {
        /// What to do.
        #[command(subcommand)]
        action: SessionsAction,
    },
    /// MCP servers from `[mcp_servers.NAME]` in the config file.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        action: McpAction,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff).
    Man,
}

/// `ollm config ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigAction {
    /// Print the path of the config file.
    Path,
    /// Print the settled configuration, secrets masked.
    Show,
}

/// `ollm sessions ...`.
#[derive(Debug, Subcommand)]
pub(crate) enum SessionsAction {
    /// List saved sessions.
    List,
    /// Print a saved conversation: each message with its role, tool calls and their
    /// results, `/clear` and compaction records.
    Show {
        /// The session.
        name: String,
    },
    /// Delete a saved session.
    #[command(alias = "delete")]
    Rm {
        /// The session.
        name: String,
    },
    /// Print a saved conversation as it would resume, as JSON or Markdown, on stdout.
    Export {
        /// The session.
        name: String,
        /// The format.
        #[arg(long, value_enum, default_value_t = ExportFormat::Json)]
        format: ExportFormat,
    },
}

/// `ollm sessions export --format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ExportFormat {
    /// One JSON document: the session's name, provider, model and messages.
    Json,
    /// A Markdown transcript.
    Markdown,
}

/// `ollm run ...`.
#[derive(Debug, Args, Default, Clone)]
pub(crate) struct RunArgs {
    /// The model (falls back to OLLM_MODEL, then the provider's default model).
    pub(crate) model: Option<String>,
    /// The prompt; without one (and without piped input) an interactive chat starts.
    /// Flags may follow it (`run m "hi" --yes`, as in `ollama run`); after a literal `--`
    /// every word is prompt, even one that starts with `-`.
    pub(crate) prompt: Vec<String>,
    /// Offer the model no tools.
    #[arg(long)]
    pub(crate) no_tools: bool,
    /// Approve every tool call that needs approval without asking.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    /// Ask a reasoning model to think (`on`, `off`, `low`, `medium`, `high`).
    #[arg(
        long,
        value_name = "LEVEL",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "on"
    )]
    pub(crate) think: Option<Think>,
    /// Keep the model's thinking off screen.
    #[arg(long)]
    pub(crate) hide_thinking: bool,
    /// Never stop a reply for repeating itself (by default one unit repeated over 8 KiB
    /// is taken as a loop), nor cut a reply of calls that loops or lists the tools: the
    /// coach's `runaway-stop`, `call-loop-cut` and `listed-tools-cut` off. The generation
    /// cap still bounds the reply.
    #[arg(long)]
    pub(crate) no_runaway_guard: bool,
    /// Turn off one of the coach's small-model rules (repeatable; `all` turns every rule
    /// off). The rules are listed in docs/tool-calling.md; an unknown name lists them.
    #[arg(long, value_name = "RULE")]
    pub(crate) coach_off: Vec<String>,
    /// Turn on one of the coach's rules that are off unless asked for (repeatable):
    /// `routed-call`, `choice-both-orders`. `--coach-off` wins.
    #[arg(long, value_name = "RULE")]
    pub(crate) coach_on: Vec<String>,
    /// How to print the run.
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub(crate) output_format: OutputFormat,
    /// Continue (or start) the saved session of this name.
    #[arg(long, value_name = "NAME")]
    pub(crate) session: Option<String>,
    /// Continue the most recently used session (the one saved to last); without a model,
    /// with the model it recorded.
    #[arg(long = "continue", conflicts_with = "session")]
    pub(crate) continue_last: bool,
    /// Attach an image to the prompt (repeatable): PNG, JPEG, GIF or WebP, at most 20 MiB,
    /// for models with the `vision` capability. In a chat it goes with the first prompt.
    #[arg(long, value_name = "PATH")]
    pub(crate) image: Vec<PathBuf>,
    /// How tools reach the model (`auto`, `native`, `react`, `constrained`).
    #[arg(long, value_name = "MODE")]
    pub(crate) tool_mode: Option<ToolMode>,
    /// Whether the model must call a tool: `auto`, `none`, `required`, or a tool's name
    /// (`required` and a name bind only until the first call).
    #[arg(long, value_name = "CHOICE")]
    pub(crate) tool_choice: Option<ToolChoice>,
    /// The most tokens one reply may generate (default 4096); a reply cut there ends as
    /// `length`.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_tokens: Option<u32>,
    /// The most model round trips per prompt [default: 10].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_turns: Option<u32>,
    /// The system prompt.
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,
    /// The context window in tokens, over the config and what the server reports (on
    /// Ollama it is also the `num_ctx` sent).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) context_length: Option<u32>,
    /// Never compact the conversation: a prompt over the window is refused (`/compact`
    /// compacts by hand).
    #[arg(long)]
    pub(crate) no_compact: bool,
    /// How long Ollama keeps the model loaded after the run: a duration (`10m`, `1h`,
    /// `0` to unload at once) or seconds (`-1` forever). OpenAI-compatible servers
    /// ignore it.
    #[arg(long, value_name = "DURATION", value_parser = keep_alive, allow_hyphen_values = true)]
    pub(crate) keep_alive: Option<String>,
    /// Sampling options sent with every request of the run.
    #[command(flatten)]
    pub(crate) sampling: Sampling,
}

/// A `keep_alive` as Ollama reads it: whole seconds (`-1`: forever), or a Go duration,
/// numbers each followed by a unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`): `10m`,
/// `1h30m`, `0.5h`, `0`.
pub(crate) fn keep_alive(text: &str) -> Result<String, String> {
    let refused = || {
        Err(format!(
            "`{text}` is not a duration (`10m`, `1h30m`, `0`) or a number of seconds (`-1`: forever)"
        ))
    };
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !body.is_empty() && body.bytes().all(|b| b.is_ascii_digit()) {
        return Ok(text.to_owned());
    }
    let mut rest = body;
    if rest.is_empty() {
        return refused();
    }
    while !rest.is_empty() {
        let number = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (digits, tail) = rest.split_at(number);
        if digits.is_empty() || digits == "." || digits.matches('.').count() > 1 {
            return refused();
        }
        let Some(unit) = ["ns", "us", "µs", "ms", "s", "m", "h"]
            .into_iter()
            .filter(|u| tail.starts_with(u))
            .max_by_key(|u| u.len())
        else {
            return refused();
        };
        rest = &tail[unit.len()..];
    }
    Ok(text.to_owned())
}

/// `--output-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum OutputFormat {
    /// Human-readable text, streamed.
    #[default]
    Text,
    /// One JSON object when the run ends.
    Json,
    /// One JSON object per event, one a line.
    StreamJson,
}

/// `ollm mcp ...`.
#[derive(Debug, Clone, Subcommand)]
pub(crate) enum McpAction {
    /// Start the enabled servers and list each one's state and tools.
    List,
    /// Add a server to the config file: `ollm mcp add NAME -- COMMAND ARGS...` or
    /// `ollm mcp add NAME --url URL`.
    Add(AddArgs),
    /// Remove a server from the config file.
    Remove {
        /// The server's name.
        name: String,
    },
}

/// `ollm mcp add NAME (--url URL | -- COMMAND ARGS...)`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub(crate) struct AddArgs {
    /// The server's name (its tools are called `NAME__tool`).
    pub(crate) name: String,
    /// The endpoint of a streamable HTTP server.
    #[arg(long, conflicts_with = "command")]
    pub(crate) url: Option<String>,
    /// The program of a stdio server and its arguments, after `--`.
    #[arg(last = true, required_unless_present = "url")]
    pub(crate) command: Vec<String>,
}

/// `ollm serve`'s arguments.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServeArgs {
    /// The address to listen on; non-loopback addresses need `--api-key`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8090")]
    pub(crate) listen: std::net::SocketAddr,
    /// An upstream server (repeat for a pool); default: the provider's address.
    #[arg(long = "upstream", value_name = "URL")]
    pub(crate) upstreams: Vec<String>,
    /// Require `Authorization: Bearer KEY` from clients (and allow any listen address).
    #[arg(
        long,
        value_name = "KEY",
        env = "OLLM_SERVE_API_KEY",
        hide_env_values = true
    )]
    pub(crate) api_key: Option<String>,
    /// What happens to calls a model writes as text: `on` recovers them as `tool_calls`
    /// (marked), `flag` only reports them, `off` passes replies through untouched;
    /// default: `[serve] repair` in the config file, else `on`.
    #[arg(long, value_name = "POLICY")]
    pub(crate) repair: Option<RepairArg>,
    /// The policy for one model, `MODEL=POLICY` (repeat for more; over `[serve.models]`).
    #[arg(long = "repair-model", value_name = "MODEL=POLICY")]
    pub(crate) repair_models: Vec<String>,
    /// The same as `--repair off`.
    #[arg(long, conflicts_with = "repair")]
    pub(crate) no_repair: bool,
    /// Chat replies in flight per healthy replica; the next request is answered 429
    /// with `Retry-After` (default: `[serve] max_in_flight`, else no limit).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_in_flight: Option<u32>,
    /// How replicas are health-checked: `llama` (llama.cpp's /health), `models`
    /// (GET /v1/models) or `ollama`; default: by provider.
    #[arg(long, value_name = "KIND")]
    pub(crate) health: Option<HealthArg>,
    /// Seconds between health checks.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    pub(crate) health_interval: u64,
    /// The largest request body accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = ollm_serve::DEFAULT_MAX_BODY)]
    pub(crate) max_body_bytes: usize,
}

/// `--repair`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RepairArg {
    /// Pass replies through as the server wrote them.
    Off,
    /// Pass them through, reporting calls found in the text.
    Flag,
    /// Recover calls written as text, marked.
    On,
}

/// `--health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum HealthArg {
    /// llama.cpp's `GET /health`.
    Llama,
    /// `GET /v1/models`.
    Models,
    /// Ollama's `/api/version` and `/api/ps`.
    Ollama,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn think_without_a_level_means_on() {
        // A bare --think never swallows the model name.
        let cli = Cli::try_parse_from(["ollm", "run", "--think", "m", "hi"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.think, Some(Think::On));
        assert_eq!(run.model.as_deref(), Some("m"));
        assert_eq!(run.prompt, vec!["hi".to_owned()]);
        let cli = Cli::try_parse_from(["ollm", "run", "m", "--think=high", "hi"]).unwrap();
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        assert_eq!(run.think, Some(Think::High));
    }

    #[test]
    fn think_and_tool_mode_use_the_libraries_spellings() {
        let run_of = |argv: &[&str]| match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Run(run)) => Some((run.think, run.tool_mode)),
            _ => None,
        };
        assert_eq!(
            run_of(&["ollm", "run", "m", "--think=LOW", "--tool-mode", "ReAct"]),
            Some((Some(Think::Low), Some(ToolMode::React)))
        );
        assert_eq!(
            run_of(&["ollm", "run", "m", "--tool-mode", "constrained"]),
            Some((None, Some(ToolMode::Constrained)))
        );
        assert_eq!(run_of(&["ollm", "run", "m", "--think=max"]), None);
        assert_eq!(run_of(&["ollm", "run", "m", "--tool-mode", "magic"]), None);
    }

    #[test]
    fn tool_choice_max_tokens_and_verbose_parse() {
        let run_of = |argv: &[&str]| match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Command::Run(run),
                global,
            }) => Some((run.tool_choice, run.max_tokens, global.verbose > 0)),
            _ => None,
        };
        let check = |argv: &[&str], expected: Option<(Option<ToolChoice>, Option<u32>, bool)>| {
            assert_eq!(run_of(argv), expected, "{argv:?}");
        };
        check(&["ollm", "run", "m"], Some((None, None, false)));
        let required = Some(ToolChoice::Required);
        check(
            &["ollm", "run", "m", "--tool-choice", "REQUIRED", "-v"],
            Some((required, None, true)),
        );
        let named = Some(ToolChoice::Tool("read_file".into()));
        check(
            &[
                "ollm",
                "run",
                "m",
                "--tool-choice",
                "read_file",
                "--max-tokens",
                "64",
            ],
            Some((named, Some(64), false)),
        );
        check(&["ollm", "run", "m", "--tool-choice", ""], None);
        check(&["ollm", "run", "m", "--max-tokens", "0"], None);
    }

    #[test]
    fn sampling_flags_parse_and_bad_values_are_refused() {
        let sampling_of = |argv: &[&str]| match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Run(run)) => Some(run.sampling),
            _ => None,
        };
        let all = [
            "ollm",
            "run",
            "m",
            "--temperature",
            "0",
            "--top-p",
            "0.5",
            "--top-k",
            "3",
            "--seed",
            "-7",
            "--stop",
            "END",
            "--stop",
            "###",
            "hi",
        ];
        assert_eq!(
            sampling_of(&all),
            Some(Sampling {
                temperature: Some(0.0),
                top_p: Some(0.5),
                top_k: Some(3),
                seed: Some(-7),
                stop: Some(vec!["END".into(), "###".into()]),
            })
        );
        assert_eq!(
            sampling_of(&["ollm", "run", "m", "hi"]),
            Some(Sampling::default())
        );
        for bad in [
            ["--temperature", "-1"],
            ["--temperature", "NaN"],
            ["--top-p", "1.5"],
            ["--top-k", "-2"],
            ["--seed", "x"],
        ] {
            let argv = ["ollm", "run", "m", bad[0], bad[1], "hi"];
            assert_eq!(sampling_of(&argv), None, "{bad:?}");
        }
    }

    #[test]
    fn flags_after_the_prompt_are_flags_until_a_double_dash() {
        let run_of = |argv: &[&str]| match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Run(run)) => Some((run.prompt, run.yes, run.no_tools)),
            _ => None,
        };
        let check = |argv: &[&str], expected: Option<(&[&str], bool, bool)>| {
            let expected =
                expected.map(|(p, y, n)| (p.iter().map(|w| (*w).to_owned()).collect(), y, n));
            assert_eq!(run_of(argv), expected, "{argv:?}");
        };
        check(
            &["ollm", "run", "m", "x", "--yes"],
            Some((&["x"], true, false)),
        );
        check(
            &["ollm", "run", "m", "two words", "-y", "--no-tools"],
            Some((&["two words"], true, true)),
        );
        check(
            &["ollm", "run", "m", "a", "--yes", "b"],
            Some((&["a", "b"], true, false)),
        );
        check(
            &["ollm", "run", "m", "--", "x", "--yes"],
            Some((&["x", "--yes"], false, false)),
        );
        check(
            &["ollm", "run", "m", "x", "--", "-y", "--no-tools"],
            Some((&["x", "-y", "--no-tools"], false, false)),
        );
        // A flag-like word that is no flag is refused, not silently sent as prompt.
        check(&["ollm", "run", "m", "x", "--frobnicate"], None);
    }

    #[test]
    fn keep_alive_takes_durations_and_seconds() {
        let check = |value: &str, ok: bool| {
            let cli = Cli::try_parse_from(["ollm", "run", "m", "--keep-alive", value, "hi"]);
            let got = match cli.map(|c| c.command) {
                Ok(Command::Run(run)) => run.keep_alive,
                _ => None,
            };
            assert_eq!(got, ok.then(|| value.to_owned()), "{value:?}");
        };
        for good in [
            "10m", "1h30m", "0", "-1", "300", "0.5h", "1m30s", "250ms", "-5m",
        ] {
            check(good, true);
        }
        for bad in ["soon", "m", "1x", "1.2.3s", "5 m", "h1", ".s"] {
            check(bad, false);
        }
    }

    #[test]
    fn context_length_and_no_compact_parse() {
        let run_of = |argv: &[&str]| match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Run(run)) => Some((run.context_length, run.no_compact)),
            _ => None,
        };
        let check = |argv: &[&str], expected| assert_eq!(run_of(argv), expected, "{argv:?}");
        check(&["ollm", "run", "m", "hi"], Some((None, false)));
        check(
            &[
                "ollm",
                "run",
                "m",
                "--context-length",
                "2048",
                "--no-compact",
                "hi",
            ],
            Some((Some(2048), true)),
        );
        check(&["ollm", "run", "m", "--context-length", "0", "hi"], None);
        check(&["ollm", "run", "m", "--context-length", "big", "hi"], None);
    }

    /// Issue 14: `--image` repeats and goes before or after the prompt; `--continue`
    /// excludes `--session`; the sessions commands take a name.
    #[test]
    fn images_continue_and_sessions_commands_parse() {
        let run_of = |argv: &[&str]| match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Run(run)) => Some((run.prompt, run.image, run.continue_last)),
            _ => None,
        };
        let check = |argv: &[&str], expected: Option<(&[&str], &[&str], bool)>| {
            let owned = |w: &[&str]| w.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
            let expected = expected.map(|(p, i, c)| {
                let images = owned(i).into_iter().map(PathBuf::from).collect();
                (owned(p), images, c)
            });
            assert_eq!(run_of(argv), expected, "{argv:?}");
        };
        check(
            &["ollm", "run", "m", "describe", "--image", "a.png"],
            Some((&["describe"], &["a.png"], false)),
        );
        check(
            &["ollm", "run", "m", "--image", "a.png", "x", "--image=b.jpg"],
            Some((&["x"], &["a.png", "b.jpg"], false)),
        );
        check(
            &["ollm", "run", "m", "--continue", "next"],
            Some((&["next"], &[], true)),
        );
        check(&["ollm", "run", "m", "--continue", "--session", "s"], None);
        let sessions = |argv: &[&str]| match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Sessions { action }) => Some(format!("{action:?}")),
            _ => None,
        };
        let check = |argv: &[&str], expected: Option<&str>| {
            assert_eq!(sessions(argv).as_deref(), expected, "{argv:?}");
        };
        check(
            &["ollm", "sessions", "show", "a"],
            Some(r#"Show { name: "a" }"#),
        );
        check(
            &["ollm", "sessions", "delete", "a"],
            Some(r#"Rm { name: "a" }"#),
        );
        check(
            &["ollm", "sessions", "export", "a"],
            Some(r#"Export { name: "a", format: Json }"#),
        );
        check(
            &["ollm", "sessions", "export", "a", "--format", "markdown"],
            Some(r#"Export { name: "a", format: Markdown }"#),
        );
        check(
            &["ollm", "sessions", "export", "a", "--format", "yaml"],
            None,
        );
        check(&["ollm", "sessions", "rm"], None);
    }

    #[test]
    fn global_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["ollm", "list", "--host", "127.0.0.1:9"]).unwrap();
        assert_eq!(cli.global.host.as_deref(), Some("127.0.0.1:9"));
    }

    #[test]
    fn verbosity_counts_anywhere_and_the_log_file_is_global() {
        let check = |argv: &[&str], expected: Option<(u8, Option<&str>)>| {
            let got = Cli::try_parse_from(argv).ok().map(|c| {
                let file = c.global.log_file.map(|p| p.display().to_string());
                (c.global.verbose, file)
            });
            let expected = expected.map(|(n, f)| (n, f.map(str::to_owned)));
            assert_eq!(got, expected, "{argv:?}");
        };
        check(&["ollm", "list"], Some((0, None)));
        check(&["ollm", "-v", "list"], Some((1, None)));
        check(&["ollm", "run", "m", "hi", "-vv"], Some((2, None)));
        check(&["ollm", "-vvv", "run", "m"], Some((3, None)));
        check(&["ollm", "run", "-v", "m", "-v", "-v"], Some((3, None)));
        check(
            &["ollm", "ps", "--verbose", "--log-file", "o.log"],
            Some((1, Some("o.log"))),
        );
        check(&["ollm", "list", "--log-file"], None);
    }
}
