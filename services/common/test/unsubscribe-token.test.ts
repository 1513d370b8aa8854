import { createHmac } from 'node:crypto';
import { signUnsubscribeToken, verifyUnsubscribeToken, type UnsubscribeClaims } from '../src/unsubscribe-token';

const KEY = 'test-signing-key-0123456789abcdef';
const CLAIMS: UnsubscribeClaims = {
  workspaceId: '0b6b5b8e-8a55-4c0e-9d3c-000000000001',
  campaignId: '9f1c2d3e-4b5a-4c6d-8e7f-000000000002',
  runId: '7a8b9c0d-1e2f-4a3b-9c4d-000000000003',
  email: 'ada.lovelace+news@example.com',
};

it('round-trips the claims through a URL-safe token', () => {
  const token = signUnsubscribeToken(KEY, CLAIMS);
  expect(token).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}$/);
  expect(encodeURIComponent(token)).toBe(token);
  expect(verifyUnsubscribeToken(KEY, token)).toEqual(CLAIMS);
});

it('keeps non-ASCII addresses intact', () => {
  const claims = { ...CLAIMS, email: 'zoë@exämple.com' };
  expect(verifyUnsubscribeToken(KEY, signUnsubscribeToken(KEY, claims))).toEqual(claims);
});

it('refuses a token signed with another key', () => {
  expect(verifyUnsubscribeToken('another-key', signUnsubscribeToken(KEY, CLAIMS))).toBeUndefined();
  expect(verifyUnsubscribeToken('', signUnsubscribeToken(KEY, CLAIMS))).toBeUndefined();
});

it('refuses a token whose claims were changed, even with the old signature', () => {
  const [, sig] = signUnsubscribeToken(KEY, CLAIMS).split('.');
  const forged = Buffer.from(
    JSON.stringify({ w: CLAIMS.workspaceId, c: CLAIMS.campaignId, r: CLAIMS.runId, e: 'victim@example.com' }),
  ).toString('base64url');
  expect(verifyUnsubscribeToken(KEY, `${forged}.${sig}`)).toBeUndefined();
});

it('refuses truncated, extended, re-spelled and malformed tokens', () => {
  const token = signUnsubscribeToken(KEY, CLAIMS);
  const [payload, sig] = token.split('.');
  for (const bad of [
    '',
    '.',
    payload,
    `${payload}.`,
    `.${sig}`,
    `${payload}.${sig.slice(0, -1)}`,
    `${payload}.${sig}A`,
    `${payload}.${sig}.${sig}`,
    `${payload}.${sig.slice(0, 10)}!${sig.slice(10)}`,
    `${payload.slice(1)}.${sig}`,
    'not a token at all',
  ]) {
    expect([bad, verifyUnsubscribeToken(KEY, bad)]).toEqual([bad, undefined]);
  }
});

it('refuses a correctly signed payload that is not the claims', () => {
  const sign = (payload: string) => {
    const encoded = Buffer.from(payload).toString('base64url');
    return `${encoded}.${createHmac('sha256', KEY).update(encoded).digest('base64url')}`;
  };
  expect(
    verifyUnsubscribeToken(KEY, sign(JSON.stringify({ w: CLAIMS.workspaceId, c: CLAIMS.campaignId, r: CLAIMS.runId, e: 'x@example.com' }))),
  ).toEqual({
    ...CLAIMS,
    email: 'x@example.com',
  });
  for (const payload of [
    'not json',
    'null',
    '[]',
    '"text"',
    JSON.stringify({ w: 'a', c: 'b', r: 'c' }),
    JSON.stringify({ w: 'a', c: 'b', r: 'c', e: 1 }),
  ]) {
    expect([payload, verifyUnsubscribeToken(KEY, sign(payload))]).toEqual([payload, undefined]);
  }
});

it('needs a key to sign', () => {
  expect(() => signUnsubscribeToken('', CLAIMS)).toThrow('an unsubscribe signing key is required');
});
