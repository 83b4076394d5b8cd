"""A real server in a subprocess on free loopback ports."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from typing import IO


def free_port() -> int:
    """A TCP port free on loopback now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m bunqueue start`` on loopback, stopped with SIGTERM."""

    def __init__(
        self,
        env: Mapping[str, str] | None = None,
        args: list[str] | None = None,
        output: IO[bytes] | None = None,
        cwd: str | None = None,
        port_flags: bool = True,
    ) -> None:
        self.port = free_port()
        self.http_port = free_port()
        self.env = dict(os.environ)
        self.env.update(env or {})
        self.args = args or []
        # A long run writes its output to a file: a pipe nobody reads would stall the server once full.
        self.output = output
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd = cwd
        # Without the flags the ports (``port``, ``http_port``) must come from the config file or environment.
        self.port_flags = port_flags

    @property
    def addr(self) -> tuple[str, int]:
        return ("127.0.0.1", self.port)

    def start(self, timeout: float = 60.0) -> ServerProcess:
        ports = ["--host", "127.0.0.1", "--tcp-port", str(self.port), "--http-port", str(self.http_port)]
        cmd = [sys.executable, "-m", "bunqueue", "start", *(ports if self.port_flags else []), *self.args]
        out = subprocess.PIPE if self.output is None else self.output
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=out, stderr=out, cwd=self.cwd)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                _, err = self.proc.communicate()
                raise RuntimeError(f"server exited with {self.proc.returncode}: {(err or b'').decode()}")
            try:
                socket.create_connection(self.addr, timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("server did not start listening")

    def stop(self, timeout: float = 10.0) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def rss_mb(self) -> float:
        """The server's resident memory now, from ``/proc``."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """The server's utime + stime so far, from ``/proc``."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as stat:
            # Fields after the command name, which is in parentheses and may hold spaces.
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stderr(self) -> str:
        assert self.proc is not None and self.proc.stderr is not None
        return self.proc.stderr.read().decode()
