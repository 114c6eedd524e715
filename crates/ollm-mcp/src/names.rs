//! Namespaced tool names: `server__tool`, within the rule model APIs impose on tool names
//! (1 to 64 characters from `[a-zA-Z0-9_-]`).
//!
//! # Decisions
//! - Server names are the user's and are checked, not rewritten: a config with a bad name
//!   is refused ([`McpError::InvalidServerName`]). Tool names are the server's: characters
//!   outside the rule become `_`.
//! - A name longer than 64 characters is cut and ends with 8 hex digits of a hash of the
//!   full name, so two long names that share a prefix stay distinct. A collision that is
//!   left is refused when the tools are registered, never resolved silently.

use crate::McpError;

/// The longest tool name model APIs accept.
pub const MAX_TOOL_NAME: usize = 64;

/// The separator between server and tool.
pub const SEPARATOR: &str = "__";

/// Checks a server name: non-empty, `[a-zA-Z0-9_-]`, no `__`, short enough to leave room.
pub fn check_server_name(name: &str) -> Result<(), McpError> {
    let valid = !name.is_empty()
        && name.len() <= 32
        && name.bytes().all(is_allowed)
        && !name.contains(SEPARATOR);
    if valid {
        Ok(())
    } else {
        Err(McpError::InvalidServerName(name.to_owned()))
    }
}

/// The name the model sees for `tool` of `server` (a server name checked already).
pub fn tool_name(server: &str, tool: &str) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii() && is_allowed(c as u8) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let full = format!("{server}{SEPARATOR}{clean}");
    if full.len() <= MAX_TOOL_NAME {
        return full;
    }
    let hash = fnv1a(format!("{server}{SEPARATOR}{tool}").as_bytes());
    let suffix = format!("_{:08x}", hash as u32);
    format!("{}{suffix}", &full[..MAX_TOOL_NAME - suffix.len()])
}

fn is_allowed(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// FNV-1a: a small, stable hash (names must not change between runs).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn check(server: &str, tool: &str, expected: &str) {
        assert_eq!(tool_name(server, tool), expected);
    }

    #[test]
    fn names() {
        check("fs", "read_file", "fs__read_file");
        check("fs", "read.file/v2", "fs__read_file_v2");
        check("fs", "é", "fs___");
        let long = "x".repeat(80);
        let name = tool_name("srv", &long);
        assert_eq!(name.len(), MAX_TOOL_NAME);
        assert!(name.starts_with("srv__xxx"));
        assert_ne!(name, tool_name("srv", &format!("{long}y")));
    }

    #[test]
    fn server_names() {
        for good in ["fs", "my-server", "a_b", "X9"] {
            assert!(check_server_name(good).is_ok(), "{good}");
        }
        for bad in ["", "a__b", "a b", "a.b", &"x".repeat(33)] {
            assert!(
                matches!(check_server_name(bad), Err(McpError::InvalidServerName(_))),
                "{bad}"
            );
        }
    }

    proptest! {
        #[test]
        fn every_name_follows_the_rule(server in "[a-zA-Z0-9-]{1,32}", tool in ".{0,100}") {
            let name = tool_name(&server, &tool);
            prop_assert!(!name.is_empty() && name.len() <= MAX_TOOL_NAME);
            prop_assert!(name.bytes().all(is_allowed));
            let prefix = format!("{server}{SEPARATOR}");
            prop_assert!(name.starts_with(&prefix));
        }
    }
}
