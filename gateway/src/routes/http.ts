import type { Request } from 'express';

/** A JSON object as the routes read bodies and write answers. */
export type Json = Record<string, unknown>;

/** A JSON null or absent value as an unset proto field. */
export const given = <T>(value: unknown): T | undefined => (value ?? undefined) as T | undefined;

/** A path parameter; the OpenAPI validator already checked it. */
export const pathParam = (req: Request, name = 'id'): string => req.params[name] as string;

/** `page` and `page_size` with their documented defaults (the validator checked their ranges). */
export function pageRequest(req: Request): { page: number; pageSize: number } {
  const query = req.query as { page?: number; page_size?: number };
  return { page: query.page ?? 1, pageSize: query.page_size ?? 50 };
}

/**
 * The field mask of a PUT: the write-shape fields present in the body, null
 * or not. What a null means (clear, or leave unchanged where a field cannot be
 * null) is the owning service's rule.
 */
export function updateMaskOf(body: Json, writeFields: readonly string[]): string[] {
  return writeFields.filter((field) => field in body);
}
