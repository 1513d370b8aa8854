import { createHealthClient, EnvReader } from '@mail/common';
import type { brandguideV1 } from '@mail/proto';
import { raceCreatesWithClose } from '@mail/local';
import { readConfig } from '../src/config';
import { MISSING_UUID, WORKSPACE_A, WORKSPACE_B, failure, startBrandGuideService, status, type BrandGuideService } from './harness';

let service: BrandGuideService;

beforeAll(async () => {
  service = await startBrandGuideService();
});

afterAll(async () => {
  await service.close();
});

async function create(brandGuide: brandguideV1.BrandGuideInput = { name: 'Voice' }, workspaceId = WORKSPACE_A) {
  return (await service.rpc('createBrandGuide', { workspaceId, brandGuide })).brandGuide!;
}

function update(id: string, updateMask: string[], brandGuide: brandguideV1.BrandGuideInput = {}) {
  return service.rpc('updateBrandGuide', { workspaceId: WORKSPACE_A, id, updateMask, brandGuide });
}

const notFound = { code: status.NOT_FOUND, details: 'Brand guide not found', violations: [] };

it('defaults DATABASE_URL', () => {
  expect(readConfig(new EnvReader({})).databaseUrl).toBe('postgres://mail:mail@127.0.0.1:25432/mail');
});

describe('create and get', () => {
  it('defaults to active with no description or prompt', async () => {
    const guide = await create({ name: 'Plain' });
    expect(guide).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      workspaceId: WORKSPACE_A,
      name: 'Plain',
      isActive: true,
      createdAt: expect.any(Date),
      updatedAt: guide.createdAt,
    });
    expect((await service.rpc('getBrandGuide', { workspaceId: WORKSPACE_A, id: guide.id })).brandGuide).toEqual(guide);
  });

  it('keeps every field, including a 100 000 character prompt', async () => {
    const input = { name: 'Full', description: 'Tone of voice', promptContent: 'p'.repeat(100_000), isActive: false };
    const guide = await create(input);
    expect(guide).toMatchObject(input);
    expect((await service.rpc('getBrandGuide', { workspaceId: WORKSPACE_A, id: guide.id })).brandGuide).toEqual(guide);
  });

  it('validates the name and the prompt length, all at once', async () => {
    expect(await failure(create({ name: '', promptContent: 'p'.repeat(100_001) }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [
        { loc: ['name'], type: 'string_too_short', msg: 'String should have at least 1 character', input: '', ctx: { min_length: 1 } },
        // Too big to echo through the gRPC trailer: the input is left out rather than stalling the channel.
        {
          loc: ['prompt_content'],
          type: 'string_too_long',
          msg: 'String should have at most 100000 characters',
          input: null,
          ctx: { max_length: 100_000 },
        },
      ],
    });
    expect(await failure(create({}))).toMatchObject({ violations: [{ loc: ['name'], type: 'missing', msg: 'Field required' }] });
    expect(await failure(create({ name: 'n', description: 'a\u0000b' }))).toMatchObject({
      violations: [
        {
          loc: ['description'],
          type: 'value_error',
          msg: 'Value error, text must not contain NUL (\\u0000) characters',
          input: 'a\u0000b',
        },
      ],
    });
    expect(await failure(create({ name: 'n'.repeat(201) }))).toMatchObject({
      violations: [{ loc: ['name'], type: 'string_too_long', ctx: { max_length: 200 } }],
    });
  });

  it('hides guides of other workspaces', async () => {
    const guide = await create();
    expect(await failure(service.rpc('getBrandGuide', { workspaceId: WORKSPACE_B, id: guide.id }))).toEqual(notFound);
    expect(await failure(service.rpc('getBrandGuide', { workspaceId: WORKSPACE_A, id: 'nope' }))).toEqual(notFound);
    expect(
      await failure(
        service.rpc('updateBrandGuide', { workspaceId: WORKSPACE_B, id: guide.id, updateMask: ['name'], brandGuide: { name: 'x' } }),
      ),
    ).toEqual(notFound);
    expect(await failure(service.rpc('deleteBrandGuide', { workspaceId: WORKSPACE_B, id: guide.id }))).toEqual(notFound);
  });
});

describe('update', () => {
  it('writes the named fields; null clears description and prompt_content and leaves name and is_active', async () => {
    const original = await create({ name: 'Before', description: 'd', promptContent: 'p', isActive: false });
    const { brandGuide } = await update(original.id, ['name', 'is_active', 'description', 'prompt_content']);
    expect(brandGuide).toEqual({ ...original, description: undefined, promptContent: undefined, updatedAt: expect.any(Date) });
    expect(brandGuide!.updatedAt!.getTime()).toBeGreaterThan(original.updatedAt!.getTime());

    const renamed = await update(original.id, ['name', 'is_active'], { name: 'After', isActive: true });
    expect(renamed.brandGuide).toMatchObject({ name: 'After', isActive: true });
    expect((await update(original.id, [])).brandGuide).toMatchObject({ name: 'After', isActive: true });
  });

  it('validates what it writes and refuses unknown fields and absent guides', async () => {
    const guide = await create();
    expect(await failure(update(guide.id, ['name'], { name: '' }))).toMatchObject({
      violations: [{ loc: ['name'], type: 'string_too_short' }],
    });
    expect(await failure(update(guide.id, ['colour']))).toMatchObject({ violations: [{ loc: ['update_mask'], input: 'colour' }] });
    expect(await failure(update(MISSING_UUID, ['name'], { name: 'x' }))).toEqual(notFound);
  });
});

describe('list and delete', () => {
  const workspaceId = '0b6b5b8e-8a55-4c0e-9d3c-0000000000bb';

  beforeAll(async () => {
    for (const [name, isActive] of [
      ['Formal voice', true],
      ['Casual VOICE', false],
      ['Legal', true],
    ] as const) {
      await create({ name, isActive }, workspaceId);
    }
  });

  it('pages newest first and filters', async () => {
    const names = async (request: Partial<brandguideV1.ListBrandGuidesRequest>) =>
      (await service.rpc('listBrandGuides', { workspaceId, ...request })).brandGuides.map((g) => g.name);
    expect(await names({})).toEqual(['Legal', 'Casual VOICE', 'Formal voice']);
    expect(await names({ page: { page: 2, pageSize: 2 } })).toEqual(['Formal voice']);
    expect((await service.rpc('listBrandGuides', { workspaceId, page: { page: 2, pageSize: 2 } })).page).toEqual({
      total: 3,
      page: 2,
      pageSize: 2,
    });
    expect(await names({ isActive: true })).toEqual(['Legal', 'Formal voice']);
    expect(await names({ nameQuery: 'voice', isActive: false })).toEqual(['Casual VOICE']);
    expect(await names({ nameQuery: 'voice\u0000' })).toEqual([]);
  });

  it('deletes', async () => {
    const guide = await create();
    expect(await service.rpc('deleteBrandGuide', { workspaceId: WORKSPACE_A, id: guide.id })).toEqual({});
    expect(await failure(service.rpc('getBrandGuide', { workspaceId: WORKSPACE_A, id: guide.id }))).toEqual(notFound);
    expect(await failure(service.rpc('deleteBrandGuide', { workspaceId: WORKSPACE_A, id: guide.id }))).toEqual(notFound);
  });
});

describe('closing a workspace (its deletion)', () => {
  it('deletes its brand guides only, refuses new ones there, and is idempotent', async () => {
    const closing = crypto.randomUUID();
    await create({ name: 'Doomed' }, closing);
    await create({ name: 'Doomed too' }, closing);
    const kept = await create({ name: 'Kept' }, WORKSPACE_B);

    expect(await service.rpc('closeWorkspace', { workspaceId: closing })).toEqual({ deletedBrandGuides: 2 });
    expect((await service.rpc('listBrandGuides', { workspaceId: closing })).page).toMatchObject({ total: 0 });
    expect(await failure(create({ name: 'Late' }, closing))).toMatchObject({ code: status.NOT_FOUND, details: 'Workspace not found' });
    expect(await service.rpc('closeWorkspace', { workspaceId: closing })).toEqual({ deletedBrandGuides: 0 });
    expect((await service.rpc('getBrandGuide', { workspaceId: WORKSPACE_B, id: kept.id })).brandGuide).toEqual(kept);
  });

  it('leaves nothing behind when creates race the closing', async () => {
    const closing = crypto.randomUUID();
    await create({ name: 'First' }, closing);
    const race = await raceCreatesWithClose(
      40,
      30,
      () => create({ name: 'Racing' }, closing),
      () => service.rpc('closeWorkspace', { workspaceId: closing }),
    );
    expect(race.unexpected).toEqual([]);
    expect(race.closed.deletedBrandGuides).toBe(1 + race.created);
    expect((await service.rpc('listBrandGuides', { workspaceId: closing })).page).toMatchObject({ total: 0 });
  });
});

it('answers grpc.health.v1 for "postgres"', async () => {
  const health = createHealthClient(service.address);
  try {
    await expect(health.check('postgres')).resolves.toBeUndefined();
  } finally {
    health.close();
  }
});
