//! The config file's `[serve]` table: the repair policy for the server, per model and
//! per API key, the concurrency limit and the headers to forward. The CLI reads it with
//! the rest of its config file and settles it with `ollm serve`'s flags into
//! [`Options`](crate::Options).
//!
//! ```toml
//! [serve]
//! repair = "on"                          # off | flag | on (default on)
//! max_in_flight = 4                      # chat replies per healthy replica, then 429
//! forward_headers = ["x-smg-routing-key"] # passed upstream with x-session-id
//! tool_or_none = false                   # the coach's tool-or-none choice first
//! greedy_tool_turns = false              # temperature 0 for tool requests that set none
//! read_only = ["read_file", "list_dir"]  # the clients' tools that change nothing
//! routed_call = false                    # a chosen read tool is called under its schema
//! [serve.models."qwen2.5-coder:0.5b"]
//! repair = "flag"
//! tool_or_none = true                    # this model's own, over the server's
//! [serve.keys.ci-agent]                  # a key clients may use, named for the log
//! api_key_env = "CI_AGENT_KEY"           # the variable holding it (never the key)
//! repair = "off"
//! ```
//!
//! # Decisions
//! - Keys come from the environment, named by `api_key_env`, as a provider's key does:
//!   the file is often shared or committed, a key in it would leak.
//! - Unknown keys in these tables are refused, so a misspelt `repiar` is not silently
//!   the default.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::policy::Repair;

/// The `[serve]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeEntry {
    /// The server's policy (a `--repair` flag wins over it).
    pub repair: Option<Repair>,
    /// Chat replies in flight per healthy replica before 429 (`--max-in-flight` wins).
    pub max_in_flight: Option<u32>,
    /// Client headers passed on upstream, besides the session headers.
    pub forward_headers: Vec<String>,
    /// Whether a request that declares tools and leaves `tool_choice` at `auto` first
    /// asks the model to name a tool or none (the coach's `tool-or-none` rule; on
    /// `none` the reply is asked for without tools). `None`: the server's default.
    pub tool_or_none: Option<bool>,
    /// Whether a request that offers tools and sets no temperature is sent temperature 0
    /// (the coach's `greedy-tool-turns`, which `ollm run` applies by default). `None`:
    /// the server's default, off: the client's sampling passes as sent.
    pub greedy_tool_turns: Option<bool>,
    /// The clients' tools that only read (`read_file`, `list_dir`, ...). Serve cannot
    /// know what a client's tool does; naming them turns on the coach's
    /// `changes-on-request` (with `tool_or_none`): after a choice of no tool, or of one
    /// tool that changes things, the client's other tools, the ones not named here, are
    /// neither offered nor handed to the client until the next prompt. Empty (the
    /// default): nothing is withheld.
    pub read_only: Vec<String>,
    /// Whether, after `tool_or_none` chose one of the `read_only` tools, the reply is
    /// asked for as a call to that tool alone under its schema (the coach's
    /// `routed-call`), the call the client then gets. `None`: the server's default, off.
    pub routed_call: Option<bool>,
    /// Per-model policies: `[serve.models."NAME"]`.
    pub models: BTreeMap<String, ServeModelEntry>,
    /// Keys clients may use, by name: `[serve.keys.NAME]`.
    pub keys: BTreeMap<String, ServeKeyEntry>,
}

/// One `[serve.models."NAME"]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServeModelEntry {
    /// The model's policy (`--repair-model` wins over it).
    pub repair: Option<Repair>,
    /// `tool_or_none` for requests naming this model; `None`: the server's.
    pub tool_or_none: Option<bool>,
    /// `greedy_tool_turns` for requests naming this model; `None`: the server's.
    pub greedy_tool_turns: Option<bool>,
    /// `routed_call` for requests naming this model; `None`: the server's.
    pub routed_call: Option<bool>,
}

/// One `[serve.keys.NAME]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ServeKeyEntry {
    /// The environment variable holding the key.
    pub api_key_env: String,
    /// The policy for requests made with it.
    #[serde(default)]
    pub repair: Option<Repair>,
}
