"""One broker process on free loopback ports: how to launch ours or the Bun original, and what the
harness reads from /proc about it (CPU seconds, peak RSS) and does to it (CPU pinning)."""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bunqueue._testbase.server import free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
HOST = "127.0.0.1"
# High enough that no workload meets it: the default (10k requests a minute per connection) would
# turn a throughput test into a rate-limit test.
RATE_LIMIT = "1000000000"
# Settings that would change what is measured if inherited from the caller's environment.
SCRUBBED_ENV = (
    "BUNQUEUE_DATA_PATH", "BQ_DATA_PATH", "DATA_PATH", "SQLITE_PATH", "AUTH_TOKENS", "TCP_PORT",
    "HTTP_PORT", "HOST", "RATE_LIMIT_WINDOW_MS", "LOG_LEVEL",
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MODES = ("memory", "sqlite", "postgres")
# postgres needs a PostgreSQL server (started by the run unless --postgres-url names one): asked for by name.
DEFAULT_MODES = ("memory", "sqlite")


class ServerUnavailable(Exception):
    """The server exited before it listened (for example, it refused the data path)."""


@dataclass(frozen=True)
class Launch:
    """What to exec for one server: argv, extra environment, working directory."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path


@dataclass(frozen=True)
class OursLauncher:
    name: str = "ours"
    # The tree to run: the repository itself, or a baseline revision built beside it (--baseline).
    root: Path = REPO_ROOT
    source: str | None = None

    def launch(
        self, tcp_port: int, http_port: int, workdir: Path, data_path: Path | None, postgres_url: str | None = None
    ) -> Launch:
        argv = [
            sys.executable, "-m", "bunqueue", "start", "--host", HOST,
            "--tcp-port", str(tcp_port), "--http-port", str(http_port),
        ]
        if data_path is not None:
            argv += ["--data-path", str(data_path)]
        env = {"BUNQUEUE_POSTGRES_URL": postgres_url} if postgres_url else {}
        # The tree's root as working directory makes `-m bunqueue` import that tree, not the installed one.
        return Launch(argv, env, self.root)


@dataclass(frozen=True)
class BunLauncher:
    bun: Path
    cli: Path
    name: str = "bun"

    def launch(
        self, tcp_port: int, http_port: int, workdir: Path, data_path: Path | None, postgres_url: str | None = None
    ) -> Launch:
        env = {"TCP_PORT": str(tcp_port), "HTTP_PORT": str(http_port), "HOST": HOST}
        if data_path is not None:
            env["DATA_PATH"] = str(data_path)
        if postgres_url is not None:
            env.update(BUNQUEUE_STORAGE_DRIVER="postgres", BUNQUEUE_POSTGRES_URL=postgres_url)
        # Run in the round's own folder so anything it writes beside itself goes away with it.
        return Launch([str(self.bun), str(self.cli), "start"], env, workdir)


@dataclass(frozen=True)
class NullLauncher:
    """``benchmarks.nullserver``: frames and answers only (``--ceiling``); memory mode and TCP only."""

    name: str = "null"

    def launch(
        self, tcp_port: int, http_port: int, workdir: Path, data_path: Path | None, postgres_url: str | None = None
    ) -> Launch:
        return Launch([sys.executable, "-m", "benchmarks.nullserver", "--host", HOST, "--tcp-port", str(tcp_port)],
                      {}, REPO_ROOT)


Launcher = OursLauncher | BunLauncher | NullLauncher


@dataclass
class Server:
    """A started broker. Use :func:`started` rather than building one directly."""

    name: str
    mode: str
    proc: subprocess.Popen[bytes]
    port: int
    http_port: int
    workdir: Path
    log_path: Path
    info: dict[str, object] = field(default_factory=dict)

    @property
    def addr(self) -> tuple[str, int]:
        return (HOST, self.port)

    @property
    def http_addr(self) -> tuple[str, int]:
        return (HOST, self.http_port)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def cpu_seconds(self) -> float:
        """utime + stime of every thread so far, from /proc/<pid>/stat."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        # Fields after the command name, which is in parentheses and may itself hold spaces.
        rest = stat[stat.rindex(")") + 2 :].split()
        return (int(rest[11]) + int(rest[12])) / CLOCK_TICKS

    def peak_rss_kib(self) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
        raise RuntimeError("VmHWM missing from /proc status")

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def stop(self, timeout: float = 15.0) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def _environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["RATE_LIMIT_MAX_REQUESTS"] = RATE_LIMIT
    env.update(extra)
    return env


def _wait_listening(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not server.alive():
            # The last line is the reason (argparse and both CLIs end on it).
            reason = server.log_tail(1) or f"exit status {server.proc.returncode}"
            raise ServerUnavailable(f"exited with status {server.proc.returncode}: {reason}")
        try:
            socket.create_connection(server.addr, timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise ServerUnavailable(f"did not listen within {timeout:.0f} s: {server.log_tail(1)}")


@contextlib.contextmanager
def started(
    launcher: Launcher, mode: str, timeout: float = 30.0, postgres_url: str | None = None
) -> Iterator[Server]:
    """Start a fresh server in a fresh temporary folder, yield it, then stop it and remove the folder.

    In SQLite mode the data file lives in that folder, so every round starts from an empty database; in
    PostgreSQL mode the caller passes a fresh database (``postgres.Databases``).
    """
    workdir = Path(tempfile.mkdtemp(prefix=f"bq-compare-{launcher.name}-{mode}-"))
    data_path = workdir / "bunqueue.db" if mode == "sqlite" else None
    tcp_port, http_port = free_port(), free_port()
    spec = launcher.launch(tcp_port, http_port, workdir, data_path, postgres_url)
    log_path = workdir / "server.log"
    try:
        with log_path.open("wb") as log:
            proc = subprocess.Popen(
                spec.argv, cwd=spec.cwd, env=_environment(spec.env), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
            )
        server = Server(launcher.name, mode, proc, tcp_port, http_port, workdir, log_path)
        try:
            _wait_listening(server, timeout)
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# -- CPU pinning ----------------------------------------------------------------------------------


def _threads(pid: int) -> list[int]:
    try:
        return [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
    except FileNotFoundError:
        return []


def _pin(pid: int, cpus: set[int]) -> dict[int, set[int]]:
    """Pin every thread of `pid` (sched_setaffinity acts on one thread); return the old masks."""
    previous: dict[int, set[int]] = {}
    for tid in _threads(pid):
        with contextlib.suppress(ProcessLookupError):
            previous[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
    return previous


def _restore(previous: dict[int, set[int]]) -> None:
    for tid, cpus in previous.items():
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(tid, cpus)


def pinning_cpus() -> tuple[int, int] | None:
    """Two distinct CPUs this process may use, for the client and the server; None if fewer."""
    cpus = sorted(os.sched_getaffinity(0))
    return (cpus[0], cpus[1]) if len(cpus) >= 2 else None


@contextlib.contextmanager
def pinned(server_pid: int) -> Iterator[str]:
    """Pin this process to one CPU and the server to another for the duration; yield a note."""
    cpus = pinning_cpus()
    if cpus is None:
        yield "not pinned: fewer than 2 CPUs available"
        return
    client_cpu, server_cpu = cpus
    mine = _pin(os.getpid(), {client_cpu})
    theirs = _pin(server_pid, {server_cpu})
    try:
        yield f"client on cpu {client_cpu}, server on cpu {server_cpu}"
    finally:
        _restore(theirs)
        _restore(mine)
