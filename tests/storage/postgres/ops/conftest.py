from __future__ import annotations

# The PostgreSQL-mode servers and twins are shared with the engine's own tests one folder up.
from tests.storage.postgres.conftest import brokers, pg_server, postgres_broker, twins

__all__ = ["brokers", "pg_server", "postgres_broker", "twins"]
