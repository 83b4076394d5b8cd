"""The hot path's statements: each serves a whole batch in one round trip (arrays in, one row per job out).

``$1`` is always the namespace. A statement that makes jobs claimable notifies ``CHANNEL`` once per queue
it touched, from inside the statement, so the notification leaves with the commit and never before it.
"""
from __future__ import annotations

from bunqueue.broker.states import ACTIVE, COMPLETED, DELAYED, FAILED, LIVE, READY
from bunqueue.storage.postgres.jobrows import PUSH_COLUMN_NAMES, PUSH_COLUMN_TYPES
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

# Up to cardinality($5) ready jobs of one queue, best first, for several pulls at once: slot k of the
# arrays ($5 owners, $6 lock ttls) is the k-th best job, so the caller hands each pull its run of slots.
# The session row is checked in the same statement ($3 broker id, $4 fencing token): a broker whose session
# lapsed claims nothing. SKIP LOCKED lets brokers claim one queue side by side; a row another claim took
# meanwhile fails the re-checked state and is skipped too. Grouped jobs are the group claim's
# (``groupclaim.CLAIM``): this statement leaves them alone.
CLAIM = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
picked AS (
    SELECT id, row_number() OVER (ORDER BY {_CLAIM_ORDER}) AS slot FROM (
        SELECT id, priority, lifo_rank, run_at, seq FROM bunqueue_jobs
        WHERE namespace = $1 AND queue = $2 AND state = {READY}
          AND group_id IS NULL
          AND EXISTS (SELECT 1 FROM bunqueue_broker_sessions s, clock
                      WHERE s.namespace = $1 AND s.broker_id = $3 AND s.session = $4 AND s.expires_at > clock.now)
        ORDER BY {_CLAIM_ORDER}
        LIMIT cardinality($5::text[])
        FOR UPDATE SKIP LOCKED
    ) best
),
slots AS (SELECT * FROM unnest($5::text[], $6::bigint[]) WITH ORDINALITY AS s(owner, ttl, slot))
UPDATE bunqueue_jobs j
SET state = {ACTIVE}, attempts = j.attempts + 1, started_at = clock.now, last_heartbeat = clock.now,
    lease_token = gen_random_uuid()::text, lease_broker = $3, lease_session = $4,
    lease_expires_at = clock.now + slots.ttl, worker_id = slots.owner
FROM picked JOIN slots USING (slot), clock
WHERE j.namespace = $1 AND j.id = picked.id
RETURNING picked.slot, j.id, j.lease_token, j.attempts, j.started_at, j.seq, j.record
"""

_END_LEASE = "lease_token = NULL, lease_broker = NULL, lease_session = NULL, lease_expires_at = NULL"

# Acks by (id, token): a row whose token does not match, or that is no longer running, is left alone and
# missing from the answer (which names the token that matched: the same job may be named twice). Results
# ($4, NULL for none) are kept in the same statement.
ACK = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
done AS (
    UPDATE bunqueue_jobs j SET state = {COMPLETED}, completed_at = clock.now, {_END_LEASE}
    FROM unnest($2::text[], $3::text[]) AS a(id, token), clock
    WHERE j.namespace = $1 AND j.id = a.id AND j.state = {ACTIVE} AND j.lease_token = a.token
    RETURNING j.id, a.token
), kept AS (
    INSERT INTO bunqueue_results (namespace, job_id, result)
    SELECT DISTINCT ON (r.id) $1, r.id, r.result
    FROM unnest($2::text[], $3::text[], $4::bytea[]) AS r(id, token, result) JOIN done USING (id, token)
    WHERE r.result IS NOT NULL
    ON CONFLICT (namespace, job_id) DO UPDATE SET result = excluded.result
)
SELECT id, token FROM done
"""

# Fails by (id, token): back to ready while attempts remain and the failure is not final ($4), else failed.
FAIL = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
failed AS (
    UPDATE bunqueue_jobs j
    SET state = CASE WHEN a.final OR j.attempts >= j.max_attempts THEN {FAILED} ELSE {READY} END,
        completed_at = CASE WHEN a.final OR j.attempts >= j.max_attempts THEN clock.now END,
        worker_id = NULL, {_END_LEASE}
    FROM unnest($2::text[], $3::text[], $4::bool[]) AS a(id, token, final), clock
    WHERE j.namespace = $1 AND j.id = a.id AND j.state = {ACTIVE} AND j.lease_token = a.token
    RETURNING j.id, a.token, j.state, j.queue
), {_notify_ready("failed")}
SELECT failed.id, failed.token, failed.state, failed.queue FROM failed, woken
"""

# Why an ack or fail was refused: the rows it named, as they are now.
SETTLE_REFUSED = "SELECT id, state, lease_token FROM bunqueue_jobs WHERE namespace = $1 AND id = ANY($2::text[])"

# Every lapsed lease of the namespace back to ready, in one statement (the attempt it cost stays counted).
EXPIRE_LEASES = f"""
WITH clock AS (SELECT {NOW_MS} AS now),
lapsed AS (
    UPDATE bunqueue_jobs j SET state = {READY}, worker_id = NULL, {_END_LEASE}
    FROM clock
    WHERE j.namespace = $1 AND j.state = {ACTIVE} AND j.lease_expires_at <= clock.now
    RETURNING j.id, j.queue, j.state
), {_notify_ready("lapsed")}
SELECT lapsed.id, lapsed.queue FROM lapsed, woken
"""
