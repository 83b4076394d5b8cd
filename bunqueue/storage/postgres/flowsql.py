"""The statements of flow edits (``ops.flows``, ``flowrows``). ``$1`` is always the namespace."""
from __future__ import annotations

from bunqueue.broker.states import ACTIVE, FAILED, WAITING_CHILDREN
from bunqueue.storage.postgres.jobrows import PUSH_COLUMN_NAMES, PUSH_COLUMN_TYPES
from bunqueue.storage.postgres.statements import _notify_ready

_NAMES = ", ".join(PUSH_COLUMN_NAMES)
_ARGS = ", ".join(f"${i + 2}::{kind}" for i, kind in enumerate(PUSH_COLUMN_TYPES))
_STATE_ARG = len(PUSH_COLUMN_TYPES) + 2

# The first id of a PUSHF graph (in order) that names a job, a kept result or a pending dependency.
GRAPH_TAKEN = """
SELECT u.id FROM unnest($2::text[]) WITH ORDINALITY AS u(id, pos)
WHERE EXISTS (SELECT 1 FROM bunqueue_jobs j WHERE j.namespace = $1 AND j.id = u.id)
   OR EXISTS (SELECT 1 FROM bunqueue_results r WHERE r.namespace = $1 AND r.job_id = u.id)
   OR EXISTS (SELECT 1 FROM bunqueue_job_dependencies d WHERE d.namespace = $1 AND d.depends_on = u.id)
ORDER BY u.pos LIMIT 1
"""

# A PUSHF graph's members, each in the state it was prepared in, with its pending count; a member another
# graph inserted meanwhile is left out (the caller refuses the graph and rolls back).
GRAPH_INSERT = f"""
WITH incoming AS (
    SELECT * FROM unnest({_ARGS}, ${_STATE_ARG}::smallint[], ${_STATE_ARG + 1}::int[])
        WITH ORDINALITY AS i({_NAMES}, state, pending, pos)
), inserted AS (
    INSERT INTO bunqueue_jobs (namespace, state, pending_deps, {_NAMES})
    SELECT $1, state, pending, {_NAMES} FROM incoming ORDER BY pos
    ON CONFLICT DO NOTHING
    RETURNING id, queue, state
), {_notify_ready("inserted")}
SELECT inserted.id FROM inserted, woken
"""

# Edges: ($2 dependency, $3 the job that waits for it).
ADD_EDGES = """
INSERT INTO bunqueue_job_dependencies (namespace, depends_on, job_id)
SELECT $1, e.dep, e.id FROM unnest($2::text[], $3::text[]) AS e(dep, id)
ON CONFLICT DO NOTHING
"""
DROP_EDGES = """
DELETE FROM bunqueue_job_dependencies WHERE namespace = $1 AND job_id = $2 AND depends_on = ANY($3::text[])
"""
DROP_ALL_EDGES = "DELETE FROM bunqueue_job_dependencies WHERE namespace = $1 AND job_id = $2"
PENDING_OF = "SELECT depends_on FROM bunqueue_job_dependencies WHERE namespace = $1 AND job_id = $2"

PARENT_OF = "SELECT parent_id FROM bunqueue_jobs WHERE namespace = $1 AND id = $2"

_JOB_COLUMNS = "id, queue, state, run_at, parent_id, lease_token, worker_id, record"
JOBS = f"SELECT {_JOB_COLUMNS} FROM bunqueue_jobs WHERE namespace = $1 AND id = ANY($2::text[])"
# Locked in id order, so two edits of one flow wait for each other rather than deadlock.
JOBS_LOCKED = f"{JOBS} ORDER BY id FOR UPDATE"

# Flow edits written back: state, parent, run time and record; the pending count is the edges left.
SAVE = f"""
WITH saved AS (
    UPDATE bunqueue_jobs j SET state = s.state, parent_id = s.parent_id, run_at = s.run_at, record = s.record,
        pending_deps = (SELECT count(*) FROM bunqueue_job_dependencies d
                        WHERE d.namespace = $1 AND d.job_id = j.id)
    FROM unnest($2::text[], $3::smallint[], $4::text[], $5::bigint[], $6::bytea[])
        AS s(id, state, parent_id, run_at, record)
    WHERE j.namespace = $1 AND j.id = s.id
    RETURNING j.queue, j.state
), {_notify_ready("saved")}
SELECT n FROM woken
"""

# MoveToWaitingChildren: the running attempt ends, its lease with it.
PARK_ACTIVE = f"""
UPDATE bunqueue_jobs SET state = {WAITING_CHILDREN}, record = $3, worker_id = NULL, released_at = NULL,
    lease_token = NULL, lease_broker = NULL, lease_session = NULL, lease_expires_at = NULL,
    pending_deps = (SELECT count(*) FROM bunqueue_job_dependencies d WHERE d.namespace = $1 AND d.job_id = $2)
WHERE namespace = $1 AND id = $2 AND state = {ACTIVE}
"""

# Children whose results a parent reads: the result, and the child's queue while the child exists.
CHILD_RESULTS = """
SELECT c.id, j.queue, r.result FROM unnest($2::text[]) WITH ORDINALITY AS c(id, pos)
JOIN bunqueue_results r ON r.namespace = $1 AND r.job_id = c.id
LEFT JOIN bunqueue_jobs j ON j.namespace = $1 AND j.id = c.id
ORDER BY c.pos
"""
HAS_RESULT = "SELECT EXISTS (SELECT 1 FROM bunqueue_results WHERE namespace = $1 AND job_id = $2)"

# Removing a job that never ran: its row, its edges, its result and logs.
REMOVE_JOBS = """
WITH gone AS (
    DELETE FROM bunqueue_jobs WHERE namespace = $1 AND id = ANY($2::text[]) RETURNING id
), results AS (
    DELETE FROM bunqueue_results r USING gone WHERE r.namespace = $1 AND r.job_id = gone.id
), logs AS (
    DELETE FROM bunqueue_job_logs l USING gone WHERE l.namespace = $1 AND l.job_id = gone.id
), edges AS (
    DELETE FROM bunqueue_job_dependencies d USING gone WHERE d.namespace = $1 AND d.job_id = gone.id
)
SELECT count(*) FROM gone
"""

FAILURES = """
SELECT child_key, error FROM bunqueue_flow_failures
WHERE namespace = $1 AND parent_id = $2 AND ignored = $3 ORDER BY seq
"""
KEEP_FAILURE = """
INSERT INTO bunqueue_flow_failures (namespace, parent_id, ignored, child_key, error) VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (namespace, parent_id, ignored, child_key) DO UPDATE SET error = excluded.error
"""
FORGET_FAILURES = "DELETE FROM bunqueue_flow_failures WHERE namespace = $1 AND parent_id = $2"
DLQ_ERROR = "SELECT entry FROM bunqueue_dlq WHERE namespace = $1 AND job_id = $2"

# failParentOnFailure: the parent fails for good as Discard leaves a job (no attempt charged, no finish time),
# its edges gone.
FAIL_PARENT = f"""
WITH edges AS (DELETE FROM bunqueue_job_dependencies WHERE namespace = $1 AND job_id = $2)
UPDATE bunqueue_jobs SET state = {FAILED}, pending_deps = 0, worker_id = NULL,
    lease_token = NULL, lease_broker = NULL, lease_session = NULL, lease_expires_at = NULL
WHERE namespace = $1 AND id = $2
"""
