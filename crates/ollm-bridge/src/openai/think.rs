//! A streaming-safe splitter that moves `<think>...</think>` found in answer text to
//! reasoning (pure).
//!
//! Some models write their reasoning into `content` between `<think>` and `</think>`, and
//! servers cut the stream anywhere, including inside a tag. The splitter holds back only the
//! bytes that could still become a tag (at most the tag's length minus one), so text flows
//! on as soon as it is known not to be part of one. A tag never reaches either side.

/// Which side a piece of text belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// Answer text.
    Text,
    /// Reasoning.
    Thinking,
}

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";

/// Splits streamed text into answer and reasoning pieces.
#[derive(Debug, Default, Clone)]
pub struct ThinkSplitter {
    inside: bool,
    /// Text held back because it may be the start of a tag.
    held: String,
}

impl ThinkSplitter {
    /// A splitter outside any `<think>` block.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `text`, calling `emit` with each non-empty piece in order.
    pub fn push(&mut self, text: &str, mut emit: impl FnMut(Side, &str)) {
        if self.held.is_empty() {
            self.scan(text, &mut emit);
        } else {
            let mut joined = std::mem::take(&mut self.held);
            joined.push_str(text);
            self.scan(&joined, &mut emit);
        }
    }

    /// Ends the stream: text held back (an incomplete tag) is emitted as it stands.
    pub fn finish(&mut self, mut emit: impl FnMut(Side, &str)) {
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            emit(self.side(), &held);
        }
    }

    fn side(&self) -> Side {
        if self.inside {
            Side::Thinking
        } else {
            Side::Text
        }
    }

    fn scan(&mut self, mut text: &str, emit: &mut impl FnMut(Side, &str)) {
        loop {
            let tag = if self.inside { CLOSE } else { OPEN };
            // Most deltas hold no `<` at all: one memchr instead of building a
            // substring searcher per delta.
            let at = match memchr::memchr(b'<', text.as_bytes()) {
                Some(_) => text.find(tag),
                None => None,
            };
            match at {
                Some(at) => {
                    if at > 0 {
                        emit(self.side(), &text[..at]);
                    }
                    self.inside = !self.inside;
                    text = &text[at + tag.len()..];
                }
                None => {
                    let keep = partial_tag_suffix(text, tag);
                    let (out, held) = text.split_at(text.len() - keep);
                    if !out.is_empty() {
                        emit(self.side(), out);
                    }
                    self.held.push_str(held);
                    return;
                }
            }
        }
    }
}

/// The length of the longest proper suffix of `text` that is a prefix of `tag`.
fn partial_tag_suffix(text: &str, tag: &str) -> usize {
    let bytes = text.as_bytes();
    let window = &bytes[bytes.len().saturating_sub(tag.len() - 1)..];
    if memchr::memchr(b'<', window).is_none() {
        return 0;
    }
    (1..tag.len())
        .rev()
        .filter(|k| *k <= bytes.len())
        .find(|k| tag.as_bytes().starts_with(&bytes[bytes.len() - k..]))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Runs the splitter over `chunks` and merges adjacent pieces of the same side.
    fn split(chunks: &[&str]) -> Vec<(Side, String)> {
        let mut out: Vec<(Side, String)> = Vec::new();
        let mut emit = |side: Side, text: &str| {
            assert!(!text.is_empty(), "empty piece emitted");
            match out.last_mut() {
                Some((s, t)) if *s == side => t.push_str(text),
                _ => out.push((side, text.to_owned())),
            }
        };
        let mut splitter = ThinkSplitter::new();
        for chunk in chunks {
            splitter.push(chunk, &mut emit);
        }
        splitter.finish(&mut emit);
        out
    }

    fn check(chunks: &[&str], expected: &[(Side, &str)]) {
        let expected: Vec<(Side, String)> = expected
            .iter()
            .map(|(s, t)| (*s, (*t).to_owned()))
            .collect();
        assert_eq!(split(chunks), expected, "chunks: {chunks:?}");
    }

    #[test]
    fn tags_move_text_to_thinking() {
        use Side::*;
        check(
            &["<think>hm</think>yes"],
            &[(Thinking, "hm"), (Text, "yes")],
        );
        check(
            &["<thi", "nk>hm</th", "ink>yes"],
            &[(Thinking, "hm"), (Text, "yes")],
        );
        check(&["a < b"], &[(Text, "a < b")]);
        check(&["a <", "b"], &[(Text, "a <b")]);
        check(&["ends with <thin"], &[(Text, "ends with <thin")]);
        check(&["<think>never closed"], &[(Thinking, "never closed")]);
        check(&["<<think>x"], &[(Text, "<"), (Thinking, "x")]);
        check(
            &["é<think>ü</think>ß"],
            &[(Text, "é"), (Thinking, "ü"), (Text, "ß")],
        );
        check(&["<think></think>"], &[]);
        check(&[], &[]);
    }

    #[test]
    fn text_without_a_possible_tag_is_not_held() {
        let mut splitter = ThinkSplitter::new();
        let mut got = String::new();
        splitter.push("a <b", |_, t| got.push_str(t));
        assert_eq!(got, "a <b");
        splitter.push(" <th", |_, t| got.push_str(t));
        assert_eq!(got, "a <b ");
        splitter.push("ick>", |_, t| got.push_str(t));
        assert_eq!(got, "a <b <thick>");
    }

    /// The reference: the whole text split in one go, by a plain search.
    fn reference(text: &str) -> Vec<(Side, String)> {
        let mut out: Vec<(Side, String)> = Vec::new();
        let mut inside = false;
        let mut rest = text;
        loop {
            let tag = if inside { CLOSE } else { OPEN };
            let (piece, next) = match rest.find(tag) {
                Some(at) => (&rest[..at], Some(&rest[at + tag.len()..])),
                None => (rest, None),
            };
            let side = if inside { Side::Thinking } else { Side::Text };
            if !piece.is_empty() {
                match out.last_mut() {
                    Some((s, t)) if *s == side => t.push_str(piece),
                    _ => out.push((side, piece.to_owned())),
                }
            }
            match next {
                Some(n) => {
                    rest = n;
                    inside = !inside;
                }
                None => return out,
            }
        }
    }

    proptest! {
        #[test]
        fn any_split_gives_the_reference(
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("<think>".to_owned()),
                    Just("</think>".to_owned()),
                    Just("<".to_owned()),
                    Just("</".to_owned()),
                    "[a-zé<>/ ]{0,6}",
                ],
                0..12,
            ),
            cuts in proptest::collection::vec(0usize..200, 0..10),
        ) {
            let text: String = parts.concat();
            let mut points: Vec<usize> = cuts
                .into_iter()
                .map(|c| c % (text.len() + 1))
                .filter(|p| text.is_char_boundary(*p))
                .collect();
            points.sort_unstable();
            let mut chunks = Vec::new();
            let mut prev = 0;
            for p in points {
                chunks.push(&text[prev..p]);
                prev = p;
            }
            chunks.push(&text[prev..]);
            prop_assert_eq!(split(&chunks), reference(&text));
        }
    }
}
