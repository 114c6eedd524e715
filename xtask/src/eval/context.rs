//! What every run of an eval shares: the context a column's runner gets and the per-run
//! timeout. A leaf, so that the runners (`ollm.rs`, `plain.rs`) and the scheduler
//! (`mod.rs`) import it without importing each other.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::Value;

/// How long one run may take before it is killed and counted as failed. On the shared
/// 2-core machine a first request with ~800 tokens of system prompt and tool schemas
/// took over 2 minutes of prompt processing alone under load.
pub(super) const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// What every run shares.
pub(super) struct RunContext {
    pub(super) ollm: PathBuf,
    pub(super) base_url: String,
    pub(super) model: &'static str,
    pub(super) files: BTreeMap<String, String>,
    /// The temperature sent, if any.
    pub(super) temperature: Option<f64>,
    pub(super) max_turns: u32,
    /// The plain loop's `tools`.
    pub(super) tools: Value,
    /// Where each ollm run's `stream-json` output is kept, as `TASK.COLUMN.REPEAT.jsonl`.
    pub(super) traces: PathBuf,
    /// After this, no new run starts.
    pub(super) deadline: Option<Instant>,
}
