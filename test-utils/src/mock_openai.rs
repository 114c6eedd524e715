//! SKELETON: mock_openai, completed by its issue.
