//! `OLLAMA_HOST`: the address convention of Ollama's own CLI, read the way it reads it
//! (the forms are listed in the crate's shared parser; Ollama adds port 11434 and, for an
//! empty value, `127.0.0.1`).

use crate::BridgeError;
use crate::host::{Defaults, parse};

/// Ollama's default port.
pub const DEFAULT_PORT: u16 = 11434;

/// The default base URL, `http://127.0.0.1:11434`.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:11434";

/// The base URL (`scheme://host:port[/path]`, no trailing slash) for an `OLLAMA_HOST`
/// value (`0.0.0.0`, `host:port`, `http://host:port`, `[::1]:11434`, ...); empty means
/// [`DEFAULT_BASE_URL`]. A value that is no address is an `InvalidUrl` error.
pub fn parse_host(value: &str) -> Result<String, BridgeError> {
    parse(
        value,
        Defaults {
            port: Some(DEFAULT_PORT),
            path: "",
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, expected: Option<&str>) {
        assert_eq!(
            parse_host(input).ok().as_deref(),
            expected,
            "OLLAMA_HOST={input:?}"
        );
    }

    #[test]
    fn forms_ollama_accepts() {
        for (input, expected) in [
            ("", Some("http://127.0.0.1:11434")),
            ("   ", Some("http://127.0.0.1:11434")),
            ("127.0.0.1", Some("http://127.0.0.1:11434")),
            ("127.0.0.1:11434", Some("http://127.0.0.1:11434")),
            ("0.0.0.0", Some("http://127.0.0.1:11434")),
            ("0.0.0.0:8080", Some("http://127.0.0.1:8080")),
            (":12345", Some("http://127.0.0.1:12345")),
            ("gpu-box", Some("http://gpu-box:11434")),
            ("gpu-box:9000", Some("http://gpu-box:9000")),
            ("http://gpu-box", Some("http://gpu-box")),
            ("https://gpu-box", Some("https://gpu-box")),
            ("http://h:1/", Some("http://h:1")),
            ("http://gpu-box:11434", Some("http://gpu-box:11434")),
            (
                "https://gpu-box:8443/ollama/",
                Some("https://gpu-box:8443/ollama"),
            ),
            ("[::1]:11434", Some("http://[::1]:11434")),
            ("[::1]", Some("http://[::1]:11434")),
            ("[::]:9000", Some("http://[::1]:9000")),
            ("::1", Some("http://[::1]:11434")),
            ("http://[fe80::1]:8080/x", Some("http://[fe80::1]:8080/x")),
            ("HTTP://Box:1", Some("http://Box:1")),
            // Not addresses: typed errors, never a silent default.
            ("gpu-box:notaport", None),
            ("gpu-box:70000", None),
            ("ftp://h", None),
            ("gpu box", None),
        ] {
            check(input, expected);
        }
    }
}
