"""HTTP workloads for any server that serves the bunqueue HTTP API: pushes through
``POST /queues/:q/jobs`` and ``GET /health`` probes, each from 50 keep-alive connections with one
request in flight per connection.

The requests come from ``httpload``, a small C program (``benchmarks/httpload.c``) compiled into
``benchmarks/.cache`` on first use: a Python HTTP client spends more CPU per request than either server
does to answer it, so it would measure itself. ``client_cpu`` in each result is the share of one core
that program used while measuring (from its rusage); near 1.0 means the client set the pace.

Pushed jobs are verified over TCP as in :mod:`benchmarks.load`: each id an HTTP reply returned is
pulled exactly once and nothing is left behind.
"""
from __future__ import annotations

import json
from typing import Any

from benchmarks import generators
from benchmarks.workloads import (
    DEFAULT_DATA_BYTES,
    DEFAULT_JOBS,
    JOB_NAME,
    Addr,
    Probe,
    WorkloadError,
    _measure,
    _result,
    _verify,
    job_data,
    queue_name,
)
from bunqueue.client import connect

CONNECTIONS = 50


class Generated:
    """What one run of the generator reports."""

    __slots__ = ("cpu", "ids", "ok", "responses", "seconds")

    def __init__(self, summary: dict[str, Any], ids: list[str], cpu: float) -> None:
        self.responses = int(summary["responses"])
        self.ok = int(summary["ok"])
        self.seconds = float(summary["seconds"])
        self.ids = ids
        self.cpu = cpu


async def _run_generator(http: Addr, n: int, method: str, path: str, body: str, token: str | None,
                         id_field: str | None) -> Generated:
    args = [http[0], str(http[1]), str(CONNECTIONS), str(n), method, path, body, *([token] if token else [])]
    try:
        run = await generators.run("httpload.c", args, {"ID_FIELD": id_field})
    except generators.GeneratorError as exc:
        raise WorkloadError(str(exc)) from None
    if run.returncode != 0:
        answered = run.summary["responses"]
        raise WorkloadError(f"httpload: {' '.join(run.messages)[-300:]} ({answered} of {n} answered)")
    return Generated(run.summary, run.lines, run.cpu)


def _require(http_addr: Addr | None) -> Addr:
    if http_addr is None:
        raise WorkloadError("the HTTP workloads need the server's HTTP address")
    return http_addr


async def run_http_push(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    http_addr: Addr | None = None,
    token: str | None = None,
    probe: Probe | None = None,
    data_bytes: int = DEFAULT_DATA_BYTES,
) -> dict[str, Any]:
    """n pushes through ``POST /queues/:q/jobs``, one JSON job each, 50 connections."""
    http = _require(http_addr)
    queue = queue_name("http_push")
    body = json.dumps({"name": JOB_NAME, "data": job_data(data_bytes)})
    with _measure(probe) as timer:
        run = await _run_generator(http, n, "POST", f"/queues/{queue}/jobs", body, token, "id")
    timer.seconds, timer.cpu = run.seconds, run.cpu
    conn = await connect(addr[0], addr[1], token=token)
    try:
        check = await _verify(conn, queue, n, run.ids, None)
    finally:
        await conn.close()
    if run.ok != n:
        check["problems"].append(f"{n - run.ok} pushes answered with an error status")
        check["verified"] = False
    return _result("http_push", queue, n, n, "jobs/s", timer, connections=CONNECTIONS, **check)


async def run_http_health(
    addr: Addr,
    n: int = DEFAULT_JOBS,
    *,
    http_addr: Addr | None = None,
    token: str | None = None,
    probe: Probe | None = None,
) -> dict[str, Any]:
    """n ``GET /health`` requests, 50 connections; each must answer 200."""
    http = _require(http_addr)
    with _measure(probe) as timer:
        run = await _run_generator(http, n, "GET", "/health", "", token, None)
    timer.seconds, timer.cpu = run.seconds, run.cpu
    problems = [] if run.ok == n else [f"{n - run.ok} of {n} health probes did not answer 200"]
    return _result("http_health", "-", n, n, "req/s", timer, connections=CONNECTIONS,
                   verified=not problems, problems=problems)


HTTP_WORKLOADS = {"http_push": run_http_push, "http_health": run_http_health}
