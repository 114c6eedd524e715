//! Issue 14 through the binary: `ollm sessions show`, `rm`, `export --format
//! json|markdown`, and `ollm run --continue`, on sessions written by real runs against
//! the mock Ollama.

use super::*;

/// Runs two prompts in session `name`: a plain exchange, then one where the model reads
/// `notes.txt` with a tool and answers.
fn tool_session(c: &Case<Ollama>, name: &str) {
    std::fs::write(c.o.dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    c.mock().script("/api/chat", answer(&["first answer"]));
    c.run(&["run", "qwen3:8b", "--session", name, "one"]).ok();
    c.mock().script(
        "/api/chat",
        tool_call("read_file", json!({"path": "notes.txt"})),
    );
    c.mock().script("/api/chat", answer(&["it says alpha"]));
    c.run(&["run", "qwen3:8b", "--session", name, "read notes.txt"])
        .ok();
}

#[test]
fn show_prints_roles_text_calls_and_results() {
    let c = Case::ollama();
    tool_session(&c, "work");
    let out = c.bare(&["sessions", "show", "work"]);
    out.ok();
    let text = &out.out;
    let order = [
        "session work: qwen3:8b via ollama",
        "user: one",
        "assistant: first answer",
        "user: read notes.txt",
        "assistant called read_file {\"path\":\"notes.txt\"}",
        "tool result read_file [",
        "  alpha\n  beta",
        "assistant: it says alpha",
    ];
    let mut from = 0;
    for want in order {
        let at = text[from..]
            .find(want)
            .unwrap_or_else(|| panic!("{want:?} missing after byte {from}:\n{text}"));
        from += at + want.len();
    }
}

#[test]
fn export_writes_the_conversation_as_json_or_markdown() {
    let c = Case::ollama();
    tool_session(&c, "work");
    let out = c.bare(&["sessions", "export", "work"]);
    out.ok();
    let doc: Value = serde_json::from_str(&out.out).unwrap();
    assert_eq!(doc["session"], "work");
    assert_eq!(doc["model"], "qwen3:8b");
    assert_eq!(doc["provider"], "ollama");
    let messages: Vec<ollm_types::Message> =
        serde_json::from_value(doc["messages"].clone()).unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m.role().as_str()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    assert_eq!(
        messages[4].text(),
        "notes.txt:\nalpha\nbeta\n[notes.txt ends: 2 lines]"
    );

    let out = c.bare(&["sessions", "export", "work", "--format", "markdown"]);
    out.ok();
    let md = &out.out;
    assert!(md.starts_with("# Session work\n"), "{md}");
    for want in [
        "### User\n\nread notes.txt",
        "Tool call `read_file`",
        "### Tool result: `read_file`",
        "```\nnotes.txt:\nalpha\nbeta\n[notes.txt ends: 2 lines]\n```",
        "### Assistant\n\nit says alpha",
    ] {
        assert!(md.contains(want), "{want:?}:\n{md}");
    }
}

#[test]
fn rm_deletes_and_refuses_unknown_or_unsafe_names() {
    let c = Case::ollama();
    c.run(&["run", "qwen3:8b", "--session", "gone", "hi"]).ok();
    let file = c.o.data_dir().join("sessions/gone.jsonl");
    assert!(file.exists());
    let out = c.bare(&["sessions", "rm", "gone"]);
    out.ok();
    assert!(out.out.contains("removed session \"gone\""), "{}", out.out);
    assert!(!file.exists());
    // Unknown names, and names that would leave the sessions folder, exit 2 for every
    // command that takes a name.
    std::fs::write(c.o.dir.path().join("victim.jsonl"), "keep").unwrap();
    for args in [
        &["sessions", "rm", "gone"][..],
        &["sessions", "show", "nosuch"],
        &["sessions", "export", "nosuch"],
        &["sessions", "rm", "../victim"],
        &["sessions", "show", "../../victim"],
    ] {
        let out = c.bare(args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.err);
        assert!(
            out.err.contains("no session named") || out.err.contains("invalid session name"),
            "{args:?}: {}",
            out.err
        );
    }
    assert!(c.o.dir.path().join("victim.jsonl").exists());
}

#[test]
fn continue_resumes_the_most_recently_saved_session() {
    let c = Case::ollama();
    // None saved yet: a clear error, nothing sent.
    let out = c.run(&["run", "qwen3:8b", "--continue", "hello"]);
    assert_eq!(out.code, 2, "{}", out.err);
    assert!(
        out.err.contains("--continue: there is no saved session"),
        "{}",
        out.err
    );
    assert!(c.mock().requests_to("/api/chat").is_empty());

    c.mock().script("/api/chat", answer(&["about apples"]));
    c.run(&["run", "qwen3:8b", "--session", "apples", "apples?"])
        .ok();
    c.mock().script("/api/chat", answer(&["about pears"]));
    c.run(&["run", "qwen3:8b", "--session", "pears", "pears?"])
        .ok();
    // Make the order unmistakable, whatever the file system's clock resolution.
    let dir = c.o.data_dir().join("sessions");
    let now = std::time::SystemTime::now();
    let set = |name: &str, age: u64| {
        let f = std::fs::File::options()
            .append(true)
            .open(dir.join(format!("{name}.jsonl")))
            .unwrap();
        f.set_modified(now - Duration::from_secs(age)).unwrap();
    };
    set("apples", 10);
    set("pears", 100);

    // No model given: the session's own model is used; the prompt comes on stdin.
    c.mock().script("/api/chat", answer(&["more apples"]));
    let out = c.run_with(&["run", "--continue"], &[], Some("and then?"));
    out.ok();
    assert_eq!(out.out, "more apples\n");
    let sent = chat_messages(c.mock(), 2);
    let users: Vec<&str> = sent
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| typed(m["content"].as_str().unwrap()))
        .collect();
    assert_eq!(users, ["apples?", "and then?"]);
    assert_eq!(
        c.mock().requests_to("/api/chat")[2].body["model"],
        "qwen3:8b"
    );

    // `--continue` and `--session` together are a usage error.
    let out = c.run(&["run", "qwen3:8b", "--continue", "--session", "x", "hi"]);
    assert_eq!(out.code, 2, "{}", out.err);
}
