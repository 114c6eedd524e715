//! Tests of the file tools, called with the JSON arguments a model would send.

use super::*;
use crate::approval::{Answer, Mode};
use crate::testing::Scripted;
use serde_json::json;

async fn call<T: TypedTool>(tool: &T, args: Value) -> Result<Value, ToolError> {
    let args: T::Args = serde_json::from_value(args).unwrap();
    tool.run(args).await
}

fn setup() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\nbeta\ngamma beta\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/b.rs"), "fn beta() {}\n").unwrap();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/x"), "beta\n").unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    (dir, ws)
}

fn writer(ws: &Workspace, answers: &[Answer]) -> (WriteFile, Arc<Scripted>) {
    let prompter = Scripted::new(answers);
    let approver = Arc::new(Approver::new(Mode::Ask, &[], prompter.clone()));
    (WriteFile::new(ws.clone(), approver), prompter)
}

#[tokio::test]
async fn read_and_list() {
    let (_d, ws) = setup();
    let out = call(&ReadFile::new(ws.clone(), 1000), json!({"path": "a.txt"}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!("a.txt:\nalpha\nbeta\ngamma beta\n[a.txt ends: 3 lines]")
    );
    std::fs::write(ws.root().join("one"), "x").unwrap();
    std::fs::write(ws.root().join("none"), "").unwrap();
    let reader = ReadFile::new(ws.clone(), 1000);
    let out = call(&reader, json!({"path": "one"})).await.unwrap();
    assert_eq!(out, json!("one:\nx\n[one ends: 1 line]"));
    let out = call(&reader, json!({"path": "none"})).await.unwrap();
    assert_eq!(out, json!("none:\n[none ends: 0 lines]"));
    let out = call(&ListDir::new(ws.clone(), 1000), json!({}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!(
            "[2 files without an extension, 1 .txt file, 2 folders]\n.git/\na.txt\nnone\none\nsub/"
        )
    );
    let err = call(&ReadFile::new(ws, 1000), json!({"path": "../a.txt"}))
        .await
        .unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)));
}

#[tokio::test]
async fn search_is_literal_by_default_and_bounded() {
    let (_d, ws) = setup();
    let tool = SearchText::new(ws, 10_000);
    let out = call(&tool, json!({"pattern": "beta"})).await.unwrap();
    assert_eq!(
        out,
        json!("a.txt:2: beta\na.txt:3: gamma beta\nsub/b.rs:1: fn beta() {}")
    );
    let out = call(&tool, json!({"pattern": "b.ta\\(", "regex": true}))
        .await
        .unwrap();
    assert_eq!(out, json!("sub/b.rs:1: fn beta() {}"));
    let out = call(&tool, json!({"pattern": "b.ta"})).await.unwrap();
    assert_eq!(out, json!("no matches"));
    let out = call(&tool, json!({"pattern": "beta", "max_results": 1}))
        .await
        .unwrap();
    assert_eq!(out, json!("a.txt:2: beta\n[stopped after 1 matches]"));
}

#[tokio::test]
async fn write_needs_approval() {
    let (d, ws) = setup();
    let denied = Arc::new(Approver::new(Mode::Headless, &[], Scripted::new(&[])));
    let err = call(
        &WriteFile::new(ws.clone(), denied),
        json!({"path": "new.txt", "content": "x"}),
    )
    .await
    .unwrap_err();
    assert_eq!(
        err,
        ToolError::Denied(Some(crate::approval::HEADLESS_DENIAL.to_owned()))
    );
    assert!(!d.path().join("new.txt").exists());
    let (tool, _) = writer(&ws, &[Answer::Once]);
    call(&tool, json!({"path": "sub/new.txt", "content": "hello"}))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(d.path().join("sub/new.txt")).unwrap(),
        "hello"
    );
    // Issue 17: one byte is "1 byte".
    let (tool, _) = writer(&ws, &[Answer::Once]);
    let done = call(&tool, json!({"path": "one.txt", "content": "x"}))
        .await
        .unwrap();
    assert_eq!(done, json!("wrote 1 byte to one.txt"));
}

#[tokio::test]
async fn write_file_refuses_git_before_asking() {
    let (d, ws) = setup();
    let (tool, prompter) = writer(&ws, &[Answer::Once]);
    let err = call(
        &tool,
        json!({"path": ".git/config", "content": "[core]\n\tfsmonitor = \"touch /tmp/x\"\n"}),
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ToolError::Failed(_)), "{err:?}");
    assert_eq!(prompter.asked(), 0);
    assert!(!d.path().join(".git/config").exists());
}

#[tokio::test]
async fn approval_shows_the_path_and_what_changes() {
    // Issue 12, finding 1: the question showed only "write_file .git/config (99 bytes)".
    let (_d, ws) = setup();
    let (tool, prompter) = writer(&ws, &[Answer::Once, Answer::Deny]);
    call(
        &tool,
        json!({"path": "a.txt", "content": "alpha\nBETA\ngamma beta\n"}),
    )
    .await
    .unwrap();
    let _ = call(&tool, json!({"path": "sub/c.txt", "content": "one\ntwo\n"})).await;
    let shown: Vec<String> = prompter
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            "write_file a.txt (22 bytes)\n    @@ line 2 @@\n    - beta\n    + BETA",
            "write_file sub/c.txt (8 bytes)\n    + one\n    + two",
        ]
    );
}

#[test]
fn previews_are_bounded() {
    let long: String = (0..100).map(|i| format!("line {i}\n")).collect();
    let text = preview(None, &long);
    assert_eq!(text.lines().count(), PREVIEW_LINES + 1);
    assert!(text.ends_with("[88 more lines]"), "{text}");
    assert_eq!(preview(Some(b"same\n"), "same\n"), "(no change)");
    assert_eq!(preview(Some(b"a\nb\n"), "a\n"), "@@ line 2 @@\n- b");
}

#[cfg(unix)]
#[tokio::test]
async fn a_replaced_file_keeps_its_mode() {
    // Issue 12, finding 6: write_file replaced a 0755 script's mode with 0600.
    use std::os::unix::fs::PermissionsExt;
    let (d, ws) = setup();
    let script = d.path().join("run.sh");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (tool, _) = writer(&ws, &[Answer::Once]);
    call(
        &tool,
        json!({"path": "run.sh", "content": "#!/bin/sh\necho hi\n"}),
    )
    .await
    .unwrap();
    let mode = std::fs::metadata(&script).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o755);
    assert_eq!(
        std::fs::read_to_string(&script).unwrap(),
        "#!/bin/sh\necho hi\n"
    );
    // No temporary file is left beside it.
    let names: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with(".tmp")), "{names:?}");
}

/// What the eval's small models searched for, and what they now find (issue 24).
#[tokio::test]
async fn search_meets_the_way_small_models_ask() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        "# tally\n\nMaintainer: Dana Okafor\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("data.csv"), "name,size\nsmall,1\n").unwrap();
    std::fs::create_dir(dir.path().join("notes")).unwrap();
    std::fs::write(
        dir.path().join("notes/contacts.md"),
        "- Plumber: Marek, 5550 1234\n- Dentist: Dr. Sato, 5550 9876\n",
    )
    .unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let tool = SearchText::new(ws, 10_000);
    let check = |args: Value, want: &'static str| {
        let tool = &tool;
        async move {
            let out = call(tool, args.clone()).await.unwrap();
            assert_eq!(out, json!(want), "{args}");
        }
    };
    // Smart case: lower case ignores case, a capital makes it exact.
    check(
        json!({"pattern": "maintainer"}),
        "README.md:3: Maintainer: Dana Okafor",
    )
    .await;
    // A capital that finds nothing: tried ignoring case, and said so.
    check(
        json!({"pattern": "MAINTAINER"}),
        "no matches with that case; ignoring case:\nREADME.md:3: Maintainer: Dana Okafor",
    )
    .await;
    check(
        json!({"pattern": "Small.*", "regex": true}),
        "no matches with that case; ignoring case:\ndata.csv:2: small,1",
    )
    .await;
    check(json!({"pattern": "Nobody"}), "no matches").await;
    // Nothing in one short file searched on its own: the file is shown.
    check(
        json!({"pattern": "server_port", "path": "data.csv"}),
        "no matches in that file, which is short; data.csv:\nname,size\nsmall,1\n[data.csv ends: 2 lines]",
    )
    .await;
    // Nothing in the file searched, but lines elsewhere: those lines, then the file (the
    // 1.5B searched `Cargo.toml` for the port; it is in `config.toml`). A folder too.
    check(
        json!({"pattern": "plumber", "path": "data.csv"}),
        "no matches in data.csv; elsewhere in the folder:\n\
         notes/contacts.md:1: - Plumber: Marek, 5550 1234\n\n\
         data.csv, which is short: data.csv:\nname,size\nsmall,1\n[data.csv ends: 2 lines]",
    )
    .await;
    check(
        json!({"pattern": "Maintainer", "path": "notes"}),
        "no matches in notes; elsewhere in the folder:\nREADME.md:3: Maintainer: Dana Okafor",
    )
    .await;
    // A regex that finds nothing as text is tried as one, said or not (the 1.5B sent
    // `.*` with `"regex": false`), and the result says so.
    let as_regex = "no matches as text; as a regular expression:\ndata.csv:2: small,1";
    check(json!({"pattern": "^small", "regex": false}), as_regex).await;
    // Lines found in one short file searched on its own: the file follows them (the
    // 1.5B searched `sales.csv` for `units`, `max_results` 1, and got the header alone).
    check(
        json!({"pattern": "^small", "path": "data.csv"}),
        "no matches as text; as a regular expression:\ndata.csv:2: small,1\n\n\
         that file is short; all of it: data.csv:\nname,size\nsmall,1\n[data.csv ends: 2 lines]",
    )
    .await;
    check(json!({"pattern": "^large", "regex": false}), "no matches").await;
    // A file's name searched in the files' text: the file is shown, as read_file would.
    let csv = "no matches in the files' text, but that is a file; data.csv:\nname,size\nsmall,1\n[data.csv ends: 2 lines]";
    check(json!({"pattern": "data.csv"}), csv).await;
    check(json!({"pattern": "./DATA.csv"}), csv).await;
    // A pattern that mentions a file among other words: that file is shown.
    check(
        json!({"pattern": "launch code in data.csv?"}),
        "no matches in the files' text; the pattern names the file data.csv: data.csv:\n\
         name,size\nsmall,1\n[data.csv ends: 2 lines]",
    )
    .await;
    // A phrase no line holds whole: the lines with its words, the most of them first
    // (the 1.5B searched `plumber's number`; "the" and "again" say nothing).
    check(
        json!({"pattern": "the plumber's number again?", "path": "notes"}),
        "no line holds \"the plumber's number again?\"; lines with its words (plumber, \
         number), most first:\nnotes/contacts.md:1: - Plumber: Marek, 5550 1234",
    )
    .await;
    check(
        json!({"pattern": "dentist plumber"}),
        "no line holds \"dentist plumber\"; lines with its words (dentist, plumber), most \
         first:\nnotes/contacts.md:1: - Plumber: Marek, 5550 1234\nnotes/contacts.md:2: - \
         Dentist: Dr. Sato, 5550 9876",
    )
    .await;
    check(
        json!({"pattern": "sato dentist's phone"}),
        "no line holds \"sato dentist's phone\"; lines with its words (sato, dentist, \
         phone), most first:\nnotes/contacts.md:2: - Dentist: Dr. Sato, 5550 9876",
    )
    .await;
    // "launch to": the one word that says something is enough.
    check(
        json!({"pattern": "dentist at"}),
        "no line holds \"dentist at\"; lines with its words (dentist), most first:\n\
         notes/contacts.md:2: - Dentist: Dr. Sato, 5550 9876",
    )
    .await;
    // One word, filler only, or words no line holds: nothing more to show.
    check(json!({"pattern": "plumbers"}), "no matches").await;
    check(json!({"pattern": "what is it"}), "no matches").await;
    check(json!({"pattern": "the ferries"}), "no matches").await;
    // A plural `s` is left off a longer word (`keeps` finds `KEEP_DAYS`), and these
    // guessed lines are at least 5 whatever `max_results` says.
    check(
        json!({"pattern": "the plumbers", "max_results": 1}),
        "no line holds \"the plumbers\"; lines with its words (plumber), most first:\n\
         notes/contacts.md:1: - Plumber: Marek, 5550 1234",
    )
    .await;
    check(
        json!({"pattern": "dentist plumber", "max_results": 1}),
        "no line holds \"dentist plumber\"; lines with its words (dentist, plumber), most \
         first:\nnotes/contacts.md:1: - Plumber: Marek, 5550 1234\nnotes/contacts.md:2: - \
         Dentist: Dr. Sato, 5550 9876",
    )
    .await;
    check(json!({"pattern": "launch date"}), "no matches").await;
    // A file's name without its extension (the 0.5B searched `todo` for `todo.md`).
    check(json!({"pattern": "DATA"}), csv).await;
    // A name that only part of a path holds: the paths are named.
    check(
        json!({"pattern": "contact"}),
        "no matches in the files' text; paths whose name contains it: notes/contacts.md",
    )
    .await;
}

#[tokio::test]
async fn reading_a_folder_names_what_it_holds() {
    let (_d, ws) = setup();
    let reader = ReadFile::new(ws.clone(), 1000);
    let error = |path: &str| {
        let reader = &reader;
        let path = path.to_owned();
        async move {
            match call(reader, json!({"path": path})).await {
                Err(ToolError::Failed(message)) => message,
                other => panic!("{path}: {other:?}"),
            }
        }
    };
    // The hidden .git is not named.
    assert_eq!(
        error(".").await,
        ". is a folder, not a file; read one of its files by its path (NAME). It holds: \
         a.txt, sub/"
    );
    assert_eq!(
        error("sub/").await,
        "sub is a folder, not a file; read one of its files by its path (sub/NAME). It \
         holds: b.rs"
    );
    let root = ws.root().to_str().unwrap();
    assert!(error(root).await.starts_with(". is a folder"));
}

#[tokio::test]
async fn listing_a_file_shows_it() {
    let (_d, ws) = setup();
    let out = call(&ListDir::new(ws, 1000), json!({"path": "sub/b.rs"}))
        .await
        .unwrap();
    assert_eq!(
        out,
        json!(
            "sub/b.rs is a file, not a folder; its text: sub/b.rs:\nfn beta() {}\n[sub/b.rs ends: 1 line]"
        )
    );
}

#[test]
fn a_listing_is_tallied_by_extension_without_a_total() {
    let check = |names: &[&str], want: &str| {
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        assert_eq!(super::tally(&names), want, "{names:?}");
    };
    check(
        &[
            "README.md",
            "backup.py",
            "requirements.txt",
            "resize.py",
            "weather.py",
        ],
        "[3 .py files, 1 .md file, 1 .txt file]",
    );
    check(&["src/", "Cargo.toml"], "[1 .toml file, 1 folder]");
    check(
        &["A.PY", "b.py", "Makefile", ".env", "x/", "y/"],
        "[2 files without an extension, 2 .py files, 2 folders]",
    );
    check(&[], "[]");
}

/// A search for a file's name (with its extension) that matches lines elsewhere: the
/// file's text follows the matches. A name without a `.` or `/`, or a phrase, does not.
#[tokio::test]
async fn a_search_for_a_files_name_shows_the_file_after_the_matches() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("README.md"),
        "backup.py runs nightly
",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("backup.py"),
        "KEEP_DAYS = 30
",
    )
    .unwrap();
    let tool = SearchText::new(Workspace::new(dir.path()).unwrap(), 10_000);
    let file =
        "\n\nthat is also a file's name; backup.py:\nKEEP_DAYS = 30\n[backup.py ends: 1 line]";
    for (pattern, want) in [
        (
            "backup.py",
            format!("README.md:1: backup.py runs nightly{file}"),
        ),
        (
            "BACKUP.PY",
            format!(
                "no matches with that case; ignoring case:\nREADME.md:1: backup.py runs nightly{file}"
            ),
        ),
        ("backup", "README.md:1: backup.py runs nightly".to_owned()),
        (
            "backup.py runs",
            "README.md:1: backup.py runs nightly".to_owned(),
        ),
    ] {
        let out = call(&tool, json!({"pattern": pattern, "max_results": 1}))
            .await
            .unwrap();
        assert_eq!(out, json!(want), "{pattern}");
    }
}

/// A checklist read whole ends with its open and done items, after the end line, and a
/// table opens with its totals (`with_header`: where the 1.5B read each best); a
/// checklist too long to end with them within the limit has them under its name, where
/// the cut keeps them.
#[tokio::test]
async fn a_checklist_read_whole_is_counted_after_it_and_a_table_over_it() {
    let (_d, ws) = setup();
    std::fs::write(ws.root().join("todo.md"), "- [ ] a\n- [x] b\n- [ ] c\n").unwrap();
    let out = call(&ReadFile::new(ws.clone(), 1000), json!({"path": "todo.md"}))
        .await
        .unwrap();
    let shown = "todo.md:\n- [ ] a\n- [x] b\n- [ ] c\n[todo.md ends: 3 lines]\n\
                 [a checklist, 2 open \"[ ]\", 1 done \"[x]\"]";
    assert_eq!(out, json!(shown));
    let out = call(
        &SearchText::new(ws.clone(), 1000),
        json!({"pattern": "zzz", "path": "todo.md"}),
    )
    .await
    .unwrap();
    assert_eq!(
        out,
        json!(format!("no matches in that file, which is short; {shown}"))
    );
    std::fs::write(ws.root().join("t.csv"), "k,n\na,1\nb,2\n").unwrap();
    let out = call(&ReadFile::new(ws.clone(), 1000), json!({"path": "t.csv"}))
        .await
        .unwrap();
    let out = out.as_str().unwrap();
    assert!(
        out.starts_with("t.csv:\n[2 rows under the header;"),
        "{out}"
    );
    assert!(out.ends_with("b,2\n[t.csv ends: 3 lines]"), "{out}");
    let long: String = (0..100).map(|i| format!("- [ ] item {i}\n")).collect();
    std::fs::write(ws.root().join("long.md"), &long).unwrap();
    let out = call(&ReadFile::new(ws, 300), json!({"path": "long.md"}))
        .await
        .unwrap();
    let out = out.as_str().unwrap();
    let counts = "long.md:\n[a checklist, 100 open \"[ ]\", 0 done \"[x]\"]\n- [ ] item 0\n";
    assert!(out.starts_with(counts), "{out}");
    assert!(out.contains("[output truncated"), "{out}");
}
