"""Per-job rules of a simple-mode app: a start-rate gate, job TTLs, and deduplication/debounce defaults."""
from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Mapping
from typing import Any

from bunqueue.simple.retry import option

DEFAULT_RATE_WINDOW_MS = 1000.0
DEFAULT_DEDUP_TTL_MS = 3600000
#: The shortest wait of a job held back by the rate gate, so a busy window is not polled in a spin.
MIN_RATE_WAIT_S = 0.01


class RateGate:
    """At most ``max`` job starts per ``duration`` ms, per value of ``job.data[group_key]`` when given; a
    job over the limit waits (holding its slot) until its window has room."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._max = int(options["max"])
        self._window_ms = float(options.get("duration") or DEFAULT_RATE_WINDOW_MS)
        self._group_key = option(options, "group_key", "groupKey")
        self._lock = threading.Lock()
        self._starts: dict[str, deque[float]] = {}

    def group_for(self, data: Any) -> str:
        if self._group_key and isinstance(data, dict) and data.get(self._group_key) is not None:
            return str(data[self._group_key])
        return ""

    def acquire(self, group: str) -> None:
        while True:
            with self._lock:
                now = time.monotonic() * 1000
                self._forget_idle_groups(now)
                starts = self._starts.setdefault(group, deque())
                while starts and now - starts[0] >= self._window_ms:
                    starts.popleft()
                if len(starts) < self._max:
                    starts.append(now)
                    return
                wait_ms = starts[0] + self._window_ms - now
            time.sleep(max(wait_ms / 1000, MIN_RATE_WAIT_S))

    def _forget_idle_groups(self, now: float) -> None:
        # Many distinct groups would otherwise each keep a window forever.
        idle = [g for g, starts in self._starts.items() if not starts or now - starts[-1] >= self._window_ms]
        for group in idle:
            del self._starts[group]


class TtlChecker:
    """A job not started within its TTL (``per_name[name]``, else ``default_ttl``; ms, 0 = none) has
    expired."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._default_ttl = float(option(config, "default_ttl", "defaultTtl") or 0)
        self._per_name: dict[str, float] = dict(option(config, "per_name", "perName") or {})

    def get_ttl(self, job_name: str) -> float:
        return self._per_name.get(job_name, self._default_ttl)

    def is_expired(self, job_name: str, job_timestamp_ms: float) -> bool:
        ttl = self.get_ttl(job_name)
        return ttl > 0 and time.time() * 1000 - job_timestamp_ms > ttl

    def set_default_ttl(self, ttl_ms: float) -> None:
        self._default_ttl = ttl_ms

    def set_name_ttl(self, job_name: str, ttl_ms: float) -> None:
        self._per_name[job_name] = ttl_ms


class DedupDebounceMerger:
    """Adds the app's ``deduplication`` and ``debounce`` defaults to a job's options (an option given
    with the job wins). Deduplication ids are ``name:JSON(data)``, so equal jobs share one."""

    def __init__(self, dedup: Mapping[str, Any] | None, debounce: Mapping[str, Any] | None) -> None:
        self._dedup = dedup
        self._debounce = debounce

    @property
    def active(self) -> bool:
        return self._dedup is not None or self._debounce is not None

    def merge(self, name: str, opts: dict[str, Any], data: Any) -> dict[str, Any]:
        if not self.active:
            return opts
        merged = dict(opts)
        if self._dedup is not None and "deduplication" not in merged:
            # JSON.stringify's compact form, as the TS client keys its deduplication ids.
            data_key = json.dumps(data, separators=(",", ":")) if data is not None else ""
            merged["deduplication"] = {
                "id": f"{name}:{data_key}",
                "ttl": self._dedup.get("ttl", DEFAULT_DEDUP_TTL_MS),
                "extend": self._dedup.get("extend"),
                "replace": self._dedup.get("replace"),
            }
        if self._debounce is not None and "debounce" not in merged:
            merged["debounce"] = {"id": name, "ttl": self._debounce["ttl"]}
        return merged


def job_name(job: Any) -> str | None:
    """The name a job was added with: inside ``data`` as the SDK sends it, else the record's own (the
    broker lifts the SDK's name out of ``data``, as the Bun original does)."""
    name = job.name
    if name is None:
        name = job.raw.get("name")
    return str(name) if name is not None else None
