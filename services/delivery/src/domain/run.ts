import type { AbMetric, AbPhase, DecidedBy } from './ab-test';
import type { Audience } from './plan';

export const RUN_STATUSES = ['queued', 'sending', 'paused', 'completed', 'cancelled', 'failed'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

/**
 * A recipient's stored status. `claimed`: taken by a sender, not handed over
 * yet (shown as pending); `held`: waiting for its run's A/B test to pick the
 * winner (shown as pending); `sending`: being handed over to SMTP right now.
 */
export const RECIPIENT_STATUSES = ['pending', 'held', 'claimed', 'sending', 'sent', 'failed', 'suppressed', 'invalid', 'unknown'] as const;
export type RecipientStatus = (typeof RECIPIENT_STATUSES)[number];

/** The statuses the API filters on and shows: `claimed` is pending to the user. */
export const LISTED_STATUSES = ['pending', 'sending', 'sent', 'failed', 'suppressed', 'invalid', 'unknown'] as const;

export type RunAction = 'pause' | 'resume' | 'cancel';

/** The statuses each action is allowed from, and the status it leads to. */
export const RUN_ACTIONS: Record<RunAction, { from: RunStatus[]; to: RunStatus }> = {
  pause: { from: ['queued', 'sending'], to: 'paused' },
  resume: { from: ['paused'], to: 'sending' },
  cancel: { from: ['queued', 'sending', 'paused'], to: 'cancelled' },
};

/** What the SMTP server's answer (or its absence) means for the recipient. */
export type SmtpOutcome =
  | { kind: 'sent' }
  /** `code`: the server's reply code, when it answered (a bounce); absent for a failure of ours or of the connection. */
  | { kind: 'failed'; error: string; code?: number }
  | { kind: 'retry'; error: string; code?: number }
  /** The connection dropped after the message's data went out: it may have been taken. */
  | { kind: 'unknown'; error: string };

interface SmtpError {
  message?: string;
  responseCode?: number;
  response?: string;
}

/**
 * An answer of the server: 5xx is permanent, `failed` with the answer; 4xx is
 * temporary, retried (the issue asks for both). No answer (the connection
 * dropped, timed out): retried if none of the message's data had gone out,
 * else `unknown` and never sent again, since the server may have taken it
 * (docs/api.md, "Campaign runs").
 */
export function classifySmtpError(error: unknown, dataSent: boolean): SmtpOutcome {
  const failure = (error ?? {}) as SmtpError;
  const answer = failure.response ?? failure.message ?? String(error);
  const code = failure.responseCode;
  if (typeof code === 'number' && code >= 500) return { kind: 'failed', error: answer, code };
  if (typeof code === 'number' && code >= 400) return { kind: 'retry', error: answer, code };
  return dataSent ? { kind: 'unknown', error: answer } : { kind: 'retry', error: answer };
}

/** The wait before attempt `attempt + 1`: doubling from the base, at most an hour. */
export function retryDelayMs(attempt: number, baseMs: number): number {
  return Math.min(baseMs * 2 ** Math.max(0, attempt - 1), 3_600_000);
}

export interface RunCounts {
  recipients: number;
  sent: number;
  failed: number;
  suppressed: number;
  invalid: number;
  duplicates: number;
  pending: number;
  unknown: number;
}

export interface RunVariantFigures {
  id: string;
  label: string | null;
  weight: number;
  recipients: number;
  sent: number;
}

export interface RunAbTestVariant {
  variantId: string;
  /** Of the test recipients. */
  sent: number;
  opens: number;
  clicks: number;
  rate: number | null;
}

export interface RunAbTest {
  phase: AbPhase;
  testFraction: number;
  waitMinutes: number;
  metric: AbMetric;
  testRecipients: number;
  decideAt: Date | null;
  /** When the winner was picked: engagement stored later is not the test's. */
  decidedAt: Date | null;
  winnerVariantId: string | null;
  decidedBy: DecidedBy | null;
  variants: RunAbTestVariant[];
  leaderVariantId: string | null;
}

export interface Run {
  id: string;
  workspaceId: string;
  campaignId: string;
  trigger: 'schedule' | 'manual';
  scheduledFor: Date | null;
  status: RunStatus;
  failure: string | null;
  createdAt: Date;
  startedAt: Date | null;
  finishedAt: Date | null;
  counts: RunCounts;
  variants: RunVariantFigures[] | null;
  abTest: RunAbTest | null;
  audience: Audience | null;
}

export interface RunRecipient {
  email: string;
  status: (typeof LISTED_STATUSES)[number];
  variantId: string | null;
  messageId: string | null;
  sentAt: Date | null;
  error: string | null;
}

export interface Page<T> {
  items: T[];
  total: number;
  page: number;
  pageSize: number;
}

export interface PageWindow {
  page: number;
  pageSize: number;
  offset: number;
}

/** page >= 1 (default 1), page_size 1-500 (default 50); the gateway validated the bounds. */
export function pageWindow(request: { page: number; pageSize: number } | undefined): PageWindow {
  const page = Math.max(1, request?.page || 1);
  const pageSize = Math.min(500, Math.max(1, request?.pageSize || 50));
  return { page, pageSize, offset: (page - 1) * pageSize };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string): boolean => UUID.test(value);
