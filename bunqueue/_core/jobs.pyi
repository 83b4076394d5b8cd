from typing import Any

MAX_DURATION: float
MAX_GROUP_PRIORITY: int
MAX_ATTEMPTS: int
DEFAULT_BACKOFF: int
DEFAULT_MAX_ATTEMPTS: int

class Job:
    wire: dict[str, Any]
    id: str
    queue: str
    priority: float
    run_at: float
    lifo: bool
    seq: int
    state: int
    group_id: str | None
    group_max_size: int | None
    unique_key: str | None
    custom_id: str | None
    pending_deps: set[str] | None
    holder: object
    started_at: float

class JobFactory:
    def __init__(self) -> None: ...
    def build(self, opts: dict[str, Any], queue: str, now: float, batch: bool) -> Job: ...
    def new_token(self) -> str: ...

def validate_queue_name(name: object) -> str: ...
def finite_option(opts: dict[str, Any], field: str) -> float | None: ...
def wire_number(value: float) -> int | float: ...
def data_too_large(data: object) -> bool: ...
