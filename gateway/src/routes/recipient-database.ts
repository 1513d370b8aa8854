import type { deliveryV1 } from '@mail/proto';
import { workspaceIdOf } from '../auth/access';
import type { RouteModule } from './context';
import { callService } from './grpc';
import type { Json } from './http';

/** The answer of every operation: `shared` while the workspace has no database of its own. Never a password. */
function recipientDatabaseJson(workspaceId: string, own: deliveryV1.RecipientDatabase | undefined): Json {
  return {
    workspace_id: workspaceId,
    shared: own === undefined,
    kind: own?.kind ?? null,
    host: own?.host ?? null,
    port: own?.port ?? null,
    database: own?.database ?? null,
    user: own?.user ?? null,
    verified_at: own?.verifiedAt?.toISOString() ?? null,
  };
}

/** /workspaces/{id}/recipient-database: HTTP JSON <-> delivery.v1, one call per request. */
export const recipientDatabaseRoutes: RouteModule = (router, { clients }) => {
  const service = clients.delivery;

  router.put('/workspaces/:id/recipient-database', async (req, res) => {
    const workspaceId = workspaceIdOf(res);
    const url = (req.body as Json).url as string;
    const answer = await callService(service.putRecipientDatabase.bind(service), { workspaceId, url });
    res.json(recipientDatabaseJson(workspaceId, answer.recipientDatabase));
  });

  router.get('/workspaces/:id/recipient-database', async (_req, res) => {
    const workspaceId = workspaceIdOf(res);
    const answer = await callService(service.getRecipientDatabase.bind(service), { workspaceId });
    res.json(recipientDatabaseJson(workspaceId, answer.recipientDatabase));
  });

  router.delete('/workspaces/:id/recipient-database', async (_req, res) => {
    await callService(service.deleteRecipientDatabase.bind(service), { workspaceId: workspaceIdOf(res) });
    res.status(204).end();
  });
};
