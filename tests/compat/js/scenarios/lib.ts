// What every scenario shares: a TCP connection to the broker under test, fresh queue names, checks.
import type { ConnectionOptions } from 'bunqueue/client';

const port = Number(Bun.env.COMPAT_PORT);
if (!Bun.env.COMPAT_HOST || !Number.isInteger(port)) {
  throw new Error('COMPAT_HOST and COMPAT_PORT name the broker under test');
}

// `embedded: false` as well, so that a BUNQUEUE_EMBEDDED=1 in the environment cannot turn the client
// into an in-process broker and the scenario into a test of the client alone.
export const connection: ConnectionOptions = {
  host: Bun.env.COMPAT_HOST,
  port,
  token: Bun.env.COMPAT_TOKEN || undefined,
  commandTimeout: 10_000,
};
export const tcp = { connection, embedded: false } as const;

export function queueName(label: string): string {
  // Scenarios share one broker; a queue of their own keeps their counts exact.
  return `ts-${label}-${crypto.randomUUID().slice(0, 8)}`;
}

export function check(condition: unknown, message: string): asserts condition {
  if (!condition) throw new Error(`check failed: ${message}`);
}

export function same(actual: unknown, expected: unknown, what: string): void {
  if (!Bun.deepEquals(actual, expected)) {
    throw new Error(`${what}: expected ${Bun.inspect(expected)}, got ${Bun.inspect(actual)}`);
  }
}

export async function waitUntil(what: string, condition: () => boolean | Promise<boolean>, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await Bun.sleep(20);
  }
}

// Every error a Worker or Queue reported: the scenarios expect none (a Worker's SubscribeEvents
// connection included).
export function unexpected(errors: unknown[]): string[] {
  return errors.map(String);
}

export const sleep = (ms: number) => Bun.sleep(ms);

// Pooled sockets and timers would keep the process alive after the last check.
export function done(): never {
  console.log('ok');
  process.exit(0);
}
