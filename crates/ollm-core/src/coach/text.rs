//! The coach's text rules: what an answer says ([`says_it_cannot`], for `can-nudge`),
//! the tools context put before the first prompt ([`before_first_prompt`],
//! `tools-context`) and taken off a reply that echoes it ([`drop_echo`], `drop-echo`),
//! the file a message names ([`named_file`], `named-file`), and an answer that asks
//! the question back ([`restates`], `answer-after-echo`).
//! Pure functions over strings and messages; the measurements are in the coach's
//! Decisions.

use ollm_types::{ContentPart, Message, Role};

/// Whether `answer` says it cannot reach the files or run anything: an inability phrase
/// and a word about what the tools do, in under 600 bytes.
pub(crate) fn says_it_cannot(answer: &str) -> bool {
    const CANNOT: &[&str] = &[
        "i cannot",
        "i can't",
        "i can not",
        "i am unable",
        "i'm unable",
        "i am not able",
        "i'm not able",
        "i don't have access",
        "i do not have access",
        "i don't have the ability",
        "i do not have the ability",
    ];
    const REACH: &[&str] = &[
        "access", "file", "folder", "director", "execute", "run ", "read", "system", "browse",
        "external", "local",
    ];
    if answer.len() >= 600 {
        return false;
    }
    let text = answer.to_lowercase().replace('\u{2019}', "'");
    CANNOT.iter().any(|c| text.contains(c)) && REACH.iter().any(|r| text.contains(r))
}

/// Puts `context` before the conversation's first user message, in the request only.
pub(crate) fn before_first_prompt(messages: &mut [Message], context: &str) {
    let Some(first) = messages.iter_mut().find(|m| m.role() == Role::User) else {
        return;
    };
    let mut parts = first.parts().to_vec();
    match parts.first_mut() {
        Some(ContentPart::Text { text }) => *text = format!("{context}\n\n{text}"),
        _ => parts.insert(
            0,
            ContentPart::Text {
                text: format!("{context}\n\n"),
            },
        ),
    }
    if let Ok(prefixed) = Message::new(Role::User, parts, None, None) {
        *first = prefixed;
    }
}

/// Drops `context` from the front of a reply that repeats it: from the context's first
/// line, when the reply opens with it, to the end of its last line.
pub(crate) fn drop_echo(raw: &mut String, context: &str) {
    let (Some(first), Some(last)) = (context.lines().next(), context.lines().last()) else {
        return;
    };
    let body = raw.trim_start();
    if first.trim().is_empty() || !body.starts_with(first.trim()) {
        return;
    }
    let from = raw.len() - body.len();
    let Some(end) = raw[from..]
        .find(last.trim())
        .map(|at| from + at + last.trim().len())
    else {
        return;
    };
    raw.replace_range(..end, "");
}

/// The path `prompt` names that `path` is without its leading dot (`.gitignore` for
/// `gitignore`, `config/.env` for `./config/env`), ignoring case: `None` when `path`
/// already has one, or the message names no such path. Words are split as
/// [`named_file`] splits them.
pub(crate) fn dotted_path(prompt: &str, path: &str) -> Option<String> {
    let given = path.trim().trim_start_matches("./");
    let (folder, name) = given.rsplit_once('/').map_or(("", given), |(f, n)| (f, n));
    if name.is_empty() || name.starts_with('.') {
        return None;
    }
    path_words(prompt)
        .map(|w| w.trim_start_matches("./"))
        .find(|w| {
            let (f, n) = w.rsplit_once('/').map_or(("", *w), |(f, n)| (f, n));
            n.strip_prefix('.')
                .is_some_and(|n| n.eq_ignore_ascii_case(name))
                && f.eq_ignore_ascii_case(folder)
        })
        .map(str::to_owned)
}

/// The words of `prompt` that may be paths: split at white space, quotes and brackets,
/// with a sentence's closing `.`, `?`, `!` or `:` trimmed.
fn path_words(prompt: &str) -> impl Iterator<Item = &str> {
    prompt
        .split(|c: char| c.is_whitespace() || "\"'`,;()[]<>".contains(c))
        .map(|w| w.trim_end_matches(['.', '?', '!', ':']))
}

/// The first of `files` (paths the caller listed; folders, ending in `/`, are skipped)
/// that `prompt` names as a word, by its path or by its name, ignoring case. Only words
/// with a `.` or a `/` count, so a plain word ("notes", "readme") never names a file.
pub(crate) fn named_file<'a>(
    prompt: &str,
    files: impl IntoIterator<Item = &'a String>,
) -> Option<String> {
    let words: Vec<String> = path_words(prompt)
        .map(str::to_lowercase)
        .filter(|w| w.contains(['.', '/']))
        .collect();
    files.into_iter().find_map(|path| {
        let lower = path.to_lowercase();
        let name = lower.rsplit('/').next().unwrap_or_default();
        let named = !lower.ends_with('/')
            && (words.iter())
                .any(|w| *w == lower || *w == name || w.trim_start_matches("./") == lower);
        named.then(|| path.clone())
    })
}

/// Whether `prompt` names `path` (`overwrite-needs-name`): as [`named_file`] finds it,
/// or its name without the extension as a word of its own, ignoring case ("the readme"
/// names `README.md`, "the backup script" `backup.py`).
pub(crate) fn names_path(prompt: &str, path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    let stem = name
        .split_once('.')
        .map_or(name, |(stem, _)| stem)
        .to_lowercase();
    let words = prompt.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '-'));
    named_file(prompt, [&path.to_owned()]).is_some()
        || (!stem.is_empty() && words.map(str::to_lowercase).any(|w| w == stem))
}

/// Whether `prompt` names one of `programs` as a word of its own, ignoring case
/// (`named-command`): "run wc -l on sales.csv" names `wc`; "python venv how?" names
/// none of `ls`, `wc`, `git`; "git-log" and "grep's" name `git` and `grep`, "github"
/// does not name `git`.
pub(crate) fn names_program<'a>(
    prompt: &str,
    programs: impl IntoIterator<Item = &'a String>,
) -> bool {
    let words: Vec<String> = prompt
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .map(str::to_lowercase)
        .collect();
    programs
        .into_iter()
        .any(|p| words.iter().any(|w| *w == p.to_lowercase()))
}

/// Whether `prompt` names a file that is not one of `files` (the caller's paths): a
/// word, split as [`named_file`] splits them, whose last part is a name with an
/// extension of one to five letters or digits, one a letter (`port.txt`, not `1.5` or
/// `example.com/`), that is no listed file's path or name, ignoring case.
pub(crate) fn names_new_file<'a>(
    prompt: &str,
    files: impl IntoIterator<Item = &'a String> + Clone,
) -> bool {
    !new_files(prompt, files).is_empty()
}

/// Whether `prompt` names a file (`write-needs-file`): one of `files` as
/// [`named_file`] finds them, a new one as [`names_new_file`] does, or a dotfile, a
/// word that is a `.` and two or more letters, digits, `_` or `-` (`.gitignore`,
/// `.env`; not `...` or `.5`).
pub(crate) fn names_file<'a>(
    prompt: &str,
    files: impl IntoIterator<Item = &'a String> + Clone,
) -> bool {
    named_file(prompt, files.clone()).is_some()
        || names_new_file(prompt, files)
        || path_words(prompt).any(|w| is_dotfile(w.rsplit('/').next().unwrap_or_default()))
}

/// Whether `name` is a dotfile's name: a `.` and two or more letters, digits, `_` or
/// `-`, one a letter (`.gitignore`, `.env`; not `...` or `.5`).
fn is_dotfile(name: &str) -> bool {
    name.strip_prefix('.').is_some_and(|n| {
        n.len() >= 2
            && n.chars().any(|c| c.is_ascii_alphabetic())
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))
    })
}

/// Extensions of kinds of files, which a word like `.toml` names rather than a dotfile
/// ("what does a .toml file usually hold?", "number of .py files?").
const KINDS: &[&str] = &[
    "txt", "md", "py", "rs", "toml", "json", "yaml", "yml", "csv", "js", "ts", "html", "css", "sh",
    "log", "xml", "ini", "cfg", "lock", "go", "java", "rb", "php", "sql", "pdf", "png", "jpg",
    "zip",
];

/// The dotfiles `prompt` names at the top of the caller's scope (a word that is a
/// dotfile's name, with no `/`) that are none of `hidden` (the hidden entries there,
/// ignoring case) and no extension, of [`KINDS`] or of one of `files` (`.toml` beside
/// `Cargo.toml` is a kind of file), as written, each once (`change-after-idle`: "add a
/// .gitignore that ignores __pycache__" names `.gitignore`, a new file when none
/// exists).
pub(crate) fn new_dotfiles<'a>(
    prompt: &str,
    hidden: &[String],
    files: impl IntoIterator<Item = &'a String> + Clone,
) -> Vec<String> {
    let known = |w: &str| {
        hidden
            .iter()
            .any(|h| h.trim_end_matches('/').eq_ignore_ascii_case(w))
    };
    let kind = |w: &str| {
        let ext = w.trim_start_matches('.').to_lowercase();
        KINDS.contains(&ext.as_str())
            || (files.clone().into_iter()).any(|f| {
                f.to_lowercase()
                    .rsplit_once('.')
                    .is_some_and(|(_, e)| e == ext)
            })
    };
    path_words(prompt)
        .filter(|w| is_dotfile(w) && !known(w) && !kind(w))
        .fold(Vec::new(), |mut found, w| {
            if !found.iter().any(|f: &String| f.eq_ignore_ascii_case(w)) {
                found.push(w.to_owned());
            }
            found
        })
}

/// The one of `files` (folders, ending in `/`, skipped) that `prompt` names by its
/// name without the extension, as a word of its own, ignoring case, when exactly one
/// is (`read-source`: "config port -> port.txt" names `config.toml`); files it names
/// by path or name as [`named_file`] finds them count too.
pub(crate) fn file_named_by_stem<'a>(
    prompt: &str,
    files: impl IntoIterator<Item = &'a String>,
) -> Option<String> {
    let mut named = files
        .into_iter()
        .filter(|p| !p.ends_with('/') && names_path(prompt, p));
    let first = named.next()?;
    named.next().is_none().then(|| first.clone())
}

/// The files `prompt` names that are not one of `files`, as [`names_new_file`] finds
/// them, as written (lowercase), each once.
pub(crate) fn new_files<'a>(
    prompt: &str,
    files: impl IntoIterator<Item = &'a String> + Clone,
) -> Vec<String> {
    let known = |word: &str| {
        files.clone().into_iter().any(|path| {
            let lower = path.to_lowercase();
            let name = lower.rsplit('/').next().unwrap_or_default();
            word == lower || word == name || word.trim_start_matches("./") == lower
        })
    };
    path_words(prompt)
        .map(str::to_lowercase)
        .filter(|w| !w.contains("://"))
        .filter(|w| {
            let name = w.rsplit('/').next().unwrap_or_default();
            let file_like = name.rsplit_once('.').is_some_and(|(stem, ext)| {
                !stem.is_empty()
                    && (1..=5).contains(&ext.len())
                    && ext.chars().all(|c| c.is_ascii_alphanumeric())
                    && ext.chars().any(|c| c.is_ascii_alphabetic())
            });
            file_like && !known(w)
        })
        .fold(Vec::new(), |mut found, w| {
            if !found.contains(&w) {
                found.push(w);
            }
            found
        })
}

/// Whether `answer` restates `asked` as a question instead of answering it: one line
/// of at most 240 bytes that ends with `?` and holds at least two, and at least 60%,
/// of the message's words of three letters or more (a few function words aside)
/// (`answer-after-echo`; the 0.5B answered "Could you explain how to create a virtual
/// environment for Python?" with "Can you explain how to create a virtual environment
/// for Python?").
pub(crate) fn restates(answer: &str, asked: &str) -> bool {
    let answer = answer.trim();
    if answer.len() > 240 || answer.contains('\n') || !answer.ends_with('?') {
        return false;
    }
    let asked = words(asked);
    let said = words(answer);
    let shared = asked.iter().filter(|w| said.contains(w)).count();
    shared >= 2 && shared * 5 >= asked.len() * 3
}

/// The lowercase words of three letters or more of `text`, once each, without the
/// function words a restated question swaps freely.
fn words(text: &str) -> Vec<String> {
    const FUNCTION: &[&str] = &[
        "the", "and", "you", "your", "can", "could", "would", "will", "please", "for", "how",
        "what", "with", "this", "that", "are", "does", "tell", "explain", "show",
    ];
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        let word = word.to_lowercase();
        if word.chars().count() >= 3 && !FUNCTION.contains(&word.as_str()) && !out.contains(&word) {
            out.push(word);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_counts_as_named_only_as_a_word_of_its_own() {
        let programs = ["ls", "wc", "git", "grep"].map(str::to_owned);
        for (prompt, named) in [
            ("run wc -l on sales.csv", true),
            ("Could you run `wc -l sales.csv`?", true),
            ("WC please", true),
            ("what does git-log show", true),
            ("grep's output?", true),
            ("python venv how?", false),
            ("my github page", false),
            ("how many things are still open on my todo list?", false),
            ("", false),
        ] {
            assert_eq!(names_program(prompt, &programs), named, "{prompt}");
        }
    }

    #[test]
    fn a_file_the_message_names_that_does_not_exist_is_new() {
        let files = ["config.toml".to_owned(), "src/main.rs".to_owned()];
        let check = |prompt: &str, expected: bool| {
            assert_eq!(names_new_file(prompt, &files), expected, "{prompt}");
        };
        check("save the port from config.toml into port.txt", true);
        check("config port -> notes/port.txt.", true);
        check("copy main.rs to src/old.rs", true);
        // Only files that exist, none, or words that are no file.
        check("what port does config.toml set?", false);
        check("fix src/main.rs please", false);
        check("save the port", false);
        check("bump the version to 1.5", false);
        check("see https://example.com/a.html", false);
        check("the config.TOML file", false);
    }

    #[test]
    fn a_dotfile_at_the_top_that_is_not_hidden_there_is_new() {
        let hidden = [".git/".to_owned(), ".env".to_owned()];
        let files = ["config.toml".to_owned(), "notes.adoc".to_owned()];
        let check = |prompt: &str, expected: &[&str]| {
            assert_eq!(new_dotfiles(prompt, &hidden, &files), expected, "{prompt}");
        };
        check("add a .gitignore that ignores __pycache__", &[".gitignore"]);
        check("`.editorconfig`: 4 spaces.", &[".editorconfig"]);
        check(".Gitignore and .gitignore", &[".Gitignore"]);
        // Hidden already, nested, or no dotfile's name.
        check("put the key in .ENV", &[]);
        check("what is .git for?", &[]);
        check("add src/.gitignore", &[]);
        check("wait... what? .5 is a number", &[]);
        check("save it to port.txt", &[]);
        // A kind of file: a known extension, or one of the caller's files'.
        check("what does a .toml file usually hold?", &[]);
        check("number of .py files?", &[]);
        check("any .ADOC notes?", &[]);
    }

    #[test]
    fn a_file_is_named_by_its_stem_only_when_no_other_is() {
        let files = [
            "config.toml",
            "src/main.rs",
            "src/",
            "notes.md",
            "notes.txt",
        ]
        .map(str::to_owned);
        let check = |prompt: &str, expected: Option<&str>| {
            let found = file_named_by_stem(prompt, &files);
            assert_eq!(found.as_deref(), expected, "{prompt}");
        };
        check("config port -> port.txt", Some("config.toml"));
        check(
            "the Main function's name into name.txt",
            Some("src/main.rs"),
        );
        check("copy config.toml to old.toml", Some("config.toml"));
        // Two files of that stem, a folder, or a stem inside a word.
        check("the notes into all.txt", None);
        check("list src into files.txt", None);
        check("configure it", None);
    }

    #[test]
    fn a_path_given_without_the_dot_the_message_names_gets_it() {
        let check = |prompt: &str, path: &str, expected: Option<&str>| {
            assert_eq!(
                dotted_path(prompt, path).as_deref(),
                expected,
                "{prompt} / {path}"
            );
        };
        check(
            "add a .gitignore that ignores __pycache__",
            "gitignore",
            Some(".gitignore"),
        );
        check(
            ".gitignore for __pycache__",
            "./gitignore",
            Some(".gitignore"),
        );
        check(
            "put the key in `config/.env`.",
            "config/env",
            Some("config/.env"),
        );
        check("what's in .ENV?", "env", Some(".ENV"));
        // The path has its dot, the message names no dotted path, or another folder.
        check("add a .gitignore", ".gitignore", None);
        check("add a gitignore", "gitignore", None);
        check("edit config/.env", "env", None);
        check("make .gitignore", "src/gitignore", None);
        check("a sentence ends here.", "here", None);
        check("add a .gitignore", "", None);
    }

    #[test]
    fn a_file_is_named_by_its_path_or_its_name_as_a_word() {
        let files: Vec<String> = ["src/", "config.toml", "src/main.rs", "README"]
            .map(String::from)
            .to_vec();
        let check = |prompt: &str, expected: Option<&str>| {
            assert_eq!(named_file(prompt, &files).as_deref(), expected, "{prompt}");
        };
        check("which port does config.toml set?", Some("config.toml"));
        check("Look at `Config.TOML`, please.", Some("config.toml"));
        check("what's in ./src/main.rs", Some("src/main.rs"));
        check("main.rs todo?", Some("src/main.rs"));
        // No word names a file: a kind of file, a folder, a word without a dot.
        check("what's a toml file for?", None);
        check("what is in src/?", None);
        check("show me the readme", None);
        check("how do I write a config.yaml?", None);
    }

    #[test]
    fn saying_it_cannot_is_told_from_answers() {
        let check =
            |text: &str, expected: bool| assert_eq!(says_it_cannot(text), expected, "{text}");
        check(
            "I'm sorry, but I cannot execute external processes or interact with the operating \
             system. Therefore, I cannot provide the release codename from `docs/guide.md`.",
            true,
        );
        check("I don\u{2019}t have access to your files.", true);
        check(
            "As an AI, I am unable to read files on your computer.",
            true,
        );
        check("Tokyo is the capital of Japan.", false);
        check("I can't say; opinions differ on the best language.", false);
        check(
            "The file notes.txt says the launch code is 4471-KESTREL.",
            false,
        );
        check(
            &format!("I cannot read it. {}", "More. ".repeat(120)),
            false,
        );
    }

    #[test]
    fn an_echo_of_the_context_is_dropped_from_the_front_only() {
        let context = "[Working folder: /w\nTop entries: a, b]";
        let check = |reply: &str, expected: &str| {
            let mut raw = reply.to_owned();
            drop_echo(&mut raw, context);
            assert_eq!(raw, expected, "{reply:?}");
        };
        check(
            "[Working folder: /w\nTop entries: a, b]\n```json\n{}\n```",
            "\n```json\n{}\n```",
        );
        check("  [Working folder: /w\nTop entries: a, b] x", " x");
        check(
            "The folder is [Working folder: /w",
            "The folder is [Working folder: /w",
        );
        check("plain", "plain");
    }

    #[test]
    fn the_context_opens_the_first_user_message() {
        let mut messages = vec![
            Message::user("q1"),
            Message::assistant("a"),
            Message::user("q2"),
        ];
        before_first_prompt(&mut messages, "[ctx]");
        let texts: Vec<String> = messages.iter().map(Message::text).collect();
        assert_eq!(texts, ["[ctx]\n\nq1", "a", "q2"]);
        let mut none = vec![Message::assistant("a")];
        before_first_prompt(&mut none, "[ctx]");
        assert_eq!(none[0].text(), "a");
    }

    #[test]
    fn an_answer_that_asks_the_question_back_restates_it() {
        let check = |asked: &str, answer: &str, expected: bool| {
            assert_eq!(restates(answer, asked), expected, "{asked} / {answer}");
        };
        let venv = "Could you explain how to create a virtual environment for Python?";
        check(
            venv,
            "Can you explain how to create a virtual environment for Python?",
            true,
        );
        check(
            venv,
            "  How can I create a virtual environment in Python?\n",
            true,
        );
        check(
            "how do I make a python virtual environment?",
            "How do I create a Python virtual environment?",
            true,
        );
        check(
            "rust for loop syntax?",
            "Can you explain the syntax of a Rust loop?",
            true,
        );
        // An answer, a question of its own, or one that shares a word or two.
        check(venv, "Run `python -m venv .venv`, then activate it.", false);
        check(
            venv,
            "Do you want a virtual environment\nfor Python? Which version?",
            false,
        );
        check(
            "Can you help me?",
            "Of course! What do you need help with?",
            false,
        );
        check(
            "thanks, that's all for now!",
            "Is there anything else I can help with?",
            false,
        );
        check(
            "Could you explain what TOML files are normally for?",
            "Could you provide a simple example of how to use TOML in Python?",
            false,
        );
        let long = format!("{} virtual environment Python?", "word ".repeat(60));
        check(venv, &long, false);
    }
}
