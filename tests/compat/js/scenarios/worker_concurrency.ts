// A Worker with concurrency 50: leases (lock tokens), job heartbeats that keep leases alive past their
// duration, worker registration and its heartbeat, results on completion.
import { counts, has, Queue, Worker } from './client';
import { check, done, queueName, same, sleep, tcp, unexpected, waitUntil } from './lib';

const CONCURRENCY = 50;
const QUICK = 400;
const SLOW = 50;
// Slow jobs outlive their lease several times over: only the worker's lock renewals keep them.
const LOCK_MS = 600;
const SLOW_MS = 1_500;

const queue = new Queue<{ n: number; slow: boolean }>(queueName('conc'), tcp);
const jobs = await queue.addBulk([
  ...Array.from({ length: SLOW }, (_, n) => ({ name: 'slow', data: { n, slow: true } })),
  ...Array.from({ length: QUICK }, (_, n) => ({ name: 'quick', data: { n: SLOW + n, slow: false } })),
]);

let running = 0;
let peak = 0;
const tokens = new Set<string>();
const errors: unknown[] = [];
const failures: string[] = [];
const results = new Map<string, unknown>();

const worker = new Worker<{ n: number; slow: boolean }>(queue.name, async (job) => {
  running++;
  peak = Math.max(peak, running);
  check(job.token, `job ${job.id} arrived without a lock token`);
  tokens.add(job.token);
  try {
    await sleep(job.data.slow ? SLOW_MS : 10);
    return { n: job.data.n, by: job.processedBy };
  } finally {
    running--;
  }
}, { ...tcp, concurrency: CONCURRENCY, lockDuration: LOCK_MS, heartbeatInterval: 150 });
worker.on('error', (err) => errors.push(err));
worker.on('failed', (job, err) => failures.push(`${job?.id}: ${err}`));
worker.on('completed', (job, result) => results.set(job.id, result));

// RegisterWorker: the queue sees the worker with its concurrency while it runs.
// 2.7's getWorkers reads `workers` at the top of the reply, where neither broker puts the list.
const listsWorkers = has('getWorkers');
if (listsWorkers) {
  await waitUntil('the worker in ListWorkers', async () => (await queue.getWorkers()).length === 1);
  const [registered] = await queue.getWorkers();
  same([registered.queues, registered.concurrency], [[queue.name], CONCURRENCY], 'registered worker');
  check(registered.status === 'active', `worker status ${registered.status}`);
}

await waitUntil('every job completed', () => results.size === jobs.length, 30_000);
same(unexpected(errors), [], 'worker errors');
same(failures, [], 'failed jobs');
// 2.7's Worker can start a few jobs past its concurrency (its own count, against either broker).
if (has('an exact concurrency cap')) check(peak === CONCURRENCY, `peak concurrency ${peak}, expected ${CONCURRENCY}`);
else check(peak >= CONCURRENCY, `peak concurrency ${peak}, expected at least ${CONCURRENCY}`);
same(tokens.size, jobs.length, 'one distinct lock token per job');

same(await queue.getJobCountsAsync(), counts({
  waiting: 0, prioritized: 0, active: 0, completed: jobs.length, failed: 0, delayed: 0, paused: 0,
  'waiting-children': 0,
}), 'counts after the run');
for (const added of [jobs[0], jobs[SLOW - 1], jobs[SLOW], jobs[jobs.length - 1]]) {
  same((results.get(added.id) as { n: number }).n, added.data.n, `completed event of ${added.id}`);
  same(await queue.getJobState(added.id), 'completed', `state of ${added.id}`);
  if (!has('getJob returnvalue, attemptsMade and timestamps')) continue;
  const view = await queue.getJob(added.id);
  check(view, `getJob ${added.id}`);
  same((view.returnvalue as { n: number }).n, added.data.n, `result of ${added.id}`);
  // No slow job lost its lease: each ran exactly once.
  same(view.attemptsMade, 0, `attempts of ${added.id}`);
  check(view.finishedOn && view.processedOn && view.finishedOn >= view.processedOn, 'timestamps');
}

// The worker heartbeat (Heartbeat) reports what it processed.
if (listsWorkers) {
  await waitUntil('the worker heartbeat', async () => (await queue.getWorkers())[0]?.processedJobs === jobs.length);
}
await worker.close();
if (listsWorkers) await waitUntil('the worker unregistered', async () => (await queue.getWorkers()).length === 0);
done();
