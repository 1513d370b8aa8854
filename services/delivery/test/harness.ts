import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import * as grpc from '@grpc/grpc-js';
import { call, createClient, isServiceError } from '@mail/common';
import {
  ACCOUNTS_TABLE,
  createTestClickHouse,
  createTestPostgres,
  createTestTopic,
  ensureRecipientDatabase,
  eventually,
  freePorts,
  startMailpit,
  startStack,
  uniqueSuffix,
  type Mailpit,
  type MailpitOptions,
  type Stack,
  type TestClickHouse,
  type TestPostgres,
} from '@mail/local';
import { analyticsV1, campaignV1, deliveryV1 } from '@mail/proto';
import type { Knex } from 'knex';
import { openDatabase } from '../src/store/database';
import { SendingStore } from '../src/store/sending';

/**
 * The delivery service's world for a test file: the real campaign, analytics
 * and delivery processes (startStack) over private Postgres and ClickHouse
 * databases, a private recipient database with its `accounts` table, a private
 * Mailpit, and a private events topic; gRPC clients for campaign, templates
 * and delivery.
 */
export interface DeliveryWorld {
  stack: Stack;
  /** Reads the events and suppressions that ingestion stored (a world started with `ingestion`). */
  analytics: analyticsV1.AnalyticsServiceClient;
  mailpit: Mailpit;
  env: Record<string, string>;
  recipients: TestPostgres;
  delivery: deliveryV1.DeliveryServiceClient;
  campaigns: campaignV1.CampaignServiceClient;
  templates: campaignV1.TemplateServiceClient;
  workspaceId: string;
  stateDir: string;
  /** A second delivery process on the same databases (another replica); stopped by close(). */
  startReplica(): Promise<ChildProcess>;
  close(): Promise<void>;
}

const REPO_ROOT = path.resolve(__dirname, '../../..');

/** Adds `count` accounts (the table as `npm run up` creates it) with addresses at `domain`. */
export async function fillAccounts(url: string, count: number, domain: string, start = 0): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(ACCOUNTS_TABLE);
    await client.query(
      `INSERT INTO accounts (account_id, email, first_name, last_name)
       SELECT 'acc-' || lpad(n::text, 7, '0'), 'user' || n || '@' || $3, 'First' || n, 'Last' || n
       FROM generate_series($1::int, $2::int) AS n`,
      [start, start + count - 1, domain],
    );
  } finally {
    await client.end();
  }
}

export interface WorldOptions {
  /** Also the ingestion process, on the world's topic with a consumer group of its own: events reach ClickHouse. */
  ingestion?: boolean;
  /** Options of the world's Mailpit (a bounce mailbox test starts another). */
  mailpit?: MailpitOptions;
}

export async function startDeliveryWorld(
  label: string,
  env: Record<string, string> = {},
  options: WorldOptions = {},
): Promise<DeliveryWorld> {
  const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), `delivery-${label}-`));
  const opened: { postgres?: TestPostgres; recipients?: TestPostgres; clickhouse?: TestClickHouse; mailpit?: Mailpit; stack?: Stack } = {};
  const replicas: ChildProcess[] = [];
  const clients: { close(): void }[] = [];
  const close = async (): Promise<void> => {
    for (const client of clients) client.close();
    await Promise.all(
      replicas.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            child.once('exit', () => resolve());
            child.kill('SIGKILL');
          }),
      ),
    );
    await opened.stack?.stopAll();
    await opened.mailpit?.close();
    await Promise.all([opened.postgres?.drop(), opened.recipients?.drop(), opened.clickhouse?.drop()]);
    fs.rmSync(stateDir, { recursive: true, force: true });
  };
  try {
    [opened.postgres, opened.recipients, opened.clickhouse, opened.mailpit] = await Promise.all([
      createTestPostgres(`delivery_${label}`),
      createTestPostgres(`recipients_${label}`),
      createTestClickHouse(`delivery_${label}`),
      startMailpit(label, options.mailpit),
    ]);
    const topic = `delivery-${label}-${uniqueSuffix()}`;
    await createTestTopic(topic, 3);
    const worldEnv: Record<string, string> = {
      DATABASE_URL: opened.postgres.url,
      CLICKHOUSE_URL: opened.clickhouse.url,
      CLICKHOUSE_DATABASE: opened.clickhouse.database,
      RECIPIENTS_DATABASE_URL: await ensureRecipientDatabase(opened.recipients.url),
      SMTP_URL: opened.mailpit.smtpUrl,
      KAFKA_EVENTS_TOPIC: topic,
      UNSUBSCRIBE_SIGNING_KEY: `test-key-${uniqueSuffix()}`,
      PUBLIC_BASE_URL: 'http://gateway.example.com',
      LOG_LEVEL: 'warn',
      ...(options.ingestion ? { KAFKA_CONSUMER_GROUP: `ingestion-${topic}`, KAFKA_DLQ_TOPIC: `${topic}-dlq` } : {}),
      ...env,
    };
    opened.stack = await startStack({
      stateDir,
      logDir: path.join(stateDir, 'logs'),
      processes: options.ingestion ? ['campaign', 'analytics', 'ingestion', 'delivery'] : ['campaign', 'analytics', 'delivery'],
      env: worldEnv,
    });
    const stack = opened.stack;
    const delivery = createClient(deliveryV1.DeliveryServiceClient, stack.urls.grpc.delivery);
    const campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
    const templates = createClient(campaignV1.TemplateServiceClient, stack.urls.grpc.campaign);
    const analytics = createClient(analyticsV1.AnalyticsServiceClient, stack.urls.grpc.analytics);
    clients.push(delivery, campaigns, templates, analytics);
    await awaitCampaignReached(delivery);
    const startReplica = async (): Promise<ChildProcess> => {
      const [grpcPort, opsPort] = await freePorts(2);
      const log = fs.openSync(path.join(stateDir, 'logs', `delivery-replica-${replicas.length + 1}.log`), 'a');
      const child = spawn(process.execPath, [path.join(REPO_ROOT, 'services/delivery/dist/main.js')], {
        env: {
          ...process.env,
          ...worldEnv,
          DELIVERY_GRPC_ADDR: `127.0.0.1:${grpcPort}`,
          OPS_PORT: String(opsPort),
          CAMPAIGN_GRPC_ADDR: stack.urls.grpc.campaign,
          ANALYTICS_GRPC_ADDR: stack.urls.grpc.analytics,
        },
        stdio: ['ignore', log, log],
      });
      replicas.push(child);
      for (let attempt = 0; attempt < 300; attempt += 1) {
        const ready = await fetch(`http://127.0.0.1:${opsPort}/readyz`).then(
          (answer) => answer.ok,
          () => false,
        );
        if (ready) return child;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      throw new Error('the delivery replica did not become ready');
    };
    return {
      stack,
      analytics,
      mailpit: opened.mailpit,
      env: worldEnv,
      recipients: opened.recipients,
      delivery,
      campaigns,
      templates,
      workspaceId: crypto.randomUUID(),
      stateDir,
      startReplica,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}

/**
 * Waits until the delivery process reaches the campaign service: a campaign it
 * does not know is NOT_FOUND, not UNAVAILABLE. The processes start at once, and
 * delivery's scheduler asks for campaigns at its start; if that first connection
 * failed, the channel fails calls at once until its reconnect backoff is over.
 */
async function awaitCampaignReached(delivery: deliveryV1.DeliveryServiceClient): Promise<void> {
  const unknownCampaign = { workspaceId: crypto.randomUUID(), campaignId: crypto.randomUUID() };
  await eventually(
    () =>
      call(delivery.listRuns.bind(delivery), unknownCampaign).then(
        () => undefined,
        (error: unknown) => {
          if (!isServiceError(error) || error.code !== grpc.status.NOT_FOUND) throw error;
        },
      ),
    30_000,
  );
}

/** A template and an active single-template campaign reading `query` from the recipient database. */
export async function createSendableCampaign(
  world: DeliveryWorld,
  query: string,
  fields: Partial<campaignV1.CampaignInput> = {},
): Promise<campaignV1.Campaign> {
  const template = await call(world.templates.createTemplate.bind(world.templates), {
    workspaceId: world.workspaceId,
    template: { name: 'Hello', subject: 'Hello {{first_name}}', html: '<p>Hi {{first_name}}</p>', text: 'Hi {{first_name}}' },
  });
  const { campaign } = await call(world.campaigns.createCampaign.bind(world.campaigns), {
    workspaceId: world.workspaceId,
    campaign: {
      workspaceId: world.workspaceId,
      name: 'Exactly once',
      recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
      mssqlQuery: query,
      fromEmail: 'news@sender.example.com',
      deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
      templateId: template.id,
      ...fields,
    },
  });
  if (!campaign) throw new Error('no campaign');
  return campaign;
}

/** Polls the run until `done` holds for it (or the time is up, which fails the test). */
export async function waitForRun(
  world: DeliveryWorld,
  runId: string,
  done: (run: deliveryV1.Run) => boolean,
  timeoutMs = 240_000,
): Promise<deliveryV1.Run> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    // The delivery process may be restarting: an unanswered call is tried again.
    const run = await call(world.delivery.getRun.bind(world.delivery), { workspaceId: world.workspaceId, id: runId }).then(
      (answer) => answer.run,
      (error: unknown) => void (last = error),
    );
    if (run && done(run)) return run;
    if (Date.now() > deadline) throw new Error(`run ${runId} did not get there in time: ${JSON.stringify(run ?? String(last))}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Every recipient of a run, all pages. */
export async function allRecipients(world: DeliveryWorld, runId: string): Promise<deliveryV1.RunRecipient[]> {
  const all: deliveryV1.RunRecipient[] = [];
  for (let page = 1; ; page += 1) {
    const answer = await call(world.delivery.listRunRecipients.bind(world.delivery), {
      workspaceId: world.workspaceId,
      runId,
      page: { page, pageSize: 500 },
    });
    all.push(...answer.recipients);
    if (answer.recipients.length < 500) return all;
  }
}

/** The delivery schema on a private database (at `url`), the senders' store over it, and how to drop both. */
export async function openSendingDatabase(
  label: string,
): Promise<{ url: string; db: Knex; store: SendingStore; close: () => Promise<void> }> {
  const postgres = await createTestPostgres(label);
  const db = await openDatabase(postgres.url);
  return {
    url: postgres.url,
    db,
    store: new SendingStore(db),
    close: async () => {
      await db.destroy();
      await postgres.drop();
    },
  };
}

export interface TestCertificate {
  certFile: string;
  keyFile: string;
  remove(): void;
}

/**
 * A self-signed certificate for 127.0.0.1 (PEM files in a folder of its own), which a delivery process trusts only
 * when told to (NODE_EXTRA_CA_CERTS): the TLS tests' servers show it, and it is verified.
 */
export function createTestCertificate(label: string): TestCertificate {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${label}-`));
  const [certFile, keyFile] = [path.join(dir, 'cert.pem'), path.join(dir, 'key.pem')];
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2'].concat([
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
    ]),
    { stdio: 'ignore' },
  );
  return { certFile, keyFile, remove: () => fs.rmSync(dir, { recursive: true, force: true }) };
}
