import type { Knex } from 'knex';
import { unary, watchChanges, type ChangeFeed, type Logger } from '@mail/common';
import { identityV1 } from '@mail/proto';
import type { IdentityConfig } from '../config';
import type { Member, Page } from '../domain/model';
import { principalClaims } from '../domain/principal';
import { assignableRole, roleToProto } from '../domain/roles';
import { userPatchFromMask } from '../domain/users';
import { displayNameOrDefault, pageWindow, validEmail, validWorkspaceName, validateAll } from '../domain/validation';
import { addMember, getMember, listMembers, removeMember, updateMemberRole } from '../store/members';
import { membershipsOf, resolveUser } from '../store/principals';
import { createUser, deleteUser, getUser, listUsers, updateUser } from '../store/users';
import { createWorkspace, deleteWorkspace, getWorkspace, listWorkspaces, renameWorkspace } from '../store/workspaces';

function memberToProto(member: Member): identityV1.Member {
  return { ...member, role: roleToProto(member.role) };
}

function pageInfo<T>({ total, page, pageSize }: Page<T>): { total: number; page: number; pageSize: number } {
  return { total, page, pageSize };
}

export function identityHandlers(
  logger: Logger,
  db: Knex,
  feed: ChangeFeed,
  config: Pick<IdentityConfig, 'bootstrapPlatformAdmins'>,
): identityV1.IdentityServiceServer {
  return {
    watchAccessChanges: watchChanges(feed, () => ({})),

    resolvePrincipal: unary(logger, 'ResolvePrincipal', async (request) => {
      const user = await resolveUser(db, principalClaims(request, config.bootstrapPlatformAdmins));
      const memberships = await membershipsOf(db, user, request.workspaceId);
      return { user, memberships: memberships.map((m) => ({ ...m, role: roleToProto(m.role) })) };
    }),

    createWorkspace: unary(logger, 'CreateWorkspace', async (request) => ({
      workspace: await createWorkspace(db, validWorkspaceName(request.name)),
    })),
    getWorkspace: unary(logger, 'GetWorkspace', async (request) => ({ workspace: await getWorkspace(db, request.id) })),
    listWorkspaces: unary(logger, 'ListWorkspaces', async (request) => {
      const page = await listWorkspaces(db, pageWindow(request.page), request.nameContains);
      return { workspaces: page.items, page: pageInfo(page) };
    }),
    updateWorkspace: unary(logger, 'UpdateWorkspace', async (request) => ({
      workspace:
        request.name === undefined
          ? await getWorkspace(db, request.id)
          : await renameWorkspace(db, request.id, validWorkspaceName(request.name)),
    })),
    deleteWorkspace: unary(logger, 'DeleteWorkspace', async (request) => {
      await deleteWorkspace(db, request.id);
      return {};
    }),

    listMembers: unary(logger, 'ListMembers', async (request) => {
      const page = await listMembers(db, request.workspaceId, pageWindow(request.page));
      return { members: page.items.map(memberToProto), page: pageInfo(page) };
    }),
    addMember: unary(logger, 'AddMember', async (request) => {
      const [email, role] = validateAll(
        () => validEmail(['email'], request.email),
        () => assignableRole(request.role),
      );
      const user = { email, displayName: displayNameOrDefault(request.displayName, email), isPlatformAdmin: false };
      return { member: memberToProto(await addMember(db, request.workspaceId, user, role)) };
    }),
    updateMember: unary(logger, 'UpdateMember', async (request) => ({
      member: memberToProto(
        request.role === undefined
          ? await getMember(db, request.workspaceId, request.userId)
          : await updateMemberRole(db, request.workspaceId, request.userId, assignableRole(request.role)),
      ),
    })),
    removeMember: unary(logger, 'RemoveMember', async (request) => {
      await removeMember(db, request.workspaceId, request.userId);
      return {};
    }),

    createUser: unary(logger, 'CreateUser', async (request) => {
      const email = validEmail(['email'], request.email);
      const displayName = displayNameOrDefault(request.displayName, email);
      return { user: await createUser(db, { email, displayName, isPlatformAdmin: request.isPlatformAdmin }) };
    }),
    getUser: unary(logger, 'GetUser', async (request) => ({ user: await getUser(db, request.id) })),
    listUsers: unary(logger, 'ListUsers', async (request) => {
      const page = await listUsers(db, pageWindow(request.page), request.emailContains);
      return { users: page.items, page: pageInfo(page) };
    }),
    updateUser: unary(logger, 'UpdateUser', async (request) => {
      const current = await getUser(db, request.id);
      const values = request.user ?? identityV1.User.fromPartial({});
      const patch = userPatchFromMask(request.updateMask ?? [], values, current);
      return { user: Object.keys(patch).length === 0 ? current : await updateUser(db, request.id, patch) };
    }),
    deleteUser: unary(logger, 'DeleteUser', async (request) => {
      await deleteUser(db, request.id);
      return {};
    }),
  };
}
