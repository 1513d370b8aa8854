import type { Knex } from 'knex';
import { ConflictError } from '@mail/common';
import { cannotSend, planRun } from '../domain/plan';
import type { Run } from '../domain/run';
import type { Upstream } from '../grpc/clients';
import { insertRun } from '../store/runs';

/**
 * Starts a run of a campaign as it is now. A manual run of a campaign that
 * cannot be sent is refused (409 naming every missing piece); a scheduled fire
 * of one records a `failed` run with that reason. A fire time that has its run
 * already resolves to undefined.
 */
export async function startRun(
  db: Knex,
  upstream: Upstream,
  request: { workspaceId: string; campaignId: string; scheduledFor: Date | null },
): Promise<Run | undefined> {
  const campaign = await upstream.getCampaign(request.workspaceId, request.campaignId);
  const result = await planRun(campaign, upstream.templates(request.workspaceId));
  const trigger = request.scheduledFor === null ? 'manual' : 'schedule';
  const base = { workspaceId: request.workspaceId, campaignId: campaign.id, trigger, scheduledFor: request.scheduledFor } as const;
  if ('missing' in result) {
    if (trigger === 'manual') throw new ConflictError(cannotSend(result.missing));
    return insertRun(db, { ...base, failure: cannotSend(result.missing), sendPriority: campaign.sendPriority });
  }
  return insertRun(db, { ...base, plan: result.plan, sendPriority: result.plan.sendPriority });
}
