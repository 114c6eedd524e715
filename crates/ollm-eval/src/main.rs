//! `ollm-eval`: the tool-calling eval and BFCL against an OpenAI-compatible server.
//!
//! Glue only: the arguments go to [`ollm_eval::run`] as they are, and an error is printed
//! with its whole chain. `cargo xtask eval` starts a llama-server and runs this binary
//! with `--url`, `--model` and `--server-note`; run it yourself against your own server:
//!
//! ```text
//! cargo run -p ollm-eval -- --bfcl --url http://127.0.0.1:8080/v1 --model my-model
//! ```

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line tool: its output is the point"
)]

use std::env;
use std::process::ExitCode;

const HELP: &str = "\
ollm-eval [options]    (cargo xtask eval [options] starts llama-server and runs this)

A run needs the server:
  --url URL            the server's OpenAI base URL (http://HOST:PORT/v1; http only)
  --model NAME         the model it serves: sent in every request, names the result file
  --server-note TEXT   what the server is, for the result file (default: its URL)
  --check              only check the other arguments: exit 0, or 2 with the reason

The tool-calling eval:
  [--smoke] [--part tuning|held-out|all] [--columns C,..] [--tasks ID,..]
  [--repeats N] [--temperature T] [--budget MIN] [--ollm PATH]
                       each task (87: 29 intents x 3 wordings, 7 workspaces; a tuning
                       part and a held-out part, default all) in each column (plain,
                       served, native, react, constrained, auto; default
                       plain,native,auto), N repeats (default 3) at the server's own
                       sampling or temperature T; the ollm columns run `--ollm PATH`,
                       else this workspace's debug build (built first); `served` is the
                       plain loop through an `ollm serve` of that binary, started in
                       front of --url on a free loopback port and stopped at the end
                       (served-with-tool-or-none: with `[serve] tool_or_none = true`;
                       served-with-greedy-tool-turns: `greedy_tool_turns = true`; both:
                       served-with-tool-or-none+greedy-tool-turns;
                       +changes-on-request: `read_only` names the read tools;
                       +routed-call: `routed_call = true`;
                       served-without-RULE: with `[coach] off = [RULE]`;
                       auto-with-RULE: `ollm run --coach-on RULE`, for the rules
                       off by default (routed-call, choice-both-orders, the
                       call repairs name-repair, path-in-name, typed-strings,
                       key-hint, tools-hint); several
                       rules joined by `+`, as in auto-without-key-hint+tools-hint,
                       are off together); the result
                       file goes to docs/eval/
                       (--smoke: 3 tasks, plain,auto, 1 repeat, temperature 0, to
                       target/eval/)
  --ablate --rules R,.. [--part P] [--repeats N] ...
                       the auto column with each coach rule off in turn (ollm run
                       --coach-off R; `all`: every rule; `A+B`: a group off at once)
                       beside a baseline, on the tuning part: the change per rule
  --list               task counts per part, kind and workspace (no server)
  --table              regenerate the tables of docs/tool-calling.md,
                       docs/small-models.md and docs/eval/history.md from docs/eval/
  --regrade            grade the runs in docs/eval/ again with today's grader

BFCL:
  --bfcl [--limit N] [--columns C,..] [--budget MIN]
                       BFCL's simple, multiple, parallel and irrelevance questions (N
                       per category, default 15; 0: all) in plain, native, auto at
                       temperature 0, AST-checked; writes docs/eval/bfcl/*.json and the
                       BFCL section of docs/tool-calling.md (the data is fetched from
                       PyPI, sha256-pinned, into the ollm cache)
  --bfcl --table       regenerate that section from docs/eval/bfcl/
  --bfcl --regrade     check the committed BFCL runs again with today's checker

Scores never fail the command; a broken harness (no server, no ollm, a refused
connection) does.
";

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let check = args.iter().any(|a| a == "--check");
    let args: Vec<String> = args.into_iter().filter(|a| a != "--check").collect();
    let outcome = if check {
        ollm_eval::check(&args)
    } else {
        ollm_eval::run(&args)
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(err @ ollm_eval::EvalError::Usage(_)) => {
            eprintln!("ollm-eval: {err}\n\n{HELP}");
            ExitCode::from(2)
        }
        Err(err) => {
            eprintln!("\nollm-eval: error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
