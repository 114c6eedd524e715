//! The conversation a client keeps. SKELETON: completed with the foundation issue.

use ollm_types::Message;
use serde::{Deserialize, Serialize};

/// A conversation: an optional system message and the messages after it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct History {
    system: Option<Message>,
    messages: Vec<Message>,
}
