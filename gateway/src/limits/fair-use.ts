import type { RequestHandler, Response } from 'express';
import { accessLocals } from '../auth/access';

/**
 * Fair use, per gateway replica (a caller spread over N replicas by the load
 * balancer gets up to N times these): no workspace's analytics reads, and no
 * user's calls, can take what the others need.
 */
export interface FairUseLimits {
  /** Analytics reads (event list, statistics) one workspace may have running at once. */
  workspaceAnalyticsReads: number;
  /** Each user's token bucket: refilled at this many calls a second... */
  userRequestsPerSecond: number;
  /** ...holding at most this many: the burst a user may send at once. */
  userBurst: number;
}

/** The operations whose ClickHouse query grows with the workspace's events. */
const ANALYTICS_READS = new Set(['listEngagementEvents', 'getEngagementStats']);

/** Seconds to wait for a free analytics slot: a read takes well under that when ClickHouse is not overloaded. */
const READ_SLOT_RETRY_AFTER_S = 1;

/** Full buckets are dropped (a new one is full too) at most this often, so idle users cost no memory. */
const SWEEP_INTERVAL_MS = 60_000;

interface Bucket {
  tokens: number;
  at: number;
}

/** One token bucket per key. */
class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();
  private sweptAt = Date.now();

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
  ) {}

  /** Takes a token: 0 when there was one, else the seconds until there will be. */
  take(key: string, now = Date.now()): number {
    if (now - this.sweptAt >= SWEEP_INTERVAL_MS) this.sweep(now);
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond);
    bucket.at = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens < 1) return (1 - bucket.tokens) / this.perSecond;
    bucket.tokens -= 1;
    return 0;
  }

  private sweep(now: number): void {
    this.sweptAt = now;
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.at) / 1000) * this.perSecond >= this.burst) this.buckets.delete(key);
    }
  }
}

function tooManyRequests(res: Response, retryAfterSeconds: number, detail: string): void {
  res
    .status(429)
    .set('Retry-After', String(Math.max(1, Math.ceil(retryAfterSeconds))))
    .json({ detail });
}

/**
 * Right after the token check, before validation: 429 with Retry-After for a
 * user past their rate, so calls that fail validation (422) count too.
 * Public operations (health, docs, the webhook) are not counted.
 */
export function userRate(limits: FairUseLimits): RequestHandler {
  const buckets = new TokenBuckets(limits.userRequestsPerSecond, limits.userBurst);
  return (_req, res, next) => {
    const { principal } = accessLocals(res);
    if (!principal) return next();
    const wait = buckets.take(principal.user.id);
    if (wait > 0) return tooManyRequests(res, wait, 'Too many requests from this user, retry later');
    next();
  };
}

/** After the access check: 429 with Retry-After for an analytics read while the workspace already has its share running. */
export function fairUse(limits: FairUseLimits): RequestHandler {
  const readsRunning = new Map<string, number>();
  return (_req, res, next) => {
    const { principal, operation, workspaceId } = accessLocals(res);
    if (!principal) return next();
    if (!workspaceId || !ANALYTICS_READS.has(operation?.operationId ?? '')) return next();

    const running = readsRunning.get(workspaceId) ?? 0;
    if (running >= limits.workspaceAnalyticsReads) {
      return tooManyRequests(res, READ_SLOT_RETRY_AFTER_S, 'Too many analytics reads running for this workspace, retry later');
    }
    readsRunning.set(workspaceId, running + 1);
    // 'close' comes once per response, answered or abandoned by the client.
    res.once('close', () => {
      const left = (readsRunning.get(workspaceId) ?? 1) - 1;
      if (left > 0) readsRunning.set(workspaceId, left);
      else readsRunning.delete(workspaceId);
    });
    next();
  };
}
