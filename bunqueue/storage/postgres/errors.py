"""Why the PostgreSQL mode stops at start-up: one line each, logged before the server exits with status 1.

Kept apart from the driver so that the command line can name these without importing asyncpg.
"""
from __future__ import annotations


class StartupFailed(Exception):
    """The PostgreSQL mode cannot start; the message is the line the server logs."""


def storage_failed(reason: str) -> StartupFailed:
    """The original's words for a storage that could not be opened, with the reason."""
    return StartupFailed(f"Failed to initialize storage: {reason}")
