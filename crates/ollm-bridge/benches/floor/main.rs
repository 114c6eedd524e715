//! ollm's adapters against the floor, end to end over loopback HTTP: CPU time and peak
//! memory per stream, as ratios to a bare client in the same run (issue 15).
//!
//! The floor (see `child.rs`) is reqwest, a line split and borrowed serde structs,
//! nothing else; ollm's side is `ProviderAdapter::chat` of the Ollama (NDJSON) or the
//! OpenAI-compatible (SSE) adapter. Both read the same reply from a mock server in this
//! process (`server.rs`), whose bodies are encoded in memory before the run.
//!
//! # Method
//! - Each measurement is a child process (this binary re-executed with `--child`) that
//!   builds its client, reads its streams and exits; its CPU time (user + system, from
//!   `getrusage(RUSAGE_CHILDREN)` around its wait) covers all of that, start-up included.
//!   The server's CPU is this process's, never counted.
//! - The sides alternate (floor then ollm, then ollm then floor, ...) for several pairs,
//!   so both see the same machine; the ratio is ollm's median over the floor's median.
//!   The spread of the per-pair ratios shows how far to trust it. Only ratios are
//!   printed: absolute times on a shared machine mean nothing.
//! - Memory: each child reads its resident set before its streams start and its peak
//!   (`VmHWM`) at the end; the difference over the streams is KiB per stream.
//!
//! - The CPU time is split: user and system time each get their own ratio of medians,
//!   so a gap in the kernel (page faults, socket reads, wake-ups) shows apart from one
//!   in user space. The 1000-stream and the one-stream large-write cases run 9 pairs
//!   (issue 28: 5 pairs left a ±0.1 spread), the one-write-per-chunk cases 15 (how many
//!   chunks one read brings depends on which side is ahead, and their pairs range over
//!   0.7-1.9), start-up 15.
//! - `--instructions` adds the instructions: after the CPU pairs, each side runs once
//!   under `valgrind --tool=callgrind` and the row also gives the ratio of the
//!   user-space instructions the whole child executed, next to its CPU ratios.
//!   Deterministic (the same binary gives the same ratio to a few parts in a thousand),
//!   blind to the kernel, and about 50 times slower.
//!
//! Run with `cargo xtask bench` (every case) or `cargo xtask bench --quick` (smaller
//! cases, fewer pairs); `--only TEXT` keeps the cases whose name contains `TEXT`.
//! `--serve PROTO WRITES CHUNKS` only serves a reply, so that one `--child` can be run
//! under a profiler (`perf record -e cpu-clock`, `valgrind --tool=callgrind`).

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a benchmark binary reports on stdout"
)]
#![allow(missing_docs, reason = "a benchmark binary")]

mod bodies;
mod child;
mod server;

use std::process::Command;
use std::time::Duration;

use nix::sys::resource::{UsageWho, getrusage};

use crate::bodies::Proto;
use crate::server::Writes;

/// One benchmark case.
struct Case {
    proto: Proto,
    chunks: usize,
    streams: usize,
    writes: Writes,
    pairs: usize,
}

impl Case {
    fn name(&self) -> String {
        let proto = match self.proto {
            Proto::Ollama => "ollama",
            Proto::OpenAi => "openai",
        };
        let writes = match self.writes {
            Writes::Large => "large writes",
            Writes::PerChunk => "a write per chunk",
        };
        match (self.streams, self.chunks) {
            (1, 1) => format!("{proto} start-up, one 1-chunk request"),
            (1, chunks) => format!("{proto} 1 stream x {chunks} chunks, {writes}"),
            (streams, chunks) => format!("{proto} {streams} streams x {chunks} chunks, {writes}"),
        }
    }
}

fn cases(quick: bool) -> Vec<Case> {
    let (single, (streams, chunks), pairs, per_chunk_pairs, many_pairs, startup_pairs) = match quick
    {
        false => (200_000, (1000, 1000), 9, 15, 9, 15),
        true => (20_000, (200, 200), 3, 3, 5, 7),
    };
    let mut out = Vec::new();
    for proto in [Proto::Ollama, Proto::OpenAi] {
        let case = |chunks, streams, writes, pairs| Case {
            proto,
            chunks,
            streams,
            writes,
            pairs,
        };
        out.push(case(single, 1, Writes::Large, pairs));
        out.push(case(single, 1, Writes::PerChunk, per_chunk_pairs));
        out.push(case(chunks, streams, Writes::Large, many_pairs));
        out.push(case(1, 1, Writes::PerChunk, startup_pairs));
    }
    out
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        return child_main(&args[i + 1..]);
    }
    if let Some(i) = args.iter().position(|a| a == "--serve") {
        return serve_main(&args[i + 1..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let instructions = args.iter().any(|a| a == "--instructions");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1));
    println!(
        "{:<52} {:>9} {:>11} {:>6} {:>6} {:>7} {:>22}",
        "case (whole child process; ollm/floor)",
        "CPU",
        "pairs",
        "user",
        "sys",
        "instr",
        "KiB/stream floor ollm"
    );
    for case in cases(quick) {
        if only.is_some_and(|o| !case.name().contains(o.as_str())) {
            continue;
        }
        match measure(&case, instructions) {
            Ok(row) => println!("{row}"),
            Err(e) => {
                eprintln!("{}: {e}", case.name());
                std::process::exit(1);
            }
        }
    }
}

/// `--child PROTO SIDE STREAMS ADDR`: runs one side, prints its report on one line.
fn child_main(args: &[String]) {
    let [proto, side, streams, addr, ..] = args else {
        panic!("--child PROTO SIDE STREAMS ADDR");
    };
    let proto = match proto.as_str() {
        "ollama" => Proto::Ollama,
        _ => Proto::OpenAi,
    };
    let streams = streams.parse().unwrap_or_else(|e| panic!("streams: {e}"));
    let report = child::run(side == "ollm", proto, addr, streams);
    println!("{} {} {}", report.text, report.rss_before, report.peak);
}

/// `--serve PROTO WRITES CHUNKS`: serves that reply and prints the address, until
/// stdin closes (for a profiler run of one `--child` at a time).
fn serve_main(args: &[String]) {
    let [proto, writes, chunks, ..] = args else {
        panic!("--serve ollama|openai large|per-chunk CHUNKS");
    };
    let proto = if proto == "ollama" {
        Proto::Ollama
    } else {
        Proto::OpenAi
    };
    let writes = if writes == "large" {
        Writes::Large
    } else {
        Writes::PerChunk
    };
    let chunks = chunks.parse().unwrap_or_else(|e| panic!("chunks: {e}"));
    let (events, _) = bodies::events(proto, chunks);
    let addr = server::start(server::encode(&events, writes, content_type(proto)))
        .unwrap_or_else(|e| panic!("server: {e}"));
    println!("{addr}");
    let _ = std::io::stdin().read_line(&mut String::new());
}

fn content_type(proto: Proto) -> &'static str {
    match proto {
        Proto::Ollama => "application/x-ndjson",
        Proto::OpenAi => "text/event-stream",
    }
}

/// What a run is measured by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Meter {
    /// CPU time (user and system) from `getrusage`.
    Cpu,
    /// User-space instructions counted by callgrind.
    Instructions,
}

/// One side's run: its CPU seconds (user, system) or instructions (in `user`, `sys`
/// zero), and KiB per stream (`NaN` under callgrind, whose memory is not the child's).
struct Run {
    user: f64,
    sys: f64,
    kib_per_stream: f64,
}

impl Run {
    fn cost(&self) -> f64 {
        self.user + self.sys
    }
}

fn measure(case: &Case, instructions: bool) -> Result<String, String> {
    let (events, text) = bodies::events(case.proto, case.chunks);
    let reply = server::encode(&events, case.writes, content_type(case.proto));
    drop(events);
    let addr = server::start(reply).map_err(|e| format!("server: {e}"))?;
    let addr = addr.to_string();
    let expected = text * case.streams;
    let (mut floor, mut ollm) = (Vec::new(), Vec::new());
    if case.chunks == 1 {
        // Warm the page cache and the loader for both sides.
        run_child(case, false, &addr, expected, Meter::Cpu)?;
        run_child(case, true, &addr, expected, Meter::Cpu)?;
    }
    for pair in 0..case.pairs {
        let order = if pair % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for is_ollm in order {
            let run = run_child(case, is_ollm, &addr, expected, Meter::Cpu)?;
            if is_ollm {
                ollm.push(run)
            } else {
                floor.push(run)
            }
        }
    }
    let instructions = match instructions {
        true => {
            let count = |is_ollm| run_child(case, is_ollm, &addr, expected, Meter::Instructions);
            Some(count(true)?.user / count(false)?.user)
        }
        false => None,
    };
    Ok(row(case, &floor, &ollm, instructions))
}

fn row(case: &Case, floor: &[Run], ollm: &[Run], instructions: Option<f64>) -> String {
    let med = |runs: &[Run], f: fn(&Run) -> f64| median(runs.iter().map(f).collect());
    let ratio = |f: fn(&Run) -> f64| med(ollm, f) / med(floor, f);
    let pairs: Vec<f64> = floor
        .iter()
        .zip(ollm)
        .map(|(f, o)| o.cost() / f.cost())
        .collect();
    let (lo, hi) = pairs
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let memory = if case.streams > 1 {
        let kib = |runs: &[Run]| med(runs, |r| r.kib_per_stream);
        format!(
            "{:>9.1} {:>5.1} ({:.2}x)",
            kib(floor),
            kib(ollm),
            kib(ollm) / kib(floor)
        )
    } else {
        String::new()
    };
    let instructions = instructions.map_or(String::new(), |i| format!("{i:.3}"));
    // A start-up child's user or system time alone can round to zero ticks: no ratio.
    let part = |r: f64| match r.is_finite() {
        true => format!("{r:.2}"),
        false => "-".to_owned(),
    };
    format!(
        "{:<52} {:>8.3}x {:>5.2}-{:<5.2} {:>6} {:>6} {:>7}  {memory}",
        case.name(),
        ratio(Run::cost),
        lo,
        hi,
        part(ratio(|r| r.user)),
        part(ratio(|r| r.sys)),
        instructions,
    )
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// CPU time (user, system) of every child waited for so far.
fn children_cpu() -> (Duration, Duration) {
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).unwrap_or_else(|e| panic!("getrusage: {e}"));
    let time = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().unsigned_abs())
            + Duration::from_micros(t.tv_usec().unsigned_abs())
    };
    (time(usage.user_time()), time(usage.system_time()))
}

fn run_child(
    case: &Case,
    ollm: bool,
    addr: &str,
    expected: usize,
    meter: Meter,
) -> Result<Run, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let proto = match case.proto {
        Proto::Ollama => "ollama",
        Proto::OpenAi => "openai",
    };
    let side = if ollm { "ollm" } else { "floor" };
    let child_args = [proto, side, &case.streams.to_string(), addr].map(str::to_owned);
    let mut command = match meter {
        Meter::Cpu => Command::new(&exe),
        Meter::Instructions => {
            let mut c = Command::new("valgrind");
            c.args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
                .arg(&exe);
            c
        }
    };
    let before = children_cpu();
    let output = command
        .arg("--child")
        .args(&child_args)
        .output()
        .map_err(|e| match meter {
            Meter::Instructions => format!("valgrind: {e} (install valgrind for --instructions)"),
            Meter::Cpu => e.to_string(),
        })?;
    let after = children_cpu();
    let (user, sys) = (
        (after.0 - before.0).as_secs_f64(),
        (after.1 - before.1).as_secs_f64(),
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!("{side} failed: {stdout}{stderr}"));
    }
    let fields: Vec<u64> = stdout
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    let [text, before_kib, peak_kib] = fields[..] else {
        return Err(format!("{side}: unreadable report {stdout:?}"));
    };
    if text != expected as u64 {
        return Err(format!("{side} saw {text} bytes of text, not {expected}"));
    }
    let kib_per_stream = peak_kib.saturating_sub(before_kib) as f64 / case.streams as f64;
    Ok(match meter {
        Meter::Cpu => Run {
            user,
            sys,
            kib_per_stream,
        },
        Meter::Instructions => Run {
            user: collected(&stderr).ok_or_else(|| format!("no callgrind count in {stderr}"))?,
            sys: 0.0,
            kib_per_stream: f64::NAN,
        },
    })
}

/// The instructions callgrind counted (its `Collected : N` line).
fn collected(stderr: &str) -> Option<f64> {
    stderr
        .lines()
        .filter_map(|l| l.split_once("Collected :"))
        .find_map(|(_, n)| n.trim().parse().ok())
}
