//! Functionary v3: `>>>NAME\n{json}`, one per call (`>>>all\n` introduces plain text and
//! is not a call; the scanner never treats it as a marker).
//!
//! Decisions: the arguments are the JSON value that follows the name line; a call block
//! runs on while the next non-blank line opens another `>>>NAME`.

use super::{RawArgs, RawCall, json, scan};

/// Parses the `>>>NAME` calls that open `rest`.
pub(super) fn parse(rest: &str) -> (usize, Vec<RawCall>) {
    let mut calls = Vec::new();
    let mut at = 0;
    loop {
        let lead = rest[at..].len() - rest[at..].trim_start().len();
        let line = &rest[at + lead..];
        if scan::marker_at(line) != Some(super::Format::Functionary) {
            break;
        }
        let name_end = line.find('\n').unwrap_or(line.len());
        let name = &line[3..name_end];
        let body = &line[name_end..];
        match scan::first_json(body).and_then(|(len, v)| json::arguments(v).map(|m| (len, m))) {
            Ok((len, map)) => {
                calls.push(Ok((name.to_owned(), RawArgs::Json(map))));
                at += lead + name_end + len;
            }
            Err(e) => {
                calls.push(Err(format!(">>>{name}: {e}")));
                at += lead + name_end;
                break;
            }
        }
    }
    (at, calls)
}
