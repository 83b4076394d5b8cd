"""The test server: its binaries found where Debian puts them when the PATH has none, and never run as root."""
from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from bunqueue._testbase import postgres as testpg


def test_debians_newest_version_is_found_off_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for version in ("9", "15", "13"):
        folder = tmp_path / version / "bin"
        folder.mkdir(parents=True)
        (folder / "pg_ctl").touch()
    (tmp_path / "17" / "bin").mkdir(parents=True)  # a version without binaries is passed over
    monkeypatch.setattr(testpg.shutil, "which", lambda name: None)
    monkeypatch.setattr(testpg, "DEBIAN_BIN_GLOB", str(tmp_path / "*" / "bin"))
    assert testpg.find_bin_dir() == tmp_path / "15" / "bin"


def test_nothing_found_means_an_install_is_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testpg.shutil, "which", lambda name: None)
    monkeypatch.setattr(testpg, "DEBIAN_BIN_GLOB", str(tmp_path / "*" / "bin"))
    assert testpg.find_bin_dir() is None


def test_the_server_runs_as_the_postgres_user_under_root(postgres: testpg.PostgresServer) -> None:
    pid = (postgres.data_dir / "postmaster.pid").read_text().splitlines()[0]
    status = Path(f"/proc/{pid}/status").read_text()
    uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
    expected = testpg.USER if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    assert pwd.getpwuid(uid).pw_name == expected
