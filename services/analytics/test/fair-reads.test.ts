import { UnavailableError } from '@mail/common';
import { chsql, createClickHouse } from '@mail/event-store';
import { createTestClickHouse, uniqueSuffix, type TestClickHouse } from '@mail/local';
import { FairReads, type Admission, type ReadCall, type ReadLimits } from '../src/domain/fair-reads';
import { openEventStore, type EventDatabase, type EventStore } from '../src/store/connection';

const { raw, sql, str } = chsql;

/**
 * The turns of ClickHouse reads across workspaces (FairReads): on their
 * own, for who starts when, and through the real store, for the bound on
 * waiting and the priority each query runs with. A place is held by a
 * streamed read left unfinished or by an admission not yet released, so the
 * order is set by the test, not by timing.
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

const NEVER = 60_000;

async function open(limits: Partial<ReadLimits> = {}): Promise<EventDatabase> {
  const events = await openEventStore(
    { urls: [database.url], database: database.database },
    { slots: 1, waitMs: NEVER, turnMs: NEVER, ...limits },
  );
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

/** Admissions of FairReads on their own: which reads have started, in the order they did. */
function admissions(reads: FairReads) {
  const started: string[] = [];
  const admitted = new Map<string, Admission>();
  const calls: ReadCall[] = [];
  return {
    started,
    startCall: (workspaceId: string) => {
      const call = reads.startCall(workspaceId);
      calls.push(call);
      return call;
    },
    /** A read of the call, labelled; resolves once it starts, or is refused (its call ended). */
    read: (call: ReadCall, label: string) =>
      call.admit().then(
        (admission) => {
          started.push(label);
          admitted.set(label, admission);
        },
        (error: unknown) => expect(error).toBeInstanceOf(UnavailableError),
      ),
    release: (label: string) => admitted.get(label)!.release(),
    /** Lets admissions resolve (they are promises). */
    settle: () => new Promise((resolve) => setImmediate(resolve)),
    /** Ends every call, dropping the reads still waiting. */
    endAll: () => calls.forEach((call) => call.end()),
  };
}

it("runs a lone call's reads at once, and a workspace running several calls its share of them (at least a third)", async () => {
  const reads = new FairReads({ slots: 6, waitMs: NEVER, turnMs: NEVER });
  const { started, startCall, read, release, settle, endAll } = admissions(reads);
  const solo = startCall('solo');
  const labels = ['s1', 's2', 's3', 's4', 's5', 's6', 's7'];
  const done = Promise.all(labels.map((label) => read(solo, label)));
  await settle();
  expect(started).toEqual(labels.slice(0, 6));
  release('s1');
  await done;
  for (const label of labels.slice(1)) release(label);
  solo.end();

  const busy = [1, 2, 3, 4, 5, 6].map(() => startCall('busy'));
  busy.forEach((call, index) => void read(call, `b${index + 1}`));
  await settle();
  // Six running calls: 6 ÷ 6 is 1, a third of 6 is 2.
  expect(started.slice(7)).toEqual(['b1', 'b2']);
  expect(reads.waitingReads).toBe(4);
  endAll();
});

it('makes another workspace wait for the reads of the turn running, then starts its whole call; the busy workspace waits for that turn', async () => {
  const reads = new FairReads({ slots: 4, waitMs: NEVER, turnMs: NEVER });
  const { started, startCall, read, release, settle, endAll } = admissions(reads);
  // Eight calls: a share of 2 reads at once.
  const busy = Array.from({ length: 8 }, () => startCall('busy'));
  busy.forEach((call, index) => void read(call, `busy${index + 1}`));
  await settle();
  expect(started).toEqual(['busy1', 'busy2']);
  const quiet = startCall('quiet');
  for (const label of ['q1', 'q2', 'q3']) void read(quiet, label);
  release('busy1');
  await settle();
  // The busy turn starts nothing more once another workspace waits, and the quiet one waits for its running read.
  expect(started).toEqual(['busy1', 'busy2']);
  release('busy2');
  await settle();
  expect(started).toEqual(['busy1', 'busy2', 'q1', 'q2', 'q3']);
  release('q1');
  release('q2');
  await settle();
  expect(started).toHaveLength(5);
  release('q3');
  await settle();
  expect(started.slice(5)).toEqual(['busy3', 'busy4']);
  endAll();
});

it('gives the next turn to the waiting workspace that began a turn least recently', async () => {
  const reads = new FairReads({ slots: 1, waitMs: NEVER, turnMs: NEVER });
  const { started, startCall, read, release, settle, endAll } = admissions(reads);
  const a = startCall('a');
  // a2 waits from the start, before b's and c's reads: a was served, so they go first all the same.
  for (const [call, label] of [
    [a, 'a1'],
    [a, 'a2'],
    [startCall('b'), 'b1'],
    [startCall('c'), 'c1'],
  ] as const)
    void read(call, label);
  for (const label of ['a1', 'b1', 'c1']) {
    await settle();
    release(label);
  }
  await settle();
  expect(started).toEqual(['a1', 'b1', 'c1', 'a2']);
  endAll();
});

it('holds the next workspace back for the turn length at most: past it, its turn begins beside a long read', async () => {
  const reads = new FairReads({ slots: 2, waitMs: NEVER, turnMs: 50 });
  const { started, startCall, read, endAll } = admissions(reads);
  await read(startCall('long'), 'long');
  // The long read is still running when the next workspace's read starts.
  await read(startCall('next'), 'next');
  expect(started).toEqual(['long', 'next']);
  endAll();
});

it('lets a turn go on once the workspace it held back stopped waiting', async () => {
  const reads = new FairReads({ slots: 1, waitMs: 100, turnMs: NEVER });
  const { started, startCall, read, release, settle, endAll } = admissions(reads);
  await read(startCall('busy'), 'first');
  await expect(startCall('late').admit()).rejects.toThrow(UnavailableError);
  const later = read(startCall('busy'), 'later');
  await settle();
  expect(started).toEqual(['first']);
  release('first');
  await later;
  expect(started).toEqual(['first', 'later']);
  endAll();
});

it("gives turns round-robin through the store, a workspace's oldest call first", async () => {
  const events = await open();
  const holder = await holdPlace(events, 'holder');
  const order: string[] = [];
  const busy = [1, 2, 3].map((call) => readsOf(events, 'busy', [`busy${call}a`, `busy${call}b`], order));
  const calls = [...busy, readsOf(events, 'a', ['a1', 'a2'], order), readsOf(events, 'quiet', ['quiet'], order)];
  await holder.release();
  await Promise.all(calls);
  expect(order).toEqual(['busy1a', 'a1', 'quiet', 'busy1b', 'a2', 'busy2a', 'busy2b', 'busy3a', 'busy3b']);
});

it('fails a read that waits past the bound as unavailable, and the next read starts', async () => {
  const events = await open({ waitMs: 300 });
  const holder = await holdPlace(events, 'holder');
  await expect(readsOf(events, 'late', ['late'], [])).rejects.toThrow(UnavailableError);
  await holder.release();
  const order: string[] = [];
  await readsOf(events, 'next', ['next'], order);
  expect(order).toEqual(['next']);
});

it('drops the waiting reads of a call that ended', async () => {
  const events = await open();
  const holder = await holdPlace(events, 'holder');
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
  await holder.release();
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
