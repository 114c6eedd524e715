//! Fitting text to a terminal: shortening to one line, and wrapping at word boundaries.
//!
//! Decisions:
//! - Widths count characters, not display cells (no width table is carried for the rare
//!   wide glyphs; a line with them may wrap a little early or late).
//! - A word longer than the width is split rather than overflowing.

/// `text` on one line (control characters and runs of space collapsed), cut to `max`
/// characters with an ellipsis.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = flat.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Wraps each line of `text` at word boundaries to at most `width` characters.
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let width = width.max(1);
    text.split('\n')
        .map(|line| wrap_line(line, width))
        .collect::<Vec<_>>()
        .join("\n")
}

fn wrap_line(line: &str, width: usize) -> String {
    let mut out = String::new();
    let mut len = 0;
    for word in line.split(' ') {
        let mut word: Vec<char> = word.chars().collect();
        if len > 0 && len + 1 + word.len() > width {
            out.push('\n');
            len = 0;
        } else if len > 0 || (out.is_empty() && word.is_empty() && !line.is_empty()) {
            out.push(' ');
            len += 1;
        }
        while word.len() > width - len.min(width) && len + word.len() > width {
            let room = width - len;
            out.extend(&word[..room]);
            out.push('\n');
            word.drain(..room);
            len = 0;
        }
        out.extend(&word);
        len += word.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn shortens_to_one_line() {
        assert_eq!(shorten("a\n b\tc", 10), "a b c");
        assert_eq!(shorten("abcdef", 3), "abc…");
    }

    #[test]
    fn wraps_at_words() {
        assert_eq!(wrap("the quick brown fox", 9), "the quick\nbrown fox");
        assert_eq!(wrap("abcdefghij", 4), "abcd\nefgh\nij");
        assert_eq!(wrap("one\ntwo three", 5), "one\ntwo\nthree");
    }

    proptest! {
        /// No line is wider than the width, and only line breaks are added.
        #[test]
        fn wrapped_lines_fit_and_keep_the_words(text in "[a-z ]{0,80}", width in 1usize..30) {
            let w = wrap(&text, width);
            for line in w.lines() {
                prop_assert!(line.chars().count() <= width, "{w:?}");
            }
            let squash = |s: &str| s.split_whitespace().collect::<String>();
            prop_assert_eq!(squash(&w), squash(&text));
        }
    }
}
