//! Cutting a tool result that would take too much of the remaining window.
//!
//! # Decisions
//! - The start of the result is kept (a file's head, a command's first lines), cut at
//!   the last line break in the allowed part when there is one, and a marker says how
//!   many characters of how many were left out, so the model knows it saw a part.

/// `content` cut to at most `max_chars` characters plus a marker, or `None` when it fits.
pub fn cut_result(content: &str, max_chars: usize) -> Option<String> {
    let total = content.chars().count();
    if total <= max_chars {
        return None;
    }
    let byte_end = content
        .char_indices()
        .nth(max_chars)
        .map_or(content.len(), |(i, _)| i);
    let allowed = &content[..byte_end];
    let kept = match allowed.rfind('\n') {
        Some(i) if i >= allowed.len() / 2 => &allowed[..=i],
        _ => allowed,
    };
    let left_out = total - kept.chars().count();
    Some(format!(
        "{kept}\n[output cut to fit the context window: {left_out} of {total} characters left out]"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(content: &str, max: usize, want: Option<&str>) {
        assert_eq!(
            cut_result(content, max).as_deref(),
            want,
            "{content:?} at {max}"
        );
    }

    #[test]
    fn cuts() {
        check("short", 10, None);
        check("exactly", 7, None);
        check(
            "abcdefghij",
            4,
            Some("abcd\n[output cut to fit the context window: 6 of 10 characters left out]"),
        );
        check(
            "line one\nline two\nline three",
            20,
            Some(
                "line one\nline two\n\n[output cut to fit the context window: 10 of 28 \
                 characters left out]",
            ),
        );
        check(
            "ééééé",
            2,
            Some("éé\n[output cut to fit the context window: 3 of 5 characters left out]"),
        );
    }
}
