"""The backup settings, read from ``Settings`` (OPTIONS holds their variables and defaults), and their checks
in the original's words."""
from __future__ import annotations

from dataclasses import dataclass

from bunqueue.config import Settings

# The shortest S3_BACKUP_INTERVAL the scheduler accepts (ms).
MIN_INTERVAL_MS = 60_000
NEEDS_SQLITE = (
    "S3 backup requires persistent SQLite storage. Set BUNQUEUE_DATA_PATH "
    "or storage.dataPath before enabling S3_BACKUP_ENABLED."
)


@dataclass(frozen=True)
class BackupConfig:
    enabled: bool
    access_key_id: str
    secret_access_key: str
    session_token: str | None
    bucket: str
    endpoint: str | None
    virtual_hosted_style: bool | None
    region: str
    interval_ms: int
    retention: int
    prefix: str
    database_path: str | None

    @classmethod
    def from_settings(cls, settings: Settings) -> BackupConfig:
        return cls(
            enabled=settings.s3_backup_enabled,
            access_key_id=settings.s3_access_key_id,
            secret_access_key=settings.s3_secret_access_key,
            session_token=settings.s3_session_token,
            bucket=settings.s3_bucket,
            endpoint=settings.s3_endpoint,
            virtual_hosted_style=settings.s3_virtual_hosted_style,
            region=settings.s3_region,
            interval_ms=settings.s3_backup_interval,
            retention=settings.s3_backup_retention,
            prefix=settings.s3_backup_prefix,
            database_path=settings.data_path,
        )

    def errors(self) -> list[str]:
        """What keeps backups from running, as the original lists it."""
        found = []
        if not self.access_key_id:
            found.append("S3_ACCESS_KEY_ID is required")
        if not self.secret_access_key:
            found.append("S3_SECRET_ACCESS_KEY is required")
        if not self.bucket:
            found.append("S3_BUCKET is required")
        if not self.database_path:
            found.append("Database path is required")
        if self.retention < 1:
            found.append("Retention must be at least 1")
        if self.interval_ms < MIN_INTERVAL_MS:
            found.append("Backup interval must be at least 60 seconds")
        return found


def startup_error(settings: Settings) -> str | None:
    """Why a server with these settings must not start: backups on without a SQLite file."""
    if settings.s3_backup_enabled and settings.storage != "sqlite":
        return NEEDS_SQLITE
    return None
