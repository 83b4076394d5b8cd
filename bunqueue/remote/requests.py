"""The table of client subcommands: the words on the command line to one protocol request.

Each entry names the request's `cmd`, its positional arguments and its options, each with the field
it fills and how the text is read (plain text, JSON, a number, a comma-separated list, a switch).
Range rules the server would also enforce are checked here only where the CLI adds its own meaning
(progress 0-100, a `cron add` that has neither schedule nor interval); everything else is the server's
to refuse, with its own wording.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bunqueue.remote.argv import UsageError

Reader = Callable[[str, str], Any]
Request = dict[str, Any]

JOB_STATES = ("waiting", "delayed", "active", "completed", "failed")
LOG_LEVELS = ("info", "warn", "error")


def text(value: str, name: str) -> str:
    return value


def json_value(value: str, name: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{name} must be valid JSON ({exc.msg} at position {exc.pos})") from None


def number(value: str, name: str) -> int | float:
    try:
        parsed = float(value)
    except ValueError:
        raise UsageError(f"{name} must be a number (got {value!r})") from None
    if not math.isfinite(parsed):
        raise UsageError(f"{name} must be a finite number (got {value!r})")
    return int(parsed) if parsed.is_integer() else parsed


def csv(value: str, name: str) -> list[str]:
    return [item for item in value.split(",") if item]


def switch(value: str, name: str) -> bool:
    return True


def state(value: str, name: str) -> str:
    if value not in JOB_STATES:
        raise UsageError(f"{name} must be one of {', '.join(JOB_STATES)} (got {value!r})")
    return value


def level(value: str, name: str) -> str:
    if value not in LOG_LEVELS:
        raise UsageError(f"{name} must be one of {', '.join(LOG_LEVELS)} (got {value!r})")
    return value


@dataclass(frozen=True)
class Arg:
    name: str
    field: str
    read: Reader = text
    required: bool = True


@dataclass(frozen=True)
class Opt:
    flags: tuple[str, ...]
    field: str
    read: Reader = text

    @property
    def takes_value(self) -> bool:
        return self.read is not switch


@dataclass(frozen=True)
class Subcommand:
    cmd: str
    summary: str
    args: tuple[Arg, ...] = ()
    opts: tuple[Opt, ...] = ()
    fixed: dict[str, Any] = field(default_factory=dict)
    check: Callable[[Request], None] | None = None

    @property
    def usage(self) -> str:
        parts = [f"<{a.name}>" if a.required else f"[{a.name}]" for a in self.args]
        return " ".join(parts + (["[options]"] if self.opts else []))

    @property
    def options(self) -> str:
        return ", ".join(f"{'/'.join(o.flags)}{' <' + o.field + '>' if o.takes_value else ''}"
                         for o in self.opts)


ID = Arg("id", "id")
QUEUE = Arg("queue", "queue")


def _progress_range(req: Request) -> None:
    if not 0 <= req["progress"] <= 100:
        raise UsageError("progress must be a number from 0 to 100")


def _cron_needs_a_schedule(req: Request) -> None:
    if "schedule" not in req and "repeatEvery" not in req:
        raise UsageError("cron add needs --schedule <cron expression> or --every <ms>")
    for name in ("queue", "data"):
        if name not in req:
            raise UsageError(f"cron add needs --{name}")


def _needs_events(req: Request) -> None:
    if not req.get("events"):
        raise UsageError("webhook add needs --events <event,event,...>")


def _needs_queues(req: Request) -> None:
    if not req.get("queues"):
        raise UsageError("worker register needs --queues <queue,queue,...>")


PUSH_OPTS = (
    Opt(("--priority", "-P"), "priority", number), Opt(("--delay", "-d"), "delay", number),
    Opt(("--max-attempts",), "maxAttempts", number), Opt(("--backoff",), "backoff", number),
    Opt(("--ttl",), "ttl", number), Opt(("--timeout",), "timeout", number),
    Opt(("--unique-key", "-u"), "uniqueKey"), Opt(("--job-id",), "jobId"),
    Opt(("--depends-on",), "dependsOn", csv), Opt(("--tags",), "tags", csv),
    Opt(("--group-id", "-g"), "groupId"), Opt(("--lifo",), "lifo", switch),
    Opt(("--remove-on-complete",), "removeOnComplete", switch),
    Opt(("--remove-on-fail",), "removeOnFail", switch), Opt(("--durable",), "durable", switch),
)
TIMEOUT = Opt(("--timeout", "-t"), "timeout", number)

SUBCOMMANDS: dict[tuple[str, ...], Subcommand] = {
    ("push",): Subcommand("PUSH", "push a job", (QUEUE, Arg("data", "data", json_value)), PUSH_OPTS,
                          {"name": "default"}),
    # A pulled job outlives this short-lived connection, so a later `ack`/`fail` can settle it.
    ("pull",): Subcommand("PULL", "pull the next job", (QUEUE,), (TIMEOUT,), {"detach": True}),
    ("ack",): Subcommand("ACK", "complete a job", (ID,), (Opt(("--result", "-r"), "result", json_value),)),
    ("fail",): Subcommand("FAIL", "fail a job", (ID,), (Opt(("--error", "-e"), "error"),)),
    ("job", "get"): Subcommand("GetJob", "show a job", (ID,)),
    ("job", "state"): Subcommand("GetState", "a job's state", (ID,)),
    ("job", "result"): Subcommand("GetResult", "a job's result", (ID,)),
    ("job", "cancel"): Subcommand("Cancel", "cancel a job", (ID,)),
    ("job", "progress"): Subcommand("Progress", "set a job's progress (0-100)",
                                    (ID, Arg("progress", "progress", number)),
                                    (Opt(("--message", "-m"), "message"),), check=_progress_range),
    ("job", "update"): Subcommand("Update", "replace a job's data", (ID, Arg("data", "data", json_value))),
    ("job", "priority"): Subcommand("ChangePriority", "change a job's priority",
                                    (ID, Arg("priority", "priority", number))),
    ("job", "promote"): Subcommand("Promote", "run a delayed job now", (ID,)),
    ("job", "delay"): Subcommand("MoveToDelayed", "move a job back to delayed",
                                 (ID, Arg("delay", "delay", number))),
    ("job", "discard"): Subcommand("Discard", "move a job to the DLQ", (ID,)),
    ("job", "logs"): Subcommand("GetLogs", "a job's log lines", (ID,)),
    ("job", "log"): Subcommand("AddLog", "add a log line to a job", (ID, Arg("message", "message")),
                               (Opt(("--level", "-l"), "level", level),)),
    ("job", "wait"): Subcommand("WaitJob", "wait for a job to finish", (ID,), (TIMEOUT,)),
    ("queue", "list"): Subcommand("ListQueues", "list queues"),
    ("queue", "pause"): Subcommand("Pause", "pause a queue", (QUEUE,)),
    ("queue", "resume"): Subcommand("Resume", "resume a queue", (QUEUE,)),
    ("queue", "paused"): Subcommand("IsPaused", "is a queue paused", (QUEUE,)),
    ("queue", "drain"): Subcommand("Drain", "remove a queue's waiting jobs", (QUEUE,)),
    ("queue", "obliterate"): Subcommand("Obliterate", "remove everything of a queue", (QUEUE,)),
    ("queue", "clean"): Subcommand("Clean", "remove old jobs", (QUEUE,), (
        Opt(("--grace", "-g"), "grace", number), Opt(("--state", "-s"), "state", state),
        Opt(("--limit", "-l"), "limit", number))),
    ("queue", "count"): Subcommand("Count", "count a queue's jobs", (QUEUE,)),
    ("queue", "jobs"): Subcommand("GetJobs", "list a queue's jobs", (QUEUE,), (
        Opt(("--state", "-s"), "state", state), Opt(("--limit", "-l"), "limit", number),
        Opt(("--offset", "-o"), "offset", number))),
    ("rate-limit", "set"): Subcommand("RateLimit", "limit a queue to n jobs per second",
                                      (QUEUE, Arg("limit", "limit", number))),
    ("rate-limit", "clear"): Subcommand("RateLimitClear", "remove a queue's rate limit", (QUEUE,)),
    ("concurrency", "set"): Subcommand("SetConcurrency", "cap a queue's active jobs",
                                       (QUEUE, Arg("limit", "limit", number))),
    ("concurrency", "clear"): Subcommand("ClearConcurrency", "remove a queue's cap", (QUEUE,)),
    ("dlq", "list"): Subcommand("Dlq", "list a queue's dead letters", (QUEUE,),
                                (Opt(("--count", "-c"), "count", number),)),
    ("dlq", "retry"): Subcommand("RetryDlq", "retry dead letters", (QUEUE,), (Opt(("--id",), "jobId"),)),
    ("dlq", "purge"): Subcommand("PurgeDlq", "empty a queue's DLQ", (QUEUE,)),
    ("cron", "list"): Subcommand("CronList", "list cron schedules"),
    ("cron", "add"): Subcommand("Cron", "add or replace a cron schedule", (Arg("name", "name"),), (
        Opt(("--queue", "-q"), "queue"), Opt(("--data", "-d"), "data", json_value),
        Opt(("--schedule", "-s"), "schedule"), Opt(("--every", "-e"), "repeatEvery", number),
        Opt(("--priority", "-P"), "priority", number), Opt(("--max-limit",), "maxLimit", number),
        Opt(("--timezone", "-z"), "timezone")), check=_cron_needs_a_schedule),
    ("cron", "delete"): Subcommand("CronDelete", "delete a cron schedule", (Arg("name", "name"),)),
    ("worker", "list"): Subcommand("ListWorkers", "list registered workers"),
    ("worker", "register"): Subcommand("RegisterWorker", "register a worker", (Arg("name", "name"),),
                                       (Opt(("--queues", "-q"), "queues", csv),), check=_needs_queues),
    ("worker", "unregister"): Subcommand("UnregisterWorker", "unregister a worker",
                                         (Arg("workerId", "workerId"),)),
    ("webhook", "list"): Subcommand("ListWebhooks", "list webhooks"),
    ("webhook", "add"): Subcommand("AddWebhook", "add a webhook", (Arg("url", "url"),), (
        Opt(("--events", "-e"), "events", csv), Opt(("--queue", "-q"), "queue"),
        Opt(("--secret", "-s"), "secret")), check=_needs_events),
    ("webhook", "remove"): Subcommand("RemoveWebhook", "remove a webhook", (Arg("webhookId", "webhookId"),)),
    ("stats",): Subcommand("Stats", "server statistics"),
    ("metrics",): Subcommand("Prometheus", "Prometheus metrics text"),
    ("ping",): Subcommand("Ping", "check the connection"),
}
FAMILIES = tuple(dict.fromkeys(key[0] for key in SUBCOMMANDS))


def lookup(words: Sequence[str]) -> tuple[tuple[str, ...], Subcommand, list[str]]:
    """The entry the words name and the words left for its arguments."""
    if not words:
        raise UsageError("no command given (try --help)")
    family = words[0]
    if (family,) in SUBCOMMANDS:
        return (family,), SUBCOMMANDS[(family,)], list(words[1:])
    names = [key[1] for key in SUBCOMMANDS if key[0] == family and len(key) == 2]
    if not names:
        raise UsageError(f"unknown command {family!r} (try --help)")
    if len(words) < 2 or (family, words[1]) not in SUBCOMMANDS:
        given = f" {words[1]!r}" if len(words) > 1 else ""
        raise UsageError(f"{family}: unknown or missing subcommand{given}; use one of {', '.join(names)}")
    return (family, words[1]), SUBCOMMANDS[(family, words[1])], list(words[2:])


def _looks_like_option(word: str) -> bool:
    # A negative number is a value (`push q -5` pushes the JSON number -5), not an option.
    return word.startswith("-") and len(word) > 1 and not word[1].isdigit() and word[1] != "."


def build(sub: Subcommand, words: Sequence[str], label: str) -> Request:
    """One request from a subcommand's words; UsageError names what is wrong."""
    by_flag = {flag: opt for opt in sub.opts for flag in opt.flags}
    req: Request = {"cmd": sub.cmd, **sub.fixed}
    positionals: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if not _looks_like_option(word):
            positionals.append(word)
            i += 1
            continue
        flag, eq, inline = word.partition("=")
        opt = by_flag.get(flag)
        if opt is None:
            known = f"; its options: {sub.options}" if sub.opts else f"; {label} takes no options"
            raise UsageError(f"{label}: unknown option {flag}{known}")
        if opt.takes_value and not eq:
            if i + 1 >= len(words):
                raise UsageError(f"{label}: {flag} needs a value")
            inline, i = words[i + 1], i + 1
        req[opt.field] = opt.read(inline, flag)
        i += 1
    if len(positionals) > len(sub.args):
        raise UsageError(f"{label}: unexpected argument {positionals[len(sub.args)]!r}; "
                         f"usage: {label} {sub.usage}")
    for arg, value in zip(sub.args, positionals, strict=False):
        req[arg.field] = arg.read(value, arg.name)
    missing = [a.name for a in sub.args[len(positionals):] if a.required]
    if missing:
        raise UsageError(f"{label}: missing <{missing[0]}>; usage: {label} {sub.usage}")
    if sub.check is not None:
        sub.check(req)
    return req


def parse(words: Sequence[str]) -> tuple[tuple[str, ...], Request]:
    key, sub, rest = lookup(words)
    return key, build(sub, rest, " ".join(key))
