//! The `ollm` command-line client. SKELETON: arrives with the CLI issue.

fn main() {}
