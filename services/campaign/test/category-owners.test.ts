import crypto from 'node:crypto';
import type { campaignV1 } from '@mail/proto';
import { WORKSPACE_A, WORKSPACE_B, failure, startCampaignService, status, type CampaignService } from './harness';

/**
 * A provider_category_id stays bound to the workspace that used it, after
 * its campaign is renamed or deleted, and after the workspace is deleted:
 * events still arriving for it must never be matched into another
 * workspace. Only a platform admin's release (audited) frees it. Categories
 * that look like others are refused.
 */
let service: CampaignService;

beforeAll(async () => {
  service = await startCampaignService();
});

afterAll(async () => {
  await service.close();
});

const TAKEN = { code: status.ALREADY_EXISTS, details: 'Another campaign already uses this provider_category_id', violations: [] };

async function create(workspaceId: string, providerCategoryId?: string): Promise<campaignV1.Campaign> {
  const campaign = { workspaceId, name: 'Campaign', providerCategoryId, recipientSource: 0, deliveryMode: 0 };
  return (await service.rpc('createCampaign', { workspaceId, campaign })).campaign!;
}

function rename(workspaceId: string, id: string, providerCategoryId: string | undefined) {
  return service.rpc('updateCampaign', {
    workspaceId,
    id,
    updateMask: ['provider_category_id'],
    campaign: { workspaceId: '', recipientSource: 0, deliveryMode: 0, providerCategoryId },
  });
}

const lookup = async (category: string) => (await service.rpc('resolveCategories', { providerCategoryIds: [category] })).matches;

it('keeps a renamed or deleted category bound to its workspace: another gets 409, as for an active one', async () => {
  const b = await create(WORKSPACE_B, 'sticky-old');
  await rename(WORKSPACE_B, b.id, 'sticky-new');
  expect(await lookup('sticky-old')).toEqual([]);
  expect(await failure(create(WORKSPACE_A, 'sticky-old'))).toEqual(TAKEN);
  const a = await create(WORKSPACE_A, 'sticky-a');
  expect(await failure(rename(WORKSPACE_A, a.id, 'sticky-old'))).toEqual(TAKEN);
  expect(await failure(create(WORKSPACE_A, 'sticky-new'))).toEqual(TAKEN);

  await service.rpc('deleteCampaign', { workspaceId: WORKSPACE_B, id: b.id });
  expect(await failure(create(WORKSPACE_A, 'sticky-new'))).toEqual(TAKEN);
  expect(await failure(create(WORKSPACE_A, 'sticky-old'))).toEqual(TAKEN);
  expect(await lookup('sticky-new')).toEqual([]);

  // The owner uses its categories again, on a new campaign or an old one.
  const again = await create(WORKSPACE_B, 'sticky-new');
  expect(await lookup('sticky-new')).toEqual([
    { providerCategoryId: 'sticky-new', campaignId: again.id, workspaceId: WORKSPACE_B, variantIds: [] },
  ]);
  await rename(WORKSPACE_B, again.id, 'sticky-old');
  expect((await service.rpc('getCampaign', { workspaceId: WORKSPACE_B, id: again.id })).campaign!.providerCategoryId).toBe('sticky-old');
  // A rename to null releases nothing either.
  await rename(WORKSPACE_B, again.id, undefined);
  expect(await failure(create(WORKSPACE_A, 'sticky-old'))).toEqual(TAKEN);
});

it('binds a category to one workspace when two take it at once', async () => {
  const category = `race-${crypto.randomUUID()}`;
  const attempts = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => create(i % 2 === 0 ? WORKSPACE_A : WORKSPACE_B, category)));
  expect(attempts.filter((attempt) => attempt.status === 'fulfilled')).toHaveLength(1);
});

const ADMIN = { releasedByUserId: crypto.randomUUID(), releasedByEmail: 'root@example.com' };
const release = (providerCategoryId: string, by: { releasedByUserId: string; releasedByEmail: string } = ADMIN) =>
  service.rpc('releaseProviderCategory', { providerCategoryId, ...by });

it("keeps a deleted workspace's categories retired, renamed ones included, until a platform admin releases one, audited", async () => {
  const closing = crypto.randomUUID();
  const campaign = await create(closing, 'closing-old');
  await rename(closing, campaign.id, 'closing-new');
  await service.rpc('closeWorkspace', { workspaceId: closing });
  expect(await failure(create(WORKSPACE_A, 'closing-old'))).toEqual(TAKEN);
  expect(await failure(create(WORKSPACE_B, 'closing-new'))).toEqual(TAKEN);
  const a = await create(WORKSPACE_A, 'closing-a');
  expect(await failure(rename(WORKSPACE_A, a.id, 'closing-old'))).toEqual(TAKEN);

  const before = new Date();
  const { release: released } = await release('closing-old');
  expect(released).toEqual({
    providerCategoryId: 'closing-old',
    workspaceId: closing,
    releasedByUserId: ADMIN.releasedByUserId,
    releasedByEmail: 'root@example.com',
    releasedAt: expect.any(Date),
  });
  expect(released!.releasedAt!.getTime()).toBeGreaterThanOrEqual(before.getTime() - 1_000);
  const audit = await service.db.raw<{ rows: Record<string, unknown>[] }>(
    `SELECT provider_category_id, workspace_id, released_by_user_id, released_by_email, released_at FROM campaign.category_releases
      WHERE provider_category_id = 'closing-old'`,
  );
  expect(audit.rows).toEqual([
    {
      provider_category_id: 'closing-old',
      workspace_id: closing,
      released_by_user_id: ADMIN.releasedByUserId,
      released_by_email: 'root@example.com',
      released_at: released!.releasedAt,
    },
  ]);
  // Released: the first workspace to take it has it; the other one stays retired.
  expect((await rename(WORKSPACE_A, a.id, 'closing-old')).campaign!.providerCategoryId).toBe('closing-old');
  expect(await failure(create(WORKSPACE_B, 'closing-old'))).toEqual(TAKEN);
  expect(await failure(create(WORKSPACE_B, 'closing-new'))).toEqual(TAKEN);
});

it('releases only a category that a workspace holds and no campaign uses', async () => {
  const inUse = await create(WORKSPACE_A, 'release-in-use');
  expect(await failure(release('release-in-use'))).toEqual({
    code: status.ALREADY_EXISTS,
    details: 'A campaign uses this provider_category_id: delete it or change its category first',
    violations: [],
  });
  expect(await failure(release('never-used'))).toEqual({ code: status.NOT_FOUND, details: 'Provider category not found', violations: [] });
  expect(await failure(release('nul\u0000'))).toMatchObject({ code: status.NOT_FOUND });
  expect(await failure(release('release-in-use', { releasedByUserId: '', releasedByEmail: '' }))).toMatchObject({
    code: status.INVALID_ARGUMENT,
  });
  await service.rpc('deleteCampaign', { workspaceId: WORKSPACE_A, id: inUse.id });
  expect((await release('release-in-use')).release!.workspaceId).toBe(WORKSPACE_A);
  expect(await failure(release('release-in-use'))).toMatchObject({ code: status.NOT_FOUND });
});

it.each([
  ' f3-x',
  'f3-x ',
  'f3-x\t',
  '\nf3-x',
  'f3\u200bx',
  'f3-x\u200d',
  '\ufefff3-x',
  'f3\u00adx',
  'f3\u2028x',
  'f3-x\u00a0',
  'f3\u0000x',
])('refuses the look-alike category %j with a value_error, on create and on update', async (category) => {
  const violation = { loc: ['provider_category_id'], type: 'value_error', input: category };
  expect(await failure(create(WORKSPACE_A, category))).toMatchObject({ code: status.INVALID_ARGUMENT, violations: [violation] });
  const campaign = await create(WORKSPACE_A);
  expect(await failure(rename(WORKSPACE_A, campaign.id, category))).toMatchObject({
    code: status.INVALID_ARGUMENT,
    violations: [violation],
  });
});

it('takes categories with inner spaces and any script', async () => {
  for (const category of ['spring sale 2026', 'Frühling-ß', '春のセール', 'emoji-🎉']) {
    expect((await create(WORKSPACE_A, category)).providerCategoryId).toBe(category);
  }
});
