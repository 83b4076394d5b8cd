// The client under test: COMPAT_CLIENT names its package in ../package.json, `bunqueue` (the current
// line) when unset, or an alias such as `bunqueue-2.7.10` for an older release still in use.
const pkg = Bun.env.COMPAT_CLIENT || 'bunqueue';
const client: typeof import('bunqueue/client') = await import(`${pkg}/client`);

export const { FlowProducer, Queue, QueueEvents, UnrecoverableError, Worker } = client;

const manifest = await Bun.file(new URL(`../node_modules/${pkg}/package.json`, import.meta.url)).json();
export const clientVersion: string = manifest.version;

// What the current line has and the 2.7 line lacks, or answers from the client alone (2.7's getJob over
// TCP is a bare job: id and data, name read from data.name, no priority, opts, result or timestamps).
// A check that needs it is left out for 2.7.x, with this note on stderr; the rest of the scenario runs.
const noted = new Set<string>();
export function has(what: string): boolean {
  if (!clientVersion.startsWith('2.7.')) return true;
  if (!noted.has(what)) console.error(`skipped for ${pkg} ${clientVersion}: ${what}`);
  noted.add(what);
  return false;
}

// getJobCounts as this client reports them: the 2.7 line has no 'waiting-children' count.
export function counts(expected: Record<string, number>): Record<string, number> {
  if (has("getJobCounts 'waiting-children'")) return expected;
  const { 'waiting-children': _, ...rest } = expected;
  return rest;
}
