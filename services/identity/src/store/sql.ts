import type { Knex } from 'knex';
import type { Page } from '../domain/model';
import type { PageWindow } from '../domain/validation';

/** The columns of a user, named as the domain type; `table` qualifies them in joins. */
export function userColumns(table = 'users'): string[] {
  return [
    `${table}.id`,
    `${table}.email`,
    `${table}.display_name as displayName`,
    `${table}.is_platform_admin as isPlatformAdmin`,
    `${table}.created_at as createdAt`,
    `${table}.updated_at as updatedAt`,
  ];
}

export const WORKSPACE_COLUMNS = ['id', 'name', 'created_at as createdAt', 'updated_at as updatedAt'];

export function isUniqueViolation(error: unknown): boolean {
  return (error as { code?: unknown }).code === '23505';
}

/**
 * One page of `base` plus the total it would have without paging. `items`
 * adds the select and the order, which must be total so pages do not overlap.
 */
export async function fetchPage<T>(
  base: Knex.QueryBuilder,
  window: PageWindow,
  items: (query: Knex.QueryBuilder) => Knex.QueryBuilder,
): Promise<Page<T>> {
  const [counted, rows] = await Promise.all([
    base.clone().count<{ total: string }[]>({ total: '*' }),
    items(base.clone())
      .limit(window.pageSize)
      .offset(window.offset)
      .then((found) => found as T[]),
  ]);
  return { items: rows, total: Number(counted[0].total), page: window.page, pageSize: window.pageSize };
}
