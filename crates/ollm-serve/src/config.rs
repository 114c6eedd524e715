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
//! tool_or_none = true                    # the coach's tool-or-none choice first
//! greedy_tool_turns = true               # temperature 0 for tool requests that set none
//! read_only = ["read_file", "list_dir"]  # the clients' tools that change nothing
//! routed_call = false                    # a chosen read tool is called under its schema
//! [serve.models."qwen2.5-coder:32b"]
//! repair = "flag"
//! tool_or_none = false                   # this model's own, over the server's
//! [serve.keys.ci-agent]                  # a key clients may use, named for the log
//! api_key_env = "CI_AGENT_KEY"           # the variable holding it (never the key)
//! repair = "off"
//! ```
//!
//! # Decisions
//! - **Serve ships with `ollm run`'s coach** (issue 37: "the same repair"): the
//!   `tool-or-none` choice, greedy tool turns, and `changes-on-request` over the tools
//!   whose names say they only read ([`READ_ONLY_BY_NAME`]) are on unless the table says
//!   otherwise. With them off, a plain client through serve scored 11/33 on the eval's
//!   held-out part with the 1.5B, against `ollm run`'s 21/33; with them on, 19/33, and
//!   restraint 12/12 (docs/tool-calling.md). A large model that needs no choice turns it
//!   off for itself (`[serve.models."NAME"] tool_or_none = false`): it costs a short
//!   request per prompt. The library's [`Options::default`](crate::Options) keeps them
//!   off: it is the repair alone, for callers that set their coach themselves.
//! - Serve cannot know what a client's tool does; a name is all it has. The names taken
//!   as read-only unless `read_only` is set are the conventional ones of ollm's own
//!   tools and of the MCP reference file server. A tool wrongly left out is withheld
//!   only after a choice of no tool or of a tool that changes things, until the next
//!   prompt; `read_only = []` withholds nothing.
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
    /// `none` the reply is asked for without tools). `None`: on, as in `ollm run`
    /// ([`ServeEntry::tool_or_none`]).
    pub tool_or_none: Option<bool>,
    /// Whether a request that offers tools and sets no temperature is sent temperature 0
    /// (the coach's `greedy-tool-turns`, which `ollm run` applies by default). `None`:
    /// on ([`ServeEntry::greedy_tool_turns`]); off, the client's sampling passes as sent.
    pub greedy_tool_turns: Option<bool>,
    /// The clients' tools that only read (`read_file`, `list_dir`, ...), for the coach's
    /// `changes-on-request` (with `tool_or_none`): after a choice of no tool, or of one
    /// tool that changes things, the client's other tools, the ones not named here, are
    /// neither offered nor handed to the client until the next prompt. `None`: the
    /// conventional names ([`READ_ONLY_BY_NAME`]); empty: nothing is withheld.
    pub read_only: Option<Vec<String>>,
    /// Whether, after `tool_or_none` chose one of the `read_only` tools, the reply is
    /// asked for as a call to that tool alone under its schema (the coach's
    /// `routed-call`), the call the client then gets. `None`: the server's default, off.
    pub routed_call: Option<bool>,
    /// Per-model policies: `[serve.models."NAME"]`.
    pub models: BTreeMap<String, ServeModelEntry>,
    /// Keys clients may use, by name: `[serve.keys.NAME]`.
    pub keys: BTreeMap<String, ServeKeyEntry>,
}

/// The tool names taken as read-only when `[serve] read_only` is not set: ollm's own
/// (`read_file`, `list_dir`, `search_text`) and the MCP reference file server's tools
/// that only read.
pub const READ_ONLY_BY_NAME: &[&str] = &[
    "read_file",
    "list_dir",
    "search_text",
    "read_text_file",
    "read_multiple_files",
    "list_directory",
    "directory_tree",
    "search_files",
    "get_file_info",
    "list_allowed_directories",
];

impl ServeEntry {
    /// `tool_or_none` as set, else on.
    pub fn tool_or_none(&self) -> bool {
        self.tool_or_none.unwrap_or(true)
    }

    /// `greedy_tool_turns` as set, else on.
    pub fn greedy_tool_turns(&self) -> bool {
        self.greedy_tool_turns.unwrap_or(true)
    }

    /// `read_only` as set, else [`READ_ONLY_BY_NAME`].
    pub fn read_only(&self) -> Vec<String> {
        match &self.read_only {
            Some(names) => names.clone(),
            None => READ_ONLY_BY_NAME.iter().map(|n| (*n).to_owned()).collect(),
        }
    }
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
