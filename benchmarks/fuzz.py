"""A long fuzz run: hostile frames against a fresh server, reporting what the test suite's short run checks.

    nice python -m benchmarks.fuzz --frames 1000000 [--batch 50] [--connections 2] [--seconds N]

Hostile requests (nested, ext-typed, non-finite and oversized values in every command's fields and as
reqIds, see ``bunqueue._testbase.fuzzer``) are drawn by hypothesis in a second process while this one sends.
Each distinct request is sent once as drawn and then, while new ones are being drawn, again under other
commands (hypothesis draws the command independently of the fields, so this is the same distribution), with
a fresh integer reqId where it has none of its own. Batches go out in one write each, between a healthy PUSH
and the PULL that must deliver it, on ``--connections`` connections in turn. Reported: distinct requests
drawn and distinct frames sent (bodies with the integer reqId left out), replies missing (hangs),
``Internal server error`` replies, connections closed without a reply, healthy jobs not delivered, the
server's CPU time, RSS and log lines, and whether it is still up.

Last run (2026-12-02, 2-core machine, under ``nice`` beside other benchmarks): 1,000,000 frames in 1,044 s
from 187,300 distinct requests (972,734 distinct frames), 0 hangs, 0 late batches, 0 internal errors,
0 silent closes, 0 healthy jobs lost, server alive with RSS 97 MB at the end (0.98 ms of server CPU per
frame). See the README's Fuzzing paragraph.
"""
from __future__ import annotations

import argparse
import hashlib
import itertools
import multiprocessing
import os
import queue
import random
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from typing import IO, Any

from bunqueue._testbase.frames import RawClient, frame
from bunqueue._testbase.fuzzer import COMMANDS, REQUESTS, FuzzConnection, Verdict, request_body
from bunqueue._testbase.server import ServerProcess

Request = tuple[str, dict[str, bytes], bytes | None]

# Examples per hypothesis run: a run keeps what it drew, so many short runs keep the generator's memory flat.
ROUND = 1_000
# Distinct requests per message from the generator.
PARCEL = 20
# A batch whose replies take longer than the reply timeout (10 s) but come within this many seconds more
# is late (a starved server on a shared machine), not a hang; both keep the batch for replay.
LATE_GRACE = 60.0
COMMAND_BITS = {cmd: 1 << i for i, cmd in enumerate(COMMANDS)}


def body_key(request: Request) -> bytes:
    return hashlib.blake2b(request_body(0, *request), digest_size=16).digest()


def generate(out: Any, seed: int | None) -> None:
    """Draw hostile requests for ever (in a process of its own); send each distinct one to ``out``."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as with_seed

    # Drawing yields to the server under test when the two compete for a core: new requests only add variety.
    os.nice(5)
    seen: set[bytes] = set()
    drawn = 0
    parcel: list[Request] = []

    def keep(request: Request) -> None:
        nonlocal drawn, parcel
        drawn += 1
        key = body_key(request)
        if key not in seen:
            seen.add(key)
            parcel.append(request)
        if len(parcel) >= PARCEL:
            out.put((drawn, parcel))  # blocks while the sender has enough new requests
            parcel = []

    run = settings(max_examples=ROUND, deadline=None, database=None, phases=[Phase.generate],
                   suppress_health_check=list(HealthCheck))(given(REQUESTS)(keep))
    for n in itertools.count():
        (run if seed is None else with_seed(seed * 1_000_003 + n)(run))()


class Corpus:
    """The requests drawn so far: new ones first, then recent ones (up to ``budget`` bytes) recombined."""

    def __init__(self, source: Any, budget: int, rng: random.Random) -> None:
        self.source = source
        self.budget = budget
        self.rng = rng
        self.new: deque[tuple[int, Request]] = deque()
        self.recent: list[tuple[int, Request, int]] = []
        self.recent_bytes = 0
        self.slot = 0
        self.drawn = 0
        self.distinct = 0
        # Per distinct request, one bit per command it was sent under.
        self.sent_as: list[int] = []

    def receive(self, wanted: int) -> None:
        while len(self.new) < wanted:
            try:
                self.drawn, parcel = self.source.get(timeout=60) if not self.recent else self.source.get_nowait()
            except queue.Empty:
                return
            for request in parcel:
                self.new.append((self.distinct, request))
                self.sent_as.append(0)
                self.distinct += 1

    def remember(self, index: int, request: Request) -> None:
        size = sum(map(len, request[1].values())) + len(request[2] or b"")
        if self.recent_bytes + size <= self.budget or not self.recent:
            self.recent.append((index, request, size))
        else:
            self.recent_bytes -= self.recent[self.slot][2]
            self.recent[self.slot] = (index, request, size)
            self.slot = (self.slot + 1) % len(self.recent)
        self.recent_bytes += size

    def take(self, n: int) -> list[Request]:
        self.receive(n)
        if not (self.new or self.recent):
            raise RuntimeError("the generator sent no requests within a minute")
        requests = []
        for _ in range(n):
            if self.new:
                index, request = self.new.popleft()
                self.remember(index, request)
            else:
                index, (_, fields, req_id), _ = self.recent[self.rng.randrange(len(self.recent))]
                request = (self.rng.choice(COMMANDS), fields, req_id)
            self.sent_as[index] |= COMMAND_BITS[request[0]]
            requests.append(request)
        return requests

    def frames_distinct(self) -> int:
        return sum(bits.bit_count() for bits in self.sent_as)


@dataclass
class Run:
    frames: int
    batch: int
    connections: int
    seconds: float
    progress: bool


def fuzz(addr: tuple[str, int], run: Run, corpus: Corpus, verdict: Verdict, server: Server | None) -> None:
    conns = [FuzzConnection(addr, f"fuzz-healthy-{k}", grace=LATE_GRACE) for k in range(run.connections)]
    waiting = [False] * len(conns)
    req_ids = itertools.count(1)
    started = time.monotonic()
    report_at = started + 30
    try:
        while verdict.frames < run.frames and time.monotonic() - started < run.seconds:
            for k, conn in enumerate(conns):
                if waiting[k]:
                    conn.check(verdict)
                    waiting[k] = False
                n = min(run.batch, run.frames - verdict.frames)
                if n <= 0:
                    break
                bodies = [request_body(next(req_ids), *request) for request in corpus.take(n)]
                waiting[k] = conn.send(bodies, verdict)
            if run.progress and time.monotonic() >= report_at:
                report_at += 30
                elapsed = time.monotonic() - started
                rss = f", server RSS {server.process.rss_mb():.0f} MB" if server else ""
                print(f"{elapsed:.0f} s: {verdict.frames} frames ({verdict.frames / elapsed:.0f}/s), "
                      f"{corpus.distinct} distinct requests drawn{rss}, hangs {verdict.hangs}, "
                      f"internal errors {len(verdict.internal_errors)}, silent closes {verdict.silent_closes}, "
                      f"lost {verdict.lost_jobs}", file=sys.stderr, flush=True)
    finally:
        for k, conn in enumerate(conns):
            if waiting[k]:
                conn.check(verdict)
            conn.close()


class Server:
    """The server under test, a fresh subprocess whose output goes to a file."""

    def __init__(self) -> None:
        self.log: IO[bytes] = tempfile.TemporaryFile()
        self.process = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}, output=self.log).start()

    def log_lines(self) -> list[str]:
        self.log.seek(0)
        return self.log.read().decode(errors="replace").splitlines()

    def stop(self) -> None:
        self.process.stop()
        self.log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--connections", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=float("inf"), help="end early, with the report")
    parser.add_argument("--recent-mb", type=int, default=256, help="drawn requests kept for recombination")
    parser.add_argument("--seed", type=int, help="for the draws and the recombination (default: random)")
    parser.add_argument("--addr", help="HOST:PORT of a running server (default: start one)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    run = Run(args.frames, args.batch, args.connections, args.seconds, not args.quiet)
    server = None if args.addr else Server()
    if args.addr:
        host, port = args.addr.rsplit(":", 1)
        addr = (host, int(port))
    else:
        assert server is not None
        addr = server.process.addr
    spawn = multiprocessing.get_context("spawn")
    parcels = spawn.Queue(maxsize=4)
    generator = spawn.Process(target=generate, args=(parcels, args.seed), daemon=True)
    generator.start()
    corpus = Corpus(parcels, args.recent_mb << 20, random.Random(args.seed))
    verdict = Verdict()
    corpus.receive(args.batch)  # the generator's start-up is not part of the run
    started = time.monotonic()
    cpu_start = server.process.cpu_seconds() if server else 0.0
    try:
        fuzz(addr, run, corpus, verdict, server)
        pinger = RawClient(addr)
        alive = pinger.call({"cmd": "Ping"}).get("ok") is True
        pinger.close()
    except OSError:
        alive = False
    finally:
        generator.terminate()
        generator.join()
        elapsed = time.monotonic() - started
        if server is not None:
            rss, cpu, log = server.process.rss_mb(), server.process.cpu_seconds() - cpu_start, server.log_lines()
            server.stop()
    print(f"frames {verdict.frames}, replies {verdict.replies}, in {elapsed:.0f} s ({verdict.frames / elapsed:.0f}/s)")
    print(f"requests drawn by hypothesis {corpus.drawn}, distinct {corpus.distinct}; "
          f"distinct frames sent {corpus.frames_distinct()} (command, fields, reqId)")
    print(f"hangs {verdict.hangs}, internal errors {len(verdict.internal_errors)}, "
          f"silent closes {verdict.silent_closes}, healthy jobs lost {verdict.lost_jobs}, server alive {alive}")
    print(f"replies that could not be encoded (admitted data the encoder cannot write): {verdict.unencodable}")
    print(f"batches late (all replies, after more than 10 s): {verdict.late}")
    if verdict.slow_batches:
        keep = tempfile.mkdtemp(prefix="fuzz-slow-")
        for i, batch in enumerate(verdict.slow_batches):
            with open(os.path.join(keep, f"batch-{i}.frames"), "wb") as out:
                out.write(b"".join(frame(body) for body in batch))
        print(f"the frames of the late and hung batches are in {keep}")
    if server is not None:
        # INFO lines are the server's own (start, CompactMemory); anything else is worth reading.
        notable = [line for line in log if " INFO " not in line]
        print(f"server: RSS at the end {rss:.0f} MB, CPU {cpu:.0f} s ({cpu * 1000 / max(1, verdict.frames):.2f} ms "
              f"per frame), log lines {len(log)}, of them not INFO {len(notable)}")
        for line in notable[:20]:
            print("server log:", line[:300])
    for reply in verdict.internal_errors[:5]:
        print("internal error:", reply)
    bad = verdict.hangs or verdict.internal_errors or verdict.silent_closes or verdict.lost_jobs or not alive
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
