import type { Knex } from 'knex';
import { ConflictError } from '@mail/common';
import { leaderOf, rateOf } from '../domain/ab-test';
import { cannotSend, planRun, type Audience } from '../domain/plan';
import type { Run } from '../domain/run';
import type { Upstream } from '../grpc/clients';
import { getRun, insertRun } from '../store/runs';

/**
 * Starts a run of a campaign as it is now. A manual run of a campaign that
 * cannot be sent is refused (409 naming every missing piece); a scheduled fire
 * of one records a `failed` run with that reason. A fire time that has its run
 * already resolves to undefined.
 */
export async function startRun(
  db: Knex,
  upstream: Upstream,
  request: { workspaceId: string; campaignId: string; scheduledFor: Date | null; audience?: Audience },
): Promise<Run | undefined> {
  const campaign = await upstream.getCampaign(request.workspaceId, request.campaignId);
  // The earlier run of a follow-up must be the workspace's: another's is a 404 like none.
  if (request.audience) await getRun(db, request.workspaceId, request.audience.runId);
  const result = await planRun(campaign, upstream.templates(request.workspaceId), request.audience);
  const trigger = request.scheduledFor === null ? 'manual' : 'schedule';
  const base = { workspaceId: request.workspaceId, campaignId: campaign.id, trigger, scheduledFor: request.scheduledFor } as const;
  if ('missing' in result) {
    if (trigger === 'manual') throw new ConflictError(cannotSend(result.missing));
    return insertRun(db, { ...base, failure: cannotSend(result.missing), sendPriority: campaign.sendPriority });
  }
  return insertRun(db, { ...base, plan: result.plan, sendPriority: result.plan.sendPriority, audience: request.audience });
}

/**
 * The run with its A/B test's engagement (analytics): per variant the test
 * recipients with a human open and click among the events stored until the
 * decision (later ones may be the winner's other recipients), the metric's
 * rate and the variant leading at 95 % confidence now.
 */
export async function withEngagement(upstream: Upstream, run: Run): Promise<Run> {
  const test = run.abTest;
  if (!test) return run;
  const engagement = await upstream.runEngagement(run.workspaceId, run.id, test.decidedAt ?? new Date());
  const variants = test.variants.map((variant) => {
    const figures = {
      ...variant,
      opens: engagement.get(variant.variantId)?.opens ?? 0,
      clicks: engagement.get(variant.variantId)?.clicks ?? 0,
    };
    return { ...figures, rate: rateOf(figures, test.metric) };
  });
  const leader = leaderOf(variants, test.metric);
  return { ...run, abTest: { ...test, variants, leaderVariantId: leader ?? null } };
}
