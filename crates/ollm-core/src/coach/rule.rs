//! The coach's rules by name ([`Rule`]) and their switches ([`CoachConfig`]). A leaf:
//! plain data that the chat loop, the recovery and the tool registry read, importing
//! nothing of theirs (so each can ask "is this rule on?" without an import circle).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::CoreError;

/// The most calls of one reply that run (the `calls-per-reply` rule; see the coach's
/// Decisions).
pub const MAX_CALLS_PER_REPLY: usize = 16;

/// Declares [`Rule`] with its names and summaries in one table, so a rule cannot be
/// added without both.
macro_rules! rules {
    ($($(#[$doc:meta])* $variant:ident = $name:literal, $summary:literal;)*) => {
        /// A small-model rule of the coach: each is named, summarised and switched on its
        /// own (see the coach's module docs for what each does and why).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Rule {
            $($(#[$doc])* $variant,)*
        }

        impl Rule {
            /// Every rule, in the order the docs list them.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The rule's name: kebab-case, what `--coach-off` and `[coach] off` take.
            pub fn name(self) -> &'static str {
                match self {
                    $(Rule::$variant => $name,)*
                }
            }

            /// What the rule does, in one line.
            pub fn summary(self) -> &'static str {
                match self {
                    $(Rule::$variant => $summary,)*
                }
            }
        }
    };
}

rules! {
    /// Before a run's first request with tools, a constrained choice of a tool or none.
    ToolOrNone = "tool-or-none",
        "before a run's first request with tools, the model chooses an offered tool or none under a JSON schema; on none the run offers no tools";
    /// The tool `tool-or-none` chose is the first reply's call, its arguments constrained.
    RoutedCall = "routed-call",
        "when `tool-or-none` chose a tool, the run's first reply is a call to it alone, its arguments constrained to the tool's schema";
    /// The choice says the caller's scope holds the user's own things.
    OwnThings = "own-things",
        "the `tool-or-none` choice says the caller's scope (the CLI: this folder) holds the user's own things: their project, notes, plans, data and contacts";
    /// The choice says where the tools work: the caller's scope.
    ScopedChoice = "scoped-choice",
        "the `tool-or-none` choice says where the tools work (the caller's scope; the CLI: this folder); off, it lists them as tools the model can use";
    /// A read chosen for a message naming no file is checked: is the message general?
    GeneralCheck = "general-check",
        "when `tool-or-none` named a tool that only reads for a message that names none of the caller's files, the model is asked what the message needs (general, files or a change), and `general` offers no tools";
    /// The routed call's path argument is one of the caller's existing paths.
    KnownPaths = "known-paths",
        "the call `routed-call` asks for takes its path argument from the caller's list of existing paths (the CLI: the working folder's), under the schema";
    /// A tool chosen is asked again with the tools in reverse order; `none` then wins.
    ChoiceBothOrders = "choice-both-orders",
        "when `tool-or-none` named a tool, the choice is asked once more with the tools listed in reverse order, and a `none` there offers no tools";
    /// A tool that changes things, chosen, is asked again in reverse order; `none` wins.
    ChangesBothOrders = "changes-both-orders",
        "when `tool-or-none` named a tool that changes things (one not named read-only), the choice is asked once more with the tools listed in reverse order, and a `none` there offers no tools";
    /// A `none` chosen for a message that names one of the caller's files offers the reads.
    NamedFile = "named-file",
        "when `tool-or-none` chose none for a message that names one of the caller's files, the tools that only read are offered after all; those that change things stay withheld";
    /// After a choice that offers tools, a file the message names is read first.
    ReadNamed = "read-named",
        "after a `tool-or-none` choice that offers tools, a file of the caller's that the message names is read before the first reply, by the one offered tool that only reads and takes the path alone";
    /// A file the message names, with a file it names that does not exist, is read first.
    ReadSource = "read-source",
        "after a `tool-or-none` choice that offers tools, for a message that names one of the caller's files (by path, name, or name without the extension when no other file has it) and a file that does not exist, the existing file is read before the first reply, as `read-named` reads it";
    /// After a choice of `none` or of a tool that changes things, the other such tools.
    ChangesOnRequest = "changes-on-request",
        "when `tool-or-none` chose none, or a tool that changes things (one not named read-only), the other tools that change things are neither offered nor run";
    /// A choice of a change, for a message naming a program, is the tool that runs it.
    AskedCommand = "asked-command",
        "a `tool-or-none` choice of a tool that changes things and runs no programs, for a user message that names a program of a tool that runs them (the caller names them), reads as a choice of that tool";
    /// A tool that runs programs is offered only when the message names one of them.
    NamedCommand = "named-command",
        "a tool that runs programs (the caller names them: the CLI's `run_command` and its allowed commands) is neither offered nor run in a run whose user message names none of them; a `tool-or-none` choice of it, its list left as it is, reads as none";
    /// A choice of a tool that writes a file, for a message that names no file, is none.
    WriteNeedsFile = "write-needs-file",
        "a `tool-or-none` choice of a tool that changes things and requires a path, for a message that names no file (one of the caller's, a new name with an extension, or a dotfile), reads as none";
    /// A change to an existing file the message does not name, beside files it names.
    OverwriteNeedsName = "overwrite-needs-name",
        "a call to a tool that changes things, whose path is one of the caller's existing files, does not run when the user's message names a file but not that one (by its path, its name or its name without the extension)";
    /// A call the run already made is answered from its earlier result, not run again.
    RepeatGuard = "repeat-guard",
        "a call the run already made (same tool, same arguments) is answered from its earlier result, not run again";
    /// Arguments a tool does not declare do not make a call new.
    RepeatIgnoresUndeclared = "repeat-ignores-undeclared",
        "arguments the tool's schema does not declare do not make a call new for the repeat guard";
    /// The same call asked for a third time ends the run.
    RepeatLimit = "repeat-limit",
        "the same call asked for a third time ends the run as `repetition`";
    /// A turn of repeats only is not recorded.
    SkipRepeatTurn = "skip-repeat-turn",
        "a turn whose calls all repeat earlier ones is not recorded in the history";
    /// A turn's calls answered from earlier results are not recorded; its fresh ones are.
    SkipRepeatCalls = "skip-repeat-calls",
        "in a turn that also ran fresh calls, the calls answered from earlier results (repeats) are left out of the history with their results";
    /// After a turn none of whose calls ran, the answer nudge, and no tools.
    AnswerAfterIdle = "answer-after-idle",
        "after a turn none of whose calls ran (repeats, unknown tools) the model is asked to answer, with no tools offered";
    /// A reply stopped for repeating itself after results is asked again, once.
    AnswerAfterRunaway = "answer-after-runaway",
        "a reply stopped for repeating itself after the run's results is dropped and the model asked to answer, once";
    /// An empty answer after the run's calls is asked again, once.
    AnswerAfterEmpty = "answer-after-empty",
        "an empty answer after the run's calls is dropped and the model asked to answer, once";
    /// An answer without tools that restates the question is asked for again, once.
    AnswerAfterEcho = "answer-after-echo",
        "an answer to a request that offered no tools, that only asks the user's question back, is dropped and the model asked to answer, once, at the tool temperature (0) unless the sampling options set one";
    /// After a turn none of whose calls ran, a change the message asks for is made.
    ChangeAfterIdle = "change-after-idle",
        "after a turn none of whose calls ran, when the message names a file that does not exist (a dotfile at the top too, when the caller listed the hidden entries there) and no call of the run to the one offered tool that changes things and takes a path has run (one refused or failed does not count), the next reply is a call to that tool alone, its arguments constrained, in place of the answer nudge";
    /// A run the repeat limit stops gets one more reply, to answer, with no tools.
    AnswerAtRepeatLimit = "answer-at-repeat-limit",
        "a run the repeat limit stops, when it has not asked for the answer yet, is asked to answer from its results in one more reply, with no tools offered and no call run";
    /// A run at its turn limit with results gets one more reply, to answer, with no tools.
    AnswerAtLimit = "answer-at-limit",
        "a run that reaches its turn limit after calls is asked to answer from their results in one more reply, with no tools offered and no call run";
    /// The answer nudge after a result that is not an error asks from the results above.
    AnswerFromResults = "answer-from-results",
        "the answer nudge, in a run that holds a result that is not an error, asks for the answer from the results above";
    /// The answer nudge ends with the user's question again.
    RestateQuestion = "restate-question",
        "the answer nudge ends with the run's user message again (`My question: ...`), when that is one line of at most 300 bytes";
    /// A reply a proxy would send its client with nothing in it is asked for again, once.
    AnswerAfterNothing = "answer-after-nothing",
        "a reply `ollm serve` would send its client with no text and no call the client declared is asked for once more, with the answer nudge and no tools offered";
    /// An answer that shows how to call a tool is asked to act.
    ActNudge = "act-nudge",
        "an answer that shows how to call an offered tool instead of calling it is asked to act, once, before any call";
    /// An answer that says it cannot reach the files is told it can.
    CanNudge = "can-nudge",
        "an answer that says it cannot reach the files or run anything is told it can, once, before any call";
    /// A reply whose text keeps repeating itself is stopped.
    RunawayStop = "runaway-stop",
        "a reply whose text keeps repeating one unit over 8 KiB is stopped";
    /// A reply written as calls is cut where it starts repeating them.
    CallLoopCut = "call-loop-cut",
        "a reply written as calls is cut before its first repeated call, or past 16 calls";
    /// A reply written as calls to three tools is cut before the second.
    ListedToolsCut = "listed-tools-cut",
        "a reply written as calls that names a third tool is cut before its second tool";
    /// At most 16 calls of a reply run.
    CallsPerReply = "calls-per-reply",
        "at most 16 of one reply's calls run; the rest are dropped from the conversation";
    /// The caller's tools context opens the first prompt of runs with tools.
    ToolsContext = "tools-context",
        "the caller's tools context (the CLI's working-folder line) opens the first prompt of requests with tools";
    /// A reply that opens by repeating the tools context is read without it.
    DropEcho = "drop-echo",
        "a reply that opens by repeating the tools context is read without it";
    /// Requests that offer tools are greedy unless the sampling options say otherwise.
    GreedyToolTurns = "greedy-tool-turns",
        "requests that offer tools are sent the tool temperature (0) when the sampling options set none";
    /// Requests without tools after the run's calls are greedy too.
    GreedyAnswers = "greedy-answers",
        "requests that offer no tools after the run's calls (the answer to their results) are sent the tool temperature (0) when the sampling options set none";
    /// A text call's name is matched loosely to an offered tool.
    NameRepair = "name-repair",
        "a call's tool name written as text matches an offered tool ignoring case, a `functions.` prefix and a `:N` suffix";
    /// A call named `<verb>_<path>` is the `<verb>_*` tool with that path.
    PathInName = "path-in-name",
        "a call named `<verb>_<path>` with no path is the one offered `<verb>_*` tool, with that path";
    /// A call named like a file reads that file.
    FileAsName = "file-as-name",
        "a call named like a file (`config.toml`) and giving no path is the one offered `read*` tool that takes a path, with that path and only the arguments it declares";
    /// A call to a tool not offered whose arguments fit one offered tool is that tool.
    ToolFromArguments = "tool-from-arguments",
        "a call to a tool that is not offered, whose arguments are all declared by one offered tool and give every argument it requires, and fit no other, is a call to that tool";
    /// A path the message names with a leading dot, given without it, gets the dot back.
    DottedPath = "dotted-path",
        "a call's path that is a path the user's message names without its leading dot (`gitignore` for `.gitignore`) is given the dot";
    /// A call followed by an invented result is the call.
    InventedResultCut = "invented-result-cut",
        "a reply that opens with calls and goes on with an invented result runs the calls and drops the rest";
    /// Quoted values are typed by the tool's schema.
    TypedStrings = "typed-strings",
        "quoted values the tool's schema types otherwise (`\"true\"`, `\"50\"`) are typed before validation";
    /// An invalid-arguments result lists the valid keys.
    KeyHint = "key-hint",
        "an invalid-arguments result ends with the valid argument keys, their types and which are required";
    /// An unknown tool's result lists the tools on offer.
    ToolsHint = "tools-hint",
        "a call to a tool that is not offered is answered with the names of the tools that are";
}

impl Rule {
    /// The rules that are off unless the caller turns them on ([`CoachConfig::on`]):
    /// `tool-or-none`, which costs a request of its own before a run's first turn,
    /// `routed-call`, which showed no lift on the eval (issue 35: 0.5B 15/54 against
    /// 16/54 without it, 1.5B 21/54 both ways, one repeat each) and is kept for callers
    /// to measure on their own models, `known-paths`, which acts only with it and whose
    /// lift did not hold in a second pass, `choice-both-orders` and `general-check`,
    /// second requests that trade tool tasks for restraint, `own-things`, a sentence of
    /// the choice that cost the 1.5B tool questions, the five call repairs (`name-repair`,
    /// `path-in-name`, `typed-strings`, `key-hint`, `tools-hint`), which showed no lift in
    /// two repeats on either model, `answer-at-limit` and `named-file`, which acted in
    /// too few of the eval's runs to show a lift, and `read-named` and
    /// `answer-at-repeat-limit`, which showed none, and `tool-from-arguments`, which can
    /// turn an invented tool's call into a write or a command, and `restate-question`,
    /// which helped the 0.5B and cost the 1.5B (coach docs).
    pub const ON_REQUEST: &'static [Rule] = &[
        Rule::ToolOrNone,
        Rule::RoutedCall,
        Rule::KnownPaths,
        Rule::ChoiceBothOrders,
        Rule::OwnThings,
        Rule::GeneralCheck,
        Rule::ReadNamed,
        Rule::AnswerAtLimit,
        Rule::AnswerAtRepeatLimit,
        Rule::NameRepair,
        Rule::PathInName,
        Rule::TypedStrings,
        Rule::KeyHint,
        Rule::ToolsHint,
        Rule::ToolFromArguments,
        Rule::RestateQuestion,
    ];
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Rule {
    type Err = CoreError;

    /// A rule by its [`Rule::name`]; the error lists the known names.
    fn from_str(s: &str) -> Result<Self, CoreError> {
        Rule::ALL
            .iter()
            .copied()
            .find(|r| r.name() == s.trim())
            .ok_or_else(|| CoreError::UnknownRule {
                name: s.to_owned(),
                known: Rule::ALL
                    .iter()
                    .map(|r| r.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl Serialize for Rule {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        name.parse().map_err(serde::de::Error::custom)
    }
}

/// The coach's switches, and the words of the caller it uses (part of
/// [`ChatConfig`](crate::ChatConfig)). The default turns on every rule but those
/// [`Rule::ON_REQUEST`] lists, which cost a request of their own or showed no lift, and
/// are turned on by the caller (the CLI turns on `tool-or-none`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CoachConfig {
    /// The rules turned off; this outranks `on`.
    pub off: BTreeSet<Rule>,
    /// The rules of [`Rule::ON_REQUEST`] turned on.
    pub on: BTreeSet<Rule>,
    /// What the caller's tools work on, as the `can-nudge` says it ("this folder", from
    /// the CLI); `None`: the nudge names no place.
    pub scope: Option<String>,
    /// The argument the caller's tools take a file path in (`path`, from the CLI), which
    /// `path-in-name` fills; `None` turns that rule off, since nothing says which
    /// argument a path goes in.
    pub path_argument: Option<String>,
    /// The caller's tools that only read (`read_file`, `list_dir`, `search_text`, from
    /// the CLI): the only ones `routed-call` asks for under a schema, since the call it
    /// obliges is made whatever the question was; empty (the default) turns that rule
    /// off. A write on a question that asked for none is a safety bug (issue 35): the
    /// 0.5B chose `write_file` for "backup.py keep days?" and, obliged to call it,
    /// overwrote the file. Every other tool changes things, and `changes-on-request`
    /// withholds those `tool-or-none` did not choose; empty turns that rule off too.
    pub read_only: BTreeSet<String>,
    /// By tool, the paths its [`path_argument`](Self::path_argument) can name (the CLI:
    /// the working folder's folders, `.` first, for `list_dir`, its files for
    /// `read_file`, both for `search_text`, when there are at most 256), which
    /// `known-paths` makes the only values of a routed call's path; a tool not listed,
    /// or listed with none, keeps its own schema. Empty (the default) turns the rule off.
    pub paths: BTreeMap<String, Vec<String>>,
    /// The hidden entries at the top of the caller's scope (the CLI: the working
    /// folder's `.env`, `.git/`), which [`paths`](Self::paths) leaves out: with them
    /// known, `change-after-idle` takes a dotfile the message names that is not one of
    /// them (`.gitignore`) as a new file to write. `None` (the default): dotfiles are
    /// never taken as new, since one may exist and a write replaces a whole file.
    pub hidden: Option<Vec<String>>,
    /// By tool, the programs it runs (the CLI: `run_command`, the first word of each of
    /// its allowed commands), which `named-command` looks for in the run's user message:
    /// a tool listed here whose programs the message names none of is neither offered
    /// nor run, and a `tool-or-none` choice of it reads as `none`. Empty (the default)
    /// turns the rule off.
    pub programs: BTreeMap<String, Vec<String>>,
}

impl CoachConfig {
    /// Every rule off: the runtime as a plain client would be, recovery aside.
    pub fn all_off() -> Self {
        CoachConfig {
            off: Rule::ALL.iter().copied().collect(),
            ..CoachConfig::default()
        }
    }

    /// Whether `rule` is on: not turned off, and on by default or turned on.
    pub fn is_on(&self, rule: Rule) -> bool {
        !self.off.contains(&rule) && (!Rule::ON_REQUEST.contains(&rule) || self.on.contains(&rule))
    }

    /// Turns `rule` on, unless it is turned off.
    pub fn turn_on(&mut self, rule: Rule) {
        self.on.insert(rule);
    }

    /// Turns `rule` off.
    pub fn turn_off(&mut self, rule: Rule) {
        self.off.insert(rule);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_a_unique_kebab_name_that_parses_back() {
        let mut seen = BTreeSet::new();
        for &rule in Rule::ALL {
            let name = rule.name();
            assert!(seen.insert(name), "{name} twice");
            assert!(
                name.chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{name}"
            );
            assert_eq!(name.parse::<Rule>().ok(), Some(rule));
            assert!(!rule.summary().is_empty() && !rule.summary().contains('\n'));
        }
    }

    #[test]
    fn an_unknown_name_is_an_error_listing_the_known_ones() {
        let Err(CoreError::UnknownRule { name, known }) = "repeat-gaurd".parse::<Rule>() else {
            panic!("a typo parsed");
        };
        assert_eq!(name, "repeat-gaurd");
        assert_eq!(known.split(", ").count(), Rule::ALL.len());
        assert!(known.contains("repeat-guard"), "{known}");
    }

    #[test]
    fn the_switches_read_from_names() {
        let config: CoachConfig =
            serde_json::from_str(r#"{"off": ["act-nudge", "greedy-tool-turns"]}"#).unwrap();
        assert!(!config.is_on(Rule::ActNudge));
        assert!(!config.is_on(Rule::GreedyToolTurns));
        assert!(config.is_on(Rule::RepeatGuard));
        assert!(serde_json::from_str::<CoachConfig>(r#"{"off": ["nope"]}"#).is_err());
        assert!(CoachConfig::default().off.is_empty());
        assert!(Rule::ALL.iter().all(|&r| !CoachConfig::all_off().is_on(r)));
    }

    #[test]
    fn a_rule_on_request_is_off_until_turned_on_and_off_outranks_on() {
        let mut config = CoachConfig::default();
        assert!(!config.is_on(Rule::ToolOrNone));
        config.turn_on(Rule::ToolOrNone);
        assert!(config.is_on(Rule::ToolOrNone));
        config.turn_off(Rule::ToolOrNone);
        assert!(!config.is_on(Rule::ToolOrNone));
        let read: CoachConfig = serde_json::from_str(r#"{"on": ["tool-or-none"]}"#).unwrap();
        assert!(read.is_on(Rule::ToolOrNone));
        assert!(
            Rule::ALL
                .iter()
                .filter(|r| !Rule::ON_REQUEST.contains(r))
                .all(|&r| CoachConfig::default().is_on(r))
        );
    }
}
