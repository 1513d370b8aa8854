import crypto from 'node:crypto';
import { EVENT_BATCH_SCHEMA, createClient, createKafka, createLogger, ensureTopics } from '@mail/common';
import { chsql, createClickHouse } from '@mail/event-store';
import { createTestEventDatabase, infraEnv, uniqueSuffix, type TestEventDatabase } from '@mail/local';
import { campaignV1, eventsV1 } from '@mail/proto';
import { decode } from '../src/domain/batch';
import type { ConsumedRecord, PoisonRecord, Sourced } from '../src/domain/records';
import { byTable, type BatchRows } from '../src/domain/rows';
import { eventId } from '../src/domain/events';
import { CategoryResolver, type CategoryMatch } from '../src/grpc/categories';
import {
  commit,
  deduplicate,
  markUnsettled,
  resolveCampaigns,
  sendToDeadLetters,
  store,
  suppress,
  type StoreDependencies,
} from '../src/pipeline/steps';
import type { EngagementEventRow } from '../src/domain/columns';
import { EventWriter } from '../src/store/events';
import { SuppressionStateStore } from '../src/store/suppressions';
import { UnsettledDays, workspaceDays, type WorkspaceDay } from '../src/store/unsettled';
import { engagementEvent, sourced } from './harness';

// Each step's outcomes, against the real ClickHouse and Kafka; "down" is a server address nothing listens on.
jest.setTimeout(60_000);
const { EventType, BounceType } = eventsV1;
const { sql, uuid } = chsql;
const unreachable = createClickHouse('http://127.0.0.1:1', 'mail');
/** What a step answers while ClickHouse refuses connections. */
const refused = (unsettledDays: WorkspaceDay[] = []) => ({
  kind: 'retry',
  error: expect.objectContaining({ code: 'ECONNREFUSED' }),
  unsettledDays,
});

let database: TestEventDatabase;
let live: StoreDependencies;
let down: StoreDependencies;
const workspaceId = crypto.randomUUID();
const campaignId = crypto.randomUUID();
const matchAll = (ids: Iterable<string>): Promise<Map<string, CategoryMatch>> =>
  Promise.resolve(new Map([...ids].map((id) => [id, { providerCategoryId: id, campaignId, workspaceId, variantIds: [] }])));

beforeAll(async () => {
  database = await createTestEventDatabase('ingestion_steps');
  live = { resolve: matchAll, writer: new EventWriter(database.clickhouse), suppressions: new SuppressionStateStore(database.clickhouse) };
  down = { resolve: matchAll, writer: new EventWriter(unreachable), suppressions: new SuppressionStateStore(unreachable) };
});

afterAll(async () => {
  await unreachable.close();
  await database.close();
});

const record = (value: Buffer | null, fields: Partial<ConsumedRecord> = {}): ConsumedRecord => ({
  partition: 0,
  offset: '0',
  key: Buffer.from('someone@example.com'),
  value,
  schema: undefined,
  ...fields,
});
const encode = (event: eventsV1.EngagementEvent): Buffer => Buffer.from(eventsV1.EngagementEvent.encode(event).finish());

/** The rows resolveCampaigns makes of the events, by table, for the ClickHouse steps. */
async function rowsOf(events: eventsV1.EngagementEvent[], deps: StoreDependencies = live): Promise<BatchRows> {
  const rows = await resolveCampaigns(sourced(events), deps);
  if (rows.kind !== 'ok') throw new Error('resolving failed');
  return byTable(rows.value);
}

/** An events row as resolveCampaigns makes it, with its source. */
async function rowOf(event: eventsV1.EngagementEvent): Promise<Sourced<EngagementEventRow>> {
  return (await rowsOf([event])).events[0];
}

describe('decode', () => {
  it('lets each event through once, dead-letters what cannot be decoded and drops repeats within the batch', () => {
    const first = engagementEvent({ providerEventId: 'a', url: 'first copy' });
    const last = { ...first, url: 'last copy' };
    const other = engagementEvent({ providerEventId: 'b' });
    const noEmail = engagementEvent({ providerEventId: 'c', email: '' });
    const batchRecord = eventsV1.EngagementEventBatch.encode({ events: [encode(other), encode(noEmail)] }).finish();
    const results = decode([
      record(encode(first), { offset: '10' }),
      record(Buffer.from('garbage'), { partition: 3, offset: '11', key: Buffer.from('k') }),
      record(Buffer.from(batchRecord), { offset: '12', schema: EVENT_BATCH_SCHEMA }),
      record(encode(last), { offset: '13' }),
    ]);
    expect(results.filter((result) => result.kind === 'ok')).toEqual([
      {
        kind: 'ok',
        value: { event: last, source: { partition: 0, offset: '13', key: Buffer.from('someone@example.com'), value: encode(last) } },
      },
      {
        kind: 'ok',
        value: {
          event: other,
          source: { partition: 0, offset: '12', key: Buffer.from('someone@example.com'), value: encode(other), eventIndex: 0 },
        },
      },
    ]);
    expect(results.filter((result) => result.kind === 'drop')).toEqual([{ kind: 'drop', reason: 'repeated in the batch' }]);
    const poison = results.flatMap((result) => (result.kind === 'dead-letter' ? [result.poison] : []));
    expect(poison.map(({ partition, offset, key, eventIndex, reason }) => ({ partition, offset, key, eventIndex, reason }))).toEqual([
      {
        partition: 3,
        offset: '11',
        key: Buffer.from('k'),
        eventIndex: undefined,
        reason: expect.stringMatching(/^not an EngagementEvent/),
      },
      { partition: 0, offset: '12', key: Buffer.from('someone@example.com'), eventIndex: 1, reason: 'email is empty' },
    ]);
    // A whole record's bytes, or the one event's of a batch record.
    expect(Buffer.from(poison[0].value).toString()).toBe('garbage');
    expect(Buffer.from(poison[1].value).equals(encode(noEmail))).toBe(true);
  });
});

describe('markUnsettled', () => {
  const days = [{ workspaceId, day: '2026-10-01' }];

  it('marks the days owed', async () => {
    const unsettled = new UnsettledDays(database.clickhouse);
    expect(await markUnsettled([], () => Promise.reject(new Error('not called')))).toEqual({ kind: 'ok', value: undefined });
    expect(await markUnsettled(days, (owed) => unsettled.mark(owed))).toEqual({ kind: 'ok', value: undefined });
    const marked = await database.rows<{ day: string }>(
      sql`SELECT toString(day) AS day FROM unsettled_days WHERE workspace_id = ${uuid(workspaceId)}`.text,
    );
    expect(marked).toEqual([{ day: '2026-10-01' }]);
  });

  it('retries while ClickHouse is down, still owing the days', async () => {
    const unsettled = new UnsettledDays(unreachable);
    expect(await markUnsettled(days, (owed) => unsettled.mark(owed))).toEqual(refused(days));
  });
});

describe('sendToDeadLetters', () => {
  const poison: PoisonRecord[] = [
    { partition: 0, offset: '7', key: null, value: Buffer.from('garbage'), reason: 'not an EngagementEvent' },
  ];

  it('sends the poison to Kafka, and retries while the producer cannot', async () => {
    const logger = createLogger('steps-test', process.env.LOG_LEVEL ?? 'silent');
    const kafka = createKafka('steps-test', infraEnv().kafkaBrokers, logger);
    const topic = `steps-dlq-${uniqueSuffix()}`;
    const admin = kafka.admin();
    await admin.connect();
    await ensureTopics(admin, [{ topic, numPartitions: 1, replicationFactor: 1 }]);
    const producer = kafka.producer();
    await producer.connect();
    const send = async (letters: PoisonRecord[]) => {
      await producer.send({ topic, messages: letters.map(({ value }) => ({ value })) });
    };
    try {
      expect(await sendToDeadLetters([], send)).toEqual({ kind: 'ok', value: 0 });
      expect(await sendToDeadLetters(poison, send)).toEqual({ kind: 'ok', value: 1 });
      expect((await admin.fetchTopicOffsets(topic))[0].high).toBe('1');
      await producer.disconnect();
      expect(await sendToDeadLetters(poison, send)).toEqual({ kind: 'retry', error: expect.any(Error), unsettledDays: [] });
    } finally {
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    }
  });
});

describe('resolveCampaigns', () => {
  it('makes each event the rows of its tables, by the campaign its first naming category names', async () => {
    const open = engagementEvent({ providerEventId: 'open', categories: ['unknown', 'cat'] });
    const bounce = engagementEvent({
      providerEventId: 'bounce',
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      categories: ['cat'],
    });
    const spam = engagementEvent({ providerEventId: 'spam', eventType: EventType.EVENT_TYPE_SPAM_REPORT, categories: ['cat'] });
    const stray = engagementEvent({ providerEventId: 'stray', categories: ['unknown'] });
    const resolve = (ids: Iterable<string>) => matchAll([...ids].filter((id) => id !== 'unknown'));
    const rows = await rowsOf([open, bounce, spam, stray], { ...live, resolve });
    expect(rows.events.map(({ row }) => [row.provider_event_id, row.event_type, row.campaign_id])).toEqual([
      ['open', 'open', campaignId],
      ['bounce', 'bounce', campaignId],
      ['spam', 'spamreport', campaignId],
    ]);
    expect(rows.signals.map(({ row }) => [row.provider_event_id, row.reason])).toEqual([
      ['bounce', 'hard_bounce'],
      ['spam', 'spam_report'],
    ]);
    expect(rows.unmatched.map(({ row }) => row.provider_event_id)).toEqual(['stray']);
  });

  it('retries while the campaign service is unreachable', async () => {
    const categories = new CategoryResolver(
      createClient(campaignV1.CampaignServiceClient, '127.0.0.1:1'),
      60_000,
      createLogger('steps-test', 'silent'),
    );
    try {
      const event = engagementEvent({ providerEventId: 'unresolved', categories: ['cat'] });
      expect(await resolveCampaigns(sourced([event]), { ...live, resolve: (ids) => categories.resolve(ids) })).toEqual({
        kind: 'retry',
        error: expect.any(Error),
        unsettledDays: [],
      });
    } finally {
      categories.close();
    }
  });
});

describe('suppress', () => {
  it('stores the signals and the state of their addresses, and retries while ClickHouse is down', async () => {
    const bounce = engagementEvent({
      providerEventId: `suppress-${uniqueSuffix()}`,
      email: 'bounced@example.com',
      eventType: EventType.EVENT_TYPE_BOUNCE,
      bounceType: BounceType.BOUNCE_TYPE_HARD,
      categories: ['cat'],
    });
    const { signals } = await rowsOf([bounce]);
    expect(await suppress(signals, down)).toEqual(refused());
    expect(await suppress(signals, live)).toEqual({ kind: 'ok', value: [{ kind: 'ok', value: signals[0] }] });
    const states = await database.rows<{ email: string; reason: string }>(
      sql`SELECT email, reason FROM suppression_state FINAL WHERE workspace_id = ${uuid(workspaceId)}`.text,
    );
    expect(states).toEqual([{ email: 'bounced@example.com', reason: 'hard_bounce' }]);
  });
});

describe('suppress, a long address', () => {
  it('stores the signal of an address of thousands of non-ASCII characters (the query limit counts bytes)', async () => {
    const email = 'é🎉'.repeat(6_000);
    const { signals } = await rowsOf([
      engagementEvent({
        providerEventId: `long-${uniqueSuffix()}`,
        email,
        eventType: EventType.EVENT_TYPE_UNSUBSCRIBE,
        categories: ['cat'],
      }),
    ]);
    expect(await suppress(signals, live)).toEqual({ kind: 'ok', value: [{ kind: 'ok', value: signals[0] }] });
    const states = await database.rows<{ reason: string }>(
      sql`SELECT reason FROM suppression_state FINAL WHERE workspace_id = ${uuid(workspaceId)} AND email = ${chsql.str(email)}`.text,
    );
    expect(states).toEqual([{ reason: 'unsubscribe' }]);
  });
});

describe('deduplicate and store', () => {
  it('stores fresh events, answering their days, and drops them once stored', async () => {
    const p = `dedup-${uniqueSuffix()}`;
    const [stored, fresh] = await Promise.all(
      ['stored', 'fresh'].map((name) =>
        rowOf(engagementEvent({ providerEventId: `${p}-${name}`, categories: ['cat'], occurredAt: new Date('2026-10-05T12:00:00Z') })),
      ),
    );
    expect(await store([stored], [], live)).toEqual({
      kind: 'ok',
      value: { written: [{ workspaceId, day: '2026-10-05' }], owed: [], inserted: 1, unmatched: 0, refused: [] },
    });

    const checked = await deduplicate([stored, fresh], live);
    expect(checked).toEqual({
      kind: 'ok',
      value: [
        { kind: 'drop', reason: 'stored already' },
        { kind: 'ok', value: fresh },
      ],
    });
    const ids = await database.rows<{ id: string }>(sql`SELECT id FROM events WHERE provider_event_id LIKE ${chsql.str(`${p}-%`)}`.text);
    expect(ids).toEqual([{ id: eventId(engagementEvent({ providerEventId: `${p}-stored` })) }]);
  });

  it('retries while ClickHouse is down, a failed events insert owing its days', async () => {
    const row = await rowOf(engagementEvent({ providerEventId: `down-${uniqueSuffix()}`, categories: ['cat'] }));
    expect(await deduplicate([row], down)).toEqual(refused());
    expect(await store([row], [], down)).toEqual(refused(workspaceDays([row.row])));
  });

  it('retries without owing days when only the unmatched insert fails', async () => {
    const { unmatched } = await rowsOf([engagementEvent({ providerEventId: 'stray', categories: ['unknown'] })], {
      ...live,
      resolve: () => Promise.resolve(new Map()),
    });
    expect(await store([], unmatched, down)).toEqual(refused());
  });
});

describe('store, a row refused', () => {
  it('dead-letters the rows ClickHouse refuses on their own, stores the others, and owes the days of the failed insert', async () => {
    const p = `refused-${uniqueSuffix()}`;
    const occurredAt = new Date('2026-10-07T12:00:00Z');
    const rows = await Promise.all(
      Array.from({ length: 7 }, (_, i) => rowOf(engagementEvent({ providerEventId: `${p}-${i}`, categories: ['cat'], occurredAt }))),
    );
    // What checkRows would have kept out: ClickHouse refuses a variant_id that is no UUID.
    const refusedAt = new Set([1, 4]);
    const batch = rows.map((row, i) => (refusedAt.has(i) ? { ...row, row: { ...row.row, variant_id: 'not-a-uuid' } } : row));
    const days = [{ workspaceId, day: '2026-10-07' }];
    expect(await store(batch, [], live)).toEqual({
      kind: 'ok',
      value: {
        written: days,
        owed: days,
        inserted: 5,
        unmatched: 0,
        refused: [1, 4].map((i) => ({
          ...rows[i].source,
          reason: expect.stringMatching(/^ClickHouse refused the row \(error (376|27)\): /),
        })),
      },
    });
    const stored = await database.rows<{ provider_event_id: string }>(
      sql`SELECT provider_event_id FROM events WHERE provider_event_id LIKE ${chsql.str(`${p}-%`)} ORDER BY provider_event_id`.text,
    );
    expect(stored.map((row) => row.provider_event_id)).toEqual([0, 2, 3, 5, 6].map((i) => `${p}-${i}`));
  });
});

describe('commit', () => {
  const written = [{ workspaceId, day: '2026-10-05' }];

  it('commits, or retries owing the days written: another owner may write them again', async () => {
    expect(await commit(written, () => Promise.resolve())).toEqual({ kind: 'ok', value: undefined });
    const rebalancing = new Error('The group is rebalancing');
    expect(await commit(written, () => Promise.reject(rebalancing))).toEqual({ kind: 'retry', error: rebalancing, unsettledDays: written });
  });
});
