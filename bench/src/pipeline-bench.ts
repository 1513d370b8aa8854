/**
 * Engagement event pipeline throughput and webhook latency, end to end, on
 * the suite's stack (bench-stack.ts):
 *   1. ceiling: after warming the broker up, the raw kafkajs producer rate
 *      to the same broker (idempotent, acks=-1, requests of 1,000
 *      ready-encoded EngagementEvents in one EngagementEventBatch record per
 *      partition, one in flight, as the webhook's producer sends them);
 *   2. maximum end-to-end rate: `events` SendGrid events in signed calls of
 *      100, `concurrency` calls at a time, timed from the first call until
 *      every event is queryable in ClickHouse (`count()` polled);
 *   3. webhook latency at half that rate, open loop (no coordinated omission:
 *      latency counts from the moment a call was due): p50/p99 of the 202.
 * Bodies and signatures are prepared before each timed phase, so the client
 * spends its CPU on HTTP only (it shares the machine with every server). The
 * CPU time each process spent per event during phase 2 is reported too: it
 * shows where the cores go, whatever else the machine was running.
 * Settings: BENCH_PIPELINE_EVENTS (default 200000), BENCH_CONCURRENCY (16),
 * BENCH_LATENCY_SECONDS (15).
 */
import crypto from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { Kafka, Partitioners, logLevel, type Producer } from 'kafkajs';
import { EVENT_BATCH_SCHEMA, RECORD_SCHEMA_HEADER } from '@mail/common';
import { infraEnv } from '@mail/local';
import { eventsV1 } from '@mail/proto';
import { createBenchCampaigns, storedEvents, type BenchStack } from './bench-stack';
import { log, percentile, round, sendAll } from './measure';
import { cpuMs, infraServerPids, waitUntilIdle } from './proc';

const PER_CALL = 100;
/** Events per produce request of the ceiling phase. */
const EVENTS_PER_REQUEST = 1_000;
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export interface PipelineSettings {
  events: number;
  concurrency: number;
  latencySeconds: number;
}

export function pipelineSettings(env: NodeJS.ProcessEnv = process.env): PipelineSettings {
  return {
    events: Number(env.BENCH_PIPELINE_EVENTS ?? 200_000),
    concurrency: Number(env.BENCH_CONCURRENCY ?? 16),
    latencySeconds: Number(env.BENCH_LATENCY_SECONDS ?? 15),
  };
}

export interface PipelineResult {
  settings: PipelineSettings & { perCall: number; signed: true };
  rawProducerEventsPerSecond: number;
  endToEnd: { events: number; eventsPerSecond: number; seconds: number; webhookAcceptedEventsPerSecond: number; retriedCalls: number };
  /** CPU µs each process spent per event during the end-to-end phase. */
  cpuMicrosecondsPerEvent: Record<string, number>;
  latencyAtHalfRate: {
    callsPerSecond: number;
    eventsPerSecond: number;
    calls: number;
    failed: number;
    p50Ms: number;
    p99Ms: number;
    maxMs: number;
  };
  loadAverageAfter: number;
}

interface Call {
  body: Buffer;
  headers: Record<string, string>;
}

/** SendGrid-shaped events (realistic size, ~450 bytes each), every one kept and matched to a campaign. */
function prepareCalls(key: crypto.KeyObject, prefix: string, categories: string[], calls: number): Call[] {
  const timestamp = Math.floor(Date.now() / 1000);
  return Array.from({ length: calls }, (_, c) => {
    const events = Array.from({ length: PER_CALL }, (_, i) => {
      const n = c * PER_CALL + i;
      const click = n % 4 === 0;
      return {
        email: `recipient-${n % 50_000}@example.com`,
        timestamp: timestamp - (n % 3_600),
        'smtp-id': `<${n}.bench@ismtpd-1>`,
        event: click ? 'click' : 'open',
        category: [categories[n % categories.length], 'newsletter'],
        sg_event_id: `${prefix}-${n}-${'x'.repeat(6)}`,
        sg_message_id: `14c5d75ce93.dfd.64b469.filter0001.${n}.5515E0B88.0`,
        useragent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
        ip: `203.0.113.${n % 250}`,
        ...(click ? { url: `https://example.com/offer/${n % 100}?utm_source=newsletter` } : {}),
        account_id: `acct-${n % 9_999}`,
      };
    });
    const body = Buffer.from(JSON.stringify(events));
    const signedAt = String(timestamp);
    const signature = crypto.sign('sha256', Buffer.concat([Buffer.from(signedAt), body]), key).toString('base64');
    return {
      body,
      headers: {
        'content-type': 'application/json',
        'x-twilio-email-event-webhook-signature': signature,
        'x-twilio-email-event-webhook-timestamp': signedAt,
      },
    };
  });
}

function post(url: string, { body, headers }: Call): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${url}/campaign-events/webhook`,
      { method: 'POST', agent, headers: { ...headers, 'content-length': body.length } },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

/**
 * A broker that has just started runs its request handling interpreted until
 * the JIT has compiled it, at several times the CPU per event (bench/README.md,
 * "Benchmark harness"). Small produce requests, for BROKER_WARM_UP_MS, have it
 * compiled before anything is measured.
 */
const BROKER_WARM_UP_MS = 8_000;

async function warmUpBroker(producer: Producer, topic: string): Promise<void> {
  const until = performance.now() + BROKER_WARM_UP_MS;
  let requests = 0;
  while (performance.now() < until) {
    await producer.send({ topic, acks: -1, messages: [{ key: `warm-up-${requests % 64}`, value: `warm-up ${requests}` }] });
    requests++;
  }
  // The JIT compiles on threads of its own: the ceiling is timed once they are done, or after 10 s.
  await waitUntilIdle(1_000, 10_000);
  log('pipeline', `broker warmed up with ${requests} produce requests`);
}

/** Phase 1: the broker's rate for a lone kafkajs producer, the ceiling of the webhook (after warmUpBroker). */
async function producerCeiling(topic: string, events: number): Promise<number> {
  const kafka = new Kafka({ clientId: 'bench', brokers: infraEnv().kafkaBrokers, logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ topics: [{ topic, numPartitions: 6, replicationFactor: 1 }], waitForLeaders: true });
  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
  await producer.connect();
  const partitionMetadata = (await admin.fetchTopicMetadata({ topics: [topic] })).topics[0].partitions;
  const partitioner = Partitioners.DefaultPartitioner();
  const now = new Date();
  const byPartition = new Map<number, Buffer[]>();
  for (let i = 0; i < EVENTS_PER_REQUEST; i++) {
    const event: eventsV1.EngagementEvent = {
      providerEventId: `ceiling-${i}-xxxxxxxxxxxxxxxxxxxx`,
      providerMessageId: `14c5d75ce93.dfd.64b469.filter0001.${i}.5515E0B88.0`,
      provider: 'sendgrid',
      eventType: eventsV1.EventType.EVENT_TYPE_OPEN,
      bounceType: eventsV1.BounceType.BOUNCE_TYPE_UNSPECIFIED,
      bounceClass: eventsV1.BounceClass.BOUNCE_CLASS_UNSPECIFIED,
      machineOpen: false,
      machineClick: false,
      email: `recipient-${i}@example.com`,
      occurredAt: now,
      receivedAt: now,
      categories: ['bench', 'newsletter'],
      userAgent: 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36',
      ip: '203.0.113.7',
      rawJson: JSON.stringify({ email: `recipient-${i}@example.com`, event: 'open', sg_event_id: `ceiling-${i}`, pad: 'x'.repeat(330) }),
    };
    const partition = partitioner({ topic, partitionMetadata, message: { key: event.email, value: null } });
    byPartition.set(partition, [...(byPartition.get(partition) ?? []), Buffer.from(eventsV1.EngagementEvent.encode(event).finish())]);
  }
  const messages = [...byPartition].map(([partition, values]) => ({
    partition,
    headers: { [RECORD_SCHEMA_HEADER]: EVENT_BATCH_SCHEMA },
    value: Buffer.from(eventsV1.EngagementEventBatch.encode({ events: values }).finish()),
  }));
  try {
    await warmUpBroker(producer, topic);
    await producer.send({ topic, acks: -1, messages });
    const started = performance.now();
    for (let sent = 0; sent < events; sent += EVENTS_PER_REQUEST) await producer.send({ topic, acks: -1, messages });
    return events / ((performance.now() - started) / 1000);
  } finally {
    await producer.disconnect();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
}

export async function runPipelineBench(bench: BenchStack, settings: PipelineSettings = pipelineSettings()): Promise<PipelineResult> {
  const { stack, suffix, webhookKey } = bench;
  const say = (line: string) => log('pipeline', line);
  const events = storedEvents(bench);
  const stored = () => events.count();
  try {
    const categories = await createBenchCampaigns(bench, 'pipeline');

    const ceiling = await producerCeiling(`pipeline-bench-ceiling-${suffix}`, settings.events);
    say(`raw kafkajs producer: ${Math.round(ceiling)} events/s`);

    // Warm-up: JIT, connections, the category cache, ClickHouse parts.
    const warmUp = prepareCalls(webhookKey, `warm-${suffix}`, categories, 100);
    await Promise.all(warmUp.map((c) => post(stack.urls.gateway, c)));
    for (let waited = 0; (await stored()) < warmUp.length * PER_CALL && waited < 60_000; waited += 100) await sleep(100);
    const base = await stored();

    const calls = prepareCalls(webhookKey, `max-${suffix}`, categories, Math.ceil(settings.events / PER_CALL));
    const total = calls.length * PER_CALL;
    const servers = infraServerPids();
    const processes = {
      gateway: stack.pid('gateway'),
      ingestion: stack.pid('ingestion'),
      kafka: servers.kafka,
      clickhouse: servers.clickhouse,
      'bench client': process.pid,
    };
    const cpuBefore = Object.fromEntries(Object.entries(processes).map(([name, pid]) => [name, cpuMs(pid)]));
    const started = performance.now();
    const rejected = await sendAll(calls, settings.concurrency, async (item) => (await post(stack.urls.gateway, item)) === 202);
    const acceptedSeconds = (performance.now() - started) / 1000;
    while ((await stored()) < base + total) await sleep(50);
    const endToEndSeconds = (performance.now() - started) / 1000;
    const endToEnd = total / endToEndSeconds;
    const cpuPerEventUs = Object.fromEntries(
      Object.entries(processes).map(([name, pid]) => [name, round(((cpuMs(pid) - cpuBefore[name]) * 1000) / total, 1)]),
    );
    say(
      `end to end: ${total} events in ${round(endToEndSeconds)} s = ${Math.round(endToEnd)} events/s (webhook accepted them at ${Math.round(total / acceptedSeconds)} events/s, ${rejected} calls retried)`,
    );
    say(
      `CPU µs per event: ${Object.entries(cpuPerEventUs)
        .map(([name, us]) => `${name} ${us}`)
        .join(', ')}`,
    );

    const halfRate = endToEnd / 2 / PER_CALL;
    const latencyCalls = prepareCalls(webhookKey, `latency-${suffix}`, categories, Math.ceil(halfRate * settings.latencySeconds));
    const latencies: number[] = [];
    let failed = 0;
    const pending: Promise<void>[] = [];
    const latencyStart = performance.now();
    for (let i = 0; i < latencyCalls.length; i++) {
      const due = latencyStart + (i * 1000) / halfRate;
      const wait = due - performance.now();
      if (wait > 0) await sleep(wait);
      pending.push(
        post(stack.urls.gateway, latencyCalls[i]).then(
          (status) => {
            latencies.push(performance.now() - due);
            if (status !== 202) failed++;
          },
          () => void failed++,
        ),
      );
    }
    await Promise.all(pending);
    const sorted = latencies.sort((a, b) => a - b);
    const latency = {
      callsPerSecond: round(halfRate, 1),
      eventsPerSecond: Math.round(halfRate * PER_CALL),
      calls: latencyCalls.length,
      failed,
      p50Ms: round(percentile(sorted, 50)),
      p99Ms: round(percentile(sorted, 99)),
      maxMs: round(sorted[sorted.length - 1]),
    };
    say(
      `webhook 202 latency at ${latency.eventsPerSecond} events/s (${latency.callsPerSecond} calls/s of ${PER_CALL}): p50 ${latency.p50Ms} ms, p99 ${latency.p99Ms} ms, max ${latency.maxMs} ms, ${failed} failed`,
    );

    return {
      settings: { ...settings, perCall: PER_CALL, signed: true },
      rawProducerEventsPerSecond: Math.round(ceiling),
      endToEnd: {
        events: total,
        eventsPerSecond: Math.round(endToEnd),
        seconds: round(endToEndSeconds),
        webhookAcceptedEventsPerSecond: Math.round(total / acceptedSeconds),
        retriedCalls: rejected,
      },
      cpuMicrosecondsPerEvent: cpuPerEventUs,
      latencyAtHalfRate: latency,
      loadAverageAfter: round(os.loadavg()[0], 1),
    };
  } finally {
    await events.close();
  }
}
