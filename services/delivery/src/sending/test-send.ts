import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { InvalidArgumentError, invalidEmail, parseEmail, ConflictError, UnavailableError, type Violation } from '@mail/common';
import { cannotSend, planTestSend } from '../domain/plan';
import type { Upstream } from '../grpc/clients';
import { takeTestSendQuota } from '../store/test-sends';
import { Renderer } from './renderer';
import { composeMessage, unsubscribeUrl, type SenderOptions, type UnsubscribeClaims } from './sender';
import type { SmtpTransport } from './transport';

export const TEST_SEND_MAX = 10;

/** A test message's run_id (in its headers and unsubscribe link): it belongs to no run. */
const TEST_RUN_ID = 'test-send';

/** Test sends render in workers of their own, with a run's limits, whatever the runs are rendering. */
const renderer = new Renderer(2);

export interface TestSendOutcome {
  email: string;
  status: 'sent' | 'failed' | 'suppressed';
  messageId: string | null;
  error: string | null;
}

function validEmails(emails: string[]): string[] {
  const violations: Violation[] = [];
  if (emails.length < 1 || emails.length > TEST_SEND_MAX) {
    violations.push({
      loc: ['emails'],
      type: emails.length < 1 ? 'too_short' : 'too_long',
      msg: `List should have at ${emails.length < 1 ? 'least 1 item' : `most ${TEST_SEND_MAX} items`} after validation, not ${emails.length}`,
      input: emails,
      ctx: {
        field_type: 'List',
        [emails.length < 1 ? 'min_length' : 'max_length']: emails.length < 1 ? 1 : TEST_SEND_MAX,
        actual_length: emails.length,
      },
    });
  }
  const valid = emails.map((email, index) => {
    const parsed = parseEmail(email);
    if ('reason' in parsed) violations.push(invalidEmail(['emails', index], email, parsed.reason));
    return 'email' in parsed ? parsed.email.toLowerCase() : email;
  });
  if (violations.length > 0) throw new InvalidArgumentError(violations);
  return [...new Set(valid)];
}

/** Of the addresses, those suppressed in the workspace; without an answer from analytics nothing may be mailed (503). */
async function suppressedOf(upstream: Upstream, workspaceId: string, emails: string[]): Promise<Set<string>> {
  try {
    return await upstream.suppressed(workspaceId, emails);
  } catch {
    throw new UnavailableError('Suppressions could not be read: a service is unavailable');
  }
}

/**
 * Sends the campaign's message (with the recipient's `email` as its only
 * field) to each address at once, outside any run: no rate limit, no retry and
 * no sent event; each address's outcome is answered. A suppressed address is
 * not mailed (`suppressed`); the others count against the workspace's hourly
 * quota, all or none (QuotaExceededError, 429).
 */
export async function testSend(
  parts: { db: Knex; upstream: Upstream; transport: SmtpTransport; signUnsubscribe(claims: UnsubscribeClaims): string },
  options: Pick<SenderOptions, 'provider' | 'publicBaseUrl'> & { testSendPerHour: number },
  request: { workspaceId: string; campaignId: string; emails: string[]; variantId?: string },
): Promise<TestSendOutcome[]> {
  const emails = validEmails(request.emails);
  const campaign = await parts.upstream.getCampaign(request.workspaceId, request.campaignId);
  const result = await planTestSend(campaign, parts.upstream.templates(request.workspaceId), request.variantId);
  if ('missing' in result) throw new ConflictError(cannotSend(result.missing));
  const suppressed = await suppressedOf(parts.upstream, request.workspaceId, emails);
  const mailed = emails.filter((email) => !suppressed.has(email));
  if (mailed.length > 0) await takeTestSendQuota(parts.db, request.workspaceId, mailed.length, options.testSendPerHour);
  const { plan } = result;
  const [key, content] = Object.entries(plan.templates)[0];
  const variantId = plan.variants ? key : null;
  const links = mailed.map((email) =>
    unsubscribeUrl(
      options.publicBaseUrl,
      parts.signUnsubscribe({ workspaceId: request.workspaceId, campaignId: campaign.id, runId: TEST_RUN_ID, email }),
    ),
  );
  const outcomes = await renderer.render({
    templates: { [key]: content },
    messages: mailed.map((email, index) => ({ key, fields: { email }, unsubscribeUrl: links[index] })),
  });
  return Promise.all(
    emails.map(async (email): Promise<TestSendOutcome> => {
      if (suppressed.has(email)) return { email, status: 'suppressed', messageId: null, error: null };
      const index = mailed.indexOf(email);
      const rendered = outcomes[index];
      if ('error' in rendered) return { email, status: 'failed', messageId: null, error: rendered.error };
      const domain = plan.fromEmail.slice(plan.fromEmail.lastIndexOf('@') + 1);
      const messageId = `${TEST_RUN_ID}.${randomUUID()}@${domain}`;
      const context = { runId: TEST_RUN_ID, messageId, unsubscribeUrl: links[index], provider: options.provider };
      const message = composeMessage(plan, rendered.message, { email, variantId }, context);
      const outcome = await parts.transport.send(message);
      return outcome.kind === 'sent'
        ? { email, status: 'sent', messageId, error: null }
        : { email, status: 'failed', messageId: null, error: outcome.error };
    }),
  );
}
