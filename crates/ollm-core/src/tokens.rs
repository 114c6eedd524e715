//! Token estimates and per-model context limits. SKELETON: completed with the foundation
//! issue.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Context limits by model name, with a default for models not listed (4096).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextLimits {
    /// Limits by model name.
    pub models: BTreeMap<String, usize>,
    /// The limit for models not listed.
    pub default: usize,
}

impl Default for ContextLimits {
    fn default() -> Self {
        ContextLimits {
            models: BTreeMap::new(),
            default: 4096,
        }
    }
}

/// `ceil(chars / 4)`: the estimate used when the provider has no tokenizer.
pub fn estimate_tokens(chars: usize) -> usize {
    chars.div_ceil(4)
}
