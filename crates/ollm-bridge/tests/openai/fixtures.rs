//! Recorded-style SSE bodies of vLLM, llama.cpp and Ollama's `/v1` (under
//! `test-utils/fixtures/openai/`), each with the events it must decode to, whatever the
//! byte split. Each fixture's name says the quirk it pins.

use ollm_bridge::Decoder;
use ollm_bridge::openai::SseDecoder;
use ollm_types::ProviderEvent;

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
    let mut decoder = SseDecoder::with_id_prefix("m");
    let mut out = Vec::new();
    for piece in body.chunks(split.max(1)) {
        decoder.push(piece, &mut out);
    }
    decoder.finish(&mut out);
    out
}

fn check(name: &str) {
    let body = std::fs::read(test_utils::fixtures::path(&format!("openai/{name}.sse"))).unwrap();
    let expected: Vec<ProviderEvent> = serde_json::from_slice(
        &std::fs::read(test_utils::fixtures::path(&format!(
            "openai/{name}.events.json"
        )))
        .unwrap(),
    )
    .unwrap();
    let expected = normalised(expected);
    for split in [body.len(), 1, 2, 3, 7, 64] {
        assert_eq!(
            normalised(decode_split(&body, split)),
            expected,
            "fixture {name}, split every {split} bytes"
        );
    }
}

#[test]
fn vllm_parallel_tool_calls_by_index_with_idless_fragments() {
    check("vllm_parallel_tool_calls");
}

#[test]
fn vllm_reasoning_content_is_thinking() {
    check("vllm_reasoning_content");
}

#[test]
fn llamacpp_tool_call_with_usage_and_timings_in_the_finish_chunk() {
    check("llamacpp_tool_call");
}

#[test]
fn llamacpp_think_tags_split_across_chunks_with_crlf_and_keepalive() {
    check("llamacpp_think_tags");
}

#[test]
fn ollama_v1_parallel_calls_all_with_index_zero() {
    check("ollama_v1_parallel_index0");
}

#[test]
fn ollama_v1_reasoning_field_is_thinking() {
    check("ollama_v1_reasoning");
}

#[test]
fn several_idless_calls_in_the_finish_chunk_get_minted_ids() {
    check("calls_with_finish_reason_no_ids");
}

#[test]
fn malformed_arguments_become_a_marked_call_not_a_crash() {
    check("malformed_arguments");
}

#[test]
fn data_error_inside_a_200_stream() {
    check("data_error");
}

#[test]
fn eof_without_done_or_finish_reason_is_incomplete() {
    check("early_eof");
}

#[test]
fn every_fixture_has_a_test() {
    let mut names: Vec<String> = std::fs::read_dir(test_utils::fixtures::path("openai"))
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
    assert_eq!(names.len(), 10, "{names:?}");
}

/// The streams recorded from a real vLLM 0.32 (`test-utils/fixtures/vllm/`, by
/// `xtask/vllm/record_fixtures.py`), each beside the events it must decode to, whatever
/// the byte split: a plain reply; a call written as fenced JSON (text, finish `stop`:
/// recovering it is ollm-core's job); a `required` call (finish `tool_calls`); a named
/// call that vLLM finishes `stop`, reported as `tool_calls`.
#[test]
fn recorded_vllm_streams_decode_to_their_events() {
    let dir = test_utils::fixtures::path("vllm");
    let mut cases: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".events.json").map(str::to_owned)
        })
        .collect();
    cases.sort();
    assert_eq!(
        cases,
        [
            "plain_stream",
            "tools_auto_stream",
            "tools_named_stream",
            "tools_required_stream"
        ]
    );
    for case in cases {
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join(format!("{case}.json"))).unwrap())
                .unwrap();
        let body = record["body"].as_str().unwrap().as_bytes();
        let expected: Vec<ProviderEvent> = serde_json::from_slice(
            &std::fs::read(dir.join(format!("{case}.events.json"))).unwrap(),
        )
        .unwrap();
        let expected = normalised(expected);
        for split in [body.len(), 1, 2, 3, 7, 64] {
            assert_eq!(
                normalised(decode_split(body, split)),
                expected,
                "recorded {case}, split every {split} bytes"
            );
        }
    }
}
