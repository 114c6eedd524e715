//! Progress of a long step (the llama.cpp build): what is being built, the time elapsed,
//! and the total expected from the last measured run.
//!
//! The step's output goes to a log file; its status lines (ninja's `[123/214] Building CXX
//! object ...`) become one line, rewritten in place on a terminal and printed every
//! [`PLAIN_EVERY`] otherwise (a CI log keeps a few lines, not hundreds). When the step fails,
//! the tail of its output is printed, which is where the compiler's error is.
//!
//! # Decisions
//!
//! - The expected total is the last measured duration on this machine, recorded in the
//!   cache, because build time depends on the machine and its load far more than on
//!   anything xtask knows; until a build was measured here, a documented estimate stands
//!   in and the line says so.
//! - No percentage or ETA from ninja's counts: the steps differ by two orders of magnitude
//!   in cost (a 40-second `llama-model.cpp` against sub-second C files), so "123 of 214"
//!   is shown as it is and the time is the measured total.

use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How often a plain (non-terminal) progress line is printed.
const PLAIN_EVERY: Duration = Duration::from_secs(30);
/// How often the terminal line is redrawn when no new status arrives (the clock ticks).
const TICK: Duration = Duration::from_secs(1);
/// The widest terminal line drawn; longer ones are cut so that `\r` rewrites one line.
const LINE_WIDTH: usize = 110;
/// How many output lines are printed when the step fails.
const FAILURE_TAIL: usize = 40;

/// The total a step is expected to take, and where that number comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Expected {
    /// Measured: the last run of this step on this machine.
    Measured(Duration),
    /// A documented estimate, before any run was measured here.
    Estimate(Duration),
}

impl Expected {
    /// The measured duration in `record` (seconds, as [`record`] writes them), else
    /// `estimate`.
    pub(crate) fn read(record: &Path, estimate: Duration) -> Self {
        fs::read_to_string(record)
            .ok()
            .and_then(|text| parse_seconds(&text))
            .map_or(Self::Estimate(estimate), Self::Measured)
    }

    fn describe(self) -> String {
        match self {
            Self::Measured(total) => format!("about {} (the last build here)", clock(total)),
            Self::Estimate(total) => format!("about {} (an estimate)", clock(total)),
        }
    }
}

/// Records `took` in `record` for the next run's [`Expected::read`].
pub(crate) fn record(record: &Path, took: Duration) -> Result<()> {
    fs::write(record, format!("{:.1}\n", took.as_secs_f64()))
        .with_context(|| format!("writing {}", record.display()))
}

fn parse_seconds(text: &str) -> Option<Duration> {
    let secs: f64 = text.trim().parse().ok()?;
    (secs.is_finite() && secs > 0.0).then(|| Duration::from_secs_f64(secs))
}

/// One status line of ninja: `[done/total] what`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) done: u32,
    pub(crate) total: u32,
    pub(crate) what: String,
}

/// Ninja's status line (`[123/214] Building CXX object ...`), or `None` for other output.
pub(crate) fn parse_status(line: &str) -> Option<Status> {
    let rest = line.strip_prefix('[')?;
    let (counts, what) = rest.split_once("] ")?;
    let (done, total) = counts.split_once('/')?;
    Some(Status {
        done: done.trim().parse().ok()?,
        total: total.trim().parse().ok()?,
        what: what.trim().to_owned(),
    })
}

/// The progress line: the step, its latest status, the time elapsed and the total expected.
pub(crate) fn progress_line(
    step: &str,
    status: Option<&Status>,
    elapsed: Duration,
    expected: Expected,
) -> String {
    let doing = status.map_or_else(
        || "starting".to_owned(),
        |s| format!("[{}/{}] {}", s.done, s.total, s.what),
    );
    format!(
        "{step}: {} of {}; {doing}",
        clock(elapsed),
        expected.describe()
    )
}

/// `1m05s`, or `42s` under a minute.
pub(crate) fn clock(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs < 60 {
        format!("{secs}s")
    } else {
        format!("{}m{:02}s", secs / 60, secs % 60)
    }
}

/// `line` cut to `width` characters (the terminal line must not wrap, or `\r` rewrites
/// only its last part).
fn cut(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_owned();
    }
    let mut cut: String = line.chars().take(width.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Runs `cmd` as the long step `step`: its output goes to `log`, its progress to the
/// terminal (see the module docs). Returns how long it took; fails, printing the tail of
/// the output, unless it exits with success.
pub(crate) fn run(
    cmd: &mut Command,
    step: &str,
    expected: Expected,
    log: &Path,
) -> Result<Duration> {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start {cmd:?}"))?;
    let (sender, lines) = mpsc::channel();
    let stdout = child.stdout.take().context("no stdout pipe")?;
    let stderr = child.stderr.take().context("no stderr pipe")?;
    let readers = [forward(stdout, sender.clone()), forward(stderr, sender)];
    let mut file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut display = Display::new(step, expected, started);
    let tail = display.follow(&lines, &mut file)?;
    for reader in readers {
        let _ = reader.join();
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {step}"))?;
    display.finish();
    if !status.success() {
        for line in &tail {
            println!("  {line}");
        }
        bail!(
            "{step} failed ({status}); its whole output is in {}",
            log.display()
        );
    }
    Ok(started.elapsed())
}

/// Sends each line of `pipe` to `sender` until the pipe closes.
fn forward(
    pipe: impl Read + Send + 'static,
    sender: mpsc::Sender<String>,
) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    })
}

/// The progress shown while a step runs.
struct Display<'a> {
    step: &'a str,
    expected: Expected,
    started: Instant,
    terminal: bool,
    status: Option<Status>,
    last_plain: Option<Instant>,
}

impl<'a> Display<'a> {
    fn new(step: &'a str, expected: Expected, started: Instant) -> Self {
        Self {
            step,
            expected,
            started,
            terminal: io::stdout().is_terminal(),
            status: None,
            last_plain: None,
        }
    }

    /// Reads output lines until both pipes close, logging each and showing progress;
    /// returns the last [`FAILURE_TAIL`] lines that are not status lines.
    fn follow(&mut self, lines: &Receiver<String>, log: &mut File) -> Result<Vec<String>> {
        let mut tail = Vec::new();
        self.show();
        loop {
            match lines.recv_timeout(TICK) {
                Ok(line) => {
                    writeln!(log, "{line}").context("writing the step's log")?;
                    match parse_status(&line) {
                        Some(status) => self.status = Some(status),
                        None => {
                            tail.push(line);
                            if tail.len() > FAILURE_TAIL {
                                tail.remove(0);
                            }
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(tail),
            }
            self.show();
        }
    }

    fn line(&self) -> String {
        progress_line(
            self.step,
            self.status.as_ref(),
            self.started.elapsed(),
            self.expected,
        )
    }

    fn show(&mut self) {
        let mut out = io::stdout();
        if self.terminal {
            let _ = write!(out, "\r\x1b[2K{}", cut(&self.line(), LINE_WIDTH));
            let _ = out.flush();
        } else if self.last_plain.is_none_or(|at| at.elapsed() >= PLAIN_EVERY) {
            self.last_plain = Some(Instant::now());
            let _ = writeln!(out, "{}", self.line());
        }
    }

    fn finish(&self) {
        if self.terminal {
            println!("\r\x1b[2K{}", cut(&self.line(), LINE_WIDTH));
        } else {
            println!("{}", self.line());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ninja_status_lines_are_read_and_other_output_is_not() {
        let check = |line: &str, expected: Option<(u32, u32, &str)>| {
            let got = parse_status(line);
            let expected = expected.map(|(done, total, what)| Status {
                done,
                total,
                what: what.to_owned(),
            });
            assert_eq!(got, expected, "{line:?}");
        };
        check(
            "[123/214] Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o",
            Some((
                123,
                214,
                "Building CXX object src/CMakeFiles/llama.dir/llama.cpp.o",
            )),
        );
        check(
            "[214/214] Linking CXX executable bin/llama-server",
            Some((214, 214, "Linking CXX executable bin/llama-server")),
        );
        check("In file included from common/chat.cpp:1:", None);
        check("[-Wunused] warning", None);
        check("[a/b] c", None);
        check("", None);
    }

    #[test]
    fn the_line_says_what_is_built_how_long_it_has_taken_and_what_to_expect() {
        let status = parse_status("[7/214] Building C object ggml/src/ggml.c.o").unwrap();
        let line = progress_line(
            "building llama-server",
            Some(&status),
            Duration::from_secs(83),
            Expected::Measured(Duration::from_secs(190)),
        );
        assert_eq!(
            line,
            "building llama-server: 1m23s of about 3m10s (the last build here); \
             [7/214] Building C object ggml/src/ggml.c.o"
        );
        let line = progress_line(
            "building llama-server",
            None,
            Duration::from_secs(5),
            Expected::Estimate(Duration::from_secs(240)),
        );
        assert_eq!(
            line,
            "building llama-server: 5s of about 4m00s (an estimate); starting"
        );
    }

    #[test]
    fn the_expected_total_is_the_recorded_one_else_the_estimate() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("build-seconds");
        let estimate = Duration::from_secs(240);
        assert_eq!(
            Expected::read(&file, estimate),
            Expected::Estimate(estimate)
        );
        record(&file, Duration::from_millis(187_340)).unwrap();
        assert_eq!(
            Expected::read(&file, estimate),
            Expected::Measured(Duration::from_millis(187_300))
        );
        for bad in ["", "soon", "-3", "NaN", "0"] {
            fs::write(&file, bad).unwrap();
            assert_eq!(
                Expected::read(&file, estimate),
                Expected::Estimate(estimate),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn long_lines_are_cut_to_the_width_and_short_ones_kept() {
        assert_eq!(cut("abc", 5), "abc");
        assert_eq!(cut("abcdefgh", 5), "abcd…");
        assert_eq!(cut("ééééé", 5), "ééééé");
    }

    #[test]
    fn a_failing_step_fails_with_its_log_and_a_passing_one_reports_its_time() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("step.log");
        let expected = Expected::Estimate(Duration::from_secs(1));
        let script = "echo '[1/2] Building one'; echo 'warning: x' >&2; echo '[2/2] Linking'";
        let took = run(
            Command::new("sh").args(["-c", script]),
            "step",
            expected,
            &log,
        );
        assert!(took.is_ok(), "{took:?}");
        let text = fs::read_to_string(&log).unwrap();
        assert!(
            text.contains("[2/2] Linking") && text.contains("warning: x"),
            "{text}"
        );
        let script = "echo '[1/2] Building one'; echo 'error: no such file' >&2; exit 3";
        let err = run(
            Command::new("sh").args(["-c", script]),
            "step",
            expected,
            &log,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("step failed") && err.contains("step.log"),
            "{err}"
        );
    }
}
