"""Power loss for a SQLite file: every write not yet fsynced is dropped.

``powercut.c`` is an SQLite VFS loaded into the server with LD_PRELOAD (see :func:`server_env`); it keeps,
beside every database, WAL and journal file, an undo log of the bytes each write overwrote since the file's
last fsync, and a marker for files created since their folder's last fsync. After the server is killed with
SIGKILL, :func:`cut` replays those logs: each file returns to its content at its last fsync, files whose
creation was never made durable disappear, and the -shm file (shared memory) goes. The server then starts on
what a disk would hold after a power loss at that moment.

``cut(folder, keep=0.5)`` models a disk that reorders its writes: every sector written since the last fsync
survives with that probability. What the model leaves out (see the C source): a torn sector; unlink and
rename not yet made durable by a folder fsync (taken as durable at once).
"""
from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

SOURCE = Path(__file__).with_name("powercut.c")
HEADER = Path("/usr/include/sqlite3.h")
# {u32 kind, u32 zero, u64 offset, u64 length}, native byte order as the shim writes it.
RECORD = struct.Struct("=IIQQ")
KIND_SIZE, KIND_DATA, KIND_WRITE, KIND_TRUNCATE = 1, 2, 3, 4
# The unit a disk writes whole or not at all.
SECTOR = 512
UNDO, CREATED = ".undo", ".created"


class PowercutUnavailable(RuntimeError):
    """The shim cannot be built here."""


def build(folder: Path) -> Path:
    """``powercut.so`` compiled into ``folder`` (again when the source is newer)."""
    shim = folder / "powercut.so"
    if shim.exists() and shim.stat().st_mtime >= SOURCE.stat().st_mtime:
        return shim
    compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if compiler is None:
        raise PowercutUnavailable("the power-loss test needs a C compiler (cc, or CC) to build powercut.c")
    if not HEADER.exists():
        raise PowercutUnavailable(
            f"the power-loss test needs SQLite's header {HEADER}: apt-get install libsqlite3-dev")
    folder.mkdir(parents=True, exist_ok=True)
    built = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(shim), str(SOURCE), "-ldl", "-lpthread"],
        capture_output=True, text=True, check=False)
    if built.returncode != 0:
        raise PowercutUnavailable(f"compiling {SOURCE.name} failed: {built.stderr.strip()[-500:]}")
    return shim


def server_env(shim: Path) -> dict[str, str]:
    """The environment that loads the shim into a server process."""
    return {"LD_PRELOAD": str(shim)}


@dataclass
class FileCut:
    """What one file lost."""

    path: Path
    # Bytes written since the last fsync that the cut dropped, and the size it went back to.
    bytes_dropped: int
    size: int
    # When the file was last fsynced (seconds since the epoch), as the shim saw it.
    synced_at: float
    # The file was created and its folder never fsynced: it is gone.
    removed: bool = False
    # Of the bytes dropped, those written again (``cut`` with ``keep``).
    bytes_redone: int = 0


def _keep_some(f: BinaryIO, records: list[tuple[int, int, int, bytes]], keep: float, rng: random.Random) -> int:
    """Redo each unsynced sector written with probability ``keep``, in order; returns the bytes redone."""
    redone = 0
    for kind, offset, _, payload in records:
        if kind == KIND_TRUNCATE and rng.random() < keep:
            f.truncate(offset)
        elif kind == KIND_WRITE:
            start = offset
            while start < offset + len(payload):
                end = min(offset + len(payload), (start // SECTOR + 1) * SECTOR)
                if rng.random() < keep:
                    f.seek(start)
                    f.write(payload[start - offset : end - offset])
                    redone += end - start
                start = end
    return redone


def _replay(undo: Path, target: Path, keep: float, rng: random.Random) -> FileCut | None:
    raw = undo.read_bytes()
    records: list[tuple[int, int, int, bytes]] = []
    pos = 0
    while pos + RECORD.size <= len(raw):
        kind, _, offset, length = RECORD.unpack_from(raw, pos)
        pos += RECORD.size
        payload = b""
        if kind in (KIND_DATA, KIND_WRITE):
            if pos + length > len(raw):
                break  # cut short by the kill: the write it guards was not made
            payload = raw[pos : pos + length]
            pos += length
        elif kind not in (KIND_SIZE, KIND_TRUNCATE):
            raise ValueError(f"{undo}: unknown record kind {kind} at {pos - RECORD.size}")
        records.append((kind, offset, length, payload))
    undo.unlink()
    if not records:
        return None
    kind, size, synced_us, _ = records[0]
    if kind != KIND_SIZE:
        raise ValueError(f"{undo}: the log does not start with the file's size")
    dropped = 0
    with open(target, "r+b") as f:
        dropped = max(0, os.fstat(f.fileno()).st_size - size)
        for kind, offset, _, payload in reversed(records[1:]):
            if kind == KIND_DATA:
                f.seek(offset)
                f.write(payload)
                dropped += len(payload)
        f.truncate(size)
        redone = _keep_some(f, records, keep, rng) if keep > 0 else 0
        f.flush()
        os.fsync(f.fileno())
    return FileCut(target, dropped, size, synced_us / 1e6, bytes_redone=redone)


def cut(folder: Path, keep: float = 0.0, rng: random.Random | None = None) -> list[FileCut]:
    """Take every tracked file in ``folder`` back to its last fsync; the server must be dead.

    With ``keep`` above 0, each sector written since then is written again with that probability (in the
    order of the writes): what a disk that reorders its writes holds when the power goes."""
    rng = rng or random.Random()
    cuts: list[FileCut] = []
    for marker in sorted(folder.glob(f"*{CREATED}")):
        target = folder / marker.name[: -len(CREATED)]
        size = target.stat().st_size if target.exists() else 0
        target.unlink(missing_ok=True)
        (folder / (target.name + UNDO)).unlink(missing_ok=True)
        marker.unlink()
        cuts.append(FileCut(target, size, 0, 0.0, removed=True))
    for undo in sorted(folder.glob(f"*{UNDO}")):
        target = folder / undo.name[: -len(UNDO)]
        if not target.exists():
            undo.unlink()
            continue
        done = _replay(undo, target, keep, rng)
        if done is not None:
            cuts.append(done)
    for shm in folder.glob("*-shm"):
        shm.unlink()
    return cuts
