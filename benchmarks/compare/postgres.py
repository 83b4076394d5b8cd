"""The PostgreSQL of a ``--modes postgres`` run: one server for the whole run (started here, unless
``--postgres-url`` names one), and a fresh database for every server start, so that each round of each
server starts from empty tables and both servers run on the same PostgreSQL.

A server started here is the test suite's throwaway one (``bunqueue._testbase.postgres``: fsync and
synchronous commit off); the report's header says so, since it lifts both servers' figures alike.
"""
from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from bunqueue._testbase.postgres import PostgresServer


class Databases:
    def __init__(self, url: str | None = None) -> None:
        self.server: PostgresServer | None = None
        self.url = url

    def __enter__(self) -> Databases:
        if self.url is None:
            self.server = PostgresServer().start()
            self.url = self.server.url()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.stop()

    @property
    def note(self) -> str:
        if self.server is not None:
            return "PostgreSQL started for this run (fsync and synchronous_commit off, the same for both servers)"
        return f"PostgreSQL at {urlsplit(self.url or '').hostname}"

    @contextlib.asynccontextmanager
    async def fresh(self) -> AsyncIterator[str]:
        """The URL of a new, empty database, dropped afterwards."""
        assert self.url is not None
        name = f"bench_{uuid.uuid4().hex[:12]}"
        admin = await asyncpg.connect(self.url)
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
            parts = urlsplit(self.url)
            yield urlunsplit(parts._replace(path=f"/{name}"))
            await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        finally:
            await admin.close()
