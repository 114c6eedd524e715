//! SKELETON: recording_tool, completed by its issue.
