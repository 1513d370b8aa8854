/**
 * Campaign write latency through the whole system, open loop, on the suite's
 * stack (bench-stack.ts). Sends at a fixed rate whatever the answers do (no
 * coordinated omission: latency counts from the moment a request was due, not
 * from when it was sent):
 *   1. POST /email-campaigns/ (a full campaign with two variants),
 *   2. PUT /email-campaigns/{id} (rename, reprioritize, replace the variants),
 *   3. the same campaign row and variants inserted straight into Postgres with
 *      pg (one transaction), the floor the API adds to.
 * Reports p50/p99/max per phase, the create/insert ratio, and the CPU each
 * process spent per request (where the time goes when the rate is not met).
 * Settings: BENCH_RATE (requests/s, default 300), BENCH_SECONDS (per phase, default 10),
 * BENCH_WARM_UP_SECONDS (creates for this long, then updates for half as long, unmeasured; default 10).
 */
import http from 'node:http';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'pg';
import { call, createClient } from '@mail/common';
import { PROCESS_NAMES, type Stack } from '@mail/local';
import { identityV1 } from '@mail/proto';
import type { BenchStack } from './bench-stack';
import { log, round, summarize } from './measure';
import { cpuMs } from './proc';

export interface CampaignSettings {
  rate: number;
  seconds: number;
  /** Creates for this long, then updates for half as long, before measuring. */
  warmUpSeconds: number;
}

export function campaignSettings(env: NodeJS.ProcessEnv = process.env): CampaignSettings {
  return {
    rate: Number(env.BENCH_RATE ?? 300),
    seconds: Number(env.BENCH_SECONDS ?? 10),
    warmUpSeconds: Number(env.BENCH_WARM_UP_SECONDS ?? 10),
  };
}

export interface PhaseResult {
  phase: string;
  sent: number;
  failed: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** The first failure, to tell overload (503) from a broken request. */
  firstError?: string;
}

export interface CampaignResult {
  settings: CampaignSettings;
  create: PhaseResult;
  update: PhaseResult;
  directInsert: PhaseResult;
  /** Gateway create latency over direct insert latency. */
  ratio: { p50: number; p99: number };
  /** Per phase, per process. */
  cpuMsPerRequest: Record<string, Record<string, number>>;
  loadAverageAfter: number;
}

/**
 * node:http on kept-alive sockets: the load generator shares the cores with
 * the system it measures, and fetch (undici) costs far more CPU per request
 * (bench/README.md, "Benchmark harness").
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

function sendJson(
  url: string,
  method: string,
  headers: Record<string, string>,
  body: unknown,
): Promise<{ status: number; answer: unknown }> {
  const payload = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const request = http.request(
      url,
      { method, agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': payload.length } },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, answer: JSON.parse(Buffer.concat(chunks).toString()) }));
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(payload);
  });
}

/** Sends request i at start + i/rate, never waiting for earlier answers. */
async function fixedRate(rate: number, phase: string, count: number, send: (i: number) => Promise<unknown>): Promise<PhaseResult> {
  const latencies: number[] = [];
  let failed = 0;
  let firstError: string | undefined;
  const pending: Promise<unknown>[] = [];
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const due = start + (i * 1000) / rate;
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
  return { phase, sent: count, failed, ...summarize(latencies.sort((a, b) => a - b)), firstError };
}

/** CPU milliseconds so far of every stack process, of this database's Postgres backends and of this load generator. */
async function cpuSnapshot(stack: Stack, pool: Pool): Promise<Record<string, number>> {
  const { rows } = await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()');
  const own = process.cpuUsage();
  return {
    ...Object.fromEntries(PROCESS_NAMES.map((name) => [name, cpuMs(stack.pid(name))])),
    postgres: rows.reduce((sum, { pid }) => sum + cpuMs(pid), 0),
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
    mssql_query:
      'SELECT TOP 1000 a.AccountId FROM dbo.Accounts a WITH (NOLOCK) JOIN dbo.Subs s ON s.AccountId = a.AccountId WHERE s.Active = 1',
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

/** Renames, reprioritizes and replaces the variants. */
function updateBody(i: number): Record<string, unknown> {
  return {
    name: `Renamed ${i}`,
    send_priority: i % 1000,
    variants: [{ template_id: 'tpl-c', weight: 2, label: 'C' }, { template_id: 'tpl-d' }],
  };
}

export async function runCampaignBench(bench: BenchStack, settings: CampaignSettings = campaignSettings()): Promise<CampaignResult> {
  const { stack, suffix } = bench;
  const { rate, seconds, warmUpSeconds } = settings;
  const pool = new Pool({ connectionString: bench.postgresUrl, max: 10 });
  try {
    const identity = createClient(identityV1.IdentityServiceClient, stack.urls.grpc.identity);
    const workspaceId = (await call(identity.createWorkspace.bind(identity), { name: `Bench ${suffix}` })).workspace!.id;
    identity.close();

    const request = async (method: string, route: string, body: unknown, expected: number): Promise<Record<string, unknown>> => {
      const { status, answer } = await sendJson(`${stack.urls.gateway}${route}`, method, { workspace_id: workspaceId }, body);
      if (status !== expected) throw new Error(`${status} ${JSON.stringify(answer)}`);
      return answer as Record<string, unknown>;
    };
    const create = (n: string) => request('POST', '/email-campaigns/', campaignBody(workspaceId, n), 201);
    const count = rate * seconds;
    const cpu: Record<string, Record<string, number>> = {};
    const measure = async (phase: string, send: (i: number) => Promise<unknown>): Promise<PhaseResult> => {
      const before = await cpuSnapshot(stack, pool);
      const result = await fixedRate(rate, phase, count, send);
      const after = await cpuSnapshot(stack, pool);
      cpu[phase] = Object.fromEntries(Object.keys(after).map((name) => [name, round((after[name] - before[name]) / count)]));
      log(
        'campaign',
        `${phase}: p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms, max ${result.maxMs} ms, ${result.failed} of ${result.sent} failed`,
      );
      return result;
    };

    // JIT, connection pools and caches warm up outside the measured window, at the same rate: creates, then
    // updates of those: the first seconds after a start cost far more CPU per request (bench/README.md, "Benchmark harness").
    const warmIds: string[] = [];
    const warmedCreates = await fixedRate(rate, 'warm-up create', rate * warmUpSeconds, async (i) => {
      warmIds.push((await create(`warm-${suffix}-${i}`)).id as string);
    });
    if (warmIds.length === 0) throw new Error(`every warm-up request failed: ${warmedCreates.firstError}`);
    await fixedRate(rate, 'warm-up update', (rate * warmUpSeconds) / 2, (i) =>
      request('PUT', `/email-campaigns/${warmIds[i % warmIds.length]}`, updateBody(i), 200),
    );

    const ids: string[] = [];
    const created = await measure('gateway POST /email-campaigns/', async (i) => {
      ids.push((await create(`c-${suffix}-${i}`)).id as string);
    });
    const updated = await measure('gateway PUT /email-campaigns/{id}', (i) =>
      request('PUT', `/email-campaigns/${ids[i % ids.length]}`, updateBody(i), 200),
    );
    const { variants, workspace_id: _workspaceId, ...columns } = campaignBody(workspaceId, 'x');
    const [a, b] = variants as { template_id: string; weight: number; label: string }[];
    const inserted = await measure('postgres INSERT (pg, same rows)', async (i) => {
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
            `direct-${suffix}-${i}`,
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
    const ratio = { p50: round(created.p50Ms / inserted.p50Ms), p99: round(created.p99Ms / inserted.p99Ms) };
    log('campaign', `gateway create / direct insert: p50 x${ratio.p50}, p99 x${ratio.p99}`);
    return {
      settings,
      create: created,
      update: updated,
      directInsert: inserted,
      ratio,
      cpuMsPerRequest: cpu,
      loadAverageAfter: round(os.loadavg()[0], 1),
    };
  } finally {
    await pool.end();
  }
}
