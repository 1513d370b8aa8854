import * as grpc from '@grpc/grpc-js';
import { NotFoundError, UnavailableError, call, createClient, isServiceError } from '@mail/common';
import { analyticsV1, campaignV1 } from '@mail/proto';
import type { TemplateLookup } from '../domain/plan';

/** What the delivery service asks the campaign and analytics services. */
export interface Upstream {
  getCampaign(workspaceId: string, campaignId: string): Promise<campaignV1.Campaign>;
  templates(workspaceId: string): TemplateLookup;
  scheduledCampaigns(): Promise<campaignV1.ScheduledCampaign[]>;
  /** Of the addresses, those suppressed in the workspace now. */
  suppressed(workspaceId: string, emails: string[]): Promise<Set<string>>;
  /** Of the addresses, those with a human open (or click) of the run's message among the events stored until `until`. */
  engaged(workspaceId: string, runId: string, kind: 'open' | 'click', emails: string[], until: Date): Promise<Set<string>>;
  /** By variant, the run's distinct addresses with a human open and with a human click among the events stored until `until`. */
  runEngagement(workspaceId: string, runId: string, until: Date): Promise<Map<string, { opens: number; clicks: number }>>;
  close(): void;
}

/** NOT_FOUND stays a 404; any other failure of a dependency is a 503. */
function upstreamError(error: unknown, what: string): Error {
  if (isServiceError(error) && error.code === grpc.status.NOT_FOUND) return new NotFoundError(what);
  return new UnavailableError(`${what} could not be read: a service is unavailable`);
}

export function connectUpstream(campaignAddress: string, analyticsAddress: string): Upstream {
  const campaigns = createClient(campaignV1.CampaignServiceClient, campaignAddress);
  const templates = createClient(campaignV1.TemplateServiceClient, campaignAddress);
  const analytics = createClient(analyticsV1.AnalyticsServiceClient, analyticsAddress);
  return {
    async getCampaign(workspaceId, id) {
      try {
        const { campaign } = await call(campaigns.getCampaign.bind(campaigns), { workspaceId, id });
        if (!campaign) throw new Error('campaign service answered without a campaign');
        return campaign;
      } catch (error) {
        throw upstreamError(error, 'Campaign');
      }
    },
    templates: (workspaceId) => async (id) => {
      try {
        const template = await call(templates.getTemplate.bind(templates), { workspaceId, id });
        return { subject: template.subject, html: template.html ?? null, text: template.text ?? null };
      } catch (error) {
        if (isServiceError(error) && error.code === grpc.status.NOT_FOUND) return undefined;
        throw upstreamError(error, 'Template');
      }
    },
    async scheduledCampaigns() {
      return (await call(campaigns.listScheduledCampaigns.bind(campaigns), {})).campaigns;
    },
    async suppressed(workspaceId, emails) {
      if (emails.length === 0) return new Set();
      const answer = await call(analytics.filterSuppressed.bind(analytics), { workspaceId, emails });
      return new Set(answer.emails);
    },
    async engaged(workspaceId, runId, kind, emails, until) {
      if (emails.length === 0) return new Set();
      const engagement = kind === 'open' ? analyticsV1.Engagement.ENGAGEMENT_OPEN : analyticsV1.Engagement.ENGAGEMENT_CLICK;
      const answer = await call(analytics.filterEngaged.bind(analytics), { workspaceId, runId, engagement, emails, until });
      return new Set(answer.emails);
    },
    async runEngagement(workspaceId, runId, until) {
      const answer = await call(analytics.getRunEngagement.bind(analytics), { workspaceId, runId, until });
      return new Map(answer.variants.map((v) => [v.variantId, { opens: v.uniqueOpens, clicks: v.uniqueClicks }]));
    },
    close() {
      for (const client of [campaigns, templates, analytics]) client.close();
    },
  };
}
