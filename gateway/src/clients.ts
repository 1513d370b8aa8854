import { createClient } from '@mail/common';
import { analyticsV1, brandguideV1, campaignV1, identityV1 } from '@mail/proto';
import type { GatewayConfig } from './config';

/** One gRPC channel per downstream service, shared by every request. */
export interface ServiceClients {
  identity: identityV1.IdentityServiceClient;
  campaign: campaignV1.CampaignServiceClient;
  brandGuide: brandguideV1.BrandGuideServiceClient;
  analytics: analyticsV1.AnalyticsServiceClient;
}

export function createServiceClients(services: GatewayConfig['services']): ServiceClients {
  return {
    identity: createClient(identityV1.IdentityServiceClient, services.identity),
    campaign: createClient(campaignV1.CampaignServiceClient, services.campaign),
    brandGuide: createClient(brandguideV1.BrandGuideServiceClient, services.brandGuide),
    analytics: createClient(analyticsV1.AnalyticsServiceClient, services.analytics),
  };
}

export function closeServiceClients(clients: ServiceClients): void {
  for (const client of Object.values(clients)) client.close();
}
