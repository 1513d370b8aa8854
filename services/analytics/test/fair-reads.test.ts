import { UnavailableError } from '@mail/common';
import { chsql, createClickHouse } from '@mail/event-store';
import { createTestClickHouse, uniqueSuffix, type TestClickHouse } from '@mail/local';
import { FairReads, type ReadLimits } from '../src/domain/fair-reads';
import { openEventStore, type EventDatabase, type EventStore } from '../src/store/connection';

const { raw, sql, str } = chsql;

/**
 * The fair queue of ClickHouse reads (FairReads) through the real store:
 * which read gets the next place, that a busy workspace cannot hold back
 * another's, the bound on waiting, and the priority each query runs with.
 * A place is held by a streamed read left unfinished, so the order is set by
 * the test, not by timing.
 */
jest.setTimeout(60_000);

let database: TestClickHouse;
const opened: EventDatabase[] = [];

beforeAll(async () => {
  database = await createTestClickHouse('analytics_fair_reads');
});

afterAll(async () => {
  await Promise.all(opened.map((events) => events.close()));
  await database.drop();
});

async function open(limits: Partial<ReadLimits> = {}): Promise<EventDatabase> {
  const events = await openEventStore({ urls: [database.url], database: database.database }, { slots: 1, waitMs: 60_000, ...limits });
  opened.push(events);
  return events;
}

/** A read of the workspace that keeps its place until `release` is called. */
async function holdPlace(events: EventDatabase, workspaceId: string): Promise<{ release(): Promise<void> }> {
  const reads = events.stream(workspaceId, (store) => store.rowBatches(sql`SELECT 1 AS n`))[Symbol.asyncIterator]();
  await reads.next();
  return {
    release: async () => {
      await reads.return?.();
    },
  };
}

/**
 * With one place (twice that in all), two reads of two workspaces held: every other read waits.
 * Releasing the first leaves one place, which the waiting reads then take
 * one at a time, in their order (a workspace's share is that one place).
 */
async function holdAll(events: EventDatabase): Promise<{ start(): Promise<void>; release(): Promise<void> }> {
  const [first, second] = [await holdPlace(events, 'holder 1'), await holdPlace(events, 'holder 2')];
  return { start: () => first.release(), release: () => second.release() };
}

/** A call that stays open without reading, until `end` is called (it counts among the workspace's running calls). */
function openCall(events: EventDatabase, workspaceId: string): { end(): void; done: Promise<void> } {
  let end: () => void = () => undefined;
  const done = events.call(workspaceId, () => new Promise<void>((resolve) => (end = resolve)));
  return { end: () => end(), done };
}

/** One read per label in one call of the workspace; each label goes to `order` when its read is done. */
function readsOf(events: EventDatabase, workspaceId: string, labels: string[], order: string[]): Promise<void> {
  return events.call(workspaceId, async (store: EventStore) => {
    await Promise.all(labels.map((label) => store.rows(sql`SELECT ${str(label)} AS label`).then(() => order.push(label))));
  });
}

it('gives the next place to the workspace served least recently, reads of one workspace in the order they came', async () => {
  const events = await open();
  const held = await holdAll(events);
  const order: string[] = [];
  const calls = [readsOf(events, 'a', ['a1', 'a2', 'a3'], order), readsOf(events, 'b', ['b1', 'b2', 'b3'], order)];
  await held.start();
  await Promise.all(calls);
  await held.release();
  expect(order).toEqual(['a1', 'b1', 'a2', 'b2', 'a3', 'b3']);
});

it("serves another workspace's first call before a busy workspace's later calls, whatever came first", async () => {
  const events = await open();
  const held = await holdAll(events);
  const order: string[] = [];
  const busy = [1, 2, 3, 4].map((call) => readsOf(events, 'busy', [`busy${call}a`, `busy${call}b`], order));
  const quiet = readsOf(events, 'quiet', ['quiet'], order);
  await held.start();
  await Promise.all([...busy, quiet]);
  await held.release();
  expect(order).toEqual(['busy1a', 'quiet', 'busy1b', 'busy2a', 'busy2b', 'busy3a', 'busy3b', 'busy4a', 'busy4b']);
});

it('starts a read at once beside the reads it outranks, up to twice the places in all', async () => {
  const reads = new FairReads({ slots: 2, waitMs: 60_000 });
  // The busy workspace's third call (priority 3) takes both places; its next read waits.
  const busy = [reads.startCall('busy'), reads.startCall('busy'), reads.startCall('busy')];
  const busyReads = [await busy[2].admit(), await busy[2].admit()];
  expect(busyReads.map((read) => read.priority)).toEqual([3, 3]);
  const waiting = busy[2].admit();
  expect(reads.waitingReads).toBe(1);
  // Reads that outrank them start at once, beyond the places: a first call's (priority 1), another's second call's (2).
  const quietRead = await reads.startCall('quiet').admit();
  const other = [reads.startCall('other'), reads.startCall('other')];
  const otherRead = await other[1].admit();
  // Four run, twice the places: the next first call's read waits, though only one running read is of its priority.
  const third = reads.startCall('third').admit();
  expect(reads.waitingReads).toBe(2);
  busyReads[0].release();
  const thirdRead = await third;
  expect(reads.waitingReads).toBe(1);
  for (const read of [thirdRead, busyReads[1], quietRead, otherRead]) read.release();
  (await waiting).release();
  expect(reads.waitingReads).toBe(0);
});

it('gives a workspace its share of the places at its priority when another filled them first', async () => {
  const reads = new FairReads({ slots: 2, waitMs: 60_000 });
  const busy = reads.startCall('busy');
  const busyReads = [await busy.admit(), await busy.admit()];
  const busyWaiting = busy.admit();
  // Two workspaces at priority 1, one place each: the quiet one's first read starts at once, its second waits.
  const quiet = reads.startCall('quiet');
  const quietRead = await quiet.admit();
  const quietWaiting = quiet.admit();
  expect(reads.waitingReads).toBe(2);
  for (const read of [...busyReads, quietRead]) read.release();
  for (const waiting of [busyWaiting, quietWaiting]) (await waiting).release();
  expect(reads.waitingReads).toBe(0);
});

it('fails a read that waits past the bound as unavailable, and its place goes to the next', async () => {
  const events = await open({ waitMs: 300 });
  const held = await holdAll(events);
  await expect(readsOf(events, 'late', ['late'], [])).rejects.toThrow(UnavailableError);
  await held.start();
  await held.release();
  const order: string[] = [];
  await readsOf(events, 'next', ['next'], order);
  expect(order).toEqual(['next']);
});

it('drops the waiting reads of a call that ended', async () => {
  const events = await open();
  const held = await holdAll(events);
  const order: string[] = [];
  let abandoned: Promise<unknown>[] = [];
  await expect(
    events.call('gone', async (store) => {
      abandoned = ['gone1', 'gone2'].map((label) => store.rows(sql`SELECT ${str(label)} AS label`).then(() => order.push(label)));
      await Promise.resolve();
      throw new Error('the call failed');
    }),
  ).rejects.toThrow('the call failed');
  for (const read of abandoned) await expect(read).rejects.toThrow(UnavailableError);
  await held.start();
  await held.release();
  await readsOf(events, 'next', ['next'], order);
  expect(order).toEqual(['next']);
});

it("runs each query at its call's rank among the workspace's running calls: 2 behind an older call, 1 once that one ended", async () => {
  const events = await open({ slots: 4 });
  const admin = createClickHouse(database.url, 'default');
  try {
    /** The ClickHouse `priority` of a query of the call, read from system.processes while it runs (found by a marker in its text). */
    const priorityOf = async (store: EventStore): Promise<string> => {
      const marker = `fair_${uniqueSuffix()}`;
      const running = store.rows(sql`SELECT sleepEachRow(1) AS ${raw.trusted(marker)} FROM numbers(60) SETTINGS max_block_size = 1`);
      const ended = running.then(
        () => 'ended',
        () => 'ended',
      );
      try {
        for (;;) {
          const result = await admin.query({
            query: sql`SELECT Settings.Values[indexOf(Settings.Names, 'priority')] AS priority FROM system.processes
              WHERE query LIKE ${str(`%${marker}%`)} AND query NOT LIKE '%system.processes%'`.text,
            format: 'JSONEachRow',
          });
          const [found] = await result.json<{ priority: string }>();
          if (found) return found.priority;
          const pause = new Promise((resolve) => setTimeout(resolve, 50, 'pause'));
          if ((await Promise.race([ended, pause])) === 'ended') throw new Error('the query ended before it was seen running');
        }
      } finally {
        await admin.command({ query: sql`KILL QUERY WHERE query LIKE ${str(`%${marker}%`)} SYNC`.text });
        await ended;
      }
    };
    const first = openCall(events, 'ranked');
    const ranks = await events.call('ranked', async (store) => {
      const second = await priorityOf(store);
      first.end();
      await first.done;
      return [second, await priorityOf(store)];
    });
    expect(ranks).toEqual(['2', '1']);
  } finally {
    await admin.close();
  }
});
