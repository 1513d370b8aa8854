import { createRemoteJWKSet, errors, jwtVerify, type JWTPayload, type JWTVerifyGetKey } from 'jose';
import { isAddressSyntax, type Logger } from '@mail/common';
import type { AuthConfig } from '../config';
import { HttpError, unauthorized } from '../errors/http-error';
import { EMAIL_REQUIRED, type Authenticator, type TokenIdentity } from './principal';

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

/** The key set's cache: jose refetches it after 10 minutes, and waits 30 s after a fetch before another. */
const JWKS_OPTIONS = { timeoutDuration: 5_000, cooldownDuration: 30_000, cacheMaxAge: 600_000 };
const DISCOVERY_TIMEOUT_MS = 5_000;
/** Retries of an unreachable discovery document start after this long and double up to the maximum. */
const DISCOVERY_RETRY_MS = { first: 500, max: 30_000 };

/**
 * Where the provider publishes its keys: AUTH_JWKS_URL when set, else the
 * `jwks_uri` of the issuer's OpenID Connect discovery document, read once at
 * start-up and kept; while the provider cannot be reached it is retried in the
 * background with backoff, and requests until then answer 503.
 */
export interface JwksLocator {
  /** The JWKS address; rejects while it is not known yet. */
  jwksUrl(): Promise<URL>;
  stop(): void;
}

function jwksLocator(config: { jwksUrl?: string; issuer: string }, logger?: Logger): JwksLocator {
  if (config.jwksUrl) {
    const fixed = new URL(config.jwksUrl);
    return { jwksUrl: () => Promise.resolve(fixed), stop: () => undefined };
  }
  const documentUrl = `${config.issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  let found: URL | undefined;
  let attempt: Promise<URL> | undefined;
  let retry: NodeJS.Timeout | undefined;
  let delay = DISCOVERY_RETRY_MS.first;
  let stopped = false;

  const discover = (): Promise<URL> => {
    attempt ??= readJwksUri(documentUrl, config.issuer).then(
      (url) => {
        found = url;
        return url;
      },
      (error: unknown) => {
        logger?.warn({ err: error, retryInMs: delay }, 'identity provider discovery failed');
        if (!stopped) {
          retry = setTimeout(() => {
            attempt = undefined;
            void discover().catch(() => undefined);
          }, delay).unref();
        }
        delay = Math.min(delay * 2, DISCOVERY_RETRY_MS.max);
        throw new KeysUnavailable('discovery document unavailable', { cause: error });
      },
    );
    return attempt;
  };
  void discover().catch(() => undefined);
  return {
    jwksUrl: () => (found ? Promise.resolve(found) : discover()),
    stop: () => {
      stopped = true;
      clearTimeout(retry);
    },
  };
}

/** The discovery document's `jwks_uri`, from a document whose `issuer` is the one configured (as OpenID Connect Discovery requires). */
async function readJwksUri(documentUrl: string, issuer: string): Promise<URL> {
  const response = await fetch(documentUrl, { signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), redirect: 'error' });
  if (!response.ok) throw new Error(`${documentUrl} answered ${response.status}`);
  const document = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown };
  if (document.issuer !== issuer) throw new Error(`${documentUrl} names another issuer`);
  if (typeof document.jwks_uri !== 'string') throw new Error(`${documentUrl} has no jwks_uri`);
  return new URL(document.jwks_uri);
}

/**
 * The provider's signing keys. jose caches the set (JWKS_OPTIONS); on top of
 * that a token with an unknown `kid` forces one refetch (rate-limited), so a
 * key rotated in moments ago is accepted at once instead of after the cooldown.
 */
function providerKeys(locator: JwksLocator): { getKey: JWTVerifyGetKey; check(): Promise<void> } {
  let remote: ReturnType<typeof createRemoteJWKSet> | undefined;
  const remoteSet = async () => {
    const url = await locator.jwksUrl();
    remote ??= createRemoteJWKSet(url, JWKS_OPTIONS);
    return remote;
  };
  let lastForcedRefetch = 0;
  const getKey: JWTVerifyGetKey = async (header, token) => {
    try {
      const keys = await remoteSet();
      try {
        return await keys(header, token);
      } catch (error) {
        if (!(error instanceof errors.JWKSNoMatchingKey) || Date.now() - lastForcedRefetch < UNKNOWN_KID_REFETCH_MS) throw error;
        lastForcedRefetch = Date.now();
        await keys.reload();
        return await keys(header, token);
      }
    } catch (error) {
      throw error instanceof KeysUnavailable || isFetchFailure(error) ? new KeysUnavailable('JWKS unavailable', { cause: error }) : error;
    }
  };
  return {
    getKey,
    // Ready once the key set's address is known (from AUTH_JWKS_URL at once, else once discovery succeeded).
    async check() {
      await locator.jwksUrl();
    },
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
    // Not trimmed: a claim with surrounding whitespace is no address (hasAddressClaim), never a repaired one.
    email: emailVerified(payload.email_verified) && typeof payload.email === 'string' ? payload.email : '',
    displayName: claim(payload, 'name'),
  };
}

/** The token's `email` claim is an address (whatever its domain): the identity service provisions and links users by it. */
function hasAddressClaim(payload: JWTPayload): boolean {
  return typeof payload.email === 'string' && isAddressSyntax(payload.email);
}

export interface JwtAuthenticator extends Authenticator {
  /** For /readyz: rejects while the provider's discovery document has not been read. */
  checkProvider: () => Promise<void>;
  stop: () => void;
}

/** Verifies provider-issued JWTs against the JWKS at AUTH_JWKS_URL, or the one AUTH_ISSUER's discovery document names. */
export function createJwtAuthenticator(config: AuthConfig, logger?: Logger): JwtAuthenticator {
  const { jwksUrl, issuer, audience } = config;
  if (!issuer || !audience) throw new Error('createJwtAuthenticator needs issuer and audience');
  const locator = jwksLocator({ jwksUrl, issuer }, logger);
  const keys = providerKeys(locator);
  return {
    grantsPlatformAdmin: false,
    checkProvider: () => keys.check(),
    stop: () => locator.stop(),
    async authenticate(authorization) {
      const token = bearerToken(authorization);
      try {
        const { payload } = await jwtVerify(token, keys.getKey, {
          issuer,
          audience,
          algorithms: ALGORITHMS,
          clockTolerance: CLOCK_TOLERANCE_S,
          requiredClaims: ['sub', 'exp'],
        });
        const identity = identityOf(payload);
        if (!identity.subject) throw unauthorized('Invalid token');
        if (!hasAddressClaim(payload)) throw unauthorized(EMAIL_REQUIRED);
        return identity;
      } catch (error) {
        if (error instanceof HttpError) throw error;
        if (error instanceof KeysUnavailable) throw new HttpError(503, 'Identity provider keys are unavailable, retry later');
        throw unauthorized(error instanceof errors.JWTExpired ? 'Token expired' : 'Invalid token');
      }
    },
  };
}
