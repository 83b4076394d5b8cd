"""The config file as the server reads it: found in the working directory or given with --config, its
settings taking effect over the environment and under the flags, scripts and unknown keys refused."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess, free_port
from bunqueue.backup.config import NEEDS_SQLITE
from bunqueue.config import POSTGRES_URL_REQUIRED

BUNQUEUE = Path(sys.executable).parent / "bunqueue"


def start_refused(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """A start that must stop before listening: it is given ports nobody uses and a short deadline."""
    ports = ["--tcp-port", str(free_port()), "--http-port", str(free_port())]
    return subprocess.run([sys.executable, "-m", "bunqueue", "start", *args, *ports], cwd=cwd, capture_output=True,
                          text=True, timeout=30, check=False, env={**os.environ, **(env or {})})


def refused_without_token(server: ServerProcess) -> bool:
    client = RawClient(server.addr)
    try:
        reply = client.call({"cmd": "Ping", "reqId": "p"})
    finally:
        client.close()
    return bool(reply == {"ok": False, "error": "Not authenticated", "reqId": "p"})


def accepts_token(server: ServerProcess, token: str) -> bool:
    client = RawClient(server.addr)
    try:
        return bool(client.call({"cmd": "Auth", "token": token}) == {"ok": True})
    finally:
        client.close()


def test_tokens_from_a_toml_file_turn_auth_on(tmp_path: Path) -> None:
    config = tmp_path / "settings.toml"
    config.write_text('[auth]\ntokens = ["file-one", "file-two"]\n')
    server = ServerProcess(args=["--config", str(config)]).start()
    try:
        assert refused_without_token(server)
        assert accepts_token(server, "file-two")
        assert not accepts_token(server, "other")
    finally:
        server.stop()


def test_a_data_path_from_the_file_persists_across_a_restart(tmp_path: Path) -> None:
    (tmp_path / "bunqueue.config.toml").write_text(f'[storage]\ndataPath = "{tmp_path / "queue.db"}"\n')
    server = ServerProcess(cwd=str(tmp_path)).start()
    try:
        client = RawClient(server.addr)
        pushed = client.ok({"cmd": "PUSH", "queue": "cfg-persist", "name": "j", "data": {"n": 1}})
        client.close()
    finally:
        server.stop()
    assert (tmp_path / "queue.db").is_file()
    again = ServerProcess(cwd=str(tmp_path)).start()
    try:
        client = RawClient(again.addr)
        job = client.ok({"cmd": "GetJob", "id": pushed["id"]})["job"]
        assert (job["id"], job["queue"], job["data"]) == (pushed["id"], "cfg-persist", {"n": 1})
        client.close()
    finally:
        again.stop()


def test_the_flag_beats_the_file_which_beats_the_environment(tmp_path: Path) -> None:
    server = ServerProcess(port_flags=False, cwd=str(tmp_path))
    env_port = free_port()
    (tmp_path / "bunqueue.config.json").write_text(json.dumps({
        "server": {"host": "127.0.0.1", "tcpPort": server.port, "httpPort": server.http_port},
        "auth": {"tokens": ["from-file"]},
    }))
    server.env.update({"TCP_PORT": str(env_port), "AUTH_TOKENS": "from-env"})
    server.start()
    try:
        assert accepts_token(server, "from-file") and not accepts_token(server, "from-env")
        with pytest.raises(OSError):
            RawClient(("127.0.0.1", env_port), timeout=1.0).call({"cmd": "Ping"})
    finally:
        server.stop()
    flagged = ServerProcess(cwd=str(tmp_path), args=["--auth-tokens", "from-flag"],
                            env={"AUTH_TOKENS": "from-env"}).start()
    try:
        # The flag's ports and token win over the file's: nothing listens on the file's port.
        with pytest.raises(OSError):
            RawClient(server.addr, timeout=1.0).call({"cmd": "Ping"})
        assert accepts_token(flagged, "from-flag") and not accepts_token(flagged, "from-file")
    finally:
        flagged.stop()


@pytest.mark.parametrize("name", ["bunqueue.config.ts", "bunqueue.config.js", "bunqueue.config.mjs"])
def test_a_script_config_in_the_working_directory_stops_the_start(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("export default defineConfig({ auth: { tokens: ['t'] } });\n")
    (tmp_path / "bunqueue.config.toml").write_text("")  # a data twin does not hide the script
    proc = start_refused(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"bunqueue: error: {tmp_path / name} is a JavaScript/TypeScript config file, which this server cannot "
        f"run: convert it with `bunqueue config convert {tmp_path / name} -o {tmp_path / 'bunqueue.config.toml'}`,"
        f" check the result, then remove {name}"
    )


SAMPLE = """\
import { defineConfig } from 'bunqueue';

// Production: secrets come from the environment.
export default defineConfig({
  server: {
    tcpPort: %(tcp)d,
    httpPort: %(http)d,
    host: '127.0.0.1',
  },
  auth: {
    tokens: [process.env.API_TOKEN!, "static-token", Bun.env['SPARE_TOKEN'] ?? 'spare'],
    requireAuthForMetrics: true,
  },
  storage: {
    dataPath: process.env.QUEUE_DB ?? '%(db)s',
    maxCompletedJobs: 10_000, /* the hot window */
  },
  cors: { origins: ['https://a.example', "https://b.example"], },
  timeouts: { shutdown: Number(process.env.SHUTDOWN_MS ?? 15000), worker: 45_000 },
  webhooks: { maxRetries: 5, retryDelay: 2000 },
  logging: { level: 'debug', format: 'json' as const },
});
"""


def test_convert_writes_toml_that_starts_the_same_server(tmp_path: Path) -> None:
    server = ServerProcess(port_flags=False, cwd=str(tmp_path), env={"API_TOKEN": "env-token"})
    source = tmp_path / "bunqueue.config.ts"
    source.write_text(SAMPLE % {"tcp": server.port, "http": server.http_port, "db": tmp_path / "q.db"})
    out = tmp_path / "bunqueue.config.toml"
    converted = subprocess.run([str(BUNQUEUE), "config", "convert", str(source), "-o", str(out)],
                               capture_output=True, text=True, timeout=30, check=False)
    assert converted.returncode == 0 and converted.stderr == "", converted.stderr
    assert tomllib.loads(out.read_text()) == {
        "server": {"tcpPort": server.port, "httpPort": server.http_port, "host": "127.0.0.1"},
        "auth": {"tokens": ["${API_TOKEN}", "static-token", "${SPARE_TOKEN:-spare}"], "requireAuthForMetrics": True},
        "storage": {"dataPath": f"${{QUEUE_DB:-{tmp_path / 'q.db'}}}", "maxCompletedJobs": 10000},
        "cors": {"origins": ["https://a.example", "https://b.example"]},
        "timeouts": {"shutdown": "${SHUTDOWN_MS:-15000}", "worker": 45000},
        "webhooks": {"maxRetries": 5, "retryDelay": 2000},
        "logging": {"level": "debug", "format": "json"},
    }
    source.unlink()  # as the refusal says: convert, then remove the script
    server.start()
    try:
        assert refused_without_token(server)
        assert all(accepts_token(server, t) for t in ("env-token", "static-token", "spare"))
    finally:
        server.stop()
    assert (tmp_path / "q.db").is_file()


@pytest.mark.parametrize(("value", "message"), [
    ("basePort + 1", "line 2: 'basePort' is not plain data (literals and process.env only)"),
    ("6789 + 1", "line 2: expected ',', found '+'"),
    ("process.env.A ?? process.env.B", "line 2: '??' converts only as process.env.X ?? <literal>"),
])
def test_convert_refuses_code_it_cannot_read_as_data(tmp_path: Path, value: str, message: str) -> None:
    source = tmp_path / "bunqueue.config.ts"
    source.write_text(f"export default defineConfig({{\n  server: {{ tcpPort: {value} }},\n}});\n")
    proc = subprocess.run([str(BUNQUEUE), "config", "convert", str(source)], capture_output=True, text=True,
                          timeout=30, check=False)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr.strip() == f"bunqueue: error: {source}: {message}"


@pytest.mark.parametrize(("text", "message"), [
    ('[server]\ntcpPrt = 1\n', "unknown key 'server.tcpPrt' in {path}"),
    ('[servers]\ntcpPort = 1\n', "unknown section 'servers' in {path}"),
    ('[server]\ntcpSocketPath = "/tmp/bq.sock"\n',
     "server.tcpSocketPath in {path} is a setting of the Bun original that this server does not implement yet"),
    ('[server]\ntcpPort = "6789"\n', "server.tcpPort in {path} must be a whole number, got '6789'"),
    ('[logging]\nlevel = "loud"\n', "logging.level in {path} must be one of debug, info, warn, error, got 'loud'"),
])
def test_unknown_keys_and_wrong_values_fail_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    config = tmp_path / "bunqueue.config.toml"
    config.write_text(text)
    proc = start_refused(tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"bunqueue: error: {message.format(path=config)}"


def test_a_json_config_in_the_working_directory_works(tmp_path: Path) -> None:
    (tmp_path / "bunqueue.config.json").write_text(json.dumps({"auth": {"tokens": ["${JSON_TOKEN}"]}}))
    server = ServerProcess(cwd=str(tmp_path), env={"JSON_TOKEN": "from-json"}).start()
    try:
        assert refused_without_token(server) and accepts_token(server, "from-json")
    finally:
        server.stop()


def test_the_backup_section_reaches_the_backup_settings(tmp_path: Path) -> None:
    # Backups on with no data file: the start refuses them in the original's words, so the key was read.
    (tmp_path / "bunqueue.config.toml").write_text('[backup]\nenabled = true\nbucket = "b"\n')
    proc = start_refused(tmp_path)
    assert proc.returncode == 1 and NEEDS_SQLITE in proc.stderr


@pytest.mark.parametrize(("env", "said"), [
    # A URL alone selects postgres: nothing listens there, so the start stops on the connection.
    ({"BUNQUEUE_POSTGRES_URL": "postgres://u@127.0.0.1:1/q"}, "cannot connect to PostgreSQL at 127.0.0.1:1/q"),
    ({"BUNQUEUE_STORAGE_DRIVER": "postgres"}, POSTGRES_URL_REQUIRED),
])
def test_postgres_selected_from_the_environment_is_not_ignored(tmp_path: Path, env: dict[str, str], said: str) -> None:
    proc = start_refused(tmp_path, env=env)
    assert proc.returncode == 1 and said in proc.stderr


def test_a_data_path_flag_picks_sqlite_over_a_postgres_url_from_the_environment(tmp_path: Path) -> None:
    server = ServerProcess(env={"BUNQUEUE_POSTGRES_URL": "postgres://u@localhost/q"},
                           args=["--data-path", str(tmp_path / "q.db")]).start()
    try:
        client = RawClient(server.addr)
        assert client.call({"cmd": "Ping"})["ok"] is True
        client.close()
    finally:
        server.stop()
    assert (tmp_path / "q.db").is_file()


def client_ping(env: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BUNQUEUE), "ping", "--json", *args], capture_output=True, text=True, timeout=30,
                          check=False, env={"PATH": "/usr/bin:/bin", **env})


def test_the_client_reads_host_and_tcp_port_first_as_the_original(server: ServerProcess) -> None:
    unused = str(free_port())
    env = {"HOST": "127.0.0.1", "BUNQUEUE_HOST": "192.0.2.1", "BQ_HOST": "192.0.2.2",
           "TCP_PORT": str(server.port), "BUNQUEUE_TCP_PORT": unused, "BQ_TCP_PORT": unused}
    reached = client_ping(env)
    assert reached.returncode == 0, reached.stderr
    assert json.loads(reached.stdout)["ok"] is True
    # BUNQUEUE_* next, then BQ_*; a flag beats them all.
    fallback = client_ping({"BUNQUEUE_HOST": "127.0.0.1", "BQ_HOST": "192.0.2.2",
                            "BUNQUEUE_TCP_PORT": str(server.port), "BQ_TCP_PORT": unused})
    assert fallback.returncode == 0, fallback.stderr
    flagged = client_ping({"HOST": "192.0.2.1", "TCP_PORT": unused}, "-H", "127.0.0.1", "-p", str(server.port))
    assert flagged.returncode == 0, flagged.stderr
    missed = client_ping({"HOST": "127.0.0.1", "TCP_PORT": unused, "BUNQUEUE_TCP_PORT": str(server.port)})
    assert missed.returncode == 1 and f"127.0.0.1:{unused}" in missed.stderr
