/**
 * Sending: one run of BENCH_SENDING_RECIPIENTS recipients (default 100,000)
 * through the real delivery process into a private Mailpit, on a stack of its
 * own (campaign, analytics, delivery; private databases, a private recipient
 * database and topic). Measures:
 *   - time to the first message (POST of the run to Mailpit holding one),
 *   - messages/s from the first message to the last,
 *   - CPU per message of each process (delivery, campaign, analytics, Mailpit),
 *   - the delivery process's peak memory (VmHWM) for a run of
 *     BENCH_SENDING_SMALL_RECIPIENTS (default 10,000) against the full run,
 *     each in a fresh process (recipients must never be held in memory at once),
 *     and beside it what its JavaScript heap held (heap-probe.ts: after a full
 *     collection at the end, and the most after any full collection during the run),
 *   - the calibration: Mailpit's intake of the same number of the same
 *     messages from a plain SMTP client (nodemailer's pool, as many connections
 *     as the delivery process has), which bounds what the sender can reach here.
 * Settings: BENCH_SENDING_RECIPIENTS, BENCH_SENDING_SMALL_RECIPIENTS.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import nodemailer from 'nodemailer';
import { Client } from 'pg';
import { call, createClient, createKafka, createLogger } from '@mail/common';
import {
  ACCOUNTS_TABLE,
  createTestClickHouse,
  createTestPostgres,
  ensureRecipientDatabase,
  infraEnv,
  startMailpit,
  startStack,
  uniqueSuffix,
  type Mailpit,
  type Stack,
} from '@mail/local';
import { campaignV1, deliveryV1 } from '@mail/proto';
import type { HeapFigures } from './heap-probe';
import { log, round } from './measure';
import { cpuMs, statusMb } from './proc';

export interface SendingSettings {
  recipients: number;
  smallRecipients: number;
  /** SMTP connections of the delivery process and of the calibration client alike. */
  connections: number;
}

export function sendingSettings(env: NodeJS.ProcessEnv = process.env): SendingSettings {
  return {
    recipients: Number(env.BENCH_SENDING_RECIPIENTS ?? 100_000),
    smallRecipients: Number(env.BENCH_SENDING_SMALL_RECIPIENTS ?? 10_000),
    connections: 5,
  };
}

export interface RunFigures {
  recipients: number;
  firstMessageMs: number;
  messagesPerSecond: number;
  /** ms CPU per 1,000 messages, per process. */
  cpuMsPerThousand: Record<string, number>;
  deliveryPeakMb: number;
  /** The delivery process's JavaScript heap (heap-probe.ts). */
  deliveryHeap: HeapFigures;
}

export interface SendingResult {
  settings: SendingSettings;
  small: RunFigures;
  full: RunFigures;
  calibrationMessagesPerSecond: number;
}

const HTML = '<p>Hello {{first_name}} {{last_name}},</p><p>Our news of the week.</p><a href="{{unsubscribe_url}}">Unsubscribe</a>';

export async function runSendingBench(settings: SendingSettings): Promise<SendingResult> {
  const suffix = uniqueSuffix();
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'bench-sending-'));
  const heapFile = path.join(stateDir, 'delivery-heap.json');
  const [postgres, recipients, clickhouse, mailpit] = await Promise.all([
    createTestPostgres('bench_sending'),
    createTestPostgres('bench_recipients'),
    createTestClickHouse('bench_sending'),
    startMailpit('bench'),
  ]);
  let stack: Stack | undefined;
  try {
    await fillAccounts(recipients.url, settings.recipients);
    const topic = `bench-sending-${suffix}`;
    const admin = createKafka('bench-sending', infraEnv().kafkaBrokers, createLogger('bench', 'silent')).admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 6 }], waitForLeaders: true });
    await admin.disconnect();
    stack = await startStack({
      stateDir,
      logDir: path.join(stateDir, 'logs'),
      processes: ['campaign', 'analytics', 'delivery'],
      scripts: { delivery: path.join(__dirname, 'heap-probe.js') },
      env: {
        BENCH_HEAP_PROBE_MAIN: path.resolve(__dirname, '../../services/delivery/dist/main.js'),
        BENCH_HEAP_PROBE_FILE: heapFile,
        LOG_LEVEL: 'warn',
        DATABASE_URL: postgres.url,
        CLICKHOUSE_URL: clickhouse.url,
        CLICKHOUSE_DATABASE: clickhouse.database,
        RECIPIENTS_DATABASE_URL: await ensureRecipientDatabase(recipients.url),
        SMTP_URL: mailpit.smtpUrl,
        SMTP_MAX_CONNECTIONS: String(settings.connections),
        KAFKA_EVENTS_TOPIC: topic,
        UNSUBSCRIBE_SIGNING_KEY: crypto.randomBytes(16).toString('hex'),
      },
    });
    const small = await measureRun(stack, mailpit, heapFile, settings.smallRecipients);
    await mailpit.clear();
    const full = await measureRun(stack, mailpit, heapFile, settings.recipients);
    await mailpit.clear();
    const calibrationMessagesPerSecond = await calibrate(mailpit, settings);
    return { settings, small, full, calibrationMessagesPerSecond };
  } finally {
    await stack?.stopAll();
    await mailpit.close();
    await Promise.all([postgres.drop(), recipients.drop(), clickhouse.drop()]);
    fs.rmSync(stateDir, { recursive: true, force: true });
  }
}

async function fillAccounts(url: string, count: number): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(ACCOUNTS_TABLE);
    await client.query(
      `INSERT INTO accounts SELECT 'acc-' || lpad(n::text, 7, '0'), 'reader' || n || '@bench.example.com', 'First' || n, 'Last' || n
       FROM generate_series(1, $1::int) AS n`,
      [count],
    );
  } finally {
    await client.end();
  }
}

/** One run of the first `count` accounts, in a fresh delivery process (its peak memory is this run's). */
async function measureRun(stack: Stack, mailpit: Mailpit, heapFile: string, count: number): Promise<RunFigures> {
  await stack.restart('delivery');
  const workspaceId = crypto.randomUUID();
  const campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
  const templates = createClient(campaignV1.TemplateServiceClient, stack.urls.grpc.campaign);
  const delivery = createClient(deliveryV1.DeliveryServiceClient, stack.urls.grpc.delivery);
  try {
    const template = await call(templates.createTemplate.bind(templates), {
      workspaceId,
      template: { name: 'Bench', subject: 'News for {{first_name}}', html: HTML, text: 'Hello {{first_name}}: {{unsubscribe_url}}' },
    });
    const { campaign } = await call(campaigns.createCampaign.bind(campaigns), {
      workspaceId,
      campaign: {
        workspaceId,
        name: `Bench ${count}`,
        recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
        mssqlQuery: `SELECT account_id, email, first_name, last_name FROM accounts WHERE account_id <= 'acc-${String(count).padStart(7, '0')}' ORDER BY account_id`,
        fromEmail: 'news@bench.example.com',
        deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
        templateId: template.id,
      },
    });
    const pids: Record<string, number | undefined> = {
      delivery: stack.pid('delivery'),
      campaign: stack.pid('campaign'),
      analytics: stack.pid('analytics'),
      mailpit: mailpit.pid,
    };
    const cpuBefore = Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, cpuMs(pid)]));
    const started = performance.now();
    const { run } = await call(delivery.createRun.bind(delivery), { workspaceId, campaignId: campaign!.id });
    let first = 0;
    while ((await mailpit.count()) === 0) await sleep(5);
    first = performance.now();
    log('sending', `${count} recipients: first message after ${Math.round(first - started)} ms`);
    for (;;) {
      const { run: current } = await call(delivery.getRun.bind(delivery), { workspaceId, id: run!.id });
      if (current?.status === 'completed') break;
      if (current?.status === 'failed') throw new Error(`the run failed: ${current.failure}`);
      await sleep(200);
    }
    let delivered = await mailpit.count();
    while (delivered < count) {
      await sleep(100);
      delivered = await mailpit.count();
    }
    const last = performance.now();
    const cpuMsPerThousand = Object.fromEntries(
      Object.entries(pids).map(([name, pid]) => [name, round(((cpuMs(pid) - cpuBefore[name]) / count) * 1000, 0)]),
    );
    const deliveryPeakMb = round(statusMb(stack.pid('delivery'), 'VmHWM') ?? 0, 0);
    const figures: RunFigures = {
      recipients: count,
      firstMessageMs: Math.round(first - started),
      messagesPerSecond: Math.round(count / ((last - first) / 1000)),
      cpuMsPerThousand,
      deliveryPeakMb,
      deliveryHeap: await readHeap(stack.pid('delivery'), heapFile),
    };
    log('sending', JSON.stringify(figures));
    return figures;
  } finally {
    for (const client of [campaigns, templates, delivery]) client.close();
  }
}

/** Asks the delivery process's heap probe for its figures (after the CPU and VmHWM are read: it collects garbage). */
async function readHeap(pid: number | undefined, file: string): Promise<HeapFigures> {
  if (pid === undefined) throw new Error('the delivery process is gone');
  fs.rmSync(file, { force: true });
  process.kill(pid, 'SIGUSR2');
  for (let waited = 0; !fs.existsSync(file); waited += 50) {
    if (waited > 10_000) throw new Error('the delivery heap probe did not answer');
    await sleep(50);
  }
  const figures = JSON.parse(fs.readFileSync(file, 'utf8')) as HeapFigures;
  return {
    heapAfterGcMb: round(figures.heapAfterGcMb, 0),
    livePeakMb: round(figures.livePeakMb, 0),
    heapTotalPeakMb: round(figures.heapTotalPeakMb, 0),
  };
}

/** The same number of messages of the same size from nodemailer's pool alone, to the same Mailpit. */
async function calibrate(mailpit: Mailpit, settings: SendingSettings): Promise<number> {
  const url = new URL(mailpit.smtpUrl);
  const transport = nodemailer.createTransport({
    pool: true,
    host: url.hostname,
    port: Number(url.port),
    secure: false,
    ignoreTLS: true,
    maxConnections: settings.connections,
    maxMessages: Infinity,
  });
  const html = HTML.replace(/\{\{\w+\}\}/g, 'Reader');
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: settings.connections * 4 }, async () => {
      while (next < settings.recipients) {
        const n = next++;
        await transport.sendMail({
          from: 'news@bench.example.com',
          to: `reader${n}@bench.example.com`,
          subject: `News for First${n}`,
          html,
          text: `Hello First${n}`,
          headers: {
            'List-Unsubscribe': '<http://127.0.0.1:8080/unsubscribe/token>',
            'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
          },
        });
      }
    }),
  );
  while ((await mailpit.count()) < settings.recipients) await sleep(100);
  transport.close();
  const rate = Math.round(settings.recipients / ((performance.now() - started) / 1000));
  log('sending', `calibration: a plain SMTP client gets ${rate} messages/s into Mailpit`);
  return rate;
}
