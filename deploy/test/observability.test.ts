import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';
import { registry } from '@mail/common';
import { awaitGoTools, GO_TOOLS_TIMEOUT_MS } from '@mail/local';
import { REPO_ROOT } from './support/tools';

/**
 * deploy/observability: the alert rules and their PrometheusRule twin, checked
 * and unit-tested by Prometheus's own promtool (`infra.sh up promtool` builds
 * it; the test command exports PROMTOOL), and the Grafana dashboard, whose
 * queries promtool parses too. Every metric they name must be one a process
 * exports: the registry of @mail/common is read after loading every module
 * that registers metrics in it.
 */
const OBSERVABILITY = path.join(REPO_ROOT, 'deploy/observability');
const RULES = path.join(OBSERVABILITY, 'alerts.rules.yml');
const PROMETHEUS_RULE = path.join(REPO_ROOT, 'deploy/k8s/monitoring/prometheus-rule.yaml');
const DASHBOARD = path.join(OBSERVABILITY, 'grafana-dashboard.json');
/** Where processes register metrics: services' and the gateway's sources. */
const SOURCE_DIRS = ['services', 'gateway/src'];
/** Series Prometheus itself adds to every scrape. */
const SCRAPE_SERIES = ['up', 'scrape_duration_seconds', 'scrape_samples_scraped'];

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
}
interface Dashboard {
  panels: { title: string; type: string; targets?: { expr: string }[] }[];
}

function promtool(...args: string[]): string {
  const bin = process.env.PROMTOOL;
  if (!bin)
    throw new Error('PROMTOOL not set: `npm test` builds and exports it (by hand: eval "$(bash deploy/local/infra.sh up promtool)")');
  try {
    return execFileSync(bin, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`promtool ${args.join(' ')} failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

const rules = (): Rule[] =>
  (YAML.parse(fs.readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((group) => group.rules);
const dashboard = (): Dashboard => JSON.parse(fs.readFileSync(DASHBOARD, 'utf8')) as Dashboard;
/** Grafana's own variables, as a plain query would have them. */
const dashboardQueries = (): { title: string; expr: string }[] =>
  dashboard().panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ title: panel.title, expr: target.expr.replaceAll('$__rate_interval', '5m') })),
  );

const PROMQL_WORDS = new Set(['and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'offset']);

/** The metric names a PromQL expression selects: identifiers that are not functions, labels, keywords or durations. */
function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const names = new Set<string>();
  for (const match of bare.matchAll(/(?<![\w:.$])([a-zA-Z_:][\w:]*)(?![\w:])(?!\s*\()/g)) {
    if (!PROMQL_WORDS.has(match[1])) names.add(match[1]);
  }
  return [...names];
}

/** Every series name a process exports: its metrics, a histogram's _bucket/_count/_sum. */
async function exportedSeries(): Promise<Set<string>> {
  const files = SOURCE_DIRS.flatMap((dir) => sourceFiles(path.join(REPO_ROOT, dir))).filter((file) =>
    /registers:\s*\[registry\]/.test(fs.readFileSync(file, 'utf8')),
  );
  expect(files.length).toBeGreaterThan(2);
  for (const file of files) jest.requireActual<object>(file);
  const series = new Set(SCRAPE_SERIES);
  for (const metric of await registry.getMetricsAsJSON()) {
    series.add(metric.name);
    // prom-client's typings call the type an enum; at run time it is the exposition format's word.
    const type = String(metric.type);
    if (type === 'histogram') for (const suffix of ['_bucket', '_count', '_sum']) series.add(metric.name + suffix);
    if (type === 'summary') for (const suffix of ['_count', '_sum']) series.add(metric.name + suffix);
  }
  return series;
}

function sourceFiles(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return ['node_modules', 'dist', 'test', 'dashboard'].includes(entry.name) ? [] : sourceFiles(full);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [full] : [];
  });
}

describe('alert rules', () => {
  beforeAll(() => awaitGoTools(), GO_TOOLS_TIMEOUT_MS);

  test('promtool checks them and passes their unit tests (alerts.test.yml)', () => {
    expect(promtool('check', 'rules', RULES)).toMatch(/SUCCESS: 9 rules found/);
    expect(promtool('test', 'rules', path.join(OBSERVABILITY, 'alerts.test.yml'))).toMatch(/SUCCESS/);
  });

  test('cover lag growth, a rising 503 rate, dead-lettered events, stalled partitions, readiness failures, refused analytics reads and runs failing for their source', () => {
    const expressions = rules().map((rule) => rule.expr);
    const selecting = (metric: string): boolean => expressions.some((expr) => metricNames(expr).includes(metric));
    expect(
      [
        'ingestion_consumer_lag',
        'http_request_duration_seconds_count',
        'ingestion_events_dead_lettered_total',
        'ingestion_partition_stalled_seconds',
        'readiness_ready',
        'analytics_reads_refused_total',
        'delivery_runs_failed_total',
      ].filter((m) => !selecting(m)),
    ).toEqual([]);
    expect(expressions.some((expr) => expr.includes('status="503"'))).toBe(true);
  });

  test('the PrometheusRule carries the same groups (so the promtool checks above hold for it)', () => {
    const resource = YAML.parse(fs.readFileSync(PROMETHEUS_RULE, 'utf8')) as { apiVersion: string; kind: string; spec: unknown };
    expect(resource).toMatchObject({ apiVersion: 'monitoring.coreos.com/v1', kind: 'PrometheusRule' });
    expect(resource.spec).toEqual(YAML.parse(fs.readFileSync(RULES, 'utf8')));
  });
});

describe('Grafana dashboard', () => {
  test('has a panel for webhook outcomes, Kafka lag per partition, batch sizes and failures, API latency per route and gRPC errors', () => {
    const queries = dashboardQueries();
    const has = (pattern: RegExp): boolean => queries.some(({ expr }) => pattern.test(expr));
    expect(has(/webhook_events_total/)).toBe(true);
    expect(has(/by \(partition\) \(ingestion_consumer_lag\)/)).toBe(true);
    expect(has(/ingestion_events_consumed_total.*\/.*ingestion_batch_duration_seconds_count/)).toBe(true);
    expect(has(/ingestion_batch_retries_total/) && has(/ingestion_events_dead_lettered_total/)).toBe(true);
    expect(has(/by \(le, route\) \(rate\(http_request_duration_seconds_bucket/)).toBe(true);
    expect(has(/grpc_server_handling_seconds_count\{code!="OK"\}/)).toBe(true);
  });

  test('every query parses as PromQL (promtool, as recording rules)', () => {
    const queries = dashboardQueries();
    const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dashboard-')), 'queries.yml');
    const groups = [{ name: 'dashboard', rules: queries.map(({ expr }, i) => ({ record: `dashboard:query:${i}`, expr })) }];
    fs.writeFileSync(file, YAML.stringify({ groups }));
    try {
      expect(promtool('check', 'rules', file)).toMatch(new RegExp(`SUCCESS: ${queries.length} rules found`));
    } finally {
      fs.rmSync(path.dirname(file), { recursive: true, force: true });
    }
  });
});

test('every metric the dashboard and the rules name is exported by a process', async () => {
  const exported = await exportedSeries();
  const named = [...dashboardQueries(), ...rules().map((rule) => ({ title: rule.alert ?? rule.record ?? '', expr: rule.expr }))];
  const unknown = named.flatMap(({ title, expr }) =>
    metricNames(expr)
      .filter((name) => !exported.has(name))
      .map((name) => `${title}: ${name}`),
  );
  expect(unknown).toEqual([]);
  expect(metricNames('sum by (le) (rate(a_bucket{x="y"}[5m])) / on (job) group_left b_total and c')).toEqual(['a_bucket', 'b_total', 'c']);
});
