"""Pure-Python counterparts of the compiled core classes, written the idiomatic way.

They are what the core would be without Cython: heapq plus a dict with lazy deletion, struct plus a
bytearray and an offset, plain functions over the request dict for the push path. The benchmarks run
each workload on both, so the gain of compiling is a number rather than a belief. They follow the
same ordering rules as the compiled classes.
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
import math
import struct

from uuid_utils import uuid7

from bunqueue import errors
from bunqueue.errors import CommandError

_HEADER = struct.Struct(">I")


class PyFrameReader:
    """Bytearray plus read offset; compacts once the consumed prefix outweighs the rest."""

    def __init__(self, max_frame: int = 64 * 1024 * 1024) -> None:
        self._buffer = bytearray()
        self._offset = 0
        self._max_frame = max_frame

    @property
    def buffered(self) -> int:
        return len(self._buffer) - self._offset

    def feed(self, data: bytes) -> list[bytes]:
        buffer = self._buffer
        buffer += data
        frames = []
        offset = self._offset
        end = len(buffer)
        while end - offset >= 4:
            (length,) = _HEADER.unpack_from(buffer, offset)
            if length > self._max_frame:
                raise ValueError(f"frame of {length} bytes exceeds the limit")
            if end - offset - 4 < length:
                break
            frames.append(bytes(buffer[offset + 4 : offset + 4 + length]))
            offset += 4 + length
        if offset == end:
            buffer.clear()
            offset = 0
        elif offset > end - offset:
            del buffer[:offset]
            offset = 0
        self._offset = offset
        return frames


def py_frame(payload: bytes) -> bytes:
    return _HEADER.pack(len(payload)) + payload


def py_frame_many(payloads: list[bytes]) -> bytes:
    pack = _HEADER.pack
    return b"".join([part for payload in payloads for part in (pack(len(payload)), payload)])


_REMOVED = object()


class HeapqReadyQueue:
    """heapq of flat key tuples plus an id -> live tuple dict; removal just forgets the tuple (lazy)."""

    def __init__(self) -> None:
        self._heap: list[tuple] = []
        self._live: dict[str, tuple] = {}

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._live

    def push(self, job_id: str, priority: float, lifo: bool, run_at: float, seq: int) -> None:
        if job_id in self._live:
            raise KeyError(job_id)
        entry = (-priority, 0, -seq, seq, job_id) if lifo else (-priority, 1, run_at, seq, job_id)
        self._live[job_id] = entry
        heapq.heappush(self._heap, entry)

    def pop(self) -> str | None:
        heap = self._heap
        live = self._live
        while heap:
            entry = heapq.heappop(heap)
            job_id = entry[4]
            if live.get(job_id) is entry:
                del live[job_id]
                return job_id
        return None

    def pop_many(self, n: int) -> list[str]:
        out = []
        while len(out) < n:
            job_id = self.pop()
            if job_id is None:
                break
            out.append(job_id)
        return out

    def remove(self, job_id: str) -> bool:
        return self._live.pop(job_id, None) is not None

    def update(self, job_id: str, priority: float, lifo: bool, run_at: float) -> bool:
        old = self._live.get(job_id)
        if old is None:
            return False
        seq = old[3]
        entry = (-priority, 0, -seq, seq, job_id) if lifo else (-priority, 1, run_at, seq, job_id)
        self._live[job_id] = entry
        heapq.heappush(self._heap, entry)
        return True


class HeapqTimerHeap:
    """heapq of [when, order, key] lists plus a key -> entry dict, with lazy deletion."""

    def __init__(self) -> None:
        self._heap: list[list] = []
        self._entries: dict[str, list] = {}
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def push(self, key: str, when: float) -> None:
        old = self._entries.get(key)
        if old is not None:
            old[2] = _REMOVED
        entry = [when, next(self._order), key]
        self._entries[key] = entry
        heapq.heappush(self._heap, entry)

    def remove(self, key: str) -> bool:
        entry = self._entries.pop(key, None)
        if entry is None:
            return False
        entry[2] = _REMOVED
        return True

    def pop_due(self, now: float, limit: int = -1) -> list[str]:
        heap = self._heap
        out = []
        while heap and heap[0][0] <= now and len(out) != limit:
            key = heapq.heappop(heap)[2]
            if key is not _REMOVED:
                del self._entries[key]
                out.append(key)
        return out


class PyLeaseTable:
    """id -> lease list plus a heapq of (expires_at, order, id); an entry is live if its order matches."""

    def __init__(self) -> None:
        self._leases: dict[str, list] = {}
        self._heap: list[tuple] = []
        self._order = itertools.count()

    def __len__(self) -> int:
        return len(self._leases)

    def __contains__(self, job_id: object) -> bool:
        return job_id in self._leases

    def grant(self, job_id: str, token: str, owner: object, now: float, ttl: float) -> None:
        ttl = max(ttl, 0.0)
        order = next(self._order)
        # [token, owner, expires_at, ttl, renewals, order of its live heap entry]
        self._leases[job_id] = [token, owner, now + ttl, ttl, 0, order]
        heapq.heappush(self._heap, (now + ttl, order, job_id))

    def token(self, job_id: str) -> str | None:
        lease = self._leases.get(job_id)
        return None if lease is None else lease[0]

    def renew(self, job_id: str, now: float, ttl: float | None = None) -> bool:
        lease = self._leases.get(job_id)
        if lease is None:
            return False
        if ttl is not None:
            lease[3] = max(ttl, 0.0)
        lease[2] = now + lease[3]
        lease[4] += 1
        lease[5] = order = next(self._order)
        heapq.heappush(self._heap, (lease[2], order, job_id))
        return True

    def release(self, job_id: str) -> bool:
        return self._leases.pop(job_id, None) is not None

    def pop_expired(self, now: float) -> list[str]:
        heap = self._heap
        leases = self._leases
        out = []
        while heap and heap[0][0] <= now:
            _, order, job_id = heapq.heappop(heap)
            lease = leases.get(job_id)
            if lease is not None and lease[5] == order:
                del leases[job_id]
                out.append(job_id)
        return out


# -- the push path (bunqueue._core.jobfactory) ---------------------------------------------------------------------
# Same rules, same error texts and the same wire dict as JobFactory.build, written as plain Python
# functions over the request dict. bench_jobs.py checks that both build equal wire dicts before timing.

_MAX_DURATION = 4.32e15
_MAX_GROUP_PRIORITY = 2097151
_MAX_ATTEMPTS = 2147483647
_DEFAULT_BACKOFF = 1000
_DEFAULT_MAX_ATTEMPTS = 3
_MAX_MAX_DELAY = 86400000
_MAX_NAME = 256
_MAX_SAFE_INTEGER = 9007199254740991.0
_ABSENT = object()


def py_wire_number(value: float) -> int | float:
    # The range test comes first so that inf and nan never reach math.floor, which rejects them.
    if -2147483648.0 <= value < 4294967296.0 and value == math.floor(value):
        return int(value)
    return value


def _number(value: object, field: str) -> float:
    t = type(value)
    if t is float or t is int:
        return float(value)  # type: ignore[arg-type]
    if t is str:
        text = value.strip()  # type: ignore[union-attr]
        if text:
            try:
                return float(text)
            except ValueError:
                pass
    raise CommandError(errors.must_be_number(field))


def _finite(value: object, field: str) -> float:
    d = _number(value, field)
    if not math.isfinite(d):
        raise CommandError(errors.must_be_finite(field))
    return d


def _duration(value: object, field: str, non_negative: bool) -> float:
    d = _finite(value, field)
    if non_negative and d < 0:
        raise CommandError(errors.must_be_at_least(field, 0))
    return min(max(d, -_MAX_DURATION), _MAX_DURATION)


def _max_attempts(value: object) -> int:
    if value is None:
        return _DEFAULT_MAX_ATTEMPTS
    d = _number(value, "maxAttempts")
    if math.isnan(d):
        raise CommandError(errors.must_be_finite("maxAttempts"))
    if d <= 1:
        return 1
    if d >= _MAX_ATTEMPTS:
        return _MAX_ATTEMPTS
    return int(math.ceil(d))


def _backoff(value: object) -> tuple[int | float, dict | None]:
    if value is None:
        return _DEFAULT_BACKOFF, None
    if type(value) is not dict:
        return py_wire_number(_duration(value, "backoff", True)), None
    kind = "fixed" if value.get("type") == "fixed" else "exponential"
    delay_value = value.get("delay")
    delay = _DEFAULT_BACKOFF if delay_value is None else py_wire_number(
        _duration(delay_value, "backoff.delay", True))
    config: dict = {"type": kind, "delay": delay}
    max_delay = value.get("maxDelay")
    if max_delay is not None:
        d = _finite(max_delay, "backoff.maxDelay")
        if d < 0:
            raise CommandError(errors.must_be_at_least("backoff.maxDelay", 0))
        if d > _MAX_MAX_DELAY:
            raise CommandError(errors.must_be_at_most("backoff.maxDelay", _MAX_MAX_DELAY))
        config["maxDelay"] = py_wire_number(d)
    return delay, config


def _optional_finite(opts: dict, field: str) -> int | float | None:
    value = opts.get(field)
    return None if value is None else py_wire_number(_finite(value, field))


def _optional_duration(opts: dict, field: str, non_negative: bool) -> int | float | None:
    value = opts.get(field)
    return None if value is None else py_wire_number(_duration(value, field, non_negative))


def _flag(opts: dict, field: str) -> bool:
    value = opts.get(field)
    if value is None or value is False:
        return False
    if value is True:
        return True
    raise CommandError(errors.must_be_boolean(field))


def _string(opts: dict, field: str) -> str | None:
    value = opts.get(field)
    if value is None or value == "":
        return None
    if type(value) is not str:
        raise CommandError(errors.must_be_string(field))
    return value


def _string_list(opts: dict, field: str) -> list[str] | None:
    value = opts.get(field)
    if value is None:
        return None
    if type(value) is not list or any(type(item) is not str for item in value):
        raise CommandError(errors.must_be_string_array(field))
    return list(value)


def _name_and_data(opts: dict) -> tuple[object, object]:
    if "name" in opts:
        name, data = opts["name"], opts.get("data", _ABSENT)
    else:
        data = opts.get("data", _ABSENT)
        name = "default"
        if type(data) is dict and type(data.get("name")) is str:
            name = data["name"]
            data = {k: v for k, v in data.items() if k != "name"}
    if type(name) is not str or not 0 < len(name) <= _MAX_NAME:
        raise CommandError(errors.JOB_NAME_INVALID)
    return name, data


def _group(opts: dict, priority: float) -> str | None:
    group_id = opts.get("groupId")
    if group_id is None:
        return None
    if type(group_id) is not str:
        raise CommandError(errors.must_be_string("groupId"))
    if not group_id:
        raise CommandError(errors.must_be_non_empty_string("groupId"))
    if len(group_id) > _MAX_NAME:
        raise CommandError(errors.must_be_at_most_chars("groupId", _MAX_NAME))
    if priority != math.floor(priority):
        raise CommandError(errors.GROUP_PRIORITY_INTEGER)
    if priority < 0 or priority > _MAX_GROUP_PRIORITY:
        raise CommandError(errors.GROUP_PRIORITY_RANGE)
    return group_id


def _group_max_size(opts: dict) -> int | None:
    value = opts.get("groupMaxSize")
    if value is None:
        return None
    try:
        d = _number(value, "groupMaxSize")
    except CommandError:
        raise CommandError(errors.GROUP_MAX_SIZE) from None
    if not (math.isfinite(d) and 1 <= d <= _MAX_SAFE_INTEGER and d == math.floor(d)):
        raise CommandError(errors.GROUP_MAX_SIZE)
    return int(d)


def _repeat(opts: dict) -> dict | None:
    spec = opts.get("repeat")
    if spec is None:
        return None
    if type(spec) is not dict:
        raise CommandError(errors.REPEAT_SHAPE)
    every, pattern = spec.get("every"), spec.get("pattern")
    if (every is None) == (pattern is None):
        raise CommandError(errors.REPEAT_SHAPE)
    out: dict = {}
    if every is not None:
        d = _number(every, "repeat.every")
        if not (math.isfinite(d) and d > 0):
            raise CommandError(errors.REPEAT_EVERY)
        out["every"] = py_wire_number(d)
    elif type(pattern) is not str or not pattern:
        raise CommandError(errors.must_be_non_empty_string("repeat.pattern"))
    else:
        out["pattern"] = pattern
    for field in ("limit", "count", "startDate", "endDate"):
        if spec.get(field) is not None:
            out[field] = py_wire_number(_finite(spec[field], "repeat." + field))
    if spec.get("tz") is not None:
        if type(spec["tz"]) is not str:
            raise CommandError(errors.must_be_string("repeat.tz"))
        out["tz"] = spec["tz"]
    if spec.get("immediately") is not None:
        out["immediately"] = bool(spec["immediately"])
    return out


def _dedup(opts: dict, wire: dict) -> None:
    spec = opts.get("dedup")
    if spec is None:
        return
    if type(spec) is not dict:
        raise CommandError(errors.must_be_object("dedup"))
    if spec.get("ttl") is not None:
        wire["deduplicationTtl"] = py_wire_number(_duration(spec["ttl"], "dedup.ttl", True))
    wire["deduplicationExtend"] = _flag(spec, "extend")
    wire["deduplicationReplace"] = _flag(spec, "replace")


_FLAGS = (
    "durable", "removeOnComplete", "removeOnFail", "failParentOnFailure", "removeDependencyOnFailure",
    "continueParentOnFailure", "ignoreDependencyOnFailure",
)
_RARE_KEYS = frozenset(
    _FLAGS + ("childrenIds", "tags", "parentId", "debounceId", "keepLogs", "sizeLimit", "debounceTtl")
)


def _rare_options(opts: dict, wire: dict) -> None:
    for field in _FLAGS:
        if _flag(opts, field):
            wire[field] = True
    for field in ("childrenIds", "tags"):
        if items := _string_list(opts, field):
            wire[field] = items
    for field in ("parentId", "debounceId"):
        if (text := _string(opts, field)) is not None:
            wire[field] = text
    for field in ("keepLogs", "sizeLimit", "debounceTtl"):
        if (number := _optional_finite(opts, field)) is not None:
            wire[field] = number


_WIRE_DEFAULTS: dict = dict.fromkeys(
    ("id", "queue", "name", "data", "createdAt", "runAt", "startedAt", "completedAt"))
_WIRE_DEFAULTS.update({
    "attempts": 0, "backoff": _DEFAULT_BACKOFF, "backoffConfig": None, "dependsOn": (), "childrenIds": (),
    "childrenCompleted": 0, "tags": (), "progress": 0, "progressMessage": None, "stacktrace": None,
    "repeat": None, "durable": False, "lastHeartbeat": None, "stallCount": 0, "priority": 0, "lifo": False,
    "maxAttempts": _DEFAULT_MAX_ATTEMPTS, "removeOnComplete": False, "removeOnFail": False, "ttl": None,
    "timeout": None, "uniqueKey": None, "customId": None, "parentId": None, "groupId": None,
    "stallTimeout": None, "stackTraceLimit": 10, "keepLogs": None, "sizeLimit": None,
    "failParentOnFailure": False, "removeDependencyOnFailure": False, "continueParentOnFailure": False,
    "ignoreDependencyOnFailure": False, "deduplicationTtl": None, "deduplicationExtend": False,
    "deduplicationReplace": False, "debounceId": None, "debounceTtl": None, "timeline": None,
})


@dataclasses.dataclass(slots=True)
class PyJob:
    wire: dict
    id: str
    queue: str
    priority: float
    run_at: float
    lifo: bool
    seq: int
    group_id: str | None
    group_max_size: int | None
    unique_key: str | None
    custom_id: str | None
    pending_deps: set[str] | None
    state: int = 0
    holder: object = None
    started_at: float = 0.0


def _created_at(opts: dict, now: float) -> float:
    value = opts.get("timestamp")
    if value is None:
        return now
    created_at = _finite(value, "timestamp")
    if created_at > _MAX_DURATION:
        raise CommandError(errors.must_be_at_most("timestamp", "4320000000000000"))
    if created_at < -_MAX_DURATION:
        raise CommandError(errors.must_be_at_least("timestamp", "-4320000000000000"))
    return created_at


class PyJobFactory:
    """JobFactory.build as idiomatic Python: validate every option, then fill a copy of the defaults."""

    def __init__(self) -> None:
        self._seq = itertools.count(1)

    def build(self, opts: dict, queue: str, now: float, batch: bool) -> PyJob:
        name, data = _name_and_data(opts)
        priority = 0.0 if opts.get("priority") is None else _finite(opts["priority"], "priority")
        group_id = _group(opts, priority)
        group_max = _group_max_size(opts)
        delay = 0.0 if opts.get("delay") is None else _duration(opts["delay"], "delay", False)
        max_attempts = _max_attempts(opts.get("maxAttempts"))
        backoff, backoff_config = _backoff(opts.get("backoff"))
        optional = {
            "ttl": _optional_duration(opts, "ttl", True),
            "timeout": _optional_duration(opts, "timeout", True),
            "stallTimeout": _optional_duration(opts, "stallTimeout", False),
        }
        created_at = _created_at(opts, now)
        stack_limit = _optional_finite(opts, "stackTraceLimit")
        custom_id = _string(opts, "customId" if batch else "jobId")
        unique_key = _string(opts, "uniqueKey")
        depends_on = _string_list(opts, "dependsOn")
        lifo = _flag(opts, "lifo")
        repeat = _repeat(opts)

        job_id = custom_id if custom_id is not None else str(uuid7())
        created = py_wire_number(created_at)
        run_at = created_at + delay
        wire = dict(_WIRE_DEFAULTS, id=job_id, queue=queue, name=name, data=data, createdAt=created,
                    runAt=py_wire_number(run_at), lastHeartbeat=created)
        if data is _ABSENT:
            del wire["data"]
        changed = {
            "priority": py_wire_number(priority) if priority != 0.0 else None,
            "maxAttempts": max_attempts if max_attempts != _DEFAULT_MAX_ATTEMPTS else None,
            "dependsOn": depends_on or None, "repeat": repeat, "lifo": lifo or None, **optional,
            "uniqueKey": unique_key, "customId": custom_id, "groupId": group_id,
            "stackTraceLimit": stack_limit,
        }
        wire.update({k: v for k, v in changed.items() if v is not None})
        if backoff_config is not None or backoff != _DEFAULT_BACKOFF:
            wire["backoff"] = backoff
            wire["backoffConfig"] = backoff_config
        if not _RARE_KEYS.isdisjoint(opts):
            _rare_options(opts, wire)
        if "dedup" in opts:
            _dedup(opts, wire)
        return PyJob(
            wire=wire, id=job_id, queue=queue, priority=priority, run_at=run_at, lifo=lifo,
            seq=next(self._seq), group_id=group_id, group_max_size=group_max, unique_key=unique_key,
            custom_id=custom_id, pending_deps=set(depends_on) if depends_on else None,
        )
