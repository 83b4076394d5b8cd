// Job progress and logs from inside the processor, read back while the job runs and after it completes.
import { has, Queue, Worker } from './client';
import { done, queueName, same, tcp, unexpected, waitUntil } from './lib';

const queue = new Queue<{ steps: number }>(queueName('progress'), tcp);
const job = await queue.add('report', { steps: 3 });

const progressEvents: unknown[] = [];
const errors: unknown[] = [];
let midway: { progress?: number; logs?: unknown } = {};
let release = false;

const worker = new Worker<{ steps: number }>(queue.name, async (running) => {
  for (let step = 1; step <= running.data.steps; step++) {
    await running.updateProgress(Math.round((step / running.data.steps) * 90), `step ${step}`);
    await running.log(`finished step ${step}`);
  }
  // Hold the job active so the queue can look at it mid-run.
  await waitUntil('the check while active', () => release);
  return 'reported';
}, { ...tcp, concurrency: 1 });
worker.on('error', (err) => errors.push(err));
worker.on('progress', (_job, progress) => progressEvents.push(progress));

await waitUntil('three log lines', async () => (await queue.getJobLogs(job.id)).count === 3);
same(await queue.getJobState(job.id), 'active', 'state while running');
const active = await queue.getJob(job.id);
midway = { progress: active?.progress, logs: await queue.getJobLogs(job.id) };
release = true;
await waitUntil('the job completed', async () => (await queue.getJobState(job.id)) === 'completed');
await worker.close();
same(unexpected(errors), [], 'worker errors');

same(midway.progress, 90, 'progress while active');
same(midway.logs, {
  logs: ['[info] finished step 1', '[info] finished step 2', '[info] finished step 3'], count: 3,
}, 'logs while active');
same(progressEvents, [30, 60, 90], "the worker's progress events");
const finished = await queue.getJob(job.id);
same(finished?.progress, 90, 'progress after completion');
if (has('getJob returnvalue')) same(finished?.returnvalue, 'reported', 'result after completion');

// Logs can also be written and trimmed from the queue side.
same(await queue.addJobLog(job.id, 'audited'), 1, 'addJobLog reports success');
same(await queue.getJobLogs(job.id, 3, 3), { logs: ['[info] audited'], count: 1 }, 'a slice of the logs');
await queue.clearJobLogs(job.id, 1);
same(await queue.getJobLogs(job.id), { logs: ['[info] audited'], count: 1 }, 'logs after clearJobLogs(keep 1)');
await queue.clearJobLogs(job.id);
same((await queue.getJobLogs(job.id)).count, 0, 'logs after clearJobLogs');
done();
