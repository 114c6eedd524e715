//! Which command lines may run: the allowlist, the no-shell rule, and a per-program table
//! of options that write, run other programs or follow symlinks out of the folder.
//!
//! # Decisions
//! - The allowlist names programs (`ls`) or a program and one subcommand (`git status`);
//!   the most specific entry wins, and it is what "always allow" is keyed on.
//! - A path to a program is not the program: `./ls` and `/bin/ls` are refused.
//! - Options are refused by name, including inside a cluster of short options (`-nR`)
//!   and with an attached value (`--output=x`). Refusing a harmless spelling is the
//!   safe mistake.

/// Why a command line was refused before anything ran.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// The program name was empty.
    #[error("no program given")]
    Empty,
    /// A shell metacharacter appeared.
    #[error(
        "{0:?} contains {1:?}: commands run without a shell, so chaining, pipes, redirection and substitution are refused"
    )]
    Metacharacter(String, &'static str),
    /// The program is not on the allowlist.
    #[error("{0:?} is not an allowed command (allowed: {1})")]
    NotAllowed(String, String),
    /// An allowed read-only program was asked to change something or run a program.
    #[error("{0} {1}: refused, only read-only uses of {0} are allowed")]
    Writes(String, String),
    /// An option would follow symlinks, which may lead out of the working directory.
    #[error("{0} {1}: refused, it follows symlinks out of the working directory")]
    FollowsLinks(String, String),
}

/// Sequences that only mean something to a shell.
const METACHARACTERS: &[&str] = &[";", "&&", "||", "|", ">", "<", "`", "$(", "&", "\n"];

/// What a program's options may not do.
#[derive(Clone, Copy)]
enum Danger {
    Writes,
    FollowsLinks,
}

/// Refused options per program: long (or `find`-style) names, matched whole or before
/// `=`, and short option letters, matched anywhere in a `-abc` cluster.
const TABLE: &[(&str, Danger, &[&str], &[char])] = &[
    (
        "find",
        Danger::Writes,
        &[
            "-delete", "-exec", "-execdir", "-ok", "-okdir", "-fls", "-fprint", "-fprint0",
            "-fprintf",
        ],
        &[],
    ),
    ("find", Danger::FollowsLinks, &["-L", "-follow"], &[]),
    (
        "grep",
        Danger::FollowsLinks,
        &["--dereference-recursive"],
        &['R'],
    ),
    ("ls", Danger::FollowsLinks, &["--dereference"], &['L']),
    (
        "git",
        Danger::Writes,
        &["--output", "--ext-diff", "--textconv", "--no-index"],
        &['o'],
    ),
];

/// `git branch` options that create, delete, rename or reconfigure branches.
const GIT_BRANCH_WRITES: &[&str] = &[
    "-d",
    "-D",
    "--delete",
    "-m",
    "-M",
    "--move",
    "-c",
    "-C",
    "--copy",
    "-f",
    "--force",
    "-u",
    "--set-upstream-to",
    "--unset-upstream",
    "--edit-description",
    "-t",
    "--track",
    "--no-track",
    "--create-reflog",
];

/// Checks a command line against the allowlist, the metacharacter rule and the table;
/// returns the allowlist entry that allows it (what "always allow" is keyed on).
pub fn check_command(
    allowed: &[String],
    program: &str,
    args: &[String],
) -> Result<String, Refusal> {
    if program.trim().is_empty() {
        return Err(Refusal::Empty);
    }
    for word in std::iter::once(program).chain(args.iter().map(String::as_str)) {
        if let Some(m) = METACHARACTERS.iter().find(|m| word.contains(**m)) {
            return Err(Refusal::Metacharacter(word.to_owned(), m));
        }
    }
    let entry = allowed
        .iter()
        .filter(|entry| {
            let mut words = entry.split_whitespace();
            let Some(prog) = words.next() else {
                return false;
            };
            let rest: Vec<&str> = words.collect();
            prog == program
                && rest.len() <= args.len()
                && rest.iter().zip(args).all(|(want, got)| *want == got)
        })
        .max_by_key(|entry| entry.split_whitespace().count())
        .ok_or_else(|| Refusal::NotAllowed(program.to_owned(), allowed.join(", ")))?;
    check_options(program, args)?;
    if program == "git" && args.first().is_some_and(|a| a == "branch") {
        check_git_branch(&args[1..])?;
    }
    Ok(entry.clone())
}

/// Applies [`TABLE`] to the options (the words before a `--`).
fn check_options(program: &str, args: &[String]) -> Result<(), Refusal> {
    let options = args.iter().take_while(|a| *a != "--");
    for arg in options {
        for (prog, danger, long, short) in TABLE {
            if *prog != program {
                continue;
            }
            let name = arg.split_once('=').map_or(arg.as_str(), |(n, _)| n);
            let hit = long.contains(&name)
                || (arg.starts_with('-')
                    && !arg.starts_with("--")
                    && program != "find"
                    && arg[1..].chars().any(|c| short.contains(&c)));
            if hit {
                return Err(match danger {
                    Danger::Writes => Refusal::Writes(program.to_owned(), arg.clone()),
                    Danger::FollowsLinks => Refusal::FollowsLinks(program.to_owned(), arg.clone()),
                });
            }
        }
    }
    Ok(())
}

fn check_git_branch(rest: &[String]) -> Result<(), Refusal> {
    let writes = |why: String| Err(Refusal::Writes("git".to_owned(), why));
    if let Some(a) = rest.iter().find(|a| {
        GIT_BRANCH_WRITES.contains(&a.as_str())
            || GIT_BRANCH_WRITES
                .iter()
                .any(|w| w.starts_with("--") && a.starts_with(&format!("{w}=")))
    }) {
        return writes(a.clone());
    }
    let listing = rest.iter().any(|a| a == "-l" || a == "--list");
    if let Some(a) = rest.iter().find(|a| !a.starts_with('-')) {
        if !listing {
            return writes(format!("{a} (a branch name creates a branch)"));
        }
    }
    Ok(())
}
