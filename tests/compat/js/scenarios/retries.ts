// Failing jobs: retries spaced by fixed and exponential backoff, the DLQ after the last attempt,
// UnrecoverableError, and what getJob and getJobCounts report afterwards.
import { has, Queue, UnrecoverableError, Worker } from './client';
import { check, done, queueName, same, tcp, unexpected, waitUntil } from './lib';

type Kind = 'flaky' | 'doomed' | 'fatal';
const queue = new Queue<{ kind: Kind }>(queueName('retry'), tcp);
const flaky = await queue.add('flaky', { kind: 'flaky' }, { attempts: 3, backoff: { type: 'fixed', delay: 300 } });
const doomed = await queue.add('doomed', { kind: 'doomed' }, { attempts: 3, backoff: 100 });
const fatal = await queue.add('fatal', { kind: 'fatal' }, { attempts: 5 });

const runs = new Map<string, number[]>([[flaky.id, []], [doomed.id, []], [fatal.id, []]]);
const failedEvents: string[] = [];
const errors: unknown[] = [];
let flakyStateBetweenTries = '';

const worker = new Worker<{ kind: Kind }>(queue.name, async (job) => {
  const times = runs.get(job.id)!;
  times.push(performance.now());
  same(job.attemptsMade, times.length - 1, `attemptsMade of ${job.data.kind} on run ${times.length}`);
  // 2.7's Worker reads the name from data.name, which the broker keeps apart from the data.
  if (has('job name in the Worker')) same(job.name, job.data.kind, 'job name in the Worker');
  if (job.data.kind === 'fatal') throw new UnrecoverableError('no point retrying');
  if (job.data.kind === 'doomed' || times.length < 3) throw new Error(`${job.data.kind} run ${times.length} failed`);
  return 'third time lucky';
}, { ...tcp, concurrency: 3 });
worker.on('error', (err) => errors.push(err));
worker.on('failed', async (job, err) => {
  failedEvents.push(`${job?.data.kind}: ${err.message}`);
  // Between tries a job waits out its backoff in the delayed state.
  if (job?.id === flaky.id && runs.get(flaky.id)!.length === 1) {
    flakyStateBetweenTries = await queue.getJobState(flaky.id);
  }
});

await waitUntil('the flaky job completed', async () => (await queue.getJobState(flaky.id)) === 'completed');
await waitUntil('the doomed job failed', async () => (await queue.getJobState(doomed.id)) === 'failed');
await waitUntil('the fatal job failed', async () => (await queue.getJobState(fatal.id)) === 'failed');
await worker.close();
same(unexpected(errors), [], 'worker errors');
same(flakyStateBetweenTries, 'delayed', 'state while waiting out the backoff');

const gaps = (id: string) => runs.get(id)!.slice(1).map((t, i) => t - runs.get(id)![i]);
const [f1, f2] = gaps(flaky.id);
// Fixed backoff: the delay +-20 %.
check(f1 >= 230 && f2 >= 230, `fixed backoff gaps ${f1}, ${f2}`);
// Exponential backoff of 100: 100 x 2^n, with +-50 % jitter.
const [d1, d2] = gaps(doomed.id);
check(d1 >= 95 && d2 >= 195, `exponential backoff gaps ${d1}, ${d2}`);
same([runs.get(flaky.id)!.length, runs.get(doomed.id)!.length, runs.get(fatal.id)!.length], [3, 3, 1], 'runs per job');
same(failedEvents.sort(), [
  'doomed: doomed run 1 failed', 'doomed: doomed run 2 failed', 'doomed: doomed run 3 failed',
  'fatal: no point retrying', 'flaky: flaky run 1 failed', 'flaky: flaky run 2 failed',
], 'failed events');

if (has('getJob returnvalue, failedReason, stacktrace and attemptsMade')) {
  const ok = await queue.getJob(flaky.id);
  same([ok?.returnvalue, ok?.attemptsMade], ['third time lucky', 2], 'completed after two retries');
  const dead = await queue.getJob(doomed.id);
  same([dead?.failedReason, dead?.attemptsMade], ['doomed run 3 failed', 3], 'failed after three runs');
  check(dead?.stacktrace?.some((line) => line.includes('doomed run 3 failed')), `stacktrace ${dead?.stacktrace}`);
  same((await queue.getJob(fatal.id))?.attemptsMade, 1, 'unrecoverable: one run');
}

const counts = await queue.getJobCountsAsync();
same([counts.completed, counts.failed, counts.active, counts.delayed], [1, 2, 0, 0], 'counts');
same((await queue.getFailedAsync()).map((j) => j.id).sort(), [doomed.id, fatal.id].sort(), 'getFailed');
done();
