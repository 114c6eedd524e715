//! DeepSeek V3 / R1: `<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
//! \n```json\n{...}\n```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`, and the V3.1 spelling
//! `<｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{json}<｜tool▁call▁end｜>`.
//!
//! Decisions: each `<｜tool▁call▁begin｜>` starts one call, read up to its
//! `<｜tool▁call▁end｜>` (or the next begin, or the end of the reply when cut short).

use super::{RawArgs, RawCall, json, scan};

const CALLS_BEGIN: &str = "<｜tool▁calls▁begin｜>";
const CALLS_END: &str = "<｜tool▁calls▁end｜>";
const BEGIN: &str = "<｜tool▁call▁begin｜>";
const END: &str = "<｜tool▁call▁end｜>";
const SEP: &str = "<｜tool▁sep｜>";

/// Parses the block that opens `rest`.
pub(super) fn parse(rest: &str) -> (usize, Vec<RawCall>) {
    let mut at = rest
        .strip_prefix(CALLS_BEGIN)
        .map_or(0, |_| CALLS_BEGIN.len());
    let mut calls = Vec::new();
    while let Some(after) = rest[at..].trim_start().strip_prefix(BEGIN) {
        let start = rest.len() - after.len();
        let seg_len = [after.find(END), after.find(BEGIN), after.find(CALLS_END)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(after.len());
        calls.push(one(&after[..seg_len]));
        at = start + seg_len;
        if rest[at..].starts_with(END) {
            at += END.len();
        }
    }
    if rest[at..].trim_start().starts_with(CALLS_END) {
        at = rest.len() - rest[at..].trim_start().len() + CALLS_END.len();
    }
    if calls.is_empty() {
        calls.push(Err(
            "<｜tool▁calls▁begin｜> holds no <｜tool▁call▁begin｜> call".to_owned(),
        ));
    }
    (at, calls)
}

fn one(segment: &str) -> RawCall {
    let Some((head, tail)) = segment.split_once(SEP) else {
        return Err("a DeepSeek call needs <｜tool▁sep｜> between its type and name".to_owned());
    };
    let (name, args) = if head.trim() == "function" {
        let (name, args) = tail.split_once('\n').unwrap_or((tail, ""));
        (name.trim(), unfence(args))
    } else {
        (head.trim(), tail.trim())
    };
    if name.is_empty() {
        return Err("a DeepSeek call names no tool".to_owned());
    }
    let map = scan::first_json(args).and_then(|(_, v)| json::arguments(v))?;
    Ok((name.to_owned(), RawArgs::Json(map)))
}

/// The body of a ```json fence, or the text itself.
fn unfence(s: &str) -> &str {
    let s = s.trim();
    match s.strip_prefix("```") {
        Some(inner) => {
            let inner = inner.split_once('\n').map_or(inner, |(_, body)| body);
            inner.trim_end().strip_suffix("```").unwrap_or(inner)
        }
        None => s,
    }
}
