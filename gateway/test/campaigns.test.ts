import { LEGITIMATE_SELECTS, REFUSED_QUERIES } from '../../services/common/test/select-statement-queries';
import { requestJson, startGatewayStack, type GatewayStack } from './support/stack';
import type { JsonObject } from './support/json';

/**
 * /email-campaigns/ end to end: the gateway's whole request pipeline
 * (in-process, DEV_AUTH_ENABLED=1: the dev user is platform admin) against
 * the real identity and campaign processes started by startStack on a
 * private database. (The gateway process itself waits for every dependency,
 * analytics included, before it reports ready; this area needs none of them.)
 */

let gateway: GatewayStack;
let gatewayUrl: string;
let workspaceA: string;
let workspaceB: string;

beforeAll(async () => {
  gateway = await startGatewayStack({
    label: 'campaigns',
    processes: ['identity', 'campaign', 'brand-guide'],
    workspaces: ['Campaigns A', 'Campaigns B'],
  });
  gatewayUrl = gateway.url;
  [workspaceA, workspaceB] = gateway.workspaces;
}, 120_000);

afterAll(async () => {
  await gateway?.close();
});

async function api(method: string, route: string, body?: unknown, workspace: string | null = workspaceA) {
  return requestJson(gatewayUrl, method, route, body, workspace);
}

async function create(fields: JsonObject = {}): Promise<JsonObject> {
  const answer = await api('POST', '/email-campaigns/', { workspace_id: workspaceA, name: 'Campaign', ...fields });
  expect(answer.status).toBe(201);
  return answer.body;
}

const put = (id: string, body: JsonObject, workspace = workspaceA) => api('PUT', `/email-campaigns/${id}`, body, workspace);

const ID = expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
const TIMESTAMP = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

/** Every field of the write shape set to something other than its default. */
const FULL: JsonObject = {
  name: 'Spring sale',
  description: 'Everything must go',
  is_active: false,
  send_priority: 7,
  track_opens: false,
  track_clicks: false,
  schedule_cron: '30 8 * * MON',
  recipient_source: 'csv_account_ids',
  mssql_query: 'SELECT TOP 10 a.id FROM dbo.accounts a WITH (NOLOCK) JOIN dbo.subs s ON s.account_id = a.id',
  csv_account_ids: ['acc-1', 'acc-2'],
  provider_category_id: 'spring-sale',
  from_email: 'news@example.com',
  from_name: 'Newsroom',
  reply_to: 'replies@example.com',
  delivery_mode: 'variants',
  template_id: 'tpl-main',
  ab_test: { test_fraction: 0.3, wait_minutes: 60, metric: 'click_rate' },
};

/** The OpenAPI document's pattern for text that can end up in a mail header: no C0 control character, no DEL. */
const HEADER_SAFE_PATTERN = '^[^\\x00-\\x1f\\x7f]*$';

function patternMismatch(loc: (string | number)[], input: string): JsonObject {
  return {
    type: 'string_pattern_mismatch',
    loc,
    msg: `String should match pattern '${HEADER_SAFE_PATTERN}'`,
    input,
    ctx: { pattern: HEADER_SAFE_PATTERN },
  };
}

function valueError(loc: (string | number)[], input: unknown, message: string): JsonObject {
  return { type: 'value_error', loc, msg: `Value error, ${message}`, input, ctx: { error: {} } };
}

/** A cron expression and a query the service rejects, with what it answers for each. */
const BAD_CRON = '* * *';
const BAD_CRON_ERROR = valueError(
  ['body', 'schedule_cron'],
  BAD_CRON,
  'invalid cron expression: expected 5 fields (minute hour day-of-month month day-of-week), got 3',
);
const BAD_QUERY = 'DELETE FROM t';
const BAD_QUERY_ERROR = valueError(
  ['body', 'mssql_query'],
  BAD_QUERY,
  'mssql_query must be a single read-only SELECT statement; DELETE is not allowed',
);

describe('create and read', () => {
  it('answers 201 with every default when only workspace_id and name are given', async () => {
    const answer = await api('POST', '/email-campaigns/', { workspace_id: workspaceA, name: 'Minimal' });
    expect(answer.status).toBe(201);
    expect(answer.body).toEqual({
      id: ID,
      workspace_id: workspaceA,
      name: 'Minimal',
      description: null,
      is_active: true,
      send_priority: 100,
      track_opens: true,
      track_clicks: true,
      schedule_cron: null,
      recipient_source: 'mssql_query',
      mssql_query: null,
      csv_account_ids: null,
      provider_category_id: null,
      from_email: null,
      from_name: null,
      reply_to: null,
      delivery_mode: 'single_template',
      template_id: null,
      ab_test: null,
      variants: null,
      created_at: TIMESTAMP,
      updated_at: answer.body.created_at,
      next_run_at: null,
    });
    expect(await api('GET', `/email-campaigns/${answer.body.id}`)).toMatchObject({ status: 200, body: answer.body });
  });

  it('round-trips every field exactly through GET', async () => {
    const input = {
      workspace_id: workspaceA,
      ...FULL,
      variants: [
        { template_id: 'tpl-a', weight: 3, label: 'A', is_active: true },
        { template_id: 'tpl-b', weight: 0, label: null, is_active: false },
        { template_id: 'tpl-c' },
      ],
    };
    const created = await api('POST', '/email-campaigns/', input);
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      ...input,
      id: ID,
      variants: [
        { id: ID, template_id: 'tpl-a', weight: 3, label: 'A', is_active: true },
        { id: ID, template_id: 'tpl-b', weight: 0, label: null, is_active: false },
        { id: ID, template_id: 'tpl-c', weight: 1, label: null, is_active: true },
      ],
      created_at: TIMESTAMP,
      updated_at: TIMESTAMP,
      next_run_at: TIMESTAMP,
    });
    const next = new Date(created.body.next_run_at);
    expect(next.getTime()).toBeGreaterThan(Date.now());
    expect([next.getUTCDay(), next.getUTCHours(), next.getUTCMinutes(), next.getUTCSeconds()]).toEqual([1, 8, 30, 0]);
    const read = await api('GET', `/email-campaigns/${created.body.id}`);
    expect(read.body).toEqual(created.body);
  });

  it('keeps an empty variant list apart from none', async () => {
    const campaign = await create({ variants: [] });
    expect(campaign.variants).toEqual([]);
    expect((await api('GET', `/email-campaigns/${campaign.id}`)).body.variants).toEqual([]);
  });

  it('lists newest first, paged, filtered by is_active and a name substring', async () => {
    const workspace = workspaceB;
    const made: string[] = [];
    for (const [name, is_active] of [
      ['Weekly news', true],
      ['Daily NEWS', false],
      ['Promo', true],
    ] as const) {
      made.push((await api('POST', '/email-campaigns/', { workspace_id: workspace, name, is_active }, workspace)).body.name);
    }
    const list = await api('GET', '/email-campaigns/?page=1&page_size=2', undefined, workspace);
    expect(list.status).toBe(200);
    expect(list.body).toMatchObject({ total: 3, page: 1, page_size: 2 });
    expect(list.body.items.map((c: JsonObject) => c.name)).toEqual(['Promo', 'Daily NEWS']);
    expect(
      (await api('GET', '/email-campaigns/?page=2&page_size=2', undefined, workspace)).body.items.map((c: JsonObject) => c.name),
    ).toEqual(['Weekly news']);
    const filtered = await api('GET', '/email-campaigns/?q=news&is_active=true', undefined, workspace);
    expect(filtered.body).toEqual({ items: [expect.objectContaining({ name: 'Weekly news' })], total: 1, page: 1, page_size: 50 });
    expect((await api('GET', '/email-campaigns/?q=NEWS', undefined, workspace)).body.total).toBe(2);
    expect((await api('GET', '/email-campaigns/?is_active=false', undefined, workspace)).body.items.map((c: JsonObject) => c.name)).toEqual(
      ['Daily NEWS'],
    );
    const redirect = await api('GET', '/email-campaigns?q=news', undefined, workspace);
    expect(redirect.status).toBe(307);
    expect(redirect.headers.get('location')).toBe('/email-campaigns/?q=news');
    expect(redirect.headers.get('content-length')).toBe('0');
  });

  it('answers 404 for a campaign of another workspace, on every verb', async () => {
    const campaign = await create({ name: 'Private' });
    const notFound = { status: 404, body: { detail: 'Campaign not found' } };
    expect(await api('GET', `/email-campaigns/${campaign.id}`, undefined, workspaceB)).toMatchObject(notFound);
    expect(await put(campaign.id, { name: 'Stolen' }, workspaceB)).toMatchObject(notFound);
    expect(await api('DELETE', `/email-campaigns/${campaign.id}`, undefined, workspaceB)).toMatchObject(notFound);
    expect((await api('GET', `/email-campaigns/${campaign.id}`)).body.name).toBe('Private');
  });

  it('deletes with 204, then answers 404', async () => {
    const campaign = await create();
    const deleted = await api('DELETE', `/email-campaigns/${campaign.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expect(await api('GET', `/email-campaigns/${campaign.id}`)).toMatchObject({ status: 404, body: { detail: 'Campaign not found' } });
  });

  it('accepts the bounds of every ranged field', async () => {
    const name = 'n'.repeat(200);
    const campaign = await create({ name, send_priority: 1000, variants: [{ template_id: 't', weight: 10000 }] });
    expect(campaign).toMatchObject({ name, send_priority: 1000, variants: [{ weight: 10000 }] });
    expect((await create({ send_priority: 0 })).send_priority).toBe(0);
  });

  it('gives a provider_category_id to one of many concurrent creates, 409 to the others', async () => {
    const attempts = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        api('POST', '/email-campaigns/', { workspace_id: workspaceA, name: `racer ${i}`, provider_category_id: 'raced-category' }),
      ),
    );
    expect(attempts.map((attempt) => attempt.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
  });

  it('answers 409 for a provider_category_id used anywhere, on create and on update', async () => {
    await create({ provider_category_id: 'taken-category' });
    const conflict = { status: 409, body: { detail: 'Another campaign already uses this provider_category_id' } };
    expect(
      await api('POST', '/email-campaigns/', { workspace_id: workspaceB, name: 'x', provider_category_id: 'taken-category' }, workspaceB),
    ).toEqual(expect.objectContaining(conflict));
    const other = await create();
    expect(await put(other.id, { provider_category_id: 'taken-category' })).toMatchObject(conflict);
  });
});

describe('update', () => {
  it('leaves omitted fields unchanged', async () => {
    const campaign = await create({ ...FULL, provider_category_id: 'put-omitted' });
    const answer = await put(campaign.id, { name: 'Renamed' });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...campaign, name: 'Renamed', updated_at: TIMESTAMP, next_run_at: TIMESTAMP });
    expect(answer.body.updated_at > campaign.updated_at).toBe(true);
    expect(await put(campaign.id, {})).toMatchObject({ status: 200, body: { ...answer.body, updated_at: TIMESTAMP } });
  });

  it('clears each nullable field sent as null', async () => {
    const campaign = await create({ ...FULL, provider_category_id: 'put-clears', variants: [{ template_id: 't' }] });
    const nullable = [
      'description',
      'schedule_cron',
      'mssql_query',
      'csv_account_ids',
      'provider_category_id',
      'from_email',
      'from_name',
      'reply_to',
      'template_id',
      'variants',
    ];
    const answer = await put(campaign.id, Object.fromEntries(nullable.map((field) => [field, null])));
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({
      ...campaign,
      ...Object.fromEntries(nullable.map((field) => [field, null])),
      updated_at: TIMESTAMP,
      next_run_at: null,
    });
  });

  it('leaves fields that cannot be null unchanged when sent as null', async () => {
    const campaign = await create({ ...FULL, provider_category_id: 'put-not-null' });
    const answer = await put(campaign.id, {
      workspace_id: null,
      name: null,
      is_active: null,
      send_priority: null,
      track_opens: null,
      track_clicks: null,
      recipient_source: null,
      delivery_mode: null,
    });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...campaign, updated_at: TIMESTAMP, next_run_at: TIMESTAMP });
  });

  it('writes every field given a value', async () => {
    const campaign = await create();
    const answer = await put(campaign.id, { workspace_id: workspaceA, ...FULL, provider_category_id: 'put-all', variants: [] });
    expect(answer.body).toEqual({
      ...campaign,
      ...FULL,
      provider_category_id: 'put-all',
      variants: [],
      updated_at: TIMESTAMP,
      next_run_at: TIMESTAMP,
    });
  });

  it('adds, rewrites and removes variants in one PUT', async () => {
    const campaign = await create({
      delivery_mode: 'variants',
      variants: [{ template_id: 'keep', weight: 2, label: 'K' }, { template_id: 'drop' }, { template_id: 'rewrite', label: 'old' }],
    });
    const [keep, drop, rewrite] = campaign.variants;
    const answer = await put(campaign.id, {
      variants: [
        { template_id: 'added', weight: 9 },
        { id: rewrite.id, template_id: 'rewritten', weight: 4, label: null, is_active: false },
        { id: keep.id, template_id: 'keep', weight: 2, label: 'K' },
      ],
    });
    expect(answer.status).toBe(200);
    expect(answer.body.variants).toEqual([
      { id: ID, template_id: 'added', weight: 9, label: null, is_active: true },
      { id: rewrite.id, template_id: 'rewritten', weight: 4, label: null, is_active: false },
      keep,
    ]);
    expect(answer.body.variants.map((v: JsonObject) => v.id)).not.toContain(drop.id);
    expect((await api('GET', `/email-campaigns/${campaign.id}`)).body.variants).toEqual(answer.body.variants);
  });

  it('updates only the fields a variant item with an id gives: omitted unchanged, null clears the label only', async () => {
    const campaign = await create({
      variants: [
        { template_id: 't1', weight: 7, label: 'A', is_active: false },
        { template_id: 't2', label: 'B' },
      ],
    });
    const [first, second] = campaign.variants;
    const answer = await put(campaign.id, {
      variants: [
        { id: first.id, weight: 3 },
        { id: second.id, template_id: null, weight: null, label: null, is_active: null },
      ],
    });
    expect(answer.status).toBe(200);
    expect(answer.body.variants).toEqual([
      { ...first, weight: 3 },
      { ...second, label: null },
    ]);
  });

  it('requires template_id of a new variant item on PUT, with the item as input', async () => {
    const campaign = await create({ variants: [] });
    expect(await put(campaign.id, { variants: [{ weight: 2, label: 'x' }] })).toMatchObject({
      status: 422,
      body: {
        detail: [{ type: 'missing', loc: ['body', 'variants', 0, 'template_id'], msg: 'Field required', input: { weight: 2, label: 'x' } }],
      },
    });
  });

  it('refuses a variant id of another campaign with 422, changing nothing', async () => {
    const mine = await create({ name: 'Mine', variants: [{ template_id: 'mine' }] });
    const theirs = await create({ name: 'Theirs', variants: [{ template_id: 'theirs' }] });
    const foreign = theirs.variants[0].id;
    const answer = await put(mine.id, { name: 'Changed', variants: [{ template_id: 'x' }, { id: foreign, template_id: 'y' }] });
    expect(answer).toMatchObject({
      status: 422,
      body: { detail: [valueError(['body', 'variants', 1, 'id'], foreign, `variant ${foreign} does not belong to this campaign`)] },
    });
    expect((await api('GET', `/email-campaigns/${mine.id}`)).body).toEqual(mine);
  });

  it('keeps a true is_active sent as null, and the variants when the key is omitted', async () => {
    const campaign = await create({
      is_active: true,
      delivery_mode: 'variants',
      variants: [{ template_id: 'a', weight: 3, label: 'A' }, { template_id: 'b' }],
    });
    const answer = await put(campaign.id, { is_active: null, name: 'Renamed' });
    expect(answer.status).toBe(200);
    expect(answer.body).toEqual({ ...campaign, name: 'Renamed', updated_at: TIMESTAMP });
    expect((await api('GET', `/email-campaigns/${campaign.id}`)).body.variants).toEqual(campaign.variants);
  });

  it('refuses a variant id that exists nowhere, or one listed twice, with 422', async () => {
    const campaign = await create({ variants: [{ template_id: 'only' }] });
    const own = campaign.variants[0].id;
    const unknown = '00000000-0000-4000-8000-000000000000';
    const unknownAnswer = await put(campaign.id, { variants: [{ id: unknown, template_id: 'x' }] });
    expect([unknownAnswer.status, unknownAnswer.body]).toEqual([
      422,
      { detail: [valueError(['body', 'variants', 0, 'id'], unknown, `variant ${unknown} does not belong to this campaign`)] },
    ]);
    const twiceAnswer = await put(campaign.id, {
      variants: [
        { id: own, template_id: 'x' },
        { id: own, template_id: 'y' },
      ],
    });
    expect([twiceAnswer.status, twiceAnswer.body]).toEqual([
      422,
      { detail: [valueError(['body', 'variants', 1, 'id'], own, `variant ${own} is listed more than once`)] },
    ]);
    expect((await api('GET', `/email-campaigns/${campaign.id}`)).body).toEqual(campaign);
  });

  it('changes nothing, variants included, when a PUT meets a taken provider_category_id', async () => {
    await create({ provider_category_id: 'taken-by-put' });
    const campaign = await create({ name: 'Before', variants: [{ template_id: 'before' }] });
    const answer = await put(campaign.id, { name: 'After', provider_category_id: 'taken-by-put', variants: [{ template_id: 'after' }] });
    expect(answer).toMatchObject({ status: 409 });
    expect((await api('GET', `/email-campaigns/${campaign.id}`)).body).toEqual(campaign);
  });

  it('refuses a body workspace_id other than the header, on PUT and POST', async () => {
    const campaign = await create();
    const mismatch = { detail: [valueError(['body', 'workspace_id'], workspaceB, 'workspace_id must match the workspace_id header')] };
    expect(await put(campaign.id, { workspace_id: workspaceB })).toMatchObject({ status: 422, body: mismatch });
    const posted = await api('POST', '/email-campaigns/', { workspace_id: workspaceB, name: 'x' });
    expect(posted).toMatchObject({ status: 422, body: mismatch });
    // Keys in Pydantic's order, whichever service found the error.
    expect(Object.keys(posted.body.detail[0])).toEqual(['type', 'loc', 'msg', 'input', 'ctx']);
    expect((await put(campaign.id, { workspace_id: workspaceA, name: 'Same workspace' })).status).toBe(200);
  });

  it('never leaves the variants of two concurrent PUTs mixed', async () => {
    const campaign = await create({ delivery_mode: 'variants', variants: [{ template_id: 'seed' }] });
    const list = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ template_id: `${prefix}-${i}`, label: prefix }));
    const origin = (variants: JsonObject[]) => new Set(variants.map((v) => v.label));
    for (let pair = 0; pair < 20; pair++) {
      const answers = await Promise.all([put(campaign.id, { variants: list('a', 3) }), put(campaign.id, { variants: list('b', 2) })]);
      for (const answer of answers) expect(origin(answer.body.variants).size).toBe(1);
      const stored = (await api('GET', `/email-campaigns/${campaign.id}`)).body.variants as JsonObject[];
      expect(origin(stored).size).toBe(1);
      expect(stored).toHaveLength(stored[0].label === 'a' ? 3 : 2);
    }
  });
});

describe('validation', () => {
  const post = (fields: JsonObject) => api('POST', '/email-campaigns/', { workspace_id: workspaceA, name: 'Valid', ...fields });

  it.each<[string, JsonObject, JsonObject]>([
    [
      'an empty name',
      { name: '' },
      {
        type: 'string_too_short',
        loc: ['body', 'name'],
        msg: 'String should have at least 1 character',
        input: '',
        ctx: { min_length: 1 },
      },
    ],
    [
      'a name over 200 characters',
      { name: 'n'.repeat(201) },
      {
        type: 'string_too_long',
        loc: ['body', 'name'],
        msg: 'String should have at most 200 characters',
        input: 'n'.repeat(201),
        ctx: { max_length: 200 },
      },
    ],
    [
      'a negative send_priority',
      { send_priority: -1 },
      {
        type: 'greater_than_equal',
        loc: ['body', 'send_priority'],
        msg: 'Input should be greater than or equal to 0',
        input: -1,
        ctx: { ge: 0 },
      },
    ],
    [
      'a send_priority over 1000',
      { send_priority: 1001 },
      {
        type: 'less_than_equal',
        loc: ['body', 'send_priority'],
        msg: 'Input should be less than or equal to 1000',
        input: 1001,
        ctx: { le: 1000 },
      },
    ],
    [
      'a 6-field cron',
      { schedule_cron: '0 0 9 * * MON' },
      valueError(
        ['body', 'schedule_cron'],
        '0 0 9 * * MON',
        'invalid cron expression: expected 5 fields (minute hour day-of-month month day-of-week), got 6',
      ),
    ],
    [
      'a garbage cron',
      { schedule_cron: 'every monday' },
      valueError(
        ['body', 'schedule_cron'],
        'every monday',
        'invalid cron expression: expected 5 fields (minute hour day-of-month month day-of-week), got 2',
      ),
    ],
    [
      'an out-of-range cron field',
      { schedule_cron: '61 * * * *' },
      valueError(['body', 'schedule_cron'], '61 * * * *', 'invalid cron expression: Constraint error, got value 61 expected range 0-59'),
    ],
    [
      'a from_email without @',
      { from_email: 'news.example.com' },
      {
        type: 'value_error',
        loc: ['body', 'from_email'],
        msg: 'value is not a valid email address: An email address must have an @-sign.',
        input: 'news.example.com',
        ctx: { reason: 'An email address must have an @-sign.' },
      },
    ],
    [
      'a reply_to without a domain period',
      { reply_to: 'replies@localhost' },
      {
        type: 'value_error',
        loc: ['body', 'reply_to'],
        msg: 'value is not a valid email address: The part after the @-sign is not valid. It should have a period.',
        input: 'replies@localhost',
        ctx: { reason: 'The part after the @-sign is not valid. It should have a period.' },
      },
    ],
    [
      'an unknown recipient_source',
      { recipient_source: 'ldap' },
      {
        type: 'enum',
        loc: ['body', 'recipient_source'],
        msg: "Input should be 'mssql_query' or 'csv_account_ids'",
        input: 'ldap',
        ctx: { expected: "'mssql_query' or 'csv_account_ids'" },
      },
    ],
    [
      'an unknown delivery_mode',
      { delivery_mode: 'random' },
      {
        type: 'enum',
        loc: ['body', 'delivery_mode'],
        msg: "Input should be 'single_template' or 'variants'",
        input: 'random',
        ctx: { expected: "'single_template' or 'variants'" },
      },
    ],
    [
      'a variant without template_id',
      { variants: [{ weight: 1 }] },
      { type: 'missing', loc: ['body', 'variants', 0, 'template_id'], msg: 'Field required', input: { weight: 1 } },
    ],
    [
      'a variant with an empty template_id',
      { variants: [{ template_id: '' }] },
      {
        type: 'string_too_short',
        loc: ['body', 'variants', 0, 'template_id'],
        msg: 'String should have at least 1 character',
        input: '',
        ctx: { min_length: 1 },
      },
    ],
    [
      'a negative variant weight',
      { variants: [{ template_id: 't', weight: -1 }] },
      {
        type: 'greater_than_equal',
        loc: ['body', 'variants', 0, 'weight'],
        msg: 'Input should be greater than or equal to 0',
        input: -1,
        ctx: { ge: 0 },
      },
    ],
    [
      'a variant weight over 10000',
      { variants: [{ template_id: 't', weight: 10001 }] },
      {
        type: 'less_than_equal',
        loc: ['body', 'variants', 0, 'weight'],
        msg: 'Input should be less than or equal to 10000',
        input: 10001,
        ctx: { le: 10000 },
      },
    ],
    [
      'a fractional variant weight',
      { variants: [{ template_id: 't', weight: 1.5 }] },
      {
        type: 'int_from_float',
        loc: ['body', 'variants', 0, 'weight'],
        msg: 'Input should be a valid integer, got a number with a fractional part',
        input: 1.5,
      },
    ],
    [
      'a provider_category_id over 255 characters',
      { provider_category_id: 'c'.repeat(256) },
      {
        type: 'string_too_long',
        loc: ['body', 'provider_category_id'],
        msg: 'String should have at most 255 characters',
        input: 'c'.repeat(256),
        ctx: { max_length: 255 },
      },
    ],
  ])('refuses %s with one exact entry', async (_case, fields, entry) => {
    expect(await post(fields)).toMatchObject({ status: 422, body: { detail: [entry] } });
  });

  it('answers 422, not 500, for NUL characters, which Postgres text cannot hold', async () => {
    expect(await post({ description: 'News\u0000room' })).toMatchObject({
      status: 422,
      body: { detail: [valueError(['body', 'description'], 'News\u0000room', 'text must not contain NUL (\\u0000) characters')] },
    });
    expect(await api('GET', '/email-campaigns/?q=news%00')).toMatchObject({ status: 200, body: { items: [], total: 0 } });
  });

  it('reports a missing name and workspace_id with the body as input', async () => {
    expect(await api('POST', '/email-campaigns/', { description: 'd' })).toMatchObject({
      status: 422,
      body: {
        detail: [
          { type: 'missing', loc: ['body', 'workspace_id'], msg: 'Field required', input: { description: 'd' } },
          { type: 'missing', loc: ['body', 'name'], msg: 'Field required', input: { description: 'd' } },
        ],
      },
    });
  });

  it('reports every semantic failure at once, on PUT too', async () => {
    const campaign = await create();
    const answer = await put(campaign.id, { schedule_cron: BAD_CRON, mssql_query: BAD_QUERY, reply_to: 'a@b.c' });
    expect(answer).toMatchObject({ status: 422, body: { detail: [BAD_CRON_ERROR, BAD_QUERY_ERROR] } });
  });

  it('reports type, range, pattern, format, cron, query and NUL failures together, in field order', async () => {
    const body = {
      name: 'n'.repeat(201),
      description: 'd\u0000',
      send_priority: 1001,
      schedule_cron: BAD_CRON,
      mssql_query: BAD_QUERY,
      from_email: 'nope',
      from_name: 'a\u0000b',
      variants: [{ template_id: 't', weight: -1, label: 'l\n' }],
    };
    const expected = [
      { type: 'string_too_long', loc: ['body', 'name'] },
      valueError(['body', 'description'], 'd\u0000', 'text must not contain NUL (\\u0000) characters'),
      { type: 'less_than_equal', loc: ['body', 'send_priority'] },
      BAD_CRON_ERROR,
      BAD_QUERY_ERROR,
      { type: 'value_error', loc: ['body', 'from_email'] },
      patternMismatch(['body', 'from_name'], 'a\u0000b'),
      { type: 'greater_than_equal', loc: ['body', 'variants', 0, 'weight'] },
      patternMismatch(['body', 'variants', 0, 'label'], 'l\n'),
    ];
    const created = await post(body);
    expect(created).toMatchObject({ status: 422, body: { detail: expected } });
    expect(created.body.detail).toHaveLength(expected.length);
    const campaign = await create();
    const updated = await put(campaign.id, body);
    expect(updated).toMatchObject({ status: 422, body: { detail: expected } });
    expect(updated.body.detail).toHaveLength(expected.length);
  });

  it.each([
    ['a CR LF in from_name', { from_name: 'News\r\nBcc: all@example.com' }, 'from_name'],
    ['a LF at the end of from_name', { from_name: 'News\n' }, 'from_name'],
    ['a tab in the name', { name: 'Spring\tsale' }, 'name'],
    ['DEL in the name', { name: 'Spring\u007f' }, 'name'],
  ])('refuses %s, which could forge a mail header', async (_case, fields, field) => {
    const entry = patternMismatch(['body', field], Object.values(fields)[0]);
    expect(await post(fields)).toMatchObject({ status: 422, body: { detail: [entry] } });
    const campaign = await create();
    expect(await put(campaign.id, fields)).toMatchObject({ status: 422, body: { detail: [entry] } });
  });

  it('refuses a control character in a variant label, on create and update', async () => {
    const variants = [{ template_id: 't', label: 'A\r\nB' }];
    const entry = patternMismatch(['body', 'variants', 0, 'label'], 'A\r\nB');
    expect(await post({ variants })).toMatchObject({ status: 422, body: { detail: [entry] } });
    const campaign = await create();
    expect(await put(campaign.id, { variants })).toMatchObject({ status: 422, body: { detail: [entry] } });
  });

  it('takes names, sender names and labels with any printable text', async () => {
    const text = 'Ünïcödé — "quoted" <news> 😀';
    const created = await post({ name: text, from_name: text, variants: [{ template_id: 't', label: text }] });
    expect(created).toMatchObject({ status: 201, body: { name: text, from_name: text, variants: [{ label: text }] } });
  });

  it('takes up to 20 variants and refuses 21 as too long, on create and update', async () => {
    const variants = (n: number) => Array.from({ length: n }, (_, i) => ({ template_id: `t-${i}` }));
    const created = await post({ variants: variants(20) });
    expect(created.status).toBe(201);
    expect(created.body.variants).toHaveLength(20);
    const tooLong = {
      type: 'too_long',
      loc: ['body', 'variants'],
      msg: 'List should have at most 20 items after validation, not 21',
      input: variants(21),
      ctx: { field_type: 'List', max_length: 20, actual_length: 21 },
    };
    expect(await post({ variants: variants(21) })).toMatchObject({ status: 422, body: { detail: [tooLong] } });
    expect(await put(created.body.id, { variants: variants(21) })).toMatchObject({ status: 422, body: { detail: [tooLong] } });
    expect((await api('GET', `/email-campaigns/${created.body.id}`)).body.variants).toHaveLength(20);
    // As Pydantic, which stops at the 21st item: the too-long list alone, none of its items' errors.
    const badItems = Array.from({ length: 21 }, () => ({ weight: 'heavy' }));
    expect(await post({ variants: badItems })).toMatchObject({
      status: 422,
      body: { detail: [{ ...tooLong, input: badItems }] },
    });
    expect((await post({ variants: badItems })).body.detail).toHaveLength(1);
  });

  it('reports a query over the length limit as too long, without parsing it', async () => {
    const long = `SELECT 1; DROP TABLE t; ${'-'.repeat(20_000)}`;
    expect(await post({ mssql_query: long })).toMatchObject({
      status: 422,
      body: { detail: [{ type: 'string_too_long', loc: ['body', 'mssql_query'], ctx: { max_length: 20_000 } }] },
    });
  });

  it.each(REFUSED_QUERIES)('refuses the recipient query %j', async (sql, reason) => {
    expect(await post({ mssql_query: sql })).toMatchObject({
      status: 422,
      body: { detail: [valueError(['body', 'mssql_query'], sql, `mssql_query must be a single read-only SELECT statement; ${reason}`)] },
    });
  });

  it('accepts every legitimate SELECT', async () => {
    const refused: JsonObject[] = [];
    for (const sql of LEGITIMATE_SELECTS) {
      const answer = await post({ mssql_query: sql });
      if (answer.status !== 201 || answer.body.mssql_query !== sql) refused.push({ sql, answer: answer.body });
    }
    expect(refused).toEqual([]);
  });
});

describe('ab_test', () => {
  it('fills the omitted members with their defaults and is cleared by null', async () => {
    const created = await api('POST', '/email-campaigns/', {
      workspace_id: workspaceA,
      name: 'AB',
      delivery_mode: 'variants',
      ab_test: { wait_minutes: 30 },
    });
    expect(created.status).toBe(201);
    expect(created.body.ab_test).toEqual({ test_fraction: 0.2, wait_minutes: 30, metric: 'open_rate' });
    const replaced = await put(created.body.id as string, { ab_test: { metric: 'click_rate' } });
    expect(replaced.body.ab_test).toEqual({ test_fraction: 0.2, wait_minutes: 240, metric: 'click_rate' });
    expect((await put(created.body.id as string, { name: 'Renamed' })).body.ab_test).toEqual(replaced.body.ab_test);
    expect((await put(created.body.id as string, { ab_test: null })).body.ab_test).toBeNull();
  });

  it('answers 422 without delivery_mode variants, on create and when an update would leave it so', async () => {
    const single = await api('POST', '/email-campaigns/', { workspace_id: workspaceA, name: 'AB single', ab_test: {} });
    expect(single.status).toBe(422);
    const abDefaults = { test_fraction: 0.2, wait_minutes: 240, metric: 'open_rate' };
    expect(single.body.detail).toEqual([valueError(['body', 'ab_test'], abDefaults, 'ab_test needs delivery_mode variants')]);
    const created = await api('POST', '/email-campaigns/', {
      workspace_id: workspaceA,
      name: 'AB',
      delivery_mode: 'variants',
      ab_test: {},
    });
    const switched = await put(created.body.id as string, { delivery_mode: 'single_template' });
    expect(switched.status).toBe(422);
    expect((await api('GET', `/email-campaigns/${created.body.id as string}`)).body.delivery_mode).toBe('variants');
    const plain = await api('POST', '/email-campaigns/', { workspace_id: workspaceA, name: 'Plain' });
    expect((await put(plain.body.id as string, { ab_test: { test_fraction: 0.1 } })).status).toBe(422);
    expect((await put(plain.body.id as string, { ab_test: { test_fraction: 0.1 }, delivery_mode: 'variants' })).status).toBe(200);
  });

  it('bounds test_fraction, wait_minutes and metric', async () => {
    const answer = await api('POST', '/email-campaigns/', {
      workspace_id: workspaceA,
      name: 'AB bounds',
      delivery_mode: 'variants',
      ab_test: { test_fraction: 0.6, wait_minutes: 0, metric: 'bounce_rate' },
    });
    expect(answer.status).toBe(422);
    expect((answer.body.detail as JsonObject[]).map((entry) => [entry.loc, entry.type])).toEqual([
      [['body', 'ab_test', 'test_fraction'], 'less_than_equal'],
      [['body', 'ab_test', 'wait_minutes'], 'greater_than_equal'],
      [['body', 'ab_test', 'metric'], 'enum'],
    ]);
  });
});
