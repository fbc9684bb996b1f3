"""Tests of ``diverge_notifications/cli``."""
