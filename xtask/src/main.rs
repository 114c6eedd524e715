//! SKELETON
fn main() {}
