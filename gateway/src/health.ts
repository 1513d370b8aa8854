import { createHealthClient, Readiness, type DependencyCheck } from '@mail/common';
import type { GatewayConfig } from './config';

/**
 * What /readyz on the ops port reports: every service the gateway calls, and
 * the stores behind them (asked through the owning service's grpc.health.v1
 * check of that dependency), so an operator sees "postgres: down", not just
 * "campaign". The public /readyz says only ready or not.
 */
export function gatewayReadiness(
  services: GatewayConfig['services'],
  checkKafka: DependencyCheck,
  checkIdentityProvider?: DependencyCheck,
): { readiness: Readiness; close(): void } {
  const identity = createHealthClient(services.identity);
  const campaign = createHealthClient(services.campaign);
  const brandGuide = createHealthClient(services.brandGuide);
  const analytics = createHealthClient(services.analytics);
  const delivery = createHealthClient(services.delivery);
  const readiness = new Readiness()
    .add('identity', () => identity.check())
    .add('campaign', () => campaign.check())
    .add('brand-guide', () => brandGuide.check())
    .add('analytics', () => analytics.check())
    .add('delivery', () => delivery.check())
    // Up when any service that uses it can reach it: one service being down does not make Postgres look down.
    .add('postgres', () => Promise.any([campaign, identity, brandGuide, delivery].map((client) => client.check('postgres'))))
    .add('clickhouse', () => analytics.check('clickhouse'))
    .add('kafka', checkKafka);
  if (checkIdentityProvider) readiness.add('identity-provider', checkIdentityProvider);
  return {
    readiness,
    close: () => [identity, campaign, brandGuide, analytics, delivery].forEach((client) => client.close()),
  };
}
