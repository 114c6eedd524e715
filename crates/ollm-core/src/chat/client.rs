//! The [`ChatClient`]: what a conversation keeps between runs (settings, tools, history,
//! what the server said about each model) and the entry point of a run,
//! [`ChatClient::chat`].

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::FutureExt;
use ollm_types::{Message, ModelInfo, ProviderErrorKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::calibrate::Calibration;
use super::compact::compact_now;
use super::run::{ChatRun, supervise};
use super::{ChatConfig, ChatOptions};
use crate::context::{Compaction, Compactor, ModelSummary, Window, settle_window};
use crate::strategy::Learned;
use crate::{CoreError, History, ProviderAdapter, ToolRegistry};

/// What a run shares with the client.
pub(super) struct Shared {
    pub(super) provider: Arc<dyn ProviderAdapter>,
    pub(super) tools: Mutex<Arc<ToolRegistry>>,
    pub(super) config: Mutex<ChatConfig>,
    pub(super) history: Mutex<History>,
    model_info: Mutex<HashMap<String, Option<ModelInfo>>>,
    /// What runs learned about each model's tool calling (`Auto` goes by it).
    pub(super) learned: Mutex<HashMap<String, Learned>>,
    /// Models the server refused `think` for.
    pub(super) no_think: Mutex<HashSet<String>>,
    pub(super) run_lock: tokio::sync::Mutex<()>,
    /// Writes the summaries compaction needs.
    pub(super) compactor: Mutex<Arc<dyn Compactor>>,
    /// What the server's prompt counts taught about the template's overhead.
    pub(super) calibration: Mutex<Calibration>,
    next_id: AtomicU64,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    /// A fresh call id, for calls that came without a usable one.
    pub(super) fn mint_id(&self) -> String {
        format!("call_{}", self.next_id.fetch_add(1, Ordering::Relaxed))
    }
}

/// A conversation with one model through one provider, with tools.
///
/// The client keeps the history; [`ChatClient::chat`] appends to it. Cloning a client
/// shares the conversation.
#[derive(Clone)]
pub struct ChatClient {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ChatClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatClient")
            .field("provider", &self.shared.provider.name())
            .field("config", &*lock(&self.shared.config))
            .finish()
    }
}

impl ChatClient {
    /// A client; the history starts with the configured system prompt.
    pub fn new(
        provider: Arc<dyn ProviderAdapter>,
        tools: ToolRegistry,
        config: ChatConfig,
    ) -> Self {
        let mut history = History::new();
        history.set_system(config.system.clone());
        ChatClient {
            shared: Arc::new(Shared {
                provider,
                tools: Mutex::new(Arc::new(tools)),
                config: Mutex::new(config),
                history: Mutex::new(history),
                model_info: Mutex::new(HashMap::new()),
                learned: Mutex::new(HashMap::new()),
                no_think: Mutex::new(HashSet::new()),
                run_lock: tokio::sync::Mutex::new(()),
                compactor: Mutex::new(Arc::new(ModelSummary)),
                calibration: Mutex::new(Calibration::default()),
                next_id: AtomicU64::new(1),
            }),
        }
    }

    /// The provider.
    pub fn provider(&self) -> Arc<dyn ProviderAdapter> {
        Arc::clone(&self.shared.provider)
    }

    /// A copy of the settings.
    pub fn config(&self) -> ChatConfig {
        lock(&self.shared.config).clone()
    }

    /// Replaces the settings for later runs (the history's system prompt follows
    /// `config.system`).
    pub fn set_config(&self, config: ChatConfig) {
        lock(&self.shared.history).set_system(config.system.clone());
        *lock(&self.shared.config) = config;
    }

    /// Switches to another model for later runs.
    pub fn set_model(&self, model: impl Into<String>) {
        lock(&self.shared.config).model = model.into();
    }

    /// Sets or removes the system prompt.
    pub fn set_system(&self, system: Option<String>) {
        lock(&self.shared.history).set_system(system.clone());
        lock(&self.shared.config).system = system;
    }

    /// The tools offered.
    pub fn tools(&self) -> Arc<ToolRegistry> {
        Arc::clone(&lock(&self.shared.tools))
    }

    /// Replaces the tools for later runs.
    pub fn set_tools(&self, tools: ToolRegistry) {
        *lock(&self.shared.tools) = Arc::new(tools);
    }

    /// A snapshot of the conversation.
    pub fn history(&self) -> History {
        lock(&self.shared.history).clone()
    }

    /// Replaces the conversation (for example one read back with [`History::from_json`]).
    pub fn set_history(&self, history: History) {
        *lock(&self.shared.history) = history;
    }

    /// The same client with `messages` appended to its conversation (to resume a saved
    /// session; a system message among them replaces the system prompt).
    pub fn with_history(self, messages: impl IntoIterator<Item = Message>) -> Self {
        self.extend_history(messages);
        self
    }

    /// Appends `messages` to the conversation (see [`History::push`]).
    pub fn extend_history(&self, messages: impl IntoIterator<Item = Message>) {
        lock(&self.shared.history).extend(messages);
    }

    /// Forgets the messages but keeps the system prompt.
    pub fn clear_history(&self) {
        lock(&self.shared.history).clear();
    }

    /// What this client's runs learned about `model`'s tool calling.
    pub fn learned(&self, model: &str) -> Learned {
        lock(&self.shared.learned)
            .get(model)
            .copied()
            .unwrap_or_default()
    }

    /// Sets what is known about `model`'s tool calling (for example as a program saved
    /// it from an earlier session), which [`crate::ToolMode::Auto`] goes by.
    pub fn remember(&self, model: impl Into<String>, learned: Learned) {
        lock(&self.shared.learned).insert(model.into(), learned);
    }

    /// What the server reports about the configured model (asked once, then cached);
    /// `None` when it cannot say.
    pub async fn model_info(&self) -> Option<ModelInfo> {
        let model = lock(&self.shared.config).model.clone();
        model_info(&self.shared, &model).await
    }

    /// Replaces what writes compaction's summaries (default: [`ModelSummary`], the same
    /// model with a fixed prompt).
    pub fn set_compactor(&self, compactor: Arc<dyn Compactor>) {
        *lock(&self.shared.compactor) = compactor;
    }

    /// The context window a run with the configured model uses, and where it came from
    /// (the per-run overrides of [`ChatOptions`] aside).
    pub async fn context_window(&self) -> Window {
        let config = self.config();
        let info = model_info(&self.shared, &config.model).await;
        settle_window(
            &config.context_limits,
            &config.model,
            config.options.context_length,
            info.as_ref(),
        )
    }

    /// Compacts the conversation now (`/compact`): the turns between the first user
    /// message and the recent ones are replaced by a summary the model writes. Waits for
    /// a running chat to end. Nothing to summarise is an empty [`Compaction`]; a failed
    /// summary is an error and leaves the history as it was.
    pub async fn compact(&self) -> Result<Compaction, CoreError> {
        let _guard = self.shared.run_lock.lock().await;
        let config = self.config();
        let window = self.context_window().await;
        compact_now(
            &self.shared,
            &config.model,
            window.tokens,
            &config.compaction,
        )
        .await
    }

    /// Sends `prompt` and runs turns until the model answers without tool calls, the turn
    /// limit is reached, an error occurs or the run is cancelled.
    ///
    /// Inside a Tokio runtime the run starts at once; otherwise it starts when the stream
    /// is first polled (and ends with an error event if that is not inside a runtime
    /// either).
    pub fn chat(&self, prompt: impl Into<String>, options: ChatOptions) -> ChatRun {
        let cancel = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::clone(&self.shared);
        let prompt = prompt.into();
        let token = cancel.clone();
        let start = move |handle: &tokio::runtime::Handle| {
            handle.spawn(supervise(shared, prompt, options, token, tx));
        };
        ChatRun::start(rx, cancel, Box::new(start))
    }
}

/// What the server reports about `model`, cached per client (see the module docs of
/// [`crate::chat`] for what is cached).
pub(super) async fn model_info(shared: &Shared, model: &str) -> Option<ModelInfo> {
    if let Some(cached) = lock(&shared.model_info).get(model) {
        return cached.clone();
    }
    let asked = std::panic::AssertUnwindSafe(shared.provider.show_model(model))
        .catch_unwind()
        .await;
    let info = match asked {
        Ok(Ok(info)) => Some(info),
        // A passing failure (server down, busy) is not remembered: the next run asks again.
        Ok(Err(e)) if e.kind != ProviderErrorKind::Unsupported => return None,
        _ => None,
    };
    lock(&shared.model_info).insert(model.to_owned(), info.clone());
    info
}
