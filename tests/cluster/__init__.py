"""Tests of ``diverge_notifications/cluster``."""
