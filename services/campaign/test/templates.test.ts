import path from 'node:path';
import { createLogger } from '@mail/common';
import { createTestPostgres, startTestGrpcService, type TestGrpcService, type TestPostgres } from '@mail/local';
import { campaignV1 } from '@mail/proto';
import type { Knex } from 'knex';
import { TemplateChecker } from '../src/domain/template-checker';
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
      // The worker runs compiled code: the built one of this package.
      const checker = new TemplateChecker(path.join(__dirname, '../dist/domain/template-check-worker.js'));
      return {
        definition: campaignV1.TemplateServiceService,
        implementation: templateHandlers(createLogger('campaign', 'silent'), db, checker),
        resources: db,
        close: async () => {
          await checker.close();
          await db.destroy();
        },
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

const nested = (depth: number): string => '{{#if a}}'.repeat(depth) + 'x' + '{{/if}}'.repeat(depth);

it('takes the five built-in block helpers nested 64 deep; refuses deeper nesting, log, partials, decorators and other blocks', async () => {
  const builtIns = '{{#each items}}{{#with this}}{{#unless hidden}}{{#lookup ../map key}}{{name}}{{/lookup}}{{/unless}}{{/with}}{{/each}}';
  await create({ name: 'Deep', subject: 'S', html: nested(64), text: builtIns });
  const refused: [string, RegExp][] = [
    [nested(65), /^Value error, template nests blocks deeper than 64 levels$/],
    ['{{log "forged line"}}', /^Value error, template uses the log helper/],
    ['{{#if (log 1)}}x{{/if}}', /^Value error, template uses the log helper/],
    ['{{> header}}', /^Value error, template uses a partial/],
    ['{{#> layout}}x{{/layout}}', /^Value error, template uses a partial/],
    ['{{#*inline "header"}}x{{/inline}}', /^Value error, template uses a decorator/],
    ['{{#items}}x{{/items}}', /^Value error, template uses block 'items': only the block helpers if, unless, each, with and lookup/],
  ];
  for (const [html, msg] of refused) {
    expect((await failure(create({ name: 'Refused', subject: 'S', html }))).violations).toEqual([
      { loc: ['html'], type: 'value_error', msg: expect.stringMatching(msg), input: html, ctx: { error: {} } },
    ]);
  }
});

it('refuses a subject over 998 characters and html or text over 512 KB, without checking them', async () => {
  const long = 'x'.repeat(524_289);
  const { violations } = await failure(create({ name: 'Long', subject: 's'.repeat(999), html: long, text: `{{${long}` }));
  // Inputs too big for the status trailer travel as null (grpc-status.ts).
  expect(violations.map(({ input, ...rest }) => ({ ...rest, input: typeof input === 'string' ? input.length : input }))).toEqual([
    { loc: ['subject'], type: 'string_too_long', msg: 'String should have at most 998 characters', input: 999, ctx: { max_length: 998 } },
    {
      loc: ['html'],
      type: 'string_too_long',
      msg: 'String should have at most 524288 characters',
      input: null,
      ctx: { max_length: 524_288 },
    },
    {
      loc: ['text'],
      type: 'string_too_long',
      msg: 'String should have at most 524288 characters',
      input: null,
      ctx: { max_length: 524_288 },
    },
  ]);
  // Characters, as Pydantic counts them: 524,288 emoji are 1,048,576 UTF-16 code units.
  await create({ name: 'Emoji', subject: 's'.repeat(998), text: '\u{1F600}'.repeat(524_288) });
});

it('checks a template in a worker: other calls are answered meanwhile, and one that checks too long answers 422', async () => {
  const stored = await create(WELCOME);
  // 80,000 fields (400 kB): Handlebars takes far longer than the check's time limit to compile them.
  const slow = '{{a}}'.repeat(80_000);
  const order: string[] = [];
  const checking = failure(create({ name: 'Slow', subject: 'S', html: slow })).then((result) => {
    order.push('create');
    return result;
  });
  const read = service.rpc('getTemplate', { workspaceId: WORKSPACE_A, id: stored.id }).then((template) => {
    order.push('get');
    return template;
  });
  expect(await read).toEqual(stored);
  const { violations } = await checking;
  expect(violations.map(({ loc, type, msg }) => ({ loc, type, msg }))).toEqual([
    { loc: ['html'], type: 'value_error', msg: 'Value error, template is too complex to check (over 3 s or 256 MB): simplify it' },
  ]);
  expect(order).toEqual(['get', 'create']);
  // The worker that took too long was replaced: the next check is answered.
  await create({ name: 'After', subject: 'S', text: 'fine {{field}}' });
});
