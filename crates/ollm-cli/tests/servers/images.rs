//! Issue 14 through the binary: `--image` (before or after the prompt, repeatable)
//! reaches both wires; a model the server says lacks `vision` is refused before anything
//! is sent; a file that is no image, or too large, is refused with exit 2; a session keeps
//! a note of the image, not its bytes.

use super::*;
use test_utils::mock_ollama::MockModel;

/// A PNG header and its base64.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
const PNG_B64: &str = "iVBORw0KGgoAAAANSUhEUg==";
/// A JPEG header and its base64.
const JPEG: &[u8] = b"\xff\xd8\xff\xe0\0\x10JFIF\0";
const JPEG_B64: &str = "/9j/4AAQSkZJRgA=";

/// A mock Ollama with a vision model, and `photo.png` and `shot.jpg` in the working
/// folder.
fn vision_case() -> Case<Ollama> {
    let c = Case::ollama();
    c.mock()
        .add_model(MockModel::new("llava:7b").with(&["vision"]));
    std::fs::write(c.o.dir.path().join("photo.png"), PNG).unwrap();
    std::fs::write(c.o.dir.path().join("shot.jpg"), JPEG).unwrap();
    c
}

/// The last message of the first `/api/chat` body.
fn prompt_sent(c: &Case<Ollama>) -> Value {
    chat_messages(c.mock(), 0).last().unwrap().clone()
}

#[test]
fn images_before_or_after_the_prompt_reach_ollama_as_base64() {
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["run", "llava:7b", "describe", "--image", "photo.png"],
            &[PNG_B64],
        ),
        (
            &["run", "llava:7b", "--image", "photo.png", "describe"],
            &[PNG_B64],
        ),
        (
            &[
                "run",
                "llava:7b",
                "--image",
                "photo.png",
                "describe",
                "--image=shot.jpg",
            ],
            &[PNG_B64, JPEG_B64],
        ),
    ];
    for (args, images) in cases {
        let c = vision_case();
        c.run(args).ok();
        let sent = prompt_sent(&c);
        assert_eq!(
            typed(sent["content"].as_str().unwrap()),
            "describe",
            "{args:?}: {sent}"
        );
        assert_eq!(sent["images"], json!(images), "{args:?}: {sent}");
        assert!(
            c.mock().violations().is_empty(),
            "{:?}",
            c.mock().violations()
        );
    }
}

#[test]
fn images_reach_an_openai_server_as_data_urls() {
    let c = Case::openai();
    std::fs::write(c.o.dir.path().join("shot.jpg"), JPEG).unwrap();
    c.mock().push_reply(
        mock_openai::Reply::sse()
            .content("a cat")
            .finish("stop")
            .done()
            .reply(),
    );
    // No `/props` on this server: nothing says the model lacks vision, so it is sent.
    let out = c.run(&["run", "m", "what is it", "--image", "shot.jpg"]);
    out.ok();
    assert_eq!(out.out, "a cat\n");
    assert!(
        c.mock().violations().is_empty(),
        "{:?}",
        c.mock().violations()
    );
    let body = &c.mock().requests()[0];
    let mut last = body["messages"].as_array().unwrap().last().unwrap().clone();
    let text = typed(last["content"][0]["text"].as_str().unwrap()).to_owned();
    last["content"][0]["text"] = json!(text);
    assert_eq!(
        last["content"],
        json!([
            {"type": "text", "text": "what is it"},
            {"type": "image_url", "image_url": {"url": format!("data:image/jpeg;base64,{JPEG_B64}")}},
        ])
    );
}

/// llama-server says in `/props` whether its model reads images: `vision: false` is
/// refused before anything is sent, `vision: true` is sent the image.
#[test]
fn llama_server_props_decide_for_an_openai_server() {
    for vision in [false, true] {
        let c = Case::openai();
        std::fs::write(c.o.dir.path().join("shot.jpg"), JPEG).unwrap();
        c.mock().set_props(json!({
            "default_generation_settings": {"n_ctx": 4096},
            "modalities": {"vision": vision},
        }));
        c.mock().push_reply(
            mock_openai::Reply::sse()
                .content("seen")
                .finish("stop")
                .done()
                .reply(),
        );
        let out = c.run(&["run", "m", "--no-tools", "look", "--image", "shot.jpg"]);
        if vision {
            out.ok();
            assert_eq!(c.mock().requests().len(), 1);
        } else {
            assert_eq!(out.code, 1, "{}", out.err);
            assert!(out.err.contains("m cannot read images"), "{}", out.err);
            assert!(c.mock().requests().is_empty());
        }
    }
}

#[test]
fn a_model_without_vision_is_refused_before_anything_is_sent() {
    let c = vision_case();
    // qwen3:8b has tools and thinking, not vision.
    let out = c.run(&[
        "run",
        "qwen3:8b",
        "--session",
        "s",
        "describe",
        "--image",
        "photo.png",
    ]);
    assert_eq!(out.code, 1, "{}", out.err);
    assert!(
        out.err.contains("qwen3:8b cannot read images"),
        "{}",
        out.err
    );
    assert!(
        out.err.contains("pick a model with `vision`"),
        "{}",
        out.err
    );
    assert!(c.mock().requests_to("/api/chat").is_empty());
    // Nothing was recorded for the refused prompt.
    let session = c.o.data_dir().join("sessions/s.jsonl");
    assert!(
        !session.exists()
            || !std::fs::read_to_string(&session)
                .unwrap()
                .contains("describe")
    );
}

#[test]
fn a_file_that_is_no_image_or_too_large_exits_2_before_any_request() {
    let c = vision_case();
    std::fs::write(c.o.dir.path().join("notes.png"), "just text").unwrap();
    let big = std::fs::File::create(c.o.dir.path().join("huge.png")).unwrap();
    big.set_len(20 * 1024 * 1024 + 1).unwrap();
    let cases = [
        (
            "notes.png",
            "notes.png is not a PNG, JPEG, GIF or WebP image",
        ),
        ("huge.png", "the limit is 20971520 bytes (20 MiB)"),
        ("missing.png", "cannot read image missing.png"),
    ];
    for (file, message) in cases {
        let out = c.run(&["run", "llava:7b", "describe", "--image", file]);
        assert_eq!(out.code, 2, "{file}: {}", out.err);
        assert!(out.err.contains(message), "{file}: {}", out.err);
    }
    assert!(c.mock().requests().is_empty(), "{:?}", c.mock().requests());
}

#[test]
fn a_session_keeps_a_note_of_the_image_not_its_bytes() {
    let c = vision_case();
    c.mock().script("/api/chat", answer(&["a red square"]));
    c.run(&[
        "run",
        "llava:7b",
        "--session",
        "pic",
        "describe",
        "--image",
        "photo.png",
    ])
    .ok();
    let saved = std::fs::read_to_string(c.o.data_dir().join("sessions/pic.jsonl")).unwrap();
    assert!(!saved.contains(PNG_B64), "{saved}");
    assert!(
        saved.contains("[image: image/png, 16 B, not kept in the session]"),
        "{saved}"
    );
    // The next prompt of the session carries the note, not the image.
    c.run(&["run", "llava:7b", "--session", "pic", "and the border?"])
        .ok();
    let sent = chat_messages(c.mock(), 1);
    let resumed = sent.iter().find(|m| m["role"] == "user").unwrap();
    assert!(resumed.get("images").is_none(), "{resumed}");
    let content = typed(resumed["content"].as_str().unwrap());
    assert!(
        content.starts_with("describe\n[image: image/png"),
        "{content}"
    );
}
