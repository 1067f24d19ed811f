"""Package data for the tool-definition loader tests."""
