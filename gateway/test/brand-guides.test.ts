import { requestJson, startGatewayStack, type GatewayStack } from './support/stack';
import type { JsonObject } from './support/json';

/**
 * /brand-guides/ end to end: the gateway's whole request pipeline
 * (in-process, DEV_AUTH_ENABLED=1) against the real identity and brand-guide
 * processes started by startStack on a private database.
 */

let gateway: GatewayStack;
let gatewayUrl: string;
let workspaceA: string;
let workspaceB: string;

beforeAll(async () => {
  gateway = await startGatewayStack({
    label: 'brand-guides',
    processes: ['identity', 'brand-guide'],
    workspaces: ['Guides A', 'Guides B'],
  });
  gatewayUrl = gateway.url;
  [workspaceA, workspaceB] = gateway.workspaces;
}, 120_000);

afterAll(async () => {
  await gateway?.close();
});

async function api(method: string, route: string, body?: unknown, workspace = workspaceA) {
  return requestJson(gatewayUrl, method, route, body, workspace);
}

async function create(fields: JsonObject = {}, workspace = workspaceA): Promise<JsonObject> {
  const answer = await api('POST', '/brand-guides/', { name: 'Guide', ...fields }, workspace);
  expect(answer.status).toBe(201);
  return answer.body;
}

const TIMESTAMP = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

it('creates with defaults: active, no description, no prompt', async () => {
  const answer = await api('POST', '/brand-guides/', { name: 'House style' });
  expect(answer.status).toBe(201);
  expect(answer.body).toEqual({
    id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    workspace_id: workspaceA,
    name: 'House style',
    description: null,
    prompt_content: null,
    is_active: true,
    created_at: TIMESTAMP,
    updated_at: answer.body.created_at,
  });
  expect(await api('GET', `/brand-guides/${answer.body.id}`)).toMatchObject({ status: 200, body: answer.body });
});

it('round-trips every field, with a prompt of 100 000 characters', async () => {
  const input = { name: 'Full', description: 'How we sound', prompt_content: `Be brief. ${'x'.repeat(99_990)}`, is_active: false };
  const guide = await create(input);
  expect(guide).toMatchObject(input);
  expect((await api('GET', `/brand-guides/${guide.id}`)).body).toEqual(guide);
});

it('applies the PUT rules: omitted unchanged, null clears description and prompt_content, null leaves name and is_active', async () => {
  const guide = await create({ name: 'Before', description: 'd', prompt_content: 'p', is_active: false });
  const renamed = await api('PUT', `/brand-guides/${guide.id}`, { name: 'After' });
  expect(renamed).toMatchObject({ status: 200, body: { ...guide, name: 'After', updated_at: TIMESTAMP } });
  expect(renamed.body.updated_at > guide.updated_at).toBe(true);

  const nulls = await api('PUT', `/brand-guides/${guide.id}`, { name: null, is_active: null, description: null, prompt_content: null });
  expect(nulls).toMatchObject({
    status: 200,
    body: { ...guide, name: 'After', description: null, prompt_content: null, updated_at: TIMESTAMP },
  });

  const activated = await api('PUT', `/brand-guides/${guide.id}`, { is_active: true, description: 'again' });
  expect(activated.body).toMatchObject({ name: 'After', is_active: true, description: 'again', prompt_content: null });
  const stillActive = await api('PUT', `/brand-guides/${guide.id}`, { is_active: null });
  expect(stillActive).toMatchObject({ status: 200, body: { ...activated.body, updated_at: TIMESTAMP } });
});

it('validates name and prompt_content with exact 422 entries', async () => {
  expect(await api('POST', '/brand-guides/', { description: 'no name' })).toMatchObject({
    status: 422,
    body: { detail: [{ type: 'missing', loc: ['body', 'name'], msg: 'Field required', input: { description: 'no name' } }] },
  });
  expect(await api('POST', '/brand-guides/', { name: '' })).toMatchObject({
    status: 422,
    body: {
      detail: [
        {
          type: 'string_too_short',
          loc: ['body', 'name'],
          msg: 'String should have at least 1 character',
          input: '',
          ctx: { min_length: 1 },
        },
      ],
    },
  });
  const guide = await create();
  const long = 'p'.repeat(100_001);
  expect(await api('PUT', `/brand-guides/${guide.id}`, { name: 'n'.repeat(201), prompt_content: long, is_active: 'maybe' })).toMatchObject({
    status: 422,
    body: {
      detail: [
        {
          type: 'string_too_long',
          loc: ['body', 'name'],
          msg: 'String should have at most 200 characters',
          input: 'n'.repeat(201),
          ctx: { max_length: 200 },
        },
        {
          type: 'string_too_long',
          loc: ['body', 'prompt_content'],
          msg: 'String should have at most 100000 characters',
          input: long,
          ctx: { max_length: 100_000 },
        },
        {
          type: 'bool_parsing',
          loc: ['body', 'is_active'],
          msg: 'Input should be a valid boolean, unable to interpret input',
          input: 'maybe',
        },
      ],
    },
  });
});

it('reports a NUL character with the other failing fields', async () => {
  expect(await api('POST', '/brand-guides/', { name: 'a\u0000b', is_active: 'x' })).toMatchObject({
    status: 422,
    body: {
      detail: [
        {
          type: 'value_error',
          loc: ['body', 'name'],
          msg: 'Value error, text must not contain NUL (\\u0000) characters',
          input: 'a\u0000b',
          ctx: { error: {} },
        },
        { type: 'bool_parsing', loc: ['body', 'is_active'], msg: 'Input should be a valid boolean, unable to interpret input', input: 'x' },
      ],
    },
  });
});

it('lists newest first, paged, filtered', async () => {
  for (const [name, is_active] of [
    ['Formal voice', true],
    ['Casual VOICE', false],
    ['Legal', true],
  ] as const) {
    await create({ name, is_active }, workspaceB);
  }
  const names = async (query: string) =>
    (await api('GET', `/brand-guides/?${query}`, undefined, workspaceB)).body.items.map((g: JsonObject) => g.name);
  expect(await names('')).toEqual(['Legal', 'Casual VOICE', 'Formal voice']);
  expect((await api('GET', '/brand-guides/?page=2&page_size=2', undefined, workspaceB)).body).toEqual({
    items: [expect.objectContaining({ name: 'Formal voice' })],
    total: 3,
    page: 2,
    page_size: 2,
  });
  expect(await names('is_active=false')).toEqual(['Casual VOICE']);
  expect(await names('q=VOICE&is_active=true')).toEqual(['Formal voice']);
  expect((await api('GET', '/brand-guides', undefined, workspaceB)).status).toBe(307);
});

it('hides guides of another workspace and deletes with 204', async () => {
  const guide = await create();
  const notFound = { status: 404, body: { detail: 'Brand guide not found' } };
  expect(await api('GET', `/brand-guides/${guide.id}`, undefined, workspaceB)).toMatchObject(notFound);
  expect(await api('PUT', `/brand-guides/${guide.id}`, { name: 'x' }, workspaceB)).toMatchObject(notFound);
  expect(await api('DELETE', `/brand-guides/${guide.id}`, undefined, workspaceB)).toMatchObject(notFound);
  expect((await api('DELETE', `/brand-guides/${guide.id}`)).status).toBe(204);
  expect(await api('GET', `/brand-guides/${guide.id}`)).toMatchObject(notFound);
});
