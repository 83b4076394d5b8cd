// The client's job-group API: depth and active counters, the concurrency and rate-limit overrides,
// pause/resume of one group, groupMaxSize admission, and a Worker with a group concurrency default
// that runs each group's jobs in intra-group priority order.
import { has, Queue, Worker } from './client';
import { check, done, queueName, same, sleep, tcp, unexpected, waitUntil } from './lib';

// The 2.7 line has no job-group API (group options, Queue group calls, the Worker group default).
if (!has('job groups')) done();

const queue = new Queue<{ g: string; p: number }>(queueName('groups'), tcp);
const jobs = [
  ['A', 2], ['A', 0], ['A', 1], ['B', 0], ['B', 3],
].map(([g, p]) => ({ name: `${g}${p}`, data: { g: g as string, p: p as number }, opts: { group: { id: g as string, priority: p as number } } }));
await queue.addBulk(jobs);

same(await queue.getGroupJobsCount('A'), 3, 'group A depth');
same(await queue.getGroupsJobsCount(), 5, 'grouped depth');
same(await queue.getGroupActiveCount('A'), 0, 'group A active before any worker');
same((await queue.getGroupJobs('B')).map((job) => job.name).sort(), ['B0', 'B3'], 'group B jobs');

same(await queue.getGroupConcurrency('A'), null, 'no concurrency override yet');
await queue.setGroupConcurrency('A', 1);
same(await queue.getGroupConcurrency('A'), 1, 'concurrency override');

same(await queue.getGroupRateLimit('B'), null, 'no rate override yet');
await queue.setGroupRateLimit('B', 2, 1000);
same(await queue.getGroupRateLimit('B'), { max: 2, duration: 1000 }, 'rate override');
same(await queue.getGroupRateLimitTtl('B'), -2, 'no window open yet');
same(await queue.removeGroupRateLimit('B'), 1, 'rate override removed');
same(await queue.removeGroupRateLimit('B'), 0, 'nothing left to remove');

same(await queue.pauseGroup('A'), true, 'pause A');
same(await queue.pauseGroup('A'), false, 'pause A again');
same(await queue.isGroupPaused('A'), true, 'A paused');

let refused = '';
await queue.add('m1', { g: 'M', p: 0 }, { group: { id: 'M', maxSize: 1 } });
try {
  await queue.add('m2', { g: 'M', p: 0 }, { group: { id: 'M', maxSize: 1 } });
} catch (err) {
  refused = String(err);
}
check(refused.includes('Group M has reached its maximum size of 1'), `groupMaxSize refusal, got ${refused}`);

const processed: string[] = [];
let aRunning = 0;
let aPeak = 0;
const errors: unknown[] = [];
const worker = new Worker<{ g: string; p: number }>(queue.name, async (job) => {
  if (job.data.g === 'A') {
    aRunning++;
    aPeak = Math.max(aPeak, aRunning);
    await sleep(30);
    aRunning--;
  }
  processed.push(job.name);
  return job.name;
}, { ...tcp, concurrency: 4, group: { concurrency: 3 } });
worker.on('error', (err) => errors.push(err));

await waitUntil('the jobs of the running groups', () => processed.length === 3);
same([...processed].sort(), ['B0', 'B3', 'm1'], 'a paused group is held back');
same(await queue.getGroupJobsCount('A'), 3, 'A still waiting');

same(await queue.resumeGroup('A'), true, 'resume A');
same(await queue.resumeGroup('A'), false, 'resume A again');
await waitUntil('group A processed', () => processed.length === 6);
same(processed.filter((name) => name.startsWith('A')), ['A0', 'A1', 'A2'], 'intra-group priority order');
same(aPeak, 1, 'the override of 1 replaced the worker default of 3');
await waitUntil('nothing active in A', async () => (await queue.getGroupActiveCount('A')) === 0);
same(await queue.getGroupsJobsCount(), 0, 'nothing grouped left');
same(await queue.removeGroupConcurrency('A'), 1, 'concurrency override removed');

await worker.close();
same(unexpected(errors), [], 'worker errors');
done();
