"""Twin servers for the PostgreSQL engine's tests: the same frames to a memory-mode server and a
PostgreSQL-mode one, and their replies compared field by field once ids, tokens and times are named by
their order of appearance (``Names``)."""
from __future__ import annotations

from typing import Any

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess

Reply = dict[str, Any]
TIMES = frozenset({
    "timestamp", "createdAt", "startedAt", "processedOn", "runAt", "finishedOn", "completedAt", "lastHeartbeat",
    "ts", "time", "addedAt", "lastSeen", "registeredAt", "nextRun", "lastRun", "expiresAt", "updatedAt", "prevTS",
    "failedAt", "enteredAt", "lastRetryAt", "nextRetryAt", "oldestEntry", "newestEntry",
    # A span between two of those times.
    "duration",
})
IDS = frozenset({
    "id", "ids", "jobId", "jobIds", "parentId", "childId", "dependsOn", "childrenIds", "__parentId", "__childrenIds",
})
TOKENS = frozenset({"token", "tokens", "lockToken"})


class Names:
    """Ids, tokens and times replaced by their order of appearance, so two engines' replies compare."""

    def __init__(self) -> None:
        self.seen: dict[Any, str] = {}

    def name(self, kind: str, value: Any) -> str:
        key = (kind, value)
        if key not in self.seen:
            self.seen[key] = f"<{kind}{sum(1 for k in self.seen if k[0] == kind)}>"
        return self.seen[key]

    def __call__(self, value: Any, field: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v, field) for v in value]
        if field in TIMES and isinstance(value, (int, float)):
            return "<time>"
        if field in IDS and isinstance(value, str):
            return self.name("id", value)
        if field in TOKENS and isinstance(value, str):
            return self.name("token", value)
        if field == "error" and isinstance(value, str):
            for (kind, known), label in self.seen.items():
                if kind == "id":
                    value = value.replace(known, label)
        return value


class Twins:
    """One client on each server; ``same`` sends a frame to both and asserts the replies match."""

    def __init__(self, memory: ServerProcess, postgres: ServerProcess) -> None:
        self.memory = RawClient(memory.addr)
        self.postgres = RawClient(postgres.addr)
        self.memory_names = Names()
        self.postgres_names = Names()
        # The ids each server gave, in order, so a later frame can name "the job pushed k-th" on both.
        self.memory_ids: list[str] = []
        self.postgres_ids: list[str] = []

    def both(self, frame: Reply) -> tuple[Reply, Reply]:
        """Each server's reply to ``frame``; ``"$k"`` anywhere in it is the k-th id that server gave."""
        memory = self.memory.call(_bind(frame, self.memory_ids))
        postgres = self.postgres.call(_bind(frame, self.postgres_ids))
        _collect(memory, self.memory_ids)
        _collect(postgres, self.postgres_ids)
        return memory, postgres

    def same(self, frame: Reply) -> Reply:
        """The PostgreSQL server's reply, asserted equal to the memory server's (names normalized)."""
        memory, postgres = self.both(frame)
        assert self.postgres_names(postgres) == self.memory_names(memory), (frame, memory, postgres)
        return postgres

    def close(self) -> None:
        self.memory.close()
        self.postgres.close()


def _bind(value: Any, ids: list[str]) -> Any:
    if isinstance(value, str) and value.startswith("$") and value[1:].isdigit():
        return ids[int(value[1:])]
    if isinstance(value, dict):
        return {k: _bind(v, ids) for k, v in value.items()}
    if isinstance(value, list):
        return [_bind(v, ids) for v in value]
    return value


def _collect(reply: Any, ids: list[str]) -> None:
    if not isinstance(reply, dict):
        return
    if isinstance(reply.get("id"), str):
        ids.append(reply["id"])
    for job_id in reply.get("ids") or ():
        if isinstance(job_id, str):
            ids.append(job_id)
