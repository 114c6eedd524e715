//! `cargo xtask bench --real URL MODEL`: ollm's added wall time on a real answer.
//!
//! The same request goes to an OpenAI-compatible server (the e2e llama-server) through the
//! release `ollm run` and through curl, in alternating pairs, and the ratio of the median
//! wall times is printed (the goal is within 1%, issue 15).
//!
//! "The same request" is taken literally: ollm runs once through a recording loopback
//! proxy in this process, which keeps the body ollm sent to `/chat/completions`; curl then
//! sends exactly those bytes. The ollm runs go straight to the server, so whatever else
//! ollm asks first (`/props`, `/tokenize`) counts as its added time, as it does for a user.
//! Sampling is fixed (temperature 0, seed 42, `--max-tokens`), so both sides generate the
//! same tokens.
//!
//! The generation's own time varies between requests far more than the 1% to resolve,
//! so each run's wall time is also split: the server reports its prompt and generation
//! milliseconds to both sides (`timings`: in ollm's JSON usage, in curl's last event),
//! and what is left (client, transport, HTTP handling) is compared too.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// What `--real` was given.
pub(crate) struct Real {
    /// The server's base URL, ending in `/v1`.
    base: String,
    model: String,
    pairs: usize,
    max_tokens: u32,
    /// An `ollm` binary to use instead of building the release one.
    ollm: Option<PathBuf>,
}

impl Real {
    /// Parses `--real URL MODEL [--pairs N] [--max-tokens N] [--ollm PATH]`.
    pub(crate) fn parse(args: &[String]) -> Result<Real> {
        let [url, model, rest @ ..] = args else {
            bail!("usage: bench --real URL MODEL [--pairs N] [--max-tokens N] [--ollm PATH]");
        };
        let base = url.trim_end_matches('/');
        let mut real = Real {
            base: match base.ends_with("/v1") {
                true => base.to_owned(),
                false => format!("{base}/v1"),
            },
            model: model.clone(),
            pairs: 9,
            max_tokens: 128,
            ollm: None,
        };
        let mut rest = rest.iter();
        while let Some(flag) = rest.next() {
            let value = rest
                .next()
                .with_context(|| format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--pairs" => real.pairs = value.parse()?,
                "--max-tokens" => real.max_tokens = value.parse()?,
                "--ollm" => real.ollm = Some(PathBuf::from(value)),
                other => bail!("unknown option {other}"),
            }
        }
        Ok(real)
    }
}

/// The prompt both sides send.
const PROMPT: &str = "Explain in a few sentences what a hash map is.";

/// Runs the comparison and prints the ratio.
pub(crate) fn real(root: &Path, real: &Real) -> Result<()> {
    let ollm = match &real.ollm {
        Some(path) => path.clone(),
        None => {
            crate::run_cmd(crate::cargo().current_dir(root).args([
                "build",
                "--release",
                "-q",
                "-p",
                "ollm-cli",
            ]))?;
            root.join("target/release/ollm")
        }
    };
    let scratch = tempfile::tempdir()?;
    let config = scratch.path().join("config.toml");
    std::fs::write(&config, "")?;
    let upstream = authority(&real.base)?;
    let (proxy, recorded) = start_proxy(upstream)?;
    let proxied = format!("http://127.0.0.1:{proxy}/v1");
    ollm_run(&ollm, &proxied, real, scratch.path(), &config)?;
    let body = recorded
        .lock()
        .ok()
        .and_then(|b| b.clone())
        .context("ollm sent no /chat/completions request")?;
    let body_file = scratch.path().join("body.json");
    std::fs::write(&body_file, &body)?;
    let (mut ours, mut curls) = (Vec::new(), Vec::new());
    for pair in 0..real.pairs {
        for is_ollm in [pair % 2 == 0, pair % 2 == 1] {
            let start = Instant::now();
            if is_ollm {
                let server = ollm_run(&ollm, &real.base, real, scratch.path(), &config)?;
                ours.push(Timed::new(start.elapsed(), server));
            } else {
                let server = curl(&real.base, &body_file)?;
                curls.push(Timed::new(start.elapsed(), server));
            }
        }
    }
    report(&ours, &curls);
    Ok(())
}

/// One timed run: its wall time, and the server's own compute time for it (the
/// `timings` llama-server reports: prompt plus generation), when the server said.
struct Timed {
    wall: Duration,
    server: Option<Duration>,
}

impl Timed {
    fn new(wall: Duration, server_ms: Option<f64>) -> Self {
        let server = server_ms.and_then(|ms| Duration::try_from_secs_f64(ms / 1000.0).ok());
        Timed { wall, server }
    }

    /// The wall time outside the server's compute: the client, the transport and the
    /// server's HTTP handling, which the generation's own variance does not reach.
    fn rest(&self) -> Option<f64> {
        self.server
            .map(|s| self.wall.as_secs_f64() - s.as_secs_f64())
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(f64::NAN)
}

fn report(ours: &[Timed], curls: &[Timed]) {
    let wall = |runs: &[Timed]| median(runs.iter().map(|r| r.wall.as_secs_f64()).collect());
    let pairs: Vec<f64> = ours
        .iter()
        .zip(curls)
        .map(|(o, c)| o.wall.as_secs_f64() / c.wall.as_secs_f64())
        .collect();
    let lo = pairs.iter().copied().fold(f64::MAX, f64::min);
    let hi = pairs.iter().copied().fold(f64::MIN, f64::max);
    println!(
        "ollm run / curl, wall time, {} pairs: {:.3}x (pairs {lo:.3}-{hi:.3}; medians {:.0} ms / {:.0} ms)",
        pairs.len(),
        wall(ours) / wall(curls),
        wall(ours) * 1000.0,
        wall(curls) * 1000.0
    );
    let rest = |runs: &[Timed]| runs.iter().map(Timed::rest).collect::<Option<Vec<f64>>>();
    let (Some(our_rest), Some(curl_rest)) = (rest(ours), rest(curls)) else {
        println!("(the server reported no timings: no split of the wall time)");
        return;
    };
    let added = median(our_rest.clone()) - median(curl_rest.clone());
    println!(
        "outside the server's compute (wall minus its prompt + generation ms): ollm {:.0} ms, \
         curl {:.0} ms (medians); ollm adds {:.0} ms = {:.2}% of curl's wall time",
        median(our_rest) * 1000.0,
        median(curl_rest) * 1000.0,
        added * 1000.0,
        100.0 * added / wall(curls)
    );
}

/// Runs `ollm run` once; the server's compute time (ms) from its JSON output's usage.
fn ollm_run(
    ollm: &Path,
    base: &str,
    real: &Real,
    data: &Path,
    config: &Path,
) -> Result<Option<f64>> {
    let output = Command::new(ollm)
        .args(["run", "--provider", "openai", "--host", base, "--no-tools"])
        .args(["--output-format", "json"])
        .args(["--temperature", "0", "--seed", "42", "--max-tokens"])
        .arg(real.max_tokens.to_string())
        .args([&real.model, PROMPT])
        .env("OLLM_CONFIG", config)
        .env("OLLM_DATA_DIR", data)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .context("starting ollm")?;
    if !output.status.success() {
        bail!("ollm run failed ({})", output.status);
    }
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let ms = |key| number(&json, key);
    Ok(ms("prompt_eval_duration_ms")
        .zip(ms("eval_duration_ms"))
        .map(|(p, e)| p + e))
}

/// The first number under `key` anywhere in `value`.
fn number(value: &serde_json::Value, key: &str) -> Option<f64> {
    match value {
        serde_json::Value::Object(map) => map
            .get(key)
            .and_then(serde_json::Value::as_f64)
            .or_else(|| map.values().find_map(|v| number(v, key))),
        serde_json::Value::Array(items) => items.iter().find_map(|v| number(v, key)),
        _ => None,
    }
}

/// Sends the recorded body with curl; the server's compute time (ms) from the last
/// event's `timings` (llama-server's prompt_ms + predicted_ms).
fn curl(base: &str, body: &Path) -> Result<Option<f64>> {
    let output = Command::new("curl")
        .args(["-sS", "-N", "--fail"])
        .args(["-H", "content-type: application/json", "--data-binary"])
        .arg(format!("@{}", body.display()))
        .arg(format!("{base}/chat/completions"))
        .stderr(Stdio::inherit())
        .output()
        .context("starting curl")?;
    if !output.status.success() {
        bail!("curl failed ({})", output.status);
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .rev()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<serde_json::Value>(d.trim()).ok())
        .find_map(|event| {
            let timings = event.get("timings")?;
            Some(timings.get("prompt_ms")?.as_f64()? + timings.get("predicted_ms")?.as_f64()?)
        }))
}

/// `host:port` of an `http://` URL.
fn authority(url: &str) -> Result<String> {
    let rest = url
        .strip_prefix("http://")
        .context("--real takes an http:// URL")?;
    let host = rest.split('/').next().unwrap_or(rest);
    Ok(match host.contains(':') {
        true => host.to_owned(),
        false => format!("{host}:80"),
    })
}

type Recorded = Arc<Mutex<Option<Vec<u8>>>>;

/// A loopback proxy to `upstream` that keeps the last `/chat/completions` body.
fn start_proxy(upstream: String) -> Result<(u16, Recorded)> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let port = listener.local_addr()?.port();
    let recorded: Recorded = Arc::default();
    let keep = Arc::clone(&recorded);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let (upstream, keep) = (upstream.clone(), Arc::clone(&keep));
            std::thread::spawn(move || relay(client, &upstream, &keep));
        }
    });
    Ok((port, recorded))
}

/// Relays one request and its whole answer, then closes (the client reconnects).
fn relay(client: TcpStream, upstream: &str, keep: &Recorded) -> std::io::Result<()> {
    let mut reader = BufReader::new(client.try_clone()?);
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let lower = line.to_ascii_lowercase();
        if let Some(v) = lower.strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
        if !lower.starts_with("connection:") {
            head.push_str(&line);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    let wanted = head.starts_with("POST") && head.contains("/chat/completions");
    if let (true, Ok(mut kept)) = (wanted, keep.lock()) {
        *kept = Some(body.clone());
    }
    let mut server = TcpStream::connect(upstream)?;
    server.write_all(head.as_bytes())?;
    server.write_all(b"connection: close\r\n\r\n")?;
    server.write_all(&body)?;
    let mut client = client;
    std::io::copy(&mut server, &mut client)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_number_is_found_at_any_depth_and_only_under_its_key() {
        let json =
            serde_json::json!({"type": "done", "turns": [{"usage": {"eval_duration_ms": 12}}]});
        assert_eq!(number(&json, "eval_duration_ms"), Some(12.0));
        assert_eq!(number(&json, "prompt_eval_duration_ms"), None);
        assert_eq!(number(&json, "type"), None, "a string is not a number");
    }

    #[test]
    fn the_rest_is_the_wall_time_outside_the_servers_compute() {
        let run = Timed::new(Duration::from_millis(1000), Some(900.0));
        assert!((run.rest().unwrap() - 0.1).abs() < 1e-9);
        assert_eq!(Timed::new(Duration::from_millis(5), None).rest(), None);
    }
}
