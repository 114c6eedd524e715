//! Cutting a byte stream into chunks at arbitrary points, as a network would, for the
//! decoders' "same result however the bytes are split" property tests.

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
