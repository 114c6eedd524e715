//! Token estimates and limits (properties 18 to 22).

use ollm_core::tokens::{
    ContextLimits, estimate_text, estimate_tokens, request_text, template_overhead,
};
use ollm_core::{ChatEvent, History};
use ollm_types::{FinishReason, Message, ProviderErrorKind, ProviderRequest, WarningKind};
use proptest::prelude::*;
use test_utils::mock_provider::{MockProvider, ev};

use crate::support::{block_on, chat, check_events, client_with, config, count, finish_reason};

/// What the template adds to a one-prompt request without tools: the prompt and the
/// reply's opening, and the preamble.
fn overhead() -> usize {
    let request = ProviderRequest::new("m", vec![Message::user("x")]);
    template_overhead(&request)
}

fn warned(events: &[ChatEvent]) -> bool {
    count(
        events,
        |e| matches!(e, ChatEvent::Warning { warning } if warning.kind == WarningKind::ContextNearLimit),
    ) > 0
}

fn overflowed(events: &[ChatEvent]) -> bool {
    count(
        events,
        |e| matches!(e, ChatEvent::Error { error } if error.kind == ProviderErrorKind::ContextOverflow),
    ) > 0
}

proptest! {
    #![proptest_config(config())]

    // Property 18: token estimation
    #[test]
    fn token_estimation(text in ".{0,200}", more in ".{0,50}") {
        let n = text.chars().count();
        let est = estimate_text(&text);
        prop_assert_eq!(est, n.div_ceil(4));
        prop_assert!(est * 4 >= n && (n == 0 || est * 4 < n + 4));
        let longer = format!("{text}{more}");
        prop_assert!(estimate_text(&longer) >= est);
        let mut h = History::new();
        h.push(Message::user(text.clone()));
        prop_assert_eq!(h.estimate_tokens(), estimate_tokens(n));
    }

    // Property 19: provider tokenizer preference
    #[test]
    fn provider_tokenizer_preference(counted in 0usize..2000, limit in 1usize..2000) {
        // The provider's count (plus the template's markers) decides, whatever the
        // text's length.
        let provider = MockProvider::builder()
            .count_tokens_with(move |_| counted)
            .turn(vec![ev::text("ok"), ev::finish()])
            .build();
        let c = client_with(provider.clone(), Default::default(), |cfg| {
            cfg.context_limits = ContextLimits::default().with_model("m", limit);
        });
        let events = block_on(chat(&c, "a prompt of some length"));
        check_events(&events);
        let cost = counted + overhead();
        prop_assert_eq!(overflowed(&events), cost > limit);
        prop_assert_eq!(warned(&events), cost <= limit && cost * 10 >= limit * 9);
        prop_assert_eq!(provider.counted_texts().len(), 1);
    }

    // Property 20: fallback estimate
    #[test]
    fn fallback_estimate(prompt in "[a-z ]{0,120}", limit in 1usize..80, fails in any::<bool>()) {
        // Without a tokenizer (none, or one that fails) the estimate is ceil(chars / 4)
        // of the request's text, plus the template's markers.
        let builder = MockProvider::builder().turn(vec![ev::text("ok"), ev::finish()]);
        let provider = if fails { builder.count_tokens_fails() } else { builder }.build();
        let c = client_with(provider.clone(), Default::default(), |cfg| {
            cfg.context_limits = ContextLimits { default: limit, ..ContextLimits::default() };
        });
        let events = block_on(chat(&c, &prompt));
        let texts = provider.counted_texts();
        let estimate = estimate_text(&texts[0]);
        prop_assert_eq!(estimate, prompt.chars().count().div_ceil(4));
        prop_assert_eq!(overflowed(&events), estimate + overhead() > limit);
        if let Some(req) = provider.requests().first() {
            prop_assert_eq!(&request_text(req), &texts[0]);
        }
    }

    // Property 21: warning band
    #[test]
    fn warning_band(counted in 0usize..1200, limit in 1usize..1000) {
        let provider = MockProvider::builder()
            .count_tokens_with(move |_| counted)
            .turn(vec![ev::text("ok"), ev::finish()])
            .build();
        let c = client_with(provider, Default::default(), |cfg| {
            cfg.context_limits = ContextLimits { default: limit, ..ContextLimits::default() };
        });
        let events = block_on(chat(&c, "x"));
        let cost = counted + overhead();
        let in_band = cost * 10 >= limit * 9 && cost <= limit;
        prop_assert_eq!(warned(&events), in_band);
        if in_band {
            prop_assert_eq!(finish_reason(&events), FinishReason::Stop);
        }
    }

    // Property 22: enforcement
    #[test]
    fn enforcement(excess in 1usize..500, limit in 1usize..1000, via_options in any::<bool>()) {
        // Over the limit nothing is sent, the error is typed, the run finishes with
        // `error`, and the prompt is not left in the history.
        let counted = limit + excess;
        let provider = MockProvider::builder()
            .count_tokens_with(move |_| counted)
            .then_forever(vec![ev::text("ok"), ev::finish()])
            .build();
        let c = client_with(provider.clone(), Default::default(), |cfg| {
            if via_options {
                cfg.options.context_length = Some(limit as u32);
            } else {
                cfg.context_limits = ContextLimits::default().with_model("m", limit);
            }
        });
        let events = block_on(chat(&c, "x"));
        check_events(&events);
        prop_assert!(overflowed(&events));
        prop_assert_eq!(finish_reason(&events), FinishReason::Error);
        prop_assert_eq!(provider.request_count(), 0);
        prop_assert!(c.history().is_empty());
    }
}

#[test]
fn trained_context_length_caps_the_limit() {
    let provider = MockProvider::builder()
        .context_length(10)
        .count_tokens_with(|_| 11)
        .then_forever(vec![ev::text("ok"), ev::finish()])
        .build();
    let c = client_with(provider.clone(), Default::default(), |_| {});
    let events = block_on(chat(&c, "x"));
    assert!(overflowed(&events));
    assert_eq!(provider.request_count(), 0);
}

/// Each case: the tokens counted for every request, the prompt count the server reports
/// for the first reply, the window, and whether the second prompt is refused.
fn check_learned(counted: usize, reported: u32, limit: usize, refused: bool) {
    let provider = MockProvider::builder()
        .count_tokens_with(move |_| counted)
        .then_forever(vec![ev::text("ok"), ev::usage(reported, 1), ev::finish()])
        .build();
    let c = client_with(provider.clone(), Default::default(), |cfg| {
        cfg.compaction.enabled = false;
        cfg.context_limits = ContextLimits::default().with_model("m", limit);
    });
    let first = block_on(chat(&c, "x"));
    assert!(!overflowed(&first), "the first prompt fits: {first:?}");
    let second = block_on(chat(&c, "y"));
    check_events(&second);
    assert_eq!(
        overflowed(&second),
        refused,
        "counted {counted}, reported {reported}, window {limit}"
    );
    assert_eq!(provider.request_count(), if refused { 1 } else { 2 });
    // The text's cost travels down on each request, for an adapter's truncation check
    // (issue 26): with the provider's tokenizer, the text as counted, whatever was learned.
    let carried: Vec<_> = provider
        .requests()
        .iter()
        .map(|r| r.estimated_prompt_tokens.map(|n| n as usize))
        .collect();
    let sent = if refused { 1 } else { 2 };
    assert_eq!(
        carried,
        vec![Some(counted); sent],
        "counted {counted}, reported {reported}"
    );
}

/// Issue 26: with the `ceil(chars / 4)` estimate, what a request carries down is the
/// text's estimate scaled by what the first reply taught, without the template prior.
#[test]
fn an_estimate_carried_down_is_the_texts_corrected_cost() {
    let text = "word ".repeat(40); // 200 characters: 50 estimated.
    let provider = MockProvider::builder()
        .then_forever(vec![ev::text("ok"), ev::usage(75, 1), ev::finish()])
        .build();
    let c = client_with(provider.clone(), Default::default(), |_| {});
    block_on(chat(&c, &text));
    block_on(chat(&c, &text));
    let carried: Vec<_> = provider
        .requests()
        .iter()
        .map(|r| r.estimated_prompt_tokens)
        .collect();
    // 50, read as 75: a scale of 1.5; the second request's text is 100 + "ok" (1).
    assert_eq!(carried, vec![Some(50), Some(152)]);
}

#[test]
fn the_servers_prompt_count_corrects_later_estimates() {
    // The first request: 100 counted + 30 for the template. The server read 300 (a
    // longer template, say): 170 more, learned and added to the next request, which
    // (three messages and the reply's opening: 100 + 40 + 170 = 310) no longer fits 300.
    check_learned(100, 300, 300, true);
    // The same without the server's surprise: 140 fits.
    check_learned(100, 110, 300, false);
    // A server that reports fewer tokens than counted lowers nothing: 140 fits 140.
    check_learned(100, 20, 140, false);
}

/// Issue 27: a provider's count of the whole request (the Messages API's `count_tokens`)
/// is the request's cost as it is: no template estimate is added, and the text is not
/// counted apart. (whole-request count, window, refused)
#[test]
fn a_whole_request_count_is_the_cost_without_a_template_estimate() {
    for (whole, limit, refused) in [(100, 100, false), (101, 100, true), (1, 5, false)] {
        let provider = MockProvider::builder()
            .count_tokens_with(|_| 1_000_000)
            .count_requests_with(move |_| whole)
            .then_forever(vec![ev::text("ok"), ev::finish()])
            .build();
        let c = client_with(provider.clone(), Default::default(), |cfg| {
            cfg.compaction.enabled = false;
            cfg.context_limits = ContextLimits::default().with_model("m", limit);
        });
        let events = block_on(chat(&c, "a prompt"));
        check_events(&events);
        assert_eq!(
            overflowed(&events),
            refused,
            "{whole} in {limit}: {events:?}"
        );
        assert_eq!(provider.counted_texts(), Vec::<String>::new());
    }
}
