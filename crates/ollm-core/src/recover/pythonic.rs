//! Pythonic calls: `[f(a=1), g(b="x")]` (Llama 4, LFM, Llama 3.2 small models) and Llama
//! 3.1's built-in `name.call(key="value")`.
//!
//! Decisions: a small recursive-descent reader of Python literals (strings in either
//! quote, numbers, `True`/`False`/`None` and their JSON spellings, lists, tuples, dicts)
//! into JSON; keyword arguments only, because a positional argument has no name to give
//! the tool. Nothing is evaluated: an expression that is not a literal is an error.

use serde_json::{Map, Number, Value};

use super::{RawArgs, RawCall};

/// The calls in `s`: a bracketed list of calls or a single call.
pub(super) fn parse_calls(s: &str) -> Result<Vec<(String, RawArgs)>, String> {
    let mut p = Reader { s: s.trim(), at: 0 };
    let listed = p.eat('[');
    let mut calls = Vec::new();
    loop {
        p.ws();
        if listed && p.eat(']') {
            break;
        }
        calls.push(p.call()?);
        p.ws();
        if !listed {
            break;
        }
        if !p.eat(',') {
            p.ws();
            if !p.eat(']') {
                return Err("expected `,` or `]` between calls".to_owned());
            }
            break;
        }
    }
    p.ws();
    if p.at != p.s.len() || calls.is_empty() {
        return Err("expected a list of calls like [name(key=value)]".to_owned());
    }
    Ok(calls)
}

/// The calls of a block body as raw calls (one error when it does not read).
pub(super) fn block_calls(s: &str) -> Vec<RawCall> {
    match parse_calls(s) {
        Ok(calls) => calls.into_iter().map(Ok).collect(),
        Err(e) => vec![Err(e)],
    }
}

struct Reader<'a> {
    s: &'a str,
    at: usize,
}

impl Reader<'_> {
    fn rest(&self) -> &str {
        &self.s[self.at..]
    }

    fn ws(&mut self) {
        self.at = self.s.len() - self.rest().trim_start().len();
    }

    fn eat(&mut self, c: char) -> bool {
        self.ws();
        let hit = self.rest().starts_with(c);
        if hit {
            self.at += c.len_utf8();
        }
        hit
    }

    fn ident(&mut self) -> Option<&str> {
        self.ws();
        let len = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.' || c == '-'))
            .unwrap_or(self.rest().len());
        let start = self.at;
        self.at += len;
        (len > 0).then(|| &self.s[start..start + len])
    }

    fn call(&mut self) -> Result<(String, RawArgs), String> {
        let name = self.ident().ok_or("expected a function name")?.to_owned();
        let name = name.strip_suffix(".call").unwrap_or(&name).to_owned();
        if !self.eat('(') {
            return Err(format!("expected `(` after {name}"));
        }
        let mut args = Map::new();
        while !self.eat(')') {
            let key = self
                .ident()
                .ok_or("expected a keyword argument")?
                .to_owned();
            if !self.eat('=') {
                return Err(format!(
                    "{name}: only keyword arguments (key=value) are supported"
                ));
            }
            let value = self.literal()?;
            args.insert(key, value);
            if !self.eat(',') {
                if !self.eat(')') {
                    return Err(format!("{name}: expected `,` or `)`"));
                }
                break;
            }
        }
        Ok((name, RawArgs::Json(args)))
    }

    fn literal(&mut self) -> Result<Value, String> {
        self.ws();
        let c = self.rest().chars().next().ok_or("a value is missing")?;
        match c {
            '"' | '\'' => self.string(c).map(Value::String),
            '[' | '(' => self.sequence(if c == '[' { ']' } else { ')' }),
            '{' => self.dict(),
            _ => self.scalar(),
        }
    }

    fn string(&mut self, quote: char) -> Result<String, String> {
        self.at += 1;
        let mut out = String::new();
        let mut chars = self.rest().char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    let (_, e) = chars.next().ok_or("unterminated string")?;
                    out.push(match e {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        other => other,
                    });
                }
                c if c == quote => {
                    self.at += i + 1;
                    return Ok(out);
                }
                c => out.push(c),
            }
        }
        Err("unterminated string".to_owned())
    }

    fn sequence(&mut self, close: char) -> Result<Value, String> {
        self.at += 1;
        let mut items = Vec::new();
        while !self.eat(close) {
            items.push(self.literal()?);
            if !self.eat(',') {
                if !self.eat(close) {
                    return Err(format!("expected `,` or `{close}`"));
                }
                break;
            }
        }
        Ok(Value::Array(items))
    }

    fn dict(&mut self) -> Result<Value, String> {
        self.at += 1;
        let mut map = Map::new();
        while !self.eat('}') {
            let key = match self.literal()? {
                Value::String(s) => s,
                other => other.to_string(),
            };
            if !self.eat(':') {
                return Err("expected `:` in a dict".to_owned());
            }
            map.insert(key, self.literal()?);
            if !self.eat(',') {
                if !self.eat('}') {
                    return Err("expected `,` or `}`".to_owned());
                }
                break;
            }
        }
        Ok(Value::Object(map))
    }

    fn scalar(&mut self) -> Result<Value, String> {
        let len = self
            .rest()
            .find(|c: char| matches!(c, ',' | ')' | ']' | '}' | ':') || c.is_whitespace())
            .unwrap_or(self.rest().len());
        let word = &self.rest()[..len];
        let value = match word {
            "True" | "true" => Value::Bool(true),
            "False" | "false" => Value::Bool(false),
            "None" | "null" => Value::Null,
            _ => number(word).ok_or_else(|| format!("{word:?} is not a literal value"))?,
        };
        self.at += len;
        Ok(value)
    }
}

fn number(word: &str) -> Option<Value> {
    if let Ok(i) = word.parse::<i64>() {
        return Some(Value::Number(i.into()));
    }
    word.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map(Value::Number)
}
