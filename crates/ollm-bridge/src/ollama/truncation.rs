//! Silent front truncation (ollama#3839): judging the final token count.
//!
//! # The truncation rule
//! Ollama cuts the *front* of a prompt that does not fit `num_ctx` and still answers 200;
//! the final line's `prompt_eval_count` is then what it actually read. The adapter knows
//! the `num_ctx` it sent (the request's `options.context_length`, which the runtime
//! always sets) and an estimate `E` of the prompt: the runtime's, carried on the request
//! (`ProviderRequest::estimated_prompt_tokens`, core's calibrated cost of the text, which
//! leaves the template out so that `E` errs low: the rules below fire on a count well
//! under `E`), else `ceil(chars / 4)`. With `N = num_ctx` and `P = prompt_eval_count`, it warns when
//!
//! `P <= N` (a count above the window means the server did not apply it) and `E > N`, and
//! either
//!
//! - **`P >= N - slack`** (`slack = max(N / 32, 16)`): the server filled its
//!   whole window with a prompt we believe is larger than the window; or
//! - **`E > N * 1.25`**: the estimate exceeds the window by more than any
//!   estimate error we measured, and the server cannot have read more than `N`.
//!
//! or, on a **fresh** request (the first of a conversation, see [`is_fresh`]),
//!
//! - **`P < N` and `2 P < E`**: the server read less than half the prompt although the
//!   window sent was not full. No earlier turn of this conversation can be in the prompt
//!   cache, so the server's own window was smaller than `num_ctx` (a server-side limit,
//!   a proxy dropping options) and it cut the front. This is the plain case of issue 16:
//!   a fresh client, one prompt, no calibration history.
//!
//! On a later turn it does **not** warn merely because `P` is well below `E`: Ollama reuses
//! its prompt cache across turns, and a cached prefix can make `P` small on a prompt that
//! was read whole. Without a `num_ctx` sent, the server's window is unknown and no warning
//! is given. The warning says what to do: raise the window (`num_ctx`; ollm's
//! `context_length` option, `--context-length` on the command line) or send less.
//!
//! # No calibration here
//! Token cost is calibrated once, in core (`context::calibrate`), from the prompt count
//! this adapter reports in `Usage`. Until issue 26 this module kept its own per-model
//! characters-per-token ratio as well (the template then counted twice in core's cost).

use ollm_types::{ProviderRequest, Role, Warning, WarningKind};

/// What the adapter sent, for judging the final `prompt_eval_count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TruncationCheck {
    /// The `num_ctx` sent, if any.
    pub num_ctx: Option<u32>,
    /// The estimated prompt size in tokens.
    pub estimated_prompt_tokens: u32,
    /// Whether the request is the first of its conversation, so no earlier turn can be in
    /// the server's prompt cache ([`is_fresh`]).
    pub fresh: bool,
}

/// The warning for a reply whose server read `prompt_eval_count` tokens, if the rule in the
/// module docs says the prompt was truncated.
pub fn truncation_warning(sent: &TruncationCheck, prompt_eval_count: u32) -> Option<Warning> {
    let n = sent.num_ctx?;
    let e = sent.estimated_prompt_tokens;
    let p = prompt_eval_count;
    let slack = (n / 32).max(16);
    let filled = p >= n.saturating_sub(slack);
    let far_over = u64::from(e) * 4 > u64::from(n) * 5;
    let over_window = e > n && p <= n && (filled || far_over);
    let cut_short = sent.fresh && p < n && u64::from(p) * 2 < u64::from(e);
    (over_window || cut_short).then(|| {
        let window = if over_window {
            format!("more than the context window of {n} sent as num_ctx")
        } else {
            format!("so the server's window is smaller than the num_ctx of {n} sent")
        };
        Warning::new(
            WarningKind::PromptTruncated,
            format!(
                "the server read {p} prompt tokens but the prompt is about {e} tokens, \
                 {window}: Ollama silently dropped the start of the prompt (system prompt \
                 and tool definitions first); give the model a larger context window \
                 (num_ctx: the context_length option, --context-length on the command \
                 line, or the server's OLLAMA_CONTEXT_LENGTH) or send a shorter prompt"
            ),
        )
    })
}

/// Whether `req` is fresh: the first request of a conversation (no assistant message),
/// which no earlier turn can have put in Ollama's prompt cache, so its
/// `prompt_eval_count` counts the whole prompt.
pub fn is_fresh(req: &ProviderRequest) -> bool {
    !req.messages.iter().any(|m| m.role() == Role::Assistant)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(num_ctx: Option<u32>, estimate: u32, read: u32, warns: bool) {
        check_turn(false, num_ctx, estimate, read, warns);
    }

    fn check_turn(fresh: bool, num_ctx: Option<u32>, estimate: u32, read: u32, warns: bool) {
        let sent = TruncationCheck {
            num_ctx,
            estimated_prompt_tokens: estimate,
            fresh,
        };
        let got = truncation_warning(&sent, read);
        assert_eq!(
            got.as_ref().map(|w| w.kind),
            warns.then_some(WarningKind::PromptTruncated),
            "fresh={fresh} num_ctx={num_ctx:?} estimate={estimate} read={read}"
        );
        if let Some(w) = got {
            assert!(w.message.contains("--context-length"), "{}", w.message);
        }
    }

    #[test]
    fn a_fresh_request_read_short_is_truncated() {
        for (num_ctx, estimate, read, warns) in [
            // Issue 16: a server stopping at 64 tokens on prompts of ~330 and ~2,200,
            // with a window of 8192 sent.
            (Some(8192), 330, 64, true),
            (Some(8192), 2200, 64, true),
            // Read about what was estimated (chars / 4 errs either way): no warning.
            (Some(8192), 330, 300, false),
            (Some(8192), 330, 170, false),
            // No num_ctx: the window is unknown.
            (None, 2200, 64, false),
        ] {
            check_turn(true, num_ctx, estimate, read, warns);
        }
        // The same counts on a later turn are the prompt cache, not a truncation.
        check_turn(false, Some(8192), 2200, 64, false);
    }

    #[test]
    fn the_rule_on_both_sides() {
        for (num_ctx, estimate, read, warns) in [
            // Fits: no warning, whatever the count.
            (Some(4096), 1000, 1010, false),
            (Some(4096), 4000, 4090, false),
            // A cached prefix makes the count small: not evidence of truncation.
            (Some(4096), 3000, 40, false),
            // No num_ctx sent: the window is unknown, never warn.
            (None, 100_000, 2048, false),
            // Window filled by a prompt larger than it: truncated.
            (Some(4096), 4500, 4096, true),
            (Some(4096), 4200, 4000, true),
            // Slightly over, window not filled: within estimate error, no warning.
            (Some(4096), 4300, 3500, false),
            // Far over the window: truncated even if the count is lower.
            (Some(2048), 9000, 1500, true),
            // Count above the window (server ignored num_ctx): not a truncation.
            (Some(2048), 9000, 9100, false),
        ] {
            check(num_ctx, estimate, read, warns);
        }
    }

    #[test]
    fn only_first_requests_of_a_conversation_are_fresh() {
        use ollm_types::Message;
        let ask = |messages| ProviderRequest::new("m", messages);
        for (messages, sample) in [
            (vec![Message::user("hi")], true),
            (vec![Message::system("s"), Message::user("hi")], true),
            (
                vec![
                    Message::user("hi"),
                    Message::assistant("hello"),
                    Message::user("more"),
                ],
                false,
            ),
        ] {
            assert_eq!(is_fresh(&ask(messages.clone())), sample, "{messages:?}");
        }
    }
}
