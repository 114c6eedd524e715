//! The [`ChatClient`]: what a conversation keeps between runs (settings, tools, history,
//! what the server said about each model) and the entry point of a run,
//! [`ChatClient::chat`].

use std::sync::Arc;

use ollm_types::{Message, ModelInfo};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::compact::compact_now;
use super::config::{ChatConfig, ChatOptions};
use super::reply::ChatReply;
use super::run::{ChatRun, supervise};
use super::shared::{Shared, lock};
use crate::coach::Route;
use crate::context::{Compaction, Compactor, Window, settle_window};
use crate::strategy::Learned;
use crate::{CoreError, History, ProviderAdapter, ToolRegistry};

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
        ChatClient {
            shared: Arc::new(Shared::new(provider, tools, config)),
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

    /// The `tool-or-none` choice of this client's latest run that made one or was given
    /// one ([`ChatOptions::route`]); `None` before any.
    pub fn route(&self) -> Option<Route> {
        lock(&self.shared.route).clone()
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
        self.shared.model_info(&model).await
    }

    /// Replaces what writes compaction's summaries (default:
    /// [`ModelSummary`](crate::context::ModelSummary), the same model with a fixed prompt).
    pub fn set_compactor(&self, compactor: Arc<dyn Compactor>) {
        *lock(&self.shared.compactor) = compactor;
    }

    /// The context window a run with the configured model uses, and where it came from
    /// (the per-run overrides of [`ChatOptions`] aside).
    pub async fn context_window(&self) -> Window {
        let config = self.config();
        let info = self.shared.model_info(&config.model).await;
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
        self.start(Some(prompt.into()), options)
    }

    /// Runs turns on the conversation as it is, without a new prompt: to carry on after
    /// the caller answered the calls a [`CallMode::HandBack`](crate::CallMode::HandBack) run handed it
    /// ([`Self::extend_history`] with one `Message::tool_result` per call), or after
    /// loading a conversation that ends in a user message. Otherwise as [`Self::chat`].
    pub fn resume(&self, options: ChatOptions) -> ChatRun {
        self.start(None, options)
    }

    /// [`Self::chat`] to the end, folded into one [`ChatReply`]: the answer, the calls
    /// and their results, usage, warnings, the error if any and why the run ended.
    pub async fn reply(&self, prompt: impl Into<String>, options: ChatOptions) -> ChatReply {
        ChatReply::collect(self.chat(prompt, options)).await
    }

    /// A run with `prompt` (none: resume the history).
    fn start(&self, prompt: Option<String>, options: ChatOptions) -> ChatRun {
        let cancel = CancellationToken::new();
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::clone(&self.shared);
        let token = cancel.clone();
        let start = move |handle: &tokio::runtime::Handle| {
            handle.spawn(supervise(shared, prompt, options, token, tx));
        };
        ChatRun::start(rx, cancel, Box::new(start))
    }
}
