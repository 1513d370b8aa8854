import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Server } from 'node:http';
import { createLogger, Readiness } from '@mail/common';
import { createApp } from '../src/app';
import { devAuthenticator } from '../src/auth/principal';
import { createServiceClients } from '../src/clients';
import { pythonJsonError } from '../src/pydantic/python-json';
import { parseUuid } from '../src/pydantic/scalars';
import { loadOpenApiDocument } from '../src/openapi/document';

/**
 * Every expected body below is what FastAPI 0.115 + Pydantic 2 (CPython 3.12)
 * answers for the same request against an equivalent model.
 */

// A test-only area, public so no identity service is needed; shaped like the campaign write model.
const THINGS_FRAGMENT = `
paths:
  /things/:
    post:
      operationId: createThing
      x-required-role: public
      parameters:
        - $ref: '#/components/parameters/WorkspaceIdHeader'
        - $ref: '#/components/parameters/Page'
        - { name: dry_run, in: query, required: false, schema: { type: boolean } }
      requestBody:
        required: true
        content:
          application/json:
            schema: { $ref: '#/components/schemas/Thing' }
      responses:
        '201': { description: created }
  /things/{id}:
    put:
      operationId: updateThing
      x-required-role: public
      x-workspace-from: none
      parameters:
        - $ref: '#/components/parameters/IdPath'
      requestBody:
        required: true
        content:
          application/json:
            schema:
              type: object
              properties:
                name: { type: string, nullable: true, minLength: 1 }
                mode: { type: string, nullable: true, enum: [single_template, variants] }
      responses:
        '200': { description: updated }
components:
  schemas:
    Thing:
      type: object
      required: [workspace_id, name]
      properties:
        workspace_id: { type: string, format: uuid }
        name: { type: string, minLength: 1, maxLength: 200 }
        send_priority: { type: integer, minimum: 0, maximum: 1000 }
        ratio: { type: number, exclusiveMinimum: true, minimum: 0 }
        is_active: { type: boolean }
        recipient_source: { type: string, enum: [mssql_query, csv_account_ids] }
        delivery_mode: { type: string, enum: [single_template, variants, ab_test] }
        csv_account_ids: { type: array, nullable: true, items: { type: string } }
        tags: { type: array, minItems: 1, maxItems: 2, items: { type: string } }
        from_email: { type: string, format: email, nullable: true }
        meta: { type: object, additionalProperties: true }
        variants:
          type: array
          nullable: true
          items:
            type: object
            required: [template_id]
            properties:
              template_id: { type: string, minLength: 1 }
              weight: { type: integer, minimum: 0, maximum: 10000 }
              is_active: { type: boolean }
`;

const WS = '0b0f3c2e-3c4f-4a5c-9a8e-1c2d3e4f5a6b';
const JSON_HEADERS = { 'content-type': 'application/json', workspace_id: WS };

let server: Server;
let baseUrl: string;
let documentDir: string;

beforeAll(async () => {
  documentDir = fs.mkdtempSync(path.join(os.tmpdir(), 'validation-doc-'));
  fs.copyFileSync(path.join(__dirname, '..', 'openapi', 'openapi.yaml'), path.join(documentDir, 'openapi.yaml'));
  fs.writeFileSync(path.join(documentDir, 'things.yaml'), THINGS_FRAGMENT);
  const unused = '127.0.0.1:9';
  const logger = createLogger('validation-test', 'silent');
  const app = createApp({
    document: loadOpenApiDocument(documentDir),
    clients: createServiceClients({ identity: unused, campaign: unused, brandGuide: unused, analytics: unused, delivery: unused }, logger),
    authenticator: devAuthenticator,
    readiness: new Readiness(),
    logger,
  });
  server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  fs.rmSync(documentDir, { recursive: true, force: true });
});

async function send(
  body: string | Uint8Array | undefined,
  options: { headers?: Record<string, string>; url?: string; method?: string } = {},
): Promise<{ status: number; json: unknown }> {
  const response = await fetch(baseUrl + (options.url ?? '/things/'), {
    method: options.method ?? 'POST',
    headers: options.headers ?? JSON_HEADERS,
    body,
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : undefined };
}

const post = (body: unknown) => send(JSON.stringify(body));
const valid = { workspace_id: WS, name: 'Spring sale' };

describe('body validation answers like FastAPI', () => {
  const cases: [string, unknown, unknown[]][] = [
    [
      'missing fields, with the enclosing object as input',
      { send_priority: 5 },
      [
        { type: 'missing', loc: ['body', 'workspace_id'], msg: 'Field required', input: { send_priority: 5 } },
        { type: 'missing', loc: ['body', 'name'], msg: 'Field required', input: { send_priority: 5 } },
      ],
    ],
    [
      'wrong types of every kind, all at once, in field order',
      {
        meta: 'x',
        csv_account_ids: 'a',
        recipient_source: 'smtp',
        is_active: 'maybe',
        send_priority: 'high',
        name: 7,
        workspace_id: 5,
        variants: [{ weight: 1.5 }, 5],
      },
      [
        { type: 'uuid_type', loc: ['body', 'workspace_id'], msg: 'UUID input should be a string, bytes or UUID object', input: 5 },
        { type: 'string_type', loc: ['body', 'name'], msg: 'Input should be a valid string', input: 7 },
        {
          type: 'int_parsing',
          loc: ['body', 'send_priority'],
          msg: 'Input should be a valid integer, unable to parse string as an integer',
          input: 'high',
        },
        {
          type: 'bool_parsing',
          loc: ['body', 'is_active'],
          msg: 'Input should be a valid boolean, unable to interpret input',
          input: 'maybe',
        },
        {
          type: 'enum',
          loc: ['body', 'recipient_source'],
          msg: "Input should be 'mssql_query' or 'csv_account_ids'",
          input: 'smtp',
          ctx: { expected: "'mssql_query' or 'csv_account_ids'" },
        },
        { type: 'list_type', loc: ['body', 'csv_account_ids'], msg: 'Input should be a valid list', input: 'a' },
        { type: 'dict_type', loc: ['body', 'meta'], msg: 'Input should be a valid dictionary', input: 'x' },
        { type: 'missing', loc: ['body', 'variants', 0, 'template_id'], msg: 'Field required', input: { weight: 1.5 } },
        {
          type: 'int_from_float',
          loc: ['body', 'variants', 0, 'weight'],
          msg: 'Input should be a valid integer, got a number with a fractional part',
          input: 1.5,
        },
        {
          type: 'model_attributes_type',
          loc: ['body', 'variants', 1],
          msg: 'Input should be a valid dictionary or object to extract fields from',
          input: 5,
        },
      ],
    ],
    [
      'null where a value is required',
      { workspace_id: null, name: null, is_active: null, send_priority: null },
      [
        { type: 'uuid_type', loc: ['body', 'workspace_id'], msg: 'UUID input should be a string, bytes or UUID object', input: null },
        { type: 'string_type', loc: ['body', 'name'], msg: 'Input should be a valid string', input: null },
        { type: 'int_type', loc: ['body', 'send_priority'], msg: 'Input should be a valid integer', input: null },
        { type: 'bool_type', loc: ['body', 'is_active'], msg: 'Input should be a valid boolean', input: null },
      ],
    ],
    [
      'booleans: a number other than 0/1 cannot be interpreted, a fraction is no boolean at all',
      { ...valid, is_active: 2, variants: [{ template_id: 't', is_active: 0.5 }] },
      [
        { type: 'bool_parsing', loc: ['body', 'is_active'], msg: 'Input should be a valid boolean, unable to interpret input', input: 2 },
        { type: 'bool_type', loc: ['body', 'variants', 0, 'is_active'], msg: 'Input should be a valid boolean', input: 0.5 },
      ],
    ],
    [
      'ranges and lengths, quoting the value as sent',
      { workspace_id: WS, name: '', send_priority: '1001', ratio: 0, tags: [], variants: [{ template_id: 't', weight: -1 }] },
      [
        {
          type: 'string_too_short',
          loc: ['body', 'name'],
          msg: 'String should have at least 1 character',
          input: '',
          ctx: { min_length: 1 },
        },
        {
          type: 'less_than_equal',
          loc: ['body', 'send_priority'],
          msg: 'Input should be less than or equal to 1000',
          input: '1001',
          ctx: { le: 1000 },
        },
        { type: 'greater_than', loc: ['body', 'ratio'], msg: 'Input should be greater than 0', input: 0, ctx: { gt: 0 } },
        {
          type: 'too_short',
          loc: ['body', 'tags'],
          msg: 'List should have at least 1 item after validation, not 0',
          input: [],
          ctx: { field_type: 'List', min_length: 1, actual_length: 0 },
        },
        {
          type: 'greater_than_equal',
          loc: ['body', 'variants', 0, 'weight'],
          msg: 'Input should be greater than or equal to 0',
          input: -1,
          ctx: { ge: 0 },
        },
      ],
    ],
    [
      'too long string and list',
      { ...valid, name: 'x'.repeat(201), tags: ['a', 'b', 'c'] },
      [
        {
          type: 'string_too_long',
          loc: ['body', 'name'],
          msg: 'String should have at most 200 characters',
          input: 'x'.repeat(201),
          ctx: { max_length: 200 },
        },
        {
          type: 'too_long',
          loc: ['body', 'tags'],
          msg: 'List should have at most 2 items after validation, not 3',
          input: ['a', 'b', 'c'],
          ctx: { field_type: 'List', max_length: 2, actual_length: 3 },
        },
      ],
    ],
    [
      'an enum of three, and a number where an enum string belongs',
      { ...valid, delivery_mode: 'single', recipient_source: 3 },
      [
        {
          type: 'enum',
          loc: ['body', 'recipient_source'],
          msg: "Input should be 'mssql_query' or 'csv_account_ids'",
          input: 3,
          ctx: { expected: "'mssql_query' or 'csv_account_ids'" },
        },
        {
          type: 'enum',
          loc: ['body', 'delivery_mode'],
          msg: "Input should be 'single_template', 'variants' or 'ab_test'",
          input: 'single',
          ctx: { expected: "'single_template', 'variants' or 'ab_test'" },
        },
      ],
    ],
    [
      'UUID strings that do not parse',
      { ...valid, workspace_id: 'not-a-uuid' },
      [
        {
          type: 'uuid_parsing',
          loc: ['body', 'workspace_id'],
          msg: 'Input should be a valid UUID, invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1',
          input: 'not-a-uuid',
          ctx: { error: 'invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `n` at 1' },
        },
      ],
    ],
    [
      'an e-mail address without a dot in the domain',
      { ...valid, from_email: 'ana@example' },
      [
        {
          type: 'value_error',
          loc: ['body', 'from_email'],
          msg: 'value is not a valid email address: The part after the @-sign is not valid. It should have a period.',
          input: 'ana@example',
          ctx: { reason: 'The part after the @-sign is not valid. It should have a period.' },
        },
      ],
    ],
    [
      'a body that is not an object',
      [1, 2],
      [
        {
          type: 'model_attributes_type',
          loc: ['body'],
          msg: 'Input should be a valid dictionary or object to extract fields from',
          input: [1, 2],
        },
      ],
    ],
    ['a JSON null body, which FastAPI treats as no body', null, [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }]],
  ];

  it.each(cases)('%s', async (_name, body, detail) => {
    expect(await post(body)).toEqual({ status: 422, json: { detail } });
  });

  it('reports a missing body, empty or absent, with or without a Content-Type', async () => {
    const missing = { status: 422, json: { detail: [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }] } };
    expect(await send('')).toEqual(missing);
    expect(await send(undefined)).toEqual(missing);
    expect(await send(undefined, { headers: { workspace_id: WS } })).toEqual(missing);
  });

  it("accepts what Pydantic's lax mode accepts, and ignores unknown fields", async () => {
    const lax = {
      workspace_id: `{${WS.toUpperCase()}}`,
      name: 'x',
      send_priority: ' 1_000 ',
      is_active: 'off',
      ratio: '0.5',
      variants: [{ template_id: 't', weight: true, is_active: 1 }],
      from_email: 'Ana <ana@EXAMPLE.com>',
      unknown_field: { anything: true },
    };
    // 404: validation passed and this test-only path has no handler.
    expect((await post(lax)).status).toBe(404);
    // Bytes, because fetch labels a string body text/plain.
    expect((await send(Buffer.from(JSON.stringify(valid)), { headers: { workspace_id: WS } })).status).toBe(404);
  });

  it('reads application/*+json bodies as JSON', async () => {
    for (const type of ['application/merge-patch+json', 'application/vnd.api+json; charset=utf-8']) {
      expect((await send(JSON.stringify(valid), { headers: { workspace_id: WS, 'content-type': type } })).status).toBe(404);
    }
  });

  it('lets null through where the schema is nullable, enums included', async () => {
    expect((await post({ ...valid, csv_account_ids: null, variants: null, from_email: null })).status).toBe(404);
    expect((await send(JSON.stringify({ name: null, mode: null }), { url: `/things/${WS}`, method: 'PUT' })).status).toBe(404);
  });
});

describe('parameters answer like FastAPI', () => {
  it('reports a missing workspace_id header', async () => {
    expect(await send(JSON.stringify(valid), { headers: { 'content-type': 'application/json' } })).toEqual({
      status: 422,
      json: { detail: [{ type: 'missing', loc: ['header', 'workspace_id'], msg: 'Field required', input: null }] },
    });
  });

  it.each([
    ['abc', 'invalid length: expected length 32 for simple format, found 3'],
    ['zz', 'invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `z` at 1'],
    ['0b0f3c2e-3c4f-4a5c-9a8e', 'invalid group count: expected 5, found 4'],
  ])('reports a workspace_id header %p that is not a UUID', async (header, error) => {
    expect(await send(JSON.stringify(valid), { headers: { 'content-type': 'application/json', workspace_id: header } })).toEqual({
      status: 422,
      json: {
        detail: [
          {
            type: 'uuid_parsing',
            loc: ['header', 'workspace_id'],
            msg: `Input should be a valid UUID, ${error}`,
            input: header,
            ctx: { error },
          },
        ],
      },
    });
  });

  it('reports query, header and body problems together: path, query, header, then body', async () => {
    const answer = await send(JSON.stringify({ name: 'x' }), {
      url: '/things/?page=0&dry_run=perhaps&unknown=1',
      headers: { 'content-type': 'application/json' },
    });
    expect(answer).toEqual({
      status: 422,
      json: {
        detail: [
          {
            type: 'greater_than_equal',
            loc: ['query', 'page'],
            msg: 'Input should be greater than or equal to 1',
            input: '0',
            ctx: { ge: 1 },
          },
          {
            type: 'bool_parsing',
            loc: ['query', 'dry_run'],
            msg: 'Input should be a valid boolean, unable to interpret input',
            input: 'perhaps',
          },
          { type: 'missing', loc: ['header', 'workspace_id'], msg: 'Field required', input: null },
          { type: 'missing', loc: ['body', 'workspace_id'], msg: 'Field required', input: { name: 'x' } },
        ],
      },
    });
  });

  it('parses query integers as Pydantic does and takes the last of repeated values', async () => {
    expect(await send(JSON.stringify(valid), { url: '/things/?page=two' })).toEqual({
      status: 422,
      json: {
        detail: [
          {
            type: 'int_parsing',
            loc: ['query', 'page'],
            msg: 'Input should be a valid integer, unable to parse string as an integer',
            input: 'two',
          },
        ],
      },
    });
    expect((await send(JSON.stringify(valid), { url: '/things/?page=x&page=2&dry_run=yes&q=a@b.c:d' })).status).toBe(404);
  });

  it('refuses integers that JavaScript reads but Pydantic does not, in the query and in the body', async () => {
    const intParsing = (loc: string[], input: string) => ({
      type: 'int_parsing',
      loc,
      msg: 'Input should be a valid integer, unable to parse string as an integer',
      input,
    });
    for (const page of ['1e3', '0x10', '0b1', 'Infinity']) {
      expect(await send(JSON.stringify(valid), { url: `/things/?page=${page}` })).toEqual({
        status: 422,
        json: { detail: [intParsing(['query', 'page'], page)] },
      });
    }
    expect(await post({ ...valid, send_priority: '1e2' })).toEqual({
      status: 422,
      json: { detail: [intParsing(['body', 'send_priority'], '1e2')] },
    });
  });

  it('ignores parameters with brackets in their names, as FastAPI ignores any unknown parameter', async () => {
    expect((await send(JSON.stringify(valid), { url: '/things/?page[]=x&page[a]=b&q[]=1&dry_run[x]=perhaps' })).status).toBe(404);
    expect((await send(JSON.stringify(valid), { url: '/things/?page=2&page[]=x' })).status).toBe(404);
  });

  it('reports a path id that is not a UUID', async () => {
    expect(await send('{}', { url: '/things/12', method: 'PUT' })).toEqual({
      status: 422,
      json: {
        detail: [
          {
            type: 'uuid_parsing',
            loc: ['path', 'id'],
            msg: 'Input should be a valid UUID, invalid length: expected length 32 for simple format, found 2',
            input: '12',
            ctx: { error: 'invalid length: expected length 32 for simple format, found 2' },
          },
        ],
      },
    });
  });
});

describe('malformed JSON answers like FastAPI', () => {
  it.each([
    ['{"a": }', 6, 'Expecting value'],
    ['{"name": "x",}', 13, 'Expecting property name enclosed in double quotes'],
    ["{'name': 'x'}", 1, 'Expecting property name enclosed in double quotes'],
    ['{"name" "x"}', 8, "Expecting ':' delimiter"],
    ['{"name": "x" "y": 1}', 13, "Expecting ',' delimiter"],
    ['{"name": "x"}}', 13, 'Extra data'],
    ['{"name": "x', 9, 'Unterminated string starting at'],
    ['   ', 3, 'Expecting value'],
  ])('%p', async (body, position, error) => {
    expect(await send(body)).toEqual({
      status: 422,
      json: { detail: [{ type: 'json_invalid', loc: ['body', position], msg: 'JSON decode error', input: {}, ctx: { error } }] },
    });
  });
});

describe("Python's JSON decoder positions", () => {
  it.each([
    ['', 'Expecting value', 0],
    ['   ', 'Expecting value', 3],
    ['{"a": }', 'Expecting value', 6],
    ['{"a" 1}', "Expecting ':' delimiter", 5],
    ["{'a':1}", 'Expecting property name enclosed in double quotes', 1],
    ['{"a":1}x', 'Extra data', 7],
    ['{"a":1,}', 'Expecting property name enclosed in double quotes', 7],
    ['[1,]', 'Expecting value', 3],
    ['[1 2]', "Expecting ',' delimiter", 3],
    ['{"a":1 "b":2}', "Expecting ',' delimiter", 7],
    ['{"a', 'Unterminated string starting at', 1],
    ['"abc', 'Unterminated string starting at', 0],
    ['{"a":"x\ny"}', 'Invalid control character at', 7],
    ['{"a":"\\x"}', 'Invalid \\escape', 6],
    ['"\\u12"', 'Invalid \\uXXXX escape', 2],
    ['"\\uzzzz"', 'Invalid \\uXXXX escape', 2],
    ['"\\ud83d\\uzz00"', 'Invalid \\uXXXX escape', 8],
    ['"\\', 'Unterminated string starting at', 0],
    ['tru', 'Expecting value', 0],
    ['nul', 'Expecting value', 0],
    ['[', 'Expecting value', 1],
    ['{', 'Expecting property name enclosed in double quotes', 1],
    ['{"a":1', "Expecting ',' delimiter", 6],
    ['{"a"', "Expecting ':' delimiter", 4],
    ['{"a":', 'Expecting value', 5],
    ['-', 'Expecting value', 0],
    ['-x', 'Expecting value', 0],
    ['01', 'Extra data', 1],
    ['1.', 'Extra data', 1],
    ['1e', 'Extra data', 1],
    ['1e+', 'Extra data', 1],
    ['[1,2', "Expecting ',' delimiter", 4],
    ['{"a":[1,2}', "Expecting ',' delimiter", 9],
    ['{"é": x}', 'Expecting value', 6],
    ['["😀", x]', 'Expecting value', 6],
    ['"a" "b"', 'Extra data', 4],
    ['{"a":1}}', 'Extra data', 7],
  ])('%p', (text, msg, pos) => {
    expect(pythonJsonError(text)).toEqual({ msg, pos });
  });

  it.each(['{}', ' [1, -2.5e+3, "\\u00e9\\ud83d\\ude00", true, false, null] ', '"\\ud800"', '{"a":{"b":[]}}'])('accepts %p', (text) => {
    expect(pythonJsonError(text)).toBeUndefined();
  });

  it('rejects NaN and Infinity, which Python would accept, like any other stray word', () => {
    expect(pythonJsonError('[NaN]')).toEqual({ msg: 'Expecting value', pos: 1 });
    expect(pythonJsonError('-Infinity')).toEqual({ msg: 'Expecting value', pos: 0 });
  });
});

describe('UUID parsing (the uuid crate behind Pydantic)', () => {
  it.each([
    ['0B0F3C2E3C4F4A5C9A8E1C2D3E4F5A6B', WS],
    [`{${WS}}`, WS],
    [`urn:uuid:${WS.toUpperCase()}`, WS],
  ])('accepts %p', (input, uuid) => {
    expect(parseUuid(input)).toEqual({ uuid });
  });

  it.each([
    ['', 'invalid length: expected length 32 for simple format, found 0'],
    ['abc', 'invalid length: expected length 32 for simple format, found 3'],
    ['0b0f3c2e3c4f4a5c9a8e1c2d3e4f5a6b0', 'invalid length: expected length 32 for simple format, found 33'],
    ['0b0f3c2e-3c4f-4a5c-9a8e', 'invalid group count: expected 5, found 4'],
    ['0b0f3c2e3-c4f-4a5c-9a8e-1c2d3e4f5a6b', 'invalid group length in group 0: expected 8, found 9'],
    ['0b0f3c2e-3c4-f4a5c-9a8e-1c2d3e4f5a6b', 'invalid group length in group 1: expected 4, found 3'],
    ['0b0f3c2e-3c4f-4a5c-9a8e-1c2d3e4f5a6', 'invalid group length in group 4: expected 12, found 11'],
    ['{abc}', 'invalid group count: expected 5, found 1'],
    [`{${WS}x}`, 'invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `x` at 38'],
    ['urn:uuid:xyz', 'invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `x` at 10'],
    ['ab é', 'invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found ` ` at 3'],
    ['abé', 'invalid character: expected an optional prefix of `urn:uuid:` followed by [0-9a-fA-F-], found `é` at 3'],
  ])('rejects %p', (input, error) => {
    expect(parseUuid(input)).toEqual({ error });
  });
});

describe('a bounded answer to a body with very many failures', () => {
  // How long it takes is measured by the benchmark suite (bench/src/validation-bench.ts), not asserted here.
  it('reports only the first 1,000 entries, in order, for 450,000 failing items', async () => {
    const body = JSON.stringify({ ...valid, csv_account_ids: Array(450_000).fill(1), send_priority: 'x', tags: [] });
    expect(body.length).toBeLessThan(1024 * 1024);
    const response = await fetch(`${baseUrl}/things/`, { method: 'POST', headers: JSON_HEADERS, body });
    const text = await response.text();

    expect(response.status).toBe(422);
    const detail = (JSON.parse(text) as { detail: { loc: unknown[] }[] }).detail;
    expect(detail).toHaveLength(1_000);
    expect(detail.slice(0, 2)).toEqual([
      {
        type: 'int_parsing',
        loc: ['body', 'send_priority'],
        msg: 'Input should be a valid integer, unable to parse string as an integer',
        input: 'x',
      },
      { type: 'string_type', loc: ['body', 'csv_account_ids', 0], msg: 'Input should be a valid string', input: 1 },
    ]);
    expect(detail[999].loc).toEqual(['body', 'csv_account_ids', 998]);
    // Without the cap the answer would list all 450,002 failures, and take seconds to build.
    expect(text.length).toBeLessThan(150_000);
  });

  it('still reports every entry, in order, below the cap', async () => {
    const response = await post({ ...valid, tags: [], csv_account_ids: [1, 'ok', 2], send_priority: 'x' });
    expect((response.json as { detail: { loc: unknown[] }[] }).detail.map((entry) => entry.loc)).toEqual([
      ['body', 'send_priority'],
      ['body', 'csv_account_ids', 0],
      ['body', 'csv_account_ids', 2],
      ['body', 'tags'],
    ]);
  });
});

describe('the API docs', () => {
  it('serve Swagger UI from the swagger-ui-dist package, no CDN', async () => {
    const page = await fetch(`${baseUrl}/docs`);
    expect([page.status, await page.text()]).toEqual([200, expect.stringContaining('/docs/assets/swagger-ui-bundle.js')]);
    for (const asset of ['swagger-ui-bundle.js', 'swagger-ui.css']) {
      const response = await fetch(`${baseUrl}/docs/assets/${asset}`);
      expect([asset, response.status, (await response.arrayBuffer()).byteLength > 10_000]).toEqual([asset, 200, true]);
    }
  });
});
