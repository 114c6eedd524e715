//! Cutting a byte stream into chunks at arbitrary points, as a network would, for the
//! decoders' "same result however the bytes are split" property tests; and cutting text
//! at arbitrary characters, as a server's deltas do, for the streaming displays' and
//! parsers' "same result however the text is split" tests. One helper each, so every
//! such property cuts the same way (issue 26 found seven copies).

/// `bytes` cut at each of `cuts` (taken modulo `bytes.len() + 1`, in any order): the
/// chunks, in order, that concatenate back to `bytes`. Empty chunks are kept, since a
/// decoder must accept them too.
pub fn split_at<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut chunks = Vec::with_capacity(points.len() + 1);
    let mut prev = 0;
    for p in points {
        chunks.push(&bytes[prev..p]);
        prev = p;
    }
    chunks.push(&bytes[prev..]);
    chunks
}

/// `text` cut before each of `cuts` (character positions, taken modulo the character
/// count + 1, in any order): the non-empty pieces, in order, that concatenate back to
/// `text`. Every cut lands on a character boundary, so none is lost.
pub fn split_text<'a>(text: &'a str, cuts: &[usize]) -> Vec<&'a str> {
    let bounds: Vec<usize> = text
        .char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect();
    let mut points: Vec<usize> = cuts.iter().map(|c| bounds[c % bounds.len()]).collect();
    points.push(0);
    points.push(text.len());
    points.sort_unstable();
    points.dedup();
    points.windows(2).map(|w| &text[w[0]..w[1]]).collect()
}

/// `events` with adjacent text deltas joined, and adjacent thinking deltas: decoders join
/// the pieces one read of the body brings, so the same reply cut differently gives
/// different deltas but the same merged events.
pub fn merged(events: Vec<ollm_types::ProviderEvent>) -> Vec<ollm_types::ProviderEvent> {
    use ollm_types::ProviderEvent::{TextDelta, ThinkingDelta};
    let mut out: Vec<ollm_types::ProviderEvent> = Vec::with_capacity(events.len());
    for event in events {
        match (out.last_mut(), event) {
            (Some(TextDelta { text: a }), TextDelta { text: b })
            | (Some(ThinkingDelta { text: a }), ThinkingDelta { text: b }) => a.push_str(&b),
            (_, event) => out.push(event),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_concatenate_back() {
        // 13 wraps to 6 (modulo len + 1): a cut at the very end leaves an empty chunk.
        let chunks = split_at(b"abcdef", &[4, 1, 13]);
        assert_eq!(chunks, vec![&b"a"[..], b"bcd", b"ef", b""]);
        assert_eq!(chunks.concat(), b"abcdef");
    }

    #[test]
    fn text_is_cut_on_characters_into_non_empty_pieces() {
        let cases: [(&str, &[usize], &[&str]); 5] = [
            ("abc", &[], &["abc"]),
            ("abc", &[1, 1, 0, 3], &["a", "bc"]),
            // 2 of "é→x" is before `x`; 5 wraps to 1 (modulo 4).
            ("é→x", &[2, 5], &["é", "→", "x"]),
            ("", &[3], &[]),
            ("ab", &[2, 1], &["a", "b"]),
        ];
        for (text, cuts, pieces) in cases {
            let got = split_text(text, cuts);
            assert_eq!(got, pieces, "{text:?} cut at {cuts:?}");
            assert_eq!(got.concat(), text);
        }
    }

    #[test]
    fn merging_joins_only_neighbours_of_one_kind() {
        use ollm_types::ProviderEvent::{TextDelta, ThinkingDelta};
        let t = |s: &str| TextDelta { text: s.into() };
        let th = |s: &str| ThinkingDelta { text: s.into() };
        assert_eq!(
            merged(vec![th("a"), th("b"), t("c"), t("d"), th("e"), t("f")]),
            vec![th("ab"), t("cd"), th("e"), t("f")]
        );
    }
}
