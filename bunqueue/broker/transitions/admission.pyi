from typing import Any

from bunqueue._core.jobs import Job

def admit(core: Any, job: Job, now: float, q: Any = None) -> str: ...
