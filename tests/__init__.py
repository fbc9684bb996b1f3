"""The test suite: a tree that mirrors the package."""
