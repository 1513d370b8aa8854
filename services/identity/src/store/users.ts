import type { Knex } from 'knex';
import { ConflictError, NotFoundError, containsNul, containsPattern } from '@mail/common';
import type { NewUser, Page, User, UserPatch } from '../domain/model';
import { isUuid, type PageWindow } from '../domain/validation';
import { fetchPage, isUniqueViolation, userColumns } from './sql';

const notFound = (): NotFoundError => new NotFoundError('User');
const emailTaken = (): ConflictError => new ConflictError('A user with this e-mail address already exists');

export function newUserColumns(user: NewUser): Record<string, unknown> {
  return { email: user.email, display_name: user.displayName, is_platform_admin: user.isPlatformAdmin };
}

export async function createUser(db: Knex, user: NewUser): Promise<User> {
  const [created] = await db('users').insert(newUserColumns(user)).onConflict('email').ignore().returning<User[]>(userColumns());
  if (!created) throw emailTaken();
  return created;
}

export async function getUser(db: Knex, id: string): Promise<User> {
  const user = isUuid(id) ? await db('users').where({ id }).first<User | undefined>(userColumns()) : undefined;
  if (!user) throw notFound();
  return user;
}

export async function listUsers(db: Knex, window: PageWindow, emailContains: string | undefined): Promise<Page<User>> {
  // PostgreSQL refuses NUL in a pattern, and no stored value can hold one.
  if (containsNul(emailContains)) return { items: [], total: 0, page: window.page, pageSize: window.pageSize };
  const base = db('users');
  if (emailContains) base.whereILike('email', containsPattern(emailContains));
  return fetchPage(base, window, (query) => query.select(userColumns()).orderBy('email'));
}

/** Writes the patched columns; a taken e-mail is a conflict, not a database error. */
export async function updateUser(db: Knex, id: string, patch: UserPatch): Promise<User> {
  if (!isUuid(id)) throw notFound();
  try {
    const [updated] = await db('users')
      .where({ id })
      .update({
        email: patch.email,
        display_name: patch.displayName,
        is_platform_admin: patch.isPlatformAdmin,
        updated_at: db.fn.now(),
      })
      .returning<User[]>(userColumns());
    if (!updated) throw notFound();
    return updated;
  } catch (error) {
    throw isUniqueViolation(error) ? emailTaken() : error;
  }
}

export async function deleteUser(db: Knex, id: string): Promise<void> {
  const deleted = isUuid(id) ? await db('users').where({ id }).delete() : 0;
  if (deleted === 0) throw notFound();
}
