//! Server addresses as people write them (`OLLAMA_HOST`, `--host`, a config file) to a
//! base URL: the one parser both adapters' `parse_host` wrap.
//!
//! Accepted forms (as in Ollama's `envconfig.Host`): `host`, `host:port`, `:port`,
//! `[v6]:port`, `[v6]`, a bare v6 address, and any of those behind `http://` or `https://`.
//! A path is kept (without its trailing slash). Because this is a *client*, the unspecified
//! addresses a server binds to (`0.0.0.0`, `::`) mean this machine and become loopback.
//!
//! # Decisions
//! - No scheme: `http` and the adapter's default port (Ollama's 11434; none for
//!   OpenAI-compatible servers, whose default depends on the server). An explicit scheme
//!   without a port uses the scheme's own port (80, 443), as Ollama does.
//! - The adapter's default path applies only when no path is given (`/v1` for
//!   OpenAI-compatible servers).
//! - Anything else is an [`BridgeError::InvalidUrl`], never a silent fallback: another
//!   scheme, white space inside, a port that is not a number in `0..=65535`.

use crate::BridgeError;

/// What an adapter adds to an address that lacks it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Defaults {
    /// The port when the address has neither a port nor a scheme.
    pub(crate) port: Option<u16>,
    /// The path when the address has none (`""` or `/v1`).
    pub(crate) path: &'static str,
}

/// The base URL (`scheme://host[:port][/path]`, no trailing slash) for `value`.
pub(crate) fn parse(value: &str, defaults: Defaults) -> Result<String, BridgeError> {
    let value = value.trim();
    let invalid = |message: &str| BridgeError::InvalidUrl {
        url: redact_url(value),
        message: message.to_owned(),
    };
    if value.chars().any(char::is_whitespace) {
        return Err(invalid("white space inside the address"));
    }
    let (scheme, rest, default_port) = match value.split_once("://") {
        None => ("http", value, defaults.port),
        Some((s, rest)) if s.eq_ignore_ascii_case("https") => ("https", rest, None),
        Some((s, rest)) if s.eq_ignore_ascii_case("http") => ("http", rest, None),
        Some(_) => return Err(invalid("the scheme must be http or https")),
    };
    let (hostport, path) = match rest.split_once('/') {
        Some((hp, path)) => (hp, path.trim_end_matches('/')),
        None => (rest, ""),
    };
    // Credentials (`user:key@host`) are kept for the transport, which sends them as basic
    // authentication and never prints them.
    let (userinfo, hostport) = match hostport.rsplit_once('@') {
        Some((info, hp)) => (format!("{info}@"), hp),
        None => (String::new(), hostport),
    };
    let (host, port) = split_host_port(hostport);
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "::" => "::1",
        h => h,
    };
    let port = match port {
        Some(p) => Some(
            p.parse::<u16>()
                .map_err(|_| invalid("the port must be a number from 0 to 65535"))?,
        ),
        None => default_port,
    };
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    let port = port.map_or(String::new(), |p| format!(":{p}"));
    let path = if path.is_empty() {
        defaults.path.trim_start_matches('/')
    } else {
        path
    };
    Ok(if path.is_empty() {
        format!("{scheme}://{userinfo}{host}{port}")
    } else {
        format!("{scheme}://{userinfo}{host}{port}/{path}")
    })
}

/// `text` with the credentials of every URL in it (`scheme://user:key@host`) replaced by
/// `***`: for anything printed (errors, `ollm config show`, logs).
pub fn redact_url(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        match tail[..authority_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str("***");
                rest = &tail[userinfo_end..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// Splits `host:port`, `[v6]:port`, `[v6]`, a bare v6 address or a bare host; the host
/// comes back without brackets.
fn split_host_port(hp: &str) -> (&str, Option<&str>) {
    if let Some(rest) = hp.strip_prefix('[') {
        return match rest.split_once(']') {
            Some((h, tail)) => (h, tail.strip_prefix(':')),
            None => (hp, None),
        };
    }
    match hp.matches(':').count() {
        0 => (hp, None),
        1 => hp.split_once(':').map_or((hp, None), |(h, p)| (h, Some(p))),
        // A bare IPv6 address without brackets has no port.
        _ => (hp, None),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn credentials_are_kept_for_sending_and_redacted_for_printing() {
        let defaults = Defaults {
            port: Some(11434),
            path: "",
        };
        assert_eq!(
            parse("http://user:sk-1@h:8080/v1", defaults).unwrap(),
            "http://user:sk-1@h:8080/v1"
        );
        assert_eq!(
            parse("user:sk-1@h", defaults).unwrap(),
            "http://user:sk-1@h:11434"
        );
        let bad = parse("ftp://user:sk-1@h", defaults).unwrap_err();
        assert!(!bad.to_string().contains("sk-1"), "{bad}");
        for (text, want) in [
            ("http://user:sk-1@h:1/v1", "http://***@h:1/v1"),
            (
                "could not connect to https://k@h/x: refused",
                "could not connect to https://***@h/x: refused",
            ),
            ("http://h:1/a@b", "http://h:1/a@b"),
            ("no url", "no url"),
            ("a://x@y b://z@w", "a://***@y b://***@w"),
        ] {
            assert_eq!(redact_url(text), want, "{text}");
        }
    }

    proptest! {
        /// Whatever the surrounding text, a key in a URL's userinfo is not printed.
        #[test]
        fn a_key_in_a_url_never_survives_redaction(
            before in "[ -~]{0,20}",
            key in "[A-Za-z0-9_-]{8,20}",
            host in "[a-z0-9.]{1,12}",
            after in "[ -~]{0,20}",
        ) {
            let text = format!("{before} http://user:{key}@{host}:8080/v1 {after}");
            let redacted = redact_url(&text);
            let without_tail = redacted.replace(&after, "").replace(&before, "");
            prop_assert!(!without_tail.contains(&key), "{}", redacted);
        }
    }
}
