// One drain: push JOBS no-op jobs, then time a TS Worker (npm bunqueue, TCP mode) draining them.
// Usage: bun ts_worker_drain.ts <path of bunqueue/dist/client/index.js> <port> <jobs> <concurrency>
// Prints one JSON line: {jobs, seconds, rate}. Run by ts_worker_drain.py, which starts the brokers.
const [clientPath, portText, jobsText, concurrencyText] = process.argv.slice(2);
// Imported by path: the client lives in the compat tests' node_modules, not beside this file.
const { Queue, Worker } = await import(clientPath);

const connection = { host: '127.0.0.1', port: Number(portText) };
const JOBS = Number(jobsText);
const CONCURRENCY = Number(concurrencyText);
const CHUNK = 1_000;

const queue = new Queue(`drain-${crypto.randomUUID().slice(0, 8)}`, { connection, embedded: false });
for (let i = 0; i < JOBS; i += CHUNK) {
  const n = Math.min(CHUNK, JOBS - i);
  await queue.addBulk(Array.from({ length: n }, (_, k) => ({ name: 'noop', data: { i: i + k } })));
}
const queued = await queue.countAsync();
if (queued !== JOBS) throw new Error(`expected ${JOBS} queued jobs, found ${queued}`);

let completed = 0;
let failed = 0;
let resolveDone: () => void;
const drained = new Promise<void>((resolve) => (resolveDone = resolve));
const started = performance.now();
const worker = new Worker(queue.name, async () => null, { connection, embedded: false, concurrency: CONCURRENCY });
worker.on('completed', () => {
  if (++completed === JOBS) resolveDone();
});
worker.on('failed', () => failed++);
await drained;
const seconds = (performance.now() - started) / 1000;
await worker.close();

const counts = await queue.getJobCountsAsync();
if (counts.completed !== JOBS || failed !== 0) {
  throw new Error(`drain incomplete: ${JSON.stringify(counts)}, ${failed} failed`);
}
console.log(JSON.stringify({ jobs: JOBS, seconds, rate: JOBS / seconds }));
process.exit(0);
