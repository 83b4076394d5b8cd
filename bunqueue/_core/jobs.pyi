from typing import Any

DEFAULT_BACKOFF: int
DEFAULT_MAX_ATTEMPTS: int
DEFAULT_STACK_TRACE_LIMIT: int

class Job:
    id: str
    queue: str
    name: str
    data: Any
    created_at: float
    run_at: float
    started_at: float
    completed_at: float
    attempts: int
    backoff: Any
    backoff_config: Any
    depends_on: Any
    children_ids: Any
    children_completed: int
    tags: Any
    progress: Any
    progress_message: Any
    stacktrace: Any
    repeat: Any
    durable: bool
    last_heartbeat: float
    stall_count: int
    priority: float
    lifo: bool
    max_attempts: int
    remove_on_complete: bool
    remove_on_fail: bool
    ttl: Any
    timeout: Any
    unique_key: Any
    custom_id: Any
    parent_id: Any
    group_id: Any
    stall_timeout: Any
    stack_trace_limit: Any
    keep_logs: Any
    size_limit: Any
    fail_parent_on_failure: bool
    remove_dependency_on_failure: bool
    continue_parent_on_failure: bool
    ignore_dependency_on_failure: bool
    deduplication_ttl: Any
    deduplication_extend: bool
    deduplication_replace: bool
    debounce_id: Any
    debounce_ttl: Any
    timeline: list[Any]
    seq: int
    state: int
    group_max_size: Any
    pending_deps: Any
    holder: Any

    def to_dict(self) -> dict[str, Any]: ...
    def note(self, entry: dict[str, Any]) -> None: ...
    def to_record(self) -> tuple[Any, ...]: ...
    @staticmethod
    def from_record(record: tuple[Any, ...] | list[Any]) -> Job: ...
    @staticmethod
    def from_wire(wire: dict[str, Any], seq: int, state: int) -> Job: ...

NO_DATA: object
RECORD_VERSION: int
TIMELINE_CAP: int

def wire_number(value: float) -> int | float: ...
