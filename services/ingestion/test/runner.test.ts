import crypto from 'node:crypto';
import { createLogger } from '@mail/common';
import { chsql } from '@mail/event-store';
import { createTestEventDatabase, uniqueSuffix, type TestEventDatabase } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import type { ConsumedRecord, PoisonRecord } from '../src/domain/records';
import { runBatch, type BatchDependencies, type ConsumedBatch } from '../src/pipeline/runner';
import { EventWriter } from '../src/store/events';
import { SuppressionStateStore } from '../src/store/suppressions';
import { UnsettledDays } from '../src/store/unsettled';
import { engagementEvent } from './harness';

// The runner over real ClickHouse: the order of its steps, and what it leaves when it gives a batch up.
jest.setTimeout(60_000);
const { sql, uuid } = chsql;

let database: TestEventDatabase;
beforeAll(async () => {
  database = await createTestEventDatabase('ingestion_runner');
});
afterAll(() => database.close());

function dependencies(workspaceId: string, journal: string[]): BatchDependencies {
  const unsettled = new UnsettledDays(database.clickhouse);
  return {
    resolve: (ids) =>
      Promise.resolve(
        new Map([...ids].map((id) => [id, { providerCategoryId: id, campaignId: crypto.randomUUID(), workspaceId, variantIds: [] }])),
      ),
    writer: new EventWriter(database.clickhouse),
    suppressions: new SuppressionStateStore(database.clickhouse),
    sendToDeadLetters: (poison: PoisonRecord[]) => {
      journal.push(`dead-lettered ${poison.length}`);
      return Promise.resolve();
    },
    markUnsettled: async (days) => {
      journal.push(`marked ${days.map((day) => day.day).join(',')}`);
      await unsettled.mark(days);
    },
    logger: createLogger('runner-test', process.env.LOG_LEVEL ?? 'silent'),
  };
}

const records = (events: eventsV1.EngagementEvent[]): ConsumedRecord[] =>
  events.map((event, i) => ({
    partition: 0,
    offset: String(i),
    key: null,
    value: Buffer.from(eventsV1.EngagementEvent.encode(event).finish()),
    schema: undefined,
  }));

const opens = (p: string) =>
  ['2026-10-01T10:00:00Z', '2026-10-02T10:00:00Z'].map((time, i) =>
    engagementEvent({ providerEventId: `${p}-${i}`, categories: ['cat'], occurredAt: new Date(time) }),
  );

it('dead-letters the poison, stores the events, then commits', async () => {
  const workspaceId = crypto.randomUUID();
  const journal: string[] = [];
  const events = opens(`runner-${uniqueSuffix()}`);
  const batch: ConsumedBatch = {
    records: [
      ...records([...events, events[0]]),
      { partition: 0, offset: '9', key: null, value: Buffer.from('garbage'), schema: undefined },
    ],
    commitOffsets: async () => {
      const stored = await database.rows(sql`SELECT id FROM events WHERE workspace_id = ${uuid(workspaceId)}`.text);
      journal.push(`committed after ${stored.length} stored`);
    },
    isRunning: () => true,
    heartbeat: () => Promise.resolve(),
  };
  const outcome = await runBatch(batch, dependencies(workspaceId, journal));
  expect(outcome).toMatchObject({
    consumed: 4,
    repeated: 1,
    deadLettered: { undecodable: 1, invalid_row: 0, refused_by_clickhouse: 0 },
    stored: { inserted: 2, duplicates: 0 },
  });
  expect(journal).toEqual(['dead-lettered 1', 'committed after 2 stored']);
});

it('marks the days written before retrying a failed commit: another owner may have written them again', async () => {
  const workspaceId = crypto.randomUUID();
  const journal: string[] = [];
  const batch: ConsumedBatch = {
    records: records(opens(`recommit-${uniqueSuffix()}`)),
    commitOffsets: () => {
      const failed = !journal.includes('commit failed');
      journal.push(failed ? 'commit failed' : 'committed');
      return failed ? Promise.reject(new Error('The group is rebalancing')) : Promise.resolve();
    },
    isRunning: () => true,
    heartbeat: () => Promise.resolve(),
  };
  const outcome = await runBatch(batch, dependencies(workspaceId, journal));
  expect(journal).toEqual(['commit failed', 'marked 2026-10-01,2026-10-02', 'committed']);
  // The retry found its events stored.
  expect(outcome.stored).toMatchObject({ inserted: 0, duplicates: 2 });
});

it('gives the batch up uncommitted when the consumer stops, its days marked for the next owner', async () => {
  const workspaceId = crypto.randomUUID();
  const journal: string[] = [];
  const batch: ConsumedBatch = {
    records: records(opens(`stopping-${uniqueSuffix()}`)),
    commitOffsets: () => {
      journal.push('commit failed');
      return Promise.reject(new Error('The group is rebalancing'));
    },
    isRunning: () => false,
    heartbeat: () => Promise.resolve(),
  };
  await expect(runBatch(batch, dependencies(workspaceId, journal))).rejects.toThrow('consumer stopping');
  expect(journal).toEqual(['commit failed', 'marked 2026-10-01,2026-10-02']);
  const marked = await database.rows(sql`SELECT day FROM unsettled_days WHERE workspace_id = ${uuid(workspaceId)}`.text);
  expect(marked).toHaveLength(2);
});

it('dead-letters an event with a row its table would not take, before any insert, and stores the others', async () => {
  const workspaceId = crypto.randomUUID();
  const journal: string[] = [];
  const p = `invalid-row-${uniqueSuffix()}`;
  const broken = engagementEvent({ providerEventId: `${p}-broken`, categories: ['broken'], occurredAt: new Date('2026-10-01T10:00:00Z') });
  const deps = dependencies(workspaceId, journal);
  const dead: PoisonRecord[] = [];
  const batch: ConsumedBatch = {
    records: records([...opens(p), broken]),
    commitOffsets: async () => {
      const stored = await database.rows(sql`SELECT id FROM events WHERE workspace_id = ${uuid(workspaceId)}`.text);
      journal.push(`committed after ${stored.length} stored`);
    },
    isRunning: () => true,
    heartbeat: () => Promise.resolve(),
  };
  const outcome = await runBatch(batch, {
    ...deps,
    // A campaign service answering a workspace id that is no UUID: the events table would refuse the row.
    resolve: async (ids) => {
      const matches = await deps.resolve(ids);
      if (matches.has('broken')) matches.set('broken', { ...matches.get('broken')!, workspaceId: 'not-a-uuid' });
      return matches;
    },
    sendToDeadLetters: async (poison) => {
      dead.push(...poison);
      await deps.sendToDeadLetters(poison);
    },
  });
  expect(outcome).toMatchObject({
    deadLettered: { undecodable: 0, invalid_row: 1, refused_by_clickhouse: 0 },
    stored: { inserted: 2 },
  });
  expect(journal).toEqual(['dead-lettered 1', 'committed after 2 stored']);
  expect(dead).toEqual([
    {
      partition: 0,
      offset: '2',
      key: null,
      value: Buffer.from(eventsV1.EngagementEvent.encode(broken).finish()),
      reason: 'events.workspace_id is not a UUID',
    },
  ]);
});
