/**
 * Campaign write latency through the whole system, open loop.
 *
 * Starts the full stack (startStack, DEV_AUTH_ENABLED=1) on a private
 * Postgres database, ClickHouse database and Kafka topics, then sends at a
 * fixed rate whatever the answers do (no coordinated omission: latency counts
 * from the moment a request was due, not from when it was sent):
 *   1. POST /email-campaigns/ (a full campaign with two variants),
 *   2. PUT /email-campaigns/{id} (rename, reprioritize, replace the variants),
 *   3. the same campaign row and variants inserted straight into Postgres with
 *      pg (one transaction), the floor the API adds to.
 * Prints p50/p99/max per phase, the create/insert ratio, and the CPU each
 * process spent per request (where the time goes when the rate is not met);
 * the figures also go to bench/results/campaign-bench-<time>.json.
 *
 * Run (infra up, everything built: `bash deploy/local/infra.sh up`, `npm run build`):
 *   npx tsc -p bench/campaign-bench.tsconfig.json && node bench/dist/campaign-bench.js
 * Settings: BENCH_RATE (requests/s, default 300), BENCH_SECONDS (per phase, default 10).
 * Linux only (CPU figures come from /proc).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'pg';
import { call, createClient } from '@mail/common';
import { PROCESS_NAMES, createTestClickHouse, createTestPostgres, startStack, uniqueSuffix, type Stack } from '@mail/local';
import { identityV1 } from '@mail/proto';

const RATE = Number(process.env.BENCH_RATE ?? 300);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const RESULTS_DIR = path.join(__dirname, '..', 'results');
/** Linux reports process CPU time in ticks of 1/100 s. */
const MS_PER_TICK = 10;

interface PhaseResult {
  phase: string;
  sent: number;
  failed: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The first failure, to tell overload (503) from a broken request. */
  firstError?: string;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

const round = (value: number): number => Math.round(value * 100) / 100;

/** Sends request i at start + i/rate, never waiting for earlier answers. */
async function fixedRate(phase: string, count: number, send: (i: number) => Promise<unknown>): Promise<PhaseResult> {
  const latencies: number[] = [];
  let failed = 0;
  let firstError: string | undefined;
  const pending: Promise<unknown>[] = [];
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(
      send(i).then(
        () => latencies.push(performance.now() - due),
        (error: unknown) => {
          latencies.push(performance.now() - due);
          failed++;
          firstError ??= String(error).slice(0, 120);
        },
      ),
    );
  }
  await Promise.all(pending);
  const sorted = latencies.sort((a, b) => a - b);
  return {
    phase,
    sent: count,
    failed,
    p50Ms: round(percentile(sorted, 50)),
    p99Ms: round(percentile(sorted, 99)),
    maxMs: round(sorted[sorted.length - 1]),
    firstError,
  };
}

function cpuMsOf(pid: number | undefined): number {
  if (pid === undefined) return 0;
  // Fields after the command name: utime and stime are the 12th and 13th.
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK;
}

/** CPU milliseconds so far of every stack process, of this database's Postgres backends and of this load generator. */
async function cpuSnapshot(stack: Stack, pool: Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  const own = process.cpuUsage();
  return {
    ...Object.fromEntries(PROCESS_NAMES.map((name) => [name, cpuMsOf(stack.pid(name))])),
    postgres: rows.reduce((sum, { pid }) => sum + (fs.existsSync(`/proc/${pid}`) ? cpuMsOf(pid) : 0), 0),
    'load generator': (own.user + own.system) / 1000,
  };
}

function campaignBody(workspaceId: string, n: string): Record<string, unknown> {
  return {
    workspace_id: workspaceId,
    name: `Bench campaign ${n}`,
    description: 'Benchmark campaign',
    send_priority: 50,
    schedule_cron: '0 9 * * MON-FRI',
    recipient_source: 'mssql_query',
    mssql_query: 'SELECT TOP 1000 a.AccountId FROM dbo.Accounts a WITH (NOLOCK) JOIN dbo.Subs s ON s.AccountId = a.AccountId WHERE s.Active = 1',
    provider_category_id: `bench-${n}`,
    from_email: 'news@example.com',
    from_name: 'Bench',
    reply_to: 'replies@example.com',
    delivery_mode: 'variants',
    variants: [
      { template_id: 'tpl-a', weight: 1, label: 'A' },
      { template_id: 'tpl-b', weight: 1, label: 'B' },
    ],
  };
}

async function main(): Promise<void> {
  // Other work on the machine shows in the figures: record how busy it was before this run added its own.
  const loadBefore = os.loadavg()[0];
  const suffix = uniqueSuffix();
  const [postgres, clickhouse] = await Promise.all([createTestPostgres('bench'), createTestClickHouse('bench')]);
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'campaign-bench-'));
  const pool = new Pool({ connectionString: postgres.url, max: 10 });
  const stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    env: {
      DEV_AUTH_ENABLED: '1',
      NODE_ENV: 'development',
      LOG_LEVEL: 'warn',
      DATABASE_URL: postgres.url,
      CLICKHOUSE_URL: clickhouse.url,
      CLICKHOUSE_DATABASE: clickhouse.database,
      KAFKA_EVENTS_TOPIC: `engagement-events-bench-${suffix}`,
      KAFKA_DLQ_TOPIC: `engagement-events-dlq-bench-${suffix}`,
      KAFKA_CONSUMER_GROUP: `ingestion-bench-${suffix}`,
      KAFKA_TOPIC_PARTITIONS: '1',
    },
  });
  try {
    const identity = createClient(identityV1.IdentityServiceClient, stack.urls.grpc.identity);
    const workspaceId = (await call(identity.createWorkspace.bind(identity), { name: `Bench ${suffix}` })).workspace!.id;
    identity.close();

    const request = async (method: string, route: string, body: unknown, expected: number): Promise<Record<string, unknown>> => {
      const response = await fetch(`${stack.urls.gateway}${route}`, {
        method,
        headers: { 'content-type': 'application/json', workspace_id: workspaceId },
        body: JSON.stringify(body),
      });
      const answer = (await response.json()) as Record<string, unknown>;
      if (response.status !== expected) throw new Error(`${response.status} ${JSON.stringify(answer)}`);
      return answer;
    };
    const create = (n: string) => request('POST', '/email-campaigns/', campaignBody(workspaceId, n), 201);
    const count = RATE * SECONDS;
    const results: PhaseResult[] = [];
    const cpu: Record<string, Record<string, number>> = {};
    const measure = async (phase: string, send: (i: number) => Promise<unknown>): Promise<void> => {
      const before = await cpuSnapshot(stack, pool);
      results.push(await fixedRate(phase, count, send));
      const after = await cpuSnapshot(stack, pool);
      cpu[phase] = Object.fromEntries(Object.keys(after).map((name) => [name, round((after[name] - before[name]) / count)]));
    };

    // JIT, connection pools and caches warm up outside the measured window: 3 s at the same rate.
    const warmUp = RATE * 3;
    const warmed = await fixedRate('warm-up', warmUp, (i) => create(`warm-${i}`));
    if (warmed.failed === warmUp) throw new Error(`every warm-up request failed: ${warmed.firstError}`);

    const ids: string[] = [];
    await measure('gateway POST /email-campaigns/', async (i) => {
      ids.push((await create(`c-${i}`)).id as string);
    });
    await measure('gateway PUT /email-campaigns/{id}', (i) =>
      request(
        'PUT',
        `/email-campaigns/${ids[i % ids.length]}`,
        { name: `Renamed ${i}`, send_priority: i % 1000, variants: [{ template_id: 'tpl-c', weight: 2, label: 'C' }, { template_id: 'tpl-d' }] },
        200,
      ),
    );
    const { variants, workspace_id: _workspaceId, ...columns } = campaignBody(workspaceId, 'x');
    const [a, b] = variants as { template_id: string; weight: number; label: string }[];
    await measure('postgres INSERT (pg, same rows)', async (i) => {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const { rows } = await client.query(
          `INSERT INTO campaign.campaigns (workspace_id, name, description, is_active, send_priority, schedule_cron,
             recipient_source, mssql_query, provider_category_id, from_email, from_name, reply_to, delivery_mode, has_variant_list)
           VALUES ($1, $2, $3, true, $4, $5, $6, $7, $8, $9, $10, $11, $12, true) RETURNING id`,
          [
            workspaceId,
            columns.name,
            columns.description,
            columns.send_priority,
            columns.schedule_cron,
            columns.recipient_source,
            columns.mssql_query,
            `direct-${i}`,
            columns.from_email,
            columns.from_name,
            columns.reply_to,
            columns.delivery_mode,
          ],
        );
        await client.query(
          `INSERT INTO campaign.campaign_variants (campaign_id, position, template_id, weight, label, is_active)
           VALUES ($1, 0, $2, $3, $4, true), ($1, 1, $5, $6, $7, true)`,
          [rows[0].id, a.template_id, a.weight, a.label, b.template_id, b.weight, b.label],
        );
        await client.query('COMMIT');
      } finally {
        client.release();
      }
    });

    console.log(
      `\n${RATE} requests/s for ${SECONDS} s per phase, open loop, ${os.cpus().length} CPUs, ` +
        `1-minute load average before the run ${loadBefore.toFixed(2)}\n`,
    );
    console.table(results);
    const [created, , inserted] = results;
    const ratio = { p50: round(created.p50Ms / inserted.p50Ms), p99: round(created.p99Ms / inserted.p99Ms) };
    console.log(`gateway create / direct insert: p50 x${ratio.p50}, p99 x${ratio.p99}\n\nCPU ms per request:`);
    console.table(cpu);
    fs.mkdirSync(RESULTS_DIR, { recursive: true });
    const file = path.join(RESULTS_DIR, `campaign-bench-${new Date().toISOString().replace(/[:.]/g, '-')}.json`);
    const report = { rate: RATE, seconds: SECONDS, cpus: os.cpus().length, loadBefore, results, ratio, cpuMsPerRequest: cpu };
    fs.writeFileSync(file, JSON.stringify(report, null, 2));
    console.log(`written to ${path.relative(process.cwd(), file)}`);
  } finally {
    await stack.stopAll();
    await pool.end();
    await Promise.all([postgres.drop(), clickhouse.drop()]);
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
