import { createHmac } from 'node:crypto';
import { signTrackingToken, trackingTokenSigner, verifyTrackingToken, type TrackingClaims } from '../src/tracking-token';

const KEY = 'test-signing-key-0123456789abcdef';
const CLAIMS: TrackingClaims = {
  workspaceId: '0b6b5b8e-8a55-4c0e-9d3c-000000000001',
  campaignId: '9f1c2d3e-4b5a-4c6d-8e7f-000000000002',
  variantId: null,
  runId: '7a8b9c0d-1e2f-4a3b-9c4d-000000000003',
  email: 'zoë@exämple.com',
};
const WITH_VARIANT: TrackingClaims = { ...CLAIMS, variantId: '5c6d7e8f-9a0b-4c1d-8e2f-000000000004' };

it.each([
  ['one template', CLAIMS],
  ['a variant', WITH_VARIANT],
])('lays out the claims of a message with %s once for its pixel and every link', (_, claims) => {
  const signer = trackingTokenSigner(KEY, claims);
  const links = ['https://example.com/a?b=c', 'https://example.com/ü'];
  expect(signer.open()).toBe(signTrackingToken(KEY, 'o', claims));
  for (const url of links) expect(signer.click(url)).toBe(signTrackingToken(KEY, 'c', { ...claims, url }));
  expect(verifyTrackingToken(KEY, 'o', signer.open())).toEqual(claims);
  for (const url of links) expect(verifyTrackingToken(KEY, 'c', signer.click(url))).toEqual({ ...claims, url });
  expect(verifyTrackingToken(KEY, 'c', signer.open())).toBeUndefined();
});

it('keeps the token format: the payload bytes, then a truncated HMAC-SHA256 over the kind and the payload', () => {
  const [payload, signature] = trackingTokenSigner(KEY, WITH_VARIANT).click('https://example.com/').split('.');
  const bytes = Buffer.from(payload, 'base64url');
  const email = Buffer.from(WITH_VARIANT.email);
  const uuids = [WITH_VARIANT.workspaceId, WITH_VARIANT.campaignId, WITH_VARIANT.variantId!, WITH_VARIANT.runId];
  expect(bytes).toEqual(
    Buffer.concat([
      Buffer.from([1]),
      ...uuids.map((id) => Buffer.from(id.replace(/-/g, ''), 'hex')),
      Buffer.from([0, email.length]),
      email,
      Buffer.from('https://example.com/'),
    ]),
  );
  expect(signature).toBe(createHmac('sha256', KEY).update('c').update(bytes).digest().subarray(0, 16).toString('base64url'));
});

it('refuses claims it cannot sign', () => {
  expect(() => trackingTokenSigner('', CLAIMS)).toThrow('a tracking signing key is required');
  expect(() => trackingTokenSigner(KEY, { ...CLAIMS, runId: 'not-a-uuid' })).toThrow('not a UUID');
});
