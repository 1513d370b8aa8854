/**
 * Analytics read latency at scale: runs bench/query-analytics.ts (compiled
 * to bench/dist/query-analytics.js by deploy/local/bench.sh) as a child
 * process and reads the JSON it writes to bench/results/. It generates
 * BENCH_EVENTS events in its own ClickHouse database (reused while the data
 * set's version and size match, since 10 M take minutes), starts its own analytics process
 * and times ListEvents / GetStats / ListSuppressions over gRPC, then SQL
 * shapes straight on ClickHouse.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import type { MemorySampler } from './memory';
import { log } from './measure';
import { childrenOf } from './proc';

const SCRIPT = path.resolve(__dirname, 'query-analytics.js');
const RESULTS_DIR = path.resolve(__dirname, '..', 'results');

export interface QuerySettings {
  events: number;
  /** ClickHouse database of the generated events; the suite's own, so it never truncates someone else's data set. */
  database: string;
  /** The servers the benchmark runs on, one after the other, each with the same data set (another engine, say). */
  clickhouseUrls: string[];
}

export function querySettings(env: NodeJS.ProcessEnv = process.env): QuerySettings {
  const urls = env.BENCH_QUERY_CLICKHOUSE_URLS ?? env.CLICKHOUSE_URL ?? '';
  return {
    events: Number(env.BENCH_EVENTS ?? 10_000_000),
    database: env.BENCH_QUERY_DATABASE ?? 'bench_suite_analytics',
    clickhouseUrls: urls
      .split(',')
      .map((url) => url.trim())
      .filter(Boolean),
  };
}

/** One scenario as bench/query-analytics.ts reports it. */
export interface QueryScenario {
  scenario: string;
  runs: number;
  p50Ms: number;
  p95Ms: number;
  maxMs: number;
  note: string;
  load: number;
}

/** The benchmark on one server. */
export interface EngineRun {
  clickhouseUrl: string;
  /** What the server reports (`SELECT version()`). */
  version: string;
  /** The report of query-analytics, as written. */
  file: string;
  scenarios: QueryScenario[];
}

export interface QueryResult {
  settings: QuerySettings;
  engines: EngineRun[];
  seconds: number;
}

/** The node process query-analytics starts for the analytics service (its direct child). */
function analyticsChild(parent: number | undefined): number | undefined {
  if (parent === undefined) return undefined;
  return childrenOf(parent).find((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('services/analytics/dist/main.js');
    } catch {
      return false;
    }
  });
}

export async function runQueryBench(memory: MemorySampler, settings: QuerySettings = querySettings()): Promise<QueryResult> {
  if (!fs.existsSync(SCRIPT)) throw new Error(`${SCRIPT} is missing: build it first (npx tsc -p bench/query-analytics.tsconfig.json)`);
  if (settings.clickhouseUrls.length === 0) throw new Error('no ClickHouse to run on: CLICKHOUSE_URL or BENCH_QUERY_CLICKHOUSE_URLS');
  const started = Date.now();
  const engines: EngineRun[] = [];
  for (const clickhouseUrl of settings.clickhouseUrls) engines.push(await runOnEngine(memory, settings, clickhouseUrl));
  return { settings, engines, seconds: Math.round((Date.now() - started) / 1000) };
}

async function runOnEngine(memory: MemorySampler, settings: QuerySettings, clickhouseUrl: string): Promise<EngineRun> {
  const before = new Set(fs.existsSync(RESULTS_DIR) ? fs.readdirSync(RESULTS_DIR) : []);
  const child = spawn(process.execPath, [SCRIPT], {
    cwd: path.resolve(__dirname, '..', '..'),
    env: { ...process.env, BENCH_EVENTS: String(settings.events), BENCH_DATABASE: settings.database, CLICKHOUSE_URL: clickhouseUrl },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let analyticsPid: number | undefined;
  memory.trackPid(`analytics (query bench, ${clickhouseUrl})`, () => (analyticsPid ??= analyticsChild(child.pid)));
  for (const stream of [child.stdout, child.stderr]) {
    readline.createInterface({ input: stream }).on('line', (line) => log('query', line));
  }
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', (exitCode) => resolve(exitCode));
  });
  if (code !== 0) throw new Error(`query-analytics exited with code ${code}`);
  const written = fs.readdirSync(RESULTS_DIR).filter((name) => name.startsWith('query-analytics-') && !before.has(name));
  if (written.length !== 1) throw new Error(`expected one new query-analytics report in ${RESULTS_DIR}, found ${written.length}`);
  const file = path.join(RESULTS_DIR, written[0]);
  const report = JSON.parse(fs.readFileSync(file, 'utf8')) as { version: string; results: QueryScenario[] };
  return { clickhouseUrl, version: report.version, file, scenarios: report.results };
}
