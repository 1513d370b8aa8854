import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Knex } from 'knex';
import { call, createClient, createLogger } from '@mail/common';
import { createTestPostgres, startStack, type Stack, type TestPostgres } from '@mail/local';
import { campaignV1 } from '@mail/proto';
import { connectUpstream, type Upstream } from '../src/grpc/clients';
import { Scheduler } from '../src/sending/scheduler';
import { openDatabase } from '../src/store/database';
import { listRuns } from '../src/store/runs';

/**
 * The scheduler against the real campaign process (its ListScheduledCampaigns
 * and schedule_set_at) and the delivery schema on a private database. Two
 * Scheduler instances, each with its own connection pool, stand for two
 * replicas; tick(now) is given the moment to look at, so fire times hours or
 * days away are tested without waiting for them.
 */

const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'delivery-scheduler-'));
const logger = createLogger('scheduler-test', 'silent');
const HOUR = 3_600_000;
let postgres: TestPostgres;
let stack: Stack;
let upstream: Upstream;
let replicas: { db: Knex; scheduler: Scheduler }[];
let campaigns: campaignV1.CampaignServiceClient;
let templates: campaignV1.TemplateServiceClient;
const workspaceId = crypto.randomUUID();

beforeAll(async () => {
  postgres = await createTestPostgres('delivery_scheduler');
  stack = await startStack({
    stateDir,
    logDir: path.join(stateDir, 'logs'),
    processes: ['campaign'],
    env: { DATABASE_URL: postgres.url, LOG_LEVEL: 'warn' },
  });
  upstream = connectUpstream(stack.urls.grpc.campaign, '127.0.0.1:1');
  replicas = [];
  // One after the other: the first creates the schema.
  for (let n = 0; n < 2; n += 1) {
    const db = await openDatabase(postgres.url);
    replicas.push({ db, scheduler: new Scheduler(db, upstream, { intervalMs: 60_000, missedGraceMs: HOUR }, logger) });
  }
  campaigns = createClient(campaignV1.CampaignServiceClient, stack.urls.grpc.campaign);
  templates = createClient(campaignV1.TemplateServiceClient, stack.urls.grpc.campaign);
}, 120_000);

afterAll(async () => {
  campaigns?.close();
  templates?.close();
  upstream?.close();
  await Promise.all(replicas?.map(({ db }) => db.destroy()) ?? []);
  await stack?.stopAll();
  await postgres?.drop();
  fs.rmSync(stateDir, { recursive: true, force: true });
});

async function scheduledCampaign(cron: string, fields: Partial<campaignV1.CampaignInput> = {}): Promise<campaignV1.Campaign> {
  const template = await call(templates.createTemplate.bind(templates), {
    workspaceId,
    template: { name: 'Scheduled', subject: 'News', text: 'Hello' },
  });
  const { campaign } = await call(campaigns.createCampaign.bind(campaigns), {
    workspaceId,
    campaign: {
      workspaceId,
      name: `Scheduled ${cron}`,
      isActive: true,
      scheduleCron: cron,
      recipientSource: campaignV1.RecipientSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
      csvAccountIds: { ids: ['acc-1'] },
      fromEmail: 'news@sender.example.com',
      deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
      templateId: template.id,
      ...fields,
    },
  });
  return campaign!;
}

const runsOf = async (campaignId: string) =>
  (await listRuns(replicas[0].db, workspaceId, campaignId, { page: 1, pageSize: 500, offset: 0 })).items;

/** Both replicas tick at the same moment, at once. */
const tickBoth = (now: Date) => Promise.all(replicas.map(({ scheduler }) => scheduler.tick(now)));

test('two replicas ticking at the same fire time start one run, and ticking again starts none', async () => {
  const campaign = await scheduledCampaign('*/5 * * * *');
  const fire = new Date(campaign.nextRunAt!);
  await tickBoth(new Date(fire.getTime() - 1));
  expect(await runsOf(campaign.id)).toEqual([]);
  await tickBoth(new Date(fire.getTime() + 1_000));
  await tickBoth(new Date(fire.getTime() + 2_000));
  await Promise.all([tickBoth(new Date(fire.getTime() + 3_000)), tickBoth(new Date(fire.getTime() + 3_000))]);
  const runs = await runsOf(campaign.id);
  expect(runs).toHaveLength(1);
  expect(runs[0]).toEqual(expect.objectContaining({ trigger: 'schedule', scheduledFor: fire, status: 'queued', campaignId: campaign.id }));
  // The next fire time gets its own run.
  await tickBoth(new Date(fire.getTime() + 5 * 60_000));
  expect((await runsOf(campaign.id)).map((run) => run.scheduledFor)).toEqual([new Date(fire.getTime() + 5 * 60_000), fire]);
});

test('after downtime only the latest missed fire time runs, and only within RUN_MISSED_GRACE_MS', async () => {
  const hourly = await scheduledCampaign('0 * * * *');
  const first = new Date(hourly.nextRunAt!);
  // Down for three fire times: back 10 minutes after the third.
  await tickBoth(new Date(first.getTime() + 2 * HOUR + 10 * 60_000));
  expect((await runsOf(hourly.id)).map((run) => run.scheduledFor)).toEqual([new Date(first.getTime() + 2 * HOUR)]);

  const daily = await scheduledCampaign('0 6 * * *');
  const morning = new Date(daily.nextRunAt!);
  // Back two hours after a fire time: too late for it (grace 1 h); the next one runs.
  await tickBoth(new Date(morning.getTime() + 2 * HOUR));
  expect(await runsOf(daily.id)).toEqual([]);
  await tickBoth(new Date(morning.getTime() + 24 * HOUR + 60_000));
  expect((await runsOf(daily.id)).map((run) => run.scheduledFor)).toEqual([new Date(morning.getTime() + 24 * HOUR)]);
});

test('a scheduled fire of a campaign that cannot be sent records a failed run with the reason; inactive campaigns do not fire', async () => {
  const broken = await scheduledCampaign('*/10 * * * *', { fromEmail: undefined });
  const fire = new Date(broken.nextRunAt!);
  await tickBoth(new Date(fire.getTime() + 1_000));
  const [run] = await runsOf(broken.id);
  expect(run).toEqual(expect.objectContaining({ status: 'failed', trigger: 'schedule', scheduledFor: fire }));
  expect(run.failure).toEqual(expect.stringContaining('from_email'));
  expect(run.finishedAt).toEqual(expect.any(Date));

  const inactive = await scheduledCampaign('*/10 * * * *', { isActive: false });
  await tickBoth(new Date(fire.getTime() + 1_000));
  expect(await runsOf(inactive.id)).toEqual([]);
});

test('a scheduled fire of a campaign with an A/B test starts a run in its test phase, with the settings of the fire time', async () => {
  const template = await call(templates.createTemplate.bind(templates), {
    workspaceId,
    template: { name: 'Variant', subject: 'News B', text: 'Hello' },
  });
  const campaign = await scheduledCampaign('*/15 * * * *', {
    deliveryMode: campaignV1.DeliveryMode.DELIVERY_MODE_VARIANTS,
    templateId: undefined,
    variants: {
      variants: [
        { templateId: template.id, weight: 1, isActive: true },
        { templateId: template.id, weight: 1, isActive: true },
      ],
    },
    abTest: { testFraction: 0.3, waitMinutes: 30, metric: 'click_rate' },
  });
  const fire = new Date(campaign.nextRunAt!);
  await tickBoth(new Date(fire.getTime() + 1_000));
  const [run] = await runsOf(campaign.id);
  expect(run).toEqual(expect.objectContaining({ trigger: 'schedule', scheduledFor: fire, status: 'queued' }));
  // The run carries the campaign's test as it was at the fire time: the senders test, wait and decide as for a manual run.
  expect(run.abTest).toEqual(
    expect.objectContaining({ phase: 'testing', testFraction: 0.3, waitMinutes: 30, metric: 'click_rate', winnerVariantId: null }),
  );
  expect(run.abTest?.variants.map((variant) => variant.variantId).sort()).toEqual(
    campaign.variants!.variants.map((variant) => variant.id).sort(),
  );
});
