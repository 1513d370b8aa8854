import { randomUUID } from 'node:crypto';
import path from 'node:path';
import type { ClickHouseClient } from '@clickhouse/client';
import { createClickHouse } from '@mail/event-store';
import { PROCESS_NAMES, SERVICE_NAMES, startStack, uniqueSuffix, type ProcessName, type Stack } from '@mail/local';
import { checkInvariants, collectStoreView, type Answer, type StoreView } from './faults/invariants';
import { accepted, describeFailure, WebhookLoad, type Batch } from './faults/load';
import { startPrivateServers, type PrivateServers } from './faults/servers';
import { devApi } from './support/dev-api';
import { readTopic, sendgridCredentials, topicSize } from './webhook-support';

/**
 * Faults under a steady webhook load. The whole system runs on servers of its
 * own (PostgreSQL, Kafka, ClickHouse started by infra.sh on free ports, see
 * faults/servers.ts), so crashing them disturbs no other test file. While
 * SendGrid-style batches arrive at a fixed rate (and are retried like SendGrid
 * does after a 503 or a failed connection), each of these is SIGKILLed and
 * restarted in turn, with recovery in between: the Kafka broker, the ingestion
 * service, ClickHouse, the PostgreSQL server and the gateway itself; the broker
 * is also stalled (SIGSTOP) for longer than the webhook's publish timeout. Then:
 * every event acknowledged with 202 is queryable exactly once, no answer was a
 * 5xx other than 503, and the system was ready again after every restart.
 */
// The bound only catches a hang, with room for the faults and recoveries on a busy host beside a second suite.
jest.setTimeout(900_000);

const BATCHES_PER_SECOND = 15;
const EVENTS_PER_BATCH = 20;
/** How long each fault lasts before the restart begins. */
const DOWN_MS = 4_000;
/** Steady load after each recovery, before the next fault. */
const SETTLE_MS = 4_000;
const READY_TIMEOUT_MS = 90_000;

const sendgrid = sendgridCredentials('sendgrid:faults-secret');
const run = uniqueSuffix();
const topic = `faults-events-${run}`;

let servers: PrivateServers;
let stack: Stack;
let clickhouse: ClickHouseClient;
let workspaceId: string;
let campaignId: string;
let load: WebhookLoad;
/** Batch i's events, and only they, happened in second firstOccurredAt + i. */
let firstOccurredAt: number;
/** Answers to the reads made during the run (probes of the query and campaign APIs). */
const reads: Answer[] = [];
/** Reads that got no answer (the gateway was down). */
const readFailures: { what: string; phase: string; error: string }[] = [];
/** The private servers' folder, with every log, is kept unless every test that started passed. */
let testsStarted = 0;
let testsPassed = 0;

interface FaultReport {
  fault: string;
  /** From the start of the restart until the server answered (infra.sh up) or the process was ready (launcher). */
  restartMs: number;
  /** From the start of the restart until the gateway and every service answered /readyz with 200. */
  readyMs: number;
  /** From ready until a batch accepted after it was queryable through the API. */
  flowingMs: number;
  /** What became ready last, and what it reported down until then. */
  lastReady: string[];
}
const reports: FaultReport[] = [];

beforeAll(async () => {
  servers = await startPrivateServers('faults');
  const stackDir = path.join(servers.stateDir, 'stack');
  stack = await startStack({
    stateDir: stackDir,
    logDir: path.join(stackDir, 'logs'),
    readyTimeoutMs: READY_TIMEOUT_MS,
    env: {
      ...servers.env,
      CLICKHOUSE_DATABASE: 'mail',
      DEV_AUTH_ENABLED: '1',
      ...sendgrid.env,
      WEBHOOK_PUBLISH_TIMEOUT_MS: '3000',
      KAFKA_EVENTS_TOPIC: topic,
      KAFKA_DLQ_TOPIC: `faults-dlq-${run}`,
      KAFKA_CONSUMER_GROUP: `faults-${run}`,
      LOG_LEVEL: 'info',
    },
  }).catch(async (error: unknown) => {
    await servers.close({ keepFiles: true });
    throw error;
  });
  clickhouse = createClickHouse(servers.env.CLICKHOUSE_URL, 'mail');

  // Every endpoint but /auth/me takes a workspace_id header; creating a workspace ignores its value.
  workspaceId = (await api<{ id: string }>('POST', '/workspaces/', { name: `Faults ${run}` }, randomUUID())).id;
  const category = `faults-${run}`;
  campaignId = (
    await api<{ id: string }>('POST', '/email-campaigns/', {
      workspace_id: workspaceId,
      name: 'Fault drill',
      provider_category_id: category,
    })
  ).id;
  firstOccurredAt = Math.floor(Date.now() / 1000) - 86_400;
  load = new WebhookLoad({
    gatewayUrl: stack.urls.gateway,
    category,
    prefix: `faults-${run}`,
    batchesPerSecond: BATCHES_PER_SECOND,
    eventsPerBatch: EVENTS_PER_BATCH,
    firstOccurredAt,
    headers: sendgrid.headers,
  });
}, 240_000);

afterAll(async () => {
  await load?.stop();
  await stack?.stopAll();
  await clickhouse?.close();
  const keepFiles = testsPassed < testsStarted;
  await servers?.close({ keepFiles });
  if (keepFiles && servers) console.log(`fault test files (server and process logs) kept in ${servers.stateDir}`);
});

const api = <T>(method: string, urlPath: string, body?: unknown, workspace = workspaceId): Promise<T> =>
  devApi<T>(stack.urls.gateway, workspace, method, urlPath, body);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function status(url: string): Promise<{ status?: number; body?: string; error?: string }> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
    return { status: response.status, body: await response.text() };
  } catch (error) {
    return { error: describeFailure(error) };
  }
}

/**
 * Reads through the gateway once a second while the load runs: the event
 * query (analytics, ClickHouse) and a campaign (campaign service, Postgres).
 * A dependency that is down may make them 503, never 500.
 */
function probeReads(): { stop(): Promise<void> } {
  let running = true;
  const loop = (async () => {
    while (running) {
      const probes = [
        ['GET /campaign-events/', `/campaign-events/?campaign_id=${campaignId}&page_size=1`],
        ['GET /email-campaigns/{id}', `/email-campaigns/${campaignId}`],
      ];
      await Promise.all(
        probes.map(async ([what, urlPath]) => {
          const phase = load.phase;
          try {
            const response = await fetch(`${stack.urls.gateway}${urlPath}`, {
              headers: { workspace_id: workspaceId },
              signal: AbortSignal.timeout(30_000),
            });
            await response.text();
            reads.push({ what, phase, status: response.status });
          } catch (error) {
            readFailures.push({ what, phase, error: describeFailure(error) });
          }
        }),
      );
      await sleep(1_000);
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
    },
  };
}

/**
 * Waits until the gateway and every service answer /readyz with 200; fails if a process died. Returns how long
 * that took, and which of them became ready last (with what they said just before).
 */
async function waitUntilReady(): Promise<{ ms: number; last: string[] }> {
  const started = Date.now();
  const targets: [string, string][] = [
    ['gateway', `${stack.urls.ops.gateway}/readyz`],
    ...SERVICE_NAMES.map((name): [string, string] => [name, `${stack.urls.ops[name]}/readyz`]),
  ];
  let last: string[] = [];
  for (;;) {
    const dead = PROCESS_NAMES.filter((name) => stack.pid(name) === undefined);
    if (dead.length > 0) throw new Error(`process(es) exited: ${dead.join(', ')} (logs in ${stack.logDir})`);
    const answers = await Promise.all(targets.map(async ([name, url]) => ({ name, ...(await status(url)) })));
    const notReady = answers
      .filter((answer) => answer.status !== 200)
      .map((a) => `${a.name}: ${a.status ?? a.error} ${downDependencies(a.body)}`);
    if (notReady.length === 0) return { ms: Date.now() - started, last };
    last = notReady;
    if (Date.now() - started > READY_TIMEOUT_MS)
      throw new Error(`not ready ${READY_TIMEOUT_MS} ms after the restart: ${notReady.join('; ')}`);
    await sleep(200);
  }
}

/** The dependencies a /readyz body reports down. */
function downDependencies(body: string | undefined): string {
  try {
    const report = JSON.parse(body ?? '') as { dependencies?: Record<string, string> };
    return Object.entries(report.dependencies ?? {})
      .filter(([, state]) => state !== 'up')
      .map(([name]) => name)
      .join(',');
  } catch {
    return '';
  }
}

/** The first batch accepted after `since`, once it is queryable: the pipeline flows end to end again. */
async function waitUntilFlowing(since: number, timeoutMs = 90_000): Promise<number> {
  const deadline = since + timeoutMs;
  let batch: Batch | undefined;
  while (!batch) {
    batch = load.batches.find((b) => b.attempts.some((attempt) => attempt.status === 202 && attempt.startedAt >= since));
    if (Date.now() > deadline) throw new Error('no batch was accepted after the recovery');
    if (!batch) await sleep(50);
  }
  const at = new Date((firstOccurredAt + batch.index) * 1000).toISOString();
  for (;;) {
    const page = await fetch(`${stack.urls.gateway}/campaign-events/?campaign_id=${campaignId}&date_from=${at}&date_to=${at}&page_size=1`, {
      headers: { workspace_id: workspaceId },
    }).then(async (response) => (response.status === 200 ? ((await response.json()) as { total: number }) : undefined));
    if (page?.total === EVENTS_PER_BATCH) return Date.now() - since;
    if (Date.now() > deadline) throw new Error(`batch ${batch.index}, accepted after the recovery, is not queryable after ${timeoutMs} ms`);
    await sleep(250);
  }
}

/** Waits until the API counts `expected` events for the campaign (at most timeoutMs); returns the last total it reported. */
async function waitUntilStored(expected: number, timeoutMs = 120_000): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  let last = -1;
  while (Date.now() < deadline) {
    last = (await api<{ total: number }>('GET', `/campaign-events/?campaign_id=${campaignId}&page_size=1`)).total;
    if (last >= expected) return last;
    await sleep(500);
  }
  return last;
}

/** The events on the events topic (in its first `records` Kafka records), and the indexes of the batches whose events are there more than once. */
async function eventsOnKafka(records: number): Promise<{ events: number; copies: number[] }> {
  const reader = await readTopic([servers.env.KAFKA_BROKERS], topic);
  try {
    for (const deadline = Date.now() + 60_000; reader.kafkaRecords() < records && Date.now() < deadline;) await sleep(100);
  } finally {
    await reader.close();
  }
  const perBatch = new Map<number, number>();
  for (const { event } of reader.records) {
    // sg_event_id = <prefix>-<batch>-<event>
    const index = Number(event.providerEventId.split('-').at(-2));
    perBatch.set(index, (perBatch.get(index) ?? 0) + 1);
  }
  return { events: reader.records.length, copies: [...perBatch].filter(([, events]) => events > EVENTS_PER_BATCH).map(([index]) => index) };
}

interface Fault {
  name: string;
  /** Both may act at once (a signal) or resolve once done. */
  crash(): Promise<void> | void;
  restart(): Promise<void> | void;
  /** The dependency the gateway's /readyz must report down (503) while this fault lasts. */
  reportedDown?: string;
}

/** While a store is down, the gateway stays up and its /readyz answers 503 naming that store. */
async function expectNotReadyNaming(dependency: string): Promise<void> {
  const deadline = Date.now() + DOWN_MS;
  let last: { status?: number; body?: string; error?: string } = {};
  while (Date.now() < deadline) {
    last = await status(`${stack.urls.ops.gateway}/readyz`);
    if (last.status === 503 && downDependencies(last.body).split(',').includes(dependency)) return;
    await sleep(100);
  }
  throw new Error(`/readyz did not report ${dependency} down: ${JSON.stringify(last)}`);
}

function killProcess(name: ProcessName): Fault {
  return { name, crash: () => stack.kill(name, 'SIGKILL'), restart: () => stack.restart(name) };
}

it('keeps every acknowledged event exactly once and recovers while Kafka, ingestion, ClickHouse, Postgres and the gateway are SIGKILLed (and the broker stalled) under load', async () => {
  testsStarted += 1;
  const testStarted = Date.now();
  const faults: Fault[] = [
    { name: 'kafka', crash: () => servers.crash('kafka'), restart: () => servers.start('kafka') },
    // Stalled longer than the publish timeout: the send in flight completes after its calls got 503, so their retries are copies.
    { name: 'kafka-stall', crash: () => servers.pause('kafka'), restart: () => servers.resume('kafka') },
    killProcess('ingestion'),
    {
      name: 'clickhouse',
      crash: () => servers.crash('clickhouse'),
      restart: () => servers.start('clickhouse'),
      reportedDown: 'clickhouse',
    },
    { name: 'postgres', crash: () => servers.crash('postgres'), restart: () => servers.start('postgres'), reportedDown: 'postgres' },
    killProcess('gateway'),
  ];

  load.phase = 'steady';
  load.start();
  const prober = probeReads();
  try {
    await sleep(SETTLE_MS);
    await waitUntilFlowing(testStarted);
    for (const fault of faults) {
      load.phase = `${fault.name}: down`;
      await fault.crash();
      const downSince = Date.now();
      if (fault.reportedDown) await expectNotReadyNaming(fault.reportedDown);
      await sleep(DOWN_MS - (Date.now() - downSince));
      load.phase = `${fault.name}: restarting`;
      const restarting = Date.now();
      await fault.restart();
      const restartMs = Date.now() - restarting;
      const ready = await waitUntilReady();
      load.phase = `${fault.name}: recovered`;
      const flowingMs = await waitUntilFlowing(Date.now());
      reports.push({ fault: fault.name, restartMs, readyMs: restartMs + ready.ms, flowingMs, lastReady: ready.last });
      await sleep(SETTLE_MS);
    }
    load.phase = 'final';
    await sleep(SETTLE_MS);
    await load.drain(60_000);
  } finally {
    load.stopNewBatches();
    await prober.stop();
  }

  const batches = load.batches;
  const unaccepted = batches.filter((batch) => !accepted(batch));
  const sentEvents = batches.length * EVENTS_PER_BATCH;
  const storedTotal = await waitUntilStored(sentEvents);
  const view: StoreView = await collectStoreView({ gatewayUrl: stack.urls.gateway, workspaceId, campaignId, clickhouse });
  const verdict = checkInvariants(batches, view, reads);
  // More events on the topic than sent: copies (a call answered 503 or cut off whose events still got in, then retried) that ingestion had to drop.
  const kafkaRecords = await topicSize([servers.env.KAFKA_BROKERS], topic);
  const onKafka = await eventsOnKafka(kafkaRecords);

  const attempts = batches.flatMap((batch) => batch.attempts);
  // Batches on the topic more than once, and those of them posted only once (copies the gateway's producer made itself).
  const copies = onKafka.copies;
  const unexplained = copies.filter((index) => batches[index].attempts.length < 2);
  const perFault = ['steady', ...faults.map((fault) => fault.name), 'final'].map((name) => {
    const mine = attempts.filter((attempt) => attempt.phase === name || attempt.phase.startsWith(`${name}:`));
    const count = (test: (a: (typeof mine)[number]) => boolean): number => mine.filter(test).length;
    const report = reports.find((r) => r.fault === name);
    return {
      phase: name,
      posts: mine.length,
      '202': count((a) => a.status === 202),
      '503': count((a) => a.status === 503),
      other: count((a) => a.status !== undefined && a.status !== 202 && a.status !== 503),
      noAnswer: count((a) => a.connectionError !== undefined),
      maxMs: Math.max(0, ...mine.map((a) => a.ms)),
      restartMs: report?.restartMs,
      readyMs: report?.readyMs,
      flowingMs: report?.flowingMs,
      lastReady: report?.lastReady.join('; '),
      read503: reads.filter((r) => (r.phase === name || r.phase.startsWith(`${name}:`)) && r.status === 503).length,
      readNoAnswer: readFailures.filter((r) => r.phase === name || r.phase.startsWith(`${name}:`)).length,
    };
  });
  console.log(
    [
      `faults under load: ${batches.length} batches (${sentEvents} events) at ${BATCHES_PER_SECOND * EVENTS_PER_BATCH} events/s, ` +
        `${attempts.length} posts, ${verdict.acceptedEvents} events acknowledged, ${view.listed.size} listed by the API (total ${view.total}, ` +
        `API total when stored ${storedTotal}), ${onKafka.events} events in ${kafkaRecords} records on the Kafka topic (${copies.length} batches twice or more, ` +
        `${unexplained.length} of them posted once), ${view.storedRows} rows stored, ${load.skippedTicks} ticks skipped, ` +
        `${Math.round((Date.now() - testStarted) / 1000)} s`,
      JSON.stringify(perFault, null, 1),
      `connection errors: ${JSON.stringify(countBy(attempts.flatMap((a) => a.connectionError ?? [])))}`,
      `violations: ${JSON.stringify(verdict.violations, null, 1)}`,
    ].join('\n'),
  );

  expect(verdict.violations).toEqual([]);
  expect(unaccepted.map((batch) => batch.index)).toEqual([]);
  // A call the gateway took must be answered: the publish timeout (3 s) bounds it; only a killed gateway leaves one unanswered.
  expect(attempts.filter((a) => a.connectionError === 'TimeoutError')).toEqual([]);
  // The faults did happen: the broker's absence was answered with 503s, the gateway's with refused connections.
  expect(perFault.find((p) => p.phase === 'kafka')!['503']).toBeGreaterThan(0);
  expect(perFault.find((p) => p.phase === 'kafka-stall')!['503']).toBeGreaterThan(0);
  expect(onKafka.events).toBeGreaterThanOrEqual(sentEvents);
  expect(perFault.find((p) => p.phase === 'gateway')!.noAnswer).toBeGreaterThan(0);
  testsPassed += 1;
});

it('the invariant checker reports lost, duplicate and unexpected events and 5xx answers', async () => {
  testsStarted += 1;
  const batches = load.batches;
  const sample = batches.filter(accepted).slice(0, 2);
  expect(sample).toHaveLength(2);
  const view = await collectStoreView({ gatewayUrl: stack.urls.gateway, workspaceId, campaignId, clickhouse });
  // What the real record already violates (nothing, when the test above passed); each case must add its own.
  const baseline = checkInvariants(batches, view).violations;
  const added = (violations: string[]): string[] => violations.filter((violation) => !baseline.includes(violation));

  // A 202 whose events never arrived.
  const ghost: Batch = {
    index: -1,
    eventIds: ['ghost-1', 'ghost-2'],
    attempts: [{ phase: 'doctored', startedAt: 0, ms: 1, status: 202, body: '{"accepted":2}' }],
  };
  expect(added(checkInvariants([ghost, ...batches], view).violations)).toEqual([
    expect.stringMatching(/^lost: \d+ events .*: ghost-1, ghost-2/),
  ]);

  // A 500 among the answers, to a webhook call and to a read.
  const failed = batches.map((batch) =>
    batch === sample[0]
      ? {
          ...batch,
          attempts: [
            { phase: 'doctored', startedAt: 0, ms: 1, status: 500, body: '{"detail":"Internal Server Error"}' },
            ...batch.attempts,
          ],
        }
      : batch,
  );
  expect(added(checkInvariants(failed, view, [{ what: 'GET /campaign-events/', phase: 'doctored', status: 502 }]).violations)).toEqual([
    `server error: batch ${sample[0].index} answered 500 during "doctored": {"detail":"Internal Server Error"}`,
    'server error: GET /campaign-events/ answered 502 during "doctored"',
  ]);

  // Stored events nobody sent (here: a stored batch the record leaves out).
  expect(
    added(
      checkInvariants(
        batches.filter((batch) => batch !== sample[0]),
        view,
      ).violations,
    ),
  ).toEqual([
    expect.stringMatching(
      new RegExp(`^unexpected: ${EVENTS_PER_BATCH} stored events were never sent: ${sample[0].eventIds[0].replace(/-0$/, '')}-\\d+,`),
    ),
  ]);

  // A second copy of a stored event, as a fault can store it (ingestion marks its day unsettled): the API still counts it once, the store check sees it.
  const copied = sample[1].eventIds[0];
  await clickhouse.command({
    query: `INSERT INTO events SELECT * FROM events WHERE provider_event_id = '${copied}' LIMIT 1`,
  });
  await clickhouse.command({
    query: `INSERT INTO unsettled_days SELECT workspace_id, toDate(occurred_at), now() FROM events WHERE provider_event_id = '${copied}' LIMIT 1`,
  });
  const withCopy = await collectStoreView({ gatewayUrl: stack.urls.gateway, workspaceId, campaignId, clickhouse });
  expect(withCopy.total).toBe(view.total);
  expect(withCopy.storedRows).toBe(view.storedRows + 1);
  expect(added(checkInvariants(batches, withCopy).violations)).toEqual([`duplicate: 1 events are stored more than once: ${copied} x2`]);
  testsPassed += 1;
});

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}
