"""Server settings: one frozen object; each field names its flag, its env vars and its default.

Precedence is the reference's: command-line flag, then config file (:mod:`bunqueue.configfile`), then
environment, then default.
"""
from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit


@dataclasses.dataclass(frozen=True)
class Option:
    field: str
    env: tuple[str, ...]
    default: Any
    kind: type
    help: str
    flag: str | None = None


OPTIONS: tuple[Option, ...] = (
    Option("host", ("HOST",), "0.0.0.0", str, "bind address", "--host"),
    Option("tcp_port", ("TCP_PORT",), 6789, int, "TCP (MessagePack) port", "--tcp-port"),
    Option("http_port", ("HTTP_PORT",), 6790, int, "HTTP port (health, Prometheus, REST, SSE, WebSocket)",
           "--http-port"),
    Option(
        "data_path",
        ("BUNQUEUE_DATA_PATH", "BQ_DATA_PATH", "DATA_PATH", "SQLITE_PATH"),
        None,
        str,
        "SQLite database path (memory-only when absent)",
        "--data-path",
    ),
    Option(
        "storage_driver",
        ("BUNQUEUE_STORAGE_DRIVER",),
        None,
        str,
        "memory | sqlite | postgres (unset: postgres with a URL, sqlite with a data path, else memory)",
    ),
    Option(
        "sqlite_synchronous",
        ("BUNQUEUE_SQLITE_SYNCHRONOUS",),
        "NORMAL",
        str,
        "SQLite sync level: NORMAL (survives a process crash) or FULL (also a power loss)",
    ),
    Option(
        "postgres_url",
        ("BUNQUEUE_POSTGRES_URL",),
        None,
        str,
        "PostgreSQL URL (postgres://user:password@host:port/database); alone it selects the postgres driver",
    ),
    Option(
        "postgres_namespace",
        ("BUNQUEUE_POSTGRES_NAMESPACE",),
        "default",
        str,
        "PostgreSQL namespace: brokers sharing one share every queue",
    ),
    Option(
        "broker_id", ("BUNQUEUE_BROKER_ID",), None, str, "this broker's id in its namespace (unset: host:pid:random)"
    ),
    Option("postgres_pool_size", ("BUNQUEUE_POSTGRES_POOL_SIZE",), 4, int, "PostgreSQL connections per broker"),
    Option(
        "postgres_lease_duration_ms",
        ("BUNQUEUE_POSTGRES_LEASE_DURATION_MS",),
        30000,
        int,
        "broker session lease (ms): a broker unheard of this long loses its session",
    ),
    Option(
        "postgres_poll_interval_ms",
        ("BUNQUEUE_POSTGRES_POLL_INTERVAL_MS",),
        250,
        int,
        "PostgreSQL poll for due work, the safety net under notifications (ms)",
    ),
    Option(
        "postgres_statement_timeout_ms",
        ("BUNQUEUE_POSTGRES_STATEMENT_TIMEOUT_MS",),
        30000,
        int,
        "PostgreSQL statement_timeout (ms)",
    ),
    Option(
        "postgres_lock_timeout_ms", ("BUNQUEUE_POSTGRES_LOCK_TIMEOUT_MS",), 5000, int, "PostgreSQL lock_timeout (ms)"
    ),
    Option(
        "postgres_idle_transaction_timeout_ms",
        ("BUNQUEUE_POSTGRES_IDLE_TRANSACTION_TIMEOUT_MS",),
        30000,
        int,
        "PostgreSQL idle_in_transaction_session_timeout (ms)",
    ),
    Option("auth_tokens", ("AUTH_TOKENS",), "", str, "comma-separated auth tokens", "--auth-tokens"),
    Option("tls_cert", ("TLS_CERT_FILE",), None, str, "PEM certificate: TLS on the TCP and HTTP ports", "--tls-cert"),
    Option("tls_key", ("TLS_KEY_FILE",), None, str, "PEM private key for --tls-cert", "--tls-key"),
    Option("cors_allow_origin", ("CORS_ALLOW_ORIGIN",), "", str,
           "HTTP Access-Control-Allow-Origin: comma-separated origins, or *"),
    Option("metrics_auth", ("METRICS_AUTH",), "false", str, "true: /prometheus needs a token too"),
    Option(
        "max_completed_jobs",
        ("BUNQUEUE_MAX_COMPLETED_JOBS", "MAX_COMPLETED_JOBS"),
        50000,
        int,
        "completed jobs kept in memory",
        "--max-completed-jobs",
    ),
    Option("rate_limit_max_requests", ("RATE_LIMIT_MAX_REQUESTS",), 10000, int, "requests per window per connection"),
    Option("rate_limit_window_ms", ("RATE_LIMIT_WINDOW_MS",), 60000, int, "rate-limit window (ms)"),
    Option(
        "tcp_idle_timeout_ms", ("TCP_IDLE_TIMEOUT_MS",), 60000, int, "close a half-received frame after (ms; 0 = off)"
    ),
    Option(
        "tcp_max_write_queue_bytes",
        ("TCP_MAX_WRITE_QUEUE_BYTES",),
        64 * 1024 * 1024,
        int,
        "close a connection whose unsent replies exceed this (0 = unbounded)",
    ),
    Option("shutdown_timeout_ms", ("SHUTDOWN_TIMEOUT_MS",), 30000, int, "graceful shutdown drain (ms)"),
    Option(
        "worker_timeout_ms",
        ("WORKER_TIMEOUT_MS",),
        30000,
        int,
        "a registered worker unheard of this long is listed as stale (removed at 3x)",
    ),
    Option("metrics_max_queues", ("METRICS_MAX_QUEUES",), 100, int, "queues with labelled Prometheus series"),
    Option("webhook_max_retries", ("WEBHOOK_MAX_RETRIES",), 3, int, "delivery attempts per webhook event"),
    Option(
        "webhook_retry_delay_ms", ("WEBHOOK_RETRY_DELAY_MS",), 1000, int, "wait before attempt n+1: n times this (ms)"
    ),
    Option("webhook_timeout_ms", ("WEBHOOK_TIMEOUT_MS",), 10000, int, "timeout of one delivery attempt (ms)"),
    Option(
        "webhook_queue_size",
        ("WEBHOOK_QUEUE_SIZE",),
        10000,
        int,
        "events waiting per webhook; past it new events are dropped and counted",
    ),
    Option("webhook_concurrency", ("WEBHOOK_CONCURRENCY",), 4, int, "deliveries in flight per webhook"),
    Option(
        "webhook_allow_private",
        ("WEBHOOK_ALLOW_PRIVATE",),
        False,
        bool,
        "accept webhook URLs on loopback and private networks (metadata hosts stay refused)",
    ),
    Option(
        "completed_retention_ms",
        ("BUNQUEUE_COMPLETED_RETENTION_MS", "COMPLETED_RETENTION_MS"),
        None,
        int,
        "completed jobs are removed (memory and SQLite) this long after completing (ms; unset: kept)",
        "--completed-retention-ms",
    ),
    Option("s3_backup_enabled", ("S3_BACKUP_ENABLED",), False, bool, "scheduled S3 backups of the SQLite file"),
    Option("s3_access_key_id", ("S3_ACCESS_KEY_ID", "AWS_ACCESS_KEY_ID"), "", str, "S3 access key id"),
    Option("s3_secret_access_key", ("S3_SECRET_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY"), "", str, "S3 secret key"),
    Option("s3_session_token", ("S3_SESSION_TOKEN", "AWS_SESSION_TOKEN"), None, str, "S3 session token"),
    Option("s3_bucket", ("S3_BUCKET", "AWS_BUCKET"), "", str, "S3 bucket of the backups"),
    Option("s3_endpoint", ("S3_ENDPOINT", "AWS_ENDPOINT"), None, str, "S3-compatible endpoint URL (unset: AWS S3)"),
    Option(
        "s3_virtual_hosted_style",
        ("S3_VIRTUAL_HOSTED_STYLE",),
        None,
        bool,
        "true: bucket.endpoint URLs; false: endpoint/bucket paths (unset: the client's choice)",
    ),
    Option("s3_region", ("S3_REGION", "AWS_REGION"), "us-east-1", str, "S3 region"),
    Option("s3_backup_interval", ("S3_BACKUP_INTERVAL",), 6 * 60 * 60 * 1000, int, "time between backups (ms)"),
    Option("s3_backup_retention", ("S3_BACKUP_RETENTION",), 7, int, "backups kept (the newest)"),
    Option("s3_backup_prefix", ("S3_BACKUP_PREFIX",), "backups/", str, "key prefix of the backups"),
    Option(
        "queue_idle_threshold_ms",
        ("QUEUE_IDLE_THRESHOLD_MS",),
        30000,
        int,
        "queue:idle after a queue has had nothing waiting or active this long (ms; 0 = off)",
    ),
    Option(
        "queue_size_threshold", ("QUEUE_SIZE_THRESHOLD",), 0, int, "queue:threshold at this many waiting (0 = off)"
    ),
    Option("memory_warning_mb", ("MEMORY_WARNING_MB",), 0, int, "server:memory-warning at this heap size (0 = off)"),
    Option(
        "storage_warning_mb", ("STORAGE_WARNING_MB",), 0, int, "storage:size-warning at this data file size (0 = off)"
    ),
    Option(
        "worker_overload_threshold_ms",
        ("WORKER_OVERLOAD_THRESHOLD_MS",),
        30000,
        int,
        "worker:overloaded after a worker has been at its concurrency this long (ms; 0 = off)",
    ),
    Option("stats_interval_ms", ("STATS_INTERVAL_MS",), 300000, int, "time between queue statistics log lines (ms)"),
    Option("log_level", ("LOG_LEVEL",), "info", str, "debug | info | warn | error"),
    Option("log_format", ("LOG_FORMAT",), "text", str, "text | json"),
)


_DEFAULTS: dict[str, Any] = {opt.field: opt.default for opt in OPTIONS}


def _default(field: str) -> Any:
    """A field's default, read from its option: each default is written once, in ``OPTIONS``."""
    return _DEFAULTS[field]


@dataclasses.dataclass(frozen=True)
class Settings:
    host: str = _default("host")
    tcp_port: int = _default("tcp_port")
    http_port: int = _default("http_port")
    data_path: str | None = _default("data_path")
    storage_driver: str | None = _default("storage_driver")
    sqlite_synchronous: str = _default("sqlite_synchronous")
    postgres_url: str | None = _default("postgres_url")
    postgres_namespace: str = _default("postgres_namespace")
    broker_id: str | None = _default("broker_id")
    postgres_pool_size: int = _default("postgres_pool_size")
    postgres_lease_duration_ms: int = _default("postgres_lease_duration_ms")
    postgres_poll_interval_ms: int = _default("postgres_poll_interval_ms")
    postgres_statement_timeout_ms: int = _default("postgres_statement_timeout_ms")
    postgres_lock_timeout_ms: int = _default("postgres_lock_timeout_ms")
    postgres_idle_transaction_timeout_ms: int = _default("postgres_idle_transaction_timeout_ms")
    auth_tokens: str = _default("auth_tokens")
    tls_cert: str | None = _default("tls_cert")
    tls_key: str | None = _default("tls_key")
    cors_allow_origin: str = _default("cors_allow_origin")
    metrics_auth: str = _default("metrics_auth")
    max_completed_jobs: int = _default("max_completed_jobs")
    rate_limit_max_requests: int = _default("rate_limit_max_requests")
    rate_limit_window_ms: int = _default("rate_limit_window_ms")
    tcp_idle_timeout_ms: int = _default("tcp_idle_timeout_ms")
    tcp_max_write_queue_bytes: int = _default("tcp_max_write_queue_bytes")
    shutdown_timeout_ms: int = _default("shutdown_timeout_ms")
    worker_timeout_ms: int = _default("worker_timeout_ms")
    metrics_max_queues: int = _default("metrics_max_queues")
    webhook_max_retries: int = _default("webhook_max_retries")
    webhook_retry_delay_ms: int = _default("webhook_retry_delay_ms")
    webhook_timeout_ms: int = _default("webhook_timeout_ms")
    webhook_queue_size: int = _default("webhook_queue_size")
    webhook_concurrency: int = _default("webhook_concurrency")
    webhook_allow_private: bool = _default("webhook_allow_private")
    completed_retention_ms: int | None = _default("completed_retention_ms")
    s3_backup_enabled: bool = _default("s3_backup_enabled")
    s3_access_key_id: str = _default("s3_access_key_id")
    s3_secret_access_key: str = _default("s3_secret_access_key")
    s3_session_token: str | None = _default("s3_session_token")
    s3_bucket: str = _default("s3_bucket")
    s3_endpoint: str | None = _default("s3_endpoint")
    s3_virtual_hosted_style: bool | None = _default("s3_virtual_hosted_style")
    s3_region: str = _default("s3_region")
    s3_backup_interval: int = _default("s3_backup_interval")
    s3_backup_retention: int = _default("s3_backup_retention")
    s3_backup_prefix: str = _default("s3_backup_prefix")
    queue_idle_threshold_ms: int = _default("queue_idle_threshold_ms")
    queue_size_threshold: int = _default("queue_size_threshold")
    memory_warning_mb: int = _default("memory_warning_mb")
    storage_warning_mb: int = _default("storage_warning_mb")
    worker_overload_threshold_ms: int = _default("worker_overload_threshold_ms")
    stats_interval_ms: int = _default("stats_interval_ms")
    log_level: str = _default("log_level")
    log_format: str = _default("log_format")

    @property
    def storage(self) -> str:
        """The storage backend in use: "memory", "sqlite" or "postgres"."""
        implied = "postgres" if self.postgres_url else "sqlite" if self.data_path else "memory"
        driver = (self.storage_driver or implied).lower()
        if driver not in ("memory", "sqlite", "postgres"):
            raise ValueError(
                f"BUNQUEUE_STORAGE_DRIVER must be memory, sqlite or postgres, got {self.storage_driver!r}"
            )
        if driver == "sqlite" and not self.data_path:
            raise ValueError("BUNQUEUE_STORAGE_DRIVER=sqlite needs a data path (--data-path or BUNQUEUE_DATA_PATH)")
        if self.sqlite_synchronous.upper() not in ("NORMAL", "FULL"):
            raise ValueError(f"BUNQUEUE_SQLITE_SYNCHRONOUS must be NORMAL or FULL, got {self.sqlite_synchronous!r}")
        return driver

    @property
    def tls_files(self) -> tuple[str, str] | None:
        """(certificate, key) when TLS is on; one without the other is a configuration error."""
        if not self.tls_cert and not self.tls_key:
            return None
        if not self.tls_key:
            raise ValueError("TLS misconfigured: --tls-cert (TLS_CERT_FILE) is set but --tls-key (TLS_KEY_FILE) is not")
        if not self.tls_cert:
            raise ValueError("TLS misconfigured: --tls-key (TLS_KEY_FILE) is set but --tls-cert (TLS_CERT_FILE) is not")
        return self.tls_cert, self.tls_key

    @property
    def cors_origin(self) -> str:
        """The one Access-Control-Allow-Origin value: `*` if listed, else the origins joined."""
        origins = [o.strip() for o in self.cors_allow_origin.split(",") if o.strip()]
        return "*" if "*" in origins else ", ".join(origins)

    @property
    def metrics_need_token(self) -> bool:
        return self.metrics_auth.strip().lower() == "true"

    @property
    def tokens(self) -> frozenset[str]:
        return frozenset(t.strip() for t in self.auth_tokens.split(",") if t.strip())

    @classmethod
    def load(
        cls,
        flags: Mapping[str, Any] | None = None,
        env: Mapping[str, str] | None = None,
        file: Mapping[str, tuple[Any, str]] | None = None,
    ) -> Settings:
        """Flags win over the config file (values by field, each with where it was set), which wins over
        the environment, which wins over the defaults."""
        env = os.environ if env is None else env
        flags = flags or {}
        file = file or {}
        values: dict[str, Any] = {}
        for opt in OPTIONS:
            raw = flags.get(opt.field)
            source = opt.flag or opt.env[0]
            if raw is None and opt.field in file:
                raw, source = file[opt.field]
            if raw is None:
                for name in opt.env:
                    if env.get(name):
                        raw, source = env[name], name
                        break
            if raw is None:
                continue
            values[opt.field] = _convert(opt, raw, source)
        return cls(**values)


if {f.name for f in dataclasses.fields(Settings)} != set(_DEFAULTS):
    raise TypeError("Settings and OPTIONS name different fields")


# The original's start-up refusals, in its words.
POSTGRES_URL_REQUIRED = "PostgreSQL storage requires storage.url or BUNQUEUE_POSTGRES_URL."
POSTGRES_WITH_DATA_PATH = "PostgreSQL storage cannot be combined with SQLite dataPath configuration."
POSTGRES_URL_SCHEME = "PostgreSQL storage requires a postgres:// or postgresql:// URL"

_POSTGRES_COUNTS = (
    ("postgres_pool_size", "BUNQUEUE_POSTGRES_POOL_SIZE"),
    ("postgres_lease_duration_ms", "BUNQUEUE_POSTGRES_LEASE_DURATION_MS"),
    ("postgres_poll_interval_ms", "BUNQUEUE_POSTGRES_POLL_INTERVAL_MS"),
    ("postgres_statement_timeout_ms", "BUNQUEUE_POSTGRES_STATEMENT_TIMEOUT_MS"),
    ("postgres_lock_timeout_ms", "BUNQUEUE_POSTGRES_LOCK_TIMEOUT_MS"),
    ("postgres_idle_transaction_timeout_ms", "BUNQUEUE_POSTGRES_IDLE_TRANSACTION_TIMEOUT_MS"),
)


def startup_error(settings: Settings) -> str | None:
    """Why a server with these settings must not start (checked before any I/O), or None.

    ``settings.storage`` has already been accepted. A reachable server is checked later, by connecting.
    """
    if settings.storage != "postgres":
        return None
    if not settings.postgres_url:
        return POSTGRES_URL_REQUIRED
    if settings.data_path:
        return POSTGRES_WITH_DATA_PATH
    try:
        url = urlsplit(settings.postgres_url)
        _ = url.port  # a port that is not a number raises here
    except ValueError:
        return POSTGRES_URL_SCHEME
    if url.scheme not in ("postgres", "postgresql"):
        return POSTGRES_URL_SCHEME
    for field, env in _POSTGRES_COUNTS:
        if getattr(settings, field) < 1:
            return f"{env} must be at least 1, got {getattr(settings, field)}"
    return None


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def _convert(opt: Option, raw: Any, source: str) -> Any:
    if opt.kind is bool:
        text = str(raw).strip().lower()
        if text not in _TRUE and text not in _FALSE:
            raise ValueError(f"{source} must be true or false, got {raw!r}")
        return text in _TRUE
    if opt.kind is int:
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise ValueError(f"{source} must be an integer, got {raw!r}") from None
        if value < 0:
            raise ValueError(f"{source} must be at least 0, got {value}")
        return value
    return str(raw)
