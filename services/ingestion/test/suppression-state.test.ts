import { chsql, repairSuppressionStates } from '@mail/event-store';
import { createTestEventDatabase, uniqueSuffix } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import { storeEvents } from '../src/pipeline/runner';
import type { StoreDependencies } from '../src/pipeline/steps';
import { EventWriter } from '../src/store/events';
import { SuppressionStateStore } from '../src/store/suppressions';
import { engagementEvent, sourced, startIngestion, type Ingestion } from './harness';

// Ingestion keeps suppression_state current for the addresses of the signals it stores.
const { EventType, BounceType } = eventsV1;
const { sql, uuid } = chsql;
jest.setTimeout(90_000);

const DAY = 86_400_000;
const T0 = Date.parse('2026-10-01T00:00:00Z');

function bounces(p: string, categories: string[]): eventsV1.EngagementEvent[] {
  const bounce = (id: string, email: string, bounceType: eventsV1.BounceType, day: number) =>
    engagementEvent({
      providerEventId: `${p}-${id}`,
      email,
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType,
      categories,
      occurredAt: new Date(T0 + day * DAY),
    });
  return [
    bounce('hard', 'hard@example.com', BounceType.BOUNCE_TYPE_HARD, 3),
    ...[0, 10, 20].map((day) => bounce(`soft-${day}`, 'soft@example.com', BounceType.BOUNCE_TYPE_SOFT, day)),
    ...[0, 40].map((day) => bounce(`apart-${day}`, 'apart@example.com', BounceType.BOUNCE_TYPE_SOFT, day)),
    engagementEvent({ providerEventId: `${p}-open`, email: 'reader@example.com', categories }),
  ];
}

// apart@ (two soft bounces too far apart, never lifted) is not suppressed and has no row.
const expectedStates = [
  { email: 'hard@example.com', reason: 'hard_bounce', suppressed_ts: (T0 + 3 * DAY) / 1000, version: '1' },
  { email: 'soft@example.com', reason: 'soft_bounces', suppressed_ts: (T0 + 20 * DAY) / 1000, version: '3' },
];

const statesQuery = (workspaceId: string): string =>
  sql`SELECT email, reason, toUInt32(suppressed_at) AS suppressed_ts, version FROM suppression_state FINAL
    WHERE workspace_id = ${uuid(workspaceId)} ORDER BY email`.text;

describe('through Kafka', () => {
  let ingestion: Ingestion;

  beforeAll(async () => {
    ingestion = await startIngestion({ label: 'suppression_state' });
  });

  afterAll(async () => {
    await ingestion?.close();
  });

  it('writes the state of each signalled address, and the same rows again when the events come again', async () => {
    const p = `state-${uniqueSuffix()}`;
    const campaign = await ingestion.createCampaign(`cat-${p}`);
    const events = bounces(p, [`cat-${p}`]);
    await ingestion.produce(events);
    // Committed only once written: the state is there.
    await ingestion.waitUntilCaughtUp();
    expect(await ingestion.rows(statesQuery(campaign.workspaceId))).toEqual(expectedStates);

    await ingestion.produce(events);
    await ingestion.waitUntilCaughtUp();
    expect(await ingestion.rows(statesQuery(campaign.workspaceId))).toEqual(expectedStates);
  });
});

describe('a batch that fails between storing its signals and refreshing the state', () => {
  /** The real store, with the ClickHouse write failing once, as when the process dies at that point. */
  class FailingOnce extends SuppressionStateStore {
    failed = false;
    override async refresh(...args: Parameters<SuppressionStateStore['refresh']>): Promise<void> {
      if (!this.failed) {
        this.failed = true;
        throw new Error('connection lost');
      }
      return super.refresh(...args);
    }
  }

  it('is repaired by its redelivery', async () => {
    const database = await createTestEventDatabase('ingestion_suppression_state');
    const { clickhouse } = database;
    try {
      const workspaceId = crypto.randomUUID();
      const campaignId = crypto.randomUUID();
      const deps: StoreDependencies = {
        resolve: (ids) =>
          Promise.resolve(new Map([...ids].map((id) => [id, { providerCategoryId: id, campaignId, workspaceId, variantIds: [] }]))),
        writer: new EventWriter(clickhouse),
        suppressions: new FailingOnce(clickhouse),
      };
      const events = bounces('crash', ['cat']);
      const rows = async () => (await clickhouse.query({ query: statesQuery(workspaceId), format: 'JSONEachRow' })).json();

      expect(await storeEvents(sourced(events), deps)).toMatchObject({ kind: 'retry', error: { message: 'connection lost' } });
      const signals = await clickhouse.query({ query: 'SELECT count() AS n FROM suppression_signals', format: 'JSONEachRow' });
      expect(await signals.json()).toEqual([{ n: '6' }]);
      expect(await rows()).toEqual([]);

      expect(await storeEvents(sourced(events), deps)).toMatchObject({ kind: 'ok' });
      expect(await rows()).toEqual(expectedStates);
    } finally {
      await database.close();
    }
  });
});

describe('a batch larger than ClickHouse takes as a list of literals', () => {
  it('stores 30,000 hard bounces of distinct addresses and suppresses each of them', async () => {
    const database = await createTestEventDatabase('ingestion_large_batch');
    const { clickhouse } = database;
    try {
      const workspaceId = crypto.randomUUID();
      const deps: StoreDependencies = {
        resolve: (ids) =>
          Promise.resolve(
            new Map([...ids].map((id) => [id, { providerCategoryId: id, campaignId: crypto.randomUUID(), workspaceId, variantIds: [] }])),
          ),
        writer: new EventWriter(clickhouse),
        suppressions: new SuppressionStateStore(clickhouse),
      };
      const events = Array.from({ length: 30_000 }, (_, i) =>
        engagementEvent({
          providerEventId: `large-${i}`,
          email: `bounced-${i}@example.com`,
          eventType: EventType.EVENT_TYPE_BOUNCE,
          bounceType: BounceType.BOUNCE_TYPE_HARD,
          categories: ['cat'],
          occurredAt: new Date(T0 + i * 1000),
        }),
      );
      expect(await storeEvents(sourced(events), deps)).toMatchObject({
        kind: 'ok',
        value: { inserted: 30_000, duplicates: 0, signals: 30_000 },
      });
      expect(await storeEvents(sourced(events), deps)).toMatchObject({ kind: 'ok', value: { inserted: 0, duplicates: 30_000 } });
      const count = async (query: string) =>
        Number((await (await clickhouse.query({ query, format: 'JSONEachRow' })).json<{ n: string }>())[0].n);
      expect(await count('SELECT count() AS n FROM events')).toBe(30_000);
      expect(await count(`SELECT count() AS n FROM suppression_state FINAL WHERE reason = 'hard_bounce'`)).toBe(30_000);
    } finally {
      await database.close();
    }
  });
});

describe('states behind their signals (a batch that reached this replica after ingestion moved on)', () => {
  /** The real store, computing no state: the states were computed on a replica that lacked these signals. */
  class ComputedElsewhere extends SuppressionStateStore {
    override refresh(): Promise<void> {
      return Promise.resolve();
    }
  }

  it('repairSuppressionStates recomputes exactly those addresses, and then finds none', async () => {
    const database = await createTestEventDatabase('ingestion_suppression_repair');
    const { clickhouse } = database;
    try {
      const workspaceId = crypto.randomUUID();
      const deps = (suppressions: SuppressionStateStore): StoreDependencies => ({
        resolve: (ids) =>
          Promise.resolve(
            new Map([...ids].map((id) => [id, { providerCategoryId: id, campaignId: crypto.randomUUID(), workspaceId, variantIds: [] }])),
          ),
        writer: new EventWriter(clickhouse),
        suppressions,
      });
      const rows = async () => (await clickhouse.query({ query: statesQuery(workspaceId), format: 'JSONEachRow' })).json();
      expect(await storeEvents(sourced(bounces('first', ['cat'])), deps(new SuppressionStateStore(clickhouse)))).toMatchObject({
        kind: 'ok',
      });
      expect(await rows()).toEqual(expectedStates);

      const event = (
        id: string,
        email: string,
        eventType: eventsV1.EventType,
        day: number,
        bounceType = BounceType.BOUNCE_TYPE_UNSPECIFIED,
      ) =>
        engagementEvent({
          providerEventId: `late-${id}`,
          email,
          eventType,
          bounceType,
          categories: ['cat'],
          occurredAt: new Date(T0 + day * DAY),
        });
      const late = [
        event('unsubscribe', 'apart@example.com', EventType.EVENT_TYPE_UNSUBSCRIBE, 50),
        event('hard', 'new@example.com', EventType.EVENT_TYPE_BOUNCE, 5, BounceType.BOUNCE_TYPE_HARD),
        event('soft', 'soft@example.com', EventType.EVENT_TYPE_BOUNCE, 25, BounceType.BOUNCE_TYPE_SOFT),
      ];
      expect(await storeEvents(sourced(late), deps(new ComputedElsewhere(clickhouse)))).toMatchObject({ kind: 'ok' });
      expect(await rows()).toEqual(expectedStates);

      const repaired = await repairSuppressionStates(clickhouse);
      expect(repaired.map((address) => address.email).sort()).toEqual(['apart@example.com', 'new@example.com', 'soft@example.com']);
      expect(repaired.every((address) => address.workspaceId === workspaceId)).toBe(true);
      expect(await rows()).toEqual([
        { email: 'apart@example.com', reason: 'unsubscribe', suppressed_ts: (T0 + 50 * DAY) / 1000, version: '3' },
        expectedStates[0],
        { email: 'new@example.com', reason: 'hard_bounce', suppressed_ts: (T0 + 5 * DAY) / 1000, version: '1' },
        { ...expectedStates[1], version: '4' },
      ]);
      expect(await repairSuppressionStates(clickhouse)).toEqual([]);
    } finally {
      await database.close();
    }
  });
});
