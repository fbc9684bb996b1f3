"""Tests of ``diverge_notifications/sansio/mcp``."""
