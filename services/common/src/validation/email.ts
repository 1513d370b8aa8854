import type { Violation } from '../errors';

/**
 * E-mail address syntax exactly as Pydantic v2's EmailStr checks it (python
 * email-validator 2.x, no deliverability check, SMTPUTF8 allowed), with its
 * reason texts, so a 422 reads the same wherever an address is validated.
 */

const ATEXT = String.raw`[a-zA-Z0-9_!#$%&'*+\-/=?^\x60{|}~\u{80}-\u{10FFFF}]`;
const LOCAL_PART = new RegExp(`^${ATEXT}+(?:\\.${ATEXT}+)*$`, 'u');
const LOCAL_CHAR = new RegExp(`^(?:${ATEXT}|\\.)$`, 'u');
const DOMAIN_CHAR = /^[a-zA-Z0-9\-.\u{80}-\u{10FFFF}]$/u;
const ASCII_HOSTNAME = /^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*$/;
const SPECIAL_USE_DOMAINS = ['arpa', 'invalid', 'local', 'localhost', 'onion', 'test'];
// Pydantic's `Display Name <address>` form; the address inside the brackets is what gets validated.
const PRETTY_EMAIL = /^\s*(?:(?:[\p{L}\p{N}_!#$%&'*+\-/=?^`{|}~]+\s+)*[\p{L}\p{N}_!#$%&'*+\-/=?^`{|}~]+|"(?:[^"]|\\")+")?\s*<(.+)>\s*$/u;

const tooMany = (length: number, limit: number): string => {
  const over = length - limit;
  return `(${over} character${over > 1 ? 's' : ''} too many)`;
};

/** Python's `safe_character_display`, for the ASCII characters this check can meet. */
function displayCharacter(char: string): string {
  if (char === '\\') return '"\\"';
  if (char === "'") return `"'"`;
  if (char > ' ' && char < '\x7f') return `'${char}'`;
  if (char === ' ') return 'SPACE';
  return `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`;
}

function badCharacters(text: string, allowed: RegExp): string | undefined {
  const bad = [...new Set([...text].filter((char) => !allowed.test(char)).map(displayCharacter))].sort();
  return bad.length > 0 ? bad.join(', ') : undefined;
}

/** email-validator's `check_dot_atom`. */
function dotProblem(label: string, startText: string, endText: string, hostname: boolean): string | undefined {
  if (label.endsWith('.')) return endText.replace('{}', 'period');
  if (label.startsWith('.')) return startText.replace('{}', 'period');
  if (label.includes('..')) return 'An email address cannot have two periods in a row.';
  if (!hostname) return undefined;
  if (label.endsWith('-')) return endText.replace('{}', 'hyphen');
  if (label.startsWith('-')) return startText.replace('{}', 'hyphen');
  if (label.includes('.-') || label.includes('-.')) return 'An email address cannot have a period and a hyphen next to each other.';
  return undefined;
}

function localPartProblem(local: string): string | undefined {
  if (local.length === 0) return 'There must be something before the @-sign.';
  if (local.startsWith('"')) return 'Quoting the part before the @-sign is not allowed here.';
  const length = [...local].length;
  if (length > 64) return `The email address is too long before the @-sign ${tooMany(length, 64)}.`;
  if (LOCAL_PART.test(local)) return undefined;
  const bad = badCharacters(local, LOCAL_CHAR);
  if (bad) return `The email address contains invalid characters before the @-sign: ${bad}.`;
  return (
    dotProblem(
      local,
      'An email address cannot start with a {}.',
      'An email address cannot have a {} immediately before the @-sign.',
      false,
    ) ?? 'The email address contains invalid characters before the @-sign.'
  );
}

function domainProblem(domain: string): string | undefined {
  if (domain.length === 0) return 'There must be something after the @-sign.';
  if (domain.startsWith('[') && domain.endsWith(']')) return 'A bracketed IP address after the @-sign is not allowed here.';
  const bad = badCharacters(domain, DOMAIN_CHAR);
  if (bad) return `The part after the @-sign contains invalid characters: ${bad}.`;
  const dot = dotProblem(
    domain,
    'An email address cannot have a {} immediately after the @-sign.',
    'An email address cannot end with a {}.',
    true,
  );
  if (dot) return dot;
  if (domain.split('.').some((label) => /^(?!xn)..--/i.test(label))) {
    return 'An email address cannot have two letters followed by two dashes immediately after the @-sign or after a period, except Punycode.';
  }
  // Internationalized domains are taken as given: their IDNA checks need the full Unicode tables.
  if (!ASCII_HOSTNAME.test(domain) && /^\p{ASCII}*$/u.test(domain)) {
    return 'The email address contains invalid characters after the @-sign after IDNA encoding.';
  }
  if (domain.length > 253) return `The email address is too long after the @-sign ${tooMany(domain.length, 253)}.`;
  const longLabel = domain.split('.').find((label) => label.length > 63);
  if (longLabel) return `After the @-sign, periods cannot be separated by so many characters ${tooMany(longLabel.length, 63)}.`;
  if (!domain.includes('.')) return 'The part after the @-sign is not valid. It should have a period.';
  if (!/[A-Za-z]$/.test(domain)) return 'The part after the @-sign is not valid. It is not within a valid top-level domain.';
  if (SPECIAL_USE_DOMAINS.some((name) => domain === name || domain.endsWith(`.${name}`))) {
    return 'The part after the @-sign is a special-use or reserved name that cannot be used with email.';
  }
  return undefined;
}

/** Pydantic's EmailStr: the normalized address (domain lowercased), or email-validator's reason. */
export function parseEmail(input: string): { email: string } | { reason: string } {
  if (input.length > 2048) return { reason: 'Length must not exceed 2048 characters' };
  const address = (PRETTY_EMAIL.exec(input)?.[1] ?? input).trim();
  const at = address.indexOf('@');
  if (at < 0) return { reason: 'An email address must have an @-sign.' };
  const local = address.slice(0, at);
  const domain = address.slice(at + 1).toLowerCase();
  const reason = localPartProblem(local) ?? domainProblem(domain);
  if (reason) return { reason };
  const email = `${local}@${domain}`;
  if (email.length > 254) return { reason: `The email address is too long ${tooMany(email.length, 254)}.` };
  return { email };
}

/** Pydantic's 422 entry for an address EmailStr refuses. */
export function invalidEmail(loc: (string | number)[], input: unknown, reason: string): Violation {
  return { loc, type: 'value_error', msg: `value is not a valid email address: ${reason}`, input, ctx: { reason } };
}

/**
 * An address as an identity provider's `email` claim may carry it: one @-sign,
 * both sides non-empty, no whitespace or control characters. Deliberately
 * looser than EmailStr: a sign-in must not fail on a domain EmailStr calls
 * reserved (corp.local, acceptance.test), since the provider vouches for it.
 */
export function isAddressSyntax(input: string): boolean {
  const at = input.indexOf('@');
  return input.length <= 2048 && at > 0 && at === input.lastIndexOf('@') && at < input.length - 1 && !/[\s\p{Cc}]/u.test(input);
}
