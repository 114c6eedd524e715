//! Test doubles shared by the unit tests: a prompter that answers from a script and
//! records what it was asked and told.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::approval::{Answer, Prompter, Request};

/// Answers from a script (then denies) and records the questions and warnings.
pub(crate) struct Scripted {
    answers: Mutex<Vec<Answer>>,
    pub(crate) asked: AtomicUsize,
    pub(crate) requests: Mutex<Vec<Request>>,
    pub(crate) warnings: Mutex<Vec<String>>,
}

impl Scripted {
    pub(crate) fn new(answers: &[Answer]) -> Arc<Self> {
        Arc::new(Scripted {
            answers: Mutex::new(answers.iter().rev().copied().collect()),
            asked: AtomicUsize::new(0),
            requests: Mutex::new(Vec::new()),
            warnings: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn asked(&self) -> usize {
        self.asked.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl Prompter for Scripted {
    async fn ask(&self, request: &Request) -> Answer {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.requests.lock().unwrap().push(request.clone());
        self.answers.lock().unwrap().pop().unwrap_or(Answer::Deny)
    }

    fn warn(&self, message: &str) {
        self.warnings.lock().unwrap().push(message.to_owned());
    }
}
