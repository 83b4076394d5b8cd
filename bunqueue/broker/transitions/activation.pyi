from typing import Any

from bunqueue._core.jobs import Job

def activate(
    core: Any, q: Any, count: int, session: Any, owner: str | None, lock_ttl: float, detach: bool, claim: Any = None
) -> tuple[list[Job], list[str] | None]: ...
