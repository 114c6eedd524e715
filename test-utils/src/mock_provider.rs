//! SKELETON: mock_provider, completed by its issue.
