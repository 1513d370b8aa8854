import crypto from 'node:crypto';
import type { campaignV1 } from '@mail/proto';
import { WORKSPACE_A, WORKSPACE_B, failure, startCampaignService, status, type CampaignService } from './harness';

/**
 * A provider_category_id stays bound to the workspace that used it, after
 * its campaign is renamed or deleted: events still arriving for it must
 * never be matched into another workspace. Only the workspace's own
 * deletion releases it.
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

it("releases the workspace's categories, renamed ones included, when the workspace is deleted", async () => {
  const closing = crypto.randomUUID();
  const campaign = await create(closing, 'closing-old');
  await rename(closing, campaign.id, 'closing-new');
  expect(await failure(create(WORKSPACE_A, 'closing-old'))).toEqual(TAKEN);
  await service.rpc('closeWorkspace', { workspaceId: closing });
  expect((await create(WORKSPACE_A, 'closing-old')).providerCategoryId).toBe('closing-old');
  expect((await create(WORKSPACE_B, 'closing-new')).providerCategoryId).toBe('closing-new');
});
