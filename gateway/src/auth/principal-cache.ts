import { ChangeWatch, call, type Logger } from '@mail/common';
import type { identityV1 } from '@mail/proto';

/** Answers older than this are asked again even while the stream is live: it bounds what a stalled stream could keep. */
const DEFAULT_TTL_MS = 30_000;
/** Distinct (token identity, workspace) pairs kept; past that the cache starts over rather than growing. */
const MAX_CACHED = 10_000;

interface Entry {
  answer: identityV1.ResolvePrincipalResponse;
  expiresAt: number;
}

/**
 * ResolvePrincipal, the identity service's answer to "who is this token and
 * what may it do here", cached for repeat requests: a request otherwise waits
 * for that round trip and two Postgres reads before its own work starts. The
 * cache is trusted only while identity's WatchAccessChanges stream is live;
 * any committed change to users, workspaces or memberships, the stream ending,
 * or this gateway changing them itself (`accessChanged`, so its own caller's
 * next request sees the change without waiting for the stream) drops every
 * answer. A lookup that overlapped a drop is used but not kept.
 */
export class PrincipalResolver {
  private readonly cache = new Map<string, Entry>();
  private readonly watch: ChangeWatch<identityV1.WatchAccessChangesResponse>;
  private generation = 0;
  private started = false;

  constructor(
    private readonly client: identityV1.IdentityServiceClient,
    logger: Logger,
    private readonly ttlMs = DEFAULT_TTL_MS,
  ) {
    this.watch = new ChangeWatch(
      'access changes',
      () => client.watchAccessChanges({}),
      {
        changed: () => this.accessChanged(),
        reset: () => this.accessChanged(),
      },
      logger,
    );
  }

  async resolve(request: identityV1.ResolvePrincipalRequest): Promise<identityV1.ResolvePrincipalResponse> {
    if (!this.started) {
      this.started = true;
      this.watch.start();
    }
    const key = cacheKey(request);
    const now = Date.now();
    const cached = this.cache.get(key);
    if (cached && cached.expiresAt > now && this.watch.live) return cached.answer;

    const generation = this.generation;
    const live = this.watch.live;
    const answer = await call(this.client.resolvePrincipal.bind(this.client), request);
    if (live && this.watch.live && generation === this.generation) {
      if (this.cache.size >= MAX_CACHED) this.cache.clear();
      this.cache.set(key, { answer, expiresAt: now + this.ttlMs });
    }
    return answer;
  }

  accessChanged(): void {
    this.generation += 1;
    this.cache.clear();
  }

  close(): void {
    this.watch.close();
  }
}

/** Every field of the request: changed claims are a different question (and make identity update the user). */
function cacheKey(request: identityV1.ResolvePrincipalRequest): string {
  return JSON.stringify([
    request.issuer,
    request.subject,
    request.email,
    request.displayName,
    request.grantPlatformAdmin,
    request.workspaceId ?? null,
  ]);
}
