//! What every part of the recovery shares: the [`Format`] families, the [`OfferedTools`],
//! a call as a parser read it ([`RawCall`]) and what the recovery returns ([`Recovery`],
//! [`Recovered`]). A leaf: the scanner, the formats and the dispatch above them all use it
//! (issue 26: these lived in `mod.rs`, which also dispatches to the formats, so every
//! format imported its own dispatcher).

use ollm_types::ToolCall;
use serde_json::{Map, Value};

use crate::coach::{CoachConfig, Rule};

/// The format family a recovered item was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Format {
    /// Hermes / Qwen2.5 / Qwen3: `<tool_call>{json}</tool_call>`.
    Hermes,
    /// Qwen3-Coder: `<function=NAME><parameter=KEY>VALUE</parameter></function>`.
    QwenXml,
    /// Mistral: `[TOOL_CALLS][...]` or `[TOOL_CALLS]NAME[ARGS]{...}`.
    Mistral,
    /// Llama 3.x `<|python_tag|>` and Llama 4 `<|python_start|>`.
    Llama,
    /// A whole reply that is a pythonic list of calls, `[f(a=1), g(b="x")]`.
    Pythonic,
    /// Functionary: `>>>NAME\n{json}`.
    Functionary,
    /// DeepSeek's `<｜tool▁calls▁begin｜>` blocks.
    DeepSeek,
    /// LFM: `<|tool_call_start|>[f(a=1)]<|tool_call_end|>`.
    Lfm,
    /// A whole reply that is JSON, bare or fenced.
    Json,
}

/// The tools on offer: each name with its argument JSON schema, and the coach's rules the
/// recovery goes by.
#[derive(Debug, Clone, Default)]
pub(crate) struct OfferedTools {
    pub(super) tools: Vec<(String, Value)>,
    /// The coach's switches and words (`name-repair`, `path-in-name`,
    /// `invented-result-cut`).
    pub(super) coach: CoachConfig,
}

impl OfferedTools {
    /// Tools from `(name, argument schema)` pairs, under the coach's defaults (neither
    /// `name-repair` nor `path-in-name`, which also needs the caller's word for the path
    /// argument; [`Self::coached`]).
    pub(crate) fn new(tools: impl IntoIterator<Item = (String, Value)>) -> Self {
        Self {
            tools: tools.into_iter().collect(),
            coach: CoachConfig::default(),
        }
    }

    /// The same tools under `coach`'s switches and words.
    pub(crate) fn coached(mut self, coach: &CoachConfig) -> Self {
        self.coach = coach.clone();
        self
    }

    /// Whether the coach's `rule` is on.
    pub(super) fn is_on(&self, rule: Rule) -> bool {
        self.coach.is_on(rule)
    }

    /// The offered name that `raw` means, if any (see the module docs for the rules):
    /// exactly, or without a `functions.` prefix and a `:N` suffix (servers' own
    /// spellings, `functions.read_file:0`), or with `name-repair` on, ignoring case.
    pub(crate) fn resolve(&self, raw: &str) -> Option<&str> {
        let (raw, stripped) = spellings(raw);
        let exact = |n: &str| self.tools.iter().find(|(t, _)| t == n);
        let loose = |n: &str| self.tools.iter().find(|(t, _)| t.eq_ignore_ascii_case(n));
        let found = exact(raw).or_else(|| exact(stripped));
        let repair = || {
            self.is_on(Rule::NameRepair)
                .then(|| loose(raw).or_else(|| loose(stripped)))
                .flatten()
        };
        found.or_else(repair).map(|(t, _)| t.as_str())
    }

    /// Whether `raw` names an offered tool without `name-repair`'s loose match: exactly,
    /// or in a server's own spelling (`functions.read_file:0`).
    pub(crate) fn names_exactly(&self, raw: &str) -> bool {
        let (raw, stripped) = spellings(raw);
        self.tools.iter().any(|(t, _)| t == raw || t == stripped)
    }

    /// The offered names, in order.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|(n, _)| n.as_str())
    }

    /// The argument schema of the offered tool `name`.
    pub(super) fn schema(&self, name: &str) -> Option<&Value> {
        self.tools.iter().find(|(t, _)| t == name).map(|(_, s)| s)
    }
}

/// A tool name as written (trimmed), and without a server's `functions.` prefix and
/// `:N` suffix.
fn spellings(raw: &str) -> (&str, &str) {
    let raw = raw.trim();
    let stripped = raw.strip_prefix("functions.").unwrap_or(raw);
    let stripped = match stripped.rsplit_once(':') {
        Some((head, tail)) if tail.chars().all(|c| c.is_ascii_digit()) => head,
        _ => stripped,
    };
    (raw, stripped)
}

/// One call the reply makes, in the order written.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Recovered {
    /// A call to an offered tool (the name is the offered spelling).
    Call {
        /// The offered tool's name.
        name: String,
        /// The arguments, always a JSON object.
        arguments: Map<String, Value>,
    },
    /// A well-formed call naming a tool that is not offered.
    UnknownTool {
        /// The name as written.
        name: String,
        /// The arguments as written (XML parameters as strings), kept in the history
        /// so the model sees the call it made and the trace shows what it asked.
        arguments: Map<String, Value>,
    },
    /// A block that is clearly meant as a call but cannot be read.
    Malformed {
        /// The format the block was written in.
        format: Format,
        /// What was wrong, phrased for the model.
        reason: String,
    },
}

/// What a reply holds: the prose to keep and the calls, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Recovery {
    /// The reply without call markup (unchanged when it makes no call).
    pub(crate) prose: String,
    /// The calls, in the order written.
    pub(crate) calls: Vec<Recovered>,
    /// The format of each call, in the same order.
    pub(crate) formats: Vec<Format>,
    /// Per call, in the same order, the coach's repair that made it a call to an
    /// offered tool, if one did.
    pub(crate) repairs: Vec<Option<Repair>>,
}

/// A call the coach repaired: the rule, and the name the model wrote.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Repair {
    /// The rule that found the offered tool.
    pub(crate) rule: Rule,
    /// The tool name as the model wrote it.
    pub(crate) written: String,
}

/// Arguments as a parser found them, before the tool is known.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RawArgs {
    /// A JSON object.
    Json(Map<String, Value>),
    /// Qwen3-Coder XML parameters: strings, typed later from the schema.
    Strings(Vec<(String, String)>),
}

impl RawArgs {
    /// The arguments as a JSON object, XML parameters as strings (no schema types them).
    pub(super) fn into_map(self) -> Map<String, Value> {
        match self {
            RawArgs::Json(map) => map,
            RawArgs::Strings(pairs) => pairs
                .into_iter()
                .map(|(k, v)| (k, Value::String(v)))
                .collect(),
        }
    }
}

/// One call as a parser read it.
pub(super) type RawCall = Result<(String, RawArgs), String>;

/// The format a call recovered from text was written in (see [`recover_calls`]).
///
/// [`recover_calls`]: crate::recover_calls
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CallFormat {
    /// Hermes / Qwen2.5 / Qwen3: `<tool_call>{json}</tool_call>`.
    Hermes,
    /// Qwen3-Coder: `<function=NAME><parameter=KEY>VALUE</parameter></function>`.
    QwenXml,
    /// Mistral: `[TOOL_CALLS][...]` or `[TOOL_CALLS]NAME[ARGS]{...}`.
    Mistral,
    /// Llama 3.x `<|python_tag|>` and Llama 4 `<|python_start|>`.
    Llama,
    /// A pythonic list of calls, `[f(a=1), g(b="x")]`.
    Pythonic,
    /// Functionary: `>>>NAME\n{json}`.
    Functionary,
    /// DeepSeek's `<｜tool▁calls▁begin｜>` blocks.
    DeepSeek,
    /// LFM: `<|tool_call_start|>[f(a=1)]<|tool_call_end|>`.
    Lfm,
    /// A reply that is bare JSON calls.
    Json,
    /// A reply that is JSON calls in a code fence (```` ```json ````).
    FencedJson,
}

impl CallFormat {
    /// Its name: `hermes`, `qwen3-xml`, `mistral`, `llama`, `pythonic`, `functionary`,
    /// `deepseek`, `lfm`, `json`, `fenced-json`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallFormat::Hermes => "hermes",
            CallFormat::QwenXml => "qwen3-xml",
            CallFormat::Mistral => "mistral",
            CallFormat::Llama => "llama",
            CallFormat::Pythonic => "pythonic",
            CallFormat::Functionary => "functionary",
            CallFormat::DeepSeek => "deepseek",
            CallFormat::Lfm => "lfm",
            CallFormat::Json => "json",
            CallFormat::FencedJson => "fenced-json",
        }
    }

    /// The public name of an internal format; JSON in a fence when `fenced`.
    pub(super) fn of(format: Format, fenced: bool) -> Self {
        match format {
            Format::Hermes => CallFormat::Hermes,
            Format::QwenXml => CallFormat::QwenXml,
            Format::Mistral => CallFormat::Mistral,
            Format::Llama => CallFormat::Llama,
            Format::Pythonic => CallFormat::Pythonic,
            Format::Functionary => CallFormat::Functionary,
            Format::DeepSeek => CallFormat::DeepSeek,
            Format::Lfm => CallFormat::Lfm,
            Format::Json if fenced => CallFormat::FencedJson,
            Format::Json => CallFormat::Json,
        }
    }
}

impl std::fmt::Display for CallFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call recovered from a reply's text, to a tool the caller declared.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct TextCall {
    /// The call: the declared tool's name, the arguments as a JSON object, and an id
    /// `text-call-N` (N from 1, in the order written; unique within one reply only).
    pub call: ToolCall,
    /// The format it was written in; its presence marks the call as recovered.
    pub format: CallFormat,
}

/// Something in a reply that is clearly meant as a call but is not one to run.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Rejected {
    /// A well-formed call naming a tool that was not declared.
    UnknownTool {
        /// The name as written.
        name: String,
    },
    /// Call markup that cannot be read.
    Malformed {
        /// The format it was written in.
        format: CallFormat,
        /// What was wrong, in words a model can act on.
        reason: String,
    },
}

/// What [`recover_calls`] read from a reply.
///
/// [`recover_calls`]: crate::recover_calls
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TextCalls {
    /// The reply without call markup (unchanged when it makes no call).
    pub prose: String,
    /// The calls to declared tools, in the order written.
    pub calls: Vec<TextCall>,
    /// The rest of the reply's call markup: calls to undeclared tools and unreadable
    /// blocks, in the order written. Never run; a caller may answer them with an error
    /// so the model can try again.
    pub rejected: Vec<Rejected>,
}
