"""The TCP workloads whose pace a Python client would set — PUSHB 100, PUSHB 1000, the PULLB 100 + ACKB drain
and the 50-way PULL/ACK worker drain — driven by ``tcpload``, a small C program (``benchmarks/tcpload.c``).

Measured against a null server that only frames and answers (``benchmarks.nullserver``), the Python client
of :mod:`benchmarks.workloads` reached 0.99-1.01 of that ceiling on the drains with our server: it measured
itself. The commands are the same as there (packed here with msgpack, the C program only numbers their
``reqId`` and builds each ACK/ACKB from the ids and tokens it was given), as are the connections, windows,
preloading and verification; ``client_cpu`` is the share of one core the C program used.

``benchmarks.load`` and ``benchmarks.compare`` use these for those rows unless ``--client python``.
"""
from __future__ import annotations

import functools
import math
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgpack

from benchmarks import generators
from benchmarks.workloads import (
    DEFAULT_DATA_BYTES,
    DEFAULT_JOBS,
    JOB_NAME,
    PRELOAD_BATCH,
    Addr,
    Probe,
    WorkloadError,
    _close_all,
    _connect_many,
    _measure,
    _push_batches,
    _result,
    _Timer,
    _verify,
    job_data,
    queue_name,
)

# The generator numbers each copy of a command here; it must be the command's last field.
REQ_ID_PLACEHOLDER = "0" * 10


def _template(folder: Path, name: str, command: dict[str, Any]) -> Path:
    path = folder / f"{name}.msgpack"
    path.write_bytes(msgpack.packb({**command, "reqId": REQ_ID_PLACEHOLDER}))
    return path


async def _generate(addr: Addr, mode: str, connections: int, window: int, templates: list[str], folder: Path,
                    token: str | None) -> generators.Run:
    auth = str(_template(folder, "auth", {"cmd": "Auth", "token": token})) if token else None
    args = [addr[0], str(addr[1]), mode, str(connections), str(window), *templates]
    try:
        run = await generators.run("tcpload.c", args, {"AUTH_FILE": auth})
    except generators.GeneratorError as exc:
        raise WorkloadError(str(exc)) from None
    if run.returncode != 0:
        raise WorkloadError(f"tcpload {mode}: {' '.join(run.messages)[-300:] or 'failed'} "
                            f"({run.summary['replies']} replies, {run.summary['errors']} refused)")
    return run


async def run_pushb(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    batch: int = 100,
    token: str | None = None,
    probe: Probe | None = None,
    connections: int = 4,
    window: int = 4,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """PUSHB n jobs in batches of `batch`, `window` batches in flight per connection."""
    name = f"pushb{batch}"
    queue = queue_name(name)
    jobs = [{"name": JOB_NAME, "data": job_data(data_bytes)}] * batch
    full, rest = divmod(n, batch)
    with tempfile.TemporaryDirectory(prefix="tcpload-") as tmp:
        folder = Path(tmp)
        templates = [f"{_template(folder, 'full', {'cmd': 'PUSHB', 'queue': queue, 'jobs': jobs})}:{full}"]
        if rest:
            templates.append(f"{_template(folder, 'rest', {'cmd': 'PUSHB', 'queue': queue, 'jobs': jobs[:rest]})}:1")
        with _measure(probe) as timer:
            run = await _generate(addr, "push", connections, window, templates, folder, token)
    check = await _check(addr, token, queue, n, run, timer, pushed=None)
    return _result(name, queue, n, math.ceil(n / batch), "jobs/s", timer, connections=connections, window=window,
                   **check)


run_pushb100 = functools.partial(run_pushb, batch=100)
run_pushb1000 = functools.partial(run_pushb, batch=1000, window=2)


async def run_pullb_ackb(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    token: str | None = None,
    probe: Probe | None = None,
    connections: int = 4,
    count: int = 100,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """Preload n jobs, then drain them with PULLB(count) + ACKB, one consumer per connection, each ACKB
    written together with the next PULLB."""
    queue = queue_name("pullb_ackb")
    pushed = await _preload(addr, token, queue, n, data_bytes)
    with tempfile.TemporaryDirectory(prefix="tcpload-") as tmp:
        pullb = _template(Path(tmp), "pullb", {"cmd": "PULLB", "queue": queue, "count": count})
        with _measure(probe) as timer:
            run = await _generate(addr, "pullb", connections, 1, [str(pullb)], Path(tmp), token)
    check = await _check(addr, token, queue, n, run, timer, pushed=pushed)
    round_trips = (int(run.summary["replies"]) + connections) // 2
    return _result("pullb_ackb", queue, n, round_trips, "jobs/s", timer, connections=connections, count=count,
                   **check)


async def run_worker(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    token: str | None = None,
    probe: Probe | None = None,
    connections: int = 5,
    concurrency: int = 50,
    lock_ttl: int = 30_000,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """Preload n jobs, then drain them with `concurrency` PULL(owner, lockTtl) + ACK(token) loops spread
    evenly over `connections` connections, one owner, as one Bun Worker with that concurrency would."""
    if concurrency % connections:
        raise WorkloadError(f"concurrency {concurrency} does not spread evenly over {connections} connections")
    queue = queue_name("worker")
    pushed = await _preload(addr, token, queue, n, data_bytes)
    pull = {"cmd": "PULL", "queue": queue, "owner": f"{queue}-worker", "lockTtl": lock_ttl, "timeout": 0}
    with tempfile.TemporaryDirectory(prefix="tcpload-") as tmp:
        template = _template(Path(tmp), "pull", pull)
        with _measure(probe) as timer:
            run = await _generate(addr, "worker", connections, concurrency // connections, [str(template)],
                                  Path(tmp), token)
    check = await _check(addr, token, queue, n, run, timer, pushed=pushed)
    return _result("worker", queue, n, 2 * n, "jobs/s", timer, connections=connections, concurrency=concurrency,
                   **check)


async def _preload(addr: Addr, token: str | None, queue: str, n: int, data_bytes: int) -> list[str]:
    conns = await _connect_many(addr, 2, token)
    try:
        return await _push_batches(conns, queue, n, PRELOAD_BATCH, 2, job_data(data_bytes))
    finally:
        await _close_all(conns)


async def _check(addr: Addr, token: str | None, queue: str, n: int, run: generators.Run, timer: _Timer,
                 *, pushed: list[str] | None) -> dict[str, Any]:
    """The generator's own clock and CPU for the measured phase, then the workloads' verification. The ids
    it printed are the pulled ones, or (``pushed`` None) the pushed ones, and the queue is drained here."""
    timer.seconds, timer.cpu = float(run.summary["seconds"]), run.cpu
    conns = await _connect_many(addr, 1, token)
    try:
        if pushed is None:
            return await _verify(conns[0], queue, n, run.lines, None)
        return await _verify(conns[0], queue, n, pushed, run.lines)
    finally:
        await _close_all(conns)


NATIVE_WORKLOADS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "pushb100": run_pushb100,
    "pushb1000": run_pushb1000,
    "pullb_ackb": run_pullb_ackb,
    "worker": run_worker,
}
