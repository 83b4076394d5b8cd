"""The three prompts: a health report, a queue diagnostic and an incident playbook, each filled with the
broker's data at the time it is asked for."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bunqueue import errors
from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter
from bunqueue.mcp.tools.monitor_tools import memory_stats, stats, storage_status
from bunqueue.mcp.tools.queue_tools import counts_per_priority, dlq, is_paused, job_counts, jobs_page, list_queues
from bunqueue.mcp.tools.service_tools import list_crons, list_workers

#: At most this many queues go into one prompt, so that a broker with thousands stays readable.
MAX_QUEUES_IN_REPORT = 50
DEBUG_DLQ_ENTRIES = 10
INCIDENT_DLQ_ENTRIES = 5


def _json(value: Any) -> str:
    return shapes.text(value, pretty=True)


@dataclass(frozen=True)
class Argument:
    name: str
    description: str
    required: bool


@dataclass(frozen=True)
class Prompt:
    name: str
    description: str
    arguments: tuple[Argument, ...]
    render: Callable[[dict[str, str]], Awaitable[tuple[str, str]]]
    #: The description of the answer when the broker could not be read.
    failed: Callable[[dict[str, str]], str]

    async def messages(self, arguments: dict[str, str]) -> tuple[str, str]:
        """(description, user message text)."""
        try:
            return await self.render(arguments)
        except Exception as exc:  # noqa: BLE001 - an unreachable broker is the prompt's answer, never a crash
            return self.failed(arguments), errors.MCP_NO_DATA.format(error=exc)


async def _health_report(adapter: Adapter, arguments: dict[str, str]) -> tuple[str, str]:
    overview, storage, queues, workers, crons, memory = await asyncio.gather(
        stats(adapter), storage_status(adapter), list_queues(adapter), list_workers(adapter), list_crons(adapter),
        memory_stats(adapter))
    shown = queues[:MAX_QUEUES_IN_REPORT]
    details = [{"name": q, "counts": await job_counts(adapter, q), "paused": await is_paused(adapter, q)}
               for q in shown]
    of_all = f" of {len(queues)}" if len(queues) > MAX_QUEUES_IN_REPORT else ""
    return "Comprehensive bunqueue server health report", f"""\
Analyze the following bunqueue server health data and produce a structured health report.

For each area, assign a severity level: OK, WARNING, or CRITICAL.

## System Stats
{_json(overview)}

## Storage Status
{_json(storage)}

## Queue Details ({len(details)}{of_all} queues)
{_json(details)}

## Workers ({len(workers)} registered)
{_json(workers)}

## Cron Jobs ({len(crons)} scheduled)
{_json(crons)}

## Memory Stats
{_json(memory)}

---

Produce a report with these sections:
1. **Overall Health** — One-line summary with overall severity
2. **Storage** — Disk health (CRITICAL if diskFull or error present)
3. **Queues** — Per-queue assessment: flag if failed > 10% of total, flag if paused
4. **Workers** — Worker count and heartbeat freshness (stale if >60s ago)
5. **Memory** — Collections near capacity limits
6. **Cron Jobs** — Scheduled job status, any missed next_run times
7. **Recommendations** — Prioritized list of actions to take"""


async def _debug_queue(adapter: Adapter, arguments: dict[str, str]) -> tuple[str, str]:
    queue = arguments["queue"]
    counts, paused, dead, active, priorities = await asyncio.gather(
        job_counts(adapter, queue), is_paused(adapter, queue), dlq(adapter, queue, DEBUG_DLQ_ENTRIES),
        jobs_page(adapter, queue, "active", 0, None), counts_per_priority(adapter, queue))
    total = sum(counts[state] for state in ("waiting", "delayed", "active", "completed", "failed"))
    return f'Deep diagnostic for queue "{queue}"', f"""\
Analyze the following diagnostic data for bunqueue queue "{queue}" and identify any issues.

## Job State Breakdown
{_json(counts)}

## Queue Status
- Paused: {str(paused).lower()}
- Total jobs: {total}

## Active Jobs ({len(active)} currently processing)
{_json(active)}

## Dead Letter Queue ({len(dead)} entries, showing up to {DEBUG_DLQ_ENTRIES})
{_json(dead)}

## Priority Distribution
{_json(priorities)}

---

Analyze and report:
1. **Queue Health** — Overall assessment (HEALTHY, DEGRADED, or UNHEALTHY)
2. **Backlog Analysis** — Waiting-to-active ratio, is the queue growing?
3. **Failure Analysis** — Failed count, DLQ entries, common patterns
4. **Stuck Jobs** — Active jobs that may be stalled (check startedAt timestamps)
5. **Priority Issues** — Priority starvation (low-priority jobs not processed)
6. **Recommendations** — Specific actions to resolve identified issues"""


async def _incident(adapter: Adapter, arguments: dict[str, str]) -> tuple[str, str]:
    queue = arguments.get("queue")
    queues, workers, overview = await asyncio.gather(list_queues(adapter), list_workers(adapter), stats(adapter))
    targets = [queue] if queue else queues[:MAX_QUEUES_IN_REPORT]
    diagnostics = []
    for name in targets:
        counts, paused, dead = await asyncio.gather(
            job_counts(adapter, name), is_paused(adapter, name), dlq(adapter, name, INCIDENT_DLQ_ENTRIES))
        diagnostics.append({"name": name, "counts": counts, "paused": paused, "dlqEntries": len(dead)})
    flagged = [d for d in diagnostics
               if d["paused"] or d["dlqEntries"] > 0 or (d["counts"]["waiting"] > 0 and d["counts"]["active"] == 0)]
    description = f'Incident response for queue "{queue}"' if queue else "Incident response: jobs not processing"
    return description, f"""\
INCIDENT: Jobs are not being processed. Triage and resolve.

## System Overview
{_json(overview)}

## Workers ({len(workers)} registered)
{_json(workers)}

## Queue Diagnostics ({len(diagnostics)} queues)
{_json(diagnostics)}

## Flagged Queues ({len(flagged)} problematic)
{_json(flagged)}

---

Run through this checklist:

### Step 1: Worker Health
- Are workers registered? (0 workers = root cause)
- Are heartbeats fresh? (stale if lastHeartbeat > 60s ago)
- Are workers assigned to the affected queues?

### Step 2: Queue Status
- Which queues are paused? (Use `bunqueue_resume_queue` to unpause)
- Which have waiting > 0 but active = 0? (These are stuck)

### Step 3: Throughput
- Is throughput zero or abnormally low?
- Compare push rate vs pull rate

### Step 4: DLQ Analysis
- Which queues have DLQ entries?
- Are jobs failing repeatedly? (Use `bunqueue_get_dlq` for details)

### Step 5: Root Cause & Resolution
Identify the most likely root cause and provide specific actions using bunqueue tools."""


def prompts(adapter: Adapter) -> list[Prompt]:
    return [
        Prompt("bunqueue_health_report",
               "Generate a comprehensive health report for the bunqueue server with severity levels "
               "(OK/WARNING/CRITICAL).", (), lambda a: _health_report(adapter, a),
               lambda a: "Error gathering health data"),
        Prompt("bunqueue_debug_queue",
               "Deep diagnostic of a specific queue: job counts, pause status, DLQ entries, active jobs, and "
               "priority distribution.", (Argument("queue", "Queue name to debug", True),),
               lambda a: _debug_queue(adapter, a), lambda a: f'Error debugging queue "{a.get("queue")}"'),
        Prompt("bunqueue_incident_response",
               "Incident response playbook: identifies backed-up queues, checks worker health, provides "
               'step-by-step triage for "jobs not processing".',
               (Argument("queue", "Specific queue to investigate (omit to check all)", False),),
               lambda a: _incident(adapter, a), lambda a: "Error gathering incident data"),
    ]
