"""``bunqueue backup now|create|list|restore <key> [-f]|status``: the original's backup commands. Like its,
they work on the data file and the bucket directly (settings from the environment), not through a server:
``now`` snapshots a live file safely; ``restore`` replaces the file, so the server must be stopped.

The text form is a message and then a table or a block; ``--json`` prints the original's result object,
``{success, message, data}``. Exit status 0 on success, else 1.
"""
from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from bunqueue.backup import s3
from bunqueue.backup.config import BackupConfig
from bunqueue.config import Settings
from bunqueue.remote.render import block, table

SUBCOMMANDS = ("now", "create", "list", "restore", "status")
NO_DATA_PATH = "BUNQUEUE_DATA_PATH not set. Backup requires persistent storage."
CONFIRM_RESTORE = (
    "Restore will OVERWRITE the current database. Use --force (-f) to confirm.\n"
    "WARNING: Stop the server before restoring!"
)

Outcome = dict[str, Any]


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:.2f} MB"


def _failure(message: str) -> Outcome:
    return {"success": False, "message": message}


def execute(args: Sequence[str], settings: Settings) -> Outcome:
    """The outcome of one backup command; raises ValueError for a command line that names none."""
    sub = args[0] if args else ""
    if sub not in SUBCOMMANDS:
        raise ValueError(f"Unknown backup subcommand: {sub or '(none)'}. Use: {', '.join(SUBCOMMANDS)}")
    if not settings.data_path:
        return _failure(NO_DATA_PATH)
    config = BackupConfig.from_settings(settings)
    problems = config.errors()
    if problems:
        return _failure("S3 configuration invalid:\n  - " + "\n  - ".join(problems))
    if sub == "status":
        return {"success": True, "message": "Backup configuration", "data": {
            "enabled": config.enabled, "bucket": config.bucket, "endpoint": config.endpoint or "AWS S3",
            "interval": f"{round(config.interval_ms / 1000 / 60)} minutes",
            "retention": f"{config.retention} backups",
        }}
    if sub == "restore":
        keys = [a for a in args[1:] if a not in ("-f", "--force")]
        if not keys:
            raise ValueError("Missing required argument: backup-key")
        if len(keys) == len(args) - 1:
            return _failure(CONFIRM_RESTORE)
    try:
        client = s3.client(config)
        if sub == "list":
            return _listed(s3.list_backups(config, client))
        if sub == "restore":
            result = s3.restore_backup(keys[0], config, client)
            return _done("Restore completed successfully", result)
        result = s3.perform_backup(config, client)
        s3.cleanup_old_backups(config, client)
        return _done("Backup created successfully", result)
    except Exception as exc:  # noqa: BLE001 - reported to the user in the original's words
        verb = {"list": "List", "restore": "Restore"}.get(sub, "Backup")
        return _failure(f"{verb} failed: {exc}")


def _done(message: str, result: s3.BackupResult) -> Outcome:
    return {"success": True, "message": message,
            "data": {"key": result.key, "size": _mb(result.size), "duration": f"{result.duration_ms}ms"}}


def _listed(backups: list[s3.StoredBackup]) -> Outcome:
    if not backups:
        return {"success": True, "message": "No backups found", "data": []}
    rows = [{"key": b.key, "size": _mb(b.size), "date": b.last_modified.isoformat(timespec="milliseconds")
             .replace("+00:00", "Z")} for b in backups]
    return {"success": True, "message": f"Found {len(rows)} backup(s)", "data": rows}


def text(outcome: Outcome) -> str:
    data = outcome.get("data")
    if isinstance(data, list) and data:
        cols = [(name, lambda row, name=name: row[name]) for name in ("key", "size", "date")]
        return f"{outcome['message']}\n{table(data, cols, '')}"
    if isinstance(data, dict):
        return f"{outcome['message']}\n{block(data.items())}"
    return str(outcome["message"])


def run(args: Sequence[str], as_json: bool) -> int:
    try:
        outcome = execute(args, Settings.load())
    except ValueError as exc:
        doc = {"success": False, "message": str(exc)}
        print(json.dumps(doc, indent=2) if as_json else f"Error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(outcome, indent=2) if as_json else text(outcome))
    return 0 if outcome["success"] else 1
