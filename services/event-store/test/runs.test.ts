import crypto from 'node:crypto';
import { NO_RUN, NO_VARIANT, engagedAmong, readEngagedAddressesOfRun, runEngagementByVariant } from '@mail/event-store';
import { createTestEventDatabase, type TestEventDatabase } from '@mail/local';

// A run's human engagement, read from the events' run_id: machine opens and clicks, other runs and events of no run
// are left out, and `until` leaves out what was stored after it.

jest.setTimeout(60_000);

const WORKSPACE = crypto.randomUUID();
const CAMPAIGN = crypto.randomUUID();
const RUN = crypto.randomUUID();
const [VARIANT_A, VARIANT_B] = [crypto.randomUUID(), crypto.randomUUID()].sort();

let store: TestEventDatabase;

function row(type: string, email: string, fields: Record<string, unknown> = {}) {
  return {
    id: crypto.randomUUID(),
    workspace_id: WORKSPACE,
    campaign_id: CAMPAIGN,
    variant_id: VARIANT_A,
    event_type: type,
    bounce_type: 'none',
    bounce_class: 'none',
    machine_open: 0,
    email,
    occurred_at: '2026-06-01 10:00:00',
    received_at: '2026-06-01 10:00:00',
    url: type === 'click' ? 'https://example.com/' : null,
    reason: null,
    user_agent: null,
    ip: null,
    provider: 'tracking',
    provider_event_id: crypto.randomUUID(),
    provider_message_id: null,
    raw: '{}',
    ingested_at: '2026-06-01 10:00:01',
    run_id: RUN,
    ...fields,
  };
}

beforeAll(async () => {
  store = await createTestEventDatabase('event_store_runs');
  await store.clickhouse.insert({
    table: 'events',
    format: 'JSONEachRow',
    values: [
      row('open', 'a@example.com'),
      row('open', 'a@example.com'),
      row('click', 'a@example.com'),
      row('open', 'b@example.com', { variant_id: VARIANT_B }),
      row('open', 'c@example.com', { machine_open: 1 }),
      row('click', 'c@example.com', { machine_open: 1 }),
      row('open', 'd@example.com', { run_id: crypto.randomUUID() }),
      row('open', 'e@example.com', { run_id: NO_RUN }),
      row('click', 'f@example.com', { variant_id: NO_VARIANT, ingested_at: '2026-06-02 10:00:00' }),
    ],
  });
});

afterAll(() => store?.close());

it('counts distinct human openers and clickers per variant', async () => {
  expect(await runEngagementByVariant(store.clickhouse, { workspaceId: WORKSPACE, runId: RUN })).toEqual(
    [
      { variantId: NO_VARIANT, opens: 0, clicks: 1 },
      { variantId: VARIANT_A, opens: 1, clicks: 1 },
      { variantId: VARIANT_B, opens: 1, clicks: 0 },
    ].sort((x, y) => x.variantId.localeCompare(y.variantId)),
  );
  const until = new Date('2026-06-01T12:00:00Z');
  expect(await runEngagementByVariant(store.clickhouse, { workspaceId: WORKSPACE, runId: RUN, until })).toEqual([
    { variantId: VARIANT_A, opens: 1, clicks: 1 },
    { variantId: VARIANT_B, opens: 1, clicks: 0 },
  ]);
});

it('reads the addresses with a human open or click, all of them or among some', async () => {
  const run = { workspaceId: WORKSPACE, runId: RUN, from: new Date('2026-06-01T00:00:00Z') };
  expect(await readEngagedAddressesOfRun(store.clickhouse, run, 'open')).toEqual(new Set(['a@example.com', 'b@example.com']));
  expect(await readEngagedAddressesOfRun(store.clickhouse, run, 'click')).toEqual(new Set(['a@example.com', 'f@example.com']));
  expect(await engagedAmong(store.clickhouse, run, 'open', ['b@example.com', 'c@example.com', 'd@example.com'])).toEqual(
    new Set(['b@example.com']),
  );
  expect(await engagedAmong(store.clickhouse, run, 'click', [])).toEqual(new Set());
});
