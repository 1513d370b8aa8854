/**
 * The other providers' routes, end to end, each on its own (a separate row,
 * BENCH_ONLY=pipeline-mailgun, pipeline-ses, pipeline-postmark,
 * pipeline-tracking), so the SendGrid pipeline figure stays what it was:
 * `events` events, each in a call of its own as these providers send them (an
 * SES notification per event), `concurrency` calls at a time, timed from the
 * first call until every event is in ClickHouse; plus the p50/p99 of the
 * answer under that closed loop, and the CPU each process spent per event.
 * `tracking` is first-party tracking: signed open pixels (GET /t/o/) and
 * tracked links (GET /t/c/) as recipients' mail clients fetch them.
 * Mailgun calls are signed with the stack's signing key and Postmark's carry
 * its Basic credentials; SES messages are not signed (the bench has no
 * certificate host), so its row leaves out one RSA verification per message.
 * Settings: BENCH_PROVIDER_EVENTS (default 20000), BENCH_CONCURRENCY (16).
 */
import crypto from 'node:crypto';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { signTrackingToken } from '@mail/common';
import { createBenchCampaigns, storedEvents, type BenchStack } from './bench-stack';
import { log, percentile, round, sendAll } from './measure';
import { cpuMs, infraServerPids } from './proc';

export const PROVIDERS = ['mailgun', 'ses', 'postmark', 'tracking'] as const;
export type BenchProvider = (typeof PROVIDERS)[number];

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

export interface ProviderSettings {
  events: number;
  concurrency: number;
}

export function providerSettings(env: NodeJS.ProcessEnv = process.env): ProviderSettings {
  return { events: Number(env.BENCH_PROVIDER_EVENTS ?? 20_000), concurrency: Number(env.BENCH_CONCURRENCY ?? 16) };
}

export interface ProviderResult {
  provider: BenchProvider;
  settings: ProviderSettings;
  eventsPerSecond: number;
  seconds: number;
  webhookAcceptedEventsPerSecond: number;
  retriedCalls: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU µs each process spent per event, from the first call until every event was stored. */
  cpuMicrosecondsPerEvent: Record<string, number>;
}

interface Call {
  method: 'GET' | 'POST';
  path: string;
  body: Buffer;
  headers: Record<string, string>;
}

/** What each route answers an accepted call. */
const ACCEPTED: Record<BenchProvider, readonly number[]> = { mailgun: [202], ses: [202], postmark: [202], tracking: [200, 302] };

/** One open or click per call, realistic in size, every one matched to a campaign. */
function prepareCalls(bench: BenchStack, provider: BenchProvider, prefix: string, categories: string[], count: number): Call[] {
  const now = Date.now();
  return Array.from({ length: count }, (_, n) => {
    const click = n % 4 === 0;
    const email = `recipient-${n % 50_000}@example.com`;
    const category = categories[n % categories.length];
    const userAgent = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36';
    const url = `https://example.com/offer/${n % 100}?utm_source=newsletter`;
    const occurredAt = new Date(now - (n % 3_600) * 1000);
    const webhook = (body: unknown, headers: Record<string, string>): Call => ({
      method: 'POST',
      path: `/campaign-events/webhook/${provider}`,
      body: Buffer.from(JSON.stringify(body)),
      headers: { 'content-type': 'application/json', ...headers },
    });
    switch (provider) {
      case 'mailgun': {
        const timestamp = String(Math.floor(now / 1000));
        const token = crypto.randomBytes(25).toString('hex');
        const signature = crypto
          .createHmac('sha256', bench.mailgunSigningKey)
          .update(timestamp + token)
          .digest('hex');
        const eventData = {
          id: `${prefix}-${n}`,
          event: click ? 'clicked' : 'opened',
          timestamp: occurredAt.getTime() / 1000,
          recipient: email,
          tags: [category, 'newsletter'],
          'client-info': { 'client-type': 'browser', 'user-agent': userAgent },
          ip: `203.0.113.${n % 250}`,
          message: { headers: { 'message-id': `${prefix}-${n}@mg.example.com` } },
          ...(click ? { url } : {}),
        };
        return webhook({ signature: { timestamp, token, signature }, 'event-data': eventData }, {});
      }
      case 'ses': {
        const detail = {
          timestamp: occurredAt.toISOString(),
          userAgent,
          ipAddress: `203.0.113.${n % 250}`,
          ...(click ? { link: url } : {}),
        };
        const sesEvent = {
          eventType: click ? 'Click' : 'Open',
          mail: { timestamp: occurredAt.toISOString(), messageId: `${prefix}-${n}`, destination: [email], tags: { category: [category] } },
          [click ? 'click' : 'open']: detail,
        };
        const message = {
          Type: 'Notification',
          MessageId: `${prefix}-${n}`,
          TopicArn: 'arn:aws:sns:us-east-1:123456789012:ses-bench',
          Message: JSON.stringify(sesEvent),
          Timestamp: new Date(now).toISOString(),
        };
        return webhook(message, { 'content-type': 'text/plain; charset=UTF-8' });
      }
      case 'postmark': {
        const record = {
          RecordType: click ? 'Click' : 'Open',
          Recipient: email,
          ReceivedAt: occurredAt.toISOString(),
          MessageID: `${prefix}-${n}`,
          Tag: category,
          UserAgent: userAgent,
          ...(click ? { OriginalLink: url } : { FirstOpen: true }),
        };
        return webhook(record, { authorization: `Basic ${Buffer.from(bench.postmarkBasicAuth).toString('base64')}` });
      }
      case 'tracking': {
        const [workspaceId, campaignId] = trackedCampaigns[n % trackedCampaigns.length];
        const claims = { workspaceId, campaignId, variantId: null, runId: trackedRun, email };
        const token = click
          ? signTrackingToken(bench.trackingSigningKey, 'c', { ...claims, url })
          : signTrackingToken(bench.trackingSigningKey, 'o', claims);
        return {
          method: 'GET',
          path: `/t/${click ? 'c' : 'o'}/${token}`,
          body: Buffer.alloc(0),
          headers: { 'user-agent': userAgent, 'x-forwarded-for': `203.0.113.${n % 250}` },
        };
      }
    }
  });
}

/** The tracked messages' campaigns (workspace, campaign) and run: tokens name them, nothing looks them up. */
const trackedCampaigns = Array.from({ length: 10 }, () => [crypto.randomUUID(), crypto.randomUUID()] as const);
const trackedRun = crypto.randomUUID();

function send(gateway: string, { method, path, body, headers }: Call): Promise<number> {
  return new Promise((resolve, reject) => {
    const request = http.request(
      `${gateway}${path}`,
      { method, agent, headers: { ...headers, 'content-length': body.length } },
      (response) => {
        response.resume();
        response.on('end', () => resolve(response.statusCode ?? 0));
      },
    );
    request.on('error', reject);
    request.end(body);
  });
}

export async function runProviderBench(bench: BenchStack, provider: BenchProvider, settings = providerSettings()): Promise<ProviderResult> {
  const { stack, suffix } = bench;
  const say = (line: string) => log(`pipeline-${provider}`, line);
  const events = storedEvents(bench);
  const accepted = (status: number): boolean => ACCEPTED[provider].includes(status);
  const stored = () => events.count();
  try {
    const categories = await createBenchCampaigns(bench, provider);

    // Warm-up: JIT, connections, the category cache.
    const warmUp = prepareCalls(bench, provider, `${provider}-warm-${suffix}`, categories, 1_000);
    const before = await stored();
    await Promise.all(warmUp.map((c) => send(stack.urls.gateway, c)));
    for (let waited = 0; (await stored()) < before + warmUp.length && waited < 60_000; waited += 100) await sleep(100);
    const base = await stored();

    const calls = prepareCalls(bench, provider, `${provider}-max-${suffix}`, categories, settings.events);
    const latencies: number[] = [];
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
    const rejected = await sendAll(calls, settings.concurrency, async (item) => {
      const sent = performance.now();
      const status = await send(stack.urls.gateway, item);
      latencies.push(performance.now() - sent);
      return accepted(status);
    });
    const acceptedSeconds = (performance.now() - started) / 1000;
    while ((await stored()) < base + calls.length) await sleep(50);
    const seconds = (performance.now() - started) / 1000;
    const cpuMicrosecondsPerEvent = Object.fromEntries(
      Object.entries(processes).map(([name, pid]) => [name, round(((cpuMs(pid) - cpuBefore[name]) * 1000) / calls.length, 1)]),
    );
    const sorted = latencies.sort((a, b) => a - b);
    const result: ProviderResult = {
      provider,
      settings,
      eventsPerSecond: Math.round(calls.length / seconds),
      seconds: round(seconds),
      webhookAcceptedEventsPerSecond: Math.round(calls.length / acceptedSeconds),
      retriedCalls: rejected,
      p50Ms: round(percentile(sorted, 50)),
      p99Ms: round(percentile(sorted, 99)),
      cpuMicrosecondsPerEvent,
    };
    say(
      `end to end: ${calls.length} events, one per call, in ${result.seconds} s = ${result.eventsPerSecond} events/s (accepted ${result.webhookAcceptedEventsPerSecond}/s, ${rejected} calls retried); answer p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms; CPU µs per event ${JSON.stringify(cpuMicrosecondsPerEvent)}`,
    );
    return result;
  } finally {
    await events.close();
  }
}
