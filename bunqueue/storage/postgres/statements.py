"""The hot path's statements: each serves a whole batch in one round trip (arrays in, one row per job out).

``$1`` is always the namespace. A statement that makes jobs claimable notifies ``CHANNEL`` once per queue
it touched, from inside the statement, so the notification leaves with the commit and never before it.
"""
from __future__ import annotations

from bunqueue.broker.components.queuelimits import DEFAULT_RATE_DURATION
from bunqueue.broker.states import ACTIVE, COMPLETED, DELAYED, FAILED, LIVE, READY, WAITING_CHILDREN
from bunqueue.storage.postgres.jobrows import PUSH_COLUMN_NAMES, PUSH_COLUMN_TYPES, stored_columns
from bunqueue.storage.postgres.sessions import NOW_MS

# One channel for every namespace (a channel name is an identifier, a namespace any text): the payload
# names the namespace and the queue, and each listener drops other namespaces' payloads.
CHANNEL = "bunqueue"

_LIVE = ", ".join(str(code) for code in sorted(LIVE))


def _notify_ready(source: str) -> str:
    """A CTE that notifies every queue of ``source`` that has a READY row; joined by the final SELECT."""
    return (
        f"woken AS (SELECT count(pg_notify('{CHANNEL}', json_build_array($1::text, queue)::text)) AS n"
        f" FROM (SELECT DISTINCT queue FROM {source} WHERE state = {READY}) touched)"
    )


def notify_freed(source: str) -> str:
    """CTE ``freeing`` (one row): of the queues ``source`` (rows with ``queue`` and ``group_id`` columns)
    took running jobs out of, those where that may let a held-back pull claim, as the memory engine wakes a
    waiter when a job leaves active: the queue has a concurrency limit, or the job's group has ready jobs.
    Each is notified, and ``freeing.queues`` names them (NULL: none). Any other queue costs an index probe
    and no notification."""
    return f"""freeing AS (
    SELECT array_agg(f.queue) AS queues,
           count(pg_notify('{CHANNEL}', json_build_array($1::text, f.queue)::text)) AS n
    FROM (SELECT DISTINCT s.queue FROM (SELECT DISTINCT queue, group_id FROM {source}) s
          WHERE EXISTS (SELECT 1 FROM bunqueue_queues q
                        WHERE q.namespace = $1 AND q.queue = s.queue AND q.concurrency IS NOT NULL)
             OR (s.group_id IS NOT NULL AND EXISTS (
                 SELECT 1 FROM bunqueue_jobs r
                 WHERE r.namespace = $1 AND r.queue = s.queue AND r.group_id = s.group_id AND r.state = {READY}))
    ) f
)"""


def release_dependants(completed: str) -> str:
    """CTEs ``freed``, ``released`` and ``resolved``: the edges to the job ids of ``completed`` (a CTE or
    subquery with an ``id`` column) go, and each waiting job whose last edge that was runs (ready, or delayed
    until its run time); ``released`` returns the jobs that lost an edge with their queue and state, for
    ``_notify_ready``; ``resolved`` (one row: ``ids`` and ``queues``, NULL for none) those that run now, for
    job:dependencies-resolved. ``clock`` must be in scope."""
    return f"""freed AS (
    DELETE FROM bunqueue_job_dependencies d USING {completed} c
    WHERE d.namespace = $1 AND d.depends_on = c.id
    RETURNING d.job_id
), released AS (
    UPDATE bunqueue_jobs j SET pending_deps = greatest(j.pending_deps - f.n, 0), released_at = clock.now,
        state = CASE WHEN j.pending_deps > f.n THEN {WAITING_CHILDREN}
                     WHEN j.run_at > clock.now THEN {DELAYED} ELSE {READY} END
    FROM (SELECT job_id, count(*)::int AS n FROM freed GROUP BY job_id) f, clock
    WHERE j.namespace = $1 AND j.id = f.job_id AND j.state = {WAITING_CHILDREN}
    RETURNING j.id, j.queue, j.state
), resolved AS (
    SELECT array_agg(id) AS ids, array_agg(queue) AS queues FROM released WHERE state <> {WAITING_CHILDREN}
)"""


_PUSH_ARGS = ", ".join(f"${i + 2}::{kind}" for i, kind in enumerate(PUSH_COLUMN_TYPES))
_PUSH_NAMES = ", ".join(PUSH_COLUMN_NAMES)

# A row that collides with an existing id or a live unique key is left out (ON CONFLICT DO NOTHING covers
# every unique index): the caller answers it with the id that holds it. ORDER BY pos keeps the batch's
# order in seq, the FIFO tie-break.
PUSH = f"""
WITH incoming AS (
    SELECT * FROM unnest({_PUSH_ARGS}) WITH ORDINALITY AS i({_PUSH_NAMES}, pos)
), inserted AS (
    INSERT INTO bunqueue_jobs (namespace, state, {_PUSH_NAMES})
    SELECT $1, CASE WHEN run_at > {NOW_MS} THEN {DELAYED} ELSE {READY} END, {_PUSH_NAMES}
    FROM incoming ORDER BY pos
    ON CONFLICT DO NOTHING
    RETURNING id, queue, state
), {_notify_ready("inserted")}
SELECT inserted.id FROM inserted, woken
"""

# The wake-ups of queues a COPY made jobs ready in, sent after its commit (``copypush``).
NOTIFY_QUEUES = (
    f"SELECT count(pg_notify('{CHANNEL}', json_build_array($1::text, queue)::text)) FROM unnest($2::text[]) queue"
)

# A custom id names one job while it is live; a finished job under that id gives way to the new push, as
# in memory (run before PUSH, in its transaction, only for batches that carry custom ids).
FORGET_FINISHED = f"""
WITH gone AS (
    DELETE FROM bunqueue_jobs WHERE namespace = $1 AND id = ANY($2::text[]) AND state NOT IN ({_LIVE})
    RETURNING id
)
DELETE FROM bunqueue_results r USING gone WHERE r.namespace = $1 AND r.job_id = gone.id
"""

# Who holds what a push collided with: live jobs by id, and live owners of (queue, unique key).
HOLDERS = f"""
SELECT id, queue, unique_key FROM bunqueue_jobs
WHERE namespace = $1 AND state IN ({_LIVE})
  AND (id = ANY($2::text[]) OR (queue, unique_key) IN (SELECT * FROM unnest($3::text[], $4::text[])))
"""

_CLAIM_ORDER = "priority DESC, lifo_rank, run_at, seq"

# The queue's lock, taken in the claim's transaction before a claim of a queue with limits ($7 of CLAIM
# true) and before every group claim (``groupclaim``): claims of a limited queue, and group claims, run one
# at a time across brokers, and each claim statement's snapshot, taken after the lock, sees every lease
# granted before it.
QUEUE_LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(json_build_array($1::text, $2::text)::text, 0))"


def queue_room(locked: str) -> str:
    """CTEs ``bucket``, ``controls`` and ``room``: the queue's controls ($2), read by a claim of up to
    cardinality($5) jobs from the queue's row (no row: no controls). A paused queue gives nothing. A queue
    with a concurrency or rate limit gives jobs only when the claim holds its lock (``locked``, an SQL
    boolean): then ``room.n`` is what the limits leave, concurrency (every running job of the queue,
    grouped or not) first and then the rate, as in memory. The rate limit is the memory engine's token
    bucket (``QueueLimits``): refilled to now, spent by ``spend_tokens`` (which also clears a limit whose ttl
    ran out). ``clock`` must be in scope.

    PostgreSQL raises where float arithmetic overflows or underflows and memory's gives inf or 0: a rate past
    1e290 per ms counts as infinite (the bucket refills at once), one below 1e-290 as 0, and a refill past
    the bucket is not summed."""
    return f"""
bucket AS (
    -- The rate per ms; a duration is positive (``limits``), the limit any finite number.
    SELECT q.*, CASE
        WHEN q.rate_max IS NULL THEN NULL
        WHEN abs(q.rate_max)::numeric > q.duration::numeric * 1e290 THEN sign(q.rate_max) * 'Infinity'::float8
        WHEN abs(q.rate_max)::numeric < q.duration::numeric * 1e-290 THEN 0
        ELSE q.rate_max / q.duration END AS per_ms
    FROM (SELECT *, coalesce(rate_duration, {DEFAULT_RATE_DURATION})::float8 AS duration FROM bunqueue_queues
          WHERE namespace = $1 AND queue = $2) q
),
controls AS (
    SELECT q.paused, q.concurrency, q.rate_max, q.per_ms, q.rate_expires_at,
           q.concurrency IS NOT NULL OR q.rate_max IS NOT NULL AS limited,
           q.rate_max IS NOT NULL AND q.rate_expires_at IS NOT NULL AND clock.now >= q.rate_expires_at
               AS rate_expired,
           CASE WHEN q.per_ms > 0 AND (clock.now - q.rate_refilled_at) * q.per_ms >= q.rate_max - q.rate_tokens
                THEN q.rate_max
                WHEN q.per_ms > 0 THEN q.rate_tokens + (clock.now - q.rate_refilled_at) * q.per_ms
                ELSE q.rate_tokens END AS tokens
    FROM bucket q, clock
),
room AS (
    SELECT coalesce(c.limited, false) AS limited, c.rate_expired, c.tokens, c.per_ms, c.rate_expires_at,
           CASE WHEN c.paused THEN 0
                WHEN NOT coalesce(c.limited, false) THEN cardinality($5::text[])
                WHEN NOT {locked} THEN 0
                ELSE least(
                    cardinality($5::text[]),
                    CASE WHEN c.concurrency IS NULL THEN NULL
                         ELSE greatest(ceil(c.concurrency - (
                             SELECT count(*) FROM bunqueue_jobs
                             WHERE namespace = $1 AND queue = $2 AND state = {ACTIVE})), 0) END,
                    CASE WHEN c.rate_max IS NULL OR c.rate_expired THEN NULL
                         WHEN c.tokens >= 1 THEN floor(c.tokens) ELSE 0 END
                ) END::bigint AS n
    FROM (VALUES (1)) one LEFT JOIN controls c ON true
)"""


# The columns of a claim's rows (``jobrows.claimed_job``): the slot, then the leased job.
CLAIMED_COLUMNS = "slot, id, lease_token, attempts, started_at, seq, record, priority, lifo, run_at, released_at"
# A claim's row that leases nothing: slot 0 and no job (what it says is the statement's own).
NO_JOB_ROW = "SELECT 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"

# A claim under the queue's lock that leaves the rate limit's bucket without a whole token: slot -1, and in the
# run_at column the milliseconds until the bucket holds one again (or the limit's ttl ends), when a held-back
# long-poll should look again, as the memory engine's rate timer wakes it. ``room``, ``claimed``, ``clock``.
TOKEN_DUE_ROW = """SELECT -1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       ceil(least((1 - (room.tokens - (SELECT count(*) FROM claimed))) / room.per_ms,
                  coalesce(room.rate_expires_at - clock.now, 'Infinity'::float8)))::bigint, NULL
FROM room, clock
WHERE $7 AND room.per_ms > 0 AND NOT room.rate_expired AND room.tokens - (SELECT count(*) FROM claimed) < 1"""


def lease_slots(picked: str, *extra: str) -> str:
    """CTEs ``slots`` and ``claimed``: the k-th job of ``picked`` (a CTE with ``id`` and ``slot`` columns,
    slots 1..n) is leased with slot k of the arrays $5 (owners) and $6 (lock ttls) under the session $3/$4;
    ``claimed`` returns ``CLAIMED_COLUMNS`` and the columns of ``picked`` named in ``extra``. ``clock`` must
    be in scope. A slot without an owner leases its job with no token, as in memory: its ACK needs none."""
    returning = "".join(f", {picked}.{column}" for column in extra)
    return f"""slots AS (SELECT * FROM unnest($5::text[], $6::bigint[]) WITH ORDINALITY AS s(owner, ttl, slot)),
claimed AS (
    UPDATE bunqueue_jobs j
    SET state = {ACTIVE}, attempts = j.attempts + 1, started_at = clock.now, last_heartbeat = clock.now,
        lease_token = CASE WHEN slots.owner IS NULL THEN NULL ELSE gen_random_uuid()::text END,
        lease_broker = $3, lease_session = $4,
        lease_expires_at = clock.now + slots.ttl, lease_ttl = slots.ttl, worker_id = slots.owner
    FROM {picked} JOIN slots USING (slot), clock
    WHERE j.namespace = $1 AND j.id = {picked}.id
    RETURNING {picked}.slot, j.id, j.lease_token, j.attempts, j.started_at, j.seq, j.record, j.priority, j.lifo,
        j.run_at, j.released_at{returning}
)"""


def spend_tokens(locked: str) -> str:
    """CTE ``spent``: a claim under the queue's lock (``locked``) spends a token of the queue's rate limit for
    each job of ``claimed``, or clears the limit when its ttl ran out. ``room`` and ``clock`` in scope."""
    return f"""
spent AS (
    UPDATE bunqueue_queues q
    SET rate_tokens = CASE WHEN room.rate_expired THEN 0 ELSE room.tokens - (SELECT count(*) FROM claimed) END,
        rate_refilled_at = clock.now,
        rate_max = CASE WHEN room.rate_expired THEN NULL ELSE q.rate_max END,
        rate_duration = CASE WHEN room.rate_expired THEN NULL ELSE q.rate_duration END,
        rate_expires_at = CASE WHEN room.rate_expired THEN NULL ELSE q.rate_expires_at END
    FROM room, clock
    WHERE {locked} AND q.namespace = $1 AND q.queue = $2 AND q.rate_max IS NOT NULL
)"""


# The claiming broker's session ($3 broker id, $4 fencing token) is live; ``clock`` in scope.
SESSION_HOLDS = """EXISTS (SELECT 1 FROM bunqueue_broker_sessions s, clock
                  WHERE s.namespace = $1 AND s.broker_id = $3 AND s.session = $4 AND s.expires_at > clock.now)"""

# Up to cardinality($5) ready jobs of one queue, best first, for several pulls at once: slot k of the
# arrays ($5 owners, $6 lock ttls) is the k-th best job, so the caller hands each pull its run of slots.
# Delayed jobs already due count as ready, as the memory engine's pull promotes them first (the promotion
# timer may not have run yet): they are read from the small ``bunqueue_jobs_due`` index.
# The session row is checked in the same statement ($3 broker id, $4 fencing token): a broker whose session
# lapsed claims nothing. SKIP LOCKED lets brokers claim one queue side by side; a row another claim took
# meanwhile fails the re-checked state and is skipped too. The queue's controls (``queue_room``,
# ``spend_tokens``) bound the LIMIT; a row with slot 0 says the queue's limits came or went: ``limited``
# differing from $7 tells the caller to claim the other way next time (the unlocked claim of a limited queue
# took nothing).
# Grouped jobs are the group claim's (``groupclaim.CLAIM``): this statement leaves them alone.
CLAIM = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
{queue_room("$7")},
picked AS (
    SELECT id, row_number() OVER (ORDER BY {_CLAIM_ORDER}) AS slot FROM (
        SELECT * FROM (
            SELECT id, priority, lifo_rank, run_at, seq FROM bunqueue_jobs
            WHERE namespace = $1 AND queue = $2 AND state = {READY} AND group_id IS NULL AND {SESSION_HOLDS}
            ORDER BY {_CLAIM_ORDER}
            LIMIT (SELECT n FROM room)
            FOR UPDATE SKIP LOCKED
        ) ready
        UNION ALL
        SELECT * FROM (
            SELECT id, priority, lifo_rank, run_at, seq FROM bunqueue_jobs
            WHERE namespace = $1 AND state = {DELAYED} AND run_at <= (SELECT now FROM clock) AND queue = $2
              AND group_id IS NULL AND {SESSION_HOLDS}
            ORDER BY run_at
            LIMIT (SELECT n FROM room)
            FOR UPDATE SKIP LOCKED
        ) due
        ORDER BY {_CLAIM_ORDER}
        LIMIT (SELECT n FROM room)
    ) best
),
{lease_slots("picked")},
{spend_tokens("$7")}
SELECT {CLAIMED_COLUMNS} FROM claimed
UNION ALL {NO_JOB_ROW} FROM room WHERE room.limited <> $7
UNION ALL {TOKEN_DUE_ROW}
"""

_END_LEASE = "lease_token = NULL, lease_broker = NULL, lease_session = NULL, lease_expires_at = NULL"

# A running row an ack or fail may settle: its token is the request's, or it was claimed without an owner
# (no token: any request settles it, as in memory).
# Written as a CASE so that the state is no index condition: statistics taken when the table held other
# states (a fresh table, a drained backlog) make ``state = ...`` look selective, and the planner then read
# the whole ready or running backlog through an index on state for every flush instead of one primary-key
# probe per request.
_RUNNING_SETTLES = f"WHEN {ACTIVE} THEN j.lease_token IS NULL OR j.lease_token = r.token"
_SETTLES = f"CASE j.state {_RUNNING_SETTLES} ELSE false END"
# What an ack settles besides: a job back in its queue after an attempt that did not finish (a lapsed lease,
# a retry), which the late ACK completes where it waits, whatever its token, as in memory.
_ACKS = (
    f"CASE j.state {_RUNNING_SETTLES} WHEN {READY} THEN j.attempts > 0 WHEN {DELAYED} THEN j.attempts > 0"
    " ELSE false END"
)


def requests_cte(arrays: str, columns: str) -> str:
    """CTE ``req``: a row per element of ``arrays`` (unnested side by side, named ``columns``), with the
    namespace ($1) as its ``namespace`` column, for a statement that names jobs by id.

    Joined on ``j.namespace = r.namespace AND j.id = r.id``, each job is one primary-key probe whatever the
    statistics say. Given ``j.namespace = $1`` instead, the planner may answer that with an index range: on
    a table it holds no statistics for (a fresh namespace), it read the whole namespace through an index for
    every flush. MATERIALIZED keeps the namespace an opaque column rather than a constant it can push down."""
    return f"req AS MATERIALIZED (SELECT $1::text AS namespace, * FROM unnest({arrays}) AS r({columns}))"


# Acks by (id, token), each job named once ($2 ids, $3 tokens, $4 results or NULL, $5 the ACK's remove):
# completed, or deleted when the ACK or the job's removeOnComplete says so (``_ACKS``: late ACKs too). A row
# that does not settle is left alone and missing from the answer; a settled one names its queue (for its
# completed event) and whether its end woke the queue's held-back pulls (``notify_freed``).
# Results ($4, NULL for none) are kept in the same statement (a flow parent reads its children's there), the
# jobs that waited for these run when nothing else holds them, and a finished parent's kept child failures go.
ACK = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
{requests_cte("$2::text[], $3::text[], $4::bytea[], $5::bool[]", "id, token, result, remove")},
done AS (
    UPDATE bunqueue_jobs j
    SET state = {COMPLETED}, completed_at = clock.now, {_END_LEASE},
        -- The wire's count: the attempts before the one that completed (the claim counted it).
        attempts = CASE WHEN j.state = {ACTIVE} THEN j.attempts - 1 ELSE j.attempts END
    FROM req r, clock
    WHERE j.namespace = r.namespace AND j.id = r.id AND {_ACKS} AND NOT (r.remove OR j.remove_on_complete)
    RETURNING j.id, r.token, r.result, j.queue, j.group_id
), gone AS (
    DELETE FROM bunqueue_jobs j USING req r
    WHERE j.namespace = r.namespace AND j.id = r.id AND {_ACKS} AND (r.remove OR j.remove_on_complete)
    RETURNING j.id, r.token, j.queue, j.group_id
), gone_logs AS (
    DELETE FROM bunqueue_job_logs l USING gone WHERE l.namespace = $1 AND l.job_id = gone.id
), kept AS (
    INSERT INTO bunqueue_results (namespace, job_id, result)
    SELECT $1, id, result FROM done WHERE result IS NOT NULL
    ON CONFLICT (namespace, job_id) DO UPDATE SET result = excluded.result
), settled AS (
    SELECT id, queue, group_id FROM done UNION ALL SELECT id, queue, group_id FROM gone
), {release_dependants("settled")}, forgotten AS (
    DELETE FROM bunqueue_flow_failures x USING settled WHERE x.namespace = $1 AND x.parent_id = settled.id
), {_notify_ready("released")}, {notify_freed("settled")}
SELECT s.id, s.token, s.queue, coalesce(s.queue = ANY(freeing.queues), false),
       -- The released jobs once, on one row: on every row a flush of many ACKs would carry them many times.
       CASE WHEN s.first THEN resolved.ids END, CASE WHEN s.first THEN resolved.queues END
FROM (SELECT id, token, queue, row_number() OVER () = 1 AS first
      FROM (SELECT id, token, queue FROM done UNION ALL SELECT id, token, queue FROM gone) acked) s,
     woken, freeing, resolved
"""

_LOST_COLUMNS = (
    f"j.id, j.queue, {stored_columns('j')}, j.failures, j.dlq_generation, q.dlq_config, q.stall_config,"
    f" {NOW_MS} AS now"
)

# The running rows fails name ($2 ids, each once, $3 tokens), locked until ``LOSE`` writes their outcome,
# with their queue's DLQ and stall settings and the database's time.
LOSE_READ = f"""
WITH {requests_cte("$2::text[], $3::text[]", "id, token")}
SELECT {_LOST_COLUMNS}, r.token
FROM req r
JOIN bunqueue_jobs j ON j.namespace = r.namespace AND j.id = r.id
LEFT JOIN bunqueue_queues q ON q.namespace = $1 AND q.queue = j.queue
WHERE {_SETTLES}
FOR UPDATE OF j
"""


# Lapsed leases of the namespace, up to $2 of them, locked (another broker's sweep skips them).
EXPIRE_READ = f"""
SELECT {_LOST_COLUMNS}
FROM bunqueue_jobs j
LEFT JOIN bunqueue_queues q ON q.namespace = $1 AND q.queue = j.queue
WHERE j.namespace = $1 AND j.state = {ACTIVE} AND j.lease_expires_at <= {NOW_MS}
LIMIT $2
FOR UPDATE OF j SKIP LOCKED
"""

# The outcome of lost attempts (``attempts.Losses``): rows requeued or failed ($2-$8, $14, $18), DLQ entries filed
# ($9-$12, $15) and the oldest they push out (maxEntries), and jobs deleted ($13) by removeOnFail or the
# FAIL's remove. Returns the queues whose held-back pulls the lost attempts woke (``notify_freed``).
LOSE = f"""
WITH moved AS (
    UPDATE bunqueue_jobs j
    SET state = m.state, run_at = m.run_at, started_at = m.started_at, record = m.record,
        failures = m.failures, stall_count = m.stall_count, last_heartbeat = m.last_heartbeat,
        attempts = m.attempts, worker_id = NULL,
        -- Every way out of active frees the job's unique key, a retry included, as in memory.
        unique_key = NULL, {_END_LEASE}
    FROM unnest($2::text[], $3::smallint[], $4::bigint[], $5::bigint[], $6::bytea[], $7::bytea[], $8::int[],
                $14::bigint[], $18::int[])
        AS m(id, state, run_at, started_at, record, failures, stall_count, last_heartbeat, attempts)
    WHERE j.namespace = $1 AND j.id = m.id
    RETURNING j.queue, j.state, j.group_id
), filed AS (
    INSERT INTO bunqueue_dlq (namespace, queue, job_id, added_at, entry, due_at)
    SELECT $1, d.queue, d.id, d.added_at, d.entry, d.due_at
    FROM unnest($9::text[], $10::text[], $11::bigint[], $12::bytea[], $15::bigint[])
        AS d(id, queue, added_at, entry, due_at)
    ON CONFLICT (namespace, queue, job_id) DO UPDATE
        SET added_at = excluded.added_at, entry = excluded.entry, due_at = excluded.due_at
), evicted AS (
    -- Each queue filed into keeps its newest maxEntries ($16 queues, $17 how many older entries stay).
    DELETE FROM bunqueue_dlq d USING (
        SELECT l.queue, old.job_id FROM unnest($16::text[], $17::bigint[]) AS l(queue, keep)
        CROSS JOIN LATERAL (
            SELECT x.job_id FROM bunqueue_dlq x WHERE x.namespace = $1 AND x.queue = l.queue
            ORDER BY x.seq DESC OFFSET l.keep
        ) old
    ) o
    WHERE d.namespace = $1 AND d.queue = o.queue AND d.job_id = o.job_id
    RETURNING d.job_id
), evicted_jobs AS (
    DELETE FROM bunqueue_jobs j USING evicted
    WHERE j.namespace = $1 AND j.id = evicted.job_id AND j.state = {FAILED}
), gone AS (
    DELETE FROM bunqueue_jobs j WHERE j.namespace = $1 AND j.id = ANY($13::text[])
    RETURNING j.id, j.queue, j.group_id
), gone_logs AS (
    DELETE FROM bunqueue_job_logs l USING gone WHERE l.namespace = $1 AND l.job_id = gone.id
), {_notify_ready("moved")},
{notify_freed("(SELECT queue, group_id FROM moved UNION ALL SELECT queue, group_id FROM gone) ended")}
SELECT freeing.queues FROM woken, freeing
"""

# Why an ack or fail was refused: the rows it named, as they are now.
SETTLE_REFUSED = (
    "SELECT id, state, lease_token, attempts, worker_id FROM bunqueue_jobs WHERE namespace = $1"
    " AND id = ANY($2::text[])"
)

# Every delayed job of the namespace whose run time has passed becomes ready (claimable by any broker), in
# one statement over the partial index ``bunqueue_jobs_due``; the queues it touched are notified.
PROMOTE_DUE = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
due AS (
    UPDATE bunqueue_jobs j SET state = {READY}
    FROM clock
    WHERE j.namespace = $1 AND j.state = {DELAYED} AND j.run_at <= clock.now
    RETURNING j.queue, j.state
), {_notify_ready("due")}
SELECT DISTINCT due.queue FROM due, woken
"""
