"""A long fuzz run: hostile frames against a fresh server, reporting what the test suite's short run checks.

    python -m benchmarks.fuzz --frames 1000000 [--batch 50] [--seconds N] [--addr HOST:PORT]

Batches of hostile requests (nested, ext-typed, non-finite and oversized values in every command's
fields and as reqIds, see ``bunqueue._testbase.fuzzer``) go out in one write each, between a healthy PUSH
and the PULL that must deliver it. Reported: replies missing (hangs), ``Internal server error`` replies,
connections closed without a reply, healthy jobs not delivered, and whether the server is still up.
``--seconds`` ends the run early (with its report) once that much time has passed.
"""
from __future__ import annotations

import argparse
import itertools
import sys
import time

from hypothesis import HealthCheck, Phase, given, settings

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.fuzzer import FuzzConnection, Verdict, batches
from bunqueue._testbase.server import ServerProcess

RUN_EXAMPLES = 100


class OutOfTime(Exception):
    """The time budget ran out: stop generating (no shrinking happens in the generate-only phase)."""


def fuzz(
    addr: tuple[str, int], frames: int, batch: int, verdict: Verdict, progress: bool, seconds: float
) -> None:
    queues = itertools.count()
    conn = FuzzConnection(addr, "")
    started = time.monotonic()

    def one(bodies: list[bytes]) -> None:
        if time.monotonic() - started > seconds:
            raise OutOfTime
        conn.queue = f"fuzz-healthy-{next(queues)}"
        conn.run(bodies, verdict)

    # Hypothesis remembers every example of a run; short runs keep this process's memory flat.
    examples = max(1, frames // batch)
    run = settings(max_examples=min(examples, RUN_EXAMPLES), deadline=None, database=None,
                   phases=[Phase.generate], suppress_health_check=list(HealthCheck))(
        given(bodies=batches(batch))(one)
    )
    try:
        while verdict.frames < frames:
            run()
            if progress:
                rate = verdict.frames / (time.monotonic() - started)
                print(f"{verdict.frames} frames, {rate:.0f}/s", file=sys.stderr, flush=True)
    except OutOfTime:
        pass
    finally:
        conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=float("inf"))
    parser.add_argument("--addr", help="HOST:PORT of a running server (default: start one)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    proc = None
    if args.addr:
        host, port = args.addr.rsplit(":", 1)
        addr = (host, int(port))
    else:
        proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}).start()
        addr = proc.addr
    verdict = Verdict()
    started = time.monotonic()
    try:
        fuzz(addr, args.frames, args.batch, verdict, not args.quiet, args.seconds)
        alive = RawClient(addr).call({"cmd": "Ping"}).get("ok") is True
    except OSError:
        alive = False
    finally:
        if proc is not None:
            proc.stop()
    elapsed = time.monotonic() - started
    print(f"frames {verdict.frames}, replies {verdict.replies}, in {elapsed:.0f} s")
    print(f"hangs {verdict.hangs}, internal errors {len(verdict.internal_errors)}, "
          f"silent closes {verdict.silent_closes}, healthy jobs lost {verdict.lost_jobs}, server alive {alive}")
    print(f"replies that could not be encoded (admitted data the encoder cannot write): {verdict.unencodable}")
    for reply in verdict.internal_errors[:5]:
        print("internal error:", reply)
    bad = verdict.hangs or verdict.internal_errors or verdict.silent_closes or verdict.lost_jobs or not alive
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
