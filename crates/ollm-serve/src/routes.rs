//! The `tool-or-none` choices serve made, kept per prompt ([`Routes`]) so the prompt's
//! later requests play the same choice.
//!
//! # Decisions
//! - **Why keep them.** `ollm run` asks the choice once per prompt, and what it withholds
//!   (`changes-on-request`: after a choice of `none`, or of one tool that changes things,
//!   every other such tool) holds for the whole run. Serve sees a prompt as several
//!   requests, one per round of the client's calls, and the coach asks the choice only
//!   before the first call. Without the choice kept, the request after a `write_file`
//!   for "make me a shopping.txt" offered `run_command` again; the 0.5B's traces through
//!   serve show it running `pwd` and `echo` after its writes for "wc -l sales.csv".
//! - **The key** is the request's model, system prompt, declared tools and every message
//!   up to and including the last user message, hashed with a key drawn when serve
//!   starts, so no client can aim a collision at another's prompt. Two clients sending
//!   the same conversation get the same choice, which is what asking again (at
//!   temperature 0) would give them.
//! - **Bounded**: the oldest choice goes past [`CAPACITY`]; a forgotten one is asked
//!   again, as serve did before it kept them. A choice only ever takes tools away, so
//!   a stale one cannot widen what a request may do.

use std::collections::hash_map::RandomState;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::Mutex;

use ollm_core::coach::Route;
use ollm_types::{ProviderRequest, Role};

/// The most choices kept.
pub(crate) const CAPACITY: usize = 4096;

/// The choices serve made, by prompt (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Routes {
    keys: RandomState,
    kept: Mutex<Kept>,
}

#[derive(Debug, Default)]
struct Kept {
    by_prompt: HashMap<u64, Route>,
    order: VecDeque<u64>,
}

impl Routes {
    /// The key of `request`'s prompt; `None` when it has no user message.
    pub(crate) fn key(&self, request: &ProviderRequest) -> Option<u64> {
        let last = request
            .messages
            .iter()
            .rposition(|m| m.role() == Role::User)?;
        let mut hasher = self.keys.build_hasher();
        let mut write = |part: &str| {
            hasher.write(part.as_bytes());
            hasher.write_u8(0xff);
        };
        write(&request.model);
        write(request.system.as_deref().unwrap_or_default());
        request.tools.iter().for_each(|t| write(&t.name));
        for message in &request.messages[..=last] {
            write(&serde_json::to_string(message).unwrap_or_default());
        }
        Some(hasher.finish())
    }

    /// The choice kept for the prompt `key`.
    pub(crate) fn get(&self, key: u64) -> Option<Route> {
        lock(&self.kept).by_prompt.get(&key).cloned()
    }

    /// Keeps `route` for the prompt `key`, forgetting the oldest past [`CAPACITY`].
    pub(crate) fn keep(&self, key: u64, route: Route) {
        let mut kept = lock(&self.kept);
        if kept.by_prompt.insert(key, route).is_none() {
            kept.order.push_back(key);
        }
        while kept.order.len() > CAPACITY {
            if let Some(old) = kept.order.pop_front() {
                kept.by_prompt.remove(&old);
            }
        }
    }

    /// How many choices are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.kept).by_prompt.len()
    }
}

fn lock(m: &Mutex<Kept>) -> std::sync::MutexGuard<'_, Kept> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use ollm_types::{Message, ProviderRequest, ToolCall, ToolSchema};
    use serde_json::json;

    use super::*;

    fn request(messages: Vec<Message>) -> ProviderRequest {
        let mut request = ProviderRequest::new("m", messages);
        request.tools = vec![ToolSchema::new(
            "read_file",
            "Reads.",
            json!({"type": "object"}),
        )];
        request
    }

    #[test]
    fn a_prompts_later_requests_share_its_key_and_another_prompt_does_not() {
        let routes = Routes::default();
        let prompt = vec![Message::user("make me a shopping.txt")];
        let call = ToolCall::new("w1", "write_file", json!({"path": "a"})).unwrap();
        let mut later = prompt.clone();
        later.push(Message::assistant_with_calls("", vec![call]));
        later.push(Message::tool_result("w1", "write_file", "written"));
        let first = routes.key(&request(prompt.clone())).unwrap();
        assert_eq!(routes.key(&request(later.clone())), Some(first));
        let mut next = later.clone();
        next.push(Message::user("and a todo.txt"));
        assert_ne!(routes.key(&request(next)), Some(first));
        let mut other_tools = request(later);
        other_tools.tools.clear();
        assert_ne!(routes.key(&other_tools), Some(first));
        assert_eq!(routes.key(&request(vec![])), None);
        // Another serve draws another hash key.
        assert_ne!(Routes::default().key(&request(prompt)), Some(first));
    }

    #[test]
    fn the_oldest_choice_goes_past_the_capacity() {
        let routes = Routes::default();
        for key in 0..=CAPACITY as u64 {
            routes.keep(key, Route::None);
        }
        routes.keep(5, Route::Tools(None));
        assert_eq!(routes.len(), CAPACITY);
        assert_eq!(routes.get(0), None);
        assert_eq!(routes.get(1), Some(Route::None));
        assert_eq!(routes.get(5), Some(Route::Tools(None)));
    }
}
