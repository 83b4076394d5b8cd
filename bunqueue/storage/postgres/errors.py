"""Why the PostgreSQL mode stops at start-up: one line each, logged before the server exits with status 1.

Kept apart from the driver so that the command line can name these without importing asyncpg.
"""
from __future__ import annotations

# Said after every check has passed: the engine that serves commands from PostgreSQL is not part of this
# version yet. Removed with the one place that raises it (BrokerServer.refuse_postgres) when it lands.
ENGINE_UNAVAILABLE = (
    "The PostgreSQL engine is not available in this version of bunqueue: PostgreSQL was reached and its schema"
    " is ready, but commands cannot be served from it yet (use the memory or sqlite storage driver)"
)


class StartupFailed(Exception):
    """The PostgreSQL mode cannot start; the message is the line the server logs."""


def storage_failed(reason: str) -> StartupFailed:
    """The original's words for a storage that could not be opened, with the reason."""
    return StartupFailed(f"Failed to initialize storage: {reason}")
