// Job schedulers (Cron on the wire): upsert, list, get, the jobs they push to a Worker, update, remove.
import { has, Queue, Worker } from './client';
import { check, done, queueName, same, tcp, unexpected, waitUntil } from './lib';

const queue = new Queue<{ v: number }>(queueName('sched'), tcp);
const tag = crypto.randomUUID().slice(0, 8);
const fast = `fast-${tag}`;
const daily = `daily-${tag}`;

const before = Date.now();
const created = await queue.upsertJobScheduler(fast, { every: 250 }, { name: 'tick', data: { v: 1 } });
check(created !== null, 'upsertJobScheduler returned null');
same([created.id, created.name], [fast, 'tick'], 'every scheduler');
// 2.7 answers its own clock for `next` and leaves out `every` and `limit`.
const fullReply = has('upsertJobScheduler reply with the next run, every and limit');
if (fullReply) {
  same(created.every, 250, 'every');
  check(created.next >= before + 250 && created.next <= Date.now() + 250, `next run ${created.next}`);
}

const tokyo = await queue.upsertJobScheduler(
  daily, { pattern: '0 9 * * *', timezone: 'Asia/Tokyo', limit: 3 }, { name: 'report', data: { v: 2 } },
);
check(tokyo !== null, 'pattern scheduler');
if (fullReply) {
  // 09:00 in Tokyo is midnight UTC, on some day ahead.
  check(tokyo.next % 86_400_000 === 0 && tokyo.next > before, `daily next run ${tokyo.next}`);
  same(tokyo.limit, 3, 'limit');
}

const listed = await queue.getJobSchedulers();
same(listed.map((s) => s.id).sort(), [daily, fast].sort(), 'getJobSchedulers ids');
const one = await queue.getJobScheduler(daily);
same(one?.pattern, '0 9 * * *', 'getJobScheduler pattern');
check(one !== null && one.next % 86_400_000 === 0, `getJobScheduler next run ${one?.next}`);
// 2.7 names a scheduler by its id and sends no limit.
if (has('getJobScheduler job name and limit')) same([one?.name, one?.limit], ['report', 3], 'getJobScheduler');
same(await queue.getJobSchedulersCount(), 2, 'getJobSchedulersCount');

const seen: { name: string; v: number }[] = [];
const errors: unknown[] = [];
const worker = new Worker<{ v: number }>(queue.name, async (job) => {
  seen.push({ name: job.name, v: job.data.v });
  return null;
}, { ...tcp, concurrency: 2 });
worker.on('error', (err) => errors.push(err));
await waitUntil('three runs of the every scheduler', () => seen.length >= 3);
// 2.7 sends the template name inside data; the broker makes it the job's name (as the original does),
// where 2.7's Worker does not look: it sees 'default'.
const named = has("a spawned job's name in the Worker");
same(seen[0], { name: named ? 'tick' : 'default', v: 1 }, 'spawned job');

// An update changes what the next runs push.
await queue.upsertJobScheduler(fast, { every: 250 }, { name: 'tock', data: { v: 9 } });
await waitUntil('a run of the updated scheduler', () => seen.some((s) => (!named || s.name === 'tock') && s.v === 9));

same(await queue.removeJobScheduler(fast), true, 'removeJobScheduler');
same(await queue.removeJobScheduler(fast), false, 'removing it again');
same((await queue.getJobSchedulers()).map((s) => s.id), [daily], 'after remove');
same(await queue.getJobScheduler(fast), null, 'getJobScheduler after remove');
const count = seen.length;
await Bun.sleep(600);
check(seen.length <= count + 1, `runs after remove: ${seen.length - count}`);
same(await queue.removeJobScheduler(daily), true, 'remove the daily one');
await worker.close();
same(unexpected(errors), [], 'worker errors');
done();
