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

/**
 * Text that can end up in a mail header (a sender name, a campaign name, a
 * variant label): no CR or LF, which would start a header of its own, nor any
 * other C0 control character or DEL. The OpenAPI document declares the same
 * `pattern`.
 */
export const HEADER_SAFE_PATTERN = '^[^\\x00-\\x1f\\x7f]*$';
const HEADER_SAFE = new RegExp(HEADER_SAFE_PATTERN, 'u');

/** Pydantic's error for a string outside HEADER_SAFE_PATTERN, as a `pattern`-constrained str reports it. */
export function headerSafeViolation(loc: (string | number)[], input: string): Violation | undefined {
  if (HEADER_SAFE.test(input)) return undefined;
  const msg = `String should match pattern '${HEADER_SAFE_PATTERN}'`;
  return { loc, type: 'string_pattern_mismatch', msg, input, ctx: { pattern: HEADER_SAFE_PATTERN } };
}

/**
 * A provider category that only looks like another: surrounding whitespace,
 * or a character that shows nothing (control, format such as a zero-width
 * space, the other default-ignorable ones, line and paragraph separators,
 * private use, lone surrogates). Webhook events find their campaign by exact
 * equality, so such a look-alike would claim what its owner cannot see.
 */
const CATEGORY_SURROUNDING_SPACE = /^\s|\s$/u;
const CATEGORY_INVISIBLE = /[\p{Cc}\p{Cf}\p{Co}\p{Cs}\p{Zl}\p{Zp}\p{Default_Ignorable_Code_Point}]/u;

/** Why a provider category id is refused, or undefined for one that is what it shows. */
export function providerCategoryProblem(category: string): string | undefined {
  if (CATEGORY_SURROUNDING_SPACE.test(category)) return 'provider_category_id must not begin or end with whitespace';
  if (CATEGORY_INVISIBLE.test(category)) return 'provider_category_id must not contain control or invisible characters';
  return undefined;
}

/** The value_error of a provider category id that providerCategoryProblem refuses. */
export function providerCategoryViolation(loc: (string | number)[], category: string): Violation | undefined {
  const problem = providerCategoryProblem(category);
  return problem === undefined ? undefined : valueError(loc, category, problem);
}
