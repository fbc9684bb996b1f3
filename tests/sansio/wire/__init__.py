"""Tests of ``diverge_notifications/sansio/wire``."""
