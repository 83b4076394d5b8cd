"""The workloads of the load generator (``python -m benchmarks.load``), for any server that speaks the
bunqueue TCP protocol.

Each workload uses a fresh queue, measures one phase, then verifies outside the measured time that
every pushed job was pulled exactly once and that nothing is left waiting, active, delayed or
failed, and finally obliterates its queue. The ``run_*`` coroutines are the reusable API: each
takes ``(addr, n, *, token=None, probe=None, ...)`` and returns a flat dict (see :func:`_result`).
``probe`` is an optional zero-argument callable read at the start and end of the measured phase
(e.g. the server's CPU seconds); the difference is reported as ``probe_delta``.

The client is Python too, so the per-job cost on this side is kept small: commands are packed once
(:func:`bunqueue.client.prepare`), frames are pipelined, replies are consumed by callbacks instead of
tasks, and the garbage collector is paused while measuring. ``client_cpu`` in each result is the
share of one core this process used during the measured phase; near 1.0 means the client, not the
server, set the pace.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import inspect
import math
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

from bunqueue.client import Connection, PreparedCommand, connect, prepare

Addr = tuple[str, int]
Reply = dict[str, Any]
Command = dict[str, Any] | PreparedCommand
Probe = Callable[[], float]

DEFAULT_JOBS = 20_000
DEFAULT_DATA_BYTES = 64
PRELOAD_BATCH = 1000
DRAIN_BATCH = 1000
JOB_NAME = "bench"
# Who sends the commands: "c", the generator of benchmarks.tcpload where a workload has one, or "python".
CLIENTS = ("c", "python")

# Counts that must be zero once a workload has drained its queue. `completed` is not among them:
# jobs are kept after ACK unless removeOnComplete is set.
PENDING_STATES = ("waiting", "prioritized", "delayed", "active", "failed", "waiting-children", "paused")


class WorkloadError(Exception):
    """The server refused a command or the workload could not finish."""


# -- helpers --------------------------------------------------------------------------------------


def queue_name(workload: str) -> str:
    return f"bench-{workload}-{uuid.uuid4().hex[:12]}"


def job_data(data_bytes: int) -> dict[str, Any]:
    return {"payload": "x" * data_bytes}


def _ok(reply: Reply, what: str) -> Reply:
    if reply.get("ok") is not True:
        raise WorkloadError(f"{what} failed: {reply.get('error', reply)!r}")
    return reply


async def _connect_many(addr: Addr, count: int, token: str | None) -> list[Connection]:
    return list(await asyncio.gather(*(connect(addr[0], addr[1], token=token) for _ in range(count))))


async def _close_all(conns: Sequence[Connection]) -> None:
    await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)


def _split(n: int, parts: int) -> list[int]:
    """Split n into `parts` near-equal non-negative shares."""
    base, extra = divmod(n, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


class _Timer:
    """Wall time and this process's CPU time of one measured phase."""

    __slots__ = ("cpu", "probe_delta", "seconds")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu = 0.0
        self.probe_delta: float | None = None


@contextlib.contextmanager
def _measure(probe: Probe | None = None) -> Iterator[_Timer]:
    # A collection pass over the growing heap of reply dicts costs milliseconds at a time and
    # would be billed to the server; the measured phases are short, so collect before and after.
    timer = _Timer()
    gc.collect()
    gc.disable()
    # The probe is read right around the timed span, not around the whole workload, so that the
    # preloading and verification every workload also does stay out of what it attributes.
    before = probe() if probe is not None else 0.0
    cpu0, t0 = time.process_time(), time.perf_counter()
    try:
        yield timer
    finally:
        timer.seconds = time.perf_counter() - t0
        timer.cpu = time.process_time() - cpu0
        gc.enable()
        # After gc.enable(): a probe that raises (its process gone) must not leave collection off.
        if probe is not None:
            timer.probe_delta = probe() - before


def _result(workload: str, queue: str, jobs: int, ops: int, unit: str, timer: _Timer, **extra: Any) -> dict:
    seconds = timer.seconds
    rate_base = jobs if unit == "jobs/s" else ops
    return {
        "workload": workload,
        "queue": queue,
        "jobs": jobs,
        "ops": ops,
        "seconds": round(seconds, 4),
        "rate": round(rate_base / seconds, 1) if seconds > 0 else math.inf,
        "unit": unit,
        "client_cpu": round(timer.cpu / seconds, 2) if seconds > 0 else 0.0,
        **({} if timer.probe_delta is None else {"probe_delta": timer.probe_delta}),
        **extra,
    }


async def _windowed(
    conn: Connection,
    cmd: Command,
    total: int,
    window: int,
    on_reply: Callable[[Reply], None],
) -> None:
    """Send `cmd` `total` times over `conn`, keeping up to `window` requests in flight.

    Replies are handled in future callbacks; replacements for all replies that arrived in one read
    go out together in a single write, so the refill costs one syscall rather than one per job.
    """
    if total <= 0:
        return
    loop = asyncio.get_running_loop()
    finished: asyncio.Future[None] = loop.create_future()
    sent = 0
    received = 0
    refill_scheduled = False

    def on_done(fut: asyncio.Future[Reply]) -> None:
        nonlocal received, refill_scheduled
        if finished.done():
            return
        try:
            on_reply(fut.result())
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            finished.set_exception(exc)
            return
        received += 1
        if received == total:
            finished.set_result(None)
        elif not refill_scheduled:
            # Runs after the callbacks of every other reply decoded from the same read.
            refill_scheduled = True
            loop.call_soon(refill)

    def refill() -> None:
        nonlocal sent, refill_scheduled
        refill_scheduled = False
        if finished.done():
            return
        k = min(window - (sent - received), total - sent)
        if k <= 0:
            return
        try:
            futures = conn.pipeline_nowait([cmd] * k)
        except ConnectionError as exc:
            finished.set_exception(exc)
            return
        sent += k
        for fut in futures:
            fut.add_done_callback(on_done)

    refill()
    await finished


async def _push_batches(
    conns: Sequence[Connection],
    queue: str,
    n: int,
    batch: int,
    window: int,
    data: Any,
) -> list[str]:
    """PUSHB n jobs in batches of `batch`, `window` batches in flight per connection."""
    ids: list[str] = []

    def on_reply(reply: Reply) -> None:
        ids.extend(_ok(reply, "PUSHB")["ids"])

    full, rest = divmod(n, batch)
    jobs = [{"name": JOB_NAME, "data": data}] * batch
    cmd = prepare({"cmd": "PUSHB", "queue": queue, "jobs": jobs})
    work: list[Awaitable[None]] = [
        _windowed(conn, cmd, share, window, on_reply) for conn, share in zip(conns, _split(full, len(conns)))
    ]
    if rest:
        tail = prepare({"cmd": "PUSHB", "queue": queue, "jobs": jobs[:rest]})
        work.append(_windowed(conns[-1], tail, 1, 1, on_reply))
    await asyncio.gather(*work)
    return ids


async def _drain(conn: Connection, queue: str) -> list[str]:
    """Pull and acknowledge whatever is still ready in `queue`; return the ids."""
    ids: list[str] = []
    pullb = prepare({"cmd": "PULLB", "queue": queue, "count": DRAIN_BATCH})
    while True:
        jobs = _ok(await conn.request(pullb), "PULLB")["jobs"]
        if not jobs:
            return ids
        batch = [job["id"] for job in jobs]
        _ok(await conn.request({"cmd": "ACKB", "ids": batch}), "ACKB")
        ids.extend(batch)


async def _verify(
    conn: Connection,
    queue: str,
    n: int,
    pushed: list[str],
    pulled: list[str] | None,
) -> dict[str, Any]:
    """Check exactly-once delivery and empty counts, then remove the queue.

    `pulled` is None for push-only workloads: the queue is drained here and that drain is the
    pull. Otherwise the workload itself must have emptied the queue.
    """
    problems: list[str] = []
    leftover = await _drain(conn, queue)
    if pulled is None:
        pulled = leftover
    elif leftover:
        problems.append(f"{len(leftover)} jobs still ready after the workload")
        pulled = pulled + leftover

    if len(pushed) != n:
        problems.append(f"{len(pushed)} ids returned for {n} pushed jobs")
    pushed_set = set(pushed)
    if len(pushed_set) != len(pushed):
        problems.append(f"{len(pushed) - len(pushed_set)} duplicate ids returned by push")
    pulled_set = set(pulled)
    if len(pulled_set) != len(pulled):
        problems.append(f"{len(pulled) - len(pulled_set)} jobs pulled more than once")
    if missing := len(pushed_set - pulled_set):
        problems.append(f"{missing} pushed jobs never pulled")
    if unknown := len(pulled_set - pushed_set):
        problems.append(f"{unknown} pulled jobs that were not pushed")

    counts = _ok(await conn.request({"cmd": "GetJobCounts", "queue": queue}), "GetJobCounts")["counts"]
    nonzero = {state: counts.get(state) for state in PENDING_STATES if counts.get(state)}
    if nonzero:
        problems.append(f"counts not zero: {nonzero}")
    count = _ok(await conn.request({"cmd": "Count", "queue": queue}), "Count")["count"]
    if count:
        problems.append(f"Count is {count}")

    await conn.request({"cmd": "Obliterate", "queue": queue})
    return {
        "verified": not problems,
        "problems": problems,
        "completed": counts.get("completed"),
    }


# -- workloads ------------------------------------------------------------------------------------


async def run_push(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    token: str | None = None,
    probe: Probe | None = None,
    connections: int = 4,
    window: int = 50,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """PUSH n jobs, `connections` connections each keeping `window` requests in flight."""
    queue = queue_name("push")
    conns = await _connect_many(addr, connections, token)
    try:
        cmd = prepare({"cmd": "PUSH", "queue": queue, "name": JOB_NAME, "data": job_data(data_bytes)})
        ids: list[str] = []

        def on_reply(reply: Reply) -> None:
            ids.append(_ok(reply, "PUSH")["id"])

        with _measure(probe) as timer:
            await asyncio.gather(
                *(_windowed(c, cmd, share, window, on_reply) for c, share in zip(conns, _split(n, connections)))
            )
        check = await _verify(conns[0], queue, n, ids, None)
    finally:
        await _close_all(conns)
    return _result("push", queue, n, n, "jobs/s", timer, connections=connections, window=window, **check)


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
    conns = await _connect_many(addr, connections, token)
    try:
        with _measure(probe) as timer:
            ids = await _push_batches(conns, queue, n, batch, window, job_data(data_bytes))
        check = await _verify(conns[0], queue, n, ids, None)
    finally:
        await _close_all(conns)
    ops = math.ceil(n / batch)
    return _result(name, queue, n, ops, "jobs/s", timer, connections=connections, window=window, **check)


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
    """Preload n jobs, then drain them with PULLB(count) + ACKB, one consumer per connection.

    Each consumer writes the ACKB of one batch together with the PULLB of the next, so a batch costs
    one round trip.
    """
    queue = queue_name("pullb_ackb")
    conns = await _connect_many(addr, connections, token)
    try:
        pushed = await _push_batches(conns, queue, n, PRELOAD_BATCH, 2, job_data(data_bytes))
        pullb = prepare({"cmd": "PULLB", "queue": queue, "count": count})
        pulled: list[str] = []
        round_trips = 0

        async def consume(conn: Connection) -> None:
            nonlocal round_trips
            reply = _ok(await conn.request(pullb), "PULLB")
            round_trips += 1
            while jobs := reply["jobs"]:
                ids = [job["id"] for job in jobs]
                ack, reply = await conn.pipeline([{"cmd": "ACKB", "ids": ids}, pullb])
                _ok(ack, "ACKB")
                _ok(reply, "PULLB")
                round_trips += 1
                pulled.extend(ids)

        with _measure(probe) as timer:
            await asyncio.gather(*(consume(c) for c in conns))
        check = await _verify(conns[0], queue, n, pushed, pulled)
    finally:
        await _close_all(conns)
    return _result(
        "pullb_ackb", queue, n, round_trips, "jobs/s", timer, connections=connections, count=count, **check
    )


async def run_worker(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    token: str | None = None,
    probe: Probe | None = None,
    connections: int = 5,
    concurrency: int = 50,
    groups: int = 0,
    lock_ttl: int = 30_000,
    poll_timeout: int = 0,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """Preload n jobs, then drain them with `concurrency` PULL(owner, lockTtl) + ACK(token) loops.

    The consumers share one owner and are spread over `connections` connections, as one Bun
    Worker with that concurrency would be. With `groups`, the jobs are dealt round the clock to that
    many job groups (groupId), and the result says how evenly the groups were served (``fair_min``,
    ``fair_max``: see :func:`_fairness`).
    """
    name = "grouped_worker" if groups else "worker"
    queue = queue_name(name)
    conns = await _connect_many(addr, connections, token)
    try:
        if groups:
            pushed = await _push_grouped(conns[0], queue, n, groups, job_data(data_bytes))
        else:
            pushed = await _push_batches(conns[:2], queue, n, PRELOAD_BATCH, 2, job_data(data_bytes))
        pull = prepare(
            {"cmd": "PULL", "queue": queue, "owner": f"{queue}-worker", "lockTtl": lock_ttl, "timeout": poll_timeout}
        )
        pulled: list[str] = []
        served: list[str] = []

        async def consume(conn: Connection) -> None:
            request = conn.request
            while True:
                reply = _ok(await request(pull), "PULL")
                job = reply["job"]
                if job is None:
                    return
                job_id = job["id"]
                if groups:
                    served.append(job["groupId"])
                _ok(await request({"cmd": "ACK", "id": job_id, "token": reply["token"]}), "ACK")
                pulled.append(job_id)

        with _measure(probe) as timer:
            await asyncio.gather(*(consume(conns[i % connections]) for i in range(concurrency)))
        check = await _verify(conns[0], queue, n, pushed, pulled)
    finally:
        await _close_all(conns)
    extra = {"groups": groups, **_fairness(served, groups)} if groups else {}
    return _result(
        name, queue, n, 2 * n, "jobs/s", timer, connections=connections, concurrency=concurrency, **extra, **check
    )


run_grouped_worker = functools.partial(run_worker, groups=1000)


async def _push_grouped(conn: Connection, queue: str, n: int, groups: int, data: Any) -> list[str]:
    """PUSHB n jobs, job i in group ``g{i % groups}``, one batch at a time (preload, not measured)."""
    ids: list[str] = []
    for start in range(0, n, PRELOAD_BATCH):
        jobs = [
            {"name": JOB_NAME, "data": data, "groupId": f"g{i % groups}"}
            for i in range(start, min(n, start + PRELOAD_BATCH))
        ]
        ids.extend(_ok(await conn.request({"cmd": "PUSHB", "queue": queue, "jobs": jobs}), "PUSHB")["ids"])
    return ids


def _fairness(served: list[str], groups: int) -> dict[str, float]:
    """Per-group claim counts over the equal share, in the span that ends when the first group runs dry."""
    depth: dict[str, int] = {}
    for group in served:
        depth[group] = depth.get(group, 0) + 1
    if len(depth) != groups or len(set(depth.values())) != 1:
        return {}
    counts: dict[str, int] = dict.fromkeys(depth, 0)
    span = 0
    for group in served:
        span += 1
        counts[group] += 1
        if counts[group] == depth[group]:
            break
    equal = span / groups
    return {"fair_min": round(min(counts.values()) / equal, 3), "fair_max": round(max(counts.values()) / equal, 3)}


def _percentile(sorted_ns: list[int], q: float) -> float:
    """Nearest-rank percentile, in microseconds."""
    rank = max(1, math.ceil(q * len(sorted_ns)))
    return round(sorted_ns[rank - 1] / 1000, 1)


async def run_latency(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    token: str | None = None,
    probe: Probe | None = None,
    warmup: int = 200,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """Sequential PUSH, one request in flight; reports round-trip percentiles in microseconds."""
    queue = queue_name("latency")
    conn = await connect(addr[0], addr[1], token=token)
    try:
        cmd = prepare({"cmd": "PUSH", "queue": queue, "name": JOB_NAME, "data": job_data(data_bytes)})
        request = conn.request
        ids: list[str] = []
        for _ in range(warmup):
            ids.append(_ok(await request(cmd), "PUSH")["id"])
        samples = [0] * n
        clock = time.perf_counter_ns
        with _measure(probe) as timer:
            for i in range(n):
                t0 = clock()
                reply = await request(cmd)
                samples[i] = clock() - t0
                ids.append(_ok(reply, "PUSH")["id"])
        check = await _verify(conn, queue, n + warmup, ids, None)
    finally:
        await conn.close()
    samples.sort()
    return _result(
        "latency",
        queue,
        n,
        n,
        "ops/s",
        timer,
        p50_us=_percentile(samples, 0.50),
        p99_us=_percentile(samples, 0.99),
        p999_us=_percentile(samples, 0.999),
        max_us=round(samples[-1] / 1000, 1),
        mean_us=round(sum(samples) / n / 1000, 1),
        **check,
    )


def _flow_graph(prefix: str, parent_q: str, child_q: str, children: int, data: dict[str, Any]) -> dict[str, Any]:
    """One PUSHF: a parent in `parent_q` waiting for `children` children in `child_q`."""
    kids = [f"{prefix}-{i}" for i in range(children)]
    jobs = [{"id": prefix, "queue": parent_q, "input": {
        "name": JOB_NAME, "data": {**data, "__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}}]
    jobs += [{"id": kid, "queue": child_q, "input": {
        "name": JOB_NAME, "data": {**data, "__parentId": prefix, "__parentQueue": parent_q}, "parentId": prefix}}
        for kid in kids]
    return {"cmd": "PUSHF", "jobs": jobs}


async def run_pushf(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    children: int = 100,
    token: str | None = None,
    probe: Probe | None = None,
    connections: int = 4,
    window: int = 4,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """PUSHF graphs of one parent and `children` children (n jobs in all, rounded up to whole graphs),
    `window` graphs in flight per connection. Verified by draining the children (which releases the
    parents), then the parents."""
    child_q = queue_name("pushf-c")
    parent_q = child_q.replace("pushf-c", "pushf-p")
    graphs = max(1, math.ceil(n / (children + 1)))
    run = uuid.uuid4().hex[:8]
    data = job_data(data_bytes)
    cmds = [prepare(_flow_graph(f"{run}g{g}", parent_q, child_q, children, data)) for g in range(graphs)]
    conns = await _connect_many(addr, connections, token)
    parents: list[str] = []
    kids: list[str] = []

    async def send(conn: Connection, share: list[PreparedCommand]) -> None:
        for i in range(0, len(share), window):
            for reply in await conn.pipeline(share[i : i + window]):
                jobs = _ok(reply, "PUSHF")["data"]["jobs"]
                parents.append(jobs[0]["id"])
                kids.extend(job["id"] for job in jobs[1:])

    try:
        with _measure(probe) as timer:
            await asyncio.gather(*(send(conn, cmds[i::connections]) for i, conn in enumerate(conns)))
        check = await _verify(conns[0], child_q, graphs * children, kids, None)
        check_parents = await _verify(conns[0], parent_q, graphs, parents, None)
    finally:
        await _close_all(conns)
    check["verified"] = check["verified"] and check_parents["verified"]
    check["problems"] = check["problems"] + [f"parents: {p}" for p in check_parents["problems"]]
    jobs = graphs * (children + 1)
    return _result(f"pushf{children}", child_q, jobs, graphs, "jobs/s", timer, connections=connections,
                   window=window, **check)


WORKLOADS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "push": run_push,
    "pushb100": run_pushb100,
    "pushb1000": run_pushb1000,
    "pullb_ackb": run_pullb_ackb,
    "worker": run_worker,
    "grouped_worker": run_grouped_worker,
    "latency": run_latency,
    "pushf100": run_pushf,
}


async def run_workload(
    name: str,
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    token: str | None = None,
    timeout: float | None = None,
    client: str = "python",
    **options: Any,
) -> dict[str, Any]:
    """Run one workload by name; options a workload does not take (e.g. `connections` for
    latency) are ignored so one option set can drive them all. With ``client="c"`` the workloads that
    have one run on the C generator of :mod:`benchmarks.tcpload`."""
    func = WORKLOADS[name]
    if client == "c":
        # Imported here: that module builds on this one's helpers.
        from benchmarks.tcpload import NATIVE_WORKLOADS

        func = NATIVE_WORKLOADS.get(name, func)
    params = inspect.signature(func).parameters
    accepted = {k: v for k, v in options.items() if v is not None and k in params}
    async with asyncio.timeout(timeout):
        return await func(addr, n, token=token, **accepted)


async def server_info(addr: Addr, token: str | None = None) -> dict[str, Any]:
    conn = await connect(addr[0], addr[1], token=token)
    try:
        hello = await conn.request({"cmd": "Hello", "protocolVersion": 3, "capabilities": ["pipelining"]})
    finally:
        await conn.close()
    return {k: hello.get(k) for k in ("server", "version", "protocolVersion")}
