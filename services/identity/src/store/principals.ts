import type { Knex } from 'knex';
import { ConflictError } from '@mail/common';
import type { Membership, User } from '../domain/model';
import { newUserProfile, profilePatch, type PrincipalClaims } from '../domain/principal';
import { isUuid } from '../domain/validation';
import { newUserColumns, updateUser } from './users';
import { userColumns } from './sql';

function findByIdentity(db: Knex, claims: PrincipalClaims): Promise<User | undefined> {
  return db('users').where({ issuer: claims.issuer, subject: claims.subject }).first<User | undefined>(userColumns());
}

/**
 * First sign-in: bind the row of a member added by e-mail, else create one.
 * Concurrent first requests race on the unique indexes; ON CONFLICT DO NOTHING
 * lets the losers read the winner's row. A second round covers an unbound row
 * appearing between the bind and the insert (AddMember at the same moment).
 */
async function provision(db: Knex, claims: PrincipalClaims): Promise<User> {
  const profile = newUserProfile(claims);
  const identity = { issuer: claims.issuer, subject: claims.subject };
  for (let round = 0; round < 2; round++) {
    const [bound] = await db('users')
      .where({ email: profile.email })
      .whereNull('issuer')
      .update({ ...identity, updated_at: db.fn.now() })
      .returning<User[]>(userColumns());
    if (bound) return bound;
    const [created] = await db('users')
      .insert({ ...newUserColumns(profile), ...identity })
      .onConflict()
      .ignore()
      .returning<User[]>(userColumns());
    if (created) return created;
    const existing = await findByIdentity(db, claims);
    if (existing) return existing;
  }
  // Binding a row that another identity already owns would hand over its access.
  throw new ConflictError('This e-mail address belongs to another sign-in identity');
}

/** One indexed read in the usual case; writes only on first sign-in or when the token's claims changed. */
export async function resolveUser(db: Knex, claims: PrincipalClaims): Promise<User> {
  const user = (await findByIdentity(db, claims)) ?? (await provision(db, claims));
  const patch = profilePatch(user, claims);
  return Object.keys(patch).length === 0 ? user : updateUser(db, user.id, patch);
}

/**
 * A platform admin acts in every workspace; everyone else in their memberships.
 * With `onlyWorkspaceId`, just that workspace's entry (if any): a request acts
 * in one workspace, and a platform admin's full list grows with every workspace.
 */
export async function membershipsOf(db: Knex, user: User, onlyWorkspaceId?: string): Promise<Membership[]> {
  if (onlyWorkspaceId !== undefined && !isUuid(onlyWorkspaceId)) return [];
  if (user.isPlatformAdmin) {
    const workspaces = db('workspaces')
      .select('id as workspaceId', 'name as workspaceName', db.raw("'platform_admin' as role"))
      .orderByRaw('lower(name), id');
    return onlyWorkspaceId === undefined ? workspaces : workspaces.where('id', onlyWorkspaceId);
  }
  const memberships = db('memberships as m')
    .join('workspaces as w', 'w.id', 'm.workspace_id')
    .where('m.user_id', user.id)
    .select('m.workspace_id as workspaceId', 'w.name as workspaceName', 'm.role')
    .orderByRaw('lower(w.name), w.id');
  return onlyWorkspaceId === undefined ? memberships : memberships.where('m.workspace_id', onlyWorkspaceId);
}
