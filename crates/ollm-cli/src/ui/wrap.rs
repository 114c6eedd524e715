//! Fitting text to a terminal: shortening to one line, and wrapping at word boundaries.
//!
//! Decisions:
//! - Widths count characters, not display cells (no width table is carried for the rare
//!   wide glyphs; a line with them may wrap a little early or late).
//! - A word longer than the width is split rather than overflowing.
//! - Streamed text ([`StreamWrap`]) is wrapped as it arrives and nothing is held back (a
//!   stalled stream still shows its last half-word): a word that outgrows its line is
//!   erased and printed again on the next, and a word wider than a line is split. ANSI
//!   escape sequences pass through at width zero, so it wraps the markdown styler's
//!   output without counting its styling.
//! - Only a terminal is wrapped; piped or redirected output keeps the model's lines.

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

/// Wraps streamed text at word boundaries to a width, as it arrives. Nothing is held
/// back: a word is printed as it grows, and when it outgrows the line it is erased
/// (cursor left, erase to the end of the line) and printed again on the next one. Only
/// spaces wait, for the word after them.
#[derive(Debug)]
pub(crate) struct StreamWrap {
    width: usize,
    /// Visible characters on the current output line.
    col: usize,
    /// The word being written, as printed on the current line (escape sequences too).
    word: String,
    /// Its visible characters.
    word_len: usize,
    /// Spaces not printed yet: printed before the next word, dropped where a line wraps.
    spaces: usize,
    /// Inside an escape sequence (`ESC [ ... letter`).
    escape: bool,
}

impl StreamWrap {
    /// A wrapper for lines of at most `width` characters.
    pub(crate) fn new(width: usize) -> Self {
        StreamWrap {
            width: width.max(2),
            col: 0,
            word: String::new(),
            word_len: 0,
            spaces: 0,
            escape: false,
        }
    }

    /// Wraps `text`, returning what to print.
    pub(crate) fn feed(&mut self, text: &str) -> String {
        let mut out = String::new();
        for c in text.chars() {
            self.push(c, &mut out);
        }
        out
    }

    /// Prints the spaces still waiting (at the end of a message).
    pub(crate) fn flush(&mut self) -> String {
        self.col += self.spaces;
        " ".repeat(std::mem::take(&mut self.spaces))
    }

    /// The cursor is at the start of a line again (a newline printed around the wrapper).
    pub(crate) fn at_line_start(&mut self) {
        self.col = 0;
        self.spaces = 0;
        self.end_word();
    }

    fn end_word(&mut self) {
        self.word.clear();
        self.word_len = 0;
    }

    fn push(&mut self, c: char, out: &mut String) {
        if self.escape || c == '\x1b' {
            self.escape = c == '\x1b' || !c.is_ascii_alphabetic();
            self.word.push(c);
            out.push(c);
            return;
        }
        match c {
            '\n' => {
                out.push('\n');
                self.at_line_start();
            }
            ' ' => {
                self.end_word();
                self.spaces += 1;
                if self.col + self.spaces > self.width {
                    out.push('\n');
                    self.at_line_start();
                }
            }
            _ => {
                if self.col + self.spaces + 1 > self.width {
                    self.break_before(out);
                }
                out.push_str(&" ".repeat(self.spaces));
                self.col += self.spaces + 1;
                self.spaces = 0;
                out.push(c);
                self.word.push(c);
                self.word_len += 1;
            }
        }
    }

    /// The next character does not fit: start a new line, taking the word along unless
    /// it fills the whole line (then it is split there).
    fn break_before(&mut self, out: &mut String) {
        let word = std::mem::take(&mut self.word);
        let len = self.word_len;
        let carried = len > 0 && len < self.col;
        if carried {
            out.push_str(&format!("\x1b[{len}D\x1b[K"));
        }
        out.push('\n');
        self.at_line_start();
        if carried {
            out.push_str(&word);
            self.word = word;
            self.word_len = len;
            self.col = len;
        }
    }
}

/// The terminal's width in columns (80 when it cannot be told).
pub(crate) fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .or_else(|| {
            terminal_size::terminal_size_of(std::io::stdout()).map(|(w, _)| usize::from(w.0))
        })
        .filter(|w| *w >= 20)
        .unwrap_or(80)
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

    /// What a terminal shows after printing `out`: it understands newlines, cursor left
    /// (`ESC [ n D`) and erase to the end of the line (`ESC [ K`); colours are dropped.
    fn screen(out: &str) -> String {
        let mut lines: Vec<Vec<char>> = vec![Vec::new()];
        let mut cursor = 0;
        let mut chars = out.chars();
        while let Some(c) = chars.next() {
            let line = lines.last_mut().unwrap();
            match c {
                '\n' => {
                    lines.push(Vec::new());
                    cursor = 0;
                }
                '\x1b' => {
                    let mut params = String::new();
                    let command = chars.by_ref().find(|c| {
                        params.push(*c);
                        c.is_ascii_alphabetic()
                    });
                    let n: usize = params
                        .trim_matches(|c: char| !c.is_ascii_digit())
                        .parse()
                        .unwrap_or(0);
                    match command {
                        Some('D') => cursor -= n,
                        Some('K') => line.truncate(cursor),
                        _ => {}
                    }
                }
                _ => {
                    line.truncate(cursor);
                    line.push(c);
                    cursor += 1;
                }
            }
        }
        let text: Vec<String> = lines.iter().map(|l| l.iter().collect()).collect();
        text.join("\n")
    }

    /// Feeds `text` in `chunk`-character pieces through a [`StreamWrap`]: what was printed,
    /// and whether every piece's text showed at once (nothing held but spaces).
    fn stream(text: &str, width: usize, chunk: usize) -> (String, bool) {
        let mut w = StreamWrap::new(width);
        let (mut out, mut prompt) = (String::new(), true);
        let chars: Vec<char> = text.chars().collect();
        let mut sent = String::new();
        for piece in chars.chunks(chunk.max(1)) {
            let piece: String = piece.iter().collect();
            sent.push_str(&piece);
            out.push_str(&w.feed(&piece));
            let squash = |s: &str| s.split_whitespace().collect::<String>();
            prompt &= squash(&screen(&out)) == squash(&sent);
        }
        out.push_str(&w.flush());
        (out, prompt)
    }

    #[test]
    fn streams_wrapped_at_words() {
        let check = |text: &str, width: usize, expected: &str| {
            for chunk in 1..5 {
                let shown = screen(&stream(text, width, chunk).0);
                let shown: Vec<&str> = shown.lines().map(str::trim_end).collect();
                assert_eq!(shown.join("\n"), expected, "{text:?} by {chunk}");
            }
        };
        check("the quick brown fox", 9, "the quick\nbrown fox");
        check("abcdefghij", 4, "abcd\nefgh\nij");
        check("a  \nb", 9, "a\nb");
        check("  abcdef", 4, "\nabcd\nef");
        check("one\ntwo three", 5, "one\ntwo\nthree");
        // Escape sequences take no room.
        check("a \x1b[36mbc\x1b[0m d", 4, "a bc\nd");
        check(&"`".repeat(10), 4, "````\n````\n``");
        // A word that outgrows the line is erased and printed again below.
        let out = stream("ab cdef", 5, 1).0;
        assert_eq!(out, "ab cd\x1b[2D\x1b[K\ncdef");
    }

    proptest! {
        /// Streamed: no line is wider than the width, only line breaks are added (a space
        /// may become one), and every chunk shows at once.
        #[test]
        fn streamed_lines_fit_and_show_at_once(
            text in "[a-z` \n]{0,120}", width in 2usize..30, chunk in 1usize..9,
        ) {
            let (out, prompt) = stream(&text, width, chunk);
            let shown = screen(&out);
            for line in shown.lines() {
                prop_assert!(line.chars().count() <= width, "{shown:?}");
            }
            prop_assert!(prompt, "{out:?}");
            let squash = |s: &str| s.split_whitespace().collect::<String>();
            prop_assert_eq!(squash(&shown), squash(&text));
        }
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
