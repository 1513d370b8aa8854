import crypto from 'node:crypto';
import { NO_RUN, NO_VARIANT } from '@mail/event-store';
import { createTestEventDatabase, type TestEventDatabase } from '@mail/local';
import { EventWriter, lookupRanges, toTabSeparated, tsvCell } from '../src/store/events';
import type { ColumnKind, EngagementEventRow, SuppressionSignalRow, UnmatchedEventRow } from '../src/domain/columns';
import { eventRow } from './harness';

/** Strings that end, split or corrupt a TabSeparated field, or a quoted array element, unless escaped. */
const HOSTILE = [
  'tab\there',
  'new\nline',
  'carriage\rreturn',
  'nul\u0000byte',
  'back\\slash',
  'trailing backslash\\',
  '\\t is not a tab',
  '\\N',
  '\\',
  "single ' quote",
  '"double" quotes',
  "['not', 'an', 'array']",
  '\u0001\u0002\u0007\u0008\u000b\u000c\u001b\u001f\u007f controls',
  'ünïcödé – 日本語 – 🎉 emoji',
  '',
  ' leading and trailing spaces ',
  "'); DROP TABLE events; --",
];

let database: TestEventDatabase;
let store: EventWriter;

beforeAll(async () => {
  database = await createTestEventDatabase('ingestion_store');
  store = new EventWriter(database.clickhouse);
});

afterAll(async () => {
  await database?.close();
});

const rows = <T>(query: string): Promise<T[]> => database.rows<T>(query);

describe('tsvCell', () => {
  const text: ColumnKind = { type: 'String', nullable: true };
  const time: ColumnKind = { type: 'DateTime' };
  it.each<[Parameters<typeof tsvCell>[0], ColumnKind, string]>([
    ['plain', text, 'plain'],
    ['a\tb\nc\rd\u0000e\\f', text, 'a\\tb\\nc\\rd\\0e\\\\f'],
    ["it's", text, "it's"],
    [null, text, '\\N'],
    ['\\N', text, '\\\\N'],
    [4_294_967_295, time, '4294967295'],
    // Ten digits, always: 18.16 reads a DateTime whose fifth character is no digit as 'YYYY-MM-DD hh:mm:ss'.
    [1_000, time, '0000001000'],
    [0, time, '0000000000'],
    [1, { type: 'UInt8 flag' }, '1'],
    [["it's", 'a\tb', 'c\\d'], { type: 'Array(String)' }, "['it\\'s','a\\tb','c\\\\d']"],
    [[], { type: 'Array(String)' }, '[]'],
  ])('writes %j (%j) as %j', (value, kind, expected) => {
    expect(tsvCell(value, kind)).toBe(expected);
  });
});

describe('toTabSeparated', () => {
  it('writes rows over many chunks exactly as one text would be', () => {
    const rows = Array.from({ length: 3_000 }, (_, i) => ({
      n: i,
      text: `${HOSTILE[i % HOSTILE.length]} ${'é🎉'.repeat(i % 40)}`,
      none: null,
    }));
    const columns = { n: { type: 'DateTime' }, text: { type: 'String' }, none: { type: 'String', nullable: true } } as const;
    const names = ['n', 'text', 'none'] as const;
    const oneText = rows.map((row) => `${names.map((name) => tsvCell(row[name], columns[name])).join('\t')}\n`).join('');
    expect(oneText.length).toBeGreaterThan(3 * 65_536);
    expect(toTabSeparated(rows, columns).equals(Buffer.from(oneText, 'utf8'))).toBe(true);
  });
});

describe('EventWriter inserts (TabSeparated)', () => {
  it('stores hostile strings in every string column exactly as given', async () => {
    const workspaceId = crypto.randomUUID();
    const events: EngagementEventRow[] = HOSTILE.map((text, i) => ({
      id: crypto.randomUUID(),
      workspace_id: workspaceId,
      campaign_id: crypto.randomUUID(),
      variant_id: NO_VARIANT,
      event_type: 'click',
      bounce_type: 'none',
      bounce_class: 'none',
      machine_open: 0,
      email: `${text}@example.com`,
      // Times of one to five digits among them: each is read right, and so is the cell after it.
      occurred_at: i % 2 === 0 ? 1_763_719_200 + i : 7 ** (i % 6),
      received_at: i % 3 === 0 ? 1_763_719_300 : 10 ** (i % 5),
      url: text,
      reason: i % 2 === 0 ? text : null,
      user_agent: text,
      ip: text,
      provider: 'sendgrid',
      provider_event_id: `hostile-${i}-${text}`,
      provider_message_id: i % 2 === 0 ? null : text,
      raw: JSON.stringify({ text }) + text,
      ingested_at: 1_763_719_400,
      run_id: NO_RUN,
    }));
    await store.insertEvents(events);

    const stored = await rows<
      Omit<EngagementEventRow, 'occurred_at' | 'received_at' | 'ingested_at'> &
        Record<'occurred_at' | 'received_at' | 'ingested_at', number>
    >(
      `SELECT toString(id) AS id, toString(workspace_id) AS workspace_id, toString(campaign_id) AS campaign_id,
        toString(variant_id) AS variant_id, event_type, bounce_type, bounce_class, machine_open, email,
        toUnixTimestamp(occurred_at) AS occurred_at, toUnixTimestamp(received_at) AS received_at, url, reason, user_agent, ip, provider,
        provider_event_id, provider_message_id, raw, toUnixTimestamp(ingested_at) AS ingested_at, toString(run_id) AS run_id
      FROM events WHERE workspace_id = '${workspaceId}' /* the String alias */`,
    );
    const byId = new Map(
      stored.map((row) => [
        row.id,
        { ...row, occurred_at: Number(row.occurred_at), received_at: Number(row.received_at), ingested_at: Number(row.ingested_at) },
      ]),
    );
    expect(byId.size).toBe(events.length);
    for (const event of events) expect(byId.get(event.id)).toEqual(event);
  });

  it('stores hostile categories and the whole DateTime range in unmatched_events and suppression_signals', async () => {
    const prefix = `unmatched-${crypto.randomUUID()}`;
    const unmatched: UnmatchedEventRow[] = [
      { categories: HOSTILE, occurred_at: 0, received_at: 4_294_967_295 },
      { categories: [], occurred_at: 86_400, received_at: 1_763_719_200 },
      { categories: ['x'], occurred_at: 1_000, received_at: 1 },
      { categories: ['\t'], occurred_at: 9_999, received_at: 42 },
    ].map((fields, i) => ({
      provider_event_id: `${prefix}-${i}`,
      provider: 'sendgrid',
      event_type: 'spam_report',
      email: HOSTILE[i],
      raw: HOSTILE.join('|'),
      ingested_at: 1_763_719_400,
      encoded_event: Buffer.from(HOSTILE.join('|')).toString('base64'),
      ...fields,
    }));
    await store.insertUnmatched(unmatched);
    const storedUnmatched = await rows<UnmatchedEventRow>(
      `SELECT provider_event_id, provider, event_type, email, categories, toUnixTimestamp(occurred_at) AS occurred_at,
        toUnixTimestamp(received_at) AS received_at, raw, toUnixTimestamp(ingested_at) AS ingested_at, encoded_event
      FROM unmatched_events WHERE provider_event_id LIKE '${prefix}%' ORDER BY provider_event_id`,
    );
    expect(
      storedUnmatched.map((row) => ({
        ...row,
        occurred_at: Number(row.occurred_at),
        received_at: Number(row.received_at),
        ingested_at: Number(row.ingested_at),
      })),
    ).toEqual(unmatched);

    const workspaceId = crypto.randomUUID();
    const signals: SuppressionSignalRow[] = HOSTILE.map((text, i) => ({
      workspace_id: workspaceId,
      email: text,
      reason: 'unsubscribe',
      occurred_at: i % 2 === 0 ? 1_763_719_200 + i : 9 ** (i % 5),
      provider_event_id: `${text}-${i}`,
      ingested_at: 1_763_719_400,
    }));
    await store.insertSignals(signals);
    const storedSignals = await rows<SuppressionSignalRow>(
      `SELECT toString(workspace_id) AS workspace_id, email, reason, toUnixTimestamp(occurred_at) AS occurred_at, provider_event_id,
        toUnixTimestamp(ingested_at) AS ingested_at
      FROM suppression_signals WHERE workspace_id = '${workspaceId}' /* the String alias */`,
    );
    const byId = new Map(storedSignals.map((row) => [row.provider_event_id, row]));
    expect(byId.size).toBe(signals.length);
    for (const signal of signals) {
      const row = byId.get(signal.provider_event_id)!;
      expect({ ...row, occurred_at: Number(row.occurred_at), ingested_at: Number(row.ingested_at) }).toEqual(signal);
    }
  });
});

describe('storedEventIds', () => {
  const row = (workspaceId: string, occurredAt: number): EngagementEventRow =>
    eventRow({ workspace_id: workspaceId, occurred_at: occurredAt });

  it('finds exactly the stored events of a batch spread over workspaces and far-apart times', async () => {
    const [first, second] = [crypto.randomUUID(), crypto.randomUUID()];
    const now = 1_763_719_200;
    // A retried event two days old among new ones, events on the edges of each range, a second workspace.
    const stored = [row(first, now - 2 * 86_400), row(first, now), row(first, now + 600), row(first, now + 601), row(second, now + 5)];
    const fresh = [
      row(first, now - 2 * 86_400),
      row(first, now + 300),
      row(first, now + 601),
      row(second, now + 5),
      row(second, now + 7_200),
    ];
    await store.insertEvents(stored);

    const found = await store.storedEventIds([...fresh, ...stored].sort((a, b) => a.occurred_at - b.occurred_at));
    expect([...found].sort()).toEqual(stored.map((event) => event.id).sort());
    expect(await store.storedEventIds(fresh)).toEqual(new Set());
  });

  it('looks up a batch of events of 20,000 workspaces', async () => {
    const batch = Array.from({ length: 20_000 }, (_, i) => row(crypto.randomUUID(), 1_763_719_200 + i));
    await store.insertEvents(batch.slice(0, 3));
    expect([...(await store.storedEventIds(batch))].sort()).toEqual(
      batch
        .slice(0, 3)
        .map((event) => event.id)
        .sort(),
    );
  });

  it('finds the stored half of a batch of 5,000', async () => {
    const workspaceId = crypto.randomUUID();
    const batch = Array.from({ length: 5_000 }, (_, i) => row(workspaceId, 1_763_719_200 + i));
    await store.insertEvents(batch.filter((_, i) => i % 2 === 0));
    const found = await store.storedEventIds(batch);
    expect(found.size).toBe(2_500);
    expect(batch.every((event, i) => found.has(event.id) === (i % 2 === 0))).toBe(true);
  });
});

describe('lookupRanges', () => {
  const at = (workspace_id: string, ...times: number[]) => times.map((occurred_at) => ({ workspace_id, occurred_at }));

  it('splits a workspace where its events are more than 10 minutes apart', () => {
    expect(lookupRanges([...at('a', 1_000, 400, 1_600, 10_000), ...at('b', 50)])).toEqual([
      { workspaceIds: ['a'], from: 400, to: 1_600 },
      { workspaceIds: ['a'], from: 10_000, to: 10_000 },
      { workspaceIds: ['b'], from: 50, to: 50 },
    ]);
    expect(lookupRanges(at('a', 0, 601))).toEqual([
      { workspaceIds: ['a'], from: 0, to: 0 },
      { workspaceIds: ['a'], from: 601, to: 601 },
    ]);
  });

  it('falls back to one range per workspace, then to one range for all, when there would be more than 64', () => {
    const scattered = at('a', ...Array.from({ length: 65 }, (_, i) => i * 1_000));
    expect(lookupRanges([...scattered, ...at('b', 7)])).toEqual([
      { workspaceIds: ['a'], from: 0, to: 64_000 },
      { workspaceIds: ['b'], from: 7, to: 7 },
    ]);
    const workspaces = Array.from({ length: 65 }, (_, i) => `w${i}`);
    expect(lookupRanges(workspaces.flatMap((workspace, i) => at(workspace, 100 + i)))).toEqual([
      { workspaceIds: workspaces, from: 100, to: 164 },
    ]);
  });
});
