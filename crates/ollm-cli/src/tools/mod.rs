//! The CLI's wiring of the built-in tools from `ollm-tools`: settings to a `ToolConfig`,
//! the approval policy with the terminal prompter, and the registry a chat uses.
//!
//! Everything else (confinement, the command rules, approval policy) lives in
//! `ollm-tools`; only what needs a terminal or the config file stays here.

pub(crate) mod prompter;

use std::collections::BTreeMap;
use std::sync::Arc;

use ollm_core::{CoachConfig, Rule, ToolRegistry};
use ollm_tools::{Approver, Mode, ToolConfig, Workspace};

use crate::config::Settings;

/// The tools' configuration from the settled settings: the provider's key variable is
/// never passed to a command.
pub(crate) fn config(settings: &Settings) -> ToolConfig {
    let t = &settings.tools;
    ToolConfig {
        allowed_commands: t.allowed_commands.clone(),
        command_timeout: t.command_timeout,
        output_limit: t.output_limit,
        audit_log: t.audit_log.clone(),
        pass_env: t.pass_env.clone(),
        secret_env: settings.provider.api_key_env.iter().cloned().collect(),
        sandbox: t.sandbox,
    }
}

/// Tells the coach the CLI's words for its tools: they work on the working folder ("this
/// folder", in the `can-nudge`), the built-in tools take a file path in `path`
/// (`path-in-name`), and `run_command` starts the `programs` its allowed commands name
/// (`named-command`). Core knows none of them. It also turns on `tool-or-none`, which core
/// leaves to its callers since it costs a request (measured with these tools: issue 35,
/// docs/eval.md).
pub(crate) fn tell_coach(coach: &mut CoachConfig, programs: &[String]) {
    coach.scope = Some("this folder".to_owned());
    let tool = ollm_tools::COMMAND_TOOL.to_owned();
    coach.programs = BTreeMap::from([(tool, programs.to_vec())]);
    coach.path_argument = Some("path".to_owned());
    coach.turn_on(Rule::ToolOrNone);
    // The read-only tools are named: `routed-call` (off: no lift measured, issue 35) may
    // oblige only those, and `changes-on-request` withholds every other tool (writes,
    // commands, MCP tools, whose effects the CLI does not know) that `tool-or-none` did
    // not choose, when it chose `none` or one of them.
    coach.read_only = ollm_tools::READ_ONLY_TOOLS
        .iter()
        .map(|name| (*name).to_owned())
        .collect();
}

/// The built-in tools for the working directory.
pub(crate) struct Built {
    /// The approval policy they share.
    pub(crate) approver: Arc<Approver>,
    /// The tools.
    pub(crate) registry: ToolRegistry,
    /// What the model is told about the folder (core's `tools_context`), unless the
    /// config turned it off.
    pub(crate) context: Option<String>,
    /// The folder the tools work in, whose paths the coach's `known-paths`,
    /// `named-file` and `general-check` read.
    pub(crate) workspace: Workspace,
    /// The programs `run_command` may start, which the coach's `named-command` looks
    /// for in a message.
    pub(crate) programs: Vec<String>,
}

/// Tells the coach the paths the built-in read tools can take in `ws` now (`known-paths`,
/// which holds a routed call's path to them; `named-file`, `general-check`,
/// `read-named`, `read-source` and `change-after-idle`, which read a message that names
/// one, or a file that is not one of them): folders
/// for `list_dir`, files for `read_file`, both for `search_text`; none when the folder
/// holds too many, and no walk of the folder at all while those rules are off
/// (`named-file`, `read-source` and `change-after-idle` are on by default). With the paths, the names of the hidden entries at the top
/// (`change-after-idle`: a dotfile the message names is new only if it is none of them).
pub(crate) fn tell_paths(coach: &mut CoachConfig, ws: &Workspace) {
    coach.paths.clear();
    coach.hidden = None;
    let readers = [
        Rule::KnownPaths,
        Rule::NamedFile,
        Rule::GeneralCheck,
        Rule::ReadNamed,
        Rule::ReadSource,
        Rule::ChangeAfterIdle,
    ];
    if !readers.iter().any(|&r| coach.is_on(r)) {
        return;
    }
    let Some(paths) = ws.paths() else { return };
    let both = [paths.folders.clone(), paths.files.clone()].concat();
    coach.paths.insert("list_dir".to_owned(), paths.folders);
    coach.paths.insert("read_file".to_owned(), paths.files);
    coach.paths.insert("search_text".to_owned(), both);
    coach.hidden = ws.hidden();
}

/// The approval policy and the registry of the built-in tools for the working directory.
pub(crate) fn build(settings: &Settings, approval: Mode) -> Result<Built, crate::CliError> {
    let cwd = std::env::current_dir()?;
    let ws = Workspace::new(&cwd).map_err(cli_error)?;
    let approver = Arc::new(Approver::new(
        approval,
        &settings.tools.auto_approve,
        Arc::new(prompter::TerminalPrompter),
    ));
    let registry = ollm_tools::builtin(&ws, &config(settings), &approver).map_err(cli_error)?;
    let context = settings.tools.workspace_context.then(|| ws.overview());
    Ok(Built {
        approver,
        registry,
        context,
        workspace: ws,
        programs: ollm_tools::programs(&settings.tools.allowed_commands),
    })
}

fn cli_error(e: ollm_tools::ToolsError) -> crate::CliError {
    match e {
        ollm_tools::ToolsError::Registry(core) => crate::CliError::Core(core),
        other => crate::CliError::Other(other.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_model_is_told_the_folder_unless_the_config_says_no() {
        use crate::config::{Env, settle};
        let mut settings = settle(&Default::default(), &Env::default(), "c".into(), None).unwrap();
        let built = build(&settings, Mode::Headless).unwrap();
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        let context = built.context.unwrap();
        assert!(context.contains(&cwd.display().to_string()), "{context}");
        settings.tools.workspace_context = false;
        assert_eq!(build(&settings, Mode::Headless).unwrap().context, None);
    }

    #[test]
    fn the_coach_is_told_the_folders_paths_as_they_are_now() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("config.toml"), "port = 1").unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let mut coach = CoachConfig::default();
        tell_paths(&mut coach, &ws);
        assert_eq!(coach.paths["read_file"], ["config.toml"], "by default");
        assert_eq!(coach.hidden, Some(Vec::new()), "no hidden entries yet");
        let mut coach = CoachConfig::default();
        coach.turn_off(Rule::ReadSource);
        coach.turn_off(Rule::ChangeAfterIdle);
        coach.turn_off(Rule::NamedFile);
        tell_paths(&mut coach, &ws);
        assert!(coach.paths.is_empty(), "no rule that reads them");
        assert_eq!(coach.hidden, None, "nor their hidden names");
        let readers = [
            Rule::NamedFile,
            Rule::GeneralCheck,
            Rule::ReadNamed,
            Rule::ReadSource,
            Rule::ChangeAfterIdle,
        ];
        for rule in readers {
            let mut coach = CoachConfig::all_off();
            coach.off.remove(&rule);
            coach.turn_on(rule);
            tell_paths(&mut coach, &ws);
            assert_eq!(coach.paths["read_file"], ["config.toml"], "{rule}");
        }
        let mut coach = CoachConfig::default();
        coach.turn_on(Rule::KnownPaths);
        tell_paths(&mut coach, &ws);
        assert_eq!(coach.paths["read_file"], ["config.toml"]);
        assert_eq!(coach.paths["list_dir"], ["."]);
        std::fs::write(dir.path().join("port.txt"), "1").unwrap();
        tell_paths(&mut coach, &ws);
        assert_eq!(coach.paths["read_file"], ["config.toml", "port.txt"]);
        assert_eq!(coach.paths["search_text"], [".", "config.toml", "port.txt"]);
        std::fs::write(dir.path().join(".gitignore"), "target/").unwrap();
        tell_paths(&mut coach, &ws);
        assert_eq!(coach.hidden, Some(vec![".gitignore".to_owned()]));
        assert_eq!(coach.paths["read_file"], ["config.toml", "port.txt"]);
    }

    #[test]
    fn the_provider_key_variable_is_never_passed() {
        use crate::config::{Env, settle};
        let settings = settle(&Default::default(), &Env::default(), "c".into(), None).unwrap();
        let mut settings = settings;
        settings.provider.api_key_env = Some("OLLM_API_KEY".into());
        assert_eq!(config(&settings).secret_env, ["OLLM_API_KEY"]);
        let built = build(&settings, Mode::Headless).unwrap();
        assert_eq!(
            built.registry.names(),
            [
                "read_file",
                "list_dir",
                "search_text",
                "write_file",
                "run_command"
            ]
        );
    }

    /// The word the coach is told for the path argument is the one the built-in file
    /// tools declare.
    #[test]
    fn the_coach_is_told_the_built_in_tools_path_argument() {
        use crate::config::{Env, settle};
        let settings = settle(&Default::default(), &Env::default(), "c".into(), None).unwrap();
        let built = build(&settings, Mode::Headless).unwrap();
        let mut coach = CoachConfig::default();
        tell_coach(&mut coach, &built.programs);
        let key = coach.path_argument.unwrap();
        for name in ["read_file", "list_dir", "write_file"] {
            let schema = built.registry.schema(name).unwrap();
            assert!(
                schema.parameters["properties"].get(&key).is_some(),
                "{name}: {}",
                schema.parameters
            );
        }
    }
}
