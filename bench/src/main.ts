/**
 * The benchmark suite (`npm run bench`, deploy/local/bench.sh): one stack on
 * private databases and topics, every benchmark, one table.
 *
 *   pipeline  webhook → Kafka → ClickHouse events/s, its Kafka ceiling, webhook latency at half rate
 *   pipeline-mailgun, pipeline-ses, pipeline-postmark   the same path through each other provider's route, one row each
 *   pipeline-tracking   the same path through first-party tracking (signed pixels and links fetched one per call)
 *   campaign  create/update latency at 300 req/s through the gateway, and the direct Postgres insert
 *   query     ListEvents / GetStats p50/p95 at BENCH_EVENTS events (bench/query-analytics.ts)
 *   tracing   the pipeline's events/s with tracing off, then with 10 % of traces exported to Jaeger
 *   validation  the 422 of a body failing in 450,000 places (the first 1,000 listed), one call at a time
 *   sending   a run of BENCH_SENDING_RECIPIENTS into Mailpit: messages/s, CPU per message of every process (the
 *             shared servers too), time to the first message, memory against a run of
 *             BENCH_SENDING_SMALL_RECIPIENTS, and a plain SMTP client's rate and CPU per message (own stack)
 *   fairness  workspace B's stats p95 idle and while workspace A holds its allowed stats calls open (own stack)
 *
 * Prints the machine and its load first (waiting up to BENCH_QUIET_WAIT_SECONDS
 * for the 1-minute load average to drop to BENCH_QUIET_LOAD), progress on
 * stderr, the table on stdout, and writes everything to bench/results/<time>.json.
 * Settings: BENCH_ONLY (comma list of pipeline, pipeline-mailgun, pipeline-ses, pipeline-postmark, pipeline-tracking, campaign, query, tracing,
 * validation, sending, fairness; default all),
 * BENCH_EVENTS (query data set, default 10000000), BENCH_QUERY_DATABASE
 * (bench_suite_analytics), BENCH_QUERY_CLICKHOUSE_URLS (the servers the query benchmark runs on, one after the other,
 * each with the same data set; default CLICKHOUSE_URL; bench/README.md, "ClickHouse 26.9 and 18.16"), BENCH_PIPELINE_EVENTS (200000), BENCH_PROVIDER_EVENTS (20000), BENCH_CONCURRENCY (16),
 * BENCH_LATENCY_SECONDS (15), BENCH_RATE (300), BENCH_SECONDS (10), BENCH_WARM_UP_SECONDS (10),
 * BENCH_QUIET_LOAD (1.5 × cores), BENCH_QUIET_WAIT_SECONDS (600; 0 = do not wait), BENCH_TRACING_EVENTS (100000),
 * BENCH_VALIDATION_CALLS (20), BENCH_SENDING_RECIPIENTS (100000), BENCH_SENDING_SMALL_RECIPIENTS (10000),
 * BENCH_SENDING_CALIBRATION_MESSAGES (as many as BENCH_SENDING_RECIPIENTS),
 * BENCH_FAIRNESS_EVENTS (1000000), BENCH_FAIRNESS_RUNS (40), BENCH_FAIRNESS_HOLDERS (16).
 * Linux only (CPU and memory figures come from /proc).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PROCESS_NAMES } from '@mail/local';
import { startBenchStack } from './bench-stack';
import { campaignSettings, runCampaignBench, type CampaignResult } from './campaign-bench';
import { fairnessSettings, runFairnessBench, type FairnessResult } from './fairness-bench';
import { log } from './measure';
import { MemorySampler } from './memory';
import { runPipelineBench, pipelineSettings, type PipelineResult } from './pipeline-bench';
import { PROVIDERS, providerSettings, runProviderBench, type ProviderResult } from './provider-bench';
import { infraServerPids, postgresPrivateMb, statusMb, waitUntilIdle } from './proc';
import { querySettings, runQueryBench, type QueryResult } from './query-bench';
import {
  TARGETS,
  campaignRows,
  describeMachine,
  fairnessRows,
  machineLine,
  markdownTable,
  memoryRows,
  pipelineRows,
  providerRows,
  queryRows,
  sendingRows,
  tracingRows,
  validationRows,
  type Row,
} from './report';
import { runSendingBench, sendingSettings, type SendingResult } from './sending-bench';
import { runTracingBench, type TracingResult } from './tracing-bench';
import { runValidationBench, validationSettings, type ValidationResult } from './validation-bench';

const BENCHMARKS = [
  'pipeline',
  'pipeline-mailgun',
  'pipeline-ses',
  'pipeline-postmark',
  'pipeline-tracking',
  'campaign',
  'validation',
  'query',
  'tracing',
  'sending',
  'fairness',
] as const;
type Benchmark = (typeof BENCHMARKS)[number];
const RESULTS_DIR = path.resolve(__dirname, '..', 'results');

function selected(env: NodeJS.ProcessEnv = process.env): Set<Benchmark> {
  const wanted = (env.BENCH_ONLY ?? BENCHMARKS.join(','))
    .split(',')
    .map((name) => name.trim())
    .filter(Boolean);
  const unknown = wanted.filter((name) => !(BENCHMARKS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new Error(`BENCH_ONLY: unknown ${unknown.join(', ')} (known: ${BENCHMARKS.join(', ')})`);
  return new Set(wanted as Benchmark[]);
}

/** Other work on a 2-core machine moves every figure: wait a while for a quieter moment, then say how busy it was. */
async function waitForQuiet(): Promise<void> {
  const cores = os.cpus().length;
  const threshold = Number(process.env.BENCH_QUIET_LOAD ?? cores * 1.5);
  const deadline = Date.now() + Number(process.env.BENCH_QUIET_WAIT_SECONDS ?? 600) * 1000;
  while (os.loadavg()[0] > threshold && Date.now() < deadline) {
    log('bench', `load average ${os.loadavg()[0].toFixed(2)} > ${threshold} on ${cores} cores: waiting for a quieter moment`);
    await sleep(15_000);
  }
}

/**
 * One benchmark's aftermath (ClickHouse merging the pipeline's parts, Kafka
 * flushing) must not be measured as the next one's latency: wait, up to a
 * minute, for a few seconds in which the machine is mostly idle.
 */
async function waitUntilSettled(next: Benchmark): Promise<void> {
  await waitUntilIdle(3_000, 60_000, (busy) =>
    log('bench', `${Math.round(busy * 100)} % CPU busy before ${next}: waiting for the last benchmark's work to settle`),
  );
}

async function main(): Promise<void> {
  const benchmarks = selected();
  await waitForQuiet();
  const machine = describeMachine();
  const startedAt = new Date();
  log('bench', machineLine(machine));

  const memory = new MemorySampler();
  const servers = infraServerPids();
  // The servers are shared with `npm run up` and the tests: their figures include that work.
  memory.track('postgres server', 'shared server; private RSS (RssAnon) of the postmaster and all backends', () =>
    postgresPrivateMb(servers.postgres),
  );
  memory.track('kafka broker', 'shared server; VmRSS', () => statusMb(servers.kafka, 'VmRSS'));
  memory.track('clickhouse server', 'shared server; VmRSS', () => statusMb(servers.clickhouse, 'VmRSS'));
  memory.trackPid('bench client', () => process.pid);
  memory.start();

  let pipeline: PipelineResult | undefined;
  const providers: ProviderResult[] = [];
  let campaign: CampaignResult | undefined;
  let validation: ValidationResult | undefined;
  let query: QueryResult | undefined;
  let tracing: TracingResult | undefined;
  let sending: SendingResult | undefined;
  let fairness: FairnessResult | undefined;
  // A benchmark that fails is reported as such; the others still count.
  const failures: Partial<Record<Benchmark, string>> = {};
  const attempt = async <T>(name: Benchmark, run: () => Promise<T>): Promise<T | undefined> => {
    if (!benchmarks.has(name)) return undefined;
    try {
      return await run();
    } catch (error) {
      failures[name] = error instanceof Error ? error.message.split('\n')[0] : String(error);
      log(name, `FAILED: ${String(error instanceof Error ? (error.stack ?? error.message) : error)}`);
      return undefined;
    }
  };
  try {
    const providerBenchmarks = PROVIDERS.filter((provider) => benchmarks.has(`pipeline-${provider}`));
    if (benchmarks.has('pipeline') || benchmarks.has('campaign') || benchmarks.has('validation') || providerBenchmarks.length > 0) {
      const bench = await startBenchStack();
      for (const name of PROCESS_NAMES) memory.trackPid(name, () => bench.stack.pid(name));
      try {
        pipeline = await attempt('pipeline', () => runPipelineBench(bench, pipelineSettings()));
        // After SendGrid's, so its figure is measured as it always was.
        for (const provider of providerBenchmarks) {
          const name = `pipeline-${provider}` as const;
          if (pipeline || providers.length > 0) await waitUntilSettled(name);
          const result = await attempt(name, () => runProviderBench(bench, provider, providerSettings()));
          if (result) providers.push(result);
        }
        if (pipeline || providers.length > 0) await waitUntilSettled('campaign');
        campaign = await attempt('campaign', () => runCampaignBench(bench, campaignSettings()));
        if (benchmarks.has('validation') && (pipeline || providers.length > 0 || campaign)) await waitUntilSettled('validation');
        validation = await attempt('validation', () => runValidationBench(bench, validationSettings()));
      } finally {
        memory.sample();
        await bench.close();
      }
    }
    if (pipeline || providers.length > 0 || campaign) await waitUntilSettled('query');
    query = await attempt('query', () => runQueryBench(memory, querySettings()));
    if (benchmarks.has('tracing') && (pipeline || campaign || query)) await waitUntilSettled('tracing');
    tracing = await attempt('tracing', () => runTracingBench());
    if (benchmarks.has('sending') && (pipeline || campaign || query || tracing)) await waitUntilSettled('sending');
    sending = await attempt('sending', () => runSendingBench(sendingSettings()));
    if (benchmarks.has('fairness') && (pipeline || campaign || validation || query || tracing || sending))
      await waitUntilSettled('fairness');
    fairness = await attempt('fairness', () => runFairnessBench(fairnessSettings()));
  } finally {
    memory.stop();
  }

  const rows: Row[] = [
    ...(pipeline ? pipelineRows(pipeline, machine.cpus) : []),
    ...providers.flatMap(providerRows),
    ...(campaign ? campaignRows(campaign, machine.cpus) : []),
    ...(validation ? validationRows(validation) : []),
    ...(query ? queryRows(query) : []),
    ...(tracing ? tracingRows(tracing) : []),
    ...(sending ? sendingRows(sending) : []),
    ...(fairness ? fairnessRows(fairness) : []),
    ...Object.entries(failures).map(([name, error]): Row => ({
      measure: `${name} benchmark`,
      result: 'not measured',
      target: '',
      verdict: 'MISSED',
      note: `failed: ${error}`,
    })),
    ...memoryRows(memory.results()),
  ];
  const finishedAt = new Date();
  const table = markdownTable(rows);
  console.log(`\nBenchmark suite, ${startedAt.toISOString()} (${Math.round((finishedAt.getTime() - startedAt.getTime()) / 1000)} s)`);
  console.log(machineLine(machine));
  console.log(
    `Load average at the end: ${os
      .loadavg()
      .map((l) => l.toFixed(2))
      .join(' / ')}\n`,
  );
  console.log(table);

  fs.mkdirSync(RESULTS_DIR, { recursive: true });
  const file = path.join(RESULTS_DIR, `${startedAt.toISOString().replace(/[:.]/g, '-')}.json`);
  const report = {
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    machine,
    loadAverageAtEnd: os.loadavg(),
    targets: TARGETS,
    pipeline,
    providers,
    campaign,
    validation,
    query,
    tracing,
    sending,
    fairness,
    failures,
    memoryMb: memory.results(),
    benchClientPeakMb: statusMb(process.pid, 'VmHWM'),
    table: rows,
  };
  fs.writeFileSync(file, `${JSON.stringify(report, null, 2)}\n`);
  console.log(`\nresults: ${path.relative(process.cwd(), file)}`);
  if (Object.keys(failures).length > 0) process.exitCode = 1;
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
