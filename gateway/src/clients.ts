import { createClient, type Logger } from '@mail/common';
import { analyticsV1, brandguideV1, campaignV1, deliveryV1, identityV1 } from '@mail/proto';
import { PrincipalResolver } from './auth/principal-cache';
import type { GatewayConfig } from './config';

/** One gRPC channel per downstream service, shared by every request. */
export interface ServiceClients {
  identity: identityV1.IdentityServiceClient;
  campaign: campaignV1.CampaignServiceClient;
  /** campaign.v1's TemplateService, served by the campaign service. */
  template: campaignV1.TemplateServiceClient;
  brandGuide: brandguideV1.BrandGuideServiceClient;
  analytics: analyticsV1.AnalyticsServiceClient;
  delivery: deliveryV1.DeliveryServiceClient;
  /** identity's ResolvePrincipal, cached while its change stream is live. */
  principals: PrincipalResolver;
}

export function createServiceClients(services: GatewayConfig['services'], logger: Logger): ServiceClients {
  const identity = createClient(identityV1.IdentityServiceClient, services.identity);
  return {
    identity,
    campaign: createClient(campaignV1.CampaignServiceClient, services.campaign),
    template: createClient(campaignV1.TemplateServiceClient, services.campaign),
    brandGuide: createClient(brandguideV1.BrandGuideServiceClient, services.brandGuide),
    analytics: createClient(analyticsV1.AnalyticsServiceClient, services.analytics),
    delivery: createClient(deliveryV1.DeliveryServiceClient, services.delivery),
    principals: new PrincipalResolver(identity, logger),
  };
}

export function closeServiceClients(clients: ServiceClients): void {
  clients.principals.close();
  for (const client of [clients.identity, clients.campaign, clients.template, clients.brandGuide, clients.analytics, clients.delivery]) {
    client.close();
  }
}
