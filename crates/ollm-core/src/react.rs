//! The ReAct fallback for models without native tool calling. SKELETON: completed with the
//! foundation issue.
