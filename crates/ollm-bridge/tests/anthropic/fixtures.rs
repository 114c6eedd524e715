//! Messages streams under `test-utils/fixtures/anthropic/`: bodies recorded from
//! llama-server's `/v1/messages` (`llamacpp_*`) and written from Anthropic's API
//! reference (`reference_*`), each with the events it must decode to, whatever the byte
//! split, and each within the provider stream contract (`check_compliance`). Each
//! fixture's name says the quirk it pins.

use ollm_bridge::Decoder;
use ollm_bridge::anthropic::MessagesDecoder;
use ollm_types::ProviderEvent;
use test_utils::mock_provider::check_compliance;

/// Warning and error texts are for people; compare everything else. Deltas are merged:
/// how the text is cut into events depends on how the bytes were read.
fn normalised(events: Vec<ProviderEvent>) -> Vec<ProviderEvent> {
    test_utils::split::merged(events)
        .into_iter()
        .map(|e| match e {
            ProviderEvent::Warning { mut warning } => {
                warning.message = "WARNING".into();
                ProviderEvent::Warning { warning }
            }
            ProviderEvent::Error { mut error } => {
                error.message = "ERROR".into();
                error.hint = None;
                ProviderEvent::Error { error }
            }
            other => other,
        })
        .collect()
}

fn decode_split(body: &[u8], split: usize) -> Vec<ProviderEvent> {
    let mut decoder = MessagesDecoder::with_id_prefix("m");
    let mut out = Vec::new();
    for piece in body.chunks(split.max(1)) {
        decoder.push(piece, &mut out);
    }
    decoder.finish(&mut out);
    out
}

fn check(name: &str) {
    let read = |ext: &str| {
        std::fs::read(test_utils::fixtures::path(&format!(
            "anthropic/{name}.{ext}"
        )))
        .unwrap()
    };
    let body = read("sse");
    let expected: Vec<ProviderEvent> = serde_json::from_slice(&read("events.json")).unwrap();
    let expected = normalised(expected);
    for split in [body.len(), 1, 2, 3, 7, 64] {
        let got = decode_split(&body, split);
        check_compliance(&got).unwrap();
        assert_eq!(
            normalised(got),
            expected,
            "fixture {name}, split every {split} bytes"
        );
    }
}

#[test]
fn llamacpp_counts_cached_prompt_tokens_apart() {
    check("llamacpp_text_cache_tokens");
}

#[test]
fn llamacpp_starts_a_tool_use_block_without_input() {
    check("llamacpp_tool_use_without_input");
}

#[test]
fn reference_thinking_signature_ping_text_and_streamed_tool_input() {
    check("reference_thinking_text_tool");
}

#[test]
fn reference_overloaded_error_event_after_text() {
    check("reference_overloaded_mid_stream");
}

#[test]
fn reference_max_tokens_is_length() {
    check("reference_max_tokens");
}

#[test]
fn every_fixture_has_a_test() {
    let mut names: Vec<String> = std::fs::read_dir(test_utils::fixtures::path("anthropic"))
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".sse").map(str::to_owned)
        })
        .collect();
    names.sort();
    for name in &names {
        check(name);
    }
    assert_eq!(names.len(), 5, "{names:?}");
}
