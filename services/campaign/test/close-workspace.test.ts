import { Client } from 'pg';
import { OPEN_WORKSPACE } from '@mail/common';
import { raceCreatesWithClose } from '@mail/local';
import { MISSING_UUID, WORKSPACE_A, WORKSPACE_B, failure, startCampaignService, status, type CampaignService } from './harness';

/**
 * CloseWorkspace, the campaign side of deleting a workspace: its campaigns
 * (with their variants and categories) go, and no create adds one later,
 * including a create that was in flight while it ran.
 */
let service: CampaignService;

beforeAll(async () => {
  service = await startCampaignService();
});

afterAll(async () => {
  await service.close();
});

function create(workspaceId: string, providerCategoryId?: string) {
  return service.rpc('createCampaign', {
    workspaceId,
    campaign: {
      workspaceId,
      name: 'Doomed',
      providerCategoryId,
      recipientSource: 0,
      deliveryMode: 0,
      variants: { variants: [{ templateId: 'tpl-a', weight: 1 }] },
    },
  });
}

async function campaignsOf(workspaceId: string): Promise<number> {
  const { rows } = await service.db.raw<{ rows: { n: string }[] }>('SELECT count(*) AS n FROM campaigns WHERE workspace_id = ?', [
    workspaceId,
  ]);
  return Number(rows[0].n);
}

const freshWorkspace = () => crypto.randomUUID();

it('deletes the workspace’s campaigns and variants, keeps their categories retired, and refuses new ones', async () => {
  const closing = freshWorkspace();
  await create(closing, 'cat-closing-1');
  await create(closing, 'cat-closing-2');
  const kept = (await create(WORKSPACE_A, 'cat-kept')).campaign!;

  expect(await service.rpc('closeWorkspace', { workspaceId: closing })).toEqual({ deletedCampaigns: 2 });

  expect(await campaignsOf(closing)).toBe(0);
  const { rows } = await service.db.raw<{ rows: { n: string }[] }>(
    'SELECT count(*) AS n FROM campaign_variants v LEFT JOIN campaigns c ON c.id = v.campaign_id WHERE c.id IS NULL',
  );
  expect(Number(rows[0].n)).toBe(0);
  expect(await service.rpc('resolveCategories', { providerCategoryIds: ['cat-closing-1', 'cat-kept'] })).toEqual({
    matches: [
      {
        providerCategoryId: 'cat-kept',
        campaignId: kept.id,
        workspaceId: WORKSPACE_A,
        variantIds: kept.variants!.variants.map((v) => v.id),
      },
    ],
  });
  // Retired: no other workspace takes them (category-owners.test.ts: until a platform admin releases one).
  expect(await failure(create(WORKSPACE_B, 'cat-closing-1'))).toMatchObject({ code: status.ALREADY_EXISTS });
  expect(await failure(create(closing))).toMatchObject({ code: status.NOT_FOUND, details: 'Workspace not found' });
  expect(await service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: kept.id })).toMatchObject({ campaign: { id: kept.id } });
});

it('is idempotent, and closes a workspace it has never seen', async () => {
  const closing = freshWorkspace();
  await create(closing);
  expect(await service.rpc('closeWorkspace', { workspaceId: closing })).toEqual({ deletedCampaigns: 1 });
  expect(await service.rpc('closeWorkspace', { workspaceId: closing })).toEqual({ deletedCampaigns: 0 });
  expect(await service.rpc('closeWorkspace', { workspaceId: MISSING_UUID })).toEqual({ deletedCampaigns: 0 });
  expect(await failure(create(MISSING_UUID))).toMatchObject({ code: status.NOT_FOUND });
});

it('waits for a write that holds the workspace open, then deletes what it committed', async () => {
  const closing = freshWorkspace();
  await create(closing);
  const writer = new Client({ connectionString: service.postgres.url });
  await writer.connect();
  try {
    // An insert in flight, as CreateCampaign's statement holds it: the workspace row locked FOR SHARE.
    await writer.query('SET search_path TO campaign');
    await writer.query('BEGIN');
    expect((await writer.query(OPEN_WORKSPACE.replace(':workspaceId', '$1'), [closing])).rowCount).toBe(1);
    await writer.query(
      `INSERT INTO campaigns (workspace_id, name, is_active, send_priority, recipient_source, delivery_mode, has_variant_list)
       VALUES ($1, 'In flight', true, 100, 'mssql_query', 'single_template', false)`,
      [closing],
    );
    let closed = false;
    const closingCall = service.rpc('closeWorkspace', { workspaceId: closing }).then((answer) => {
      closed = true;
      return answer;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(closed).toBe(false);
    await writer.query('COMMIT');
    expect(await closingCall).toEqual({ deletedCampaigns: 2 });
    expect(await campaignsOf(closing)).toBe(0);
  } finally {
    await writer.end();
  }
});

it('leaves nothing behind when creates race the closing', async () => {
  const closing = freshWorkspace();
  await create(closing);
  const race = await raceCreatesWithClose(
    60,
    40,
    () => create(closing),
    () => service.rpc('closeWorkspace', { workspaceId: closing }),
  );
  expect(race.unexpected).toEqual([]);
  // Every create that succeeded committed before the closing deleted, or it would have been refused.
  expect(race.closed.deletedCampaigns).toBe(1 + race.created);
  expect(await campaignsOf(closing)).toBe(0);
});
