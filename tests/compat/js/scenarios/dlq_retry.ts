// Jobs that exhaust their attempts land in the DLQ with their history; retrying them from the DLQ
// runs them again to completion.
import { has, Queue, Worker } from './client';
import { check, done, queueName, same, tcp, unexpected, waitUntil } from './lib';

const queue = new Queue<{ i: number }>(queueName('dlq'), tcp);
const jobs = await queue.addBulk(
  Array.from({ length: 3 }, (_, i) => ({ name: 'fragile', data: { i }, opts: { attempts: 2, backoff: 50 } })),
);
const ids = jobs.map((j) => j.id).sort();

let healthy = false;
const errors: unknown[] = [];
const worker = new Worker<{ i: number }>(queue.name, async (job) => {
  if (!healthy) throw new Error(`downstream unavailable for ${job.data.i}`);
  return { fixed: job.data.i };
}, { ...tcp, concurrency: 3 });
worker.on('error', (err) => errors.push(err));

await waitUntil('three jobs in the DLQ', async () => (await queue.getJobCountsAsync()).failed === 3);
same((await queue.getFailedAsync()).map((j) => j.id).sort(), ids, 'getFailed');
// 2.7 reads the DLQ only in embedded mode (an empty list over TCP), and its retryDlq sends RetryDlq
// without waiting for the reply.
const readsDlq = has('getDlqAsync, getDlqStatsAsync, getDlqJobsAsync and retryDlqAsync');
if (readsDlq) {
  const entries = await queue.getDlqAsync();
  same(entries.map((e) => e.job.id).sort(), ids, 'DLQ entries');
  for (const entry of entries) {
    same([entry.reason, entry.error], ['max_attempts_exceeded', `downstream unavailable for ${(entry.job.data as { i: number }).i}`],
      'entry reason and error');
    same(entry.attempts.map((a) => a.attempt), [1, 2], 'attempt history');
    same(entry.job.name, 'fragile', 'the job inside the entry');
    check(entry.enteredAt > 1.6e12 && entry.retryCount === 0, `entry ${Bun.inspect(entry)}`);
  }
  const stats = await queue.getDlqStatsAsync();
  same([stats.total, stats.byReason.max_attempts_exceeded, stats.byQueue[queue.name]], [3, 3, 3], 'DLQ stats');
  same((await queue.getDlqJobsAsync()).map((j) => j.id).sort(), ids, 'getDlqJobs');
}

healthy = true;
if (readsDlq) {
  // One entry by id, then the rest.
  same(await queue.retryDlqAsync(jobs[0].id), 1, 'retryDlq of one job');
  await waitUntil('the retried job completed', async () => (await queue.getJobState(jobs[0].id)) === 'completed');
  same((await queue.getDlqAsync()).length, 2, 'entries left');
  same(await queue.retryDlqAsync(), 2, 'retryDlq of the rest');
} else {
  queue.retryDlq();
}
await waitUntil('all completed', async () => (await queue.getJobCountsAsync()).completed === 3);
await worker.close();

for (const job of jobs) {
  if (!has('getJob returnvalue and attemptsMade')) break;
  const view = await queue.getJob(job.id);
  same(view?.returnvalue, { fixed: job.data.i }, `result of ${job.id}`);
  // A DLQ retry starts the job over with its attempts reset.
  same(view?.attemptsMade, 0, `attempts of ${job.id}`);
}
if (readsDlq) same((await queue.getDlqStatsAsync()).total, 0, 'DLQ empty');
same((await queue.getJobCountsAsync()).failed, 0, 'nothing failed');
same(unexpected(errors), [], 'worker errors');
done();
