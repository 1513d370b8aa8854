import crypto from 'node:crypto';
import { chsql, settleUnsettledDays, type SettleOptions } from '@mail/event-store';
import { createTestEventDatabase, type TestEventDatabase } from '@mail/local';
import type { EngagementEventRow } from '../src/domain/columns';
import { EventWriter } from '../src/store/events';
import { eventRow, sleep } from './harness';

// Marks of unsettled days are cleared once the day's rollups are found to agree with its events (rebuilt first, when
// asked), and only then.
jest.setTimeout(90_000);
const { sql, uuid } = chsql;

let database: TestEventDatabase;
let store: EventWriter;

beforeAll(async () => {
  database = await createTestEventDatabase('ingestion_settle');
  store = new EventWriter(database.clickhouse);
});

afterAll(() => database?.close());

const DAY = '2026-03-05';
const seconds = (iso: string) => Date.parse(iso) / 1000;

/** Events of one workspace on DAY, opens and clicks on two links, ingested `ingestedAgoMs` before now. */
function events(workspaceId: string, count: number, ingestedAgoMs = 3_600_000): EngagementEventRow[] {
  const campaignId = crypto.randomUUID();
  const ingestedAt = Math.floor((Date.now() - ingestedAgoMs) / 1000);
  return Array.from({ length: count }, (_, index) => {
    const click = index % 2 === 1;
    const occurredAt = seconds(`${DAY}T10:00:00Z`) + index * 60;
    return eventRow({
      workspace_id: workspaceId,
      campaign_id: campaignId,
      event_type: click ? 'click' : 'open',
      email: `reader${index % 3}@example.com`,
      occurred_at: occurredAt,
      received_at: occurredAt + 5,
      url: click ? `https://example.com/${index % 4}` : null,
      provider_event_id: `${workspaceId}-${index}`,
      ingested_at: ingestedAt,
    });
  });
}

async function mark(workspaceId: string, markedAgoMs = 3_000_000): Promise<void> {
  await database.clickhouse.insert({
    table: 'unsettled_days',
    values: [{ workspace_id: workspaceId, day: DAY, marked_at: Math.floor((Date.now() - markedAgoMs) / 1000) }],
    format: 'JSONEachRow',
  });
}

async function marked(workspaceId: string): Promise<boolean> {
  const rows = await database.rows<{ n: string }>(
    sql`SELECT count() AS n FROM unsettled_days WHERE workspace_id = ${uuid(workspaceId)}`.text,
  );
  return Number(rows[0].n) > 0;
}

/** Clearing is a mutation, applied in the background. */
async function eventuallyUnmarked(workspaceId: string): Promise<boolean> {
  const deadline = Date.now() + 30_000;
  while ((await marked(workspaceId)) && Date.now() < deadline) await sleep(200);
  return !(await marked(workspaceId));
}

const settle = (options: SettleOptions = {}) => settleUnsettledDays(database.clickhouse, database.database, options);

type Pass = Awaited<ReturnType<typeof settleUnsettledDays>>;
const outcome = (pass: Pass, workspaceId: string) =>
  (['settled', 'disagreeing', 'busy'] as const).find((kind) =>
    pass[kind].some((day) => day.workspaceId === workspaceId && day.day === DAY),
  );
const rebuilt = (pass: Pass, workspaceId: string) => pass.rebuilt.some((day) => day.workspaceId === workspaceId);

/** What reads of the day see in the rollups: events and engaged addresses per type, clicks and addresses per link, events by address. */
async function derived(workspaceId: string) {
  const where = sql`workspace_id = ${uuid(workspaceId)}`;
  return {
    rollup: await database.rows(
      sql`SELECT toString(event_type) AS type, countMerge(events) AS events, uniqExactMerge(engaged_addresses) AS addresses
        FROM event_rollup_daily WHERE ${where} GROUP BY type ORDER BY type`.text,
    ),
    links: await database.rows(
      sql`SELECT url, countMerge(clicks) AS clicks, uniqExactMerge(addresses) AS addresses FROM link_rollup_daily WHERE ${where} GROUP BY url ORDER BY url`
        .text,
    ),
    byAddress: await database.rows(sql`SELECT uniqExact(provider_event_id) AS events FROM events_by_address WHERE ${where}`.text),
  };
}

describe('settleUnsettledDays', () => {
  it('clears the mark of a day whose rollups agree, as after an insert that timed out once committed', async () => {
    const workspaceId = crypto.randomUUID();
    await store.insertEvents(events(workspaceId, 8));
    await mark(workspaceId);
    expect(outcome(await settle(), workspaceId)).toBe('settled');
    expect(await eventuallyUnmarked(workspaceId)).toBe(true);
  });

  const FAULTS = ['event_rollup_daily_feed', 'link_rollup_daily_feed', 'events_by_address_feed', 'a copy of an event'];

  /** Stores six events of a new workspace with `fault`: one insert lost by a view, or one event stored twice. */
  async function storeWithFault(fault: string): Promise<{ workspaceId: string; rows: EngagementEventRow[] }> {
    const workspaceId = crypto.randomUUID();
    const rows = events(workspaceId, 6);
    await store.insertEvents(rows.slice(0, 5));
    if (fault === 'a copy of an event') {
      await store.insertEvents([...rows.slice(5), { ...rows[3], id: crypto.randomUUID() }]);
      return { workspaceId, rows };
    }
    // The view away for one insert: its table misses that insert's click, as when ClickHouse dies between the two.
    await database.clickhouse.command({ query: `DETACH TABLE ${fault}` });
    try {
      await store.insertEvents(rows.slice(5));
    } finally {
      await database.clickhouse.command({ query: `ATTACH TABLE ${fault}` });
    }
    return { workspaceId, rows };
  }

  it.each(FAULTS)('keeps the mark of a day that disagrees (%s) unless asked to rebuild it', async (fault) => {
    const { workspaceId } = await storeWithFault(fault);
    await mark(workspaceId);
    expect(outcome(await settle(), workspaceId)).toBe('disagreeing');
    await sleep(1_000);
    expect(await marked(workspaceId)).toBe(true);
  });

  it.each(FAULTS)('rebuilds a day that disagrees (%s), then clears its mark: its rollups read as if nothing had failed', async (fault) => {
    const { workspaceId, rows } = await storeWithFault(fault);
    // The same events stored without a fault, in another workspace.
    const intact = crypto.randomUUID();
    await store.insertEvents(rows.map((row) => ({ ...row, id: crypto.randomUUID(), workspace_id: intact })));
    await mark(workspaceId);
    const pass = await settle({ rebuild: true });
    expect([outcome(pass, workspaceId), rebuilt(pass, workspaceId)]).toEqual(['settled', true]);
    expect(await eventuallyUnmarked(workspaceId)).toBe(true);
    expect(await derived(workspaceId)).toEqual(await derived(intact));
  });

  it('leaves a day alone while its events still arrive', async () => {
    const workspaceId = crypto.randomUUID();
    await store.insertEvents(events(workspaceId, 4, 60_000));
    await mark(workspaceId);
    expect(outcome(await settle(), workspaceId)).toBe('busy');
    // Ten minutes later it is quiet, and agrees.
    const later = new Date(Date.now() + 11 * 60_000);
    expect(outcome(await settle({ now: later }), workspaceId)).toBe('settled');
    expect(await eventuallyUnmarked(workspaceId)).toBe(true);
  });
});
