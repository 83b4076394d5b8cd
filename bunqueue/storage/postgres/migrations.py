"""The PostgreSQL schema: tables shared by every namespace in a database, created and migrated by the brokers.

Every table leads with ``namespace``: brokers sharing a namespace share every queue, and every index starts
with it, so one namespace's rows are one index range. Times are epoch milliseconds (``bigint``), as on the
wire; values the broker only stores and returns (job records, results, DLQ entries, settings) are
MessagePack (``bytea``), as in the SQLite file. Job states are the broker's home codes
(``bunqueue.broker.states``).
"""
from __future__ import annotations

import asyncpg

from bunqueue.broker import states

SCHEMA_VERSION = 2

# One lock for every broker that may run DDL on this database: all namespaces share the tables, so two
# namespaces migrating at once must wait for each other too. Taken with pg_advisory_xact_lock, it is released
# by the migration's commit or rollback, never left behind by a broker that died.
SCHEMA_LOCK = "bunqueue:schema"

_STATES = (states.READY, states.DELAYED, states.ACTIVE, states.COMPLETED, states.FAILED, states.WAITING_CHILDREN)
_LIVE = ", ".join(str(code) for code in sorted(states.LIVE))

# Each entry brings the database from the version before it to its own number, in one transaction.
MIGRATIONS: dict[int, tuple[str, ...]] = {
    1: (
        # Admission order across brokers: a job's seq, which breaks priority ties (FIFO) as in memory.
        "CREATE SEQUENCE bunqueue_job_seq AS bigint",
        # Fencing tokens: each broker session gets a larger one than every session before it.
        "CREATE SEQUENCE bunqueue_session_seq AS bigint",
        """CREATE TABLE bunqueue_broker_sessions (
            namespace text NOT NULL,
            broker_id text NOT NULL,
            session bigint NOT NULL,
            started_at bigint NOT NULL,
            heartbeat_at bigint NOT NULL,
            expires_at bigint NOT NULL,
            PRIMARY KEY (namespace, broker_id)
        )""",
        # The columns are what SQL selects, orders, counts or changes; `record` (Job.to_record) holds the rest,
        # and a column wins over the record's copy of the same field.
        f"""CREATE TABLE bunqueue_jobs (
            namespace text NOT NULL,
            id text NOT NULL,
            queue text NOT NULL,
            state smallint NOT NULL,
            priority double precision NOT NULL DEFAULT 0,
            lifo boolean NOT NULL DEFAULT false,
            seq bigint NOT NULL DEFAULT nextval('bunqueue_job_seq'),
            -- LIFO jobs first, newest first; then FIFO jobs (0) by run_at and seq: the memory heap's order.
            lifo_rank bigint GENERATED ALWAYS AS (CASE WHEN lifo THEN -seq ELSE 0 END) STORED,
            run_at bigint NOT NULL,
            created_at bigint NOT NULL,
            started_at bigint,
            completed_at bigint,
            attempts integer NOT NULL DEFAULT 0,
            max_attempts integer NOT NULL DEFAULT 3,
            group_id text,
            unique_key text,
            custom_id text,
            parent_id text,
            -- Dependencies not yet completed (rows in bunqueue_job_dependencies); 0 when none are left.
            pending_deps integer NOT NULL DEFAULT 0,
            -- When the completion of its last dependency released it: the claim notes the state it entered
            -- then in the record's timeline, which the releasing statement cannot write.
            released_at bigint,
            -- The running attempt's lease: its token (the worker's proof), the broker session that granted
            -- it (the fencing token) and when it lapses (lockTtl after the last renewal).
            lease_token text,
            lease_broker text,
            lease_session bigint,
            lease_expires_at bigint,
            -- What a renewal without a duration extends the lease by: the claim's lockTtl or the last
            -- renewal's duration.
            lease_ttl double precision,
            worker_id text,
            last_heartbeat bigint,
            stall_count integer NOT NULL DEFAULT 0,
            remove_on_complete boolean NOT NULL DEFAULT false,
            -- The failure history of the attempts so far (MessagePack list; a DLQ entry's attempts).
            failures bytea,
            -- After an automatic DLQ retry: the entry lifetime the job returns to if it fails again.
            dlq_generation bytea,
            record bytea NOT NULL,
            PRIMARY KEY (namespace, id),
            CHECK (state IN ({", ".join(str(code) for code in _STATES)}))
        )""",
        # The claim: SELECT ... WHERE state = READY ORDER BY these columns FOR UPDATE SKIP LOCKED. Grouped
        # jobs are the group claim's, over the two indexes below.
        f"""CREATE INDEX bunqueue_jobs_claim ON bunqueue_jobs
            (namespace, queue, priority DESC, lifo_rank, run_at, seq)
            WHERE state = {states.READY} AND group_id IS NULL""",
        # A queue's jobs by state: the counts, GetJobs and the listings read this range, never the namespace.
        "CREATE INDEX bunqueue_jobs_queue_state ON bunqueue_jobs (namespace, queue, state)",
        # Delayed jobs coming due, across queues.
        f"""CREATE INDEX bunqueue_jobs_due ON bunqueue_jobs (namespace, run_at)
            WHERE state = {states.DELAYED}""",
        # Leases lapsing: every expired one comes back in one statement.
        f"""CREATE INDEX bunqueue_jobs_leases ON bunqueue_jobs (namespace, lease_expires_at)
            WHERE state = {states.ACTIVE}""",
        # Queue concurrency counts the queue's running jobs.
        f"""CREATE INDEX bunqueue_jobs_active ON bunqueue_jobs (namespace, queue)
            WHERE state = {states.ACTIVE}""",
        # Group concurrency counts the group's running jobs.
        f"""CREATE INDEX bunqueue_jobs_group_active ON bunqueue_jobs (namespace, queue, group_id)
            WHERE state = {states.ACTIVE} AND group_id IS NOT NULL""",
        # The group claim: a group's ready jobs in its own order (lower priority first, then admission), and
        # each group with ready jobs with its oldest one (a skip scan, one probe per group).
        f"""CREATE INDEX bunqueue_jobs_group_ready ON bunqueue_jobs (namespace, queue, group_id, priority, seq)
            WHERE state = {states.READY} AND group_id IS NOT NULL""",
        f"""CREATE INDEX bunqueue_jobs_group_heads ON bunqueue_jobs (namespace, queue, group_id, seq)
            WHERE state = {states.READY} AND group_id IS NOT NULL""",
        # Trimming to max_completed_jobs and listing finished jobs newest first.
        f"""CREATE INDEX bunqueue_jobs_finished ON bunqueue_jobs (namespace, queue, state, completed_at)
            WHERE state IN ({states.COMPLETED}, {states.FAILED})""",
        f"""CREATE UNIQUE INDEX bunqueue_jobs_unique_key ON bunqueue_jobs (namespace, queue, unique_key)
            WHERE unique_key IS NOT NULL AND state IN ({_LIVE})""",
        "CREATE INDEX bunqueue_jobs_children ON bunqueue_jobs (namespace, parent_id) WHERE parent_id IS NOT NULL",
        # Who still waits on a job: an edge goes when the job completes (or the edge is given up), so the
        # table holds pending edges only.
        """CREATE TABLE bunqueue_job_dependencies (
            namespace text NOT NULL,
            depends_on text NOT NULL,
            job_id text NOT NULL,
            PRIMARY KEY (namespace, depends_on, job_id)
        )""",
        # What a waiting job still waits for (flow edits, a job leaving).
        "CREATE INDEX bunqueue_job_dependencies_waiting ON bunqueue_job_dependencies (namespace, job_id)",
        # What a flow policy kept of a child's terminal failure, for its parent (GetFailedChildrenValues when
        # `ignored` is false, GetIgnoredChildrenFailures when true), by "<queue>:<childId>", in failure order.
        """CREATE TABLE bunqueue_flow_failures (
            namespace text NOT NULL,
            parent_id text NOT NULL,
            ignored boolean NOT NULL,
            child_key text NOT NULL,
            seq bigint GENERATED ALWAYS AS IDENTITY,
            error bytea NOT NULL,
            PRIMARY KEY (namespace, parent_id, ignored, child_key)
        )""",
        """CREATE TABLE bunqueue_results (
            namespace text NOT NULL,
            job_id text NOT NULL,
            result bytea NOT NULL,
            PRIMARY KEY (namespace, job_id)
        )""",
        """CREATE TABLE bunqueue_job_logs (
            namespace text NOT NULL,
            job_id text NOT NULL,
            seq bigint GENERATED ALWAYS AS IDENTITY,
            entry bytea NOT NULL,
            PRIMARY KEY (namespace, job_id, seq),
            -- A job's logs go with it, whichever command deletes it.
            FOREIGN KEY (namespace, job_id) REFERENCES bunqueue_jobs (namespace, id) ON DELETE CASCADE
        )""",
        """CREATE TABLE bunqueue_dlq (
            namespace text NOT NULL,
            queue text NOT NULL,
            job_id text NOT NULL,
            added_at bigint NOT NULL,
            -- Filing order (oldest first), as the memory DLQ lists a queue's entries.
            seq bigint GENERATED ALWAYS AS IDENTITY,
            -- The entry's next maintenance: its expiry or its next automatic retry (NULL: none).
            due_at bigint,
            entry bytea NOT NULL,
            PRIMARY KEY (namespace, queue, job_id)
        )""",
        "CREATE INDEX bunqueue_dlq_age ON bunqueue_dlq (namespace, queue, added_at)",
        # Listing in filing order, and trimming a queue's DLQ to its maxEntries.
        "CREATE INDEX bunqueue_dlq_order ON bunqueue_dlq (namespace, queue, seq)",
        "CREATE INDEX bunqueue_dlq_due ON bunqueue_dlq (namespace, due_at) WHERE due_at IS NOT NULL",
        # Deduplication and debounce keys that outlive their job (deduplication ttl).
        """CREATE TABLE bunqueue_dedup (
            namespace text NOT NULL,
            queue text NOT NULL,
            key text NOT NULL,
            job_id text NOT NULL,
            expires_at bigint,
            PRIMARY KEY (namespace, queue, key)
        )""",
        # A queue's controls: pause, global concurrency and rate limit, and the rest of its settings (DLQ,
        # stall config) as MessagePack. Limits are kept as given (fractional, 0 or negative too), as in memory.
        # The rate limit is the memory engine's token bucket, shared by every broker: rate_tokens as of
        # rate_refilled_at (database clock), refilled at rate_max per rate_duration ms (NULL: the default).
        """CREATE TABLE bunqueue_queues (
            namespace text NOT NULL,
            queue text NOT NULL,
            paused boolean NOT NULL DEFAULT false,
            concurrency double precision,
            rate_max double precision,
            rate_duration double precision,
            rate_expires_at double precision,
            rate_tokens double precision NOT NULL DEFAULT 0,
            rate_refilled_at double precision NOT NULL DEFAULT 0,
            completed_total bigint NOT NULL DEFAULT 0,
            failed_total bigint NOT NULL DEFAULT 0,
            settings bytea,
            -- SetDlqConfig's and SetStallConfig's settings (MessagePack), NULL while they are the defaults.
            dlq_config bytea,
            stall_config bytea,
            PRIMARY KEY (namespace, queue)
        )""",
        # A group's controls (PauseGroup, SetGroupConcurrency, SetGroupRateLimit), its runtime limits shared
        # by every broker (RateLimitGroup's deadline, the open rate window) and its turn in the rotation
        # (``served``: when a claim last took from it; see statements.GROUP_CLAIM).
        """CREATE TABLE bunqueue_groups (
            namespace text NOT NULL,
            queue text NOT NULL,
            group_id text NOT NULL,
            paused boolean NOT NULL DEFAULT false,
            concurrency bigint,
            rate_max bigint,
            rate_duration bigint,
            limited_until bigint,
            window_max bigint,
            window_duration bigint,
            window_start bigint,
            window_count bigint NOT NULL DEFAULT 0,
            served bigint,
            PRIMARY KEY (namespace, queue, group_id)
        )""",
        # A cron fires once across brokers: the broker that moves next_run_at from the value it read fires it.
        """CREATE TABLE bunqueue_crons (
            namespace text NOT NULL,
            name text NOT NULL,
            created_seq bigint GENERATED ALWAYS AS IDENTITY,
            next_run_at bigint,
            executions bigint NOT NULL DEFAULT 0,
            record bytea NOT NULL,
            PRIMARY KEY (namespace, name)
        )""",
        "CREATE INDEX bunqueue_crons_due ON bunqueue_crons (namespace, next_run_at)",
        # `enabled` is a column so that SetWebhookEnabled is one UPDATE; the record holds the rest.
        """CREATE TABLE bunqueue_webhooks (
            namespace text NOT NULL,
            id text NOT NULL,
            created_seq bigint GENERATED ALWAYS AS IDENTITY,
            enabled boolean NOT NULL DEFAULT true,
            record bytea NOT NULL,
            PRIMARY KEY (namespace, id)
        )""",
        # A worker belongs to the client connection that registered it (the broker and its session key)
        # and goes when that connection closes; every field a re-registration or a heartbeat changes is
        # a column.
        """CREATE TABLE bunqueue_workers (
            namespace text NOT NULL,
            worker_id text NOT NULL,
            created_seq bigint GENERATED ALWAYS AS IDENTITY,
            broker_id text NOT NULL,
            session_key bigint NOT NULL,
            name text,
            queues text[] NOT NULL,
            concurrency double precision NOT NULL,
            hostname text NOT NULL,
            pid double precision NOT NULL,
            registered_at double precision NOT NULL,
            last_seen bigint NOT NULL,
            active_jobs double precision NOT NULL DEFAULT 0,
            processed double precision NOT NULL DEFAULT 0,
            failed double precision NOT NULL DEFAULT 0,
            PRIMARY KEY (namespace, worker_id)
        )""",
        # The namespace's running totals of what heartbeats reported: they outlive the workers that told them.
        """CREATE TABLE bunqueue_worker_totals (
            namespace text PRIMARY KEY,
            processed double precision NOT NULL DEFAULT 0,
            failed double precision NOT NULL DEFAULT 0
        )""",
    ),
    # One index for a queue's jobs by state and for the claim, where version 1 had three (the claim's, the
    # queue's states and its running jobs): a job admitted ready enters two indexes instead of three, a claim
    # three instead of four. Its first three columns serve the listings and counts (by state, or running
    # only) as the range of bunqueue_jobs_queue_state did; the claim holds the fourth (ungrouped) constant and
    # reads the rest in its order, as it read bunqueue_jobs_claim: no sort, no grouped or other-state rows.
    2: (
        "DROP INDEX bunqueue_jobs_claim",
        "DROP INDEX bunqueue_jobs_queue_state",
        "DROP INDEX bunqueue_jobs_active",
        """CREATE INDEX bunqueue_jobs_queue_order ON bunqueue_jobs
            (namespace, queue, state, (group_id IS NULL), priority DESC, lifo_rank, run_at, seq)""",
    ),
}

_VERSION_TABLE = """CREATE TABLE bunqueue_schema_version (
    version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)"""


class SchemaTooNew(Exception):
    """The database was migrated by a newer bunqueue than this one."""


def schema_too_new(found: int) -> SchemaTooNew:
    return SchemaTooNew(
        f"PostgreSQL schema version {found} is newer than supported version {SCHEMA_VERSION};"
        " upgrade bunqueue or use another database"
    )


async def current_version(conn: asyncpg.Connection) -> int:
    """The database's schema version; 0 when bunqueue never ran there."""
    if await conn.fetchval("SELECT to_regclass('bunqueue_schema_version') IS NULL"):
        return 0
    return int(await conn.fetchval("SELECT coalesce(max(version), 0) FROM bunqueue_schema_version"))


async def migrate(conn: asyncpg.Connection) -> int:
    """Bring the database to SCHEMA_VERSION, one broker at a time; refuse one newer than this code.

    A broker that finds the schema current only reads the version under the lock: starting a broker never
    locks the job tables.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", SCHEMA_LOCK)
        version = await current_version(conn)
        if version > SCHEMA_VERSION:
            raise schema_too_new(version)
        if version == 0:
            await conn.execute(_VERSION_TABLE)
        for target in range(version + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[target]:
                await conn.execute(statement)
            await conn.execute("INSERT INTO bunqueue_schema_version (version) VALUES ($1)", target)
    return SCHEMA_VERSION
