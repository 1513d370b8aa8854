import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import zlib from 'node:zlib';
import { cpuMs } from './cpu-time';
import { startHostileStack, type HostileStack } from './fuzz/stack';

/**
 * Hostile input against the real stack (every process real, DEV_AUTH_ENABLED=1, open webhook on a
 * private Kafka topic). Every answer is a clear 4xx (or 2xx where the input is legal), never a 5xx
 * other than 503, always in the API's `{"detail": ...}` shape, and quickly. Decisions:
 * - JSON body over 1 MB, webhook body over 5 MB (also after gzip inflation): 413 "Request body too large".
 * - Bytes that are not UTF-8, or nesting deeper than 1000 levels: 400 "There was an error parsing the
 *   body", FastAPI's answer when Python's decoder fails other than with a syntax error
 *   (UnicodeDecodeError, RecursionError).
 * - A body of another media type (text/plain, multipart, XML, form): read as text, it fails the
 *   model's type check (422 model_attributes_type quoting it), as FastAPI reads it as bytes; a JSON
 *   body in a charset Node cannot decode: 415 "Unsupported Media Type". The webhook reads any body
 *   as JSON (what SendGrid sends), so there the syntax decides.
 * - NUL: in a JSON string bound for PostgreSQL a 422 value_error; in a list filter no match; in a
 *   path id a 422 uuid_parsing; in a header or raw in the request line a 400 from the HTTP parser, in
 *   the API's `{"detail": ...}` shape like every other answer.
 * - An invalid percent-encoding is read as Python's unquote reads it (kept as sent, U+FFFD for bytes
 *   that are not UTF-8) and validated like any other value.
 * - A request head over 16 KB (a huge query string): 431 "Request header fields too large".
 * - A method the path does not have: 405 with `Allow` listing the ones it has.
 * - A repeated workspace_id header: the first one counts, as Starlette reads it.
 * - A body that fails validation in very many places: the first 1,000 entries, quickly.
 */
jest.setTimeout(180_000);

let target: HostileStack;
let gatewayPid: number;

beforeAll(async () => {
  target = await startHostileStack('abuse');
  gatewayPid = target.stack.pid('gateway')!;
});

afterAll(async () => {
  await target?.close();
});

interface Answer {
  status: number;
  body: unknown;
}

const JSON_TYPE = { 'content-type': 'application/json' };
const PARSE_FAILED = { status: 400, body: { detail: 'There was an error parsing the body' } };
const TOO_LARGE = { status: 413, body: { detail: 'Request body too large' } };
const UNSUPPORTED = { status: 415, body: { detail: 'Unsupported Media Type' } };

/** One request with the workspace header; the body parsed as JSON when there is one. */
async function send(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}): Promise<Answer> {
  const response = await fetch(`${target.gateway}${path}`, {
    method,
    body,
    headers: { workspace_id: target.workspaceId, ...headers },
  });
  const text = await response.text();
  return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
}

/** The gateway's CPU time for `work`, for the "and quickly" part (cpu-time.ts says why not the wall clock). */
async function timed<T>(work: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const before = cpuMs(gatewayPid);
  const result = await work();
  return { result, ms: cpuMs(gatewayPid) - before };
}

/** Raw bytes on a fresh connection: for what an HTTP client library refuses to send. Returns the whole answer. */
function raw(request: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const { hostname, port } = new URL(target.gateway);
    const socket = net.connect(Number(port), hostname);
    let answer = '';
    socket.setTimeout(10_000, () => socket.destroy(new Error(`no answer to ${JSON.stringify(request.slice(0, 80))}`)));
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.once('end', () => resolve(answer));
    socket.once('error', reject);
    socket.write(request, 'latin1');
  });
}

/** What the gateway answers, and then closes the connection, when Node's HTTP parser refuses a request. */
const PARSER_400 =
  'HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: 33\r\nConnection: close\r\n\r\n{"detail":"Invalid HTTP request"}';

function campaign(overrides: Record<string, unknown>): string {
  return JSON.stringify({
    workspace_id: target.workspaceId,
    name: 'abuse',
    recipient_source: 'csv_account_ids',
    delivery_mode: 'single_template',
    ...overrides,
  });
}

describe('oversized bodies', () => {
  it('answers 413 to a JSON body over 1 MB', async () => {
    const body = JSON.stringify({ name: 'big', description: 'x'.repeat(2 * 1024 * 1024) });
    expect(await send('POST', '/brand-guides/', body, JSON_TYPE)).toEqual(TOO_LARGE);
  });

  it('answers 413 to a webhook body over 5 MB', async () => {
    const event = JSON.stringify({ email: 'a@example.com', event: 'open', timestamp: 1, sg_event_id: 'big', pad: 'x'.repeat(1000) });
    const body = `[${Array(5_300).fill(event).join(',')}]`;
    expect(body.length).toBeGreaterThan(5 * 1024 * 1024);
    expect(await send('POST', '/campaign-events/webhook', body, JSON_TYPE)).toEqual(TOO_LARGE);
  });

  it('answers 413 to a gzip body of 48 KB that inflates to 50 MB, on both parsers, at once', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(50_000_000, ' '));
    const headers = { ...JSON_TYPE, 'content-encoding': 'gzip' };
    const { result, ms } = await timed(() =>
      Promise.all([send('POST', '/brand-guides/', bomb, headers), send('POST', '/campaign-events/webhook', bomb, headers)]),
    );
    expect(result).toEqual([TOO_LARGE, TOO_LARGE]);
    expect(ms).toBeLessThan(5_000);
  });

  it('answers 413 to a 1M-element csv_account_ids at once', async () => {
    const { result, ms } = await timed(() =>
      send('POST', '/email-campaigns/', campaign({ csv_account_ids: Array(1_000_000).fill('1') }), JSON_TYPE),
    );
    expect(result).toEqual(TOO_LARGE);
    expect(ms).toBeLessThan(5_000);
  });

  it('answers 413 to a name of 1 MB, and 422 string_too_long quoting it for one just under the limit', async () => {
    expect(await send('POST', '/brand-guides/', JSON.stringify({ name: 'n'.repeat(1024 * 1024) }), JSON_TYPE)).toEqual(TOO_LARGE);
    const name = 'n'.repeat(900_000);
    expect(await send('POST', '/brand-guides/', JSON.stringify({ name }), JSON_TYPE)).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'string_too_long',
            loc: ['body', 'name'],
            msg: 'String should have at most 200 characters',
            input: name,
            ctx: { max_length: 200 },
          },
        ],
      },
    });
  });

  it("answers 431 in the API's error shape to a query string over 16 KB (refused by the HTTP parser)", async () => {
    const response = await fetch(`${target.gateway}/brand-guides/?q=${'q'.repeat(100_000)}`, {
      headers: { workspace_id: target.workspaceId },
    });
    expect({ status: response.status, type: response.headers.get('content-type'), body: await response.json() }).toEqual({
      status: 431,
      type: 'application/json',
      body: { detail: 'Request header fields too large' },
    });
  });
});

describe('bodies that fail validation in very many places', () => {
  const entries = (answer: Answer) => (answer.body as { detail: unknown[] }).detail;

  it('answers the first 1,000 entries, quickly, to 450,000 integers in csv_account_ids (under 1 MB)', async () => {
    const body = campaign({ csv_account_ids: Array(450_000).fill(1) });
    const { result, ms } = await timed(() => send('POST', '/email-campaigns/', body, JSON_TYPE));
    expect(result.status).toBe(422);
    expect(entries(result)).toHaveLength(1_000);
    expect(entries(result)[999]).toEqual({
      type: 'string_type',
      loc: ['body', 'csv_account_ids', 999],
      msg: 'Input should be a valid string',
      input: 1,
    });
    expect(JSON.stringify(result.body).length).toBeLessThan(150_000);
    expect(ms).toBeLessThan(5_000);
  });

  it('answers the first 1,000 entries, quickly, to a webhook body of a million empty objects', async () => {
    const body = `[${Array(1_000_000).fill('{}').join(',')}]`;
    const { result, ms } = await timed(() => send('POST', '/campaign-events/webhook', body, JSON_TYPE));
    expect(result.status).toBe(422);
    expect(entries(result)).toHaveLength(1_000);
    expect(entries(result)[999]).toEqual({ type: 'missing', loc: ['body', 249, 'timestamp'], msg: 'Field required', input: {} });
    expect(ms).toBeLessThan(2_000);
  });
});

describe('bodies Python could not decode', () => {
  const nestings: Array<[string, string]> = [
    ['100k unclosed [', '['.repeat(100_000)],
    ['100k closed [ ]', '['.repeat(100_000) + ']'.repeat(100_000)],
    ['100k objects', '{"a":'.repeat(100_000) + '1' + '}'.repeat(100_000)],
    ['100k levels inside a field', `{"name":${'['.repeat(100_000)}${']'.repeat(100_000)}}`],
  ];

  it.each(nestings)('answers 400 to deep nesting (%s) on a JSON operation and on the webhook, quickly', async (_name, body) => {
    const { result, ms } = await timed(() =>
      Promise.all([send('POST', '/brand-guides/', body, JSON_TYPE), send('POST', '/campaign-events/webhook', body, JSON_TYPE)]),
    );
    expect(result).toEqual([PARSE_FAILED, PARSE_FAILED]);
    expect(ms).toBeLessThan(2_000);
  });

  it('validates nesting of 500 levels as usual (the limit is not lower than needed)', async () => {
    const nested = JSON.parse('['.repeat(500) + ']'.repeat(500));
    expect(await send('POST', '/brand-guides/', JSON.stringify({ name: nested }), JSON_TYPE)).toEqual({
      status: 422,
      body: { detail: [{ type: 'string_type', loc: ['body', 'name'], msg: 'Input should be a valid string', input: nested }] },
    });
  });

  it('answers 400 to bytes that are not UTF-8, on a JSON operation and on the webhook', async () => {
    const body = Buffer.concat([Buffer.from('{"name":"caf'), Buffer.from([0xe9, 0xff, 0xc3]), Buffer.from('"}')]);
    expect(await send('POST', '/brand-guides/', body, JSON_TYPE)).toEqual(PARSE_FAILED);
    expect(await send('POST', '/campaign-events/webhook', Buffer.from([0x5b, 0xff, 0x5d]), JSON_TYPE)).toEqual(PARSE_FAILED);
  });

  it('answers 400 to bytes invalid in the charset the Content-Type names, and reads valid UTF-16', async () => {
    const broken = Buffer.concat([Buffer.from('{"name":"a', 'utf16le'), Buffer.from([0x00, 0xdc]), Buffer.from('"}', 'utf16le')]);
    expect(await send('POST', '/brand-guides/', broken, { 'content-type': 'application/json; charset=utf-16le' })).toEqual(PARSE_FAILED);
    const valid = await send('POST', '/brand-guides/', Buffer.from('{"name":"utf16"}', 'utf16le'), {
      'content-type': 'application/json; charset=utf-16le',
    });
    expect(valid).toMatchObject({ status: 201, body: { name: 'utf16' } });
  });
});

describe('wrong content types', () => {
  const bodies: Array<[string, string]> = [
    ['text/plain', '{"name":"plain"}'],
    ['multipart/form-data; boundary=b', '--b\r\nContent-Disposition: form-data; name="name"\r\n\r\nform\r\n--b--\r\n'],
    ['application/xml', '<brandGuide><name>xml</name></brandGuide>'],
    ['application/x-www-form-urlencoded', 'name=form'],
  ];

  it.each(bodies)('answers 422 model_attributes_type quoting the text to %s on a JSON operation, as FastAPI does', async (type, body) => {
    expect(await send('POST', '/brand-guides/', body, { 'content-type': type })).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'model_attributes_type',
            loc: ['body'],
            msg: 'Input should be a valid dictionary or object to extract fields from',
            input: body,
          },
        ],
      },
    });
  });

  it('answers 422 missing to an empty body of another type', async () => {
    expect(await send('PUT', `/brand-guides/${crypto.randomUUID()}`, '', { 'content-type': 'text/plain' })).toEqual({
      status: 422,
      body: { detail: [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }] },
    });
  });

  it('answers 415 to a JSON body in a charset it cannot decode', async () => {
    expect(await send('POST', '/brand-guides/', '{"name":"latin"}', { 'content-type': 'application/json; charset=latin1' })).toEqual(
      UNSUPPORTED,
    );
  });

  it('reads the webhook body as JSON whatever its Content-Type: a JSON array passes, XML is json_invalid', async () => {
    expect(await send('POST', '/campaign-events/webhook', '[]', { 'content-type': 'text/plain' })).toEqual({
      status: 202,
      body: { accepted: 0 },
    });
    expect(await send('POST', '/campaign-events/webhook', '<events/>', { 'content-type': 'application/xml' })).toEqual({
      status: 422,
      body: {
        detail: [{ type: 'json_invalid', loc: ['body', 0], msg: 'JSON decode error', input: {}, ctx: { error: 'Expecting value' } }],
      },
    });
  });
});

describe('null bytes', () => {
  const nulRefused = (field: string, input: string) => ({
    status: 422,
    body: { detail: [{ type: 'value_error', loc: ['body', field], msg: expect.stringContaining('NUL'), input, ctx: { error: {} } }] },
  });

  it('answers 422 value_error to NUL in strings bound for PostgreSQL (brand guides, campaigns)', async () => {
    expect(await send('POST', '/brand-guides/', JSON.stringify({ name: 'a\u0000b' }), JSON_TYPE)).toEqual(nulRefused('name', 'a\u0000b'));
    // In name, from_name and labels the header-safe pattern refuses every control character first, as Pydantic's constraint would.
    expect(await send('POST', '/email-campaigns/', campaign({ description: 'c\u0000' }), JSON_TYPE)).toEqual(
      nulRefused('description', 'c\u0000'),
    );
  });

  it('answers 422 value_error to NUL in identity strings (workspace name, user display name and e-mail)', async () => {
    const email = `nul-${crypto.randomUUID()}@example.com`;
    const answers = await Promise.all([
      send('POST', '/workspaces/', JSON.stringify({ name: 'w\u0000' }), JSON_TYPE),
      send('PUT', `/workspaces/${target.workspaceId}`, JSON.stringify({ name: '\u0000' }), JSON_TYPE),
      send('POST', '/users/', JSON.stringify({ email, display_name: 'u\u0000' }), JSON_TYPE),
      send(
        'POST',
        `/workspaces/${target.workspaceId}/members`,
        JSON.stringify({ email, display_name: 'm\u0000', role: 'viewer' }),
        JSON_TYPE,
      ),
    ]);
    expect(answers).toEqual([
      nulRefused('name', 'w\u0000'),
      nulRefused('name', '\u0000'),
      nulRefused('display_name', 'u\u0000'),
      nulRefused('display_name', 'm\u0000'),
    ]);
    const badEmail = await send('POST', '/users/', JSON.stringify({ email: 'n\u0000@example.com' }), JSON_TYPE);
    expect(badEmail).toMatchObject({
      status: 422,
      body: { detail: [{ type: 'value_error', loc: ['body', 'email'], input: 'n\u0000@example.com' }] },
    });
  });

  it('finds nothing for NUL in list filters', async () => {
    const empty = { status: 200, body: { items: [], total: 0, page: 1, page_size: 50 } };
    const answers = await Promise.all(
      [
        '/brand-guides/?q=a%00b',
        '/email-campaigns/?q=%00',
        '/campaign-events/?email=a%00b',
        '/suppressions/?email=%00',
        '/workspaces/?q=%00',
        '/users/?q=a%00',
      ].map((path) => send('GET', path)),
    );
    expect(answers).toEqual([empty, empty, empty, empty, empty, empty]);
  });

  it('answers 422 uuid_parsing to NUL in a path id', async () => {
    expect(await send('GET', '/brand-guides/%00')).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'uuid_parsing',
            loc: ['path', 'id'],
            msg: expect.stringContaining('Input should be a valid UUID'),
            input: '\u0000',
            ctx: { error: expect.any(String) },
          },
        ],
      },
    });
  });

  it("answers 400 in the API's error shape, and closes, for NUL in a header value, a header name or the raw request line", async () => {
    const head = (requestLine: string, header: string) => `${requestLine}\r\nHost: gateway\r\n${header}\r\nConnection: close\r\n\r\n`;
    expect(await raw(head('GET /brand-guides/ HTTP/1.1', `workspace_id: ${target.workspaceId}\u0000`))).toBe(PARSER_400);
    expect(await raw(head('GET /brand-guides/ HTTP/1.1', `work\u0000space_id: ${target.workspaceId}`))).toBe(PARSER_400);
    expect(await raw(head('GET /brand-guides/\u0000 HTTP/1.1', `workspace_id: ${target.workspaceId}`))).toBe(PARSER_400);
  });
});

describe('invalid percent-encoding', () => {
  const uuidParsing = (input: string) => ({
    status: 422,
    body: {
      detail: [
        {
          type: 'uuid_parsing',
          loc: ['path', 'id'],
          msg: expect.stringContaining('Input should be a valid UUID'),
          input,
          ctx: { error: expect.any(String) },
        },
      ],
    },
  });

  it('validates a path id as Python unquotes it', async () => {
    expect(await send('GET', '/brand-guides/%E0%A4%A')).toEqual(uuidParsing('\ufffd%A'));
    expect(await send('GET', '/brand-guides/%zz')).toEqual(uuidParsing('%zz'));
    expect(await send('GET', '/workspaces/%ff/members')).toEqual(uuidParsing('\ufffd'));
    expect(await send('DELETE', '/suppressions/%ff%40example.com')).toEqual({ status: 404, body: { detail: 'Suppression not found' } });
    expect(await send('DELETE', '/provider-categories/%FF')).toEqual({ status: 404, body: { detail: 'Provider category not found' } });
  });

  it('validates query values as Python unquotes them', async () => {
    expect(await send('GET', '/brand-guides/?page=%E0%A4%A')).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'int_parsing',
            loc: ['query', 'page'],
            msg: 'Input should be a valid integer, unable to parse string as an integer',
            input: '\ufffd%A',
          },
        ],
      },
    });
    expect(await send('GET', '/brand-guides/?q=%zz')).toEqual({ status: 200, body: { items: [], total: 0, page: 1, page_size: 50 } });
  });

  it('answers 404 to an invalid percent-encoding in a path that names no operation', async () => {
    expect(await send('GET', '/brand-%zz-guides/')).toEqual({ status: 404, body: { detail: 'Not Found' } });
    expect(await send('PUT', '/no-such-things/%FF')).toEqual({ status: 404, body: { detail: 'Not Found' } });
  });

  it('answers 405 with the allowed methods to an invalid percent-encoding on a method the path does not have', async () => {
    const cases: [string, string, string][] = [
      ['PUT', '/suppressions/%FF', 'GET, DELETE'],
      ['POST', '/suppressions/%E0%A4%A', 'GET, DELETE'],
      ['PATCH', '/email-campaigns/%FF', 'GET, PUT, DELETE'],
      ['POST', '/workspaces/%ff/members/%zz', 'PUT, DELETE'],
    ];
    for (const [method, path, allow] of cases) {
      const response = await fetch(`${target.gateway}${path}`, { method, headers: { workspace_id: target.workspaceId } });
      expect([method, path, response.status, response.headers.get('allow'), await response.json()]).toEqual([
        method,
        path,
        405,
        allow,
        { detail: 'Method Not Allowed' },
      ]);
    }
  });
});

describe('methods and repeated headers', () => {
  it('answers 405 with the allowed methods to a method the path does not have', async () => {
    const response = await fetch(`${target.gateway}/email-campaigns/`, { method: 'PATCH', headers: { workspace_id: target.workspaceId } });
    expect({ status: response.status, allow: response.headers.get('allow'), body: await response.json() }).toEqual({
      status: 405,
      allow: 'GET, POST',
      body: { detail: 'Method Not Allowed' },
    });
  });

  it('reads the first of two workspace_id header lines', async () => {
    const statusWith = (values: string[]) =>
      new Promise<number>((resolve, reject) => {
        const request = http.request(`${target.gateway}/brand-guides/`, { headers: { workspace_id: values } }, (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        });
        request.on('error', reject);
        request.end();
      });
    expect(await statusWith([target.workspaceId, target.workspaceId])).toBe(200);
    expect(await statusWith([target.workspaceId, 'not-a-uuid'])).toBe(200);
    expect(await statusWith(['not-a-uuid', target.workspaceId])).toBe(422);
  });
});

describe('what Schemathesis found', () => {
  it('answers 422 missing body to a PUT without one (the validator alone would let it through)', async () => {
    const guide = (await send('POST', '/brand-guides/', JSON.stringify({ name: 'no body' }), JSON_TYPE)).body as { id: string };
    expect(await send('PUT', `/brand-guides/${guide.id}`)).toEqual({
      status: 422,
      body: { detail: [{ type: 'missing', loc: ['body'], msg: 'Field required', input: null }] },
    });
  });

  it('answers 422 less_than_equal to a page beyond what gRPC carries (uint32)', async () => {
    expect(await send('GET', '/workspaces/?page=4294967296')).toEqual({
      status: 422,
      body: {
        detail: [
          {
            type: 'less_than_equal',
            loc: ['query', 'page'],
            msg: 'Input should be less than or equal to 4294967295',
            input: '4294967296',
            ctx: { le: 4294967295 },
          },
        ],
      },
    });
  });
});

describe('a burst of 1,000 concurrent requests, valid and invalid', () => {
  // One user, one workspace: past the fair-use limits an answer may also be 429 (gateway/src/limits/fair-use.ts).
  it('answers each with its own 2xx/4xx (or 429 or 503), never another 5xx, and the gateway stays up', async () => {
    const existing = (await send('POST', '/brand-guides/', JSON.stringify({ name: 'burst' }), JSON_TYPE)).body as { id: string };
    const event = (i: number) => ({
      email: `burst-${i}@example.com`,
      event: 'open',
      timestamp: 1_763_719_200,
      sg_event_id: `burst-${crypto.randomUUID()}`,
    });
    const kinds: Array<{ name: string; request: (i: number) => Promise<Answer>; expected: Answer | ((answer: Answer) => void) }> = [
      {
        name: 'list',
        request: () => send('GET', '/brand-guides/?page_size=5'),
        expected: (a) => expect(a).toMatchObject({ status: 200, body: { page_size: 5 } }),
      },
      {
        name: 'read',
        request: () => send('GET', `/brand-guides/${existing.id}`),
        expected: (a) => expect(a).toMatchObject({ status: 200, body: { id: existing.id } }),
      },
      {
        name: 'create',
        request: (i) => send('POST', '/brand-guides/', JSON.stringify({ name: `burst ${i}` }), JSON_TYPE),
        expected: (a) => expect(a).toMatchObject({ status: 201, body: { name: expect.stringMatching(/^burst \d+$/) } }),
      },
      {
        name: 'absent',
        request: () => send('GET', `/brand-guides/${crypto.randomUUID()}`),
        expected: { status: 404, body: { detail: 'Brand guide not found' } },
      },
      {
        name: 'invalid',
        request: () => send('POST', '/brand-guides/', JSON.stringify({ name: 7 }), JSON_TYPE),
        expected: {
          status: 422,
          body: { detail: [{ type: 'string_type', loc: ['body', 'name'], msg: 'Input should be a valid string', input: 7 }] },
        },
      },
      {
        name: 'malformed',
        request: () => send('POST', '/brand-guides/', '{"name":', JSON_TYPE),
        expected: {
          status: 422,
          body: {
            detail: [{ type: 'json_invalid', loc: ['body', 8], msg: 'JSON decode error', input: {}, ctx: { error: 'Expecting value' } }],
          },
        },
      },
      {
        name: 'not utf-8',
        request: () => send('POST', '/brand-guides/', Buffer.from([0x7b, 0xff, 0x7d]), JSON_TYPE),
        expected: PARSE_FAILED,
      },
      {
        name: 'media type',
        request: () => send('POST', '/brand-guides/', 'name=x', { 'content-type': 'text/plain' }),
        expected: {
          status: 422,
          body: {
            detail: [
              {
                type: 'model_attributes_type',
                loc: ['body'],
                msg: 'Input should be a valid dictionary or object to extract fields from',
                input: 'name=x',
              },
            ],
          },
        },
      },
      {
        name: 'webhook',
        request: (i) => send('POST', '/campaign-events/webhook', JSON.stringify([event(i), event(i)]), JSON_TYPE),
        expected: { status: 202, body: { accepted: 2 } },
      },
      {
        name: 'events',
        request: () => send('GET', '/campaign-events/?page_size=5'),
        expected: (a) => expect(a).toMatchObject({ status: 200, body: { page_size: 5 } }),
      },
    ];

    const started = Date.now();
    const outcomes = await Promise.all(
      Array.from({ length: 1000 }, async (_, i) => {
        const kind = kinds[i % kinds.length];
        try {
          return { kind, answer: await kind.request(i) };
        } catch (error) {
          return { kind, error: String((error as Error & { cause?: unknown }).cause ?? error) };
        }
      }),
    );
    const seconds = (Date.now() - started) / 1000;

    const unexpected: string[] = [];
    let unavailable = 0;
    for (const { kind, answer, error } of outcomes) {
      if (!answer) {
        unexpected.push(`${kind.name}: no answer (${error})`);
        continue;
      }
      if (answer.status === 503 || answer.status === 429) {
        unavailable++;
        if (typeof (answer.body as { detail?: unknown })?.detail !== 'string')
          unexpected.push(`${kind.name}: ${answer.status} ${JSON.stringify(answer.body)}`);
        continue;
      }
      try {
        if (typeof kind.expected === 'function') kind.expected(answer);
        else expect(answer).toEqual(kind.expected);
      } catch {
        unexpected.push(`${kind.name}: ${answer.status} ${JSON.stringify(answer.body).slice(0, 300)}`);
      }
    }
    expect(unexpected).toEqual([]);
    expect(unavailable).toBeLessThan(1000);
    expect(seconds).toBeLessThan(60);

    // Still the same gateway process, alive and answering.
    expect(target.stack.pid('gateway')).toBe(gatewayPid);
    expect(() => process.kill(gatewayPid, 0)).not.toThrow();
    expect(await send('GET', '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
  });
});

describe('after all of the above', () => {
  it('is still the same gateway process, answering /healthz', async () => {
    expect(target.stack.pid('gateway')).toBe(gatewayPid);
    expect(await send('GET', '/healthz')).toEqual({ status: 200, body: { status: 'ok' } });
  });
});
