"""Tests of ``diverge_notifications/sansio/drivers``."""
