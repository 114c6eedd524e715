//! Wire repair shared by both adapters: the tool names models and servers get slightly
//! wrong, brought back to the names the request offered.
//!
//! # Decisions
//! - A name is changed only when it is not offered as it is and exactly one offered name
//!   matches after these repairs, in this order: a `functions.` prefix dropped (OpenAI's
//!   own namespace, which some models echo), a `:N` suffix dropped (an index some
//!   templates append), then letter case ignored. Anything else is left as it is, so the
//!   turn loop answers an unknown tool with an error the model can read.
//! - With no tools offered nothing is changed (there is nothing to normalise towards).
//! - The other repairs (a flat call without `function`, a missing `type` or id, arguments
//!   as a string or as an object, OpenAI's legacy `function_call`) live where each
//!   adapter reads its wire format; this module holds what both need alike.

/// The offered tool names of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Offered {
    names: Vec<String>,
}

impl Offered {
    /// The names of the tools a request offers.
    pub(crate) fn new(names: impl IntoIterator<Item = String>) -> Self {
        Offered {
            names: names.into_iter().collect(),
        }
    }

    /// `name`, or the offered name it differs from only by a `functions.` prefix, a `:N`
    /// suffix or letter case.
    pub(crate) fn normalise(&self, name: String) -> String {
        if self.names.is_empty() || self.names.contains(&name) {
            return name;
        }
        let mut bare = name.trim();
        if let Some(rest) = strip_prefix_ignore_case(bare, "functions.") {
            bare = rest;
        }
        if let Some((head, index)) = bare.rsplit_once(':') {
            if !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit()) {
                bare = head;
            }
        }
        if let Some(exact) = self.names.iter().find(|n| n.as_str() == bare) {
            return exact.clone();
        }
        let mut folded = self.names.iter().filter(|n| n.eq_ignore_ascii_case(bare));
        match (folded.next(), folded.next()) {
            (Some(only), None) => only.clone(),
            _ => name,
        }
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn check(offered: &[&str], name: &str, want: &str) {
        let offered = Offered::new(offered.iter().map(|s| (*s).to_owned()));
        assert_eq!(offered.normalise(name.to_owned()), want, "{name:?}");
    }

    #[test]
    fn names_are_brought_back_to_the_offered_ones() {
        let tools = ["read_file", "list_dir", "Grep"];
        check(&tools, "read_file", "read_file");
        check(&tools, "READ_FILE", "read_file");
        check(&tools, "functions.read_file", "read_file");
        check(&tools, "Functions.Read_File", "read_file");
        check(&tools, "read_file:0", "read_file");
        check(&tools, "functions.list_dir:12", "list_dir");
        check(&tools, "grep", "Grep");
        // Not a repair: left for the turn loop to refuse.
        check(&tools, "read", "read");
        check(&tools, "read_file:x", "read_file:x");
        check(&tools, "tools.read_file", "tools.read_file");
        check(&tools, "", "");
        check(&[], "READ_FILE", "READ_FILE");
        // Two offered names equal but for case: an exact one wins, else no guess.
        check(&["ab", "AB"], "AB", "AB");
        check(&["ab", "AB"], "Ab", "Ab");
    }

    proptest! {
        /// Any offered name survives every disguise the rules know, and an offered name
        /// is never changed.
        #[test]
        fn disguised_offered_names_come_back(
            name in "[a-z][a-z_]{0,12}",
            prefix in any::<bool>(),
            index in proptest::option::of(0u32..100),
            upper in any::<bool>(),
        ) {
            let offered = Offered::new([name.clone(), "other_tool".to_owned()]);
            prop_assert_eq!(offered.normalise(name.clone()), name.clone());
            let mut disguised = if upper { name.to_uppercase() } else { name.clone() };
            if prefix { disguised = format!("functions.{disguised}"); }
            if let Some(i) = index { disguised = format!("{disguised}:{i}"); }
            prop_assert_eq!(offered.normalise(disguised), name);
        }
    }
}
