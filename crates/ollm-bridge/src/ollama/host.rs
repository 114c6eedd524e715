//! `OLLAMA_HOST`: the address convention of Ollama's own CLI, read the way it reads it.
//!
//! Accepted forms (as in Ollama's `envconfig.Host`): empty (`http://127.0.0.1:11434`),
//! `host`, `host:port`, `:port`, `[v6]:port`, and any of those behind `http://` or
//! `https://` (then the default port is 80 or 443, as Ollama does). A path is kept. A port
//! that is not a number in `0..=65535` falls back to the default. Because this is a
//! *client*, the unspecified addresses a server binds to (`0.0.0.0`, `::`) mean this
//! machine and are replaced by the loopback address.

/// Ollama's default port.
pub const DEFAULT_PORT: u16 = 11434;

/// The default base URL, `http://127.0.0.1:11434`.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434";

/// The base URL (`scheme://host:port[/path]`, no trailing slash) for an `OLLAMA_HOST` value.
pub fn base_url_from_host(value: &str) -> String {
    let value = value.trim();
    let (scheme, rest, default_port) = match value.split_once("://") {
        None => ("http", value, DEFAULT_PORT),
        Some((s, rest)) if s.eq_ignore_ascii_case("https") => ("https", rest, 443),
        Some((s, rest)) if s.eq_ignore_ascii_case("http") => ("http", rest, 80),
        Some((_, rest)) => ("http", rest, DEFAULT_PORT),
    };
    let (hostport, path) = match rest.split_once('/') {
        Some((hp, path)) => (hp, path.trim_end_matches('/')),
        None => (rest, ""),
    };
    let (host, port) = split_host_port(hostport);
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "::" | "[::]" => "[::1]",
        h => h,
    };
    let port = port
        .and_then(|p| p.parse::<u16>().ok())
        .unwrap_or(default_port);
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    };
    if path.is_empty() {
        format!("{scheme}://{host}:{port}")
    } else {
        format!("{scheme}://{host}:{port}/{path}")
    }
}

/// Splits `host:port`, `[v6]:port`, `[v6]`, a bare v6 address or a bare host.
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
    use super::*;

    fn check(input: &str, expected: &str) {
        assert_eq!(base_url_from_host(input), expected, "OLLAMA_HOST={input:?}");
    }

    #[test]
    fn forms_ollama_accepts() {
        for (input, expected) in [
            ("", "http://127.0.0.1:11434"),
            ("   ", "http://127.0.0.1:11434"),
            ("127.0.0.1:11434", "http://127.0.0.1:11434"),
            ("0.0.0.0", "http://127.0.0.1:11434"),
            ("0.0.0.0:8080", "http://127.0.0.1:8080"),
            (":12345", "http://127.0.0.1:12345"),
            ("gpu-box", "http://gpu-box:11434"),
            ("gpu-box:9000", "http://gpu-box:9000"),
            ("http://gpu-box", "http://gpu-box:80"),
            ("https://gpu-box", "https://gpu-box:443"),
            ("http://gpu-box:11434", "http://gpu-box:11434"),
            (
                "https://gpu-box:8443/ollama/",
                "https://gpu-box:8443/ollama",
            ),
            ("gpu-box:notaport", "http://gpu-box:11434"),
            ("gpu-box:70000", "http://gpu-box:11434"),
            ("[::1]:9000", "http://[::1]:9000"),
            ("[::]:9000", "http://[::1]:9000"),
            ("::1", "http://[::1]:11434"),
            ("HTTP://Box:1", "http://Box:1"),
        ] {
            check(input, expected);
        }
    }
}
