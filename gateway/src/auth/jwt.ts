import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import type { AuthConfig } from '../config';
import { HttpError, unauthorized } from '../errors/http-error';
import type { Authenticator, TokenIdentity } from './principal';

/** Asymmetric algorithms only: `none` and HS* (which would accept the public key as a secret) never verify. */
const ALGORITHMS = ['RS256', 'ES256', 'PS256', 'EdDSA'];
const CLOCK_TOLERANCE_S = 30;
/** A token naming an unknown key refetches the key set at most this often, so forged `kid`s cannot flood the provider. */
const UNKNOWN_KID_REFETCH_MS = 1_000;

/** Thrown from inside key lookup when the key set cannot be fetched: the caller's token may well be fine. */
class KeysUnavailable extends Error {}

/** Failures of fetching or parsing the key set, as opposed to failures of the token. */
const isFetchFailure = (error: unknown): boolean =>
  !(error instanceof errors.JOSEError) ||
  error.code === 'ERR_JOSE_GENERIC' ||
  error instanceof errors.JWKSTimeout ||
  error instanceof errors.JWKSInvalid;

/**
 * The provider's signing keys. jose caches the set for 10 minutes and keeps a
 * 30 s cooldown after each fetch; on top of that a token with an unknown
 * `kid` forces one refetch (rate-limited), so a key rotated in moments ago is
 * accepted at once instead of after the cooldown.
 */
function providerKeys(jwksUrl: string): JWTVerifyGetKey {
  const remote = createRemoteJWKSet(new URL(jwksUrl), { timeoutDuration: 5_000, cooldownDuration: 30_000, cacheMaxAge: 600_000 });
  let lastForcedRefetch = 0;
  return async (header, token) => {
    try {
      try {
        return await remote(header, token);
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey) || Date.now() - lastForcedRefetch < UNKNOWN_KID_REFETCH_MS) throw error;
        lastForcedRefetch = Date.now();
        await remote.reload();
        return await remote(header, token);
      }
    } catch (error) {
      throw isFetchFailure(error) ? new KeysUnavailable('JWKS unavailable', { cause: error }) : error;
    }
  };
}

/** `Authorization: Bearer <token>`, worded like FastAPI's HTTPBearer when it is absent or of another scheme. */
function bearerToken(authorization: string | undefined): string {
  const [scheme = '', ...rest] = (authorization ?? '').trim().split(' ');
  const credentials = rest.join(' ').trim();
  if (!scheme || !credentials) throw unauthorized('Not authenticated');
  if (scheme.toLowerCase() !== 'bearer') throw unauthorized('Invalid authentication credentials');
  return credentials;
}

const claim = (payload: JWTPayload, name: string): string => {
  const value = payload[name];
  return typeof value === 'string' ? value.trim() : '';
};

/**
 * Whether the provider vouches for the token's e-mail. Without the claim it
 * does (many providers only issue verified addresses and never send it); with
 * it, only `true`, or the string "true" in any case as some providers send
 * it, counts: "false", "0", "", 0, [] and {} are not a verification.
 */
function emailVerified(value: unknown): boolean {
  if (value === undefined) return true;
  return value === true || (typeof value === 'string' && value.toLowerCase() === 'true');
}

/**
 * The profile the token carries. An e-mail the provider does not vouch for is
 * ignored: e-mail links a first sign-in to a membership added by address and
 * grants BOOTSTRAP_PLATFORM_ADMINS, so an unproven one must not, and stored
 * on the user it would catch a membership added for that address later.
 * Without a `name` the identity service keeps the stored name (a new user
 * gets the e-mail's local part).
 */
function identityOf(payload: JWTPayload): TokenIdentity {
  return {
    issuer: claim(payload, 'iss'),
    subject: claim(payload, 'sub'),
    email: emailVerified(payload.email_verified) ? claim(payload, 'email') : '',
    displayName: claim(payload, 'name'),
  };
}

/** Verifies provider-issued JWTs against the JWKS at AUTH_JWKS_URL. */
export function createJwtAuthenticator(config: AuthConfig): Authenticator {
  const { jwksUrl, issuer, audience } = config;
  if (!jwksUrl || !issuer || !audience) throw new Error('createJwtAuthenticator needs jwksUrl, issuer and audience');
  const keys = providerKeys(jwksUrl);
  return {
    grantsPlatformAdmin: false,
    async authenticate(authorization) {
      const token = bearerToken(authorization);
      try {
        const { payload } = await jwtVerify(token, keys, {
          issuer,
          audience,
          algorithms: ALGORITHMS,
          clockTolerance: CLOCK_TOLERANCE_S,
          requiredClaims: ['sub', 'exp'],
        });
        const identity = identityOf(payload);
        if (!identity.subject) throw unauthorized('Invalid token');
        return identity;
      } catch (error) {
        if (error instanceof HttpError) throw error;
        if (error instanceof KeysUnavailable) throw new HttpError(503, 'Identity provider keys are unavailable, retry later');
        throw unauthorized(error instanceof errors.JWTExpired ? 'Token expired' : 'Invalid token');
      }
    },
  };
}
