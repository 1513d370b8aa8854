/**
 * Analytics read latency on a large workspace.
 *
 * 1. Generates (once; reused while the data set's version and size match,
 *    since 10 M take minutes) 10 M events for one workspace over a year, in
 *    the mix of a campaign's messages (processed, delivered, deferred,
 *    dropped, bounces, human and machine opens, clicks, unsubscribes, spam
 *    reports; see generatedEvents), for 200 campaigns of which 50 test 2-4
 *    variants, 2 M more for 20 other workspaces in the same partitions, and
 *    the suppression signals those events imply, all with INSERT ... SELECT FROM
 *    numbers() on the server; the views fill the rollups as ingestion's
 *    inserts do. Three days get copies of 10 % of their events, as a crash
 *    can leave them, and are marked unsettled as ingestion marks them. Then,
 *    as ingestion's hourly maintenance leaves them, those days are rebuilt
 *    and their marks cleared, and the closed months are compacted (which
 *    also collapses the copies).
 * 2. Starts the analytics service (startStack) on that database and measures,
 *    through gRPC, one request at a time: ListEvents page 1 with each filter,
 *    GetStats over typical dashboard ranges, and ListSuppressions.
 * 3. Times SQL shapes straight on ClickHouse: each read the service makes from
 *    a rollup or copy next to the same read over the rows, and the merge of
 *    the address sets that bounds the stats of long ranges.
 * Prints p50/p95/max per scenario (RUNS runs, fewer for slow ones: at least
 * MIN_RUNS, then until SCENARIO_BUDGET_MS); the figures also go to
 * bench/results/query-analytics-<time>.json.
 *
 * Run (`npx tsc -b services/analytics deploy/local`, the servers' addresses exported):
 *   eval "$(bash deploy/local/infra.sh up)"
 *   npx tsc -p bench/query-analytics.tsconfig.json && node bench/dist/query-analytics.js
 * Settings: CLICKHOUSE_URL (from infra.sh), BENCH_DATABASE (bench_analytics),
 * BENCH_EVENTS (10000000), BENCH_RUNS (timed runs per scenario, 40), BENCH_REGENERATE=1.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createClient as createClickHouseClient } from '@clickhouse/client';
import { call, createClient } from '@mail/common';
import {
  BOUNCE_CLASS_ENUM,
  BOUNCE_TYPE_ENUM,
  EVENT_TYPE_ENUM,
  NO_VARIANT,
  QUIET_MS,
  backfillSuppressionState,
  chsql,
  compactClosedMonths,
  createClickHouse,
  ensureEventSchema,
  settleUnsettledDays,
} from '@mail/event-store';
import { infraEnv, startStack } from '@mail/local';
import { analyticsV1, eventsV1 } from '@mail/proto';

const { dateTime, int, sql, str, uuid } = chsql;

const CLICKHOUSE_URL = infraEnv().clickhouseUrl;
const DATABASE = process.env.BENCH_DATABASE ?? 'bench_analytics';
const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000_000);
const NOISE_EVENTS = EVENTS / 5;
const RUNS = Number(process.env.BENCH_RUNS ?? 40);
const WARM_UP_RUNS = 3;
/** A slow scenario stops after this long, with at least MIN_RUNS runs. */
const SCENARIO_BUDGET_MS = 30_000;
const MIN_RUNS = 10;
const RESULTS_DIR = path.join(__dirname, '..', 'results');

const WORKSPACE = '0b0b0b0b-0000-4000-8000-000000000001';
const CAMPAIGNS = 200;
const ADDRESSES = 1_000_000;
const LINKS_PER_CAMPAIGN = 20;
const DAY_MS = 86_400_000;
/** The generated year ends here; ranges are relative to it, so a reused data set measures the same. */
const END = new Date('2026-11-01T00:00:00Z');
const START = new Date(END.getTime() - 365 * DAY_MS);

const campaignId = (index: number) => `0c0c0c0c-0000-4000-8000-${String(index).padStart(12, '0')}`;

// ---------------------------------------------------------------------------
// Data
// ---------------------------------------------------------------------------

/**
 * The events of 100 messages, as a campaign's mix has them: each message is
 * processed; 97 are delivered, 1 dropped, 1 hard and 1 soft bounce; 2 are
 * deferred first. Of the delivered, 20 recipients open (human), 10 opens come
 * from mail-privacy proxies (machine_open), 5 of the human openers click, 0.3
 * of them unsubscribe, and 0.05 recipients report spam. Opens, clicks and
 * the rest come from the message's recipient, so unique counts are distinct
 * recipients.
 */
const EVENTS_PER_100_MESSAGES = 100 + 97 + 2 + 1 + 2 + 30 + 5 + 0.3 + 0.05;
/** The latest event of a message comes this long after it was sent, so a message sent within the year has all its events in it. */
const MESSAGE_SPAN_S = 3 * 86_400;
/** One campaign in this many (index % 4 = 3: 50 of 200) tests 2-4 variants. */
const VARIANT_CAMPAIGN_EVERY = 4;
/** Campaign 7 has three variants: its stats include the variant panel. */
const CAMPAIGN_WITH_VARIANTS = campaignId(7);
/** The types of a message's possible events, by step (the SQL keeps the steps a message has); step 6 is the machine open. */
const MESSAGE_STEPS = ['processed', 'deferred', 'delivered', 'dropped', 'bounce', 'open', 'open', 'click', 'unsubscribe', 'spamreport'];

/**
 * About count events of `workspace` in the mix of EVENTS_PER_100_MESSAGES,
 * from messages sent evenly over the year, each to one of ADDRESSES
 * recipients (the same address space in every workspace), for one of
 * CAMPAIGNS campaigns and, where the campaign tests variants, one of them.
 * Each campaign sends all year long (an automated one), so its all-time
 * figures merge a year of days.
 */
function generatedEvents(workspace: chsql.SqlFragment, count: number, seed: number): chsql.SqlFragment {
  const messages = Math.round((count * 100) / EVENTS_PER_100_MESSAGES);
  const span = int(Math.floor((END.getTime() - START.getTime()) / 1000) - MESSAGE_SPAN_S);
  const hash = (salt: number) => sql`cityHash64(m, ${int(seed)}, ${int(salt)})`;
  const steps = chsql.list(MESSAGE_STEPS.map((_, step) => int(step)));
  const types = chsql.list(MESSAGE_STEPS.map((type) => str(type)));
  return sql`
    SELECT generateUUIDv4(), ${workspace},
      toUUID(concat('0c0c0c0c-0000-4000-8000-', substring(toString(1000000000000 + campaign_index), 2, 12))) AS campaign,
      if(variants = 0, toUUID(${str(NO_VARIANT)}),
        toUUID(concat('0d0d0d0d-0000-4000-8000-', substring(toString(1000000000000 + campaign_index * 10 + variant), 2, 12)))),
      CAST(type AS ${EVENT_TYPE_ENUM}),
      CAST(multiIf(type = 'bounce' AND outcome = 98, 'hard', type = 'bounce', 'soft', 'none') AS ${BOUNCE_TYPE_ENUM}),
      CAST(multiIf(type = 'bounce' AND outcome = 98, 'invalid_address', type = 'bounce', 'mailbox_unavailable', 'none') AS ${BOUNCE_CLASS_ENUM}),
      toUInt8(step = 6),
      email,
      toDateTime(sent + multiIf(step = 1, 60, step IN (2, 4), 5 + deferred * 1800, step = 3, 1, step = 5, open_after,
        step = 6, 30 + ${hash(17)} % 600, step = 7, open_after + 30, step = 8, open_after + 90, step = 9, 3600 + ${hash(18)} % 86400, 0), 'UTC') AS occurred,
      occurred + 2,
      if(type = 'click', concat('https://example.com/c/', toString(campaign), '/', toString(${hash(3)} % ${int(LINKS_PER_CAMPAIGN)})), NULL),
      multiIf(type = 'bounce' AND outcome = 98, '550 5.1.1 The email account that you tried to reach does not exist',
        type = 'bounce', '452 4.2.2 The email account that you tried to reach is over quota',
        type = 'deferred', '421 4.7.0 Try again later', type = 'dropped', 'Bounced Address', NULL),
      multiIf(step = 6, 'Mozilla/5.0 (Windows NT 5.1; rv:11.0) Gecko Firefox/11.0 (via ggpht.com GoogleImageProxy)',
        type IN ('open', 'click'), 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36', NULL),
      if(type IN ('open', 'click'), '203.0.113.7', NULL), 'sendgrid',
      concat('sg', hex(cityHash64(m, ${int(seed)}, step, 4)), hex(cityHash64(m, ${int(seed)}, step, 5))),
      concat('msg', hex(${hash(6)})),
      concat('{"event":"', type, '","category":["campaign"],"sg_event_id":"x","sg_message_id":"y"}'),
      now()
    FROM (
      SELECT *,
        arrayJoin(arrayFilter((s, keep) -> keep = 1, [${steps}],
          [1, deferred, delivered, outcome = 97, outcome >= 98, human_open, machine_open, click, unsubscribe, spam_report])) AS step,
        [${types}][step + 1] AS type
      FROM (
        SELECT *,
          outcome < 97 AS delivered,
          delivered AND ${hash(11)} % 97 < 20 AS human_open,
          delivered AND ${hash(12)} % 97 < 10 AS machine_open,
          human_open AND ${hash(13)} % 4 = 0 AS click,
          human_open AND ${hash(14)} % 2000 < 30 AS unsubscribe,
          delivered AND ${hash(15)} % 19400 < 10 AS spam_report
        FROM (
          SELECT number AS m,
            ${hash(1)} % ${int(CAMPAIGNS)} AS campaign_index,
            if(campaign_index % ${int(VARIANT_CAMPAIGN_EVERY)} = ${int(VARIANT_CAMPAIGN_EVERY - 1)},
              2 + intDiv(campaign_index, ${int(VARIANT_CAMPAIGN_EVERY)}) % 3, 0) AS variants,
            ${hash(7)} % greatest(variants, 1) AS variant,
            concat('user', toString(${hash(2)} % ${int(ADDRESSES)}), '@example.com') AS email,
            toUInt32(${dateTime(START)}) + intDiv(m * ${span}, ${int(messages)}) AS sent,
            ${hash(9)} % 100 AS outcome,
            outcome != 97 AND ${hash(10)} % 9900 < 200 AS deferred,
            600 + ${hash(16)} % 172800 AS open_after
          FROM numbers(${int(messages)})
        )
      )
    )`;
}

/**
 * Bumped when the schema, the generated data or the server's storage settings
 * (deploy/clickhouse) change: a data set of another version is generated again.
 */
const DATA_SET_VERSION = 7;

/** Days a crash left copies on, as days before END. */
const CRASH_DAYS_AGO = [3, 20, 200];

async function dataSetVersion(client: ReturnType<typeof createClickHouseClient>): Promise<{ version: number; events: number } | undefined> {
  const exists = await client.query({
    query: sql`SELECT count() AS n FROM system.tables WHERE database = ${chsql.str(DATABASE)} AND name = 'bench_data_set'`.text,
    format: 'JSONEachRow',
  });
  if (Number((await exists.json<{ n: string }>())[0].n) === 0) return undefined;
  const result = await client.query({
    query: sql`SELECT version, events FROM ${chsql.identifier(DATABASE)}.bench_data_set`.text,
    format: 'JSONEachRow',
  });
  const [row] = await result.json<{ version: number; events: string }>();
  return row && { version: Number(row.version), events: Number(row.events) };
}

async function ensureData(): Promise<void> {
  // Inserting millions of rows takes longer than the services' 30 s request timeout.
  const client = createClickHouseClient({ url: CLICKHOUSE_URL, database: DATABASE, request_timeout: 600_000 });
  const admin = createClickHouseClient({ url: CLICKHOUSE_URL, database: 'default' });
  const count = async () => {
    const result = await client.query({
      query: sql`SELECT count() AS n FROM events WHERE workspace_id = ${uuid(WORKSPACE)}`.text,
      format: 'JSONEachRow',
    });
    return Number((await result.json<{ n: string }>())[0].n);
  };
  await admin.command({ query: sql`CREATE DATABASE IF NOT EXISTS ${chsql.identifier(DATABASE)}`.text });
  const found = await dataSetVersion(admin);
  if (process.env.BENCH_REGENERATE !== '1' && found?.version === DATA_SET_VERSION && found.events === EVENTS) {
    await ensureEventSchema(CLICKHOUSE_URL, DATABASE);
    console.log(`reusing ${DATABASE} (data set version ${found.version}): ${await count()} events in the big workspace`);
    await Promise.all([client.close(), admin.close()]);
    return;
  }
  const command = async (label: string, query: chsql.SqlFragment) => {
    const started = performance.now();
    await client.command({ query: query.text, clickhouse_settings: { max_insert_block_size: '1000000' } });
    console.log(`  ${label}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  };
  console.log(`generating ${EVENTS} events in ${DATABASE} (data set version ${DATA_SET_VERSION}) ...`);
  // The suite's own database: dropped whole, so tables of an older schema go too.
  await admin.command({ query: sql`DROP DATABASE IF EXISTS ${chsql.identifier(DATABASE)}`.text });
  await ensureEventSchema(CLICKHOUSE_URL, DATABASE);
  await command('big workspace', sql`INSERT INTO events ${generatedEvents(uuid(WORKSPACE), EVENTS, 1)}`);
  for (let index = 0; index < 20; index++) {
    const noise = uuid(`0b0b0b0b-0000-4000-8000-${String(index + 2).padStart(12, '0')}`);
    await command(`other workspace ${index + 1}`, sql`INSERT INTO events ${generatedEvents(noise, NOISE_EVENTS / 20, index + 2)}`);
  }
  const crashDays = chsql.list(CRASH_DAYS_AGO.map((days) => sql`toDate(${dateTime(new Date(END.getTime() - days * DAY_MS))})`));
  await command(
    `copies left by a crash on ${CRASH_DAYS_AGO.length} days (10 % of their events)`,
    sql`INSERT INTO events
      SELECT generateUUIDv4(), workspace_id, campaign_id, variant_id, event_type, bounce_type, bounce_class, machine_open, email,
        occurred_at, received_at, url, reason, user_agent, ip, provider, provider_event_id, provider_message_id, raw, now() + 1
      FROM events
      WHERE workspace_id = ${uuid(WORKSPACE)} AND toDate(occurred_at) IN (${crashDays}) AND cityHash64(provider_event_id) % 10 = 0`,
  );
  await command(
    'their days marked unsettled',
    sql`INSERT INTO unsettled_days SELECT ${uuid(WORKSPACE)}, day, now() FROM (SELECT arrayJoin([${crashDays}]) AS day)`,
  );
  await command(
    'suppression signals',
    sql`INSERT INTO suppression_signals
      SELECT workspace_id, email,
        CAST(multiIf(bounce_type = 'hard', 'hard_bounce', bounce_type = 'soft', 'soft_bounce', event_type = 'unsubscribe', 'unsubscribe', 'spam_report')
          AS Enum8('hard_bounce' = 1, 'soft_bounce' = 2, 'unsubscribe' = 3, 'spam_report' = 4)),
        occurred_at, provider_event_id, ingested_at
      FROM events WHERE event_type IN ('bounce', 'unsubscribe', 'spamreport')`,
  );
  await backfillSuppressionState(client);
  await client.command({ query: 'CREATE TABLE bench_data_set (version UInt32, events UInt64) ENGINE = TinyLog' });
  await client.command({ query: sql`INSERT INTO bench_data_set VALUES (${int(DATA_SET_VERSION)}, ${int(EVENTS)})`.text });
  console.log(`  ${await count()} events in the big workspace`);
  await Promise.all([client.close(), admin.close()]);
}

/**
 * The address of the email scenarios: of 100 fixed candidates, the one with
 * the most engagement events (what ListEvents shows), so that its list is
 * not empty whatever the size of the data set.
 */
async function busyAddress(): Promise<string> {
  const client = createClickHouseClient({ url: CLICKHOUSE_URL, database: DATABASE });
  const candidates = Array.from({ length: 100 }, (_, index) => str(`user${4242 + index}@example.com`));
  const result = await client.query({
    query: sql`SELECT email FROM events_by_address
      WHERE workspace_id = ${uuid(WORKSPACE)} AND email IN (${chsql.list(candidates)}) AND event_type IN ('open', 'click', 'bounce', 'unsubscribe')
      GROUP BY email ORDER BY uniqExact(provider_event_id) DESC, email LIMIT 1`.text,
    format: 'JSONEachRow',
  });
  const [row] = await result.json<{ email: string }>();
  await client.close();
  return row?.email ?? 'user4242@example.com';
}

/**
 * Measures the steady state: not the background merges that follow a bulk
 * load, with the unsettled days settled and the closed months merged into one
 * part each, as ingestion's maintenance has them by then (the data set's year
 * ended before today, and its days have long been quiet).
 */
async function settleParts(): Promise<void> {
  const client = createClickHouse(CLICKHOUSE_URL, DATABASE, { requestTimeoutMs: 3_600_000 });
  const started = performance.now();
  for (;;) {
    const result = await client.query({
      query: sql`SELECT count() AS n FROM system.merges WHERE database = ${chsql.str(DATABASE)}`.text,
      format: 'JSONEachRow',
    });
    if (Number((await result.json<{ n: string }>())[0].n) === 0) break;
    await new Promise((resolve) => setTimeout(resolve, 2_000));
  }
  // Nothing else writes this database: its days are quiet once generated (QUIET_MS ahead, and a minute for the clocks).
  const settled = await settleUnsettledDays(client, DATABASE, { rebuild: true, now: new Date(Date.now() + QUIET_MS + 60_000) });
  if (settled.settled.length + settled.disagreeing.length + settled.busy.length > 0) {
    console.log(
      `unsettled days: ${settled.settled.length} settled (${settled.rebuilt.length} rebuilt), ` +
        `${settled.disagreeing.length} still disagreeing, ${settled.busy.length} busy`,
    );
  }
  const compacted = await compactClosedMonths(client, DATABASE);
  const parts = await client.query({
    query:
      sql`SELECT count() AS parts, max(level) AS level FROM system.parts WHERE database = ${chsql.str(DATABASE)} AND table = 'events' AND active`
        .text,
    format: 'JSONEachRow',
  });
  const [{ parts: count, level }] = await parts.json<{ parts: string; level: number }>();
  console.log(
    `merges done and ${compacted.length} partitions compacted after ${((performance.now() - started) / 1000).toFixed(0)} s: ` +
      `${count} active parts of events (max level ${level})`,
  );
  await client.close();
}

// ---------------------------------------------------------------------------
// Measurement
// ---------------------------------------------------------------------------

interface Result {
  scenario: string;
  runs: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  /** What the last answer held, to see the scenario did real work. */
  note: string;
  /** 1-minute load average when the scenario ended: other work on the machine inflates latencies. */
  load: number;
}

const percent = (rate: number | undefined) => (rate === undefined ? 'no rate' : `${(rate * 100).toFixed(1)} %`);

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function measure(scenario: string, run: () => Promise<string>): Promise<Result> {
  for (let i = 0; i < WARM_UP_RUNS; i++) await run();
  const latencies: number[] = [];
  let note = '';
  const budgetEnd = performance.now() + SCENARIO_BUDGET_MS;
  for (let i = 0; i < RUNS && (i < MIN_RUNS || performance.now() < budgetEnd); i++) {
    const started = performance.now();
    note = await run();
    latencies.push(performance.now() - started);
  }
  latencies.sort((a, b) => a - b);
  const result = {
    scenario,
    runs: latencies.length,
    p50Ms: Math.round(percentile(latencies, 50)),
    p95Ms: Math.round(percentile(latencies, 95)),
    maxMs: Math.round(latencies[latencies.length - 1]),
    note,
    load: Number(os.loadavg()[0].toFixed(1)),
  };
  console.log(
    `${scenario.padEnd(52)} n ${String(latencies.length).padStart(2)}  p50 ${String(result.p50Ms).padStart(5)} ms  p95 ${String(result.p95Ms).padStart(5)} ms  max ${String(result.maxMs).padStart(5)} ms  load ${result.load}  ${note}`,
  );
  return result;
}

async function main(): Promise<void> {
  await ensureData();
  await settleParts();
  const address = await busyAddress();
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'query-bench-'));
  const stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    processes: ['analytics'],
    env: { CLICKHOUSE_URL, CLICKHOUSE_DATABASE: DATABASE, LOG_LEVEL: 'warn' },
  });
  const client = createClient(analyticsV1.AnalyticsServiceClient, stack.urls.grpc.analytics);
  const results: Result[] = [];
  try {
    const days = (n: number) => ({ occurredFrom: new Date(END.getTime() - n * DAY_MS), occurredBefore: END });
    const list =
      (filter: Omit<analyticsV1.EventFilter, 'workspaceId'>, page = 1) =>
      async () => {
        const answer = await call(
          client.listEvents.bind(client),
          { filter: { workspaceId: WORKSPACE, ...filter }, page: { page, pageSize: 50 } },
          60_000,
        );
        return `${answer.events.length} of ${answer.page?.total}`;
      };
    const stats = (filter: Omit<analyticsV1.EventFilter, 'workspaceId'>, interval: analyticsV1.Interval) => async () => {
      const answer = await call(client.getStats.bind(client), { filter: { workspaceId: WORKSPACE, ...filter }, interval }, 60_000);
      const totals = answer.totals;
      return (
        `${totals?.processed} processed, ${totals?.delivered} delivered (${percent(totals?.deliveryRate)}), ` +
        `${totals?.uniqueOpens} unique opens (${percent(totals?.openRate)}; ${totals?.opens} opens, ${totals?.machineOpens} by machines), ` +
        `${totals?.uniqueClicks} unique clicks (${percent(totals?.clickRate)}), ${totals?.spamReports} spam reports, ` +
        `${answer.campaigns.length} campaigns, ${answer.variants.length} variants, ${answer.series.length} buckets`
      );
    };
    const suppressions = async () => {
      const answer = await call(client.listSuppressions.bind(client), { workspaceId: WORKSPACE, page: { page: 1, pageSize: 50 } }, 60_000);
      return `${answer.suppressions.length} of ${answer.page?.total}`;
    };
    // A new campaign or address on every run: reads the service has not seen, which cannot start on a known page.
    let firstReads = 0;
    const firstRead = (filter: () => Omit<analyticsV1.EventFilter, 'workspaceId'>) => () => list(filter())();
    const { EventType } = eventsV1;
    const { Interval } = analyticsV1;
    const scenarios: [string, () => Promise<string>][] = [
      ['list page 1, no filter', list({})],
      ['list page 1, event_type=click', list({ eventType: EventType.EVENT_TYPE_CLICK })],
      ['list page 1, event_type=delivered', list({ eventType: EventType.EVENT_TYPE_DELIVERED })],
      ['list page 1, campaign_id', list({ campaignId: campaignId(7) })],
      ['list page 1, email', list({ email: address })],
      ['list page 1, campaign_id, first read of each', firstRead(() => ({ campaignId: campaignId(100 + ((firstReads += 1) % 100)) }))],
      ['list page 1, email, first read of each', firstRead(() => ({ email: `user${(firstReads += 7919) % ADDRESSES}@example.com` }))],
      ['list page 1, last 7 days', list(days(7))],
      ['list page 1, last 30 days', list(days(30))],
      [
        'list page 1, campaign + click + last 30 days',
        list({ ...days(30), campaignId: campaignId(7), eventType: EventType.EVENT_TYPE_CLICK }),
      ],
      ['list page 1000, last 30 days', list(days(30), 1000)],
      ['stats last 7 days, daily (the dashboard opens on it)', stats(days(7), Interval.INTERVAL_DAY)],
      ['stats last 7 days, hourly', stats(days(7), Interval.INTERVAL_HOUR)],
      ['stats last 30 days, daily', stats(days(30), Interval.INTERVAL_DAY)],
      ['stats one campaign with variants, all time, daily', stats({ campaignId: CAMPAIGN_WITH_VARIANTS }, Interval.INTERVAL_DAY)],
      ['stats all campaigns, all time, daily', stats({}, Interval.INTERVAL_DAY)],
      ['suppressions page 1', suppressions],
    ];
    for (const [scenario, run] of scenarios) results.push(await measure(scenario, run));

    results.push(...(await compareShapes(address)));
  } finally {
    client.close();
    await stack.stopAll();
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `query-analytics-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
  const version = await serverVersion();
  fs.writeFileSync(
    file,
    JSON.stringify({ clickhouse: CLICKHOUSE_URL, version, database: DATABASE, events: EVENTS, runs: RUNS, results }, null, 2),
  );
  console.log(`results: ${path.relative(process.cwd(), file)}`);
}

/** The version the server under CLICKHOUSE_URL reports (the report names the engine beside its figures). */
async function serverVersion(): Promise<string> {
  const client = createClickHouseClient({ url: CLICKHOUSE_URL });
  try {
    const result = await client.query({ query: 'SELECT version() AS version', format: 'JSONEachRow' });
    const [{ version }] = await result.json<{ version: string }>();
    return version;
  } finally {
    await client.close();
  }
}

/**
 * SQL shapes timed straight on ClickHouse: what the service reads from the
 * rollups and the address copy next to the same answer computed from the
 * rows (as the service did before them), and the merge of the exact address
 * sets that GetStats makes over a long range, whose cost grows with the
 * number of events (each day's sets hold most of that day's addresses).
 */
async function compareShapes(address: string): Promise<Result[]> {
  const client = createClickHouseClient({ url: CLICKHOUSE_URL, database: DATABASE, request_timeout: 600_000 });
  const where = sql`workspace_id = ${uuid(WORKSPACE)}`;
  const email = sql`email = ${chsql.str(address)}`;
  const shapes: [string, chsql.SqlFragment][] = [
    ['events per day, all time: rollup', sql`SELECT day, countMerge(events) FROM event_rollup_daily WHERE ${where} GROUP BY day`],
    [
      'events per day, all time: exact over the rows',
      sql`SELECT toStartOfDay(occurred_at) d, uniqExact(cityHash64(provider_event_id)) FROM events WHERE ${where} GROUP BY d`,
    ],
    [
      'one address per day: events_by_address',
      sql`SELECT toStartOfDay(occurred_at) d, uniqExact(cityHash64(provider_event_id)) FROM events_by_address WHERE ${where} AND ${email} GROUP BY d`,
    ],
    [
      'one address per day: events',
      sql`SELECT toStartOfDay(occurred_at) d, uniqExact(cityHash64(provider_event_id)) FROM events WHERE ${where} AND ${email} GROUP BY d`,
    ],
    [
      'distinct human openers per campaign, all time: rollup address sets (used)',
      sql`SELECT campaign_id, uniqExactMerge(engaged_addresses) FROM event_rollup_daily WHERE ${where} AND event_type = 'open' AND machine_open = 0 GROUP BY campaign_id`,
    ],
    [
      'distinct human openers per campaign, all time: rows',
      sql`SELECT campaign_id, uniqExact(cityHash64(email)) FROM events WHERE ${where} AND event_type = 'open' AND machine_open = 0 GROUP BY campaign_id`,
    ],
  ];
  const results: Result[] = [];
  try {
    for (const [scenario, query] of shapes) {
      results.push(
        await measure(scenario, async () => {
          const result = await client.query({ query: query.text, format: 'JSONEachRow' });
          return `${(await result.json()).length} rows`;
        }),
      );
    }
  } finally {
    await client.close();
  }
  return results;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
