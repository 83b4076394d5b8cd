"""PostgreSQL storage: several brokers on one database, PostgreSQL the authority, each broker's memory a cache.

What is here: the settings and connections (``pool``), the schema and its migrations (``migrations``), the
broker sessions that fence leases (``sessions``), the start-up checks (``startup``, ``errors``), the hot
path: ``hotpath`` (push, PUSHB, claim, ack, fail, lease expiry) over ``statements``, ``copypush``
(plain pushes by binary COPY), ``jobrows`` (jobs to and from rows), ``collector`` (group commit) and
``wakeups`` (LISTEN/NOTIFY), ``broadcast`` (job and system events to the other brokers, on the same channel),
``figures`` (every count monitoring shows, in one statement), ``jobevents`` (the job family's events and
counters), and ``jobfamily`` (``PostgresJobs``: PUSH, PUSHB, PULL, PULLB, ACK, ACKB and FAIL over the hot
path, as the command layer awaits them). A start in
PostgreSQL mode still stops after its checks: no engine is built from these yet.
What follows is the design the engine (an implementation of ``bunqueue.broker.engine.Engine``) is built
to; ``hotpath``'s docstring lists what it leaves to the engine.

Batching: one statement per kind of write, shared by concurrent requests
    Each hot command kind (push, claim, ack, fail, extend-lock) has a collector. A request appends its
    arguments and awaits a future; when the collector is idle it flushes at once, otherwise the next flush
    takes everything that arrived while the previous one ran (group commit: no timer, the database's own
    latency sets the batch size). A flush is one prepared statement over arrays (asyncpg prepares and caches
    each statement per connection), so 1 or 5,000 requests cost one round trip and one commit:

    - push: ``INSERT INTO bunqueue_jobs (...) SELECT * FROM unnest($1::text[], $2::text[], ...)
      ON CONFLICT DO NOTHING RETURNING id``; dedup and unique keys are answered from what came back (a row
      missing from RETURNING lost to a live unique key). A flush of at least ``copypush.COPY_MIN_JOBS``
      jobs that nothing can collide with (broker-named, no unique key, no dependency or parent, due now) is a
      binary COPY instead, its wake-ups sent right after its commit (``copypush``).
    - claim: one statement per queue serves every pull waiting on it: the pulls' counts add up to the
      LIMIT, slot k (arrays of owners and lock ttls, one entry per slot) leases the k-th best job, and each
      pull takes its run of slots in arrival order. Lease tokens are ``gen_random_uuid()``. The shape:
      ``WITH picked AS (SELECT namespace, id FROM bunqueue_jobs WHERE namespace = $1
      AND queue = $2 AND state = READY ORDER BY priority DESC, lifo_rank, run_at, seq LIMIT $3
      FOR UPDATE SKIP LOCKED) UPDATE bunqueue_jobs j SET state = ACTIVE, lease_token = ..., lease_broker,
      lease_session, lease_expires_at = now + lockTtl, attempts = attempts + 1 FROM picked WHERE ...
      RETURNING j.*``. The ORDER BY is the index ``bunqueue_jobs_queue_order`` read in order, so a claim
      touches only the rows it takes; SKIP LOCKED lets brokers claim from one queue without waiting on each
      other. The statement also checks the session (``EXISTS (SELECT 1 FROM bunqueue_broker_sessions WHERE
      namespace = $1 AND broker_id = $b AND session = $s AND expires_at > now)``), so a broker whose session
      lapsed claims nothing. The same statement reads the queue's ``bunqueue_queues`` row (an index
      lookup; no row, no controls): a paused queue gives nothing, and a queue with a concurrency or rate
      limit is claimed only under the queue's advisory lock, taken first in the claim's transaction, so
      the statement's snapshot sees every lease granted before it: concurrency counts the queue's ACTIVE
      rows (a range of ``bunqueue_jobs_queue_order``), and the rate limit is the memory engine's token bucket
      kept in the row and spent by the same statement. Both are thus global across brokers. A broker learns that a
      queue has limits from the statement itself (an extra row with slot 0), so a queue without limits
      costs one statement and no lock. Grouped jobs have a claim of their own (``groupclaim``): lane order
      and the group limits of ``bunqueue_groups``, under the same per-queue advisory lock, bounded by the
      queue's pause and limits as the plain claim is (the two claims' leases count against one limit).
    - ack/fail: ``UPDATE bunqueue_jobs j SET state = ..., completed_at = ... FROM unnest($ids, $tokens, ...)
      AS a(id, token, ...) WHERE j.namespace = $1 AND j.id = a.id AND j.lease_token = a.token
      AND j.state = ACTIVE RETURNING j.id, a.token``: a request missing from RETURNING is refused with the
      memory engine's error, chosen from the row as it is after the statement (one more read, on the
      refusal path only); of two requests for one job in a batch, the one with the lease's token wins.
      Results go to ``bunqueue_results`` in the same statement (a data-modifying CTE); dependants are
      released by one UPDATE over ``bunqueue_job_dependencies``. Completed jobs stay until cleaned or
      removed (removeOnComplete), as the rows of a durable memory store do: ``maxCompletedJobs`` bounds
      only the memory engine's in-memory copies.

Wake-ups: LISTEN/NOTIFY after commit, a poll as the safety net
    A transaction that makes work claimable (push, retry, delayed promotion, released lease) calls
    ``pg_notify('bunqueue', json_build_array(namespace, queue))`` once per queue touched, inside the statement
    (one channel: a namespace is any text, a channel name an identifier); PostgreSQL delivers it only after the
    commit and folds duplicates within a transaction. An ack, fail or lapsed lease that frees a slot a pull
    may be held back for (the queue has a concurrency limit, or the job's group has ready jobs) notifies its
    queue the same way (the broker that ran it also wakes its own pullers before it answers); any other ack
    notifies no one. Each broker LISTENs on one dedicated connection, drops
    other namespaces' payloads and wakes its long-polling pullers for that queue. Notifications can be lost with
    that connection, so every broker also polls each queue it has waiters on every
    ``BUNQUEUE_POSTGRES_POLL_INTERVAL_MS``. Job events (the events stream, QueueEvents, webhooks) travel the
    same way: the committing broker sends a NOTIFY payload (job id, queue, event), every broker fans it out to
    its own subscribers; no per-job event rows are written on the hot path. System events (dlq:added,
    job:promoted, cron:fired, ...) cross the same way, but for those about a broker's own process and
    connections (``ops.events.LOCAL_SYSTEM_EVENTS``). Webhooks are delivered by the broker
    that committed the event, so once across brokers.

Leases, expiry and fencing
    A claimed job carries ``lease_token`` (the worker's token), ``lease_broker`` and ``lease_session`` (the
    granting broker session's fencing token, from ``bunqueue_session_seq``) and ``lease_expires_at``
    (lockTtl after the claim or the last renewal). Any broker answers a worker's ack, fail or extend-lock by
    token alone, so a worker that reconnects to another broker keeps its job and its token. Expiry takes every
    lapsed row at once, run by whichever broker's timer fires: ``SELECT ... WHERE namespace = $1 AND state =
    ACTIVE AND lease_expires_at <= now FOR UPDATE SKIP LOCKED`` (the partial index ``bunqueue_jobs_leases``),
    then one write of every outcome (back to its queue with a stall counted, or the DLQ at maxStalls), so a
    killed broker's leases come back as soon as their lockTtl passes. A pull without an owner gets no token,
    as in memory: any ACK or FAIL settles its job, and only its lease's lapse returns it. Sessions are the second
    fence: ``sessions.BrokerSession`` renews the broker's row; a broker whose session lapsed, was deleted
    or was taken over stops claiming (``BrokerSession.valid`` is checked before a claim, and the claim
    statement checks the row), and when it cannot reach the database it stops at its local deadline, before
    any other broker can see the session as expired; it then registers a new session (a larger fencing
    token) as soon as the database takes one, and claims again. Stale tokens are refused because every lease
    write matches the token.

Crons and the rest
    A cron fires once across brokers: the broker that moves ``next_run_at`` from the value it read
    (``UPDATE bunqueue_crons SET next_run_at = $new, executions = executions + 1 WHERE ... AND next_run_at =
    $old``) pushes the job, in the same transaction. Times are judged by the database's clock (``NOW_MS``
    in ``sessions``) wherever two brokers must agree. A run due before the oldest live broker session
    started was missed while no broker was up: it is skipped or fired once, as memory treats runs missed
    across a restart. Webhook commands read and write ``bunqueue_webhooks``; each broker delivers from a
    cache of it (``ops/webhooks``), refreshed on a timer, and the job events call its delivery hook on the
    committing broker only. A worker row belongs to the (broker, connection) that registered it and goes
    when that connection closes; stale and removal are judged by the database's clock.

How the command layer awaits the hot path
    ``Engine``'s methods return their answer; the PostgreSQL hot path can only return it after a round
    trip. One dispatch table serves both, and the memory engine's path is unchanged:

    - ``engine.py`` has a second protocol, ``AwaitedJobs``: ``push_async``, ``push_many_async``,
      ``pull_async`` (the claim, then ``claim_wait`` while the timeout lasts: the long-poll and the plain
      pull are one call), ``ack_async``, ``fail_async`` and ``ack_batch_async``. An ack or fail names the
      job by (id, token) in one statement, so ``active_job`` and the ``late_*`` calls have no twin: their
      refusals are the statement's. Both engines validate with ``JobFactory.build`` / ``build_batch`` and
      ``options``.
    - An engine says which it serves with one attribute, ``awaits_jobs`` (False on ``Broker``). The seven
      handlers in ``commands/jobs.py`` validate as before and branch once on it: when True they return a
      coroutine that awaits the twin and shapes the same reply dict; the runner answers it as a long-poll
      (``CommandRunner.wait``). The reply leaves after the statement's commit; the SQLite store's ticket
      is not involved.
    - ``jobfamily.PostgresJobs`` implements ``AwaitedJobs`` over ``HotPath`` and its ``BrokerSession``. A
      job it admits gets the memory engine's first timeline entry; a claimed job its ``active`` entry, and
      ``attempts`` on the wire counts the attempts before the running one (the row counts the claim). ACKB
      reads every (id, token) first and refuses the first that holds no lease, as the memory engine checks
      every position before any change; a lease lost between that read and the acks refuses its position
      only. ``tests/storage/postgres/test_jobfamily.py`` runs the same frames through the real runner on
      both engines and compares the replies field by field.

The engine and the server
    ``engine.PostgresEngine`` is one mixin per command family (``ops/``, named as ``broker/ops``), the job
    family (``PostgresJobs``) last so that a family may take up its hooks. ``server/postgres.py`` builds it
    after the start-up checks; ``dispatch`` serves the one command table with it: the job family awaited on
    the loop, every other handler in a worker thread against ``blocking.BlockingEngine``, each connection's
    commands in order, and a database that cannot be reached answered ``Storage unavailable: <why>`` within
    the command's limit. A closed connection keeps its leases (a worker may reconnect to any broker).

What is next
    - Awaited commands are not sampled into the latency histograms (``run_timed`` times ready replies only).
    - Removing the task ``wait`` makes per awaitable: the collectors can settle a future with the reply
      itself (a request carries its reply shaper), and ``wait`` attaches a done callback to a bare
      ``asyncio.Future`` instead of wrapping it in a task.
"""
