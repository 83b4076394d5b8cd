"""``OutageLog``: a task failing every few milliseconds while the database is away writes one warning when
it starts failing and one when it runs again; the failures in between are debug lines."""
from __future__ import annotations

import logging

import pytest

from bunqueue.storage.postgres.outages import OutageLog


def test_an_outage_is_told_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="bunqueue.postgres")
    outage = OutageLog("delayed promotion")
    outage.ran()
    for _ in range(50):
        outage.failed(ConnectionRefusedError(111, "Connection refused"))
    outage.ran()
    outage.ran()
    outage.failed(OSError("reset"))
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "PostgreSQL delayed promotion failed: [Errno 111] Connection refused (retrying; said again only once it runs)",
        "PostgreSQL delayed promotion runs again",
        "PostgreSQL delayed promotion failed: reset (retrying; said again only once it runs)",
    ]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 49
