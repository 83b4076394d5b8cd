"""A throwaway PostgreSQL server for the tests: ``initdb`` into a temporary folder, ``pg_ctl`` on a free port.

Debian's ``postgresql`` package is installed when its binaries are missing and we are root (as CI is).
PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user, in a folder that
user owns. Durability is off (fsync, synchronous_commit, full_page_writes): the data dies with the folder.
``durable_commits`` turns synchronous_commit back on, so that a commit acknowledged is one a crash of the
server (``crash``, then ``resume``) keeps; fsync and full_page_writes only matter when the machine itself fails.

``python -m bunqueue._testbase.postgres --install`` installs the package ahead of a test run.
"""
from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

from bunqueue._testbase.server import free_port

USER = "postgres"
# Debian installs each major version under its own folder; the highest one wins.
DEBIAN_BIN_GLOB = "/usr/lib/postgresql/*/bin"


class PostgresUnavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``: the PATH's, else Debian's newest."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    candidates = [Path(p) for p in glob.glob(DEBIAN_BIN_GLOB) if (Path(p) / "pg_ctl").exists()]
    candidates.sort(key=lambda p: _major(p.parent.name))
    return candidates[-1] if candidates else None


def _major(name: str) -> int:
    return int(name) if name.isdigit() else -1


def install() -> Path:
    """The binaries' folder, installing Debian's package first when they are missing."""
    found = find_bin_dir()
    if found is not None:
        return found
    if os.geteuid() != 0:
        raise PostgresUnavailable("initdb/pg_ctl not found, and only root can install the postgresql package")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "postgresql"]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise PostgresUnavailable(f"{' '.join(cmd)} failed: {proc.stderr.strip()[-2000:]}")
    found = find_bin_dir()
    if found is None:
        raise PostgresUnavailable(f"the postgresql package installed no pg_ctl under {DEBIAN_BIN_GLOB}")
    return found


class PostgresServer:
    """One server on 127.0.0.1 and a Unix socket in its folder; ``url(db)`` reaches it as the superuser."""

    def __init__(self, port: int | None = None, durable_commits: bool = False) -> None:
        self.port = port or free_port()
        self.durable_commits = durable_commits
        self.folder: Path | None = None
        self.bin_dir: Path | None = None

    @property
    def data_dir(self) -> Path:
        assert self.folder is not None
        return self.folder / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        self.bin_dir = install()
        self.folder = Path(tempfile.mkdtemp(prefix="bunqueue-pg-"))
        try:
            if os.geteuid() == 0:
                entry = pwd.getpwnam(USER)
                os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            self._run("initdb", "-D", str(self.data_dir), "-U", USER, "-A", "trust", "-E", "UTF8", "--no-sync")
            self.resume()
        except BaseException:
            self._remove_folder()
            raise
        return self

    def halt(self) -> None:
        """Stop the server and keep its data: every connection drops, as in an outage. A fast stop, not an
        immediate one: with synchronous_commit off (above) a crash could lose commits already acknowledged,
        which is this throwaway configuration's doing, not the broker's."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "stop")

    def crash(self) -> None:
        """Stop the server as a crash does (``-m immediate``: no checkpoint, recovery at the next start) and
        keep its data; ``resume`` starts it again. Only a ``durable_commits`` server keeps every commit it
        acknowledged."""
        self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")

    def resume(self) -> None:
        """Start the server on its folder and port (again, after ``halt``)."""
        assert self.folder is not None
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
            f" -c synchronous_commit={'on' if self.durable_commits else 'off'} -c full_page_writes=off"
            " -c max_connections=200"
        )
        self._run(
            "pg_ctl", "-D", str(self.data_dir), "-o", options, "-l", str(self.folder / "server.log"),
            "-w", "-t", "60", "start",
        )

    def stop(self) -> None:
        if self.folder is None:
            return
        if (self.data_dir / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data_dir), "-m", "immediate", "-w", "stop", check=False)
        self._remove_folder()

    def log_tail(self, chars: int = 4000) -> str:
        path = self.folder / "server.log" if self.folder else None
        return path.read_text(errors="replace")[-chars:] if path and path.exists() else ""

    def _remove_folder(self) -> None:
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

    def _run(self, program: str, *args: str, check: bool = True) -> None:
        assert self.bin_dir is not None
        cmd = [str(self.bin_dir / program), *args]
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", USER, "--", *cmd]
        proc = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        if check and proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip()[-2000:]
            raise PostgresUnavailable(f"{program} failed ({proc.returncode}): {detail}\n{self.log_tail()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install", action="store_true", help="install the postgresql package when missing")
    args = parser.parse_args()
    if args.install:
        print(f"PostgreSQL binaries: {install()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
