/**
 * E-mail address syntax, checked the way Pydantic's EmailStr (python
 * email-validator, no deliverability check) does, with its reason texts, so
 * the 422 reads the same as FastAPI's.
 */
const MAX_LENGTH = 254;
const LOCAL_MAX_LENGTH = 64;
// RFC 5322 atext plus the period; non-ASCII letters are allowed as in SMTPUTF8 addresses.
const LOCAL_CHARACTER = /[A-Za-z0-9!#$%&'*+/=?^_`{|}~.\-]|[^\x00-\x7f]/u;
const DOMAIN_CHARACTER = /[A-Za-z0-9.\-]|[^\x00-\x7f]/u;

/** How email-validator names a character in its reasons. */
function display(char: string): string {
  if (char === ' ') return 'SPACE';
  if (char === "'" || char === '\\') return `"${char}"`;
  if (char > ' ' && char < '\x7f') return `'${char}'`;
  return `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

function invalidCharacters(text: string, allowed: RegExp): string | undefined {
  const bad = [...new Set([...text].filter((c) => !allowed.test(c) || /\s/u.test(c)).map(display))].sort();
  return bad.length === 0 ? undefined : bad.join(', ');
}

/** Why `address` is not a valid e-mail address, or undefined when it is. */
export function emailProblem(address: string): string | undefined {
  const at = address.lastIndexOf('@');
  if (at < 0) return 'An email address must have an @-sign.';
  const local = address.slice(0, at);
  const domain = address.slice(at + 1);
  if (local === '') return 'There must be something before the @-sign.';
  if (domain === '') return 'There must be something after the @-sign.';
  const length = [...address].length;
  if (length > MAX_LENGTH) return `The email address is too long (${length - MAX_LENGTH} characters too many).`;
  const localLength = [...local].length;
  if (localLength > LOCAL_MAX_LENGTH) {
    return `The email address is too long before the @-sign (${localLength - LOCAL_MAX_LENGTH} characters too many).`;
  }
  const badLocal = invalidCharacters(local, LOCAL_CHARACTER);
  if (badLocal) return `The email address contains invalid characters before the @-sign: ${badLocal}.`;
  if (local.startsWith('.')) return 'An email address cannot start with a period.';
  if (local.endsWith('.')) return 'An email address cannot have a period immediately before the @-sign.';
  if (local.includes('..')) return 'An email address cannot have two periods in a row.';
  const badDomain = invalidCharacters(domain, DOMAIN_CHARACTER);
  if (badDomain) return `The part after the @-sign contains invalid characters: ${badDomain}.`;
  if (domain.startsWith('.')) return 'An email address cannot have a period immediately after the @-sign.';
  if (domain.endsWith('.')) return 'An email address cannot end with a period.';
  if (domain.includes('..')) return 'An email address cannot have two periods in a row.';
  if (domain.split('.').some((label) => label.startsWith('-') || label.endsWith('-'))) {
    return 'The part after the @-sign is not valid. A label cannot start or end with a hyphen.';
  }
  if (!domain.includes('.')) return 'The part after the @-sign is not valid. It should have a period.';
  return undefined;
}
