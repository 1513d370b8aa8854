import { createLogger } from '@mail/common';
import { createTestPostgres, startTestGrpcService, type TestGrpcService, type TestPostgres } from '@mail/local';
import { campaignV1 } from '@mail/proto';
import type { Knex } from 'knex';
import { templateHandlers } from '../src/grpc/template-handlers';
import { openDatabase } from '../src/store/database';
import { closeWorkspaceCampaigns } from '../src/store/campaigns';
import { MISSING_UUID, WORKSPACE_A, WORKSPACE_B, failure, status } from './harness';

/** TemplateService (served by the campaign service) through a real gRPC server over a private database. */
let service: TestGrpcService<campaignV1.TemplateServiceClient, TestPostgres, Knex>;

beforeAll(async () => {
  service = await startTestGrpcService({
    database: () => createTestPostgres('templates'),
    client: campaignV1.TemplateServiceClient,
    open: async (postgres) => {
      const db = await openDatabase(postgres.url);
      return {
        definition: campaignV1.TemplateServiceService,
        implementation: templateHandlers(createLogger('campaign', 'silent'), db),
        resources: db,
        close: () => db.destroy(),
      };
    },
  });
});

afterAll(async () => {
  await service?.close();
});

const create = (template: campaignV1.TemplateInput, workspaceId = WORKSPACE_A) => service.rpc('createTemplate', { workspaceId, template });
const update = (id: string, updateMask: string[], template: campaignV1.TemplateInput, workspaceId = WORKSPACE_A) =>
  service.rpc('updateTemplate', { workspaceId, id, updateMask, template });

const WELCOME = { name: 'Welcome', subject: 'Hello {{first_name}}', html: '<p>Hi {{first_name}}</p>', text: 'Hi {{first_name}}' };

it('creates, reads, lists newest first and deletes', async () => {
  const workspaceId = crypto.randomUUID();
  const first = await create({ name: 'Text only', subject: 'S', text: 'plain' }, workspaceId);
  expect(first).toEqual({
    id: expect.stringMatching(/^[0-9a-f-]{36}$/),
    workspaceId,
    name: 'Text only',
    subject: 'S',
    text: 'plain',
    createdAt: expect.any(Date),
    updatedAt: first.createdAt,
  });
  const second = await create(WELCOME, workspaceId);
  expect(await service.rpc('getTemplate', { workspaceId, id: second.id })).toEqual(second);
  const listed = await service.rpc('listTemplates', { workspaceId, page: { page: 1, pageSize: 1 } });
  expect(listed).toEqual({ templates: [second], page: { total: 2, page: 1, pageSize: 1 } });
  expect(await service.rpc('listTemplates', { workspaceId, nameQuery: 'TEXT' })).toMatchObject({ templates: [first] });

  await service.rpc('deleteTemplate', { workspaceId, id: first.id });
  expect(await failure(service.rpc('getTemplate', { workspaceId, id: first.id }))).toMatchObject({ code: status.NOT_FOUND });
  expect(await failure(service.rpc('deleteTemplate', { workspaceId, id: first.id }))).toMatchObject({ code: status.NOT_FOUND });
});

it('keeps workspaces apart: a template of another workspace, or an id that is no UUID, is NOT_FOUND', async () => {
  const template = await create(WELCOME);
  for (const call of [
    () => service.rpc('getTemplate', { workspaceId: WORKSPACE_B, id: template.id }),
    () => service.rpc('getTemplate', { workspaceId: WORKSPACE_A, id: 'not-a-uuid' }),
    () => service.rpc('getTemplate', { workspaceId: WORKSPACE_A, id: MISSING_UUID }),
    () => update(template.id, ['name'], { name: 'Stolen' }, WORKSPACE_B),
    () => service.rpc('deleteTemplate', { workspaceId: WORKSPACE_B, id: template.id }),
  ]) {
    expect(await failure(call())).toMatchObject({ code: status.NOT_FOUND, details: 'Template not found' });
  }
  expect(await service.rpc('getTemplate', { workspaceId: WORKSPACE_A, id: template.id })).toEqual(template);
});

it('refuses every bad field at once, in the order of the write shape', async () => {
  const result = await failure(create({ name: 'x'.repeat(201), html: '<p>{{#if a}}</p>', text: 'a\u0000b' }));
  expect(result.code).toBe(status.INVALID_ARGUMENT);
  expect(result.violations).toEqual([
    {
      loc: ['name'],
      type: 'string_too_long',
      msg: 'String should have at most 200 characters',
      input: 'x'.repeat(201),
      ctx: { max_length: 200 },
    },
    { loc: ['subject'], type: 'missing', msg: 'Field required', input: null },
    {
      loc: ['html'],
      type: 'value_error',
      msg: expect.stringMatching(/^Value error, template does not compile: Parse error on line 1:.*Expecting/),
      input: '<p>{{#if a}}</p>',
      ctx: { error: {} },
    },
    // Handlebars refuses a NUL itself, and the template rule comes before the NUL rule, as in the gateway.
    {
      loc: ['text'],
      type: 'value_error',
      msg: expect.stringMatching(/^Value error, template does not compile: Lexical error/),
      input: 'a\u0000b',
      ctx: { error: {} },
    },
  ]);
});

it('refuses a NUL in the name, a subject that does not compile, an empty name, and a template without html and text', async () => {
  expect((await failure(create({ ...WELCOME, name: 'a\u0000b' }))).violations).toEqual([
    {
      loc: ['name'],
      type: 'value_error',
      msg: 'Value error, text must not contain NUL (\\u0000) characters',
      input: 'a\u0000b',
      ctx: { error: {} },
    },
  ]);
  expect((await failure(create({ name: '', subject: '{{', text: 't' }))).violations).toEqual([
    expect.objectContaining({ loc: ['name'], type: 'string_too_short' }),
    expect.objectContaining({ loc: ['subject'], type: 'value_error', input: '{{' }),
  ]);
  expect((await failure(create({ name: 'No body', subject: 'S' }))).violations).toEqual([
    {
      loc: [],
      type: 'value_error',
      msg: 'Value error, at least one of html and text is required',
      input: { html: null, text: null },
      ctx: { error: {} },
    },
  ]);
  expect((await failure(create({ name: 'Empty bodies', subject: 'S', html: '', text: '' }))).violations).toEqual([
    expect.objectContaining({ loc: [], type: 'value_error', input: { html: '', text: '' } }),
  ]);
});

it('updates by mask: omitted unchanged, null clears html or text and leaves name and subject, never both bodies', async () => {
  const template = await create(WELCOME);
  const renamed = await update(template.id, ['name', 'subject', 'html'], { html: undefined, name: 'Renamed' });
  expect(renamed).toEqual({ ...template, name: 'Renamed', html: undefined, updatedAt: expect.any(Date) });
  expect(renamed.updatedAt!.getTime()).toBeGreaterThan(template.updatedAt!.getTime());

  expect((await failure(update(template.id, ['text'], {}))).violations).toEqual([
    expect.objectContaining({ loc: [], type: 'value_error', msg: 'Value error, at least one of html and text is required' }),
  ]);
  expect((await failure(update(template.id, ['text'], { text: '{{/each}}' }))).violations).toEqual([
    expect.objectContaining({ loc: ['text'], type: 'value_error' }),
  ]);
  expect((await failure(update(template.id, ['body'], {}))).violations).toEqual([
    expect.objectContaining({ loc: ['update_mask'], input: 'body' }),
  ]);
  expect(await service.rpc('getTemplate', { workspaceId: WORKSPACE_A, id: template.id })).toEqual(renamed);
});

it('goes with its workspace: closing it deletes its templates and refuses new ones', async () => {
  const workspaceId = crypto.randomUUID();
  await create(WELCOME, workspaceId);
  await closeWorkspaceCampaigns(service.resources, workspaceId);
  expect(await service.rpc('listTemplates', { workspaceId })).toMatchObject({ templates: [], page: { total: 0 } });
  expect(await failure(create(WELCOME, workspaceId))).toMatchObject({ code: status.NOT_FOUND });
});
