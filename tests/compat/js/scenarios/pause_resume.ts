// Pausing a queue holds its jobs back from a running Worker, counted as paused; resuming releases them.
import { Queue, Worker } from 'bunqueue/client';
import { done, queueName, same, sleep, tcp, unexpected, waitUntil } from './lib';

const JOBS = 20;
const queue = new Queue<{ i: number }>(queueName('pause'), tcp);
await queue.pauseAsync();
same(await queue.isPausedAsync(), true, 'isPaused after pause');
await queue.addBulk(Array.from({ length: JOBS }, (_, i) => ({ name: 'held', data: { i } })));

const processed: number[] = [];
const errors: unknown[] = [];
const worker = new Worker<{ i: number }>(queue.name, async (job) => {
  processed.push(job.data.i);
  return job.data.i;
}, { ...tcp, concurrency: 5 });
worker.on('error', (err) => errors.push(err));

await sleep(500);
same(processed, [], 'jobs processed while paused');
same(await queue.getJobCountsAsync(), {
  waiting: 0, prioritized: 0, active: 0, completed: 0, failed: 0, delayed: 0, paused: JOBS, 'waiting-children': 0,
}, 'counts while paused');
same(await queue.countAsync(), JOBS, 'count while paused');

await queue.resumeAsync();
same(await queue.isPausedAsync(), false, 'isPaused after resume');
await waitUntil('every held job processed', () => processed.length === JOBS);
same([...processed].sort((a, b) => a - b), Array.from({ length: JOBS }, (_, i) => i), 'each job once');
await waitUntil('completed count', async () => (await queue.getJobCountsAsync()).completed === JOBS);

// Pausing again stops a live worker from taking new jobs; the ones it has keep going.
await queue.pauseAsync();
const late = await queue.add('late', { i: 99 });
await sleep(300);
same(await queue.getJobState(late.id), 'waiting', 'a job added while paused stays waiting');
same((await queue.getJobCountsAsync()).paused, 1, 'paused count');
await queue.resumeAsync();
await waitUntil('the late job completed', async () => (await queue.getJobState(late.id)) === 'completed');
await worker.close();
same(unexpected(errors), [], 'worker errors');
done();
