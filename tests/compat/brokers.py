"""The broker a scenario talks to: ours by default, or the Bun original to check a scenario itself.

BUNQUEUE_COMPAT_SERVER=bun runs the same scenarios against the Bun original installed beside the
TypeScript client, which is how a scenario's expectations are shown to be the original's behaviour.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bunqueue._testbase.server import ServerProcess, free_port

HOST = "127.0.0.1"
TOKEN = "compat-token"


@dataclass(frozen=True)
class Broker:
    host: str
    port: int
    token: str | None

    def env(self) -> dict[str, str]:
        """What the scenario scripts read to find the broker."""
        env = {"COMPAT_HOST": self.host, "COMPAT_PORT": str(self.port), "COMPAT_SERVER": target()}
        if self.token:
            env["COMPAT_TOKEN"] = self.token
        return env


def target() -> str:
    value = os.environ.get("BUNQUEUE_COMPAT_SERVER", "ours")
    if value not in ("ours", "bun"):
        raise ValueError(f"BUNQUEUE_COMPAT_SERVER must be 'ours' or 'bun', not {value!r}")
    return value


class ReferenceProcess:
    """The Bun original (`bunqueue start` from npm) on free loopback ports, in a folder of its own."""

    def __init__(self, bun: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.cli = bun.parents[2] / "bunqueue" / "dist" / "cli" / "index.js"
        self.bun = bun
        self.workdir = Path(tempfile.mkdtemp(prefix="bq-compat-ref-"))
        ports = {"HOST": HOST, "TCP_PORT": str(self.port), "HTTP_PORT": str(free_port())}
        self.env = {**os.environ, **env, **ports}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> ReferenceProcess:
        self.proc = subprocess.Popen(
            [str(self.bun), str(self.cli), "start"], cwd=self.workdir, env=self.env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Bun original exited with {self.proc.returncode}")
            try:
                socket.create_connection((HOST, self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("the Bun original did not start listening")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.workdir, ignore_errors=True)


def start(bun: Path | None, token: str | None = None) -> tuple[Broker, ServerProcess | ReferenceProcess]:
    """Start the selected broker; `bun` is needed only for the original."""
    env = {"AUTH_TOKENS": token} if token else {}
    if target() == "bun":
        assert bun is not None
        # The original reads 0 as "no requests at all"; a limit no scenario reaches stands for "off".
        proc: ServerProcess | ReferenceProcess = ReferenceProcess(
            bun, {**env, "RATE_LIMIT_MAX_REQUESTS": "1000000000"}).start()
    else:
        proc = ServerProcess(env={**env, "RATE_LIMIT_MAX_REQUESTS": "0"}).start()
    return Broker(HOST, proc.port, token), proc
