//! Providers that replay scripted event sequences, one script per turn, and record every
//! request they receive.
//!
//! ```text
//! let provider = MockProvider::builder()
//!     .turn(vec![ev::call("c1", "add", json!({"a": 1})), ev::finish()])
//!     .turn(vec![ev::text("3"), ev::finish()])
//!     .build();
//! ```
//!
//! When the scripts run out, the provider repeats the script given to
//! [`MockProviderBuilder::then_forever`], or answers with an error event.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ollm_core::{ProviderAdapter, ProviderStream};
use ollm_types::{
    Capability, FinishReason, ModelInfo, ProviderError, ProviderErrorKind, ProviderEvent,
    ProviderRequest, ToolCall, Usage,
};
use serde_json::Value;

/// One step of a scripted reply.
#[derive(Debug, Clone)]
pub enum Step {
    /// Yield this event.
    Event(ProviderEvent),
    /// Wait this long first (on Tokio's clock, so paused-clock tests stay instant).
    Delay(Duration),
    /// Never yield anything again (a server that hangs).
    Hang,
    /// Panic while the stream is polled.
    Panic,
}

impl From<ProviderEvent> for Step {
    fn from(e: ProviderEvent) -> Self {
        Step::Event(e)
    }
}

/// Short constructors for provider events.
pub mod ev {
    use super::*;

    /// A text delta.
    pub fn text(s: impl Into<String>) -> ProviderEvent {
        ProviderEvent::TextDelta { text: s.into() }
    }

    /// A thinking delta.
    pub fn thinking(s: impl Into<String>) -> ProviderEvent {
        ProviderEvent::ThinkingDelta { text: s.into() }
    }

    /// A tool call; `args` must be a JSON object (anything else becomes `{}`).
    pub fn call(id: impl Into<String>, name: impl Into<String>, args: Value) -> ProviderEvent {
        let id = id.into();
        let name = name.into();
        let call = ToolCall::new(id.clone(), name.clone(), args).unwrap_or(ToolCall {
            id,
            name,
            arguments: serde_json::Map::new(),
        });
        ProviderEvent::ToolCall { call }
    }

    /// Usage with prompt and completion counts.
    pub fn usage(prompt: u32, completion: u32) -> ProviderEvent {
        ProviderEvent::Usage {
            usage: Usage {
                prompt_tokens: Some(prompt),
                completion_tokens: Some(completion),
                ..Usage::default()
            },
        }
    }

    /// A normal finish.
    pub fn finish() -> ProviderEvent {
        ProviderEvent::Finish {
            reason: FinishReason::Stop,
        }
    }

    /// A finish with `reason`.
    pub fn finish_with(reason: FinishReason) -> ProviderEvent {
        ProviderEvent::Finish { reason }
    }

    /// An error event.
    pub fn error(kind: ProviderErrorKind, message: impl Into<String>) -> ProviderEvent {
        ProviderEvent::Error {
            error: ProviderError::new(kind, message),
        }
    }
}

/// How the mock counts tokens.
#[derive(Clone)]
enum Counter {
    /// `count_tokens` answers `Ok(None)`.
    None,
    /// `count_tokens` answers with this function of the text.
    With(Arc<dyn Fn(&str) -> usize + Send + Sync>),
    /// `count_tokens` fails.
    Fails,
}

/// How the mock counts whole requests (`count_request`).
type RequestCounter = Arc<dyn Fn(&ProviderRequest) -> usize + Send + Sync>;

/// A scripted provider (see the module docs).
pub struct MockProvider {
    name: String,
    turns: Mutex<VecDeque<Vec<Step>>>,
    forever: Option<Vec<Step>>,
    requests: Mutex<Vec<ProviderRequest>>,
    counted: Mutex<Vec<String>>,
    counter: Counter,
    whole: Option<RequestCounter>,
    model_info: Option<ModelInfo>,
    responder: Option<Responder>,
}

/// Answers a request with the events of its reply.
type Responder = Arc<dyn Fn(&ProviderRequest) -> Vec<ProviderEvent> + Send + Sync>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl std::fmt::Debug for MockProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockProvider")
            .field("name", &self.name)
            .finish()
    }
}

impl MockProvider {
    /// A builder.
    pub fn builder() -> MockProviderBuilder {
        MockProviderBuilder::default()
    }

    /// A provider that answers every request with `text`.
    pub fn answering(text: &str) -> Arc<Self> {
        Self::builder()
            .then_forever(vec![ev::text(text), ev::finish()])
            .build()
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<ProviderRequest> {
        lock(&self.requests).clone()
    }

    /// The number of requests received.
    pub fn request_count(&self) -> usize {
        lock(&self.requests).len()
    }

    /// The texts `count_tokens` was asked to count.
    pub fn counted_texts(&self) -> Vec<String> {
        lock(&self.counted).clone()
    }

    /// Scripts not used yet.
    pub fn remaining_turns(&self) -> usize {
        lock(&self.turns).len()
    }
}

#[async_trait]
impl ProviderAdapter for MockProvider {
    fn name(&self) -> &str {
        &self.name
    }

    fn chat(&self, request: ProviderRequest) -> ProviderStream {
        let answered = self
            .responder
            .as_ref()
            .map(|f| f(&request).into_iter().map(Step::Event).collect());
        lock(&self.requests).push(request);
        let script = answered
            .or_else(|| lock(&self.turns).pop_front())
            .or_else(|| self.forever.clone());
        let script = script.unwrap_or_else(|| {
            vec![Step::Event(ev::error(
                ProviderErrorKind::Other,
                "the mock provider has no scripted turn left",
            ))]
        });
        Box::pin(futures::stream::unfold(
            VecDeque::from(script),
            |mut steps| async move {
                loop {
                    match steps.pop_front()? {
                        Step::Event(e) => return Some((e, steps)),
                        Step::Delay(d) => tokio::time::sleep(d).await,
                        Step::Hang => futures::future::pending::<()>().await,
                        Step::Panic => panic!("scripted provider panic"),
                    }
                }
            },
        ))
    }

    async fn count_tokens(&self, _model: &str, text: &str) -> Result<Option<usize>, ProviderError> {
        lock(&self.counted).push(text.to_owned());
        match &self.counter {
            Counter::None => Ok(None),
            Counter::With(f) => Ok(Some(f(text))),
            Counter::Fails => Err(ProviderError::new(
                ProviderErrorKind::Server,
                "tokenizer failed",
            )),
        }
    }

    async fn count_request(
        &self,
        request: &ProviderRequest,
    ) -> Result<Option<usize>, ProviderError> {
        Ok(self.whole.as_ref().map(|f| f(request)))
    }

    async fn show_model(&self, model: &str) -> Result<ModelInfo, ProviderError> {
        match &self.model_info {
            Some(info) => Ok(ModelInfo {
                name: model.to_owned(),
                ..info.clone()
            }),
            None => Err(ollm_core::provider::unsupported(
                &self.name,
                "showing a model",
            )),
        }
    }
}

/// Builds a [`MockProvider`].
#[derive(Default)]
pub struct MockProviderBuilder {
    name: Option<String>,
    turns: VecDeque<Vec<Step>>,
    forever: Option<Vec<Step>>,
    counter: Option<Counter>,
    whole: Option<RequestCounter>,
    model_info: Option<ModelInfo>,
    responder: Option<Responder>,
}

impl MockProviderBuilder {
    /// Answers every request with `f(request)` (scripts are then unused): for long
    /// conversations whose replies depend on what was asked.
    pub fn respond_with(
        mut self,
        f: impl Fn(&ProviderRequest) -> Vec<ProviderEvent> + Send + Sync + 'static,
    ) -> Self {
        self.responder = Some(Arc::new(f));
        self
    }

    /// Makes `show_model` report this window (the one the server runs with).
    pub fn window(mut self, n: u32) -> Self {
        let mut info = self.model_info.unwrap_or_default();
        info.window = Some(n);
        self.model_info = Some(info);
        self
    }

    /// Names the provider (default `mock`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Adds the script of the next turn.
    pub fn turn(mut self, events: Vec<ProviderEvent>) -> Self {
        self.turns
            .push_back(events.into_iter().map(Step::Event).collect());
        self
    }

    /// Adds the script of the next turn, with delays, hangs or panics.
    pub fn turn_steps(mut self, steps: Vec<Step>) -> Self {
        self.turns.push_back(steps);
        self
    }

    /// Adds the script of the next turn, waiting `delay` before each event.
    pub fn turn_with_delay(mut self, events: Vec<ProviderEvent>, delay: Duration) -> Self {
        self.turns.push_back(
            events
                .into_iter()
                .flat_map(|e| [Step::Delay(delay), Step::Event(e)])
                .collect(),
        );
        self
    }

    /// The script to repeat once the others are used up.
    pub fn then_forever(mut self, events: Vec<ProviderEvent>) -> Self {
        self.forever = Some(events.into_iter().map(Step::Event).collect());
        self
    }

    /// Counts tokens with `f`.
    pub fn count_tokens_with(mut self, f: impl Fn(&str) -> usize + Send + Sync + 'static) -> Self {
        self.counter = Some(Counter::With(Arc::new(f)));
        self
    }

    /// Counts whole requests with `f` (`count_request`, as the Messages API's
    /// `count_tokens`); without this it answers `Ok(None)`.
    pub fn count_requests_with(
        mut self,
        f: impl Fn(&ProviderRequest) -> usize + Send + Sync + 'static,
    ) -> Self {
        self.whole = Some(Arc::new(f));
        self
    }

    /// Makes `count_tokens` fail.
    pub fn count_tokens_fails(mut self) -> Self {
        self.counter = Some(Counter::Fails);
        self
    }

    /// Makes `show_model` report these capabilities (without this it is unsupported).
    pub fn capabilities(mut self, caps: Vec<Capability>) -> Self {
        let mut info = self.model_info.unwrap_or_default();
        info.capabilities = caps;
        self.model_info = Some(info);
        self
    }

    /// Makes `show_model` report this context length.
    pub fn context_length(mut self, n: u32) -> Self {
        let mut info = self.model_info.unwrap_or_default();
        info.context_length = Some(n);
        self.model_info = Some(info);
        self
    }

    /// The provider.
    pub fn build(self) -> Arc<MockProvider> {
        Arc::new(MockProvider {
            name: self.name.unwrap_or_else(|| "mock".to_owned()),
            turns: Mutex::new(self.turns),
            forever: self.forever,
            requests: Mutex::new(Vec::new()),
            counted: Mutex::new(Vec::new()),
            counter: self.counter.unwrap_or(Counter::None),
            whole: self.whole,
            model_info: self.model_info,
            responder: self.responder,
        })
    }
}

/// Checks that a provider's stream follows the [`ProviderAdapter`] contract: exactly one
/// terminal event (`Finish` or `Error`), and it is the last; every tool call has a
/// non-empty id, unique within the reply, and a non-empty name. Adapters' tests can run
/// every fixture through it. Returns what was wrong.
pub fn check_compliance(events: &[ProviderEvent]) -> Result<(), String> {
    let terminal = |e: &ProviderEvent| {
        matches!(
            e,
            ProviderEvent::Finish { .. } | ProviderEvent::Error { .. }
        )
    };
    let count = events.iter().filter(|e| terminal(e)).count();
    if count != 1 {
        return Err(format!("expected one Finish or Error, found {count}"));
    }
    if !events.last().is_some_and(terminal) {
        return Err("the Finish or Error is not the last event".into());
    }
    let mut ids = std::collections::HashSet::new();
    for e in events {
        if let ProviderEvent::ToolCall { call } = e {
            if call.id.is_empty() || call.name.is_empty() {
                return Err(format!("a tool call without id or name: {call:?}"));
            }
            if !ids.insert(call.id.clone()) {
                return Err(format!("tool call id {:?} used twice", call.id));
            }
        }
    }
    Ok(())
}
