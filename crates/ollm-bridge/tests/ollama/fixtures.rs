//! The recorded streams under `test-utils/fixtures/ollama/`, decoded whole and however
//! their bytes are split.

use ollm_bridge::Decoder;
use ollm_bridge::ollama::NdjsonDecoder;
use ollm_types::{FinishReason, ProviderErrorKind, ProviderEvent};
use proptest::prelude::*;
use test_utils::fixtures;

/// What a stream amounts to, compared as one value.
#[derive(Debug, PartialEq, Default)]
struct Summary {
    text: String,
    thinking: String,
    calls: Vec<(String, String)>,
    usage: bool,
    end: String,
}

fn summarise(events: &[ProviderEvent]) -> Summary {
    let mut s = Summary::default();
    for e in events {
        match e {
            ProviderEvent::TextDelta { text } => s.text.push_str(text),
            ProviderEvent::ThinkingDelta { text } => s.thinking.push_str(text),
            ProviderEvent::ToolCall { call } => s
                .calls
                .push((call.id.clone(), call.arguments_value().to_string())),
            ProviderEvent::Usage { .. } => s.usage = true,
            ProviderEvent::Finish { reason } => s.end = format!("finish {reason:?}"),
            ProviderEvent::Error { error } => s.end = format!("error {:?}", error.kind),
            _ => {}
        }
    }
    s
}

fn read(case: &str) -> Vec<u8> {
    std::fs::read(fixtures::path(&format!("ollama/{case}/stream.ndjson"))).unwrap()
}

fn decode_chunks(chunks: &[&[u8]]) -> Vec<ProviderEvent> {
    let mut decoder = NdjsonDecoder::default().with_id_prefix("minted_");
    let mut out = Vec::new();
    for chunk in chunks {
        decoder.push(chunk, &mut out);
    }
    decoder.finish(&mut out);
    out
}

fn check(case: &str, text: &str, calls: &[&str], end: &str) {
    let events = decode_chunks(&[&read(case)]);
    let s = summarise(&events);
    assert_eq!(s.text, text, "{case}");
    assert_eq!(
        s.calls.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        calls,
        "{case}"
    );
    assert_eq!(s.end, end, "{case}");
    // Exactly one terminal event, last.
    let terminal = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                ProviderEvent::Finish { .. } | ProviderEvent::Error { .. }
            )
        })
        .count();
    assert_eq!(terminal, 1, "{case}: {events:?}");
}

#[test]
fn every_fixture_decodes_to_its_pinned_behaviour() {
    let stop = format!("finish {:?}", FinishReason::Stop);
    let tools = format!("finish {:?}", FinishReason::ToolCalls);
    let err = |k: ProviderErrorKind| format!("error {k:?}");
    for (case, text, calls, end) in [
        (
            "text_stream",
            "Bonjour le monde 🌍, ça va?\n\"ok\"",
            &[][..],
            stop.clone(),
        ),
        ("thinking", "Hi!", &[], stop.clone()),
        (
            "tool_calls_with_ids",
            "",
            &["call_gkz0y3xw", "call_9qv1m2ab"],
            tools.clone(),
        ),
        ("tool_calls_no_ids", "", &["minted_1", "minted_2"], tools),
        (
            "length",
            "Once upon",
            &[],
            format!("finish {:?}", FinishReason::Length),
        ),
        (
            "error_in_stream",
            "Partial",
            &[],
            err(ProviderErrorKind::Server),
        ),
        (
            "no_done",
            "Cut short",
            &[],
            err(ProviderErrorKind::IncompleteStream),
        ),
        ("malformed", "ok", &[], err(ProviderErrorKind::Protocol)),
        ("truncated_prompt", "I have no instructions.", &[], stop),
    ] {
        check(case, text, calls, &end);
    }
    let thinking = summarise(&decode_chunks(&[&read("thinking")]));
    assert_eq!(thinking.thinking, "The user greets; answer briefly.");
}

const CASES: &[&str] = &[
    "text_stream",
    "thinking",
    "tool_calls_with_ids",
    "tool_calls_no_ids",
    "length",
    "error_in_stream",
    "no_done",
    "malformed",
    "truncated_prompt",
];

proptest! {
    /// The same events however the bytes are split, mid-line and mid-character included.
    #[test]
    fn any_split_gives_the_same_events(
        case in 0..CASES.len(),
        cuts in proptest::collection::vec(any::<proptest::sample::Index>(), 0..40),
    ) {
        let bytes = read(CASES[case]);
        let whole = decode_chunks(&[&bytes]);
        let cuts: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
        let chunks = test_utils::split::split_at(&bytes, &cuts);
        prop_assert_eq!(decode_chunks(&chunks), whole);
    }

    /// Byte-at-a-time delivery of arbitrary text (any UTF-8) gives the text back.
    #[test]
    fn text_survives_byte_at_a_time(parts in proptest::collection::vec("\\PC{0,12}", 1..8)) {
        let mut body = String::new();
        for p in &parts {
            let line = serde_json::json!({"message": {"role": "assistant", "content": p}, "done": false});
            body.push_str(&format!("{line}\n"));
        }
        body.push_str("{\"done\":true,\"done_reason\":\"stop\"}\n");
        let bytes = body.as_bytes();
        let chunks: Vec<&[u8]> = bytes.chunks(1).collect();
        let s = summarise(&decode_chunks(&chunks));
        prop_assert_eq!(s.text, parts.concat());
        prop_assert_eq!(s.end, format!("finish {:?}", FinishReason::Stop));
    }
}
