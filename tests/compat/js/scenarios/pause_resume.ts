// Pausing a queue holds its jobs back from a running Worker, counted as paused; resuming releases them.
import { counts, has, Queue, Worker } from './client';
import { done, queueName, same, sleep, tcp, unexpected, waitUntil } from './lib';

const JOBS = 20;
const queue = new Queue<{ i: number }>(queueName('pause'), tcp);
// 2.7 has only pause() and resume(), which send the command without waiting for its reply.
const awaited = has('pauseAsync and resumeAsync');
async function setPaused(paused: boolean): Promise<void> {
  if (awaited) {
    await (paused ? queue.pauseAsync() : queue.resumeAsync());
    same(await queue.isPausedAsync(), paused, `isPaused after ${paused ? 'pause' : 'resume'}`);
    return;
  }
  if (paused) queue.pause();
  else queue.resume();
  await waitUntil(`isPaused ${paused}`, async () => (await queue.isPausedAsync()) === paused);
}

await setPaused(true);
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
same(await queue.getJobCountsAsync(), counts({
  waiting: 0, prioritized: 0, active: 0, completed: 0, failed: 0, delayed: 0, paused: JOBS, 'waiting-children': 0,
}), 'counts while paused');
same(await queue.countAsync(), JOBS, 'count while paused');

await setPaused(false);
await waitUntil('every held job processed', () => processed.length === JOBS);
same([...processed].sort((a, b) => a - b), Array.from({ length: JOBS }, (_, i) => i), 'each job once');
await waitUntil('completed count', async () => (await queue.getJobCountsAsync()).completed === JOBS);

// Pausing again stops a live worker from taking new jobs; the ones it has keep going.
await setPaused(true);
const late = await queue.add('late', { i: 99 });
await sleep(300);
same(await queue.getJobState(late.id), 'waiting', 'a job added while paused stays waiting');
same((await queue.getJobCountsAsync()).paused, 1, 'paused count');
await setPaused(false);
await waitUntil('the late job completed', async () => (await queue.getJobState(late.id)) === 'completed');
await worker.close();
same(unexpected(errors), [], 'worker errors');
done();
