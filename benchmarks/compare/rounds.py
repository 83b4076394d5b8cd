"""Alternating A/B rounds: in every round each server is started fresh, in each mode, and runs the
same workloads; the order of the servers is swapped from one round to the next so that neither
always runs on a machine warmed (or loaded) by the other."""
from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.brokers import run_brokers
from benchmarks.http_load import HTTP_WORKLOADS
from benchmarks.workloads import run_workload, server_info

from .machine import source_fingerprint
from .postgres import Databases
from .servers import Launcher, Server, ServerUnavailable, pinned, started

Log = Callable[[str], None]
Row = dict[str, Any]

# Pinned to one CPU each, because one request in flight measures the round trip, and a scheduler
# moving either side between cores would add its own noise to the tail.
PINNED_WORKLOADS = frozenset({"latency"})
# Workloads of several brokers on one database: run in PostgreSQL mode only, each on servers of its own.
MULTI_BROKER = {"brokers3": 3}
# What the null server (``--ceiling``) answers: the TCP workloads of plain jobs.
CEILING_WORKLOADS = frozenset({"push", "pushb100", "pushb1000", "pullb_ackb", "worker", "grouped_worker", "latency"})


@dataclass(frozen=True)
class Plan:
    servers: tuple[str, ...]
    modes: tuple[str, ...]
    workloads: tuple[str, ...]
    rounds: int
    jobs: int
    warmup: int
    timeout: float
    # "c": the rows benchmarks.tcpload has run on its C generator; "python": all on benchmarks.workloads.
    client: str = "c"


def round_order(servers: tuple[str, ...], round_index: int) -> list[str]:
    return list(servers) if round_index % 2 == 0 else list(reversed(servers))


def _failed(name: str, reason: str) -> Row:
    return {"workload": name, "verified": False, "error": reason, "problems": [reason]}


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _add_cpu(row: Row, server_cpu: float, total_cpu: float) -> None:
    row["server_cpu_s"] = round(server_cpu, 3)
    row["server_cpu_total_s"] = round(total_cpu, 3)
    # CPU of the measured phase only; total also covers the preload and the verification drain.
    row["cpu_s_per_1k"] = round(server_cpu * 1000 / row["jobs"], 6) if row["jobs"] else None


async def measure(server: Server, name: str, plan: Plan, jobs: int | None = None) -> Row:
    """Run one workload against `server`, adding the server's CPU use; never raises."""
    if not server.alive():
        return _failed(name, f"server exited before the workload: {server.log_tail(1)}")
    n = plan.jobs if jobs is None else jobs
    pin = pinned(server.pid) if name in PINNED_WORKLOADS else contextlib.nullcontext("")
    try:
        cpu_before = server.cpu_seconds()
        with pin as pin_note:
            if name in HTTP_WORKLOADS:
                async with asyncio.timeout(plan.timeout):
                    row = await HTTP_WORKLOADS[name](
                        server.addr, n, http_addr=server.http_addr, probe=server.cpu_seconds)
            else:
                row = await run_workload(name, server.addr, n, timeout=plan.timeout, probe=server.cpu_seconds,
                                         client=plan.client)
        _add_cpu(row, row.pop("probe_delta"), server.cpu_seconds() - cpu_before)
    except Exception as exc:  # noqa: BLE001 - any failure is one failed row, not a crashed run
        reason = _describe(exc)
        if not server.alive():
            reason += f" (server exited: {server.log_tail(1)})"
        return _failed(name, reason)
    if pin_note:
        row["pinning"] = pin_note
    return row


async def measure_brokers(launcher: Launcher, name: str, plan: Plan, databases: Databases) -> Row:
    """``name`` of ``MULTI_BROKER`` on that many fresh servers sharing a fresh database; never raises."""
    count = MULTI_BROKER[name]
    try:
        async with databases.fresh() as url:
            with contextlib.ExitStack() as stack:
                servers = [stack.enter_context(started(launcher, "postgres", postgres_url=url)) for _ in range(count)]
                async with asyncio.timeout(plan.timeout):
                    return await run_brokers(
                        [server.addr for server in servers], servers[0].proc.kill, plan.jobs,
                        deadline_s=plan.timeout,
                    )
    except Exception as exc:  # noqa: BLE001 - any failure is one failed row, not a crashed run
        return _failed(name, _describe(exc))


def workloads_of(plan: Plan, mode: str, server: str | None = None) -> list[str]:
    return [name for name in plan.workloads if (name not in MULTI_BROKER or mode == "postgres")
            and (server != "null" or name in CEILING_WORKLOADS)]


async def _warm_up(server: Server, plan: Plan, log: Log) -> None:
    # A fresh process has cold caches and, for Bun, code not yet compiled by its JIT; one small
    # pass over every workload keeps that start-up cost out of the first measured workload.
    if plan.warmup <= 0:
        return
    for name in workloads_of(plan, server.mode, server.name):
        if name in MULTI_BROKER:
            continue
        row = await measure(server, name, plan, plan.warmup)
        if not row.get("verified"):
            log(f"    warm-up {name} failed: {'; '.join(row.get('problems', []))}")


def _progress_line(row: Row) -> str:
    name = row["workload"]
    if not row.get("verified"):
        return f"    {name:<11} FAILED: {'; '.join(row.get('problems') or [row.get('error', '?')])}"
    line = f"    {name:<11} {row['rate']:>11,.0f} {row['unit']:<6}"
    if row.get("cpu_s_per_1k") is not None:
        per = "requests" if row["unit"] == "req/s" else "jobs"
        line += f"  server cpu {row['cpu_s_per_1k']:.4f} s/1k {per}"
    if "p50_us" in row:
        line += f"  p50/p99/p999 {row['p50_us']}/{row['p99_us']}/{row['p999_us']} us"
    return line


async def run_server(
    plan: Plan, launcher: Launcher, mode: str, round_index: int, log: Log, databases: Databases | None = None
) -> Row:
    """One fresh server in one mode: warm-up, every workload, then its peak RSS."""
    record: Row = {"round": round_index + 1, "mode": mode, "server": launcher.name, "available": True}
    if launcher.name == "null" and mode != "memory":
        record.update(available=False, reason="the null server keeps nothing: memory mode only")
        return record
    if launcher.name == "ours":
        # Read at every start: the tree under test may change between runs of a long comparison.
        record["source"] = source_fingerprint()
    elif launcher.name == "base":
        record["baseline"] = getattr(launcher, "source", None)
    try:
        async with contextlib.AsyncExitStack() as stack:
            url = await stack.enter_async_context(databases.fresh()) if databases and mode == "postgres" else None
            server = stack.enter_context(started(launcher, mode, postgres_url=url))
            record["info"] = await server_info(server.addr)
            log(f"  {mode:<6} {launcher.name:<4} pid {server.pid} on {server.addr[0]}:{server.port}  "
                f"{record['info'].get('server')} {record['info'].get('version')}")
            await _warm_up(server, plan, log)
            rows: list[Row] = []
            for name in workloads_of(plan, mode, launcher.name):
                if name in MULTI_BROKER:
                    assert databases is not None
                    rows.append(await measure_brokers(launcher, name, plan, databases))
                else:
                    rows.append(await measure(server, name, plan))
                log(_progress_line(rows[-1]))
            record["workloads"] = rows
            record["peak_rss_kib"] = server.peak_rss_kib() if server.alive() else None
            log(f"    peak RSS {record['peak_rss_kib'] or 0:,} KiB")
    except ServerUnavailable as exc:
        record.update(available=False, reason=str(exc))
        log(f"  {mode:<6} {launcher.name:<4} not available: {exc}")
    except Exception as exc:  # noqa: BLE001 - e.g. Hello failed: the whole run counts as failed
        record["workloads"] = [_failed(name, _describe(exc)) for name in plan.workloads]
        log(f"  {mode:<6} {launcher.name:<4} FAILED: {_describe(exc)}")
    return record


async def run_plan(
    plan: Plan, launchers: dict[str, Launcher], log: Log, databases: Databases | None = None
) -> list[Row]:
    runs: list[Row] = []
    for round_index in range(plan.rounds):
        order = round_order(plan.servers, round_index)
        log(f"round {round_index + 1}/{plan.rounds}: {' then '.join(order)}")
        for mode in plan.modes:
            for name in order:
                runs.append(await run_server(plan, launchers[name], mode, round_index, log, databases))
    return runs
