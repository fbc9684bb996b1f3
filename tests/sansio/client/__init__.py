"""Tests of ``diverge_notifications/sansio/client``."""
