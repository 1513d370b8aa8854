import { valueError, type Violation } from '../errors';

/** PostgreSQL text cannot hold NUL (U+0000): a write with one would fail, a pattern with one is refused. */
export function containsNul(text: string | null | undefined): boolean {
  return text?.includes('\u0000') ?? false;
}

/** The value_error for a string bound for PostgreSQL that holds a NUL, refused here instead of failing the write. */
export function nulViolation(loc: (string | number)[], input: string | null | undefined): Violation | undefined {
  return containsNul(input) ? valueError(loc, input, 'text must not contain NUL (\\u0000) characters') : undefined;
}

/**
 * nulViolation for every string inside `value`, arrays and objects included;
 * `fieldName` turns an object key into its name in `loc` (e.g. camelCase to the API's snake_case).
 */
export function nulViolations(value: unknown, loc: (string | number)[] = [], fieldName = (key: string): string => key): Violation[] {
  if (typeof value === 'string') {
    const violation = nulViolation(loc, value);
    return violation ? [violation] : [];
  }
  if (Array.isArray(value)) return value.flatMap((item, i) => nulViolations(item, [...loc, i], fieldName));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([key, item]) => nulViolations(item, [...loc, fieldName(key)], fieldName));
  }
  return [];
}
