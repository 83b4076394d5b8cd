"""`bunqueue <command> ...` against a running server: parse, connect, send one request, print.

Exit status: 0 when the server says ok, 1 when it refuses (or cannot be reached), 2 when the command
line is wrong. Errors are one line on stderr (`{"ok": false, "error": ...}` with --json), never a
traceback.
"""
from __future__ import annotations

import asyncio
import json
import ssl
import sys
import time
from collections.abc import Sequence
from typing import Any, TextIO

from bunqueue import __version__
from bunqueue.client import AuthenticationError, Connection, connect
from bunqueue.remote import healthcheck
from bunqueue.remote.argv import GlobalOptions, UsageError, parse_global
from bunqueue.remote.render import block, render
from bunqueue.remote.requests import FAMILIES, SUBCOMMANDS, parse

LOCAL_COMMANDS = {
    "version": "client and server versions",
    "health": "reachability, round-trip time and storage status",
    "doctor": "diagnostics: versions, storage, queues, dead letters",
    "backup": "now | list | restore <key> [-f] | status: S3 backups of the data file (no server needed)",
    "healthcheck": "[url] HTTP container probe of /health (default 127.0.0.1:$HTTP_PORT); exit 0 or 1",
}
# A long-poll may legitimately take its whole timeout; the client waits that long plus a margin.
LONG_POLLS = frozenset({"PULL", "WaitJob"})
BASE_WAIT_S = 30.0


class Unreachable(Exception):
    """No connection could be made (refused, timed out, TLS failed)."""


def _tls_context(opts: GlobalOptions) -> ssl.SSLContext | None:
    if not opts.tls:
        return None
    context = ssl.create_default_context(cafile=opts.tls_ca)
    if opts.tls_no_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


async def _open(opts: GlobalOptions) -> Connection:
    try:
        return await connect(opts.host, opts.port, token=opts.token, timeout=5.0, ssl=_tls_context(opts))
    except AuthenticationError:
        raise
    except (OSError, TimeoutError, ssl.SSLError) as exc:
        reason = str(exc) or type(exc).__name__
        raise Unreachable(f"cannot reach the server at {opts.host}:{opts.port}: {reason}") from None


def _wait_for(req: dict[str, Any]) -> float:
    timeout = req.get("timeout") if req["cmd"] in LONG_POLLS else None
    return max(BASE_WAIT_S, (timeout or 0) / 1000 + 10)


async def _send(opts: GlobalOptions, req: dict[str, Any]) -> dict[str, Any]:
    conn = await _open(opts)
    try:
        async with asyncio.timeout(_wait_for(req)):
            return await conn.request(req)
    except TimeoutError:
        raise Unreachable(f"no reply from {opts.host}:{opts.port} within {_wait_for(req):.0f} s") from None
    finally:
        await conn.close()


def _refusal(req: dict[str, Any], reply: dict[str, Any]) -> str | None:
    """Why a reply counts as a failure of the command, or None."""
    if not reply.get("ok"):
        return str(reply.get("error") or "the server refused the command")
    if req["cmd"] == "WaitJob" and reply.get("completed") is False:
        return "the job did not complete within the timeout"
    if req["cmd"] == "GetState" and reply.get("state") in (None, "unknown"):
        return f"job not found: {req['id']}"
    return None


def _emit(out: TextIO, opts: GlobalOptions, payload: Any, text: str) -> None:
    print(json.dumps(payload, indent=2, default=str) if opts.json else text, file=out)


def _fail(opts: GlobalOptions, message: str, status: int) -> int:
    _emit(sys.stderr, opts, {"ok": False, "error": message}, f"error: {message}")
    return status


async def _probe(opts: GlobalOptions) -> dict[str, Any]:
    """What `health`, `version` and `doctor` report: one connection, a few read-only requests."""
    started = time.perf_counter()
    conn = await _open(opts)
    try:
        hello, ping = await conn.pipeline([{"cmd": "Hello"}, {"cmd": "Ping"}])
        rtt_ms = (time.perf_counter() - started) * 1000
        storage, queues = await conn.pipeline([{"cmd": "StorageStatus"}, {"cmd": "ListQueues"}])
        dlq = await conn.pipeline([{"cmd": "GetDlqStats", "queue": q} for q in _queue_names(queues)])
    finally:
        await conn.close()
    return {"hello": hello, "ping": ping, "rtt_ms": round(rtt_ms, 2), "storage": storage,
            "queues": _queue_names(queues), "dlq": sum(int(_dlq_count(d)) for d in dlq)}


def _queue_names(reply: dict[str, Any]) -> list[str]:
    queues = reply.get("queues") or []
    return [q if isinstance(q, str) else str(q.get("name")) for q in queues]


def _dlq_count(reply: dict[str, Any]) -> int:
    stats = (reply.get("data") or {}).get("stats") or {}
    return int(stats.get("total") or 0)


def _server_version(probe: dict[str, Any]) -> str:
    hello = probe["hello"]
    return f"{hello.get('server', 'bunqueue')} {hello.get('version', '?')}"


def _local(command: str, opts: GlobalOptions) -> int:
    if command == "version":
        try:
            server = _server_version(asyncio.run(_probe(opts)))
        except Unreachable as exc:
            server = f"unreachable ({exc})"
        _emit(sys.stdout, opts, {"ok": True, "client": __version__, "server": server},
              block([("client", f"bunqueue {__version__}"), ("server", server)]))
        return 0
    probe = asyncio.run(_probe(opts))
    storage: dict[str, Any] = probe["storage"]
    status = storage.get("data")
    disk_full = bool((status if isinstance(status, dict) else storage).get("diskFull"))
    checks = [
        ("server reachable", True, f"{_server_version(probe)} at {opts.host}:{opts.port}, "
                                   f"round trip {probe['rtt_ms']} ms"),
        ("storage writable", not disk_full, "disk full" if disk_full else "ok"),
    ]
    if command == "doctor":
        same = probe["hello"].get("version") == __version__
        checks += [("versions match", same, f"client {__version__}, server {probe['hello'].get('version')}"),
                   ("dead letters", probe["dlq"] == 0, f"{probe['dlq']} in {len(probe['queues'])} queue(s)")]
    failed = [name for name, good, _ in checks if not good]
    doc = {"ok": not failed, "checks": [{"check": n, "ok": g, "detail": d} for n, g, d in checks], **probe}
    text = "\n".join(f"{'ok  ' if good else 'FAIL'}  {name}: {detail}" for name, good, detail in checks)
    _emit(sys.stdout, opts, doc, text)
    return 1 if failed else 0


def help_text() -> str:
    lines = ["usage: bunqueue <command> [arguments] [-H host] [-p port] [-t token] [--tls ...] [--json]",
             "       bunqueue start [server options]   (see bunqueue start --help)", "", "commands:"]
    width = max(len(" ".join(k)) + len(s.usage) + 1 for k, s in SUBCOMMANDS.items())
    for family in FAMILIES:
        for key, sub in SUBCOMMANDS.items():
            if key[0] == family:
                lines.append(f"  {(' '.join(key) + ' ' + sub.usage).strip():<{width}}  {sub.summary}")
    lines += [f"  {name:<{width}}  {summary}" for name, summary in LOCAL_COMMANDS.items()]
    lines += ["", "global options (before or after the command's own):",
              "  -H, --host HOST      server host (env HOST, BUNQUEUE_HOST, BQ_HOST; default localhost)",
              "  -p, --port PORT      TCP port (env TCP_PORT, BUNQUEUE_TCP_PORT, BQ_TCP_PORT; default 6789)",
              "  -t, --token TOKEN    auth token (env BQ_TOKEN, BUNQUEUE_TOKEN); after pull and job wait,",
              "                       -t is their --timeout: use --token there",
              "  --tls, --tls-ca FILE, --tls-no-verify   connect with TLS",
              "  --json               print the reply as JSON"]
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    try:
        opts = parse_global(argv)
        if opts.version and not opts.words:
            opts.words = ["version"]
        if opts.help or not opts.words or opts.words == ["help"]:
            print(help_text())
            return 0
        if opts.words[0] == "healthcheck":
            return healthcheck.run(opts.words[1:])
        if opts.words[0] == "backup":
            from bunqueue.backup import cli as backup_cli

            return backup_cli.run(opts.words[1:], opts.json)
        if opts.words[0] in LOCAL_COMMANDS:
            return _local(opts.words[0], opts)
        _, req = parse(opts.words)
        reply = asyncio.run(_send(opts, req))
    except UsageError as exc:
        return _fail(GlobalOptions(json="--json" in argv), str(exc), 2)
    except (Unreachable, AuthenticationError) as exc:
        return _fail(opts, str(exc), 1)
    refusal = _refusal(req, reply)
    if refusal is not None:
        return _fail(opts, refusal, 1)
    _emit(sys.stdout, opts, reply, render(req["cmd"], reply))
    return 0
