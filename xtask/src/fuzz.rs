//! `cargo xtask fuzz`: the long-running randomized check of everything that parses
//! untrusted bytes (issue 12), on the stable toolchain.
//!
//! The targets are proptest tests named `fuzz_*` and marked `#[ignore]`, living beside
//! the code they check so they reach private parsers: both stream decoders, the line
//! splitter and the SSE framer (`ollm-bridge/tests/fuzz.rs`), the text-call recovery
//! parsers and their streaming hold-back (`ollm-core/src/recover/tests.rs`), and the
//! CLI's session loader (`ollm-cli/src/sessions.rs`). Their properties: no panic, caps
//! respected (what a decoder holds stays under its cap), typed errors, and the same
//! result however the bytes are cut.
//!
//! Decisions:
//! - proptest rather than cargo-fuzz: libFuzzer needs a nightly toolchain, and proptest
//!   shrinks a failure to a small input it prints, ready to paste into a regression test.
//! - One round is one `cargo test` of the three crates with `PROPTEST_CASES` set; proptest
//!   draws a fresh random seed each run, so `--minutes` repeats rounds until the time is
//!   up and each round explores new inputs. No failure files are written (a failure
//!   prints its input instead).
//! - Out of the ordinary test run (the tests are ignored there): the default round of
//!   [`DEFAULT_CASES`] cases per target takes well over the ~30 s the CI test step may
//!   add. The modules' own property tests run there with few cases.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::{cargo, run_cmd, secs, section};

/// Cases per target in one round unless `--cases` says otherwise.
pub(crate) const DEFAULT_CASES: u32 = 2000;

/// What `fuzz` runs.
#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    /// Cases per target per round.
    pub(crate) cases: u32,
    /// Keep starting rounds until this much time has passed (one round without it).
    pub(crate) minutes: Option<f64>,
}

impl Options {
    /// `[--cases N] [--minutes M]`.
    pub(crate) fn parse(args: &[String]) -> Result<Self> {
        let mut options = Options {
            cases: DEFAULT_CASES,
            minutes: None,
        };
        let mut args = args.iter();
        while let Some(flag) = args.next() {
            let value = args
                .next()
                .with_context(|| format!("`{flag}` needs a value"))?;
            match flag.as_str() {
                "--cases" => {
                    options.cases =
                        value.parse().ok().filter(|n| *n > 0).with_context(|| {
                            format!("`--cases {value}`: a whole number above 0")
                        })?;
                }
                "--minutes" => {
                    options.minutes = Some(
                        value
                            .parse()
                            .ok()
                            .filter(|m: &f64| m.is_finite() && *m > 0.0)
                            .with_context(|| format!("`--minutes {value}`: a number above 0"))?,
                    );
                }
                other => bail!("`fuzz` takes `--cases N` and `--minutes M`, not `{other}`"),
            }
        }
        Ok(options)
    }
}

/// Runs rounds of every `fuzz_*` target until the time is up (or once).
pub(crate) fn run(root: &Path, options: &Options) -> Result<()> {
    let started = Instant::now();
    let budget = options.minutes.map(|m| Duration::from_secs_f64(m * 60.0));
    let mut round = 0u32;
    loop {
        round += 1;
        section(&format!(
            "fuzz round {round}: {} cases per target ({} so far)",
            options.cases,
            secs(started)
        ));
        run_cmd(
            cargo()
                .current_dir(root)
                .env("PROPTEST_CASES", options.cases.to_string())
                .args([
                    "test",
                    "-p",
                    "ollm-bridge",
                    "-p",
                    "ollm-core",
                    "-p",
                    "ollm-cli",
                    "--lib",
                    "--bins",
                    "--tests",
                    "fuzz_",
                    "--",
                    "--ignored",
                ]),
        )
        .with_context(|| format!("fuzz round {round} found a failure (its input is above)"))?;
        if budget.is_none_or(|b| started.elapsed() >= b) {
            break;
        }
    }
    println!(
        "\nfuzz: {round} round(s) of {} cases per target, no failure, in {}",
        options.cases,
        secs(started)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let parse = |args: &[&str]| {
            Options::parse(&args.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>()).ok()
        };
        let check = |args: &[&str], expected: Option<(u32, Option<f64>)>| {
            let expected = expected.map(|(cases, minutes)| Options { cases, minutes });
            assert_eq!(parse(args), expected, "{args:?}");
        };
        check(&[], Some((DEFAULT_CASES, None)));
        check(&["--cases", "50"], Some((50, None)));
        check(&["--minutes", "1.5", "--cases", "9"], Some((9, Some(1.5))));
        check(&["--cases", "0"], None);
        check(&["--cases"], None);
        check(&["--minutes", "-1"], None);
        check(&["--minutes", "inf"], None);
        check(&["--seed", "1"], None);
    }
}
