import type { Request } from 'express';

/** A JSON object as the routes read bodies and write answers. */
export type Json = Record<string, unknown>;

/** A JSON null or absent value as an unset proto field. */
export const given = <T>(value: unknown): T | undefined => (value ?? undefined) as T | undefined;

/** A path parameter; the OpenAPI validator already checked it. */
export const pathParam = (req: Request, name = 'id'): string => req.params[name] as string;

/** `page` and `page_size` with the contract's defaults (the validator checked their ranges). */
export function pageRequest(req: Request): { page: number; pageSize: number } {
  const query = req.query as { page?: number; page_size?: number };
  return { page: query.page ?? 1, pageSize: query.page_size ?? 50 };
}

/**
 * The field mask of a PUT: the write-shape fields present in the body with a
 * value, or present as null where null clears (a null on a field that cannot
 * be null leaves it unchanged, so it is not written).
 */
export function updateMaskOf(body: Json, writeFields: readonly string[], notNullable: ReadonlySet<string>): string[] {
  return writeFields.filter((field) => field in body && (body[field] !== null || !notNullable.has(field)));
}
