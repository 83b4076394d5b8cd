from collections.abc import Callable
from typing import Any

from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import Job
from bunqueue._core.readyqueue import ReadyQueue

def build_batch(factory: JobFactory, items: list[Any], queue: str, now: float, check_size: bool) -> list[Job]: ...
def needing_checks(jobs: list[Job]) -> list[int]: ...
def admit_ready(
    jobs: list[Job],
    start: int,
    index: dict[str, Job],
    ready: ReadyQueue,
    now: float,
    ready_state: int,
    waiting: dict[str, Any],
    prioritized: dict[str, Any],
    job_added: Callable[[Job], None] | None,
    ids: list[str],
) -> tuple[int, int]: ...
