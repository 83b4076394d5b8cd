// Queue.add and addBulk with options, then getJob, getJobState, getJobCounts and the listing queries.
import { counts, has, Queue } from './client';
import { check, done, queueName, same, tcp, waitUntil } from './lib';

const queue = new Queue(queueName('add'), tcp);

const job = await queue.add('send', { to: 'a@example.com' }, { priority: 5, attempts: 4, tags: ['mail'] });
const got = await queue.getJob(job.id);
check(got, 'getJob of a new job');
same([got.id, got.data], [job.id, { to: 'a@example.com' }], 'job id and data');
if (has('getJob name, priority, attemptsMade, opts and timestamp')) {
  same([got.name, got.priority, got.attemptsMade], ['send', 5, 0], 'job fields');
  same(got.opts.attempts, 4, 'opts.attempts');
  check(got.timestamp > 1.6e12 && got.timestamp <= Date.now(), `timestamp ${got.timestamp}`);
}
same(await queue.getJobState(job.id), 'prioritized', 'state of a prioritized job');

const bulk = await queue.addBulk([
  ...Array.from({ length: 5 }, (_, i) => ({ name: 'bulk', data: { i } })),
  { name: 'custom', data: { i: 5 }, opts: { jobId: `order-${queue.name}` } },
]);
same(bulk.length, 6, 'addBulk returns one job per input');
same(bulk[5].id, `order-${queue.name}`, 'a custom jobId is the job id');
for (const [i, added] of bulk.entries()) {
  const fetched = await queue.getJob(added.id);
  same(fetched?.data, { i }, `bulk job ${i}`);
  if (has('getJob name')) same(fetched?.name, i === 5 ? 'custom' : 'bulk', `bulk job ${i} name`);
}
// Adding the same custom id again is idempotent: the existing job comes back.
same((await queue.add('custom', { i: 99 }, { jobId: `order-${queue.name}` })).id, bulk[5].id, 'custom id reuse');

const later = await queue.add('later', { x: 1 }, { delay: 60_000 });
same(await queue.getJobState(later.id), 'delayed', 'state of a delayed job');
if (has('getJob delay')) same((await queue.getJob(later.id))?.delay, 60_000, 'delay');

same(await queue.getJobCountsAsync(), counts({
  waiting: 6, prioritized: 1, active: 0, completed: 0, failed: 0, delayed: 1, paused: 0, 'waiting-children': 0,
}), 'getJobCounts');
same(await queue.countAsync(), 8, 'count');
same(await queue.getCountsPerPriorityAsync(), { 0: 7, 5: 1 }, 'getCountsPerPriority');
same(await queue.getWaitingCount(), 6, 'getWaitingCount');
same(await queue.getDelayedCount(), 1, 'getDelayedCount');

const waiting = await queue.getWaitingAsync();
same(waiting.map((j) => j.id).sort(), bulk.map((j) => j.id).sort(), 'getWaiting');
same((await queue.getDelayedAsync()).map((j) => j.id), [later.id], 'getDelayed');
same((await queue.getJobsAsync({ state: 'prioritized' })).map((j) => j.id), [job.id], 'getJobs prioritized');

same(await queue.getJob('no-such-job'), null, 'getJob of an unknown id');
same(await queue.getJobState('no-such-job'), 'unknown', 'state of an unknown id');

await queue.removeAsync(bulk[0].id);
same(await queue.getJobState(bulk[0].id), 'unknown', 'state after remove');
same(await queue.countAsync(), 7, 'count after remove');
if (has('drainAsync (2.7 drains without waiting for the reply)')) {
  same(await queue.drainAsync(), 7, 'drain removes every queued job, delayed and prioritized too');
} else {
  queue.drain();
}
await waitUntil('nothing left after drain', async () => (await queue.countAsync()) === 0);

// Queue.add goes out in batches (PUSHB) by default; a durable job, or a queue without the batcher,
// sends one PUSH per job.
const direct = new Queue<{ s: number }>(queue.name, { ...tcp, autoBatch: { enabled: false } });
const single = await direct.add('single', { s: 1 }, { priority: 2 });
const durable = await queue.add('durable', { d: 1 }, { durable: true });
same((await queue.getJob(single.id))?.data, { s: 1 }, 'PUSH');
if (has('getJob name')) same((await queue.getJob(single.id))?.name, 'single', 'PUSH name');
same((await queue.getJob(durable.id))?.data, { d: 1 }, 'durable PUSH');
same([await queue.getJobState(single.id), await queue.getJobState(durable.id)], ['prioritized', 'waiting'], 'states');
same(await queue.countAsync(), 2, 'count after single adds');
done();
