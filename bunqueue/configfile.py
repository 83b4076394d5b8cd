"""The config file: found as the Bun original finds its own, read as TOML or JSON, checked key by key.

The original discovers ``bunqueue.config.ts``, ``.js`` and ``.mjs`` in the working directory, or takes
``--config FILE``. Those files are programs this server cannot run, so finding one stops the start with
the way to convert it; their data twins ``bunqueue.config.toml`` and ``bunqueue.config.json`` are read.
Sections and keys are the original's ``defineConfig`` names. A string that is exactly ``${NAME}`` (or
``${NAME:-fallback}``) is the environment variable ``NAME``, as ``process.env.NAME`` is in the original;
unset and without a fallback, the key counts as absent, as an ``undefined`` does there.

Precedence is the original's: flag, then config file, then environment, then default.
"""
from __future__ import annotations

import dataclasses
import json
import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bunqueue.config import OPTIONS

SCRIPT_NAMES = ("bunqueue.config.ts", "bunqueue.config.js", "bunqueue.config.mjs")
DATA_NAMES = ("bunqueue.config.toml", "bunqueue.config.json")
SCRIPT_SUFFIXES = (".ts", ".js", ".mjs", ".mts", ".cjs")

NUMBER, STRING, BOOLEAN, STRINGS = "number", "string", "boolean", "string[]"

# A file value and where it came from ("server.tcpPort in bunqueue.config.toml"), keyed by Option field.
Layer = dict[str, tuple[Any, str]]

_ENV_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?\}", re.DOTALL)


class ConfigFileError(Exception):
    """The config file cannot be used; the text names the file and, when there is one, the key."""


@dataclasses.dataclass(frozen=True)
class FileKey:
    """One key of the original's ``BunqueueConfig``: the Option it sets (None: not implemented here yet)."""

    field: str | None
    kind: str
    choices: tuple[str, ...] = ()


# Every section and key of the original's BunqueueConfig type.
KEYS: dict[str, FileKey] = {
    "server.tcpPort": FileKey("tcp_port", NUMBER),
    "server.httpPort": FileKey("http_port", NUMBER),
    "server.host": FileKey("host", STRING),
    "server.tcpSocketPath": FileKey(None, STRING),
    "server.httpSocketPath": FileKey(None, STRING),
    "server.tlsCertFile": FileKey("tls_cert", STRING),
    "server.tlsKeyFile": FileKey("tls_key", STRING),
    "auth.tokens": FileKey("auth_tokens", STRINGS),
    "auth.requireAuthForMetrics": FileKey("metrics_auth", BOOLEAN),
    "storage.driver": FileKey("storage_driver", STRING, ("memory", "sqlite", "postgres")),
    "storage.dataPath": FileKey("data_path", STRING),
    "storage.url": FileKey("postgres_url", STRING),
    "storage.namespace": FileKey("postgres_namespace", STRING),
    "storage.brokerId": FileKey("broker_id", STRING),
    "storage.poolSize": FileKey("postgres_pool_size", NUMBER),
    "storage.leaseDurationMs": FileKey("postgres_lease_duration_ms", NUMBER),
    "storage.pollIntervalMs": FileKey("postgres_poll_interval_ms", NUMBER),
    "storage.statementTimeoutMs": FileKey("postgres_statement_timeout_ms", NUMBER),
    "storage.lockTimeoutMs": FileKey("postgres_lock_timeout_ms", NUMBER),
    "storage.idleTransactionTimeoutMs": FileKey("postgres_idle_transaction_timeout_ms", NUMBER),
    "storage.maxConcurrentOperations": FileKey(None, NUMBER),
    "storage.maxQueuedOperations": FileKey(None, NUMBER),
    "storage.maxSnapshotJobs": FileKey(None, NUMBER),
    "storage.maxSnapshotPayloadBytes": FileKey(None, NUMBER),
    "storage.maxCompletedJobs": FileKey("max_completed_jobs", NUMBER),
    "storage.completedRetentionMs": FileKey("completed_retention_ms", NUMBER),
    "telemetry.maxPrometheusQueues": FileKey("metrics_max_queues", NUMBER),
    "cors.origins": FileKey("cors_allow_origin", STRINGS),
    "cloud.url": FileKey(None, STRING),
    "cloud.apiKey": FileKey(None, STRING),
    "cloud.instanceId": FileKey(None, STRING),
    "backup.enabled": FileKey("s3_backup_enabled", BOOLEAN),
    "backup.bucket": FileKey("s3_bucket", STRING),
    "backup.accessKeyId": FileKey("s3_access_key_id", STRING),
    "backup.secretAccessKey": FileKey("s3_secret_access_key", STRING),
    "backup.sessionToken": FileKey("s3_session_token", STRING),
    "backup.region": FileKey("s3_region", STRING),
    "backup.endpoint": FileKey("s3_endpoint", STRING),
    "backup.virtualHostedStyle": FileKey("s3_virtual_hosted_style", BOOLEAN),
    "backup.interval": FileKey("s3_backup_interval", NUMBER),
    "backup.retention": FileKey("s3_backup_retention", NUMBER),
    "backup.prefix": FileKey("s3_backup_prefix", STRING),
    "timeouts.shutdown": FileKey("shutdown_timeout_ms", NUMBER),
    "timeouts.stats": FileKey("stats_interval_ms", NUMBER),
    "timeouts.worker": FileKey("worker_timeout_ms", NUMBER),
    "timeouts.lock": FileKey(None, NUMBER),
    "webhooks.maxRetries": FileKey("webhook_max_retries", NUMBER),
    "webhooks.retryDelay": FileKey("webhook_retry_delay_ms", NUMBER),
    "logging.level": FileKey("log_level", STRING, ("debug", "info", "warn", "error")),
    "logging.format": FileKey("log_format", STRING, ("text", "json")),
}

SECTIONS = frozenset(key.split(".", 1)[0] for key in KEYS)

_fields = {opt.field for opt in OPTIONS}
if any(k.field is not None and k.field not in _fields for k in KEYS.values()):
    raise TypeError("configfile.KEYS names a field that OPTIONS does not have")


def discover(explicit: str | None, cwd: str | None = None) -> Path | None:
    """The config file to read: ``explicit`` when given, else the one found in ``cwd`` (None: none)."""
    if explicit is not None:
        path = Path(explicit).resolve()
        if not path.is_file():
            raise ConfigFileError(f"Config file not found: {path}")
        return path
    here = Path.cwd() if cwd is None else Path(cwd)
    found = [here / name for name in (*SCRIPT_NAMES, *DATA_NAMES) if (here / name).is_file()]
    scripts = [p for p in found if p.name in SCRIPT_NAMES]
    if scripts:
        return scripts[0]
    if len(found) > 1:
        raise ConfigFileError(f"both {found[0]} and {found[1]} exist: keep one, or pass --config")
    return found[0] if found else None


def load(path: Path, env: Mapping[str, str] | None = None) -> Layer:
    """The settings ``path`` gives, by Option field; refuses scripts, unknown keys and mistyped values."""
    env = os.environ if env is None else env
    if path.suffix in SCRIPT_SUFFIXES:
        raise ConfigFileError(
            f"{path} is a JavaScript/TypeScript config file, which this server cannot run: convert it with "
            f"`bunqueue config convert {path} -o {path.parent / DATA_NAMES[0]}`, check the result, "
            f"then remove {path.name}"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigFileError(f"cannot read {path}: {exc.strerror}") from None
    return layer(parse_text(text, path), str(path), env)


def parse_text(text: str, path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
    except (ValueError, tomllib.TOMLDecodeError) as exc:
        raise ConfigFileError(f"{path} is not valid {'JSON' if path.suffix == '.json' else 'TOML'}: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigFileError(f"{path} must hold an object of sections")
    return doc


def layer(doc: Mapping[str, Any], label: str, env: Mapping[str, str]) -> Layer:
    """Check every key of ``doc`` against the original's and shape its value for its Option."""
    values: Layer = {}
    for dotted, field, raw in checked_keys(doc, label):
        source = f"{dotted} in {label}"
        from_env = isinstance(raw, str) and _ENV_REF.fullmatch(raw) is not None
        value = _shaped(KEYS[dotted], _resolved(raw, source, env), source, from_env)
        if value is not None:
            values[field] = (value, source)
    return values


def checked_keys(doc: Mapping[str, Any], label: str) -> list[tuple[str, str, Any]]:
    """(dotted key, Option field, raw value) for every key of ``doc``; an unknown or unimplemented one
    is an error naming it and ``label``."""
    found = []
    for section, body in doc.items():
        if section not in SECTIONS:
            raise ConfigFileError(f"unknown section {section!r} in {label}")
        if not isinstance(body, dict):
            raise ConfigFileError(f"{section} in {label} must be a section of keys")
        for name, raw in body.items():
            dotted = f"{section}.{name}"
            key = KEYS.get(dotted)
            if key is None:
                raise ConfigFileError(f"unknown key {dotted!r} in {label}")
            if key.field is None:
                raise ConfigFileError(
                    f"{dotted} in {label} is a setting of the Bun original that this server does not implement yet"
                )
            found.append((dotted, key.field, raw))
    return found


def implied_driver(file: Layer, flags: Mapping[str, Any]) -> Layer:
    """The original picks its store from the merged file and flags before looking at the environment:
    an explicit driver, else postgres for a URL, else sqlite for a data path."""
    if flags.get("storage_driver") is not None or "storage_driver" in file:
        return file
    if "postgres_url" in file:
        return {**file, "storage_driver": ("postgres", file["postgres_url"][1])}
    if flags.get("data_path") is not None:
        return {**file, "storage_driver": ("sqlite", "--data-path")}
    if "data_path" in file:
        return {**file, "storage_driver": ("sqlite", file["data_path"][1])}
    return file


def _resolved(raw: Any, source: str, env: Mapping[str, str]) -> Any:
    """``raw`` with its environment references replaced; None when an unset one leaves it absent."""
    if isinstance(raw, list):
        items = [_resolved(item, source, env) for item in raw]
        missing = [ref for ref, item in zip(raw, items) if item is None]
        if missing:
            raise ConfigFileError(f"{source}: {missing[0]!r} names an environment variable that is not set")
        return items
    if isinstance(raw, str):
        ref = _ENV_REF.fullmatch(raw)
        if ref is not None:
            name, fallback = ref.groups()
            return env.get(name) or fallback
    return raw


def _shaped(key: FileKey, value: Any, source: str, from_env: bool) -> Any:
    """The value in the form its Option reads from the environment (lists comma-joined); a number or a
    boolean may be text only when it comes from an environment variable."""
    if value is None:
        return None
    if key.kind == STRINGS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigFileError(f"{source} must be an array of strings, got {value!r}")
        return ",".join(value)
    if key.kind == BOOLEAN:
        if from_env and isinstance(value, str):
            return value
        if not isinstance(value, bool):
            raise ConfigFileError(f"{source} must be true or false, got {value!r}")
        return "true" if value else "false"
    if key.kind == NUMBER:
        if isinstance(value, bool) or not isinstance(value, str if from_env else int):
            raise ConfigFileError(f"{source} must be a whole number, got {value!r}")
        return value
    if not isinstance(value, str):
        raise ConfigFileError(f"{source} must be a string, got {value!r}")
    if key.choices and value not in key.choices:
        raise ConfigFileError(f"{source} must be one of {', '.join(key.choices)}, got {value!r}")
    return value
