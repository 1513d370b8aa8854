import type { Knex } from 'knex';
import { ConflictError, NotFoundError } from '@mail/common';
import type { Member, MembershipRole, NewUser, Page, User } from '../domain/model';
import { isUuid, type PageWindow } from '../domain/validation';
import { fetchPage, userColumns } from './sql';
import { newUserColumns } from './users';
import { getWorkspace } from './workspaces';

interface MemberRow extends User {
  workspaceId: string;
  role: MembershipRole;
  memberCreatedAt: Date;
  memberUpdatedAt: Date;
}

const memberNotFound = (): NotFoundError => new NotFoundError('Member');

function membersOf(db: Knex, workspaceId: string): Knex.QueryBuilder {
  return db('memberships as m').join('users as u', 'u.id', 'm.user_id').where('m.workspace_id', workspaceId);
}

function selectMember(query: Knex.QueryBuilder): Knex.QueryBuilder {
  return query.select([
    ...userColumns('u'),
    'm.workspace_id as workspaceId',
    'm.role',
    'm.created_at as memberCreatedAt',
    'm.updated_at as memberUpdatedAt',
  ]);
}

function toMember({ workspaceId, role, memberCreatedAt, memberUpdatedAt, ...user }: MemberRow): Member {
  return { user, workspaceId, role, createdAt: memberCreatedAt, updatedAt: memberUpdatedAt };
}

async function findMember(db: Knex, workspaceId: string, userId: string): Promise<Member> {
  const row = await selectMember(membersOf(db, workspaceId).where('m.user_id', userId)).first<MemberRow | undefined>();
  if (!row) throw memberNotFound();
  return toMember(row);
}

/** Locks the workspace against deletion until the transaction ends, so the membership insert cannot lose it. */
async function lockWorkspace(trx: Knex.Transaction, workspaceId: string): Promise<void> {
  const found =
    isUuid(workspaceId) && (await trx('workspaces').where({ id: workspaceId }).forKeyShare().first<{ id: string } | undefined>('id'));
  if (!found) throw new NotFoundError('Workspace');
}

export async function listMembers(db: Knex, workspaceId: string, window: PageWindow): Promise<Page<Member>> {
  await getWorkspace(db, workspaceId);
  const page = await fetchPage<MemberRow>(membersOf(db, workspaceId), window, (query) => selectMember(query).orderBy('u.email'));
  return { ...page, items: page.items.map(toMember) };
}

/** Adds the user with this e-mail, creating the user when nobody has it yet. */
export async function addMember(db: Knex, workspaceId: string, user: NewUser, role: MembershipRole): Promise<Member> {
  const userId = await db.transaction(async (trx) => {
    await lockWorkspace(trx, workspaceId);
    await trx('users').insert(newUserColumns(user)).onConflict('email').ignore();
    const { id } = await trx('users').where({ email: user.email }).first<{ id: string }>('id');
    const added = await trx('memberships')
      .insert({ workspace_id: workspaceId, user_id: id, role })
      .onConflict(['workspace_id', 'user_id'])
      .ignore()
      .returning<{ user_id: string }[]>('user_id');
    if (added.length === 0) throw new ConflictError('User is already a member of this workspace');
    return id;
  });
  return findMember(db, workspaceId, userId);
}

export async function getMember(db: Knex, workspaceId: string, userId: string): Promise<Member> {
  if (!isUuid(workspaceId) || !isUuid(userId)) throw memberNotFound();
  return findMember(db, workspaceId, userId);
}

export async function updateMemberRole(db: Knex, workspaceId: string, userId: string, role: MembershipRole): Promise<Member> {
  if (!isUuid(workspaceId) || !isUuid(userId)) throw memberNotFound();
  const updated = await db('memberships').where({ workspace_id: workspaceId, user_id: userId }).update({ role, updated_at: db.fn.now() });
  if (updated === 0) throw memberNotFound();
  return findMember(db, workspaceId, userId);
}

export async function removeMember(db: Knex, workspaceId: string, userId: string): Promise<void> {
  const removed =
    isUuid(workspaceId) && isUuid(userId) ? await db('memberships').where({ workspace_id: workspaceId, user_id: userId }).delete() : 0;
  if (removed === 0) throw memberNotFound();
}
