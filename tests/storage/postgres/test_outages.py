"""``OutageLog``: a task failing every few milliseconds while the database is away writes one warning when
it starts failing and one when it runs again; the failures in between are debug lines."""
from __future__ import annotations

import logging

import pytest

from bunqueue.storage.postgres.outages import OutageLog, one_line_pool_warnings


def test_an_outage_is_told_once_and_its_end_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="bunqueue.postgres")
    outage = OutageLog("timers")
    outage.ran("crons")
    for _ in range(50):
        for task in ("crons", "delayed promotion"):
            outage.failed(ConnectionRefusedError(111, "Connection refused"), task)
    outage.ran("crons")
    outage.ran("crons")
    outage.ran("delayed promotion")
    outage.failed(OSError("reset"), "crons")
    told = [(r.levelname, r.getMessage()) for r in caplog.records if r.levelno >= logging.INFO]
    assert told == [
        ("WARNING", "PostgreSQL timers failed (crons): [Errno 111] Connection refused"
                    " (retrying; told again when it recovers)"),
        ("INFO", "PostgreSQL timers recovered"),
        ("WARNING", "PostgreSQL timers failed (crons): reset (retrying; told again when it recovers)"),
    ]
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 99


def test_asyncpgs_pool_warnings_keep_their_reason_on_one_line(caplog: pytest.LogCaptureFixture) -> None:
    one_line_pool_warnings()
    one_line_pool_warnings()  # once per pool: the filter is not stacked
    pool_log = logging.getLogger("asyncpg.pool")
    assert len(pool_log.filters) == 1
    try:
        raise ConnectionRefusedError(111, "Connection refused")
    except ConnectionRefusedError:
        pool_log.warning("Failed to restore the pool connection floor; retrying", exc_info=True)
    [record] = [r for r in caplog.records if r.name == "asyncpg.pool"]
    assert record.exc_info is None and record.exc_text is None
    assert record.getMessage() == (
        "Failed to restore the pool connection floor; retrying: [Errno 111] Connection refused")
    assert "Traceback" not in caplog.text
