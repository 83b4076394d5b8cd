"""Pure-Python counterparts of the compiled core classes, written the idiomatic way.

They are what the core would be without Cython: heapq plus a dict with lazy deletion, struct plus a
bytearray and an offset. The benchmarks run each workload on both, so the gain of compiling is a number
rather than a belief. They follow the same ordering rules as the compiled classes.
"""
from __future__ import annotations

import heapq
import itertools
import struct

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
