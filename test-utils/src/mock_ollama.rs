//! SKELETON: mock_ollama, completed by its issue.
