//! The reply bodies the mock server serves: an Ollama `/api/chat` NDJSON stream and an
//! OpenAI-compatible SSE stream of `chunks` text deltas each, shaped as the real servers
//! write them (Ollama's metadata per line; llama-server's `chatcmpl` chunk with its id,
//! model and fingerprint), ending with the usage and the finish.
//!
//! Every 50th delta carries an escaped newline, so both sides sometimes own the text
//! (a `Cow` that cannot borrow), as real answers do.

/// The two protocols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    /// Ollama's native `/api/chat` (NDJSON).
    Ollama,
    /// OpenAI-compatible Chat Completions (SSE).
    OpenAi,
}

const WORDS: [&str; 10] = [
    "The", " quick", " brown", " fox", " jumps", " over", " the", " lazy", " dog", ".",
];

/// The text of delta `i` as it appears on the wire (JSON-escaped) and its decoded length.
fn word(i: usize) -> (&'static str, usize) {
    if i % 50 == 49 {
        ("\\n", 1)
    } else {
        let w = WORDS[i % WORDS.len()];
        (w, w.len())
    }
}

/// The events of one reply, each a complete line (or SSE event) with its terminator, and
/// the number of text bytes they carry.
pub(crate) fn events(proto: Proto, chunks: usize) -> (Vec<Vec<u8>>, usize) {
    let mut text = 0;
    let mut out = Vec::with_capacity(chunks + 3);
    for i in 0..chunks {
        let (w, len) = word(i);
        text += len;
        out.push(match proto {
            Proto::Ollama => format!(
                "{{\"model\":\"qwen3:8b\",\"created_at\":\"2025-05-01T12:00:{:02}.{:09}Z\",\
                 \"message\":{{\"role\":\"assistant\",\"content\":\"{w}\"}},\"done\":false}}\n",
                i % 60,
                i
            ),
            Proto::OpenAi => format!(
                "data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":\
                 {{\"content\":\"{w}\"}}}}],\"created\":1746100800,\"id\":\
                 \"chatcmpl-Xq3b8RkT1mZ\",\"model\":\"qwen2.5-coder-0.5b\",\
                 \"system_fingerprint\":\"b5200-3d1a5f0e\",\"object\":\
                 \"chat.completion.chunk\"}}\n\n"
            ),
        });
    }
    match proto {
        Proto::Ollama => out.push(format!(
            "{{\"model\":\"qwen3:8b\",\"created_at\":\"2025-05-01T12:01:00Z\",\"message\":\
             {{\"role\":\"assistant\",\"content\":\"\"}},\"done\":true,\"done_reason\":\"stop\",\
             \"total_duration\":1,\"load_duration\":1,\"prompt_eval_count\":10,\
             \"prompt_eval_duration\":1,\"eval_count\":{chunks},\"eval_duration\":1}}\n"
        )),
        Proto::OpenAi => {
            out.push(
                "data: {\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{}}],\
                 \"created\":1746100800,\"id\":\"chatcmpl-Xq3b8RkT1mZ\",\"model\":\
                 \"qwen2.5-coder-0.5b\",\"object\":\"chat.completion.chunk\"}\n\n"
                    .to_owned(),
            );
            out.push(format!(
                "data: {{\"choices\":[],\"created\":1746100800,\"id\":\"chatcmpl-Xq3b8RkT1mZ\",\
                 \"model\":\"qwen2.5-coder-0.5b\",\"object\":\"chat.completion.chunk\",\
                 \"usage\":{{\"completion_tokens\":{chunks},\"prompt_tokens\":10,\
                 \"total_tokens\":{}}}}}\n\n",
                chunks + 10
            ));
            out.push("data: [DONE]\n\n".to_owned());
        }
    }
    (out.into_iter().map(String::into_bytes).collect(), text)
}
