/**
 * Fairness across workspaces, through the gateway: workspace B's stats
 * latency when the system is idle, then while workspace A holds its allowed
 * analytics reads open (BENCH_FAIRNESS_HOLDERS calls of GET
 * /campaign-events/stats at once, the gateway's WORKSPACE_ANALYTICS_CONCURRENCY
 * set to the same number, each call sent again as soon as it is answered).
 * One stack of its own (bench-stack.ts, fair-use limits as configured by
 * default), its events generated on ClickHouse: BENCH_FAIRNESS_EVENTS in A
 * and a tenth of that in B over the 30 days before today.
 *
 * B's calls go one after the other, BENCH_FAIRNESS_RUNS of them per phase
 * (after 5 unmeasured), each followed by a ClickHouse round trip (SELECT 1
 * straight to the server) as the calibration: how busy the server and the
 * host were while B was measured. The idle phase also times A's call alone,
 * and before B's loaded phase A holds its calls alone for HOLDING_ALONE_MS:
 * what A gets done when nobody else reads, against what it gets done beside B.
 * The target: B's p95 under A's load at most twice its idle p95, B never
 * refused.
 */
import http from 'node:http';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { call, createClient } from '@mail/common';
import { EVENT_TYPE_ENUM, NO_VARIANT, chsql, createClickHouse } from '@mail/event-store';
import { identityV1 } from '@mail/proto';
import { startBenchStack, type BenchStack } from './bench-stack';
import { log, percentile, round } from './measure';

const { dateTime, int, sql, str } = chsql;

export interface FairnessSettings {
  /** Events of workspace A; B has a tenth of them. */
  events: number;
  /** B's measured calls per phase. */
  runs: number;
  /** A's calls held open at once, and the gateway's per-workspace limit. */
  holders: number;
}

export function fairnessSettings(env: NodeJS.ProcessEnv = process.env): FairnessSettings {
  return {
    events: Number(env.BENCH_FAIRNESS_EVENTS ?? 1_000_000),
    runs: Number(env.BENCH_FAIRNESS_RUNS ?? 40),
    holders: Number(env.BENCH_FAIRNESS_HOLDERS ?? 16),
  };
}

export interface Latencies {
  runs: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
}

export interface FairnessPhase {
  /** Workspace B's stats calls. */
  b: Latencies;
  /** HTTP status -> count of B's answers (anything but 200 counts against the target). */
  bStatuses: Record<string, number>;
  /** ClickHouse round trips (SELECT 1), one after each of B's calls. */
  clickhouse: Latencies;
  /** 1-minute load average at the end of the phase. */
  load: number;
}

/** What workspace A's holders got done in a phase. */
export interface HoldersPhase {
  /** HTTP status -> count of A's answers. */
  aStatuses: Record<string, number>;
  /** A's calls answered 200, a second. */
  aAnsweredPerSecond: number;
  /** All of A's calls, 503s included. */
  aLatencies: Latencies;
}

export interface FairnessResult {
  settings: FairnessSettings;
  /** Workspace A's stats call alone, one after the other (idle phase). */
  aAlone: Latencies;
  /** A's holders with nobody else reading. */
  aHoldingAlone: HoldersPhase;
  idle: FairnessPhase;
  /** B's calls while A's holders run, and what A got done meanwhile. */
  loaded: FairnessPhase & HoldersPhase;
  /** B's loaded p95 over its idle p95. */
  ratio: number;
  seconds: number;
}

const DAY_MS = 86_400_000;
const DAYS = 30;
const CAMPAIGNS = 20;
const ADDRESSES = 100_000;
const WARM_UP_CALLS = 5;
const HOLDING_ALONE_MS = 10_000;

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function latencies(values: number[]): Latencies {
  const sorted = [...values].sort((a, b) => a - b);
  return {
    runs: sorted.length,
    p50Ms: round(percentile(sorted, 50), 1),
    p95Ms: round(percentile(sorted, 95), 1),
    maxMs: round(sorted[sorted.length - 1], 1),
  };
}

/** GET /campaign-events/stats of the workspace: its status and how long it took. */
function stats(gateway: string, workspaceId: string): Promise<{ status: number; ms: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const request = http.get(`${gateway}/campaign-events/stats`, { agent, headers: { workspace_id: workspaceId } }, (response) => {
      response.resume();
      response.on('end', () => resolve({ status: response.statusCode ?? 0, ms: performance.now() - started }));
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}

/**
 * `count` events of the workspace over the DAYS whole days before today, in
 * CAMPAIGNS campaigns, from ADDRESSES recipients: processed, delivered, open
 * and click in turn. Whole past days: the stats read them from the rollups,
 * as they read a dashboard's usual range.
 */
function generatedEvents(workspaceId: string, count: number, seed: number, end: Date): chsql.SqlFragment {
  const start = new Date(end.getTime() - DAYS * DAY_MS);
  const span = int(DAYS * 86_400 - 1);
  return sql`
    INSERT INTO events (id, workspace_id, campaign_id, variant_id, event_type, bounce_type, bounce_class, machine_open, email,
      occurred_at, received_at, url, reason, user_agent, ip, provider, provider_event_id, provider_message_id, raw, ingested_at)
    SELECT generateUUIDv4(), toUUID(${str(workspaceId)}),
      toUUID(concat('0c0c0c0c-0000-4000-8000-', substring(toString(1000000000000 + cityHash64(number, ${int(seed)}, 1) % ${int(CAMPAIGNS)}), 2, 12))),
      toUUID(${str(NO_VARIANT)}),
      CAST(['processed', 'delivered', 'open', 'click'][number % 4 + 1] AS ${EVENT_TYPE_ENUM}),
      'none', 'none', 0,
      concat('user', toString(cityHash64(number, ${int(seed)}, 2) % ${int(ADDRESSES)}), '@example.com') AS email,
      toDateTime(toUInt32(${dateTime(start)}) + intDiv(number * ${span}, ${int(count)}), 'UTC') AS occurred,
      occurred,
      if(number % 4 = 3, concat('https://example.com/', toString(number % 10)), NULL),
      NULL, NULL, NULL, 'sendgrid',
      concat('fair-', toString(${int(seed)}), '-', toString(number)),
      NULL, '{}', now()
    FROM numbers(${int(count)})`;
}

async function createWorkspaces(bench: BenchStack): Promise<[string, string]> {
  const identity = createClient(identityV1.IdentityServiceClient, bench.stack.urls.grpc.identity);
  try {
    const create = async (name: string) => (await call(identity.createWorkspace.bind(identity), { name })).workspace!.id;
    return [await create(`Fair A ${bench.suffix}`), await create(`Fair B ${bench.suffix}`)];
  } finally {
    identity.close();
  }
}

const count = (statuses: Record<string, number>, status: number) => {
  statuses[status] = (statuses[status] ?? 0) + 1;
};

export async function runFairnessBench(settings: FairnessSettings = fairnessSettings()): Promise<FairnessResult> {
  const started = performance.now();
  // The gateway's limit as deployed: A runs the reads it is allowed, no more.
  const bench = await startBenchStack({ WORKSPACE_ANALYTICS_CONCURRENCY: String(settings.holders) });
  const clickhouse = createClickHouse(bench.clickhouse.url, bench.clickhouse.database, { requestTimeoutMs: 600_000 });
  try {
    const [workspaceA, workspaceB] = await createWorkspaces(bench);
    const today = new Date(Math.floor(Date.now() / DAY_MS) * DAY_MS);
    const generating = performance.now();
    await clickhouse.command({ query: generatedEvents(workspaceA, settings.events, 1, today).text });
    await clickhouse.command({ query: generatedEvents(workspaceB, Math.round(settings.events / 10), 2, today).text });
    log(
      'fairness',
      `${settings.events} events in A, ${Math.round(settings.events / 10)} in B: ${Math.round(performance.now() - generating)} ms`,
    );

    const gateway = bench.stack.urls.gateway;
    const roundTrip = async (): Promise<number> => {
      const at = performance.now();
      await (await clickhouse.query({ query: 'SELECT 1', format: 'JSONEachRow' })).json();
      return performance.now() - at;
    };
    /** B's calls one after the other, each followed by a ClickHouse round trip. */
    const measureB = async (): Promise<FairnessPhase> => {
      const b: number[] = [];
      const roundTrips: number[] = [];
      const statuses: Record<string, number> = {};
      for (let i = 0; i < settings.runs; i++) {
        const answer = await stats(gateway, workspaceB);
        b.push(answer.ms);
        count(statuses, answer.status);
        roundTrips.push(await roundTrip());
      }
      return { b: latencies(b), bStatuses: statuses, clickhouse: latencies(roundTrips), load: round(os.loadavg()[0], 2) };
    };

    for (let i = 0; i < WARM_UP_CALLS; i++) {
      for (const workspace of [workspaceA, workspaceB]) {
        const answer = await stats(gateway, workspace);
        if (answer.status !== 200) throw new Error(`warm-up stats call answered ${answer.status}`);
      }
    }
    const alone: number[] = [];
    for (let i = 0; i < settings.runs; i++) alone.push((await stats(gateway, workspaceA)).ms);
    const aAlone = latencies(alone);
    const idle = await measureB();
    log('fairness', `idle: B p50 ${idle.b.p50Ms} ms, p95 ${idle.b.p95Ms} ms; A alone p95 ${aAlone.p95Ms} ms; load ${idle.load}`);

    // A's holders: each sends its next call as soon as the last is answered, its answers counted in the phase they end in.
    let holding = true;
    interface Counting {
      statuses: Record<string, number>;
      ms: number[];
    }
    let counting: Counting | undefined;
    const answeredOnce = new Set<number>();
    let allAnswered: () => void = () => undefined;
    const warmedUp = new Promise<void>((resolve) => (allAnswered = resolve));
    const holders = Array.from({ length: settings.holders }, async (_, holder) => {
      while (holding) {
        const answer = await stats(gateway, workspaceA);
        if (counting) {
          count(counting.statuses, answer.status);
          counting.ms.push(answer.ms);
        }
        answeredOnce.add(holder);
        if (answeredOnce.size === settings.holders) allAnswered();
      }
    });
    /** What A's holders got done while `during` ran. */
    const holdersPhase = async <T>(during: () => Promise<T>): Promise<[T, HoldersPhase]> => {
      const counted: Counting = { statuses: {}, ms: [] };
      counting = counted;
      const at = performance.now();
      const result = await during();
      counting = undefined;
      const seconds = (performance.now() - at) / 1000;
      return [
        result,
        {
          aStatuses: counted.statuses,
          aAnsweredPerSecond: round((counted.statuses[200] ?? 0) / seconds, 1),
          aLatencies: latencies(counted.ms),
        },
      ];
    };
    await warmedUp;
    const [, aHoldingAlone] = await holdersPhase(() => new Promise((resolve) => setTimeout(resolve, HOLDING_ALONE_MS)));
    const [loadedB, beside] = await holdersPhase(measureB);
    holding = false;
    await Promise.all(holders);
    const ratio = round(loadedB.b.p95Ms / idle.b.p95Ms, 2);
    const loaded = { ...loadedB, ...beside };
    log(
      'fairness',
      `A holding ${settings.holders} alone: ${aHoldingAlone.aAnsweredPerSecond} calls/s answered 200 ${JSON.stringify(aHoldingAlone.aStatuses)}`,
    );
    log(
      'fairness',
      `A holding ${settings.holders}: B p50 ${loaded.b.p50Ms} ms, p95 ${loaded.b.p95Ms} ms (x${ratio} idle), ` +
        `B answers ${JSON.stringify(loaded.bStatuses)}, A ${loaded.aAnsweredPerSecond} calls/s answered 200 ${JSON.stringify(loaded.aStatuses)}; load ${loaded.load}`,
    );
    return { settings, aAlone, aHoldingAlone, idle, loaded, ratio, seconds: Math.round((performance.now() - started) / 1000) };
  } finally {
    await clickhouse.close();
    await bench.close();
  }
}
