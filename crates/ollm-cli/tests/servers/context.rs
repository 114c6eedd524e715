//! Issue 11 through the binary: `--context-length`, the config's `context_length` and
//! `[models."NAME"]` reach the wire as `num_ctx`; `--no-compact` refuses a prompt over
//! the window with a hint to `/compact`; `ollm show` says where the window came from; a
//! compaction is saved as a `compact` record, so `--session` resumes exactly what the
//! model saw.

use super::*;

/// The `num_ctx` of the last `/api/chat` request.
fn num_ctx_sent(c: &Case<Ollama>) -> Option<u64> {
    let chats = c.mock().requests_to("/api/chat");
    chats.last()?.body["options"]["num_ctx"].as_u64()
}

#[test]
fn the_window_setting_is_the_num_ctx_sent() {
    // (config file, flags, num_ctx sent): the flag over `[models."NAME"]` over
    // `context_length`, over what the server reports (qwen3:8b: 40960 capped at 8192 by core).
    let cases: [(&str, &[&str], u64); 5] = [
        ("", &[], 8192),
        ("context_length = 3000\n", &[], 3000),
        (
            "context_length = 3000\n[models.\"qwen3:8b\"]\ncontext_length = 5000\n",
            &[],
            5000,
        ),
        (
            "context_length = 3000\n[models.\"qwen3:8b\"]\ncontext_length = 5000\n",
            &["--context-length", "2500"],
            2500,
        ),
        ("[models.other]\ncontext_length = 5000\n", &[], 8192),
    ];
    for (config, flags, want) in cases {
        let c = Case::ollama();
        c.o.write_config(config);
        c.mock().script("/api/chat", answer(&["ok"]));
        let mut args = vec!["run", "qwen3:8b", "--no-tools"];
        args.extend_from_slice(flags);
        args.push("hi");
        c.run(&args).ok();
        assert_eq!(num_ctx_sent(&c), Some(want), "{config:?} {flags:?}");
    }
}

#[test]
fn no_compact_refuses_a_prompt_over_the_window_with_a_hint() {
    let c = Case::ollama();
    let long = "word ".repeat(200);
    let out = c.run(&[
        "run",
        "qwen3:8b",
        "--no-tools",
        "--no-compact",
        "--context-length",
        "100",
        &long,
    ]);
    assert_ne!(out.code, 0, "{}", out.err);
    assert!(out.err.contains("/compact"), "{}", out.err);
    assert!(c.mock().requests_to("/api/chat").is_empty());
}

#[test]
fn show_says_where_the_window_came_from() {
    let c = Case::ollama();
    let out = c.run(&["show", "qwen3:8b"]);
    out.ok();
    assert!(
        out.out
            .contains("window           8192 tokens (server: /api/show, sent as num_ctx)"),
        "{}",
        out.out
    );
    c.o.write_config("[models.\"qwen3:8b\"]\ncontext_length = 2048\n");
    let out = c.run(&["show", "qwen3:8b"]);
    out.ok();
    assert!(
        out.out
            .contains("2048 tokens (config [models.\"qwen3:8b\"])"),
        "{}",
        out.out
    );
    let c = Case::openai();
    c.mock()
        .set_props(json!({"default_generation_settings": {"n_ctx": 2048}}));
    let out = c.run(&["show", "mock-model"]);
    out.ok();
    assert!(
        out.out.contains("2048 tokens (server: /props n_ctx)"),
        "{}",
        out.out
    );
}

/// The (role, content) pairs of the `n`th chat request.
fn turns(c: &Case<Ollama>, n: usize) -> Vec<(String, String)> {
    chat_messages(c.mock(), n)
        .iter()
        .map(|m| {
            let text = |k: &str| m[k].as_str().unwrap_or_default().to_owned();
            (text("role"), text("content"))
        })
        .collect()
}

#[test]
fn a_resumed_session_after_a_compaction_is_the_compacted_history() {
    let c = Case::ollama();
    let long = |n: usize| format!("answer {n}: {}", "blah ".repeat(180));
    for n in 1..=3 {
        if n == 3 {
            // The third request passes 80% of the window: the summary is asked first.
            c.mock()
                .script("/api/chat", answer(&["They talked about blah."]));
        }
        c.mock().script("/api/chat", answer(&[&long(n)]));
        let prompt = format!("question {n}");
        let args = [
            "run",
            "qwen3:8b",
            "--no-tools",
            "--context-length",
            "500",
            "--session",
            "long",
            &prompt,
        ];
        let out = c.run(&args);
        out.ok();
        assert_eq!(out.err.contains("context compacted"), n == 3, "{}", out.err);
    }
    let session = std::fs::read_to_string(c.o.data_dir().join("sessions/long.jsonl")).unwrap();
    assert!(
        session.contains(r#""type":"compact","summary":"They talked about blah.""#),
        "{session}"
    );
    // The request after the summary is what the model saw; the next run resumes it.
    c.mock().script("/api/chat", answer(&["fourth"]));
    let args = [
        "run",
        "qwen3:8b",
        "--no-tools",
        "--context-length",
        "500",
        "--session",
        "long",
        "question 4",
    ];
    c.run(&args).ok();
    let seen = turns(&c, 3);
    let mut resumed = seen.clone();
    resumed.extend([
        ("assistant".to_owned(), long(3)),
        ("user".to_owned(), "question 4".to_owned()),
    ]);
    assert_eq!(turns(&c, 4), resumed);
    assert_eq!(seen[0], ("user".to_owned(), "question 1".to_owned()));
    assert!(seen[1].1.contains("They talked about blah."), "{seen:?}");
    assert_eq!(seen.len(), 3, "{seen:?}");
}
