"""The crash load of ``crashload.py`` with power cuts instead of plain kills.

Each round runs the load against a server whose SQLite files go through the ``powercut`` VFS
(``bunqueue/_testbase/powercut.c``), kills it with SIGKILL at a random moment, drops every write not yet
fsynced (``powercut.cut``), checks the file with ``PRAGMA integrity_check`` and starts the next server on
what is left. After the last cut the queue is drained and the client's history checked.

With ``BUNQUEUE_SQLITE_SYNCHRONOUS=FULL`` nothing acknowledged may be lost: no durable push, no ACK (the
job must not come back), no FAIL; buffered pushes only inside the group-commit window, as after a crash.
With ``NORMAL`` the WAL is fsynced only by a checkpoint (every ``CHECKPOINT_ROWS`` row writes), so a power
cut may lose whatever was acknowledged since the WAL's last fsync, and nothing acknowledged before it.

``--keep 0.5`` models a disk that reorders its writes: a cut keeps each sector written since the last fsync
with that probability, so torn transactions and half-done checkpoints reach the restart.

Run directly for a long run: ``python -m tests.reliability.powerloss --cuts 100 --synchronous FULL``.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from bunqueue._testbase import powercut
from tests.reliability.crashload import BUFFER_LOSS_WINDOW_MS, History, Verdict, run


@dataclass
class Cut:
    """What one power cut did to the files."""

    # Kill time (ms); commits made after durable_until_ms could be lost (None: nothing was dropped).
    at_ms: float
    durable_until_ms: float | None
    # Bytes written since the last fsync that the cut dropped (those it kept are not counted).
    bytes_dropped: int
    files_removed: int
    integrity: str


@dataclass
class PowerVerdict:
    synchronous: str
    crash: Verdict
    cuts: list[Cut] = field(default_factory=list)
    durable_lost: int = 0
    acks_undone: int = 0
    failures_lost: int = 0
    buffered_lost: int = 0
    # Losses of changes acknowledged before the last fsync that preceded their cut: never allowed.
    outside_bound: int = 0
    # The longest span of unsynced commits a cut dropped (ms from the last fsync to the kill).
    worst_unsynced_ms: float = 0.0

    @property
    def integrity_failures(self) -> int:
        return sum(cut.integrity != "ok" for cut in self.cuts)

    @property
    def bytes_dropped(self) -> int:
        return sum(cut.bytes_dropped for cut in self.cuts)


def integrity(data: Path) -> str:
    """``PRAGMA integrity_check`` of the file as a cut left it, changing nothing: read-only, the WAL kept."""
    if not data.exists():
        return "ok"  # never made durable: the next start creates it
    conn = sqlite3.connect(f"file:{data}?mode=ro", uri=True)
    try:
        return "; ".join(str(row[0]) for row in conn.execute("PRAGMA integrity_check"))
    finally:
        conn.close()
        # A read-only connection builds the WAL index; shared memory does not outlive a power loss.
        Path(f"{data}-shm").unlink(missing_ok=True)


def cut_after_kill(workdir: Path, cuts: list[Cut], keep: float, rng: random.Random) -> Callable[[History], None]:
    """The hook that cuts the power after each kill and records the cut in ``cuts``; ``keep`` is the share
    of unsynced sectors the disk still writes (see ``powercut.cut``)."""
    data = workdir / "crash.db"

    def after_kill(history: History) -> None:
        dropped = powercut.cut(workdir, keep, rng)
        wal = [c for c in dropped if c.path.name == data.name + "-wal"]
        if any(c.removed for c in dropped):
            until: float | None = 0.0
        elif wal:
            until = wal[0].synced_at * 1000.0
        else:
            until = None
        cuts.append(Cut(history.kills[-1], until, sum(c.bytes_dropped - c.bytes_redone for c in dropped),
                        sum(c.removed for c in dropped), integrity(data)))

    return after_kill


def within_bound(at: tuple[int, float], cuts: list[Cut], slack_ms: float = 0.0) -> bool:
    """A change acknowledged at ``at`` (round, ms) may be lost: it came after its cut's last fsync."""
    round_no, when = at
    if round_no >= len(cuts):
        return False  # acknowledged by the last server, which is never cut
    until = cuts[round_no].durable_until_ms
    return until is not None and when > until - slack_ms


def buffered_within_bound(at: tuple[int, float], cuts: list[Cut]) -> bool:
    """A buffered push may also be lost uncommitted: acknowledged at most one window before the kill."""
    round_no, when = at
    uncommitted = round_no < len(cuts) and cuts[round_no].at_ms - when <= BUFFER_LOSS_WINDOW_MS
    return uncommitted or within_bound(at, cuts, BUFFER_LOSS_WINDOW_MS)


def losses(history: History, cuts: list[Cut], verdict: PowerVerdict) -> None:
    durable = [j for j in history.durable if j not in history.known]
    buffered = [j for j in history.buffered if j not in history.known]
    undone = sorted(set(history.redelivered_after_ack))
    failures = history.failures_lost()
    verdict.durable_lost, verdict.buffered_lost = len(durable), len(buffered)
    verdict.acks_undone, verdict.failures_lost = len(undone), len(failures)
    verdict.outside_bound = (
        sum(not within_bound(history.durable[j], cuts) for j in durable)
        + sum(not buffered_within_bound(history.buffered[j], cuts) for j in buffered)
        + sum(not within_bound(history.acked_at[j], cuts) for j in undone)
        + sum(not within_bound(history.failed[j], cuts) for j in failures)
    )
    spans = [cut.at_ms - cut.durable_until_ms for cut in cuts if cut.durable_until_ms]
    verdict.worst_unsynced_ms = round(max(spans, default=0.0), 1)


async def run_cuts(cuts: int, workdir: Path, synchronous: str, seed: int = 1, progress: bool = False,
                   round_seconds: tuple[float, float] = (0.1, 0.6), keep: float = 0.0) -> PowerVerdict:
    shim = powercut.build(workdir / "shim")
    done: list[Cut] = []
    history = History()
    env = {**powercut.server_env(shim), "BUNQUEUE_SQLITE_SYNCHRONOUS": synchronous}
    crash = await run(cuts, workdir, seed, progress, killed_env=env,
                      after_kill=cut_after_kill(workdir, done, keep, random.Random(seed)), history=history,
                      round_seconds=round_seconds)
    verdict = PowerVerdict(synchronous, crash, done)
    losses(history, done, verdict)
    return verdict


def full_ok(verdict: PowerVerdict) -> bool:
    """FULL: a power cut loses nothing acknowledged."""
    crash, flows = verdict.crash, verdict.crash.flows
    return (verdict.durable_lost == verdict.acks_undone == verdict.failures_lost == 0
            and verdict.outside_bound == 0 and verdict.integrity_failures == 0 and crash.integrity == "ok"
            and crash.unworked == crash.double_completed == crash.buffered_missing_outside_window == 0
            and crash.cron_alive
            and flows is not None and flows.partial == flows.acked_missing == flows.stuck_parents == 0
            and flows.early_parents == 0)


def normal_ok(verdict: PowerVerdict) -> bool:
    """NORMAL: only what came after the WAL's last fsync may be lost, and the file stays whole."""
    flows = verdict.crash.flows
    return (verdict.outside_bound == 0 and verdict.integrity_failures == 0 and verdict.crash.integrity == "ok"
            and verdict.crash.unworked == 0 and flows is not None and flows.partial == flows.stuck_parents == 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cuts", type=int, default=30)
    parser.add_argument("--synchronous", choices=("FULL", "NORMAL"), default="FULL")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--round-seconds", type=float, nargs=2, default=(0.1, 0.6), metavar=("MIN", "MAX"),
                        help="each server is cut after a random time in this range")
    parser.add_argument("--keep", type=float, default=0.0,
                        help="share of the sectors written since the last fsync that a cut keeps (0: none)")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="bunqueue-powerloss-"))
    verdict = asyncio.run(run_cuts(args.cuts, workdir, args.synchronous, args.seed, progress=True,
                                   round_seconds=tuple(args.round_seconds), keep=args.keep))
    for key, value in vars(verdict.crash).items():
        print(f"{key:34} {value}")
    for key in ("synchronous", "durable_lost", "acks_undone", "failures_lost", "buffered_lost", "outside_bound",
                "worst_unsynced_ms", "integrity_failures", "bytes_dropped"):
        print(f"{key:34} {getattr(verdict, key)}")
    print(f"{'cuts that dropped writes':34} {sum(cut.durable_until_ms is not None for cut in verdict.cuts)}")
    ok = full_ok(verdict) if args.synchronous == "FULL" else normal_ok(verdict)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
