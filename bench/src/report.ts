/**
 * The suite's one table: each figure next to its target, with one line why
 * when it misses (from the CPU each process spent per event or request).
 */
import fs from 'node:fs';
import os from 'node:os';
import type { CampaignResult, PhaseResult } from './campaign-bench';
import type { FairnessResult } from './fairness-bench';
import type { MemoryFigure } from './memory';
import type { PipelineResult } from './pipeline-bench';
import type { ProviderResult } from './provider-bench';
import type { EngineRun, QueryResult, QueryScenario } from './query-bench';
import type { RunFigures, SendingResult } from './sending-bench';
import type { TracingResult } from './tracing-bench';
import type { ValidationResult } from './validation-bench';

export const TARGETS = {
  endToEndEventsPerSecond: 30_000,
  queryPage1P95Ms: 50,
  /** GetStats over the last 7 or 30 days, or one campaign over all time. */
  statsP95Ms: 100,
  /** GetStats of every campaign over all time. */
  statsAllCampaignsP95Ms: 500,
  campaignP99Ms: 20,
  /** The analytics targets hold at this many events. */
  queryEvents: 10_000_000,
  /** A workspace's stats p95 while another holds its allowed reads, over its idle p95. */
  fairnessRatio: 2,
} as const;

export interface Machine {
  cpus: number;
  cpuModel: string;
  memoryGb: number;
  availableMemoryGb: number;
  /** 1, 5 and 15 minute load averages when the measurements started. */
  loadAverage: [number, number, number];
  /** quiet: load below half the cores; busy: more runnable work than cores. */
  state: 'quiet' | 'loaded' | 'busy';
  node: string;
  kernel: string;
}

export function describeMachine(): Machine {
  const cpus = os.cpus();
  const loadAverage = os.loadavg().map((load) => Math.round(load * 100) / 100) as [number, number, number];
  const available = /^MemAvailable:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'));
  const state = loadAverage[0] < cpus.length / 2 ? 'quiet' : loadAverage[0] <= cpus.length ? 'loaded' : 'busy';
  return {
    cpus: cpus.length,
    cpuModel: cpus[0]?.model ?? 'unknown',
    memoryGb: Math.round((os.totalmem() / 2 ** 30) * 10) / 10,
    availableMemoryGb: available ? Math.round((Number(available[1]) / 2 ** 20) * 10) / 10 : 0,
    loadAverage,
    state,
    node: process.version,
    kernel: os.release(),
  };
}

export function machineLine(machine: Machine): string {
  const [one, five, fifteen] = machine.loadAverage;
  const warning =
    machine.state === 'busy'
      ? ` (BUSY: more runnable work than cores before the suite started; the figures below are pessimistic)`
      : machine.state === 'loaded'
        ? ' (partly loaded by other work before the suite started)'
        : ' (quiet)';
  return (
    `Machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGb} GB memory (${machine.availableMemoryGb} GB available), ` +
    `Node ${machine.node}, Linux ${machine.kernel}; load average at start ${one} / ${five} / ${fifteen}${warning}`
  );
}

export interface Row {
  measure: string;
  result: string;
  target: string;
  /** Empty where there is no target. */
  verdict: '' | 'met' | 'MISSED';
  note: string;
}

const number = (value: number) => Math.round(value).toLocaleString('en-US');
const ms = (value: number) => `${value < 10 ? value.toFixed(1) : Math.round(value)} ms`;

function cpuBreakdown(perProcess: Record<string, number>, unit: string, skip: readonly string[] = []): { total: number; text: string } {
  const entries = Object.entries(perProcess).filter(([name, value]) => !skip.includes(name) && value > 0);
  const total = entries.reduce((sum, [, value]) => sum + value, 0);
  const text = entries
    .sort(([, a], [, b]) => b - a)
    .map(([name, value]) => `${name} ${value < 10 ? value.toFixed(1) : Math.round(value)}`)
    .join(', ');
  return { total, text: `${total < 10 ? total.toFixed(2) : Math.round(total)} ${unit} (${text})` };
}

export function pipelineRows(result: PipelineResult, cpus: number): Row[] {
  const { endToEnd, latencyAtHalfRate: latency } = result;
  const met = endToEnd.eventsPerSecond >= TARGETS.endToEndEventsPerSecond;
  const cpu = cpuBreakdown(result.cpuMicrosecondsPerEvent, 'µs CPU per event');
  const bound = Math.round((cpus * 1_000_000) / cpu.total);
  return [
    {
      measure: `Webhook → Kafka → ClickHouse, events/s end to end (${number(endToEnd.events)} events, calls of ${result.settings.perCall})`,
      result: `${number(endToEnd.eventsPerSecond)}/s (webhook accepted ${number(endToEnd.webhookAcceptedEventsPerSecond)}/s)`,
      target: `≥ ${number(TARGETS.endToEndEventsPerSecond)}/s`,
      verdict: met ? 'met' : 'MISSED',
      note: met
        ? ''
        : endToEnd.eventsPerSecond >= bound * 0.75
          ? `CPU-bound: ${cpu.text}; ${cpus} cores allow at most ≈ ${number(bound)}/s`
          : `${cpu.text}; ${cpus} cores would allow ≈ ${number(bound)}/s, so waiting (batches, polling), not CPU, limits this run`,
    },
    {
      measure: 'Ceiling: raw kafkajs producer to the same broker, same run',
      result: `${number(result.rawProducerEventsPerSecond)}/s`,
      target: '',
      verdict: '',
      note: '',
    },
    {
      measure: `Webhook 202 latency at half the maximum rate (${number(latency.eventsPerSecond)} events/s, open loop)`,
      result: `p50 ${ms(latency.p50Ms)}, p99 ${ms(latency.p99Ms)}`,
      target: '',
      verdict: '',
      note: latency.failed > 0 ? `${latency.failed} of ${latency.calls} calls failed` : '',
    },
  ];
}

/** One row per other provider: its route end to end, one event per call (not comparable with SendGrid's calls of 100). */
export function providerRows(result: ProviderResult): Row[] {
  const route = result.provider === 'tracking' ? 'first-party tracking (GET /t/o/ and /t/c/)' : `/webhook/${result.provider}`;
  const cpu = cpuBreakdown(result.cpuMicrosecondsPerEvent, 'µs CPU per event');
  return [
    {
      measure: `${route} → Kafka → ClickHouse, events/s end to end (${number(result.settings.events)} events, one per call, ${result.settings.concurrency} at a time)`,
      result: `${number(result.eventsPerSecond)}/s (accepted ${number(result.webhookAcceptedEventsPerSecond)}/s; answer p50 ${ms(result.p50Ms)}, p99 ${ms(result.p99Ms)})`,
      target: '',
      verdict: '',
      note: [cpu.text, result.provider === 'ses' ? 'SNS signatures not verified (no certificate host in the bench)' : '']
        .filter(Boolean)
        .join('; '),
    },
  ];
}

/** Below this share of the cores in use, a missed p99 is not queueing for CPU. */
const QUEUEING_SHARE = 60;

function campaignRow(
  phase: PhaseResult,
  label: string,
  rate: number,
  cpuMs: Record<string, number>,
  cpus: number,
  directInsert: PhaseResult,
): Row {
  const met = phase.p99Ms < TARGETS.campaignP99Ms && phase.failed === 0;
  const cpu = cpuBreakdown(cpuMs, 'ms CPU per request', ['load generator']);
  const busyShare = Math.round((rate * cpu.total) / (10 * cpus));
  const why =
    busyShare >= QUEUEING_SHARE
      ? 'requests queue behind each other and behind other work'
      : `the slowest requests come in clusters, during garbage-collection pauses of the gateway and campaign processes (bench/README.md); the direct Postgres insert of the same run: max ${ms(directInsert.maxMs)}`;
  return {
    measure: `Campaign ${label} at ${rate} req/s (gateway → gRPC → Postgres, open loop)`,
    result: `p50 ${ms(phase.p50Ms)}, p99 ${ms(phase.p99Ms)}${phase.failed > 0 ? `, ${phase.failed} failed` : ''}`,
    target: `p99 < ${TARGETS.campaignP99Ms} ms`,
    verdict: met ? 'met' : 'MISSED',
    note: met ? '' : `${cpu.text} = ${busyShare} % of ${cpus} cores at this rate: ${why}`,
  };
}

export function campaignRows(result: CampaignResult, cpus: number): Row[] {
  const { rate } = result.settings;
  const [createCpu, updateCpu] = Object.values(result.cpuMsPerRequest);
  return [
    campaignRow(result.create, 'create (POST)', rate, createCpu, cpus, result.directInsert),
    campaignRow(result.update, 'update (PUT)', rate, updateCpu, cpus, result.directInsert),
    {
      measure: `Direct Postgres insert of the same rows at ${rate}/s (pg, one transaction)`,
      result: `p50 ${ms(result.directInsert.p50Ms)}, p99 ${ms(result.directInsert.p99Ms)}`,
      target: '',
      verdict: '',
      note: `create / insert: p50 ×${result.ratio.p50}, p99 ×${result.ratio.p99}`,
    },
  ];
}

/** The SQL shape that bounds GetStats over long ranges: merging the exact address sets of the rollups. */
function addressSetShape(scenarios: readonly QueryScenario[]): QueryScenario | undefined {
  return scenarios.find((s) => s.scenario.startsWith('distinct ') && s.scenario.includes('(used)'));
}

/** Part of a list's first read: its per-day counts from the rollups. */
function perDayRollupShape(scenarios: readonly QueryScenario[]): QueryScenario | undefined {
  return scenarios.find((s) => s.scenario.startsWith('events per day') && s.scenario.endsWith('rollup'));
}

export function queryRows(result: QueryResult): Row[] {
  return result.engines.flatMap((engine) => engineQueryRows(result, engine));
}

/** One engine's rows, named by the version it reported. */
function engineQueryRows(result: QueryResult, engine: EngineRun): Row[] {
  const scale = result.settings.events === TARGETS.queryEvents ? '10 M' : `${number(result.settings.events)} (scaled; target at 10 M)`;
  const addressSets = addressSetShape(engine.scenarios);
  const perDay = perDayRollupShape(engine.scenarios);
  const cause = (s: QueryScenario): string => {
    if (s.scenario.startsWith('list')) {
      const counts = perDay ? ` (the per-day counts from the rollups alone: p95 ${ms(perDay.p95Ms)})` : '';
      return `per-day counts${counts} and the page from its days' rows, side by side when the page's days are likely known, else one after the other; `;
    }
    return addressSets
      ? `merging the exact address sets of one year's rollups takes p95 ${ms(addressSets.p95Ms)} in ClickHouse (openers per campaign alone); `
      : '';
  };
  const why = (s: QueryScenario) => `${cause(s)}load average ${s.load} when measured`;
  const row = (s: QueryScenario, targetMs: number | undefined): Row => {
    const met = targetMs === undefined ? undefined : s.p95Ms <= targetMs;
    return {
      measure: `${s.scenario.startsWith('list') ? 'ListEvents' : 'GetStats'} ${s.scenario.replace(/^(list|stats) /, '')} at ${scale} events, ClickHouse ${engine.version}`,
      result: `p50 ${ms(s.p50Ms)}, p95 ${ms(s.p95Ms)} (${s.runs} runs)`,
      target: targetMs === undefined ? '' : `p95 ≤ ${targetMs} ms`,
      verdict: met === undefined ? '' : met ? 'met' : 'MISSED',
      note: met === false ? why(s) : '',
    };
  };
  return engine.scenarios.flatMap((s): Row[] => {
    if (s.scenario.startsWith('list page 1,')) return [row(s, TARGETS.queryPage1P95Ms)];
    if (s.scenario.startsWith('list page ')) return [row(s, undefined)];
    if (s.scenario.startsWith('stats all campaigns, all time')) return [row(s, TARGETS.statsAllCampaignsP95Ms)];
    if (s.scenario.startsWith('stats ')) return [row(s, TARGETS.statsP95Ms)];
    return [];
  });
}

/** The 422 of a body failing in very many places: how long the capped answer takes. */
export function validationRows(result: ValidationResult): Row[] {
  return [
    {
      measure: `422 of a ${number(result.bodyBytes / 1024)} KB body failing in 450,001 places (${result.settings.calls} calls, one at a time)`,
      result: `p50 ${ms(result.p50Ms)}, p99 ${ms(result.p99Ms)}, max ${ms(result.maxMs)}`,
      target: '',
      verdict: '',
      note: `${number(result.entries)} entries listed, ${number(result.answerBytes)} bytes answered`,
    },
  ];
}

export function fairnessRows(result: FairnessResult): Row[] {
  const { settings, idle, loaded, aAlone, aHoldingAlone } = result;
  const statuses = (counts: Record<string, number>) =>
    Object.entries(counts)
      .map(([status, n]) => `${number(n)} × ${status}`)
      .join(', ');
  const refused = Object.entries(loaded.bStatuses).some(([status]) => status !== '200');
  const met = result.ratio <= TARGETS.fairnessRatio && !refused;
  const events = `${number(settings.events)} events in A, ${number(settings.events / 10)} in B`;
  const phaseNote = (phase: typeof idle) => `ClickHouse round trip p95 ${ms(phase.clickhouse.p95Ms)}, load average ${phase.load}`;
  return [
    {
      measure: `Workspace B's GET /campaign-events/stats, idle (${events})`,
      result: `p50 ${ms(idle.b.p50Ms)}, p95 ${ms(idle.b.p95Ms)} (${idle.b.runs} runs)`,
      target: '',
      verdict: '',
      note: `${phaseNote(idle)}; A's call alone p50 ${ms(aAlone.p50Ms)}, p95 ${ms(aAlone.p95Ms)}`,
    },
    {
      measure: `The same while workspace A holds ${settings.holders} stats calls open (its limit)`,
      result: `p50 ${ms(loaded.b.p50Ms)}, p95 ${ms(loaded.b.p95Ms)} (×${result.ratio} idle; ${statuses(loaded.bStatuses)})`,
      target: `p95 ≤ ${TARGETS.fairnessRatio} × idle, never refused`,
      verdict: met ? 'met' : 'MISSED',
      note:
        `${phaseNote(loaded)}; A answered ${loaded.aAnsweredPerSecond}/s with 200 (${statuses(loaded.aStatuses)}), ` +
        `p50 ${ms(loaded.aLatencies.p50Ms)}, p95 ${ms(loaded.aLatencies.p95Ms)}; ` +
        `A's ${settings.holders} alone: ${aHoldingAlone.aAnsweredPerSecond}/s with 200 (${statuses(aHoldingAlone.aStatuses)})`,
    },
  ];
}

export function memoryRows(memory: Record<string, MemoryFigure>): Row[] {
  return Object.entries(memory).map(([name, figure]) => ({
    measure: `Memory: ${name}`,
    result: `peak ${Math.round(figure.peakMb)} MB, last ${Math.round(figure.lastMb)} MB`,
    target: '',
    verdict: '',
    note: figure.measure,
  }));
}

/** CPU µs per message: the platform's total (every process but Mailpit, the receiving end), delivery + Postgres, each process. */
function sendingCpu(perMessage: RunFigures['cpuMicrosecondsPerMessage']): { platform: number; deliveryAndPostgres: number; each: string } {
  const platform = Object.entries(perMessage).reduce((sum, [name, us]) => (name === 'mailpit' ? sum : sum + us), 0);
  const each = Object.entries(perMessage)
    .filter(([name]) => name !== 'mailpit')
    .sort(([, a], [, b]) => b - a)
    .map(([name, us]) => `${name} ${number(us)}`)
    .join(', ');
  return { platform, deliveryAndPostgres: perMessage.delivery + perMessage.postgres, each };
}

/** Rows of the sending benchmark, each throughput and CPU figure beside the calibration's. */
export function sendingRows({ settings, small, full, calibration }: SendingResult): Row[] {
  const calibrationRate = `the calibration's ${number(calibration.messagesPerSecond)}/s (a plain SMTP client into the same Mailpit)`;
  const calibrationCpu =
    `calibration: Mailpit ${number(calibration.mailpitCpuMicrosecondsPerMessage)} µs, ` +
    `the client ${number(calibration.clientCpuMicrosecondsPerMessage)} µs per message, ` +
    `the sender's own composer and SMTP client alone ${number(calibration.ownClient.clientCpuMicrosecondsPerMessage)} µs`;
  const throughput = (run: RunFigures): Row => ({
    measure: `Sending: a run of ${number(run.recipients)} recipients into Mailpit, messages/s (${settings.connections} SMTP connections)`,
    result: `${number(run.messagesPerSecond)}/s (${Math.round((run.messagesPerSecond / calibration.messagesPerSecond) * 100)} % of the calibration)`,
    target: '',
    verdict: '',
    note: calibrationRate,
  });
  const cpu = (run: RunFigures): Row => {
    const { platform, deliveryAndPostgres, each } = sendingCpu(run.cpuMicrosecondsPerMessage);
    const missing = run.sentEventsStored < run.recipients ? `; ONLY ${number(run.sentEventsStored)} sent events stored in time` : '';
    return {
      measure: `Sending: CPU per message, run of ${number(run.recipients)} (creation until ClickHouse holds its sent events)`,
      result:
        `platform ${number(platform)} µs, delivery + Postgres ${number(deliveryAndPostgres)} µs; ` +
        `Mailpit ${number(run.cpuMicrosecondsPerMessage.mailpit)} µs`,
      target: '',
      verdict: '',
      note:
        `${each}; ${calibrationCpu}; Postgres, ClickHouse and Kafka are shared servers: other work on the host counts in them` + missing,
    };
  };
  return [
    throughput(full),
    throughput(small),
    {
      measure: `Sending: calibration, nodemailer's pool (${settings.connections} connections), ${number(settings.calibrationMessages)} messages into the same Mailpit`,
      result: `${number(calibration.messagesPerSecond)}/s`,
      target: '',
      verdict: '',
      note:
        `${calibrationCpu} at ${number(calibration.ownClient.messagesPerSecond)}/s; ` +
        `the delivered message's parts: ${number(calibration.messageBytes)} bytes received ` +
        `(the run's: ${number(calibration.deliveredMessageBytes)})`,
    },
    {
      measure: 'Sending: time to the first message',
      result: `${number(full.firstMessageMs)} ms`,
      target: '',
      verdict: '',
      note: `${number(small.firstMessageMs)} ms for ${number(small.recipients)}`,
    },
    cpu(full),
    cpu(small),
    {
      measure: `Sending: delivery peak memory, ${number(small.recipients)} against ${number(full.recipients)} recipients`,
      result: `${number(small.deliveryPeakMb)} MB / ${number(full.deliveryPeakMb)} MB`,
      target: '',
      verdict: '',
      note: 'VmHWM of a fresh delivery process per run: recipients stream in batches',
    },
    {
      measure: `Sending: delivery JavaScript heap, ${number(small.recipients)} against ${number(full.recipients)} recipients`,
      result: `${number(small.deliveryHeap.heapAfterGcMb)} MB / ${number(full.deliveryHeap.heapAfterGcMb)} MB after a full GC at the end`,
      target: '',
      verdict: '',
      note:
        `most after any full GC during the run ${number(small.deliveryHeap.livePeakMb)} / ${number(full.deliveryHeap.livePeakMb)} MB; ` +
        `most reserved ${number(small.deliveryHeap.heapTotalPeakMb)} / ${number(full.deliveryHeap.heapTotalPeakMb)} MB (what VmHWM follows)`,
    },
    {
      measure: `Sending: the delivery database's work per message, run of ${number(full.recipients)}`,
      result:
        `${full.deliveryDatabase.transactionsPerMessage} transactions, ` + `${full.deliveryDatabase.rowsUpdatedPerMessage} rows updated`,
      target: '',
      verdict: '',
      note: `Postgres's own counts (pg_stat_database), every process on the database; run of ${number(small.recipients)}: ${small.deliveryDatabase.transactionsPerMessage} and ${small.deliveryDatabase.rowsUpdatedPerMessage}`,
    },
    {
      measure: 'Sending: the ledger in Postgres per recipient (run_recipients with its indexes)',
      result: `${number(full.ledgerBytesPerRecipient)} bytes`,
      target: '',
      verdict: '',
      note: `after the run of ${number(full.recipients)}, both runs' rows in it, dead row versions not yet vacuumed included`,
    },
  ];
}

/** A Markdown table: readable in a terminal, pasted as is into bench/README.md. */
export function markdownTable(rows: readonly Row[]): string {
  const header = ['Measure', 'Result', 'Target', 'Met', 'Why / note'];
  const cells = rows.map((r) => [r.measure, r.result, r.target, r.verdict, r.note].map((c) => c.replace(/\|/g, '\\|')));
  const widths = header.map((h, i) => Math.max(h.length, ...cells.map((c) => c[i].length)));
  const line = (c: string[]) => `| ${c.map((cell, i) => cell.padEnd(widths[i])).join(' | ')} |`;
  return [line(header), `|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`, ...cells.map(line)].join('\n');
}

/** The pipeline with tracing off against 10 % of traces exported: events/s, CPU per event, webhook p99. */
export function tracingRows({ off, sampled }: TracingResult): Row[] {
  const change = (from: number, to: number) => `${to >= from ? '+' : ''}${(((to - from) / from) * 100).toFixed(1)} %`;
  const cpu = (result: TracingResult['off']) => cpuBreakdown(result.cpuMicrosecondsPerEvent, 'µs CPU per event', ['bench client']);
  const [offCpu, sampledCpu] = [cpu(off), cpu(sampled)];
  return [
    {
      measure: `Pipeline events/s, tracing off (default; ${number(off.endToEnd.events)} events)`,
      result: `${number(off.endToEnd.eventsPerSecond)}/s`,
      target: '',
      verdict: '',
      note: offCpu.text,
    },
    {
      measure: 'Pipeline events/s, 10 % of traces exported to the local Jaeger (parentbased_traceidratio 0.1)',
      result: `${number(sampled.endToEnd.eventsPerSecond)}/s (${change(off.endToEnd.eventsPerSecond, sampled.endToEnd.eventsPerSecond)})`,
      target: '',
      verdict: '',
      note: `${sampledCpu.text} (${change(offCpu.total, sampledCpu.total)} CPU per event)`,
    },
    {
      measure: 'Webhook 202 p99 at half the maximum rate, tracing off / 10 % exported',
      result: `${ms(off.latencyAtHalfRate.p99Ms)} / ${ms(sampled.latencyAtHalfRate.p99Ms)}`,
      target: '',
      verdict: '',
      note: '',
    },
  ];
}
