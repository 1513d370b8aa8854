import type { Request } from 'express';
import type { identityV1 } from '@mail/proto';
import { principalOf } from '../auth/access';
import { roleFromProto, roleToProto } from '../auth/roles';
import type { Role } from '../openapi/document';
import type { RouteModule } from './context';
import { callService, page } from './grpc';
import { given, pageRequest, pathParam, type Json } from './http';

const timestamp = (date: Date | undefined): string | null => date?.toISOString() ?? null;

function workspaceJson(workspace: identityV1.Workspace | undefined): Json {
  if (!workspace) throw new Error('identity service answered without a workspace');
  return {
    id: workspace.id,
    name: workspace.name,
    created_at: timestamp(workspace.createdAt),
    updated_at: timestamp(workspace.updatedAt),
  };
}

function userJson(user: identityV1.User | undefined): Json {
  if (!user) throw new Error('identity service answered without a user');
  return {
    id: user.id,
    email: user.email,
    display_name: user.displayName,
    is_platform_admin: user.isPlatformAdmin,
    created_at: timestamp(user.createdAt),
    updated_at: timestamp(user.updatedAt),
  };
}

function memberJson(member: identityV1.Member | undefined): Json {
  if (!member?.user) throw new Error('identity service answered without a member');
  return {
    user_id: member.user.id,
    email: member.user.email,
    display_name: member.user.displayName,
    role: roleFromProto(member.role),
    created_at: timestamp(member.createdAt),
    updated_at: timestamp(member.updatedAt),
  };
}

/** User fields a PUT writes: present and not null (none of them can be null). */
const USER_FIELDS = ['email', 'display_name', 'is_platform_admin'];

/** /auth/me, /workspaces/, /workspaces/{id}/members, /users/: HTTP JSON <-> identity.v1, one call per request. */
export const identityRoutes: RouteModule = (router, { clients }) => {
  const service = clients.identity;
  const id = (req: Request): string => pathParam(req);
  /**
   * A write to users, workspaces or memberships: cached principals are dropped before the answer goes out, so
   * the caller's next request through this gateway sees it (other gateways hear of it from identity's stream).
   */
  const changingAccess = <T>(pending: Promise<T>): Promise<T> => pending.finally(() => clients.principals.accessChanged());

  router.get('/auth/me', (_req, res) => {
    const principal = principalOf(res);
    res.json({
      id: principal.user.id,
      email: principal.user.email,
      display_name: principal.user.displayName,
      memberships: [...principal.workspaces].map(([workspaceId, access]) => ({
        workspace_id: workspaceId,
        workspace_name: access.workspaceName,
        role: access.role,
      })),
    });
  });

  router.get('/workspaces/', async (req, res) => {
    const answer = await callService(service.listWorkspaces.bind(service), {
      page: pageRequest(req),
      nameContains: given<string>((req.query as Json).q),
    });
    res.json(page(answer.workspaces.map(workspaceJson), answer.page));
  });

  router.post('/workspaces/', async (req, res) => {
    const name = (req.body as Json).name as string;
    const answer = await changingAccess(callService(service.createWorkspace.bind(service), { name }));
    res.status(201).json(workspaceJson(answer.workspace));
  });

  router.get('/workspaces/:id', async (req, res) => {
    const answer = await callService(service.getWorkspace.bind(service), { id: id(req) });
    res.json(workspaceJson(answer.workspace));
  });

  router.put('/workspaces/:id', async (req, res) => {
    const name = given<string>((req.body as Json).name);
    const answer = await changingAccess(callService(service.updateWorkspace.bind(service), { id: id(req), name }));
    res.json(workspaceJson(answer.workspace));
  });

  // The workspace's campaigns, brand guides and engagement data go first, each service closing the workspace to
  // new ones, so nothing outlives it (a campaign would keep its provider_category_id, the event store the
  // addresses). Its runs go once campaign has closed it (no run can start after that), and stop sending. Should a step fail, the answer is an error and the workspace stays, emptied and closed:
  // repeating the DELETE finishes it.
  router.delete('/workspaces/:id', async (req, res) => {
    const workspaceId = id(req);
    await callService(service.getWorkspace.bind(service), { id: workspaceId });
    // Every step settles before the answer, so a 503 describes the state the workspace is left in.
    const closing = await Promise.allSettled([
      callService(clients.campaign.closeWorkspace.bind(clients.campaign), { workspaceId }).then(() =>
        callService(clients.delivery.closeWorkspace.bind(clients.delivery), { workspaceId }),
      ),
      callService(clients.brandGuide.closeWorkspace.bind(clients.brandGuide), { workspaceId }),
      callService(clients.analytics.closeWorkspace.bind(clients.analytics), { workspaceId }),
    ]);
    const failed = closing.find((step): step is PromiseRejectedResult => step.status === 'rejected');
    if (failed) throw failed.reason;
    await changingAccess(callService(service.deleteWorkspace.bind(service), { id: workspaceId }));
    res.status(204).end();
  });

  router.get('/workspaces/:id/members', async (req, res) => {
    const answer = await callService(service.listMembers.bind(service), { workspaceId: id(req), page: pageRequest(req) });
    res.json(page(answer.members.map(memberJson), answer.page));
  });

  router.post('/workspaces/:id/members', async (req, res) => {
    const body = req.body as Json;
    const answer = await changingAccess(
      callService(service.addMember.bind(service), {
        workspaceId: id(req),
        email: body.email as string,
        displayName: given<string>(body.display_name),
        role: roleToProto(body.role as Role),
      }),
    );
    res.status(201).json(memberJson(answer.member));
  });

  router.put('/workspaces/:id/members/:user_id', async (req, res) => {
    const role = given<Role>((req.body as Json).role);
    const answer = await changingAccess(
      callService(service.updateMember.bind(service), {
        workspaceId: id(req),
        userId: pathParam(req, 'user_id'),
        role: role === undefined ? undefined : roleToProto(role),
      }),
    );
    res.json(memberJson(answer.member));
  });

  router.delete('/workspaces/:id/members/:user_id', async (req, res) => {
    const member = { workspaceId: id(req), userId: pathParam(req, 'user_id') };
    await changingAccess(callService(service.removeMember.bind(service), member));
    res.status(204).end();
  });

  router.get('/users/', async (req, res) => {
    const answer = await callService(service.listUsers.bind(service), {
      page: pageRequest(req),
      emailContains: given<string>((req.query as Json).q),
    });
    res.json(page(answer.users.map(userJson), answer.page));
  });

  router.post('/users/', async (req, res) => {
    const body = req.body as Json;
    const answer = await changingAccess(
      callService(service.createUser.bind(service), {
        email: body.email as string,
        displayName: given<string>(body.display_name) ?? '',
        isPlatformAdmin: given<boolean>(body.is_platform_admin) ?? false,
      }),
    );
    res.status(201).json(userJson(answer.user));
  });

  router.get('/users/:id', async (req, res) => {
    const answer = await callService(service.getUser.bind(service), { id: id(req) });
    res.json(userJson(answer.user));
  });

  router.put('/users/:id', async (req, res) => {
    const body = req.body as Json;
    const answer = await changingAccess(
      callService(service.updateUser.bind(service), {
        id: id(req),
        updateMask: USER_FIELDS.filter((field) => body[field] !== undefined && body[field] !== null),
        user: {
          id: id(req),
          email: given<string>(body.email) ?? '',
          displayName: given<string>(body.display_name) ?? '',
          isPlatformAdmin: given<boolean>(body.is_platform_admin) ?? false,
        },
      }),
    );
    res.json(userJson(answer.user));
  });

  router.delete('/users/:id', async (req, res) => {
    await changingAccess(callService(service.deleteUser.bind(service), { id: id(req) }));
    res.status(204).end();
  });
};
