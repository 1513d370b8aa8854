import { createHealthClient } from '@mail/common';
import type { campaignV1 } from '@mail/proto';
import {
  DeliveryMode,
  MISSING_UUID,
  RecipientSource,
  WORKSPACE_A,
  WORKSPACE_B,
  failure,
  startCampaignService,
  status,
  type CampaignService,
} from './harness';

let service: CampaignService;

beforeAll(async () => {
  service = await startCampaignService();
});

afterAll(async () => {
  await service.close();
});

const FULL_INPUT: campaignV1.CampaignInput = {
  workspaceId: WORKSPACE_A,
  name: 'Spring sale',
  description: 'Everything must go',
  isActive: false,
  sendPriority: 7,
  trackOpens: false,
  trackClicks: false,
  scheduleCron: '30 8 * * MON',
  recipientSource: RecipientSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
  mssqlQuery: 'SELECT TOP 10 id FROM dbo.accounts WITH (NOLOCK)',
  csvAccountIds: { ids: ['a-1', 'a-2'] },
  providerCategoryId: 'spring-2026',
  fromEmail: 'news@example.com',
  fromName: 'Newsroom',
  replyTo: 'replies@example.com',
  deliveryMode: DeliveryMode.DELIVERY_MODE_VARIANTS,
  templateId: 'tpl-main',
  abTest: { testFraction: 0.3, waitMinutes: 60, metric: 'click_rate' },
  variants: {
    variants: [
      { templateId: 'tpl-a', weight: 3, label: 'A', isActive: true },
      { templateId: 'tpl-b', weight: 0, label: undefined, isActive: false },
    ],
  },
};

async function create(input: Partial<campaignV1.CampaignInput> = {}): Promise<campaignV1.Campaign> {
  const write = { workspaceId: WORKSPACE_A, name: 'Campaign', recipientSource: 0, deliveryMode: 0, ...input };
  const { campaign } = await service.rpc('createCampaign', { workspaceId: write.workspaceId, campaign: write });
  return campaign!;
}

function update(id: string, updateMask: string[], campaign: Partial<campaignV1.CampaignInput> = {}) {
  return service.rpc('updateCampaign', {
    workspaceId: WORKSPACE_A,
    id,
    updateMask,
    campaign: { workspaceId: '', recipientSource: 0, deliveryMode: 0, ...campaign },
  });
}

const notFound = { code: status.NOT_FOUND, details: 'Campaign not found', violations: [] };

describe('create and get', () => {
  it('fills every default when only the workspace and the name are given', async () => {
    const campaign = await create({ name: 'Minimal' });
    expect(campaign).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      workspaceId: WORKSPACE_A,
      name: 'Minimal',
      isActive: true,
      sendPriority: 100,
      trackOpens: true,
      trackClicks: true,
      recipientSource: RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
      deliveryMode: DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
      createdAt: expect.any(Date),
      updatedAt: campaign.createdAt,
    });
    expect((await service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: campaign.id })).campaign).toEqual(campaign);
  });

  it('stores every field and returns it unchanged, with variant records and the next run', async () => {
    const before = Date.now();
    const { campaign } = await service.rpc('createCampaign', { workspaceId: FULL_INPUT.workspaceId, campaign: FULL_INPUT });
    const { variants: _variants, ...fields } = FULL_INPUT;
    expect(campaign).toEqual({
      ...fields,
      id: expect.any(String),
      variants: {
        variants: [
          { id: expect.any(String), templateId: 'tpl-a', weight: 3, label: 'A', isActive: true },
          { id: expect.any(String), templateId: 'tpl-b', weight: 0, isActive: false },
        ],
      },
      createdAt: expect.any(Date),
      updatedAt: expect.any(Date),
      nextRunAt: expect.any(Date),
    });
    const next = campaign!.nextRunAt!;
    expect(next.getTime()).toBeGreaterThan(before);
    expect([next.getUTCDay(), next.getUTCHours(), next.getUTCMinutes()]).toEqual([1, 8, 30]);
    const { campaign: read } = await service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: campaign!.id });
    expect(read).toEqual(campaign);
  });

  it('tells an empty variant list from none', async () => {
    const empty = await create({ variants: { variants: [] } });
    expect(empty.variants).toEqual({ variants: [] });
    expect((await service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: empty.id })).campaign?.variants).toEqual({ variants: [] });
    expect((await create()).variants).toBeUndefined();
  });

  it('reports every semantic failure at once', async () => {
    const result = await failure(create({ name: '', sendPriority: -1, scheduleCron: 'every day', mssqlQuery: 'DELETE FROM x' }));
    expect(result.code).toBe(status.INVALID_ARGUMENT);
    expect(result.violations.map((v) => [v.loc, v.type])).toEqual([
      [['name'], 'string_too_short'],
      [['send_priority'], 'greater_than_equal'],
      [['schedule_cron'], 'value_error'],
      [['mssql_query'], 'value_error'],
    ]);
  });

  it('refuses header-breaking text and over 20 variants itself, not only behind the gateway', async () => {
    const variants = (n: number) => ({ variants: Array.from({ length: n }, (_, i) => ({ templateId: `t-${i}` })) });
    const result = await failure(create({ fromName: 'News\r\nBcc: all@example.com', variants: variants(21) }));
    expect(result.code).toBe(status.INVALID_ARGUMENT);
    expect(result.violations.map((v) => [v.loc, v.type])).toEqual([
      [['from_name'], 'string_pattern_mismatch'],
      [['variants'], 'too_long'],
    ]);
    const original = await create({ variants: variants(20) });
    expect(original.variants?.variants).toHaveLength(20);
    expect(await failure(update(original.id, ['name'], { name: 'a\nb' }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['name'], type: 'string_pattern_mismatch' }],
    });
  });

  it('keeps provider_category_id unique across workspaces', async () => {
    await create({ providerCategoryId: 'shared-category' });
    expect(await failure(create({ workspaceId: WORKSPACE_B, providerCategoryId: 'shared-category' }))).toEqual({
      code: status.ALREADY_EXISTS,
      details: 'Another campaign already uses this provider_category_id',
      violations: [],
    });
  });

  it('hides campaigns of other workspaces', async () => {
    const campaign = await create();
    expect(await failure(service.rpc('getCampaign', { workspaceId: WORKSPACE_B, id: campaign.id }))).toEqual(notFound);
    expect(await failure(service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: MISSING_UUID }))).toEqual(notFound);
    expect(await failure(service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: 'not-a-uuid' }))).toEqual(notFound);
    expect(await failure(service.rpc('deleteCampaign', { workspaceId: WORKSPACE_B, id: campaign.id }))).toEqual(notFound);
    expect(
      await failure(
        service.rpc('updateCampaign', {
          workspaceId: WORKSPACE_B,
          id: campaign.id,
          updateMask: ['name'],
          campaign: { workspaceId: '', name: 'x', recipientSource: 0, deliveryMode: 0 },
        }),
      ),
    ).toEqual(notFound);
  });
});

describe('list', () => {
  const workspaceId = '0b6b5b8e-8a55-4c0e-9d3c-0000000000aa';

  beforeAll(async () => {
    for (const [name, isActive] of [
      ['Alpha news', true],
      ['Beta NEWS', false],
      ['Gamma', true],
      ['100% off_now', true],
    ] as const) {
      await create({ workspaceId, name, isActive });
    }
  });

  it('pages newest first', async () => {
    const first = await service.rpc('listCampaigns', { workspaceId, ids: [], page: { page: 1, pageSize: 3 } });
    expect(first.campaigns.map((c) => c.name)).toEqual(['100% off_now', 'Gamma', 'Beta NEWS']);
    expect(first.page).toEqual({ total: 4, page: 1, pageSize: 3 });
    const second = await service.rpc('listCampaigns', { workspaceId, ids: [], page: { page: 2, pageSize: 3 } });
    expect(second.campaigns.map((c) => c.name)).toEqual(['Alpha news']);
    expect((await service.rpc('listCampaigns', { workspaceId, ids: [] })).page).toEqual({ total: 4, page: 1, pageSize: 50 });
  });

  it('filters on is_active and a case-insensitive name substring, wildcards taken literally', async () => {
    const names = async (request: Partial<campaignV1.ListCampaignsRequest>) =>
      (await service.rpc('listCampaigns', { workspaceId, ids: [], ...request })).campaigns.map((c) => c.name);
    expect(await names({ isActive: false })).toEqual(['Beta NEWS']);
    expect(await names({ nameQuery: 'news' })).toEqual(['Beta NEWS', 'Alpha news']);
    expect(await names({ nameQuery: 'news', isActive: true })).toEqual(['Alpha news']);
    expect(await names({ nameQuery: '0%' })).toEqual(['100% off_now']);
    expect(await names({ nameQuery: '_' })).toEqual(['100% off_now']);
    expect(await names({ workspaceId: WORKSPACE_B, nameQuery: 'news' })).toEqual([]);
    expect(await names({ nameQuery: 'news\u0000' })).toEqual([]);
  });

  it('lists the campaigns of given ids only, ignoring ids of no campaign of the workspace', async () => {
    const all = (await service.rpc('listCampaigns', { workspaceId, ids: [] })).campaigns;
    const [gamma, alpha] = [all.find((c) => c.name === 'Gamma')!, all.find((c) => c.name === 'Alpha news')!];
    const listed = await service.rpc('listCampaigns', {
      workspaceId,
      ids: [alpha.id.toUpperCase(), gamma.id, 'not-a-uuid', '0b6b5b8e-8a55-4c0e-9d3c-00000000ffff'],
    });
    expect(listed.campaigns.map((c) => c.name)).toEqual(['Gamma', 'Alpha news']);
    expect(listed.page?.total).toBe(2);
    expect((await service.rpc('listCampaigns', { workspaceId: WORKSPACE_B, ids: [alpha.id] })).campaigns).toEqual([]);
  });
});

describe('update', () => {
  it('writes only the named fields; a named nullable field without a value is cleared', async () => {
    const { campaign: original } = await service.rpc('createCampaign', {
      workspaceId: FULL_INPUT.workspaceId,
      campaign: { ...FULL_INPUT, providerCategoryId: 'update-1' },
    });
    const { campaign } = await update(original!.id, ['name', 'description', 'schedule_cron', 'csv_account_ids', 'template_id', 'ab_test'], {
      name: 'Renamed',
    });
    expect(campaign).toEqual({
      ...original,
      name: 'Renamed',
      description: undefined,
      scheduleCron: undefined,
      csvAccountIds: undefined,
      templateId: undefined,
      abTest: undefined,
      nextRunAt: undefined,
      updatedAt: expect.any(Date),
    });
    expect(campaign!.updatedAt!.getTime()).toBeGreaterThan(original!.updatedAt!.getTime());
  });

  it('leaves fields that cannot be null unchanged when named without a value', async () => {
    const original = await create({
      name: 'Keep',
      isActive: false,
      sendPriority: 5,
      recipientSource: RecipientSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
    });
    const { campaign } = await update(original.id, [
      'workspace_id',
      'name',
      'is_active',
      'send_priority',
      'recipient_source',
      'delivery_mode',
    ]);
    expect(campaign).toEqual({ ...original, updatedAt: expect.any(Date) });
  });

  it('adds, rewrites and removes variants in one update, keeping the list order', async () => {
    const original = await create({
      variants: { variants: [{ templateId: 'keep' }, { templateId: 'drop' }, { templateId: 'rewrite', label: 'old' }] },
    });
    const [keep, , rewrite] = original.variants!.variants;
    const { campaign } = await update(original.id, ['variants'], {
      variants: {
        variants: [
          { templateId: 'new', weight: 5 },
          { id: rewrite.id, templateId: 'rewritten', weight: 2, isActive: false },
          { id: keep.id, templateId: 'keep', label: 'kept' },
        ],
      },
    });
    expect(campaign!.variants).toEqual({
      variants: [
        { id: expect.any(String), templateId: 'new', weight: 5, isActive: true },
        { id: rewrite.id, templateId: 'rewritten', weight: 2, label: 'old', isActive: false },
        { id: keep.id, templateId: 'keep', weight: 1, label: 'kept', isActive: true },
      ],
    });
    expect(await service.db('campaign_variants').where({ campaign_id: original.id }).count({ n: '*' })).toEqual([{ n: '3' }]);

    expect((await update(original.id, ['variants'], { variants: { variants: [] } })).campaign!.variants).toEqual({ variants: [] });
    expect((await update(original.id, ['variants'])).campaign!.variants).toBeUndefined();
    expect(await service.db('campaign_variants').where({ campaign_id: original.id })).toEqual([]);
  });

  it('changes only the fields a variant item with an id names, as the campaign fields: null clears the label only', async () => {
    const original = await create({
      variants: {
        variants: [
          { templateId: 'a', weight: 7, label: 'A', isActive: false },
          { templateId: 'b', weight: 3, label: 'B' },
        ],
      },
    });
    const [a, b] = original.variants!.variants;
    const { campaign } = await update(original.id, ['variants'], {
      variants: {
        variants: [
          { id: a.id, weight: 9, updateMask: ['weight'] },
          // Named without a value: null, which clears the label and leaves the rest.
          { id: b.id, updateMask: ['template_id', 'weight', 'label', 'is_active'] },
        ],
      },
    });
    expect(campaign!.variants).toEqual({
      variants: [
        { id: a.id, templateId: 'a', weight: 9, label: 'A', isActive: false },
        { id: b.id, templateId: 'b', weight: 3, isActive: true },
      ],
    });
  });

  it('requires a template_id of a new variant item, naming the item', async () => {
    const original = await create();
    expect(
      await failure(update(original.id, ['variants'], { variants: { variants: [{ weight: 2, updateMask: ['weight', 'label'] }] } })),
    ).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['variants', 0, 'template_id'], type: 'missing', msg: 'Field required', input: { weight: 2, label: null } }],
    });
    expect(
      await failure(
        update(original.id, ['variants'], { variants: { variants: [{ templateId: 't', updateMask: ['template_id', 'colour'] }] } }),
      ),
    ).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [
        { loc: ['variants', 0, 'update_mask'], type: 'value_error', msg: "Value error, 'colour' is not a variant field", input: 'colour' },
      ],
    });
  });

  it('refuses variant ids of another campaign, changing nothing', async () => {
    const mine = await create({ variants: { variants: [{ templateId: 'mine' }] } });
    const theirs = await create({ variants: { variants: [{ templateId: 'theirs' }] } });
    const foreignId = theirs.variants!.variants[0].id;
    expect(
      await failure(
        update(mine.id, ['name', 'variants'], {
          name: 'Changed',
          variants: { variants: [{ templateId: 'x' }, { id: foreignId, templateId: 'y' }] },
        }),
      ),
    ).toEqual({
      code: status.INVALID_ARGUMENT,
      details: `variants.1.id: Value error, variant ${foreignId} does not belong to this campaign`,
      violations: [
        {
          loc: ['variants', 1, 'id'],
          type: 'value_error',
          msg: `Value error, variant ${foreignId} does not belong to this campaign`,
          input: foreignId,
          ctx: { error: {} },
        },
      ],
    });
    expect((await service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: mine.id })).campaign).toEqual(mine);
  });

  it('refuses a body workspace_id other than the one acted in', async () => {
    const campaign = await create();
    expect(await failure(update(campaign.id, ['workspace_id'], { workspaceId: WORKSPACE_B }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['workspace_id'], type: 'value_error', msg: 'Value error, workspace_id must match the workspace_id header' }],
    });
    expect((await update(campaign.id, ['workspace_id'], { workspaceId: WORKSPACE_A.toUpperCase() })).campaign?.workspaceId).toBe(
      WORKSPACE_A,
    );
  });

  it('refuses unknown mask paths, a taken category and an absent campaign', async () => {
    const campaign = await create({ providerCategoryId: 'update-taken-1' });
    const other = await create({ providerCategoryId: 'update-taken-2' });
    expect(await failure(update(campaign.id, ['colour']))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['update_mask'], input: 'colour' }],
    });
    expect(await failure(update(other.id, ['provider_category_id'], { providerCategoryId: 'update-taken-1' }))).toMatchObject({
      code: status.ALREADY_EXISTS,
    });
    expect(await failure(update(MISSING_UUID, ['name'], { name: 'x' }))).toEqual(notFound);
  });

  it('never mixes the variants of two concurrent updates', async () => {
    const campaign = await create({ deliveryMode: DeliveryMode.DELIVERY_MODE_VARIANTS, variants: { variants: [{ templateId: 'seed' }] } });
    const list = (prefix: string, n: number) => ({
      variants: Array.from({ length: n }, (_, i) => ({ templateId: `${prefix}-${i}` })),
    });
    for (let round = 0; round < 20; round++) {
      const [a, b] = await Promise.all([
        update(campaign.id, ['variants'], { variants: list('a', 3) }),
        update(campaign.id, ['variants'], { variants: list('b', 2) }),
      ]);
      for (const answer of [a, b]) {
        const prefixes = new Set(answer.campaign!.variants!.variants.map((v) => v.templateId.split('-')[0]));
        expect(prefixes.size).toBe(1);
      }
      const stored: { template_id: string }[] = await service.db('campaign_variants').where({ campaign_id: campaign.id });
      const prefixes = new Set(stored.map((row) => row.template_id.split('-')[0]));
      expect(prefixes.size).toBe(1);
      expect(stored).toHaveLength(prefixes.has('a') ? 3 : 2);
    }
  });
});

describe('delete', () => {
  it('deletes a campaign with its variants', async () => {
    const campaign = await create({ variants: { variants: [{ templateId: 't' }] } });
    expect(await service.rpc('deleteCampaign', { workspaceId: WORKSPACE_A, id: campaign.id })).toEqual({});
    expect(await failure(service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: campaign.id }))).toEqual(notFound);
    expect(await service.db('campaign_variants').where({ campaign_id: campaign.id })).toEqual([]);
    expect(await failure(service.rpc('deleteCampaign', { workspaceId: WORKSPACE_A, id: campaign.id }))).toEqual(notFound);
  });
});

describe('categories and health', () => {
  it("resolves provider category ids across workspaces with their campaigns' variants, leaving unknown ones out", async () => {
    const a = await create({ providerCategoryId: 'resolve-a' });
    const b = await create({
      workspaceId: WORKSPACE_B,
      providerCategoryId: 'resolve-b',
      variants: { variants: [{ templateId: 'one' }, { templateId: 'two', isActive: false }] },
    });
    const { matches } = await service.rpc('resolveCategories', { providerCategoryIds: ['resolve-a', 'resolve-b', 'unknown'] });
    expect(matches).toEqual(
      expect.arrayContaining([
        { providerCategoryId: 'resolve-a', campaignId: a.id, workspaceId: WORKSPACE_A, variantIds: [] },
        {
          providerCategoryId: 'resolve-b',
          campaignId: b.id,
          workspaceId: WORKSPACE_B,
          variantIds: expect.arrayContaining(b.variants!.variants.map((variant) => variant.id)),
        },
      ]),
    );
    expect(matches).toHaveLength(2);
    expect(matches.find((match) => match.campaignId === b.id)!.variantIds).toHaveLength(2);
    expect((await service.rpc('resolveCategories', { providerCategoryIds: [] })).matches).toEqual([]);
  });

  it('answers grpc.health.v1 for the process and for "postgres"', async () => {
    const health = createHealthClient(service.address);
    try {
      await expect(health.check('')).resolves.toBeUndefined();
      await expect(health.check('postgres')).resolves.toBeUndefined();
    } finally {
      health.close();
    }
  });
});

describe('ab_test', () => {
  it('takes its defaults for unset members, and only with delivery_mode variants, on create and update', async () => {
    const abTest = { waitMinutes: 15 };
    expect((await create({ deliveryMode: DeliveryMode.DELIVERY_MODE_VARIANTS, abTest })).abTest).toEqual({
      testFraction: 0.2,
      waitMinutes: 15,
      metric: 'open_rate',
    });
    const refused = await failure(create({ abTest }));
    expect(refused.code).toBe(status.INVALID_ARGUMENT);
    expect(refused.violations).toEqual([expect.objectContaining({ loc: ['ab_test'], type: 'value_error' })]);
    const campaign = await create({ deliveryMode: DeliveryMode.DELIVERY_MODE_VARIANTS, abTest });
    const switched = await failure(update(campaign.id, ['delivery_mode'], { deliveryMode: DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE }));
    expect(switched.code).toBe(status.INVALID_ARGUMENT);
    const { campaign: read } = await service.rpc('getCampaign', { workspaceId: WORKSPACE_A, id: campaign.id });
    expect(read?.deliveryMode).toBe(DeliveryMode.DELIVERY_MODE_VARIANTS);
  });

  it('bounds its members in the service too', async () => {
    const refused = await failure(
      create({ deliveryMode: DeliveryMode.DELIVERY_MODE_VARIANTS, abTest: { testFraction: 0.001, waitMinutes: 20_000, metric: 'x' } }),
    );
    expect(refused.violations.map((violation) => [violation.loc, violation.type])).toEqual([
      [['ab_test', 'test_fraction'], 'greater_than_equal'],
      [['ab_test', 'wait_minutes'], 'less_than_equal'],
      [['ab_test', 'metric'], 'enum'],
    ]);
  });
});
