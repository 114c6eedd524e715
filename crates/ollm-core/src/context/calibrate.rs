//! What a request really costs: the count of its text (the provider's tokenizer, else
//! `ceil(chars / 4)`) corrected by what the server reported for earlier requests. This
//! is the one place ollm calibrates token cost: adapters report the server's prompt
//! count (`Usage::prompt_tokens`) and learn nothing themselves.
//!
//! # Decisions
//! - The text counted ([`crate::tokens::request_text`]) is not what the model reads: the
//!   chat template adds role markers to every message and, when tools are offered, its
//!   own instructions around their schemas. Measured on Qwen2.5-Coder-0.5B through
//!   llama-server: a system prompt and a question counted at 26 tokens by `/tokenize`
//!   were read as 40 (`usage.prompt_tokens`); with `read_file` offered, 71 counted were
//!   read as 194. In a `--context-length 1024` chat, requests of 1066-1176 tokens went
//!   out without compacting. So every message costs
//!   `PER_MESSAGE_TOKENS` tokens more from
//!   the start, and after each reply the gap between the server's prompt count and ours
//!   is learned per model and per "tools offered or not" (the template's tool text
//!   differs a lot between the two).
//! - With the provider's tokenizer the gap is a fixed number of tokens (the template's
//!   text); with the estimate it is mostly a ratio (the estimate's error grows with the
//!   text), so the correction is a scale then. Either way only the largest gap seen is
//!   kept and never lowered: a server that reports fewer tokens (a prompt cache hit
//!   counted short, or a prompt it cut) can only make us compact later, never send a
//!   prompt that is too large.
//! - The scale of an estimate is learned on the text's estimate alone (`reported /
//!   tokens`, the template prior then added on top), so it folds the template's real
//!   size in and errs high by about the prior. That is deliberate: in practice it is
//!   learned from one reply, the first of a conversation (Ollama's prompt cache makes a
//!   later turn count only its new tokens, which teaches nothing), where the prior's
//!   error can hide the text's. Measured against the mock Ollama (3 characters a token,
//!   a smaller template than the prior): learning `reported / (tokens + prior)`
//!   undercounted later requests by 22.5%; learning on the text, even the text's cost
//!   alone never undercounts (2.8% over at worst; see `ollm-bridge`'s
//!   `the_runtimes_calibrated_estimate_errs_high_and_close`). Only
//!   a sample whose text is at least the prior teaches a scale: on a shorter one the
//!   template is most of what the server read (a 10-character question read as 12
//!   tokens taught a scale of 4, and the next request was compacted at once).
//! - What goes down on the request (`ProviderRequest::estimated_prompt_tokens`, for the
//!   Ollama adapter's truncation check) is the text's corrected cost without the prior
//!   ([`Calibration::text_cost`]): that check warns when the server read much less than
//!   the estimate, so it needs an estimate that errs low, not high; a prior larger than
//!   the real template warned on every short prompt.
//! - Nothing is learned from a reply without a prompt count.
//! - The corrected cost goes down on the request as
//!   `ProviderRequest::estimated_prompt_tokens`, so an adapter that judges silent
//!   truncation (Ollama's) compares the server's count with this estimate, not one of
//!   its own. Until issue 26 the Ollama adapter kept a second, characters-per-token
//!   calibration and answered `count_tokens` with it, so the template was counted twice
//!   there; it is gone.

use std::collections::HashMap;

/// The learned correction for one model with or without tools.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Correction {
    /// Tokens added to an exact count (the template's fixed text).
    offset: usize,
    /// Factor applied to the text's estimated count (at least 1).
    scale: f64,
}

/// How one request was counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counted {
    /// The tokens of the request's text.
    pub(crate) tokens: usize,
    /// Whether they came from the provider's tokenizer (else the estimate).
    pub(crate) exact: bool,
    /// The template's tokens ([`crate::tokens::template_overhead`]).
    pub(crate) overhead: usize,
    /// Whether tools were offered.
    pub(crate) tools: bool,
}

impl Counted {
    /// The tokens before any learned correction: the text plus the per-message markers.
    fn base(&self) -> usize {
        self.tokens + self.overhead
    }
}

/// The corrections learned so far, by model and whether tools were offered.
#[derive(Debug, Default)]
pub(crate) struct Calibration {
    learned: HashMap<(String, bool), Correction>,
}

impl Calibration {
    /// What `counted` costs for `model`, corrected.
    pub(crate) fn cost(&self, model: &str, counted: &Counted) -> usize {
        let base = counted.base();
        match self.learned.get(&(model.to_owned(), counted.tools)) {
            None => base,
            Some(c) if counted.exact => base + c.offset,
            Some(c) => {
                (counted.tokens as f64 * c.scale.max(1.0)).ceil() as usize + counted.overhead
            }
        }
    }

    /// What the text of `counted` costs for `model`, corrected, without the template
    /// prior (see the module docs).
    pub(crate) fn text_cost(&self, model: &str, counted: &Counted) -> usize {
        match self.learned.get(&(model.to_owned(), counted.tools)) {
            Some(c) if !counted.exact => (counted.tokens as f64 * c.scale.max(1.0)).ceil() as usize,
            _ => counted.tokens,
        }
    }

    /// Learns from a reply to the request `counted`: the server read `reported` tokens.
    pub(crate) fn learn(&mut self, model: &str, counted: &Counted, reported: Option<u32>) {
        let Some(reported) = reported.map(|n| n as usize) else {
            return;
        };
        let base = counted.base();
        let entry = self
            .learned
            .entry((model.to_owned(), counted.tools))
            .or_insert(Correction {
                offset: 0,
                scale: 1.0,
            });
        if counted.exact {
            entry.offset = entry.offset.max(reported.saturating_sub(base));
        } else if counted.tokens > 0 && counted.tokens >= counted.overhead {
            entry.scale = entry.scale.max(reported as f64 / counted.tokens as f64);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counted(tokens: usize, exact: bool, tools: bool) -> Counted {
        Counted {
            tokens,
            exact,
            overhead: 20,
            tools,
        }
    }

    /// `(what was learned: counted tokens, exact, tools, reported)`, then the cost of a
    /// later request, and the expected cost.
    fn check(learned: &[(usize, bool, bool, Option<u32>)], later: Counted, expected: usize) {
        let mut calibration = Calibration::default();
        for &(tokens, exact, tools, reported) in learned {
            calibration.learn("m", &counted(tokens, exact, tools), reported);
        }
        assert_eq!(
            calibration.cost("m", &later),
            expected,
            "{learned:?} then {later:?}"
        );
        assert_eq!(
            Calibration::default().cost("other", &later),
            later.base(),
            "another model learned nothing"
        );
    }

    #[test]
    fn the_gap_the_server_reports_is_added_to_later_requests() {
        // Nothing learned yet: the text plus 5 tokens a message.
        check(&[], counted(890, true, true), 910);
        // 890 counted with tools (910 with markers), 1176 read: 266 more.
        check(
            &[(890, true, true, Some(1176))],
            counted(500, true, true),
            520 + 266,
        );
        // Learned with tools, not applied without.
        check(
            &[(890, true, true, Some(1176))],
            counted(500, true, false),
            520,
        );
        // No prompt count: nothing learned.
        check(&[(890, true, true, None)], counted(500, true, true), 520);
        // A smaller report later (a cache hit counted short) lowers nothing.
        check(
            &[(890, true, true, Some(1176)), (890, true, true, Some(300))],
            counted(500, true, true),
            786,
        );
        // Estimated counts learn a ratio on the text: 100 (+ 20) estimated, 180 read:
        // 1.8, so 200 cost 360 + 20.
        check(
            &[(100, false, true, Some(180))],
            counted(200, false, true),
            380,
        );
        // A prompt shorter than the prior (20), read as mostly template (4 estimated, 12
        // read), teaches nothing.
        check(
            &[(4, false, true, Some(12))],
            counted(200, false, true),
            220,
        );
        // A server reading fewer tokens than counted never lowers the cost.
        check(
            &[(100, false, true, Some(50))],
            counted(200, false, true),
            220,
        );
        check(
            &[(100, true, true, Some(50))],
            counted(200, true, true),
            220,
        );
    }

    /// The text's cost goes down without the prior: `(learned, later, text cost)`.
    #[test]
    fn the_text_cost_leaves_the_prior_out() {
        for (learned, later, want) in [
            (None, counted(200, false, true), 200),
            (Some((100, false, 180)), counted(200, false, true), 360),
            // Exact counts: the text as counted.
            (Some((890, true, 1176)), counted(500, true, true), 500),
        ] {
            let mut calibration = Calibration::default();
            if let Some((tokens, exact, reported)) = learned {
                calibration.learn("m", &counted(tokens, exact, true), Some(reported));
            }
            assert_eq!(calibration.text_cost("m", &later), want, "{learned:?}");
        }
    }
}
