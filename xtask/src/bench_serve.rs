//! `cargo xtask bench --serve`: what `ollm serve` adds over calling its upstream directly.
//!
//! One process holds a mock upstream (an OpenAI-compatible SSE server on std threads,
//! keep-alive, the same canned stream of `--tokens` content chunks for every request)
//! and the clients. The release `ollm serve` runs in front of the mock; every figure is
//! measured both ways in the same run, against the mock directly and through serve, and
//! reported as a ratio:
//!
//! - **Added latency** per request, p50 and p99: `--requests` streamed requests each way,
//!   alternating, one at a time, each on a fresh connection (`Connection: close`), from
//!   connect to the last byte. Twice: a request without tools (the pass-through path) and
//!   one with a tool (the repair path: one turn of the runtime's loop).
//! - **CPU per streamed token**: serve's own CPU time (`/proc/PID/stat`) over a run of
//!   streamed requests, per token delivered, next to this process's CPU (client and mock)
//!   per token on the direct run.
//! - **Throughput at `--streams` concurrent streams** (default 1,000): that many client
//!   threads released at once, one streamed request each on a connection opened
//!   beforehand; tokens per second of wall time. Twice: against a mock that sends all
//!   its tokens at once (serve's own ceiling on this machine), and against one that
//!   paces them [`PACE`] apart, as a server generating does; against the paced mock a
//!   third time with a tool offered, so every stream takes the repair path.
//!
//! Every reply is checked to carry all the tokens, so a faster wrong answer cannot pass.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{cargo, run_cmd, section};

/// What `--serve` was given.
pub(crate) struct Options {
    ollm: Option<PathBuf>,
    requests: usize,
    streams: usize,
    tokens: usize,
}

impl Options {
    /// Parses `[--ollm PATH] [--requests N] [--streams N] [--tokens N]`.
    pub(crate) fn parse(args: &[String]) -> Result<Options> {
        let mut options = Options {
            ollm: None,
            requests: 300,
            streams: 1000,
            tokens: 64,
        };
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            let value = rest
                .next()
                .with_context(|| format!("{flag} needs a value"))?;
            let number = || {
                value
                    .parse::<usize>()
                    .with_context(|| format!("{flag} {value}"))
            };
            match flag.as_str() {
                "--ollm" => options.ollm = Some(PathBuf::from(value)),
                "--requests" => options.requests = number()?.max(10),
                "--streams" => options.streams = number()?.max(1),
                "--tokens" => options.tokens = number()?.max(1),
                other => bail!("unknown option {other} for bench --serve"),
            }
        }
        Ok(options)
    }
}

/// The paced mock's time between tokens: 100 tokens/s per stream, faster than a small
/// model on a CPU; 1,000 streams of it ask for 100,000 tokens/s.
const PACE: Duration = Duration::from_millis(10);

/// The canned token the mock streams.
const TOKEN: &str = "tok ";

/// Runs the three measurements and prints them.
pub(crate) fn run(root: &Path, options: &Options) -> Result<()> {
    let ollm = match &options.ollm {
        Some(path) => path.clone(),
        None => {
            section("bench --serve: build the release ollm");
            run_cmd(cargo().current_dir(root).args([
                "build",
                "--release",
                "-q",
                "-p",
                "ollm-cli",
            ]))?;
            crate::llama::target_dir(root).join("release/ollm")
        }
    };
    // Serve may keep a connection per stream open to the mock while the direct
    // clients open as many again.
    let workers = 2 * options.streams + 64;
    let mock = start_mock(options.tokens, workers, Duration::ZERO)?;
    let serve = Serve::start(&ollm, mock)?;
    section(&format!(
        "bench --serve: mock upstream {mock}, ollm serve {}",
        serve.addr
    ));
    latency(mock, serve.addr, options, false)?;
    latency(mock, serve.addr, options, true)?;
    cpu(mock, &serve, options)?;
    throughput(
        mock,
        serve.addr,
        options,
        "an unpaced mock (all at once)",
        false,
    )?;
    drop(serve);
    let paced = start_mock(options.tokens, workers, PACE)?;
    let serve = Serve::start(&ollm, paced)?;
    let label = format!("a mock pacing tokens {} ms apart", PACE.as_millis());
    throughput(paced, serve.addr, options, &label, false)?;
    throughput(paced, serve.addr, options, &label, true)?;
    Ok(())
}

/// The request body: streamed, with or without one tool.
fn body(tools: bool) -> String {
    let tools = if tools {
        r#","tools":[{"type":"function","function":{"name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}]"#
    } else {
        ""
    };
    format!(
        r#"{{"model":"bench-model","stream":true,"messages":[{{"role":"user","content":"go"}}]{tools}}}"#
    )
}

/// `ollm serve` in front of the mock, killed when dropped.
struct Serve {
    child: Child,
    addr: SocketAddr,
    _config: tempfile::NamedTempFile,
}

impl Serve {
    fn start(ollm: &Path, upstream: SocketAddr) -> Result<Serve> {
        let config = tempfile::NamedTempFile::new().context("a config file")?;
        // The gateway's own cost: serve's `tool-or-none` choice, on as it ships, is a
        // model request of its own (one more per prompt), not overhead, and the mock
        // upstream streams the same reply to it.
        std::fs::write(config.path(), "[serve]\ntool_or_none = false\n")?;
        let mut child = Command::new(ollm)
            .arg("--config")
            .arg(config.path())
            .args(["--provider", "openai", "serve", "--listen", "127.0.0.1:0"])
            .args([
                "--upstream",
                &format!("http://{upstream}/v1"),
                "--health",
                "models",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {}", ollm.display()))?;
        let stdout = child.stdout.take().context("serve's stdout")?;
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line)?;
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .map(str::parse);
        match addr {
            Some(Ok(addr)) => Ok(Serve {
                child,
                addr,
                _config: config,
            }),
            _ => {
                let _ = child.kill();
                bail!("ollm serve said {line:?}")
            }
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The mock upstream on a free port: `workers` threads started up front, each accepting
/// and answering one keep-alive connection at a time, so neither path pays for a thread
/// spawn per connection (serve keeps its upstream connections; the direct clients do
/// not).
fn start_mock(tokens: usize, workers: usize, interval: Duration) -> Result<SocketAddr> {
    let listener = Arc::new(TcpListener::bind("127.0.0.1:0")?);
    let addr = listener.local_addr()?;
    let sse: Arc<str> = canned_stream(tokens).into();
    for _ in 0..workers {
        let (listener, sse) = (Arc::clone(&listener), Arc::clone(&sse));
        thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || {
                while let Ok((stream, _)) = listener.accept() {
                    answer_connection(stream, &sse, interval);
                }
            })
            .context("starting a mock worker")?;
    }
    Ok(addr)
}

fn canned_stream(tokens: usize) -> String {
    let chunk = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"b\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"bench-model\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let mut sse = chunk(r#"{"role":"assistant","content":""}"#, "null");
    for _ in 0..tokens {
        sse.push_str(&chunk(&format!(r#"{{"content":"{TOKEN}"}}"#), "null"));
    }
    sse.push_str(&chunk("{}", "\"stop\""));
    sse.push_str("data: [DONE]\n\n");
    sse
}

/// Answers the requests of one connection until it closes or asks to; a chat reply's
/// events are `interval` apart (none: all at once).
fn answer_connection(stream: TcpStream, sse: &str, interval: Duration) {
    let _ = stream.set_nodelay(true);
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    let mut writer = write_half;
    loop {
        let Some((path, close)) = read_request(&mut reader) else {
            return;
        };
        let (status, kind, payload) = match path.as_str() {
            "/v1/chat/completions" => ("200 OK", "text/event-stream", sse.to_owned()),
            "/v1/models" => (
                "200 OK",
                "application/json",
                r#"{"object":"list","data":[{"id":"bench-model","object":"model"}]}"#.to_owned(),
            ),
            _ => (
                "404 Not Found",
                "application/json",
                r#"{"error":{"message":"no"}}"#.to_owned(),
            ),
        };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
            payload.len()
        );
        let paced = !interval.is_zero() && kind == "text/event-stream";
        let sent = writer.write_all(head.as_bytes()).and_then(|()| {
            if !paced {
                return writer.write_all(payload.as_bytes());
            }
            for event in payload.split_inclusive("\n\n") {
                writer.write_all(event.as_bytes())?;
                thread::sleep(interval);
            }
            Ok(())
        });
        if sent.is_err() || close {
            return;
        }
    }
}

/// Reads one request; its path and whether the client asked to close.
fn read_request(reader: &mut BufReader<TcpStream>) -> Option<(String, bool)> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let path = line.split_whitespace().nth(1)?.to_owned();
    let (mut length, mut close) = (0usize, false);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok().filter(|n| *n > 0)?;
        let lower = header.trim().to_ascii_lowercase();
        if lower.is_empty() {
            break;
        }
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        close |= lower == "connection: close";
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((path, close))
}

/// One streamed request on a fresh connection: its wall time; fails unless every token
/// arrived.
fn request(addr: SocketAddr, body: &str, tokens: usize) -> Result<Duration> {
    let start = Instant::now();
    let stream = TcpStream::connect(addr)?;
    send(stream, body, tokens)?;
    Ok(start.elapsed())
}

/// Sends one streamed request on `stream` and reads the reply to its end; fails unless
/// every token arrived.
fn send(mut stream: TcpStream, body: &str, tokens: usize) -> Result<()> {
    stream.set_nodelay(true)?;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply)?;
    let text = String::from_utf8_lossy(&reply);
    let got = text.matches(TOKEN.trim_end()).count();
    if !text.starts_with("HTTP/1.1 200") || got != tokens {
        bail!(
            "a reply with {got} of {tokens} tokens: {}",
            text.chars().take(300).collect::<String>()
        );
    }
    Ok(())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Added latency per request, p50 and p99.
fn latency(mock: SocketAddr, serve: SocketAddr, options: &Options, tools: bool) -> Result<()> {
    let body = body(tools);
    for _ in 0..20 {
        request(mock, &body, options.tokens)?;
        request(serve, &body, options.tokens)?;
    }
    let (mut direct, mut served) = (Vec::new(), Vec::new());
    for _ in 0..options.requests {
        direct.push(request(mock, &body, options.tokens)?);
        served.push(request(serve, &body, options.tokens)?);
    }
    direct.sort_unstable();
    served.sort_unstable();
    let path = if tools {
        "with a tool (repair path)"
    } else {
        "without tools (pass-through)"
    };
    println!(
        "latency, {} streamed requests of {} tokens each way, {path}:",
        options.requests, options.tokens
    );
    for (name, p) in [("p50", 0.5), ("p99", 0.99)] {
        let (d, s) = (percentile(&direct, p), percentile(&served, p));
        println!(
            "  {name}: direct {:.0} us, through serve {:.0} us: added {:.0} us, ratio {:.2}",
            micros(d),
            micros(s),
            micros(s.saturating_sub(d)),
            s.as_secs_f64() / d.as_secs_f64()
        );
    }
    Ok(())
}

/// CPU time of a process in seconds (`/proc/PID/stat` utime + stime).
fn cpu_seconds(pid: &str) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(") ").map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = fields.get(11).and_then(|u| u.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    Ok(ticks / 100.0)
}

/// CPU per streamed token: serve's, next to client and mock's on the direct path.
fn cpu(mock: SocketAddr, serve: &Serve, options: &Options) -> Result<()> {
    let body = body(false);
    let runs = (options.requests * 5).max(1000);
    let tokens = (runs * options.tokens) as f64;
    let own = cpu_seconds("self")?;
    for _ in 0..runs {
        request(mock, &body, options.tokens)?;
    }
    let direct = cpu_seconds("self")? - own;
    let pid = serve.child.id().to_string();
    let (own, before) = (cpu_seconds("self")?, cpu_seconds(&pid)?);
    for _ in 0..runs {
        request(serve.addr, &body, options.tokens)?;
    }
    let added = cpu_seconds(&pid)? - before;
    let client_and_mock = cpu_seconds("self")? - own;
    println!(
        "CPU per streamed token, {runs} requests of {} tokens:",
        options.tokens
    );
    println!(
        "  direct: client and mock {:.2} us/token; through serve: serve {:.2} us/token \
         (client and mock {:.2}); serve's CPU / direct's = {:.2}",
        direct * 1e6 / tokens,
        added * 1e6 / tokens,
        client_and_mock * 1e6 / tokens,
        added / direct.max(1e-9)
    );
    Ok(())
}

/// Tokens per second with `streams` requests sent at once, each on a connection opened
/// beforehand (so the measure is of streams, not of a burst of connects).
fn burst(addr: SocketAddr, streams: usize, tokens: usize, tools: bool) -> Result<f64> {
    let barrier = Arc::new(Barrier::new(streams + 1));
    let body: Arc<str> = body(tools).into();
    let mut workers = Vec::with_capacity(streams);
    for _ in 0..streams {
        let stream = TcpStream::connect(addr).context("opening a connection")?;
        let (barrier, body) = (Arc::clone(&barrier), Arc::clone(&body));
        workers.push(
            thread::Builder::new()
                .stack_size(128 * 1024)
                .spawn(move || {
                    barrier.wait();
                    send(stream, &body, tokens)
                })?,
        );
    }
    barrier.wait();
    let start = Instant::now();
    for worker in workers {
        worker
            .join()
            .map_err(|_| anyhow::anyhow!("a client thread panicked"))?
            .with_context(|| format!("a stream to {addr}"))?;
    }
    Ok((streams * tokens) as f64 / start.elapsed().as_secs_f64())
}

/// Throughput at `--streams` concurrent streams, each way, best of three rounds
/// (alternating, so both see the same machine).
fn throughput(
    mock: SocketAddr,
    serve: SocketAddr,
    options: &Options,
    label: &str,
    tools: bool,
) -> Result<()> {
    let (mut direct, mut served) = (0.0f64, 0.0f64);
    for _ in 0..3 {
        direct = direct.max(burst(mock, options.streams, options.tokens, tools)?);
        served = served.max(burst(serve, options.streams, options.tokens, tools)?);
    }
    let path = if tools {
        "with a tool (the repair path)"
    } else {
        "without tools (pass-through)"
    };
    println!(
        "throughput, {} concurrent streams of {} tokens {path} from {label} (best of 3): direct \
         {:.0} tokens/s, through serve {:.0} tokens/s, ratio {:.2}",
        options.streams,
        options.tokens,
        direct,
        served,
        served / direct
    );
    Ok(())
}
