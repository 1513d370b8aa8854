import { signingKey, startGateway, startSignedInGateway, type GatewayProcess, type SignedInGateway } from './identity-harness';

/**
 * A body that fails validation in very many places, under the heap of a
 * small container: the 422 lists the first 1,000 failures, as always, and
 * the gateway neither runs out of memory nor stops answering. (The validator
 * makes an error object for every failure it finds: it is given no more of
 * a list than the failures the answer can report.)
 */
jest.setTimeout(180_000);

type Violation = { type: string; loc: (string | number)[]; msg: string; input?: unknown; ctx?: Record<string, unknown> };

const key = signingKey('rsa-validation-bounds', 'RS256');
const root = { sub: 'root-subject', email: 'root@example.com' };
let auth: SignedInGateway;
let gateway: GatewayProcess;
// Any id until the test's own workspace exists: POST /workspaces/ takes the header too.
let workspaceId: string = crypto.randomUUID();

beforeAll(async () => {
  auth = await startSignedInGateway('gateway_validation_bounds', [key], { bootstrapPlatformAdmins: [root.email] });
  // The heap of a small container: a body failing everywhere must fit in it, several at once.
  gateway = await startGateway({ ...auth.env, NODE_OPTIONS: '--max-old-space-size=160' });
  const created = await send('POST', '/workspaces/', { name: 'validation bounds' });
  expect(created.status).toBe(201);
  workspaceId = ((await created.json()) as { id: string }).id;
});

afterAll(async () => {
  await gateway?.stop();
  await auth?.stop();
});

function send(method: string, path: string, body: unknown): Promise<Response> {
  return fetch(`${gateway.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${auth.idp.token(key, root)}`,
      'content-type': 'application/json',
      workspace_id: workspaceId,
    },
    body: JSON.stringify(body),
  });
}

async function post(path: string, body: unknown): Promise<{ status: number; detail: Violation[] }> {
  const answer = await send('POST', path, body);
  const parsed = (await answer.json()) as { detail: Violation[] };
  return { status: answer.status, detail: parsed.detail };
}

it('answers a list failing in 450,000 places with its first 1,000 failures, several calls at once, and stays up', async () => {
  const body = { workspace_id: workspaceId, name: 'many failures', csv_account_ids: Array(450_000).fill(1), send_priority: 'x' };
  const answers = await Promise.all([1, 2, 3, 4].map(() => post('/email-campaigns/', body)));
  for (const { status, detail } of answers) {
    expect(status).toBe(422);
    expect(detail).toHaveLength(1_000);
    // The model's fields in their order: send_priority comes before csv_account_ids.
    expect(detail[0]).toMatchObject({ type: 'int_parsing', loc: ['body', 'send_priority'] });
    expect(detail[1]).toMatchObject({ type: 'string_type', loc: ['body', 'csv_account_ids', 0], input: 1 });
    expect(detail[999]).toMatchObject({ type: 'string_type', loc: ['body', 'csv_account_ids', 998] });
  }
  expect((await fetch(`${gateway.url}/healthz`)).status).toBe(200);
});

it('reports the same first failures whether a list fails in a thousand places or in far more', async () => {
  const valid = (count: number) => Array.from({ length: count }, (_, i) => `account-${i}`);
  // Valid items between the failing ones, and a failure in another field ordered after the list.
  const list = (failures: number) => [...valid(3), ...Array.from({ length: failures }, (_, i) => (i % 2 === 0 ? i : true)), 'last'];
  const small = await post('/email-campaigns/', { name: 'n', csv_account_ids: list(1_001), send_priority: 'x' });
  const large = await post('/email-campaigns/', { name: 'n', csv_account_ids: list(120_000), send_priority: 'x' });
  expect(small.status).toBe(422);
  expect(large.status).toBe(422);
  // What each entry says; an entry about the whole body quotes it, so inputs are compared for the list's items.
  const said = (detail: Violation[]) =>
    detail.map(({ type, loc, msg, input }) => ({ type, loc, msg, ...(loc[1] === 'csv_account_ids' ? { input } : {}) }));
  expect(said(large.detail)).toEqual(said(small.detail));
  expect(said(large.detail)).toContainEqual({
    type: 'string_type',
    loc: ['body', 'csv_account_ids', 3],
    msg: 'Input should be a valid string',
    input: 0,
  });
});

it('reports a list past its maxItems as too long, with its real length, however long it is', async () => {
  const { status, detail } = await post('/email-campaigns/', {
    name: 'n',
    csv_account_ids: ['a'],
    delivery_mode: 'variants',
    variants: Array(200_000).fill(1),
  });
  expect(status).toBe(422);
  const tooLong = detail.find((violation) => violation.type === 'too_long');
  expect(tooLong).toMatchObject({ loc: ['body', 'variants'], ctx: { max_length: 20, actual_length: 200_000 } });
  expect(detail.filter((violation) => violation.loc[1] === 'variants')).toHaveLength(1);
});
