"""The group claim: grouped jobs leased in the memory engine's lane order, under the group limits, across brokers.

The plain claim (``statements.CLAIM``) takes ungrouped jobs only; grouped ones come from here, after any
ready ungrouped job, as ``_core.groups.GroupScheduler`` serves them:

- a lane is a group with ready jobs, its jobs lower priority first, then by admission (``seq``);
- lanes are served round-robin: a lane's turn is when a claim last took from it (``bunqueue_groups.served``)
  or, if later, when its oldest ready job came (``seq``), so a lane never served, or back after running
  dry, waits behind the lanes already waiting. Turns and seqs share one scale (``TURN_SLOTS`` per seq), so
  the k-th slot of a claim stamps its lane with ``nextval * TURN_SLOTS + k``. Slot k of a claim is the
  k-th job by (rank in its lane, lane turn): round one takes each lane's first job, round two the second;
- a paused lane, or one under RateLimitGroup's deadline, is skipped; the group's concurrency (its
  override, else the pull's ``group.concurrency``) counts its running jobs and the rate limit (its override,
  else the pull's ``group.limit``) the claims in the open window, each only when the pull carries that
  default, as in memory. The window is stored on the group's row and opened by the first claim in it.

The queue's own controls bound the claim first, as they bound every pull in memory: a paused queue gives
nothing, and its concurrency and rate limits leave room for what the plain claim did not take
(``statements.queue_room``: concurrency counts every running job of the queue, grouped or not, and the
claim spends the rate limit's tokens).

Every group claim of one queue runs under the queue's transaction-level advisory lock
(``statements.QUEUE_LOCK``), taken in its own statement so that the claim's snapshot sees every claim
committed before it: the counts it limits by are then exact across brokers. The plain claim of a queue with
limits takes the same lock, so the queue's limits count both claims' leases.

Where this differs from memory: a lane skipped as held back keeps its turn (in memory the cursor passes
it), and a delayed or retried job rejoins at its admission ``seq`` rather than at the time it came back.
"""
from __future__ import annotations

from bunqueue.broker.states import ACTIVE, READY
from bunqueue.storage.postgres.sessions import NOW_MS
from bunqueue.storage.postgres.statements import (
    CLAIMED_COLUMNS,
    NO_JOB_ROW,
    SESSION_HOLDS,
    lease_slots,
    queue_room,
    spend_tokens,
)

# Slots one claim can stamp apart within one turn value (seqs stay below 2**43 at this scale).
TURN_SLOTS = 1 << 20

# $1 namespace, $2 queue, $3/$4 the session (as in CLAIM), $5 owners and $6 lock ttls (one per slot),
# $7 the pull's group.concurrency, $8/$9 its group.limit max and duration (0: none), $10 the one group to
# take from (NULL: any). Returns the columns of CLAIM, and a row of slot 0 (no job) when some group has
# ready jobs, taken or not: a claim that got nothing learns whether its lanes are empty or held back.
# ``room.n`` (the queue's pause and limits, under the lock) bounds every count of slots below.
CLAIM = f"""
WITH RECURSIVE clock AS (SELECT {NOW_MS} AS now),
{queue_room("true")},
-- Each group with ready jobs and its oldest ready job's seq, one index probe per group (a skip scan).
heads AS (
    (SELECT group_id, seq FROM bunqueue_jobs
     WHERE namespace = $1 AND queue = $2 AND state = {READY} AND group_id IS NOT NULL
       AND ($10::text IS NULL OR group_id = $10)
     ORDER BY group_id, seq LIMIT 1)
    UNION ALL
    SELECT next.group_id, next.seq FROM heads h CROSS JOIN LATERAL (
        SELECT group_id, seq FROM bunqueue_jobs
        WHERE namespace = $1 AND queue = $2 AND state = {READY} AND group_id > h.group_id AND $10::text IS NULL
        ORDER BY group_id, seq LIMIT 1
    ) next
),
lanes AS (
    SELECT h.group_id, greatest(coalesce(g.served, 0), h.seq * {TURN_SLOTS}) AS turn,
           CASE WHEN $7::bigint > 0 THEN coalesce(g.concurrency, $7) - (
               SELECT count(*) FROM bunqueue_jobs a
               WHERE a.namespace = $1 AND a.queue = $2 AND a.group_id = h.group_id AND a.state = {ACTIVE}
           ) ELSE (SELECT n FROM room) END AS concurrency_room,
           coalesce(g.rate_max, $8::bigint) AS rate_max, coalesce(g.rate_duration, $9::bigint) AS rate_duration,
           g.window_start, g.window_count,
           coalesce(g.window_max = coalesce(g.rate_max, $8) AND g.window_duration = coalesce(g.rate_duration, $9)
                    AND clock.now < g.window_start + g.window_duration, false) AS window_open
    FROM heads h
    CROSS JOIN clock
    LEFT JOIN bunqueue_groups g ON g.namespace = $1 AND g.queue = $2 AND g.group_id = h.group_id
    WHERE NOT coalesce(g.paused, false) AND coalesce(g.limited_until, 0) <= clock.now
),
-- The lanes that can give, first turn first: no more of them than the claim has slots.
rooms AS (
    SELECT * FROM (
        SELECT *, least(concurrency_room, (SELECT n FROM room), CASE WHEN $8 = 0 THEN (SELECT n FROM room)
                        WHEN window_open THEN rate_max - window_count ELSE rate_max END) AS lane_room
        FROM lanes
    ) lane WHERE lane_room > 0 ORDER BY turn LIMIT (SELECT n FROM room)
),
picks AS (
    SELECT l.group_id, l.turn, head.id, head.rank FROM rooms l
    CROSS JOIN LATERAL (
        SELECT id, row_number() OVER (ORDER BY priority, seq) AS rank FROM (
            SELECT id, priority, seq FROM bunqueue_jobs
            WHERE namespace = $1 AND queue = $2 AND state = {READY} AND group_id = l.group_id
            -- A lane's r-th job comes after every lane's first: with n lanes and k slots, r <= k - n + 1.
            ORDER BY priority, seq LIMIT least(l.lane_room, (SELECT n FROM room) - (SELECT count(*) FROM rooms) + 1)
        ) lane
    ) head
    ORDER BY head.rank, l.turn LIMIT (SELECT n FROM room)
),
taken AS (
    SELECT j.id FROM bunqueue_jobs j
    WHERE j.namespace = $1 AND j.id IN (SELECT id FROM picks) AND j.state = {READY}
      AND {SESSION_HOLDS}
    FOR UPDATE OF j SKIP LOCKED
),
ordered AS (
    SELECT p.id, p.group_id, row_number() OVER (ORDER BY p.rank, p.turn) AS slot FROM picks p JOIN taken USING (id)
),
{lease_slots("ordered", "group_id")},
{spend_tokens("true")},
served AS (
    SELECT group_id, max(slot) AS last_slot, count(*) AS n FROM claimed GROUP BY group_id
),
-- One value for the whole claim (a CTE runs once; a subquery in the join below could run per row).
stamp AS (SELECT nextval('bunqueue_job_seq') * {TURN_SLOTS} AS base),
turns AS (
    INSERT INTO bunqueue_groups AS g
        (namespace, queue, group_id, served, window_max, window_duration, window_start, window_count)
    SELECT $1, $2, s.group_id, stamp.base + s.last_slot,
           CASE WHEN $8 > 0 THEN l.rate_max END, CASE WHEN $8 > 0 THEN l.rate_duration END,
           CASE WHEN $8 = 0 THEN NULL WHEN l.window_open THEN l.window_start ELSE clock.now END,
           CASE WHEN $8 = 0 THEN 0 WHEN l.window_open THEN l.window_count + s.n ELSE s.n END
    FROM served s JOIN lanes l USING (group_id), clock, stamp
    ON CONFLICT (namespace, queue, group_id) DO UPDATE SET served = excluded.served,
        window_max = CASE WHEN $8 > 0 THEN excluded.window_max ELSE g.window_max END,
        window_duration = CASE WHEN $8 > 0 THEN excluded.window_duration ELSE g.window_duration END,
        window_start = CASE WHEN $8 > 0 THEN excluded.window_start ELSE g.window_start END,
        window_count = CASE WHEN $8 > 0 THEN excluded.window_count ELSE g.window_count END
)
SELECT {CLAIMED_COLUMNS} FROM claimed
UNION ALL {NO_JOB_ROW} WHERE EXISTS (SELECT 1 FROM heads)
"""
