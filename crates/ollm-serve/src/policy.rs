//! The repair policy: `off`, `flag` or `on`, for the server, per model and per API key.
//! Plain data: the CLI settles flags and the config file's `[serve]` table into it.
//!
//! # Decisions
//! - `on` (the default) recovers calls written as text and sends them as `tool_calls`,
//!   marked (see `provenance.rs`); `flag` leaves the reply as the server wrote it and only
//!   reports the calls it would have recovered (header, body field, metric); `off` passes
//!   the reply through untouched, with no ReAct fallback and no `tool_choice` retry.
//! - Where a model's and a key's policies both apply, **the more cautious wins** (`off`
//!   over `flag` over `on`): an operator turns repair down for a model whose text calls
//!   misfire, an agent's key for a client that refuses recovered calls, and neither
//!   should be able to switch the other's caution off. Without either, the server's.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::ServeError;

/// What happens to calls a model writes as text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Repair {
    /// Pass replies through as the server wrote them.
    Off,
    /// Pass them through, reporting the calls found in the text.
    Flag,
    /// Recover them as `tool_calls`, marked.
    #[default]
    On,
}

impl Repair {
    /// Its name in flags and the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            Repair::Off => "off",
            Repair::Flag => "flag",
            Repair::On => "on",
        }
    }
}

impl fmt::Display for Repair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Repair {
    type Err = ServeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "off" => Ok(Repair::Off),
            "flag" => Ok(Repair::Flag),
            "on" => Ok(Repair::On),
            other => Err(ServeError::UnknownPolicy(other.to_owned())),
        }
    }
}

/// An API key clients may use, with its own policy.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientKey {
    /// Its name, for logs (never the key).
    pub name: String,
    /// The key itself, as clients send it after `Bearer `.
    pub secret: String,
    /// The policy for requests made with it (the more cautious of it and the model's
    /// wins).
    pub repair: Option<Repair>,
}

impl fmt::Debug for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientKey")
            .field("name", &self.name)
            .field("repair", &self.repair)
            .finish_non_exhaustive()
    }
}

/// The server's policy and the models' own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// The server's policy, for models without their own and requests without a key's.
    pub default: Repair,
    /// The models' own policies, by the name clients ask for.
    pub models: BTreeMap<String, Repair>,
}

impl Policy {
    /// The policy for a request for `model` made with a key whose policy is `key`.
    pub fn decide(&self, model: &str, key: Option<Repair>) -> Repair {
        match (self.models.get(model).copied(), key) {
            (Some(m), Some(k)) => m.min(k),
            (Some(one), None) | (None, Some(one)) => one,
            (None, None) => self.default,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_more_cautious_of_model_and_key_wins_else_the_servers() {
        let policy = Policy {
            default: Repair::On,
            models: BTreeMap::from([("small".to_owned(), Repair::Flag)]),
        };
        let check = |model: &str, key: Option<Repair>, want: Repair| {
            assert_eq!(policy.decide(model, key), want, "{model} {key:?}");
        };
        check("big", None, Repair::On);
        check("big", Some(Repair::Off), Repair::Off);
        check("small", None, Repair::Flag);
        check("small", Some(Repair::On), Repair::Flag);
        check("small", Some(Repair::Off), Repair::Off);
        let off = Policy {
            default: Repair::Off,
            ..Policy::default()
        };
        assert_eq!(off.decide("big", Some(Repair::On)), Repair::On);
    }

    #[test]
    fn policies_read_back_from_their_names() {
        for repair in [Repair::Off, Repair::Flag, Repair::On] {
            assert_eq!(repair.as_str().parse::<Repair>(), Ok(repair));
        }
        assert!("maybe".parse::<Repair>().is_err());
    }
}
