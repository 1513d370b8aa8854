import type { deliveryV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { given, pageRequest, pathParam, type Json } from './http';

function runJson(run: deliveryV1.Run | undefined): Json {
  if (!run) throw new Error('delivery service answered without a run');
  return {
    id: run.id,
    workspace_id: run.workspaceId,
    campaign_id: run.campaignId,
    trigger: run.trigger,
    scheduled_for: run.scheduledFor?.toISOString() ?? null,
    status: run.status,
    failure: run.failure ?? null,
    created_at: run.createdAt?.toISOString(),
    started_at: run.startedAt?.toISOString() ?? null,
    finished_at: run.finishedAt?.toISOString() ?? null,
    counts: run.counts,
    variants:
      run.variants?.variants.map((variant) => ({
        id: variant.id,
        label: variant.label ?? null,
        weight: variant.weight,
        recipients: variant.recipients,
        sent: variant.sent,
      })) ?? null,
    ab_test: run.abTest ? abTestJson(run.abTest) : null,
    audience: run.audience ? { run_id: run.audience.runId, engagement: run.audience.engagement } : null,
  };
}

function abTestJson(test: deliveryV1.RunAbTest): Json {
  return {
    phase: test.phase,
    test_fraction: test.testFraction,
    wait_minutes: test.waitMinutes,
    metric: test.metric,
    test_recipients: test.testRecipients,
    decide_at: test.decideAt?.toISOString() ?? null,
    winner_variant_id: test.winnerVariantId ?? null,
    decided_by: test.decidedBy ?? null,
    variants: test.variants.map((variant) => ({
      variant_id: variant.variantId,
      sent: variant.sent,
      opens: variant.opens,
      clicks: variant.clicks,
      rate: variant.rate ?? null,
    })),
    leader_variant_id: test.leaderVariantId ?? null,
  };
}

function recipientJson(recipient: deliveryV1.RunRecipient): Json {
  return {
    email: recipient.email,
    status: recipient.status,
    variant_id: recipient.variantId ?? null,
    message_id: recipient.messageId ?? null,
    sent_at: recipient.sentAt?.toISOString() ?? null,
    error: recipient.error ?? null,
  };
}

/** Campaign runs and test sends: HTTP JSON <-> delivery.v1, one call per request. */
export const runRoutes: RouteModule = (router, { clients }) => {
  const service = clients.delivery;

  router.post('/email-campaigns/:id/runs', async (req, res) => {
    const audience = (req.body as Json | undefined)?.audience as Json | null | undefined;
    const answer = await callService(service.createRun.bind(service), {
      workspaceId: workspaceIdOf(res),
      campaignId: pathParam(req),
      audience: audience ? { runId: audience.run_id as string, engagement: audience.engagement as string } : undefined,
    });
    res.status(201).json(runJson(answer.run));
  });

  router.get('/email-campaigns/:id/runs', async (req, res) => {
    const answer = await callService(service.listRuns.bind(service), {
      workspaceId: workspaceIdOf(res),
      campaignId: pathParam(req),
      page: pageRequest(req),
    });
    res.json(page(answer.runs.map(runJson), answer.page));
  });

  router.post('/email-campaigns/:id/test-send', async (req, res) => {
    const body = req.body as Json;
    const answer = await callService(service.testSend.bind(service), {
      workspaceId: workspaceIdOf(res),
      campaignId: pathParam(req),
      emails: body.emails as string[],
      variantId: given<string>(body.variant_id),
    });
    res.json({
      results: answer.outcomes.map((outcome) => ({
        email: outcome.email,
        status: outcome.status,
        message_id: outcome.messageId ?? null,
        error: outcome.error ?? null,
      })),
    });
  });

  router.get('/campaign-runs/:id', async (req, res) => {
    const answer = await callService(service.getRun.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.json(runJson(answer.run));
  });

  router.get('/campaign-runs/:id/recipients', async (req, res) => {
    const query = req.query as { status?: string };
    const answer = await callService(
      service.listRunRecipients.bind(service),
      { workspaceId: workspaceIdOf(res), runId: pathParam(req), page: pageRequest(req), status: query.status },
      'query',
    );
    res.json(page(answer.recipients.map(recipientJson), answer.page));
  });

  router.post('/campaign-runs/:id/pause', async (req, res) => {
    const answer = await callService(service.pauseRun.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.json(runJson(answer.run));
  });

  router.post('/campaign-runs/:id/resume', async (req, res) => {
    const answer = await callService(service.resumeRun.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.json(runJson(answer.run));
  });

  router.post('/campaign-runs/:id/winner', async (req, res) => {
    const answer = await callService(service.pickWinner.bind(service), {
      workspaceId: workspaceIdOf(res),
      id: pathParam(req),
      variantId: (req.body as Json).variant_id as string,
    });
    res.json(runJson(answer.run));
  });

  router.post('/campaign-runs/:id/cancel', async (req, res) => {
    const answer = await callService(service.cancelRun.bind(service), { workspaceId: workspaceIdOf(res), id: pathParam(req) });
    res.json(runJson(answer.run));
  });
};
