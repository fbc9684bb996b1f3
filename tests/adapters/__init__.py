"""Tests of ``diverge_notifications/adapters``."""
