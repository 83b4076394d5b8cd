"""Backups in the bucket, in the original's layout: ``<prefix>bunqueue-<ISO time>-<uuid>.db`` (gzip) with
``<key>.meta.json`` beside it (timestamp, version, size, compressedSize, sha-256 checksum, compressed).

Every call blocks (boto3): the server runs them on a thread. The metadata is written first and the payload
last, so every payload that can be listed has its metadata; a restore accepts the original's backups and a
plain uncompressed ``.db`` without metadata, as the original does.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from bunqueue import __version__
from bunqueue.backup import files
from bunqueue.backup.config import BackupConfig

TIMEOUT_S = 30.0
# Attempts per request (the first and three retries), as the original retries transient failures.
MAX_ATTEMPTS = 4
SQLITE_HEADER = b"SQLite format 3"
_CHECKSUM = re.compile(r"[a-f0-9]{64}\Z", re.IGNORECASE)


class BackupError(Exception):
    """A backup, listing or restore that did not happen; the message says why."""


@dataclass(frozen=True)
class BackupResult:
    key: str
    size: int
    compressed_size: int | None
    duration_ms: int


@dataclass(frozen=True)
class StoredBackup:
    key: str
    size: int
    last_modified: datetime


def client(config: BackupConfig) -> Any:
    try:
        import boto3
        from botocore.config import Config
    except ImportError as exc:  # pragma: no cover - installed with the s3 extra
        raise BackupError("S3 backups need boto3: pip install 'bunqueue[s3]'") from exc
    style = "virtual" if config.virtual_hosted_style else "path"
    return boto3.client(
        "s3",
        endpoint_url=config.endpoint or None,
        region_name=config.region,
        aws_access_key_id=config.access_key_id,
        aws_secret_access_key=config.secret_access_key,
        aws_session_token=config.session_token or None,
        config=Config(
            s3={"addressing_style": style},
            connect_timeout=TIMEOUT_S,
            read_timeout=TIMEOUT_S,
            retries={"max_attempts": MAX_ATTEMPTS, "mode": "standard"},
        ),
    )


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def backup_key(prefix: str) -> str:
    stamp = re.sub(r"[:.]", "-", _iso_now())
    return f"{prefix}bunqueue-{stamp}-{uuid.uuid4()}.db"


def perform_backup(config: BackupConfig, s3: Any) -> BackupResult:
    """Snapshot the database, compress it and publish it."""
    started = time.monotonic()
    assert config.database_path is not None
    snapshot = files.snapshot(config.database_path)
    try:
        with open(snapshot, "rb") as f:
            data = f.read()
    finally:
        files.remove_artifacts(snapshot)
    compressed = gzip.compress(data)
    key = backup_key(config.prefix)
    metadata = {
        "timestamp": _iso_now(),
        "version": __version__,
        "size": len(data),
        "compressedSize": len(compressed),
        "checksum": hashlib.sha256(data).hexdigest(),
        "compressed": True,
    }
    s3.put_object(Bucket=config.bucket, Key=f"{key}.meta.json", Body=json.dumps(metadata, indent=2).encode(),
                  ContentType="application/json")
    try:
        s3.put_object(Bucket=config.bucket, Key=key, Body=compressed, ContentType="application/gzip")
    except Exception:
        _delete_quietly(config, s3, f"{key}.meta.json")
        raise
    return BackupResult(key, len(data), len(compressed), round((time.monotonic() - started) * 1000))


def list_backups(config: BackupConfig, s3: Any) -> list[StoredBackup]:
    """Every backup under the prefix, newest first."""
    found: list[StoredBackup] = []
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket=config.bucket, Prefix=config.prefix, PaginationConfig={"PageSize": 100}
    )
    for page in pages:
        for item in page.get("Contents", ()):
            if item["Key"].endswith(".db"):
                found.append(StoredBackup(item["Key"], int(item.get("Size", 0)), item["LastModified"]))
    # Keys carry their creation time to the millisecond: they order backups made within one second.
    found.sort(key=lambda b: (b.last_modified, b.key), reverse=True)
    return found


def cleanup_old_backups(config: BackupConfig, s3: Any) -> list[str]:
    """Delete every backup past the newest ``retention`` (payload, then metadata); the keys deleted."""
    doomed = list_backups(config, s3)[max(config.retention, 1):]
    for item in doomed:
        s3.delete_object(Bucket=config.bucket, Key=item.key)
        _delete_quietly(config, s3, f"{item.key}.meta.json")
    return [item.key for item in doomed]


def restore_backup(key: str, config: BackupConfig, s3: Any) -> BackupResult:
    """Download, check and install a backup in place of the database file (the server must be stopped)."""
    started = time.monotonic()
    assert config.database_path is not None
    downloaded = _get(config, s3, key)
    if downloaded is None:
        raise BackupError(f"Backup not found: {key}")
    raw_meta = _get(config, s3, f"{key}.meta.json")
    if raw_meta is not None:
        metadata = _checked_metadata(raw_meta, len(downloaded))
        data = gzip.decompress(downloaded)
        if len(data) != metadata["size"]:
            raise BackupError("Backup size mismatch - file may be corrupted")
        if hashlib.sha256(data).hexdigest() != metadata["checksum"].lower():
            raise BackupError("Backup checksum mismatch - file may be corrupted")
    elif downloaded[:2] == b"\x1f\x8b":
        raise BackupError("Compressed backup is invalid because metadata is missing")
    else:
        data = downloaded
    if not data.startswith(SQLITE_HEADER):
        raise BackupError("Restored data is not a valid SQLite database")
    candidate = files.sibling(config.database_path, "restore")
    try:
        with open(candidate, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        files.verify_integrity(candidate)
        files.install(candidate, config.database_path)
    finally:
        files.remove_artifacts(candidate)
    return BackupResult(key, len(data), len(downloaded) if raw_meta is not None else None,
                        round((time.monotonic() - started) * 1000))


def _get(config: BackupConfig, s3: Any, key: str) -> bytes | None:
    try:
        body: bytes = s3.get_object(Bucket=config.bucket, Key=key)["Body"].read()
    except s3.exceptions.NoSuchKey:
        return None
    return body


def _checked_metadata(raw: bytes, compressed_size: int) -> dict[str, Any]:
    try:
        meta = json.loads(raw)
    except ValueError:
        meta = None
    if not isinstance(meta, dict):
        raise BackupError("Backup metadata is invalid")
    if not (
        isinstance(meta.get("timestamp"), str)
        and isinstance(meta.get("version"), str)
        and _whole(meta.get("size"))
        and meta.get("compressedSize") == compressed_size
        and _whole(meta.get("compressedSize"))
        and isinstance(meta.get("checksum"), str)
        and _CHECKSUM.match(meta["checksum"])
        and meta.get("compressed") is True
    ):
        raise BackupError("Backup metadata is invalid or does not match the payload")
    return meta


def _whole(value: Any) -> bool:
    return type(value) is int and 0 <= value <= 2**53 - 1


def _delete_quietly(config: BackupConfig, s3: Any, key: str) -> None:
    try:
        s3.delete_object(Bucket=config.bucket, Key=key)
    except Exception:  # noqa: BLE001 - a leftover object is reported by nothing and harms nothing
        pass
