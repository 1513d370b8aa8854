import { requestJson, startGatewayStack, type GatewayStack } from './support/stack';
import type { JsonObject } from './support/json';

/**
 * /templates/ end to end: the gateway's whole request pipeline (in-process,
 * DEV_AUTH_ENABLED=1) against the real identity and campaign processes
 * (the campaign service serves campaign.v1's TemplateService) on a private database.
 */

let gateway: GatewayStack;
let workspaceA: string;
let workspaceB: string;

beforeAll(async () => {
  gateway = await startGatewayStack({
    label: 'templates',
    processes: ['identity', 'campaign'],
    workspaces: ['Templates A', 'Templates B'],
  });
  [workspaceA, workspaceB] = gateway.workspaces;
}, 120_000);

afterAll(async () => {
  await gateway?.close();
});

const api = (method: string, route: string, body?: unknown, workspace = workspaceA) =>
  requestJson(gateway.url, method, route, body, workspace);

const WELCOME = { name: 'Welcome', subject: 'Hello {{first_name}}', html: '<p>Hi {{first_name}}</p>' };

async function create(fields: JsonObject = {}, workspace = workspaceA): Promise<JsonObject> {
  const answer = await api('POST', '/templates/', { ...WELCOME, ...fields }, workspace);
  expect(answer.status).toBe(201);
  return answer.body;
}

const TIMESTAMP = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

it('creates with text null by default, reads it back, and deletes with 204', async () => {
  const answer = await api('POST', '/templates/', WELCOME);
  expect(answer).toMatchObject({
    status: 201,
    body: {
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      workspace_id: workspaceA,
      ...WELCOME,
      text: null,
      created_at: TIMESTAMP,
      updated_at: answer.body.created_at,
    },
  });
  expect(Object.keys(answer.body).sort()).toEqual(['created_at', 'html', 'id', 'name', 'subject', 'text', 'updated_at', 'workspace_id']);
  expect(await api('GET', `/templates/${answer.body.id}`)).toMatchObject({ status: 200, body: answer.body });
  expect((await api('DELETE', `/templates/${answer.body.id}`)).status).toBe(204);
  expect(await api('GET', `/templates/${answer.body.id}`)).toMatchObject({ status: 404, body: { detail: 'Template not found' } });
});

it('answers 422 for missing fields, a bad name and a NUL, then for templates that do not compile', async () => {
  expect(await api('POST', '/templates/', { html: '<p>x</p>' })).toMatchObject({
    status: 422,
    body: {
      detail: [
        { type: 'missing', loc: ['body', 'name'], msg: 'Field required', input: { html: '<p>x</p>' } },
        { type: 'missing', loc: ['body', 'subject'], msg: 'Field required', input: { html: '<p>x</p>' } },
      ],
    },
  });
  // The gateway's schema first: the name's length, a NUL (templates are not compiled in the gateway).
  expect(await api('POST', '/templates/', { name: 'n'.repeat(201), subject: 'Hi {{name', text: 'a\u0000b' })).toMatchObject({
    status: 422,
    body: {
      detail: [
        { type: 'string_too_long', loc: ['body', 'name'], msg: 'String should have at most 200 characters', ctx: { max_length: 200 } },
        { type: 'value_error', loc: ['body', 'text'], msg: 'Value error, text must not contain NUL (\\u0000) characters' },
      ],
    },
  });
  // Then the campaign service's compile check, every template text at once.
  const answer = await api('POST', '/templates/', { name: 'Broken', subject: 'Hi {{name', html: '{{#each items}}<li>', text: '{{#if}' });
  expect(answer.status).toBe(422);
  expect(answer.body.detail).toEqual([
    {
      type: 'value_error',
      loc: ['body', 'subject'],
      msg: expect.stringMatching(/^Value error, template does not compile: Parse error on line 1:/),
      input: 'Hi {{name',
      ctx: { error: {} },
    },
    {
      type: 'value_error',
      loc: ['body', 'html'],
      msg: expect.stringMatching(/^Value error, template does not compile: /),
      input: '{{#each items}}<li>',
      ctx: { error: {} },
    },
    {
      type: 'value_error',
      loc: ['body', 'text'],
      msg: expect.stringMatching(/^Value error, template does not compile: /),
      input: '{{#if}',
      ctx: { error: {} },
    },
  ]);
  expect(await api('POST', '/templates/', { ...WELCOME, name: 'a\u0000b' })).toMatchObject({
    status: 422,
    body: { detail: [{ type: 'value_error', loc: ['body', 'name'], msg: 'Value error, text must not contain NUL (\\u0000) characters' }] },
  });
});

it('needs html or text: a create with neither, or an update that clears the last one, answers 422 at the body', async () => {
  const neither = await api('POST', '/templates/', { name: 'Empty', subject: 'S', html: null });
  expect(neither).toMatchObject({
    status: 422,
    body: { detail: [{ type: 'value_error', loc: ['body'], msg: 'Value error, at least one of html and text is required' }] },
  });
  expect(await api('POST', '/templates/', { name: 'Blank', subject: 'S', html: '', text: '' })).toMatchObject({
    status: 422,
    body: { detail: [{ type: 'value_error', loc: ['body'] }] },
  });
  const template = await create();
  for (const html of [null, '']) {
    expect(await api('PUT', `/templates/${template.id}`, { html })).toMatchObject({ status: 422, body: { detail: [{ loc: ['body'] }] } });
  }
  expect((await api('GET', `/templates/${template.id}`)).body).toEqual(template);
});

it('applies the PUT rules: omitted unchanged, null clears html or text, null leaves name and subject', async () => {
  const template = await create({ text: 'Hi {{first_name}}' });
  const updated = await api('PUT', `/templates/${template.id}`, { name: null, subject: null, html: null, text: 'Plain {{first_name}}' });
  expect(updated).toMatchObject({
    status: 200,
    body: { ...template, html: null, text: 'Plain {{first_name}}', updated_at: TIMESTAMP },
  });
  expect(updated.body.updated_at > template.updated_at).toBe(true);
  const renamed = await api('PUT', `/templates/${template.id}`, { name: 'Renamed' });
  expect(renamed.body).toMatchObject({ name: 'Renamed', subject: WELCOME.subject, html: null, text: 'Plain {{first_name}}' });
  expect(await api('PUT', `/templates/${template.id}`, { subject: '{{#if}}' })).toMatchObject({
    status: 422,
    body: { detail: [{ type: 'value_error', loc: ['body', 'subject'], input: '{{#if}}' }] },
  });
});

it('lists newest first, paged, filtered by name, and never shows another workspace’s templates', async () => {
  for (const name of ['Spring sale', 'Summer SALE', 'Receipt']) await create({ name }, workspaceB);
  const names = async (query: string) =>
    (await api('GET', `/templates/?${query}`, undefined, workspaceB)).body.items.map((t: JsonObject) => t.name);
  expect(await names('')).toEqual(['Receipt', 'Summer SALE', 'Spring sale']);
  expect(await names('q=sale')).toEqual(['Summer SALE', 'Spring sale']);
  expect((await api('GET', '/templates/?page=2&page_size=2', undefined, workspaceB)).body).toEqual({
    items: [expect.objectContaining({ name: 'Spring sale' })],
    total: 3,
    page: 2,
    page_size: 2,
  });
  expect((await api('GET', '/templates', undefined, workspaceB)).status).toBe(307);

  const own = await create();
  const notFound = { status: 404, body: { detail: 'Template not found' } };
  expect(await api('GET', `/templates/${own.id}`, undefined, workspaceB)).toMatchObject(notFound);
  expect(await api('PUT', `/templates/${own.id}`, { name: 'x' }, workspaceB)).toMatchObject(notFound);
  expect(await api('DELETE', `/templates/${own.id}`, undefined, workspaceB)).toMatchObject(notFound);
  expect((await api('GET', '/templates/?page_size=500', undefined, workspaceB)).body.items.map((t: JsonObject) => t.id)).not.toContain(
    own.id,
  );
});
