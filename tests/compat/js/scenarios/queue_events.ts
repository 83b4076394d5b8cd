// QueueEvents over TCP: a listener on its own connection sees a job's whole life, and a failure's.
import { has, Queue, QueueEvents, Worker } from './client';
import { done, queueName, same, tcp, unexpected, waitUntil } from './lib';

const queue = new Queue<{ n: number }>(queueName('events'), tcp);
// 2.7's QueueEvents listens in embedded mode only; its scenario checks the same outcomes through the
// Worker's own events.
const listening = has('QueueEvents over TCP');
const listener = listening ? new QueueEvents(queue.name, tcp) : null;
const seen: string[] = [];
const errors: unknown[] = [];
const completed: unknown[] = [];
const failed: unknown[] = [];
const progress: unknown[] = [];
if (listener) {
  for (const name of ['waiting', 'active', 'completed', 'failed', 'progress', 'retried', 'removed']) {
    listener.on(name as 'waiting', (event) => seen.push(`${name}:${event.jobId}`));
  }
  listener.on('completed', (event) => completed.push(event.returnvalue));
  listener.on('failed', (event) => failed.push(event.failedReason));
  listener.on('progress', (event) => progress.push(event.data));
  listener.on('error', (err) => errors.push(`listener: ${err}`));
  await listener.waitUntilReady();
}

const ok = await queue.add('ok', { n: 1 });
const bad = await queue.add('bad', { n: 2 }, { attempts: 1 });
const worker = new Worker<{ n: number }>(queue.name, async (job) => {
  await job.updateProgress(50);
  if (job.data.n === 2) throw new Error('no good');
  return { doubled: job.data.n * 2 };
}, { ...tcp, concurrency: 1 });
worker.on('error', (err) => errors.push(`worker: ${err}`));
if (!listener) {
  worker.on('completed', (_job, result) => completed.push(result));
  worker.on('failed', (_job, err) => failed.push(err.message));
  worker.on('progress', (_job, value) => progress.push(value));
}

await waitUntil('both outcomes heard', () => completed.length === 1 && failed.length === 1);
const removed = await queue.add('gone', { n: 3 }, { delay: 60_000 });
await queue.removeAsync(removed.id);
if (listener) await waitUntil('the removal heard', () => seen.includes(`removed:${removed.id}`));
same(await queue.getJobState(removed.id), 'unknown', 'the removed job is gone');
await worker.close();
listener?.close();

// The client's QueueEvents re-emits a failed job's reason as an 'error' too (as against the Bun
// original); nothing else may have gone wrong.
same(unexpected(errors), listener ? ['listener: Error: no good'] : [], 'listener and worker errors');
same(completed, [{ doubled: 2 }], 'completed events carry the result');
same(failed, ['no good'], 'failed events carry the reason');
same(progress, [50, 50], 'progress events');
same([await queue.getJobState(ok.id), await queue.getJobState(bad.id)], ['completed', 'failed'], 'final states');
if (listener) {
  for (const id of [ok.id, bad.id]) {
    for (const name of ['waiting', 'active', 'progress']) {
      same(seen.includes(`${name}:${id}`), true, `${name} event for ${id}`);
    }
  }
  same(seen.includes(`completed:${ok.id}`), true, 'completed event');
  same(seen.includes(`failed:${bad.id}`), true, 'failed event');
}
done();
