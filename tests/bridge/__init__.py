"""Tests of ``diverge_notifications/bridge``."""
