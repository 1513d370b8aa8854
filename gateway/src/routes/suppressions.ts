import { analyticsV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { pageRequest, pathParam } from './http';

const { SuppressionReason } = analyticsV1;

const REASON_NAMES: Partial<Record<analyticsV1.SuppressionReason, string>> = {
  [SuppressionReason.SUPPRESSION_REASON_HARD_BOUNCE]: 'hard_bounce',
  [SuppressionReason.SUPPRESSION_REASON_SOFT_BOUNCES]: 'soft_bounces',
  [SuppressionReason.SUPPRESSION_REASON_UNSUBSCRIBE]: 'unsubscribe',
  [SuppressionReason.SUPPRESSION_REASON_SPAM_REPORT]: 'spam_report',
};

/** /suppressions/: HTTP JSON <-> analytics.v1, one call per request. */
export const suppressionRoutes: RouteModule = (router, { clients }) => {
  const service = clients.analytics;

  router.get('/suppressions/', async (req, res) => {
    const answer = await callService(
      service.listSuppressions.bind(service),
      { workspaceId: workspaceIdOf(res), page: pageRequest(req), email: (req.query as { email?: string }).email },
      'query',
    );
    const items = answer.suppressions.map((suppression) => ({
      email: suppression.email,
      reason: REASON_NAMES[suppression.reason],
      suppressed_at: suppression.suppressedAt?.toISOString(),
    }));
    res.json(page(items, answer.page));
  });

  router.delete('/suppressions/:email', async (req, res) => {
    await callService(service.liftSuppression.bind(service), {
      workspaceId: workspaceIdOf(res),
      email: pathParam(req, 'email'),
    });
    res.status(204).end();
  });
};
