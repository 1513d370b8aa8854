import type { Knex } from 'knex';
import type { Logger } from '@mail/common';
import { dueFireTime } from '../domain/schedule';
import type { Upstream } from '../grpc/clients';
import { hasScheduledRun } from '../store/runs';
import { startRun } from './runs';

/**
 * Every interval, gives each active scheduled campaign the run of its due fire
 * time (domain/schedule.ts). Every replica runs it: the unique (campaign_id,
 * scheduled_for) of runs lets one insert win, so a fire time starts at most
 * one run whatever the replicas and restarts.
 */
export class Scheduler {
  private timer?: NodeJS.Timeout;
  private ticking?: Promise<void>;

  constructor(
    private readonly db: Knex,
    private readonly upstream: Upstream,
    private readonly options: { intervalMs: number; missedGraceMs: number },
    private readonly logger: Logger,
  ) {}

  start(): void {
    const loop = (): void => {
      this.ticking = this.tick()
        .catch((error: unknown) => this.logger.warn({ err: error }, 'scheduler tick failed'))
        .finally(() => {
          if (this.ticking) this.timer = setTimeout(loop, this.options.intervalMs);
        });
    };
    loop();
  }

  async stop(): Promise<void> {
    const ticking = this.ticking;
    this.ticking = undefined;
    clearTimeout(this.timer);
    await ticking;
  }

  async tick(now = new Date()): Promise<void> {
    for (const campaign of await this.upstream.scheduledCampaigns()) {
      const due = dueFireTime(campaign.scheduleCron, campaign.scheduleSetAt ?? now, now, this.options.missedGraceMs);
      if (!due || (await hasScheduledRun(this.db, campaign.campaignId, due))) continue;
      try {
        const run = await startRun(this.db, this.upstream, {
          workspaceId: campaign.workspaceId,
          campaignId: campaign.campaignId,
          scheduledFor: due,
        });
        if (run)
          this.logger.info({ runId: run.id, campaignId: run.campaignId, scheduledFor: due, status: run.status }, 'scheduled run created');
      } catch (error) {
        this.logger.warn({ err: error, campaignId: campaign.campaignId, scheduledFor: due }, 'scheduled run not created');
      }
    }
  }
}
