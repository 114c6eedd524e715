//! Tools that record what ran, with which arguments and when, with a scripted result.
//!
//! ```text
//! let add = RecordingTool::new("add").returns(json!("3")).delay(Duration::from_millis(5));
//! let reg = registry(vec![add.clone()]);
//! // ... run a chat ...
//! assert_eq!(add.calls()[0].arguments["a"], 1);
//! ```
//!
//! A clone shares the recording, so a test keeps one handle and gives the registry another.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ollm_core::{Tool, ToolError, ToolRegistry};
use ollm_types::ToolSchema;
use serde_json::{Map, Value, json};
use tokio::sync::Barrier;
use tokio::time::Instant;

/// One recorded call.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedCall {
    /// The arguments it got.
    pub arguments: Map<String, Value>,
    /// When it started (Tokio's clock).
    pub started: Instant,
    /// When it finished; `None` when it was stopped before.
    pub ended: Option<Instant>,
}

/// What the tool does when called.
#[derive(Debug, Clone)]
enum Behaviour {
    Return(Value),
    EchoArguments,
    Fail(String),
    Hang,
    Panic,
}

#[derive(Debug, Default)]
struct Record {
    calls: Mutex<Vec<RecordedCall>>,
    active: AtomicUsize,
    max_active: AtomicUsize,
}

/// A scripted tool that records its calls (see the module docs).
#[derive(Debug, Clone)]
pub struct RecordingTool {
    schema: ToolSchema,
    behaviour: Behaviour,
    delay: Option<Duration>,
    barrier: Option<Arc<Barrier>>,
    record: Arc<Record>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lowers the active count and stamps the end when the call completes normally.
struct ActiveGuard {
    record: Arc<Record>,
    index: usize,
    finished: bool,
}

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.record.active.fetch_sub(1, Ordering::SeqCst);
        if self.finished {
            if let Some(c) = lock(&self.record.calls).get_mut(self.index) {
                c.ended = Some(Instant::now());
            }
        }
    }
}

impl RecordingTool {
    /// A tool named `name` taking any object and answering `"ok"`.
    pub fn new(name: impl Into<String>) -> Self {
        let name = name.into();
        RecordingTool {
            schema: ToolSchema::new(
                name.clone(),
                format!("The {name} tool."),
                json!({"type": "object"}),
            ),
            behaviour: Behaviour::Return(json!("ok")),
            delay: None,
            barrier: None,
            record: Arc::default(),
        }
    }

    /// Sets the description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.schema.description = text.into();
        self
    }

    /// Sets the parameter schema.
    pub fn schema(mut self, parameters: Value) -> Self {
        self.schema.parameters = parameters;
        self
    }

    /// Answers with `value`.
    pub fn returns(mut self, value: Value) -> Self {
        self.behaviour = Behaviour::Return(value);
        self
    }

    /// Answers with its arguments as JSON.
    pub fn echoes(mut self) -> Self {
        self.behaviour = Behaviour::EchoArguments;
        self
    }

    /// Fails with `message`.
    pub fn fails(mut self, message: impl Into<String>) -> Self {
        self.behaviour = Behaviour::Fail(message.into());
        self
    }

    /// Never finishes.
    pub fn hangs(mut self) -> Self {
        self.behaviour = Behaviour::Hang;
        self
    }

    /// Panics.
    pub fn panics(mut self) -> Self {
        self.behaviour = Behaviour::Panic;
        self
    }

    /// Waits this long (Tokio's clock) before answering.
    pub fn delay(mut self, d: Duration) -> Self {
        self.delay = Some(d);
        self
    }

    /// Waits at `barrier` before answering, so a test can prove calls overlap: with `n`
    /// parties the calls only finish when `n` of them run at once.
    pub fn barrier(mut self, barrier: Arc<Barrier>) -> Self {
        self.barrier = Some(barrier);
        self
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.schema.name
    }

    /// Every call so far, in start order.
    pub fn calls(&self) -> Vec<RecordedCall> {
        lock(&self.record.calls).clone()
    }

    /// How many calls started.
    pub fn call_count(&self) -> usize {
        lock(&self.record.calls).len()
    }

    /// How many calls finished normally.
    pub fn finished_count(&self) -> usize {
        lock(&self.record.calls)
            .iter()
            .filter(|c| c.ended.is_some())
            .count()
    }

    /// The most calls that ran at the same moment.
    pub fn max_concurrent(&self) -> usize {
        self.record.max_active.load(Ordering::SeqCst)
    }

    /// Calls running now.
    pub fn active(&self) -> usize {
        self.record.active.load(Ordering::SeqCst)
    }

    /// This tool as a registry entry.
    pub fn arc(&self) -> Arc<dyn Tool> {
        Arc::new(self.clone())
    }
}

#[async_trait]
impl Tool for RecordingTool {
    fn schema(&self) -> ToolSchema {
        self.schema.clone()
    }

    async fn execute(&self, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        let index = {
            let mut calls = lock(&self.record.calls);
            calls.push(RecordedCall {
                arguments: arguments.clone(),
                started: Instant::now(),
                ended: None,
            });
            calls.len() - 1
        };
        let now = self.record.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.record.max_active.fetch_max(now, Ordering::SeqCst);
        let mut guard = ActiveGuard {
            record: Arc::clone(&self.record),
            index,
            finished: false,
        };
        if let Some(b) = &self.barrier {
            b.wait().await;
        }
        if let Some(d) = self.delay {
            tokio::time::sleep(d).await;
        }
        let result = match &self.behaviour {
            Behaviour::Return(v) => Ok(v.clone()),
            Behaviour::EchoArguments => Ok(Value::Object(arguments)),
            Behaviour::Fail(m) => Err(ToolError::Failed(m.clone())),
            Behaviour::Hang => futures::future::pending().await,
            Behaviour::Panic => panic!("scripted tool panic"),
        };
        guard.finished = true;
        result
    }
}

/// A registry of these tools (panics on a duplicate name or bad schema: test setup only).
pub fn registry(tools: impl IntoIterator<Item = RecordingTool>) -> ToolRegistry {
    let mut reg = ToolRegistry::new();
    for t in tools {
        if let Err(e) = reg.register(t.arc()) {
            panic!("test registry: {e}");
        }
    }
    reg
}
