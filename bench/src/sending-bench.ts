/**
 * Sending: one run of BENCH_SENDING_RECIPIENTS recipients (default 100,000)
 * through the real delivery process into a private Mailpit, on a stack of its
 * own (campaign, analytics, ingestion, delivery; private databases, a private
 * recipient database and topics). The message is a newsletter of about 4 KB
 * of HTML (NEWSLETTER_HTML) with the recipient's fields, its links tracked as
 * the campaign default has them. Measures:
 *   - time to the first message (creation of the run to Mailpit holding one),
 *   - messages/s from the first message to the last,
 *   - CPU per message of every process, from the run's creation until
 *     ClickHouse holds all its `sent` events (so ingestion's share is whole):
 *     delivery, campaign, analytics, ingestion, the shared Postgres, ClickHouse
 *     and Kafka servers (each with all it forked: processTreeCpuMs), and
 *     Mailpit. The gateway is not started: the run is created over gRPC, so it
 *     would have nothing to do. The shared servers also count whatever else the
 *     host has them do meanwhile (`npm run up`, others' tests), hence the wait
 *     for a quiet machine before each measurement,
 *   - the delivery process's peak memory (VmHWM) for a run of
 *     BENCH_SENDING_SMALL_RECIPIENTS (default 10,000) against the full run,
 *     each in a fresh process (recipients must never be held in memory at once),
 *     and beside it what its JavaScript heap held (heap-probe.ts: after a full
 *     collection at the end, and the most after any full collection during the run),
 *   - the calibration: Mailpit's intake of BENCH_SENDING_CALIBRATION_MESSAGES
 *     (default: as many as the full run's recipients) messages of the size the
 *     run delivered from a plain SMTP client (nodemailer's pool, as many
 *     connections as the delivery process has), which bounds what the sender
 *     can reach here, with the client's and Mailpit's CPU per message; then the
 *     same messages through the sender's own MIME composer and SMTP sessions
 *     alone (own-client.ts, a process of its own), what the delivery process
 *     cannot spend less than on this Mailpit before its ledger, rendering and
 *     events.
 * Mailpit keeps the newest 200,000 messages: runs are followed by what its SMTP
 * server accepted, so a run of a million is measured as any other.
 * Settings: BENCH_SENDING_RECIPIENTS, BENCH_SENDING_SMALL_RECIPIENTS, BENCH_SENDING_CALIBRATION_MESSAGES, and
 * BENCH_SENDING_CPU_PROFILE_DIR: a folder where the delivery process of each run writes its CPU profile (heap-probe.ts).
 */
import { fork } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import nodemailer from 'nodemailer';
import { Client } from 'pg';
import { call, createClient, createKafka, createLogger } from '@mail/common';
import { createClickHouse } from '@mail/event-store';
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
import type { OwnClientJob } from './own-client';
import { log, round } from './measure';
import { infraServerPids, processTreeCpuMs, statusMb, waitUntilIdle } from './proc';

export interface SendingSettings {
  recipients: number;
  smallRecipients: number;
  /** Messages the plain client sends for the calibration. */
  calibrationMessages: number;
  /** SMTP connections of the delivery process and of the calibration client alike. */
  connections: number;
}

export function sendingSettings(env: NodeJS.ProcessEnv = process.env): SendingSettings {
  const recipients = Number(env.BENCH_SENDING_RECIPIENTS ?? 100_000);
  return {
    recipients,
    smallRecipients: Number(env.BENCH_SENDING_SMALL_RECIPIENTS ?? 10_000),
    calibrationMessages: Number(env.BENCH_SENDING_CALIBRATION_MESSAGES ?? recipients),
    connections: 5,
  };
}

/** Whose CPU a run counts; mailpit is the receiving end, every other one the platform. */
const SENDING_PROCESSES = ['delivery', 'campaign', 'analytics', 'ingestion', 'postgres', 'clickhouse', 'kafka', 'mailpit'] as const;
export type SendingProcess = (typeof SENDING_PROCESSES)[number];

export interface RunFigures {
  recipients: number;
  firstMessageMs: number;
  messagesPerSecond: number;
  /** CPU µs per message, per process, from the run's creation until ClickHouse held its sent events. */
  cpuMicrosecondsPerMessage: Record<SendingProcess, number>;
  /** Sent events in ClickHouse at the end: fewer than recipients if ingestion did not catch up in time. */
  sentEventsStored: number;
  deliveryPeakMb: number;
  /** The delivery process's JavaScript heap (heap-probe.ts). */
  deliveryHeap: HeapFigures;
  /** The ledger's size in Postgres (run_recipients, its indexes and TOAST, dead rows not yet vacuumed too) per recipient it holds. */
  ledgerBytesPerRecipient: number;
  /** Transactions committed and rows updated in the delivery database per message, over the same span as the CPU. */
  deliveryDatabase: DatabaseWork;
}

interface DatabaseWork {
  transactionsPerMessage: number;
  rowsUpdatedPerMessage: number;
}

export interface CalibrationFigures {
  messagesPerSecond: number;
  /** The bench process's CPU (the SMTP client) per message. */
  clientCpuMicrosecondsPerMessage: number;
  mailpitCpuMicrosecondsPerMessage: number;
  /** Size of a message as Mailpit received it, and of one the full run delivered. */
  messageBytes: number;
  deliveredMessageBytes: number;
  /** The same messages through the sender's own composer and SMTP sessions alone. */
  ownClient: { messagesPerSecond: number; clientCpuMicrosecondsPerMessage: number };
}

export interface SendingResult {
  settings: SendingSettings;
  small: RunFigures;
  full: RunFigures;
  calibration: CalibrationFigures;
}

/** A newsletter as campaigns send them: header, image, paragraphs, four tracked links, the recipient's fields, a footer. */
const NEWSLETTER_HTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>The Weekly Ledger</title>
<style>
body { margin: 0; padding: 0; background: #f4f4f7; font-family: Helvetica, Arial, sans-serif; color: #333333; }
.wrapper { max-width: 600px; margin: 0 auto; background: #ffffff; }
.header { background: #1d3557; color: #ffffff; padding: 24px 32px; }
.content { padding: 24px 32px; font-size: 16px; line-height: 1.5; }
.button { display: inline-block; padding: 12px 24px; background: #e63946; color: #ffffff; text-decoration: none; border-radius: 4px; }
.footer { padding: 16px 32px; font-size: 12px; color: #888888; background: #f1faee; }
</style>
</head>
<body>
<table class="wrapper" role="presentation" width="100%" cellpadding="0" cellspacing="0">
<tr><td class="header">
<h1 style="margin: 0; font-size: 24px;">The Weekly Ledger</h1>
<p style="margin: 4px 0 0;">News, tips and offers for {{first_name}} {{last_name}}</p>
</td></tr>
<tr><td class="content">
<img src="https://cdn.bench.example.com/newsletter/2026-11/hero.jpg" width="536" height="240" alt="This week at the Ledger" style="display: block; width: 100%; height: auto; border: 0;">
<p>Hello {{first_name}},</p>
<p>Welcome to this week's edition. Autumn is the season our readers plan ahead, so we have gathered the stories, guides
and offers that came up most often in your questions over the past month. As always, every article is free to read,
and you can reply to this email with anything you would like us to cover next time.</p>
<h2 style="font-size: 20px; color: #1d3557;">Five habits that make budgeting stick</h2>
<p>Most budgets fail in the third week, not the first. Our editor spoke with households that kept theirs for a full
year and found that what they shared was not discipline but a few small routines: a fixed review evening, one shared
list, and a buffer category for the unexpected. The full story walks through each habit with worked examples.</p>
<p><a href="https://www.bench.example.com/articles/budgeting-habits?utm_source=newsletter&amp;utm_medium=email" class="button">Read the story</a></p>
<h2 style="font-size: 20px; color: #1d3557;">Your account at a glance</h2>
<p>Your account {{account_id}} is registered to {{email}}. Statements for the last quarter are ready, and the new
savings tracker shows how close you are to the goals you set in spring. If anything looks out of place, our support
team answers within one working day.</p>
<p><a href="https://www.bench.example.com/account/statements?utm_source=newsletter&amp;utm_medium=email">See your statements</a>
&middot; <a href="https://www.bench.example.com/account/goals?utm_source=newsletter&amp;utm_medium=email">Review your goals</a></p>
<h2 style="font-size: 20px; color: #1d3557;">From the community</h2>
<p>Last week's question about splitting shared costs fairly drew more than four hundred replies. We picked the clearest
answers, from simple percentage splits to the envelope method, and put them side by side so you can choose what suits
your household. Thank you to everyone who wrote in; the next question is already open for your ideas.</p>
<p><a href="https://community.bench.example.com/threads/shared-costs?utm_source=newsletter&amp;utm_medium=email">Join the discussion</a></p>
<h2 style="font-size: 20px; color: #1d3557;">Coming up</h2>
<p>Next week we look at energy bills before winter: which tariffs changed this autumn, how to read the new statements,
and three small changes at home that readers say paid for themselves within a season. We will also answer the most
common questions about the savings tracker, including how goals carry over into the new year and how to share a goal
with a partner. If you have a question of your own, reply to this email and it may feature in a coming edition.</p>
<p>Until next week,<br>The Ledger team</p>
</td></tr>
<tr><td class="footer">
<p>You receive this newsletter because {{email}} subscribed to The Weekly Ledger. Bench Example Ltd, 1 Sample Street,
Example City, EX1 2MP.</p>
<p>To choose which editions reach you, reply to this email. To stop them all, <a href="{{unsubscribe_url}}" style="color: #888888;">unsubscribe</a>.</p>
</td></tr>
</table>
</body>
</html>`;

const NEWSLETTER_TEXT = `Hello {{first_name}},

This week: five habits that make budgeting stick, your account {{account_id}} at a glance, and the community's
answers on splitting shared costs. Read them all at https://www.bench.example.com/articles/budgeting-habits

You receive this newsletter because {{email}} subscribed to The Weekly Ledger.
Unsubscribe: {{unsubscribe_url}}`;

/** The event store's client. */
type EventStore = ReturnType<typeof createClickHouse>;

/** How long ingestion may take, after the last message, to store the run's sent events in ClickHouse. */
const SENT_EVENTS_TIMEOUT_MS = 120_000;

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
  const events = createClickHouse(clickhouse.url, clickhouse.database);
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
      processes: ['campaign', 'analytics', 'ingestion', 'delivery'],
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
        KAFKA_DLQ_TOPIC: `bench-sending-dlq-${suffix}`,
        KAFKA_CONSUMER_GROUP: `ingestion-bench-sending-${suffix}`,
        UNSUBSCRIBE_SIGNING_KEY: crypto.randomBytes(16).toString('hex'),
      },
    });
    const small = await measureRun(stack, mailpit, events, heapFile, postgres.url, settings.smallRecipients);
    await mailpit.clear();
    const full = await measureRun(stack, mailpit, events, heapFile, postgres.url, settings.recipients);
    const delivered = await newestMessage(mailpit);
    await mailpit.clear();
    const calibration = await calibrate(mailpit, settings, delivered);
    return { settings, small, full, calibration };
  } finally {
    await stack?.stopAll();
    await mailpit.close();
    await events.close();
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

/**
 * The previous measurement's aftermath (ClickHouse merging parts, Postgres
 * vacuuming) would count as this one's CPU: wait a while for a quiet machine.
 */
async function settle(next: string): Promise<void> {
  await waitUntilIdle(3_000, 30_000, (busy) => log('sending', `${Math.round(busy * 100)} % CPU busy before ${next}: waiting`));
}

/** CPU ms so far of each process a run counts (the shared servers' PIDs from their PID files, as infra.sh keeps them). */
function cpuOf(stack: Stack, mailpit: Mailpit): Record<SendingProcess, number> {
  const servers = infraServerPids();
  const pids: Record<SendingProcess, number | undefined> = {
    delivery: stack.pid('delivery'),
    campaign: stack.pid('campaign'),
    analytics: stack.pid('analytics'),
    ingestion: stack.pid('ingestion'),
    postgres: servers.postgres,
    clickhouse: servers.clickhouse,
    kafka: servers.kafka,
    mailpit: mailpit.pid,
  };
  return Object.fromEntries(SENDING_PROCESSES.map((name) => [name, processTreeCpuMs(pids[name])])) as Record<SendingProcess, number>;
}

/** One run of the first `count` accounts, in a fresh delivery process (its peak memory is this run's). */
async function measureRun(
  stack: Stack,
  mailpit: Mailpit,
  events: EventStore,
  heapFile: string,
  deliveryDatabaseUrl: string,
  count: number,
): Promise<RunFigures> {
  await stack.restart('delivery');
  const workspaceId = crypto.randomUUID();
  const campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
  const templates = createClient(campaignV1.TemplateServiceClient, stack.urls.grpc.campaign);
  const delivery = createClient(deliveryV1.DeliveryServiceClient, stack.urls.grpc.delivery);
  try {
    const template = await call(templates.createTemplate.bind(templates), {
      workspaceId,
      template: { name: 'Bench', subject: 'News for {{first_name}}', html: NEWSLETTER_HTML, text: NEWSLETTER_TEXT },
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
    await settle(`the run of ${count}`);
    const workBefore = await databaseWork(deliveryDatabaseUrl);
    const cpuBefore = cpuOf(stack, mailpit);
    const acceptedBefore = await mailpit.accepted();
    const delivered = async (): Promise<number> => (await mailpit.accepted()) - acceptedBefore;
    const started = performance.now();
    const { run } = await call(delivery.createRun.bind(delivery), { workspaceId, campaignId: campaign!.id });
    while ((await delivered()) === 0) await sleep(5);
    const first = performance.now();
    log('sending', `${count} recipients: first message after ${Math.round(first - started)} ms`);
    // The run's record is read once every 2 s only: each read counts the run's recipients (Postgres) and its
    // engagement (ClickHouse), which would land in the CPU measured here.
    const runStatus = async (): Promise<string | undefined> => {
      const { run: current } = await call(delivery.getRun.bind(delivery), { workspaceId, id: run!.id });
      if (current?.status === 'failed') throw new Error(`the run failed: ${current.failure}`);
      return current?.status;
    };
    for (let polls = 1; (await delivered()) < count; polls++) {
      if (polls % 20 === 0) await runStatus();
      await sleep(100);
    }
    const last = performance.now();
    while ((await runStatus()) !== 'completed') await sleep(2_000);
    const sentEventsStored = await waitForSentEvents(events, workspaceId, count);
    if (sentEventsStored < count)
      log('sending', `only ${sentEventsStored} of ${count} sent events in ClickHouse after ${SENT_EVENTS_TIMEOUT_MS / 1000} s`);
    const cpuAfter = cpuOf(stack, mailpit);
    const workAfter = await databaseWork(deliveryDatabaseUrl);
    const cpuMicrosecondsPerMessage = Object.fromEntries(
      SENDING_PROCESSES.map((name) => [name, round(((cpuAfter[name] - cpuBefore[name]) / count) * 1000, 0)]),
    ) as Record<SendingProcess, number>;
    const figures: RunFigures = {
      recipients: count,
      firstMessageMs: Math.round(first - started),
      messagesPerSecond: Math.round(count / ((last - first) / 1000)),
      cpuMicrosecondsPerMessage,
      sentEventsStored,
      deliveryPeakMb: round(statusMb(stack.pid('delivery'), 'VmHWM') ?? 0, 0),
      deliveryHeap: await readHeap(stack.pid('delivery'), heapFile),
      ledgerBytesPerRecipient: await ledgerBytesPerRecipient(deliveryDatabaseUrl),
      deliveryDatabase: {
        transactionsPerMessage: round((workAfter.transactions - workBefore.transactions) / count, 2),
        rowsUpdatedPerMessage: round((workAfter.rowsUpdated - workBefore.rowsUpdated) / count, 2),
      },
    };
    log('sending', JSON.stringify(figures));
    return figures;
  } finally {
    for (const client of [campaigns, templates, delivery]) client.close();
  }
}

/** Waits, up to SENT_EVENTS_TIMEOUT_MS, until the workspace's run has all its `count` sent events stored; answers how many are. */
async function waitForSentEvents(events: EventStore, workspaceId: string, count: number): Promise<number> {
  const deadline = performance.now() + SENT_EVENTS_TIMEOUT_MS;
  for (;;) {
    const result = await events.query({
      // Distinct ids: the ReplacingMergeTree may hold a redelivered event twice until it merges.
      query: `SELECT uniqExact(provider_event_id) AS n FROM events WHERE workspace_id = {workspace:UUID} AND event_type = 'sent'`,
      query_params: { workspace: workspaceId },
      format: 'JSONEachRow',
    });
    const stored = Number((await result.json<{ n: string }>())[0].n);
    if (stored >= count || performance.now() > deadline) return stored;
    await sleep(250);
  }
}

/**
 * What Postgres's statistics count for the database so far. A backend reports them within a second or so of its
 * transactions, and the run's end waits longer than that for its sent events.
 */
async function databaseWork(url: string): Promise<{ transactions: number; rowsUpdated: number }> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ transactions: string; rows_updated: string }>(
      `SELECT xact_commit + xact_rollback AS transactions, tup_updated AS rows_updated FROM pg_stat_database WHERE datname = current_database()`,
    );
    return { transactions: Number(rows[0].transactions), rowsUpdated: Number(rows[0].rows_updated) };
  } finally {
    await client.end();
  }
}

async function ledgerBytesPerRecipient(url: string): Promise<number> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ bytes: string; recipients: string }>(
      `SELECT pg_total_relation_size('delivery.run_recipients') AS bytes, (SELECT count(*) FROM delivery.run_recipients) AS recipients`,
    );
    return Math.round(Number(rows[0].bytes) / Number(rows[0].recipients));
  } finally {
    await client.end();
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

interface DeliveredMessage {
  html: string;
  text: string;
  /** As Mailpit received it: headers and MIME encoding included. */
  bytes: number;
}

/** The message Mailpit received last. */
async function newestMessage(mailpit: Mailpit): Promise<DeliveredMessage> {
  const response = await fetch(`${mailpit.apiUrl}/api/v1/messages?limit=1`);
  if (!response.ok) throw new Error(`mailpit GET /api/v1/messages: ${response.status}`);
  const [newest] = ((await response.json()) as { messages: { ID: string; Size: number }[] }).messages;
  const { HTML, Text } = await mailpit.message(newest.ID);
  return { html: HTML, text: Text, bytes: newest.Size };
}

/**
 * As many messages from nodemailer's pool alone, to the same Mailpit, then
 * from the sender's own composer and SMTP sessions alone: the parts of a
 * message the run delivered (its fields filled in, its links tracked), so
 * each is the size the sender's were.
 */
async function calibrate(mailpit: Mailpit, settings: SendingSettings, delivered: DeliveredMessage): Promise<CalibrationFigures> {
  // The text part carries the recipient's one-click link, which the sender also put in List-Unsubscribe.
  const unsubscribe = /https?:\/\/\S+\/unsubscribe\/\S+/.exec(delivered.text)?.[0];
  if (!unsubscribe) throw new Error('the delivered text part has no unsubscribe link');
  const headers = { 'List-Unsubscribe': `<${unsubscribe}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' };
  const url = new URL(mailpit.smtpUrl);

  await settle('the calibration');
  const transport = nodemailer.createTransport({
    pool: true,
    host: url.hostname,
    port: Number(url.port),
    secure: false,
    ignoreTLS: true,
    maxConnections: settings.connections,
    maxMessages: Infinity,
  });
  const pool = await timedSends(mailpit, settings, async () => {
    let next = 0;
    const before = process.cpuUsage();
    await Promise.all(
      Array.from({ length: settings.connections * 4 }, async () => {
        while (next < settings.calibrationMessages) {
          const n = next++;
          const [from, to, subject] = ['news@bench.example.com', `reader${n}@bench.example.com`, `News for First${n}`];
          await transport.sendMail({ from, to, subject, html: delivered.html, text: delivered.text, headers });
        }
      }),
    );
    const used = process.cpuUsage(before);
    return used.user + used.system;
  });
  transport.close();
  const messageBytes = (await newestMessage(mailpit)).bytes;
  await mailpit.clear();

  await settle("the sender's own SMTP client");
  const job: OwnClientJob = {
    host: url.hostname,
    port: Number(url.port),
    connections: settings.connections,
    messages: settings.calibrationMessages,
    html: delivered.html,
    text: delivered.text,
    headers,
  };
  const own = await timedSends(mailpit, settings, () => ownClient(job));

  const figures: CalibrationFigures = {
    ...pool,
    messageBytes,
    deliveredMessageBytes: delivered.bytes,
    ownClient: { messagesPerSecond: own.messagesPerSecond, clientCpuMicrosecondsPerMessage: own.clientCpuMicrosecondsPerMessage },
  };
  log('sending', `calibration: ${JSON.stringify(figures)}`);
  return figures;
}

/**
 * settings.calibrationMessages messages from a client (`send`, resolving to its CPU in microseconds), timed until
 * Mailpit accepted them all: the rate and both sides' CPU per message.
 */
async function timedSends(
  mailpit: Mailpit,
  settings: SendingSettings,
  send: () => Promise<number>,
): Promise<Pick<CalibrationFigures, 'messagesPerSecond' | 'clientCpuMicrosecondsPerMessage' | 'mailpitCpuMicrosecondsPerMessage'>> {
  const messages = settings.calibrationMessages;
  const acceptedBefore = await mailpit.accepted();
  const mailpitBefore = processTreeCpuMs(mailpit.pid);
  const started = performance.now();
  const clientMicroseconds = await send();
  while ((await mailpit.accepted()) - acceptedBefore < messages) await sleep(100);
  const seconds = (performance.now() - started) / 1000;
  const mailpitMs = processTreeCpuMs(mailpit.pid) - mailpitBefore;
  return {
    messagesPerSecond: Math.round(messages / seconds),
    clientCpuMicrosecondsPerMessage: Math.round(clientMicroseconds / messages),
    mailpitCpuMicrosecondsPerMessage: Math.round((mailpitMs * 1000) / messages),
  };
}

/** Runs own-client.ts on the job in a process of its own; resolves to that process's CPU in microseconds. */
function ownClient(job: OwnClientJob): Promise<number> {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(__dirname, 'own-client.js'));
    child.once('message', (answer: { cpuMicroseconds: number }) => resolve(answer.cpuMicroseconds));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code !== 0) reject(new Error(`own-client.js exited with ${code}`));
    });
    child.send(job);
  });
}
