//! Model management: `list`, `pull`, `show`, `rm`, `ps`, `version`.
//!
//! Each command is a function of a provider and a writer, so tests drive them with a fake
//! provider and read the output back.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use ollm_core::ProviderAdapter;
use ollm_types::ModelInfo;

use crate::exit::CliError;

/// `1.2 GB`-style sizes (decimal units, as model servers print them).
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: &[&str] = &["B", "KB", "MB", "GB", "TB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

fn table(out: &mut dyn Write, rows: &[Vec<String>]) -> std::io::Result<()> {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .map(|r| r.get(c).map_or(0, |s| s.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}   ", w = widths[i]));
            }
        }
        writeln!(out, "{}", line.trim_end())?;
    }
    Ok(())
}

/// `ollm list`.
pub(crate) async fn list(p: &dyn ProviderAdapter, out: &mut dyn Write) -> Result<(), CliError> {
    let models = p.list_models().await?;
    let mut rows = vec![vec![
        "NAME".to_owned(),
        "ID".to_owned(),
        "SIZE".to_owned(),
        "MODIFIED".to_owned(),
    ]];
    for m in models {
        rows.push(vec![
            m.name,
            m.digest
                .map(|d| d.trim_start_matches("sha256:").chars().take(12).collect())
                .unwrap_or_default(),
            m.size.map(human_bytes).unwrap_or_default(),
            m.modified_at
                .map(|t| crate::ago::rfc3339_relative(&t))
                .unwrap_or_default(),
        ]);
    }
    table(out, &rows)?;
    Ok(())
}

/// `ollm show MODEL`; `window` says the context window a run gets and where it comes
/// from (see `context.rs`).
pub(crate) async fn show(
    p: &dyn ProviderAdapter,
    model: &str,
    window: &dyn Fn(&ModelInfo) -> String,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let m = p.show_model(model).await?;
    writeln!(out, "  Model")?;
    let mut rows = vec![vec!["    name".to_owned(), m.name.clone()]];
    let d = &m.details;
    for (k, v) in [
        ("architecture", &d.family),
        ("parameters", &d.parameter_size),
        ("quantization", &d.quantization_level),
        ("format", &d.format),
    ] {
        if let Some(v) = v {
            rows.push(vec![format!("    {k}"), v.clone()]);
        }
    }
    if let Some(c) = m.context_length {
        rows.push(vec!["    context length".to_owned(), c.to_string()]);
    }
    rows.push(vec!["    window".to_owned(), window(&m)]);
    if let Some(s) = m.size {
        rows.push(vec!["    size".to_owned(), human_bytes(s)]);
    }
    table(out, &rows)?;
    if !m.capabilities.is_empty() {
        writeln!(out, "\n  Capabilities")?;
        for c in &m.capabilities {
            writeln!(out, "    {}", c.as_str())?;
        }
    }
    if let Some(params) = m.parameters.as_deref().filter(|p| !p.trim().is_empty()) {
        writeln!(out, "\n  Parameters")?;
        for line in params.lines() {
            writeln!(out, "    {}", line.trim())?;
        }
    }
    Ok(())
}

/// `ollm rm MODEL`.
pub(crate) async fn remove(
    p: &dyn ProviderAdapter,
    model: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    p.delete_model(model).await?;
    writeln!(out, "deleted '{model}'")?;
    Ok(())
}

/// `ollm ps`.
pub(crate) async fn ps(p: &dyn ProviderAdapter, out: &mut dyn Write) -> Result<(), CliError> {
    let models = p.running_models().await?;
    let mut rows = vec![vec![
        "NAME".to_owned(),
        "SIZE".to_owned(),
        "PROCESSOR".to_owned(),
        "CONTEXT".to_owned(),
        "UNTIL".to_owned(),
    ]];
    for m in models {
        let processor = match (m.size, m.size_vram) {
            (Some(total), Some(vram)) if total > 0 => {
                let gpu = (vram as f64 / total as f64 * 100.0).round() as u64;
                match gpu {
                    0 => "100% CPU".to_owned(),
                    100 => "100% GPU".to_owned(),
                    g => format!("{}%/{g}% CPU/GPU", 100 - g),
                }
            }
            _ => String::new(),
        };
        rows.push(vec![
            m.name,
            m.size.map(human_bytes).unwrap_or_default(),
            processor,
            m.context_length.map(|c| c.to_string()).unwrap_or_default(),
            m.expires_at
                .map(|t| crate::ago::rfc3339_relative(&t))
                .unwrap_or_default(),
        ]);
    }
    table(out, &rows)?;
    Ok(())
}

/// `ollm version`: the client's version always; the server's when it answers (a warning
/// otherwise, like `ollama -v`).
pub(crate) async fn version(
    p: &dyn ProviderAdapter,
    base_url: &str,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    writeln!(out, "ollm version {}", env!("CARGO_PKG_VERSION"))?;
    match p.server_version().await {
        Ok(v) => writeln!(out, "{} server at {base_url}: version {v}", p.name())?,
        Err(e) => crate::ui::warn(&format!(
            "could not get the server version from {base_url}: {e}"
        )),
    }
    Ok(())
}

/// `done` of `total` as a whole percentage, rounded to the nearest (`total` > 0).
fn percent(done: u64, total: u64) -> u64 {
    let exact = u128::from(done) * 100 + u128::from(total) / 2;
    u64::try_from(exact / u128::from(total)).unwrap_or(100)
}

/// `ollm pull MODEL`: a progress bar per layer on a terminal, plain lines otherwise.
pub(crate) async fn pull(
    p: &dyn ProviderAdapter,
    model: &str,
    terminal: bool,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut stream = p.pull_model(model);
    let mut progress = Progress::new(terminal)?;
    let mut outcome = Ok(());
    while let Some(step) = stream.next().await {
        let step = match step {
            Ok(s) => s,
            Err(e) => {
                outcome = Err(CliError::Provider(e));
                break;
            }
        };
        match (step.digest.as_deref(), step.total) {
            (Some(digest), Some(total)) if total > 0 => {
                progress.layer(digest, step.completed.unwrap_or(0).min(total), total, out)?;
            }
            _ => progress.status(&step.status, out)?,
        }
    }
    progress.finish_bars();
    out.flush()?;
    if outcome.is_ok() && progress.last_status != "success" {
        outcome = Err(CliError::Other(anyhow::anyhow!(
            "the pull of {model} ended without success"
        )));
    }
    outcome
}

/// What `ollm pull` has shown so far: a bar per layer on a terminal, else the last tenth
/// printed per layer; and the last status line.
struct Progress {
    terminal: bool,
    style: ProgressStyle,
    bars: BTreeMap<String, ProgressBar>,
    last_decile: BTreeMap<String, u64>,
    last_status: String,
}

impl Progress {
    fn new(terminal: bool) -> Result<Self, CliError> {
        let style = ProgressStyle::with_template(
            "{msg} {bar:30.cyan/blue} {bytes}/{total_bytes} {binary_bytes_per_sec} eta {eta}",
        )
        .map_err(|e| CliError::Other(e.into()))?
        .progress_chars("█▉ ");
        Ok(Self {
            terminal,
            style,
            bars: BTreeMap::new(),
            last_decile: BTreeMap::new(),
            last_status: String::new(),
        })
    }

    /// A layer's progress: `done` of `total` bytes (`total` > 0).
    fn layer(
        &mut self,
        digest: &str,
        done: u64,
        total: u64,
        out: &mut dyn Write,
    ) -> io::Result<()> {
        let short: String = digest
            .trim_start_matches("sha256:")
            .chars()
            .take(12)
            .collect();
        if self.terminal {
            let style = &self.style;
            let bar = self.bars.entry(digest.to_owned()).or_insert_with(|| {
                let b = ProgressBar::new(total).with_style(style.clone());
                b.set_message(format!("pulling {short}"));
                b.enable_steady_tick(Duration::from_millis(200));
                b
            });
            bar.set_length(total);
            bar.set_position(done);
            return Ok(());
        }
        // A line per tenth at most, but the figure printed is the data's own percentage,
        // rounded (25%, not the tenth's 20%).
        let decile = done * 10 / total;
        if self.last_decile.get(digest) != Some(&decile) {
            self.last_decile.insert(digest.to_owned(), decile);
            writeln!(
                out,
                "pulling {short}: {:>3}% ({} / {})",
                percent(done, total),
                human_bytes(done),
                human_bytes(total)
            )?;
        }
        Ok(())
    }

    /// A status line (`pulling manifest`, `success`), printed once when it changes.
    fn status(&mut self, status: &str, out: &mut dyn Write) -> io::Result<()> {
        if status != self.last_status {
            self.finish_bars();
            writeln!(out, "{status}")?;
            status.clone_into(&mut self.last_status);
        }
        Ok(())
    }

    fn finish_bars(&mut self) {
        for bar in self.bars.values() {
            bar.finish();
        }
        self.bars.clear();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use async_trait::async_trait;
    use ollm_core::{ProviderStream, PullStream};
    use ollm_types::{
        Capability, ModelDetails, ModelInfo, ProviderError, ProviderErrorKind, ProviderRequest,
        PullProgress, RunningModel,
    };

    /// A provider with canned model-management answers.
    pub(crate) struct Fake;

    #[async_trait]
    impl ProviderAdapter for Fake {
        fn name(&self) -> &str {
            "fake"
        }
        fn chat(&self, _request: ProviderRequest) -> ProviderStream {
            Box::pin(futures::stream::empty())
        }
        async fn list_models(&self) -> Result<Vec<ModelInfo>, ProviderError> {
            Ok(vec![ModelInfo {
                name: "qwen3:8b".into(),
                size: Some(5_200_000_000),
                digest: Some(
                    "sha256:500a1f067a9f782620b40bee6f7b0c89e17ae61f686b92c24933e4ca4b2b8b41"
                        .into(),
                ),
                modified_at: Some("2025-05-01T10:00:00Z".into()),
                ..ModelInfo::default()
            }])
        }
        async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
            if model != "qwen3:8b" {
                return Err(ProviderError::new(
                    ProviderErrorKind::ModelNotFound,
                    format!("model '{model}' not found"),
                ));
            }
            Ok(ModelInfo {
                name: model.into(),
                details: ModelDetails {
                    family: Some("qwen3".into()),
                    parameter_size: Some("8.2B".into()),
                    quantization_level: Some("Q4_K_M".into()),
                    format: None,
                },
                capabilities: vec![Capability::Completion, Capability::Tools],
                context_length: Some(40960),
                parameters: Some("temperature 0.6\ntop_k 20".into()),
                ..ModelInfo::default()
            })
        }
        fn pull_model(&self, model: &str) -> PullStream {
            let steps = if model == "bad" {
                vec![
                    Ok(PullProgress {
                        status: "pulling manifest".into(),
                        ..PullProgress::default()
                    }),
                    Err(ProviderError::new(
                        ProviderErrorKind::ModelNotFound,
                        "pull model manifest: file does not exist",
                    )),
                ]
            } else {
                let layer = |done| {
                    Ok(PullProgress {
                        status: "pulling abc".into(),
                        digest: Some("sha256:abcdef0123456789".into()),
                        total: Some(1000),
                        completed: Some(done),
                    })
                };
                vec![
                    Ok(PullProgress {
                        status: "pulling manifest".into(),
                        ..PullProgress::default()
                    }),
                    layer(0),
                    layer(50),
                    layer(500),
                    layer(1000),
                    Ok(PullProgress {
                        status: "success".into(),
                        ..PullProgress::default()
                    }),
                ]
            };
            Box::pin(futures::stream::iter(steps))
        }
        async fn running_models(&self) -> Result<Vec<RunningModel>, ProviderError> {
            Ok(vec![RunningModel {
                name: "qwen3:8b".into(),
                size: Some(6_000_000_000),
                size_vram: Some(6_000_000_000),
                context_length: Some(8192),
                expires_at: Some("2025-05-01T10:05:00Z".into()),
            }])
        }
        async fn server_version(&self) -> Result<String, ProviderError> {
            Ok("0.12.0".into())
        }
    }

    fn text(buf: Vec<u8>) -> String {
        String::from_utf8(buf).unwrap()
    }

    #[tokio::test]
    async fn list_show_ps_version() {
        let mut out = Vec::new();
        list(&Fake, &mut out).await.unwrap();
        // Issue 17: times are human ("6 months ago"), as `ollama list` prints them.
        let when = crate::ago::rfc3339_relative("2025-05-01T10:00:00Z");
        assert!(when.ends_with(" ago"), "{when}");
        assert_eq!(
            text(out),
            format!(
                "NAME       ID             SIZE     MODIFIED\nqwen3:8b   500a1f067a9f   5.2 GB   {when}\n"
            )
        );
        let mut out = Vec::new();
        let window = |m: &ModelInfo| format!("{} of {}", m.name, m.context_length.unwrap_or(0));
        show(&Fake, "qwen3:8b", &window, &mut out).await.unwrap();
        let shown = text(out);
        assert!(shown.contains("context length   40960"), "{shown}");
        assert!(
            shown.contains("window           qwen3:8b of 40960"),
            "{shown}"
        );
        assert!(
            shown.contains("  Capabilities\n    completion\n    tools\n"),
            "{shown}"
        );
        assert!(shown.contains("    top_k 20"), "{shown}");
        let err = show(&Fake, "nope", &window, &mut Vec::new())
            .await
            .unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::MODEL_NOT_FOUND);
        let mut out = Vec::new();
        ps(&Fake, &mut out).await.unwrap();
        assert!(text(out).contains("100% GPU"));
        let mut out = Vec::new();
        version(&Fake, "http://x", &mut out).await.unwrap();
        assert_eq!(
            text(out),
            format!(
                "ollm version {}\nfake server at http://x: version 0.12.0\n",
                env!("CARGO_PKG_VERSION")
            )
        );
    }

    #[tokio::test]
    async fn pull_prints_plain_lines_when_piped() {
        let mut out = Vec::new();
        pull(&Fake, "qwen3", false, &mut out).await.unwrap();
        assert_eq!(
            text(out),
            "pulling manifest\npulling abcdef012345:   0% (0 B / 1.0 KB)\npulling abcdef012345:  50% (500 B / 1.0 KB)\npulling abcdef012345: 100% (1.0 KB / 1.0 KB)\nsuccess\n"
        );
        let err = pull(&Fake, "bad", false, &mut Vec::new())
            .await
            .unwrap_err();
        assert_eq!(err.exit_code(), crate::exit::MODEL_NOT_FOUND);
    }

    #[test]
    fn sizes() {
        assert_eq!(human_bytes(999), "999 B");
        assert_eq!(human_bytes(1_500), "1.5 KB");
        assert_eq!(human_bytes(4_700_000_000), "4.7 GB");
    }
}
