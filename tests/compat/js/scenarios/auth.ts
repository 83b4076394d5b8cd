// Auth with a token: a Queue and a Worker given the token work; a client without one gets nothing done.
import { has, Queue, Worker } from './client';
import { check, connection, done, queueName, same, unexpected, waitUntil } from './lib';

check(connection.token, 'this scenario needs COMPAT_TOKEN');
const name = queueName('auth');
const queue = new Queue<{ n: number }>(name, { connection, embedded: false });
const job = await queue.add('secured', { n: 1 });
same(await queue.getJobState(job.id), 'waiting', 'state of a job added with the token');

const errors: unknown[] = [];
const worker = new Worker<{ n: number }>(name, async (j) => j.data.n + 1, { connection, embedded: false });
worker.on('error', (err) => errors.push(err));
await waitUntil('the job completed', async () => (await queue.getJobState(job.id)) === 'completed');
await worker.close();
if (has('getJob returnvalue')) same((await queue.getJob(job.id))?.returnvalue, 2, 'result');
same(unexpected(errors), [], 'worker errors');

// Without the token every command is refused; the client reports the broker's error text.
const anonymous = new Queue(name, { connection: { ...connection, token: undefined, poolSize: 1 }, embedded: false });
let refusal = '';
let added: unknown;
try {
  added = await anonymous.add('sneaky', {}, { jobId: `sneaky-${name}` });
} catch (err) {
  refusal = String(err);
}
// 2.7's batched add drops a refused batch's error: the add resolves without a job.
if (has("the broker's error from a refused add")) same(refusal, 'Error: Not authenticated', 'PUSH without a token');
else same([refusal, added], ['', undefined], 'a refused add');
same(await queue.getJobState(`sneaky-${name}`), 'unknown', 'nothing was added');
same(await queue.countAsync(), 0, 'queue still empty');
done();
