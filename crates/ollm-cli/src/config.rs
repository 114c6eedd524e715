//! The settled configuration: flags over environment over the TOML config file.
//!
//! [`settle`] is a pure function of the parsed flags, a snapshot of the environment
//! ([`Env`]) and the file's text, so precedence is tested without touching the process
//! environment. The commands only ever see [`Settings`].
//!
//! Secrets: the API key is an `ollm_bridge::Secret` (no `Debug` or `Display` shows it);
//! credentials in an address (`http://user:key@host`) stay only in
//! `ProviderSettings::address` (a `Secret`, for connecting), while `base_url`, which
//! everything prints, has them redacted to `***@`. Custom `headers` values are `Secret`s
//! too, and `config show` masks those whose names look like credentials.
//!
//! The defaults of `ollm run` (`think`, `system`, the sampling options, ...) are read
//! here at the top level, in `[providers.NAME]` and in `[models."NAME"]`, and settled by
//! `defaults.rs`, the one place their precedence is decided.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ollm_bridge::{Secret, redact_url};
use ollm_core::Rule;
use serde::{Deserialize, Serialize};

use crate::args::GlobalArgs;
use crate::defaults::{Layers, RunDefaults};
use crate::exit::CliError;

/// A snapshot of the variables ollm reads (and of any `api_key_env` they name).
#[derive(Clone, Default)]
pub(crate) struct Env {
    vars: BTreeMap<String, String>,
}

/// The names only: the values include every key in the environment.
impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.vars.keys()).finish()
    }
}

impl Env {
    /// The process environment.
    pub(crate) fn from_process() -> Self {
        Env {
            vars: std::env::vars().collect(),
        }
    }

    /// An environment of these pairs (for tests).
    #[cfg(test)]
    pub(crate) fn from_pairs(pairs: &[(&str, &str)]) -> Self {
        Env {
            vars: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        }
    }

    /// A variable, if set and not empty.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }
}

/// The kinds of backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum ProviderKind {
    /// Ollama's native API.
    Ollama,
    /// An OpenAI-compatible `/v1` server.
    Openai,
    /// A server of Anthropic's Messages API (`/v1/messages`).
    Anthropic,
}

/// The config file.
///
/// `deny_unknown_fields` is left to the flattened [`RunDefaults`], which sees every key
/// this table does not know and refuses the unknown ones (`sampling.rs`'s Decisions).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub(crate) struct FileConfig {
    /// The provider used when neither `--provider` nor `OLLM_PROVIDER` names one.
    pub(crate) default_provider: Option<String>,
    /// Named providers; `ollama`, `openai` and `anthropic` exist even when not listed.
    pub(crate) providers: BTreeMap<String, ProviderEntry>,
    /// Built-in tool settings.
    pub(crate) tools: ToolsEntry,
    /// The small-model rules turned off: `[coach] off = [...]`.
    pub(crate) coach: CoachEntry,
    /// MCP servers, by name (see `mcp.rs`).
    pub(crate) mcp_servers: BTreeMap<String, crate::mcp::McpServerEntry>,
    /// `ollm serve`'s repair policy and client keys (see `serve/entry.rs`).
    pub(crate) serve: ollm_serve::ServeEntry,
    /// The context window of every model, in tokens (over what the server reports).
    pub(crate) context_length: Option<u32>,
    /// Compact a long conversation when it nears the window (default `true`).
    pub(crate) compact: Option<bool>,
    /// Compact when a request would use more than this percent of the window (1-100,
    /// default 80).
    pub(crate) compact_threshold: Option<u8>,
    /// Per-model settings: `[models."NAME"]`.
    pub(crate) models: BTreeMap<String, ModelEntry>,
    /// HTTP headers sent with every request (a provider's own go over these).
    pub(crate) headers: BTreeMap<String, String>,
    /// The `llama-server` that `cargo xtask demo`, `e2e`, `eval` and `server` run instead
    /// of installing one (as `OLLM_LLAMA_SERVER` does). `ollm` itself starts no server and
    /// only accepts the key, so one file serves both.
    pub(crate) llama_server: Option<PathBuf>,
    /// Defaults for `ollm run` (`think`, `system`, sampling, ...).
    #[serde(flatten)]
    pub(crate) run: RunDefaults,
}

/// One `[models."NAME"]` table (unknown keys: see [`FileConfig`]).
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default)]
pub(crate) struct ModelEntry {
    /// The model's context window, in tokens (over every other setting but the flag).
    pub(crate) context_length: Option<u32>,
    /// The small-model rules turned off for this model, besides `[coach] off`:
    /// `[models."NAME".coach] off = [...]` (one rule may help one model and cost
    /// another: `tools-context`, issue 35).
    pub(crate) coach: CoachEntry,
    /// Defaults for `ollm run` with this model.
    #[serde(flatten)]
    pub(crate) run: RunDefaults,
}

/// One `[providers.NAME]` table (unknown keys: see [`FileConfig`]).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
pub(crate) struct ProviderEntry {
    /// The backend.
    pub(crate) kind: ProviderKind,
    /// Its address.
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    /// The environment variable holding the API key.
    #[serde(default)]
    pub(crate) api_key_env: Option<String>,
    /// The model `ollm run` uses when none is given.
    #[serde(default)]
    pub(crate) default_model: Option<String>,
    /// The context window to ask for, in tokens.
    #[serde(default)]
    pub(crate) context_length: Option<u32>,
    /// Seconds to wait for a connection.
    #[serde(default)]
    pub(crate) connect_timeout_secs: Option<u64>,
    /// Seconds to wait between chunks of a reply (model loading can take minutes).
    #[serde(default)]
    pub(crate) idle_timeout_secs: Option<u64>,
    /// HTTP headers sent with every request to this provider.
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// Defaults for `ollm run` with this provider.
    #[serde(flatten)]
    pub(crate) run: RunDefaults,
}

/// The `[tools]` table.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct ToolsEntry {
    /// Programs (or `program subcommand`) `run_command` may start; replaces the defaults.
    pub(crate) allowed_commands: Option<Vec<String>>,
    /// Tools that need approval but are approved without asking (`write_file`,
    /// `run_command`).
    pub(crate) auto_approve: Vec<String>,
    /// Seconds a command may run.
    pub(crate) command_timeout_secs: Option<u64>,
    /// Bytes of output a tool returns at most.
    pub(crate) output_limit_bytes: Option<usize>,
    /// The audit log of `run_command` (default: `audit.log` in the data directory).
    pub(crate) audit_log: Option<PathBuf>,
    /// Environment variables passed to commands besides `PATH`, `HOME`, `LANG`, `LC_*`,
    /// `TERM`, `TZ` and `USER` (names that look like secrets are never passed).
    pub(crate) pass_env: Vec<String>,
    /// Kernel confinement of commands: `auto` (default), `required` or `off`.
    pub(crate) sandbox: Option<ollm_tools::Sandbox>,
    /// Tell the model the working folder and its top entries when the built-in tools are
    /// offered (default `true`).
    pub(crate) workspace_context: Option<bool>,
}

/// The `[coach]` table: the small-model rules of core's coach turned off, and those off
/// by default turned on.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct CoachEntry {
    /// Rule names, as `ollm run --coach-off` takes them (`all`: every rule).
    pub(crate) off: Vec<String>,
    /// Rule names, as `ollm run --coach-on` takes them; `off` outranks this.
    pub(crate) on: Vec<String>,
}

/// The rules `names` name (`all`: every rule), to turn off or on, read for `whence` (the
/// flag or the table); an unknown name is a usage error listing the known ones.
pub(crate) fn rules_named(names: &[String], whence: &str) -> Result<BTreeSet<Rule>, CliError> {
    let mut off = BTreeSet::new();
    for name in names {
        if name.trim() == "all" {
            off.extend(Rule::ALL.iter().copied());
            continue;
        }
        match name.parse::<Rule>() {
            Ok(rule) => {
                off.insert(rule);
            }
            Err(ollm_core::CoreError::UnknownRule { known, .. }) => {
                return Err(CliError::Usage(format!(
                    "{whence}: unknown coach rule {name:?}; the rules are: all, {known}"
                )));
            }
            Err(other) => return Err(CliError::Core(other)),
        }
    }
    Ok(off)
}

/// The provider to talk to, settled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ProviderSettings {
    /// Its name (`ollama`, `openai`, or a config name).
    pub(crate) name: String,
    /// The backend.
    pub(crate) kind: ProviderKind,
    /// The normalised base URL (scheme, host, port and, for OpenAI, the `/v1` path), as
    /// printed: credentials in the address (`user:key@`) are redacted to `***@`.
    pub(crate) base_url: String,
    /// The address as given ended in `/v1`: an OpenAI-style address (a mix-up when the
    /// provider is Ollama; see `errors::looks_openai`).
    pub(crate) v1_address: bool,
    /// The normalised base URL with its credentials, for connecting only.
    pub(crate) address: Secret,
    /// The variable the API key came from.
    pub(crate) api_key_env: Option<String>,
    /// The API key (a [`Secret`]: no `Debug` or `Display` shows it).
    pub(crate) api_key: Option<Secret>,
    /// The provider's default model.
    pub(crate) default_model: Option<String>,
    /// The context window to ask for.
    pub(crate) context_length: Option<u32>,
    /// Connection timeout.
    pub(crate) connect_timeout: Duration,
    /// Idle timeout between chunks.
    pub(crate) idle_timeout: Duration,
    /// Custom HTTP headers: the file's top-level ones, with the provider's over them.
    /// Values are [`Secret`]s (a header often carries a token).
    pub(crate) headers: Vec<(String, Secret)>,
}

/// Built-in tool settings, settled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ToolSettings {
    /// Allowed programs (`git status` style entries allow one subcommand).
    pub(crate) allowed_commands: Vec<String>,
    /// Tools approved without asking.
    pub(crate) auto_approve: Vec<String>,
    /// Command timeout.
    pub(crate) command_timeout: Duration,
    /// Output cap in bytes.
    pub(crate) output_limit: usize,
    /// The audit log file.
    pub(crate) audit_log: PathBuf,
    /// Extra environment variables passed to commands.
    pub(crate) pass_env: Vec<String>,
    /// Kernel confinement of commands.
    pub(crate) sandbox: ollm_tools::Sandbox,
    /// Tell the model the working folder and its top entries.
    pub(crate) workspace_context: bool,
}

/// The context window and compaction, settled from the config (see `context.rs`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ContextSettings {
    /// The window of every model: the provider's `context_length`, else the top-level one.
    pub(crate) length: Option<u32>,
    /// Windows by model, from `[models."NAME"]`.
    pub(crate) models: BTreeMap<String, u32>,
    /// Compact automatically.
    pub(crate) compact: bool,
    /// When, in percent of the window.
    pub(crate) compact_threshold: u8,
}

impl Default for ContextSettings {
    fn default() -> Self {
        ContextSettings {
            length: None,
            models: BTreeMap::new(),
            compact: true,
            compact_threshold: ollm_core::context::CompactionConfig::default().threshold_percent,
        }
    }
}

/// Everything the commands need to know, settled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// The config file consulted (it may not exist).
    pub(crate) config_path: PathBuf,
    /// Whether it existed.
    pub(crate) config_found: bool,
    /// The provider.
    pub(crate) provider: ProviderSettings,
    /// `OLLM_MODEL`, else the provider's default model.
    pub(crate) model: Option<String>,
    /// Where sessions, history and the audit log live.
    pub(crate) data_dir: PathBuf,
    /// Built-in tools.
    pub(crate) tools: ToolSettings,
    /// Every provider name known (built-in and from the file).
    pub(crate) known_providers: Vec<String>,
    /// The context window and compaction.
    pub(crate) context: ContextSettings,
    /// How much to say on stderr: the `-v` count (see `logging.rs`).
    pub(crate) verbose: u8,
    /// The file's defaults for `ollm run`, by layer (see `defaults.rs`).
    pub(crate) defaults: Layers,
    /// The coach's rules the file turns off (`[coach] off`).
    pub(crate) coach_off: BTreeSet<Rule>,
    /// The rules turned off for runs of one model, by model (`[models."NAME".coach]
    /// off`), besides `coach_off`.
    pub(crate) model_coach_off: BTreeMap<String, BTreeSet<Rule>>,
    /// The rules off by default that the file turns on (`[coach] on`).
    pub(crate) coach_on: BTreeSet<Rule>,
    /// The rules turned on for runs of one model (`[models."NAME".coach] on`).
    pub(crate) model_coach_on: BTreeMap<String, BTreeSet<Rule>>,
}

/// The programs `run_command` may start unless the config says otherwise: read-only ones.
pub(crate) use ollm_tools::DEFAULT_ALLOWED_COMMANDS;

const DEFAULT_OLLAMA: &str = "http://127.0.0.1:11434";
const DEFAULT_OPENAI: &str = "http://127.0.0.1:8080/v1";

/// The config file path: `--config`, else `OLLM_CONFIG`, else `ollm/config.toml` in the
/// platform config directory.
pub(crate) fn config_path(global: &GlobalArgs, env: &Env) -> PathBuf {
    if let Some(p) = &global.config {
        return p.clone();
    }
    if let Some(p) = env.get("OLLM_CONFIG") {
        return PathBuf::from(p);
    }
    dirs::config_dir()
        .unwrap_or_else(|| PathBuf::from("."))
        .join("ollm")
        .join("config.toml")
}

/// The data directory: `OLLM_DATA_DIR`, else `ollm` in the platform data directory.
pub(crate) fn data_dir(env: &Env) -> PathBuf {
    match env.get("OLLM_DATA_DIR") {
        Some(p) => PathBuf::from(p),
        None => dirs::data_dir()
            .unwrap_or_else(|| PathBuf::from("."))
            .join("ollm"),
    }
}

/// Reads the config file; a missing file is an empty config, a broken one a usage error.
pub(crate) fn load_file(path: &Path) -> Result<Option<FileConfig>, CliError> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse_file(&text)
            .map(Some)
            .map_err(|e| CliError::Usage(format!("config file {}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(CliError::Usage(format!(
            "cannot read config file {}: {e}",
            path.display()
        ))),
    }
}

/// Parses the config file's text.
pub(crate) fn parse_file(text: &str) -> Result<FileConfig, toml::de::Error> {
    toml::from_str(text)
}

/// Settles flags, environment and file into [`Settings`].
pub(crate) fn settle(
    global: &GlobalArgs,
    env: &Env,
    config_path: PathBuf,
    file: Option<FileConfig>,
) -> Result<Settings, CliError> {
    let config_found = file.is_some();
    let file = file.unwrap_or_default();
    let (name, entry, known_providers) = chosen_provider(global, env, &file)?;
    let provider = provider_settings(global, env, &file, name, &entry)?;
    let model = env
        .get("OLLM_MODEL")
        .map(str::to_owned)
        .or_else(|| provider.default_model.clone());
    let data_dir = data_dir(env);
    let tools = tool_settings(&file, &data_dir);
    let context = context_settings(&file, provider.context_length)?;
    let coach_off = rules_named(&file.coach.off, "[coach] off in the config")?;
    let coach_on = rules_named(&file.coach.on, "[coach] on in the config")?;
    let (mut model_coach_off, mut model_coach_on) = (BTreeMap::new(), BTreeMap::new());
    for (name, m) in &file.models {
        for (names, word, map) in [
            (&m.coach.off, "off", &mut model_coach_off),
            (&m.coach.on, "on", &mut model_coach_on),
        ] {
            if !names.is_empty() {
                let whence = format!("[models.{name:?}.coach] {word} in the config");
                map.insert(name.clone(), rules_named(names, &whence)?);
            }
        }
    }
    let defaults = Layers::new(
        file.run.clone(),
        (&provider.name, entry.run.clone()),
        file.models
            .iter()
            .map(|(name, m)| (name.clone(), m.run.clone()))
            .collect(),
    )?;
    Ok(Settings {
        config_path,
        config_found,
        provider,
        model,
        data_dir,
        tools,
        known_providers,
        context,
        verbose: global.verbose,
        defaults,
        coach_off,
        model_coach_off,
        coach_on,
        model_coach_on,
    })
}

/// The provider in use (flag, `OLLM_PROVIDER`, the file's `default_provider`, `ollama`):
/// its name, its entry (built in or from the file) and every known provider's name.
fn chosen_provider(
    global: &GlobalArgs,
    env: &Env,
    file: &FileConfig,
) -> Result<(String, ProviderEntry, Vec<String>), CliError> {
    let mut entries = builtin_providers();
    for (name, entry) in &file.providers {
        entries.insert(name.clone(), entry.clone());
    }
    let known_providers: Vec<String> = entries.keys().cloned().collect();

    let name = global
        .provider
        .clone()
        .or_else(|| env.get("OLLM_PROVIDER").map(str::to_owned))
        .or_else(|| file.default_provider.clone())
        .unwrap_or_else(|| "ollama".to_owned());
    let entry = entries.get(&name).cloned().ok_or_else(|| {
        CliError::Usage(format!(
            "unknown provider {name:?} (known: {})",
            known_providers.join(", ")
        ))
    })?;
    Ok((name, entry, known_providers))
}

/// The provider `name` settled: its address, key, timeouts and headers.
fn provider_settings(
    global: &GlobalArgs,
    env: &Env,
    file: &FileConfig,
    name: String,
    entry: &ProviderEntry,
) -> Result<ProviderSettings, CliError> {
    let raw_host = raw_host(global, env, &name, entry);
    let address = normalise_host(&raw_host, entry.kind).ok_or_else(|| {
        CliError::Usage(format!(
            "not a usable server address: {:?}",
            redact_url(&raw_host)
        ))
    })?;

    let api_key = entry
        .api_key_env
        .as_deref()
        .and_then(|var| {
            std::env::var(var)
                .ok()
                .or_else(|| env.get(var).map(str::to_owned))
        })
        .filter(|k| !k.is_empty())
        .map(Secret::new);

    Ok(ProviderSettings {
        name,
        kind: entry.kind,
        v1_address: raw_host.trim().trim_end_matches('/').ends_with("/v1"),
        base_url: redact_url(&address),
        address: Secret::new(address),
        api_key_env: entry.api_key_env.clone(),
        api_key,
        default_model: entry.default_model.clone(),
        context_length: entry.context_length,
        connect_timeout: Duration::from_secs(entry.connect_timeout_secs.unwrap_or(10)),
        idle_timeout: Duration::from_secs(entry.idle_timeout_secs.unwrap_or(300)),
        headers: headers(&file.headers, &entry.headers),
    })
}

/// The address as given, before it is checked: flag, `OLLM_HOST`, `OLLAMA_HOST` (for the
/// provider named `ollama`) or `ANTHROPIC_BASE_URL` (for the provider named `anthropic`),
/// the file, else the kind's default.
fn raw_host(global: &GlobalArgs, env: &Env, name: &str, entry: &ProviderEntry) -> String {
    global
        .host
        .clone()
        .or_else(|| env.get("OLLM_HOST").map(str::to_owned))
        .or_else(|| {
            let var = match name {
                "ollama" => "OLLAMA_HOST",
                "anthropic" => "ANTHROPIC_BASE_URL",
                _ => return None,
            };
            env.get(var).map(str::to_owned)
        })
        .or_else(|| entry.base_url.clone())
        .unwrap_or_else(|| match entry.kind {
            ProviderKind::Ollama => DEFAULT_OLLAMA.to_owned(),
            ProviderKind::Openai => DEFAULT_OPENAI.to_owned(),
            ProviderKind::Anthropic => ollm_bridge::anthropic::DEFAULT_BASE_URL.to_owned(),
        })
}

/// The `[tools]` table settled, with its defaults.
fn tool_settings(file: &FileConfig, data_dir: &Path) -> ToolSettings {
    ToolSettings {
        allowed_commands: file.tools.allowed_commands.clone().unwrap_or_else(|| {
            DEFAULT_ALLOWED_COMMANDS
                .iter()
                .map(|s| (*s).to_owned())
                .collect()
        }),
        auto_approve: file.tools.auto_approve.clone(),
        command_timeout: Duration::from_secs(file.tools.command_timeout_secs.unwrap_or(30)),
        output_limit: file.tools.output_limit_bytes.unwrap_or(16 * 1024),
        audit_log: file
            .tools
            .audit_log
            .clone()
            .unwrap_or_else(|| data_dir.join("audit.log")),
        pass_env: file.tools.pass_env.clone(),
        sandbox: file.tools.sandbox.unwrap_or_default(),
        workspace_context: file.tools.workspace_context.unwrap_or(true),
    }
}

/// The context settings of `file`; `provider` is the provider's own `context_length`,
/// which goes over the top-level one. A window of 0 or a threshold outside 1-100 is a
/// usage error.
fn context_settings(file: &FileConfig, provider: Option<u32>) -> Result<ContextSettings, CliError> {
    let mut models = BTreeMap::new();
    for (name, entry) in &file.models {
        if let Some(n) = entry.context_length {
            models.insert(name.clone(), n);
        }
    }
    let length = provider.or(file.context_length);
    if length == Some(0) || models.values().any(|n| *n == 0) {
        return Err(CliError::Usage(
            "context_length in the config must be at least 1".into(),
        ));
    }
    let defaults = ContextSettings::default();
    let compact_threshold = file.compact_threshold.unwrap_or(defaults.compact_threshold);
    if !(1..=100).contains(&compact_threshold) {
        return Err(CliError::Usage(format!(
            "compact_threshold in the config must be a percentage from 1 to 100, not {compact_threshold}"
        )));
    }
    Ok(ContextSettings {
        length,
        models,
        compact: file.compact.unwrap_or(true),
        compact_threshold,
    })
}

/// The headers sent: `global`, with the provider's `own` replacing any of the same name
/// (names compare without case, as HTTP's do).
fn headers(
    global: &BTreeMap<String, String>,
    own: &BTreeMap<String, String>,
) -> Vec<(String, Secret)> {
    let mut all: Vec<(String, Secret)> = global
        .iter()
        .filter(|(name, _)| !own.keys().any(|o| o.eq_ignore_ascii_case(name)))
        .map(|(name, value)| (name.clone(), Secret::new(value.clone())))
        .collect();
    all.extend(
        own.iter()
            .map(|(name, value)| (name.clone(), Secret::new(value.clone()))),
    );
    all
}

/// Whether a header's value is shown masked: its name looks like a credential's.
fn secret_header(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ollm_tools::command::process::looks_secret(name) || upper.contains("AUTH")
}

/// `headers = { ... }`, values masked where they look secret.
fn render_headers(headers: &[(String, Secret)]) -> String {
    let shown: Vec<String> = headers
        .iter()
        .map(|(name, value)| {
            let value = if secret_header(name) {
                mask(Some(value.expose()))
            } else {
                value.expose().to_owned()
            };
            format!("{name:?} = {value:?}")
        })
        .collect();
    format!("headers = {{ {} }}\n", shown.join(", "))
}

fn builtin_providers() -> BTreeMap<String, ProviderEntry> {
    let entry = |kind| ProviderEntry {
        kind,
        base_url: None,
        // Anthropic's own convention for the key; the others need none.
        api_key_env: (kind == ProviderKind::Anthropic).then(|| "ANTHROPIC_API_KEY".to_owned()),
        default_model: None,
        context_length: None,
        connect_timeout_secs: None,
        idle_timeout_secs: None,
        headers: BTreeMap::new(),
        run: RunDefaults::default(),
    };
    BTreeMap::from([
        ("ollama".to_owned(), entry(ProviderKind::Ollama)),
        ("openai".to_owned(), entry(ProviderKind::Openai)),
        ("anthropic".to_owned(), entry(ProviderKind::Anthropic)),
    ])
}

/// The base URL for an address as people write it (`0.0.0.0`, `host:port`,
/// `http://host:port`, `[::1]:11434`, with or without a path): each adapter's own parser
/// (`ollm_bridge::ollama::parse_host`, `ollm_bridge::openai::parse_host`), so the CLI and
/// the library read addresses the same way. An empty or unusable address is a usage error.
pub(crate) fn normalise_host(raw: &str, kind: ProviderKind) -> Option<String> {
    if raw.trim().is_empty() {
        return None;
    }
    match kind {
        ProviderKind::Ollama => ollm_bridge::ollama::parse_host(raw),
        ProviderKind::Openai => ollm_bridge::openai::parse_host(raw),
        ProviderKind::Anthropic => ollm_bridge::anthropic::parse_host(raw),
    }
    .ok()
}

/// Masks a secret for display: only whether it is set and its length show.
pub(crate) fn mask(secret: Option<&str>) -> String {
    match secret {
        Some(s) => format!("set ({} chars, ********)", s.chars().count()),
        None => "not set".to_owned(),
    }
}

/// The settled configuration as TOML-like text for `ollm config show`, secrets masked.
pub(crate) fn render_settings(s: &Settings) -> String {
    let p = &s.provider;
    let mut out = String::new();
    let mut line = |k: &str, v: String| {
        out.push_str(&format!("{k} = {v}\n"));
    };
    line(
        "config_file",
        format!(
            "{:?}{}",
            s.config_path.display().to_string(),
            if s.config_found { "" } else { "  # not found" }
        ),
    );
    line(
        "data_dir",
        format!("{:?}", s.data_dir.display().to_string()),
    );
    line("provider", format!("{:?}", p.name));
    match s.model.as_deref() {
        Some(m) => line("model", format!("{m:?}")),
        // A key with no value is not TOML: say "none" as a comment.
        None => line("# model", "(none set)".to_owned()),
    }
    line("known_providers", format!("{:?}", s.known_providers));
    let c = &s.context;
    if let Some(n) = c.length {
        line("context_length", n.to_string());
    }
    line("compact", c.compact.to_string());
    line("compact_threshold", c.compact_threshold.to_string());
    out.push_str(&crate::defaults::render(&s.defaults.global));
    out.push_str(&render_provider(p, &s.defaults.provider));
    let t = &s.tools;
    out.push_str(&format!(
        "\n[tools]\nallowed_commands = {:?}\nauto_approve = {:?}\ncommand_timeout_secs = {}\noutput_limit_bytes = {}\naudit_log = {:?}\nworkspace_context = {}\n",
        t.allowed_commands,
        t.auto_approve,
        t.command_timeout.as_secs(),
        t.output_limit,
        t.audit_log.display().to_string(),
        t.workspace_context
    ));
    let off: Vec<&str> = s.coach_off.iter().map(|r| r.name()).collect();
    let on: Vec<&str> = s.coach_on.iter().map(|r| r.name()).collect();
    out.push_str(&format!("\n[coach]\noff = {off:?}\non = {on:?}\n"));
    out.push_str(&render_models(s));
    out
}

/// The settled provider's `[providers.NAME]` table, with its run defaults (`run`).
fn render_provider(p: &ProviderSettings, run: &RunDefaults) -> String {
    let mut out = format!("\n[providers.{}]\n", p.name);
    let kind = match p.kind {
        ProviderKind::Ollama => "ollama",
        ProviderKind::Openai => "openai",
        ProviderKind::Anthropic => "anthropic",
    };
    out.push_str(&format!("kind = {kind:?}\nbase_url = {:?}\n", p.base_url));
    if let Some(var) = &p.api_key_env {
        out.push_str(&format!(
            "api_key_env = {var:?}  # {}\n",
            mask(p.api_key.as_ref().map(Secret::expose))
        ));
    }
    if let Some(m) = &p.default_model {
        out.push_str(&format!("default_model = {m:?}\n"));
    }
    if let Some(c) = p.context_length {
        out.push_str(&format!("context_length = {c}\n"));
    }
    out.push_str(&format!(
        "connect_timeout_secs = {}\nidle_timeout_secs = {}\n",
        p.connect_timeout.as_secs(),
        p.idle_timeout.as_secs()
    ));
    if !p.headers.is_empty() {
        out.push_str(&render_headers(&p.headers));
    }
    out.push_str(&crate::defaults::render(run));
    out
}

/// The `[models."NAME"]` tables: each model's window, run defaults and rules off.
fn render_models(s: &Settings) -> String {
    let (c, runs) = (&s.context, &s.defaults.models);
    let (coach_off, coach_on) = (&s.model_coach_off, &s.model_coach_on);
    let mut names: Vec<&String> = c
        .models
        .keys()
        .chain(runs.keys())
        .chain(coach_off.keys())
        .chain(coach_on.keys())
        .collect();
    names.sort();
    names.dedup();
    let mut out = String::new();
    for model in names {
        out.push_str(&format!("\n[models.{model:?}]\n"));
        if let Some(n) = c.models.get(model) {
            out.push_str(&format!("context_length = {n}\n"));
        }
        if let Some(run) = runs.get(model) {
            out.push_str(&crate::defaults::render(run));
        }
        let named = |rules: Option<&BTreeSet<Rule>>| -> Vec<&str> {
            rules.into_iter().flatten().map(|r| r.name()).collect()
        };
        let (off, on) = (named(coach_off.get(model)), named(coach_on.get(model)));
        match (off.is_empty(), on.is_empty()) {
            (true, true) => {}
            (false, true) => out.push_str(&format!("coach = {{ off = {off:?} }}\n")),
            (true, false) => out.push_str(&format!("coach = {{ on = {on:?} }}\n")),
            (false, false) => {
                out.push_str(&format!("coach = {{ off = {off:?}, on = {on:?} }}\n"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(
        global: GlobalArgs,
        env: &[(&str, &str)],
        file: &str,
        expected_provider: &str,
        expected_url: &str,
    ) {
        let file = if file.is_empty() {
            None
        } else {
            Some(parse_file(file).unwrap())
        };
        let s = settle(
            &global,
            &Env::from_pairs(env),
            PathBuf::from("c.toml"),
            file,
        )
        .unwrap();
        assert_eq!(
            (s.provider.name.as_str(), s.provider.base_url.as_str()),
            (expected_provider, expected_url)
        );
    }

    fn flags(provider: Option<&str>, host: Option<&str>) -> GlobalArgs {
        GlobalArgs {
            provider: provider.map(str::to_owned),
            host: host.map(str::to_owned),
            ..GlobalArgs::default()
        }
    }

    const FILE: &str = r#"
default_provider = "lab"
[providers.lab]
kind = "openai"
base_url = "http://10.0.0.5:8000/v1"
default_model = "qwen"
api_key_env = "OLLM_TEST_LAB_KEY"
"#;

    #[test]
    fn defaults_without_anything() {
        check(
            flags(None, None),
            &[],
            "",
            "ollama",
            "http://127.0.0.1:11434",
        );
        check(
            flags(Some("openai"), None),
            &[],
            "",
            "openai",
            "http://127.0.0.1:8080/v1",
        );
    }

    #[test]
    fn ollama_host_is_honoured_for_ollama() {
        check(
            flags(None, None),
            &[("OLLAMA_HOST", "0.0.0.0:9999")],
            "",
            "ollama",
            "http://127.0.0.1:9999",
        );
        check(
            flags(None, None),
            &[("OLLAMA_HOST", "example.org")],
            "",
            "ollama",
            "http://example.org:11434",
        );
        // It names Ollama's address, not an OpenAI-compatible server's.
        check(
            flags(Some("openai"), None),
            &[("OLLAMA_HOST", "1.2.3.4")],
            "",
            "openai",
            "http://127.0.0.1:8080/v1",
        );
    }

    #[test]
    fn anthropic_reads_its_own_variables() {
        check(
            flags(Some("anthropic"), None),
            &[],
            "",
            "anthropic",
            "http://127.0.0.1:8080",
        );
        // ANTHROPIC_BASE_URL as the SDKs read it (the root; a `/v1` is dropped).
        check(
            flags(Some("anthropic"), None),
            &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:18270/v1")],
            "",
            "anthropic",
            "http://127.0.0.1:18270",
        );
        // It names the `anthropic` provider's address only.
        check(
            flags(Some("openai"), None),
            &[("ANTHROPIC_BASE_URL", "https://api.anthropic.com")],
            "",
            "openai",
            "http://127.0.0.1:8080/v1",
        );
        let file = parse_file(
            "[providers.claude]\nkind = \"anthropic\"\nbase_url = \"https://api.anthropic.com\"\n",
        );
        let env = Env::from_pairs(&[("ANTHROPIC_API_KEY", "sk-ant-canary")]);
        let s = settle(
            &flags(Some("anthropic"), None),
            &env,
            "c".into(),
            file.clone().ok(),
        )
        .unwrap();
        assert_eq!(s.provider.kind, ProviderKind::Anthropic);
        assert_eq!(s.provider.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert!(s.provider.api_key.is_some());
        assert!(!render_settings(&s).contains("sk-ant-canary"));
        assert!(!format!("{s:?}").contains("sk-ant-canary"));
        let s = settle(&flags(Some("claude"), None), &env, "c".into(), file.ok()).unwrap();
        assert_eq!(
            (s.provider.kind, s.provider.base_url.as_str()),
            (ProviderKind::Anthropic, "https://api.anthropic.com")
        );
    }

    #[test]
    fn file_is_below_env_which_is_below_flags() {
        check(
            flags(None, None),
            &[],
            FILE,
            "lab",
            "http://10.0.0.5:8000/v1",
        );
        check(
            flags(None, None),
            &[("OLLM_PROVIDER", "ollama")],
            FILE,
            "ollama",
            "http://127.0.0.1:11434",
        );
        check(
            flags(None, None),
            &[("OLLM_HOST", "http://127.0.0.1:7000/v1")],
            FILE,
            "lab",
            "http://127.0.0.1:7000/v1",
        );
        check(
            flags(Some("openai"), Some("127.0.0.1:5")),
            &[("OLLM_PROVIDER", "lab"), ("OLLM_HOST", "127.0.0.1:6")],
            FILE,
            "openai",
            "http://127.0.0.1:5/v1",
        );
    }

    #[test]
    fn model_comes_from_env_then_file() {
        let file = Some(parse_file(FILE).unwrap());
        let s = settle(
            &flags(None, None),
            &Env::default(),
            "c".into(),
            file.clone(),
        )
        .unwrap();
        assert_eq!(s.model.as_deref(), Some("qwen"));
        let env = Env::from_pairs(&[("OLLM_MODEL", "llama")]);
        let s = settle(&flags(None, None), &env, "c".into(), file).unwrap();
        assert_eq!(s.model.as_deref(), Some("llama"));
    }

    #[test]
    fn api_keys_are_read_and_masked() {
        let file = Some(parse_file(FILE).unwrap());
        let env = Env::from_pairs(&[("OLLM_TEST_LAB_KEY", "sk-secret-value")]);
        let s = settle(&flags(None, None), &env, "c".into(), file).unwrap();
        assert_eq!(
            s.provider.api_key.as_ref().map(Secret::expose),
            Some("sk-secret-value")
        );
        let shown = render_settings(&s);
        assert!(!shown.contains("sk-secret-value"));
        assert!(!format!("{s:?}").contains("sk-secret-value"));
        assert!(shown.contains("OLLM_TEST_LAB_KEY"));
    }

    /// Issue 17: `config show` prints valid TOML, with a model or without one.
    #[test]
    fn config_show_is_valid_toml() {
        let with_model = settle(
            &flags(None, None),
            &Env::from_pairs(&[("OLLM_MODEL", "qwen3")]),
            "c".into(),
            None,
        )
        .unwrap();
        let without = settle(&flags(None, None), &Env::default(), "c".into(), None).unwrap();
        let file = parse_file("context_length = 2048\n[models.\"qwen3:8b\"]\ncontext_length = 9\n");
        let with_context = settle(
            &flags(None, None),
            &Env::default(),
            "c".into(),
            Some(file.unwrap()),
        )
        .unwrap();
        let shown = render_settings(&with_context);
        assert!(
            shown.contains("\n[models.\"qwen3:8b\"]\ncontext_length = 9\n"),
            "{shown}"
        );
        for s in [with_model, without, with_context] {
            let shown = render_settings(&s);
            let parsed: Result<toml::Value, _> = toml::from_str(&shown);
            assert!(parsed.is_ok(), "{parsed:?}\n{shown}");
        }
    }

    /// Issue 11: `context_length` (top level, or the provider's over it),
    /// `[models."NAME"]`, `compact` and `compact_threshold`.
    #[test]
    fn context_settings_come_from_the_file() {
        let check = |text: &str, expected: Result<ContextSettings, ()>| {
            let file = parse_file(text).unwrap();
            let got = settle(&flags(None, None), &Env::default(), "c".into(), Some(file));
            assert_eq!(got.map(|s| s.context).map_err(|_| ()), expected, "{text:?}");
        };
        check("", Ok(ContextSettings::default()));
        check(
            "context_length = 2048\ncompact = false\ncompact_threshold = 70\n\
             [models.\"qwen3:8b\"]\ncontext_length = 8192\n[models.other]\n",
            Ok(ContextSettings {
                length: Some(2048),
                models: [("qwen3:8b".to_owned(), 8192)].into(),
                compact: false,
                compact_threshold: 70,
            }),
        );
        check(
            "context_length = 2048\n[providers.ollama]\nkind = \"ollama\"\ncontext_length = 3000\n",
            Ok(ContextSettings {
                length: Some(3000),
                ..ContextSettings::default()
            }),
        );
        check("context_length = 0", Err(()));
        check("[models.m]\ncontext_length = 0", Err(()));
        check("compact_threshold = 0", Err(()));
        check("compact_threshold = 101", Err(()));
        assert!(parse_file("[models.m]\nwindow = 3").is_err());
    }

    #[test]
    fn the_environment_snapshot_debug_prints_names_not_values() {
        // Issue 12: the snapshot holds every variable, keys included; `Debug` showed them.
        let env = Env::from_pairs(&[("OPENAI_API_KEY", "sk-env-canary"), ("OLLM_MODEL", "m")]);
        let shown = format!("{env:?}");
        assert_eq!(shown, r#"{"OLLM_MODEL", "OPENAI_API_KEY"}"#);
    }

    #[test]
    fn credentials_in_the_host_are_kept_for_connecting_and_never_shown() {
        // Issue 12: `http://user:key@host` was printed by `config show` and in errors.
        let env = Env::default();
        let host = "http://me:sk-host-canary@127.0.0.1:8080";
        let s = settle(&flags(Some("openai"), Some(host)), &env, "c".into(), None).unwrap();
        assert_eq!(
            s.provider.address.expose(),
            "http://me:sk-host-canary@127.0.0.1:8080/v1"
        );
        assert_eq!(s.provider.base_url, "http://***@127.0.0.1:8080/v1");
        assert!(!render_settings(&s).contains("sk-host-canary"));
        assert!(!format!("{s:?}").contains("sk-host-canary"));
        let bad = settle(
            &flags(Some("openai"), Some("ftp://me:sk-host-canary@h")),
            &env,
            "c".into(),
            None,
        )
        .unwrap_err();
        assert!(
            !format!("{bad} {bad:?}").contains("sk-host-canary"),
            "{bad}"
        );
    }

    #[test]
    fn unknown_provider_and_bad_file_are_usage_errors() {
        let err = settle(
            &flags(Some("nope"), None),
            &Env::default(),
            "c".into(),
            None,
        )
        .unwrap_err();
        assert!(matches!(err, CliError::Usage(_)));
        assert!(parse_file("[providers.x]\nkind = \"grpc\"").is_err());
        assert!(parse_file("bogus_key = 1").is_err());
    }

    /// The tables that flatten the run defaults leave unknown keys to them: every table
    /// still refuses one, names it, and still reads its own and the sampling keys.
    #[test]
    fn every_table_refuses_an_unknown_key_and_reads_the_known_ones() {
        let check = |text: &str, unknown: Option<&str>| {
            let got = parse_file(text);
            match unknown {
                Some(key) => {
                    let err = got.expect_err(text).to_string();
                    assert!(err.contains(&format!("unknown field `{key}`")), "{err}");
                }
                None => assert!(got.is_ok(), "{text}: {got:?}"),
            }
        };
        let provider = "[providers.p]\nkind = \"openai\"\n";
        check("bogus = 1", Some("bogus"));
        check(
            "temperature = 0.5\ncontext_length = 9\ntop_k = 4\nsystem = \"s\"",
            None,
        );
        check("[models.m]\nbogus = 1", Some("bogus"));
        check("[models.m]\ncontext_length = 9\nseed = 3\nstop = []", None);
        check(&format!("{provider}bogus = 1"), Some("bogus"));
        check(
            &format!("{provider}base_url = \"http://h\"\ntop_p = 0.5"),
            None,
        );
        check("[tools]\nbogus = 1", Some("bogus"));
        check("[coach]\nbogus = 1", Some("bogus"));
        check("[coach]\noff = [\"act-nudge\"]", None);
        let file = parse_file(&format!(
            "top_k = 1\n[models.m]\ntop_k = 2\n{provider}top_k = 3"
        ))
        .unwrap();
        let top_k = |run: &RunDefaults| run.sampling.top_k;
        assert_eq!(top_k(&file.run), Some(1));
        assert_eq!(top_k(&file.models["m"].run), Some(2));
        assert_eq!(top_k(&file.providers["p"].run), Some(3));
    }

    #[test]
    fn host_forms() {
        use ProviderKind::*;
        let check = |raw, kind, want: Option<&str>| {
            assert_eq!(normalise_host(raw, kind).as_deref(), want, "{raw}")
        };
        check("127.0.0.1", Ollama, Some("http://127.0.0.1:11434"));
        check("http://h:1/", Ollama, Some("http://h:1"));
        check("https://h", Ollama, Some("https://h"));
        check("h:8080", Openai, Some("http://h:8080/v1"));
        check("http://h:8080/api/v1", Openai, Some("http://h:8080/api/v1"));
        check("", Ollama, None);
        check("ftp://h", Ollama, None);
        // IPv6, which the CLI's own parser could not read (issue 8).
        check("[::1]:11434", Ollama, Some("http://[::1]:11434"));
        check("[::1]:8080", Openai, Some("http://[::1]:8080/v1"));
        check("0.0.0.0", Ollama, Some("http://127.0.0.1:11434"));
    }

    /// `[coach] on` and `[models."NAME".coach] on` name rules off by default, checked as
    /// `off` is; `config show` prints them back in a form the file takes.
    #[test]
    fn the_coach_tables_turn_rules_on_by_name() {
        let settled = |text: &str| {
            let file = parse_file(text).unwrap();
            settle(&flags(None, None), &Env::default(), "c".into(), Some(file))
        };
        let text = "[coach]\non = [\"key-hint\"]\n\
                    [models.\"gpt\".coach]\non = [\"name-repair\"]\noff = [\"act-nudge\"]\n";
        let s = settled(text).unwrap();
        assert_eq!(s.coach_on, [Rule::KeyHint].into());
        assert_eq!(
            s.model_coach_on.get("gpt"),
            Some(&[Rule::NameRepair].into())
        );
        assert_eq!(s.model_coach_off.get("gpt"), Some(&[Rule::ActNudge].into()));
        let shown = render_settings(&s);
        assert!(shown.contains("on = [\"key-hint\"]"), "{shown}");
        let table = "coach = { off = [\"act-nudge\"], on = [\"name-repair\"] }";
        assert!(shown.contains(table), "{shown}");
        let again = shown.split("\n[models.").nth(1).expect("the model's table");
        let again = settled(&format!("[models.{again}")).unwrap();
        assert_eq!(again.model_coach_on, s.model_coach_on, "shown reads back");
        let Err(CliError::Usage(message)) = settled("[coach]\non = [\"nope\"]") else {
            panic!("an unknown rule was accepted");
        };
        assert!(message.contains("[coach] on"), "{message}");
    }

    /// `[coach] off` names rules (or `all`); an unknown name is a usage error that lists
    /// the known ones, and `config show` prints what is off.
    #[test]
    fn the_coach_table_turns_rules_off_by_name() {
        let settled = |text: &str| {
            let file = parse_file(text).unwrap();
            settle(&flags(None, None), &Env::default(), "c".into(), Some(file))
        };
        let s = settled("[coach]\noff = [\"act-nudge\", \"greedy-tool-turns\"]").unwrap();
        let expected: BTreeSet<Rule> = [Rule::ActNudge, Rule::GreedyToolTurns].into();
        assert_eq!(s.coach_off, expected);
        let shown = render_settings(&s);
        assert!(
            shown.contains("[coach]\noff = [\"act-nudge\", \"greedy-tool-turns\"]"),
            "{shown}"
        );
        let all = settled("[coach]\noff = [\"all\"]").unwrap();
        assert_eq!(all.coach_off.len(), Rule::ALL.len());
        let Err(CliError::Usage(message)) = settled("[coach]\noff = [\"nudge\"]") else {
            panic!("an unknown rule was accepted");
        };
        for rule in Rule::ALL {
            assert!(message.contains(rule.name()), "{message}");
        }
        assert!(settled("").unwrap().coach_off.is_empty());
    }

    /// `[models."NAME".coach] off` turns rules off for that model only, is checked as
    /// `[coach] off` is, and `config show` prints it back in a form the file takes.
    #[test]
    fn a_models_coach_table_turns_rules_off_for_that_model() {
        let settled = |text: &str| {
            let file = parse_file(text).unwrap();
            settle(&flags(None, None), &Env::default(), "c".into(), Some(file))
        };
        let text = "[models.\"qwen2.5-coder:1.5b\"]\ntemperature = 0.2\n\
                    [models.\"qwen2.5-coder:1.5b\".coach]\noff = [\"tools-context\"]\n";
        let s = settled(text).unwrap();
        assert!(s.coach_off.is_empty(), "no rule off for every model");
        let off = s.model_coach_off.get("qwen2.5-coder:1.5b");
        assert_eq!(off, Some(&[Rule::ToolsContext].into()));
        let shown = render_settings(&s);
        assert!(
            shown.contains("coach = { off = [\"tools-context\"] }"),
            "{shown}"
        );
        let again = shown.split("\n[models.").nth(1).expect("the model's table");
        let again = settled(&format!("[models.{again}")).unwrap();
        assert_eq!(again.model_coach_off, s.model_coach_off, "shown reads back");
        let Err(CliError::Usage(message)) = settled("[models.m.coach]\noff = [\"nudge\"]") else {
            panic!("an unknown rule was accepted");
        };
        assert!(message.contains("[models.\"m\".coach]"), "{message}");
    }
}
