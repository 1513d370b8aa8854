import { call } from '@mail/common';
import { fromGrpcError, type FieldLocation } from '../errors/http-error';

type UnaryMethod<Req, Res> = Parameters<typeof call<Req, Res>>[0];

/**
 * Calls a service from a route: a failed call becomes the matching HTTP error.
 * `fields` says where the request's fields came from, so a service's
 * violations point at the body or at the query string.
 */
export async function callService<Req, Res>(method: UnaryMethod<Req, Res>, request: Req, fields: FieldLocation = 'body'): Promise<Res> {
  try {
    return await call(method, request);
  } catch (error) {
    throw fromGrpcError(error, fields);
  }
}

/** The list envelope of every paged answer (docs/api.md, "Paging"). */
export function page<T>(items: T[], info: { total: number; page: number; pageSize: number } | undefined) {
  return { items, total: info?.total ?? items.length, page: info?.page ?? 1, page_size: info?.pageSize ?? items.length };
}
