// Deduplication options from Queue.add and addBulk. The client sends the options it was not given as
// msgpack's `undefined` inside `dedup` (and 2.7 beside it in every job), which the broker reads as absent.
import { has, Queue } from './client';
import { done, queueName, same, tcp } from './lib';

const queue = new Queue<{ v: number }>(queueName('dedup'), tcp);
const data = async (id: string) => (await queue.getJob(id))?.data;

// An id and a ttl only: extend and replace are unset.
const first = await queue.add('once', { v: 1 }, { deduplication: { id: 'key', ttl: 60_000 } });
const again = await queue.add('once', { v: 2 }, { deduplication: { id: 'key', ttl: 60_000 } });
same(again.id, first.id, 'a duplicate within the ttl is the first job');
same(await data(first.id), { v: 1 }, 'the first data stays');
if (has('getDeduplicationJobId over TCP')) {
  same(await queue.getDeduplicationJobId('key'), first.id, 'getDeduplicationJobId');
}

// An id alone, in one addBulk and in a later one.
const bulk = await queue.addBulk([
  { name: 'bulk', data: { v: 3 }, opts: { deduplication: { id: 'bulk-key' } } },
  { name: 'bulk', data: { v: 4 }, opts: { deduplication: { id: 'other-key' } } },
]);
same(bulk.length, 2, 'addBulk returns one job per input');
const bulkAgain = await queue.addBulk([{ name: 'bulk', data: { v: 5 }, opts: { deduplication: { id: 'bulk-key' } } }]);
same(bulkAgain[0].id, bulk[0].id, 'a duplicate in a later addBulk is the first job');
same([await data(bulk[0].id), await data(bulk[1].id)], [{ v: 3 }, { v: 4 }], 'bulk data');

// replace and extend on a delayed job: the duplicate takes the waiting job's place, with its own data.
const opts = { delay: 60_000, deduplication: { id: 'delayed-key', ttl: 60_000, extend: true, replace: true } };
const delayed = await queue.add('later', { v: 6 }, opts);
const replaced = await queue.add('later', { v: 7 }, opts);
same([await queue.getJobState(delayed.id), await queue.getJobState(replaced.id)], ['unknown', 'delayed'],
  'states after the replace');
same(await data(replaced.id), { v: 7 }, 'data of the replacement');
same(await queue.countAsync(), 4, 'jobs in the queue');
done();
