import { invalidEmail, parseEmail } from '../src/validation/email';
import { containsNul, nulViolation, nulViolations } from '../src/validation/text';

describe('e-mail addresses (email-validator behind Pydantic EmailStr)', () => {
  it.each([
    ['ana@example.com', 'ana@example.com'],
    ['Ana@EXAMPLE.com', 'Ana@example.com'],
    ['Ana Lopez <ana@example.com>', 'ana@example.com'],
    ['  ana.lopez+news@mail.example.co.uk ', 'ana.lopez+news@mail.example.co.uk'],
  ])('accepts %p', (input, email) => {
    expect(parseEmail(input)).toEqual({ email });
  });

  it.each([
    ['ana', 'An email address must have an @-sign.'],
    ['@example.com', 'There must be something before the @-sign.'],
    ['ana@', 'There must be something after the @-sign.'],
    ['ana@example', 'The part after the @-sign is not valid. It should have a period.'],
    ['an a@example.com', 'The email address contains invalid characters before the @-sign: SPACE.'],
    ['a(b)@example.com', "The email address contains invalid characters before the @-sign: '(', ')'."],
    ['.ana@example.com', 'An email address cannot start with a period.'],
    ['ana.@example.com', 'An email address cannot have a period immediately before the @-sign.'],
    ['a..na@example.com', 'An email address cannot have two periods in a row.'],
    ['ana@example..com', 'An email address cannot have two periods in a row.'],
    ['ana@.example.com', 'An email address cannot have a period immediately after the @-sign.'],
    ['ana@example.com.', 'An email address cannot end with a period.'],
    ['ana@-example.com', 'An email address cannot have a hyphen immediately after the @-sign.'],
    ['ana@exa_mple.com', "The part after the @-sign contains invalid characters: '_'."],
    ['ana@example.123', 'The part after the @-sign is not valid. It is not within a valid top-level domain.'],
    ['ana@example.test', 'The part after the @-sign is a special-use or reserved name that cannot be used with email.'],
    [`${'a'.repeat(65)}@example.com`, 'The email address is too long before the @-sign (1 character too many).'],
  ])('rejects %p', (input, reason) => {
    expect(parseEmail(input)).toEqual({ reason });
  });
});

describe('the entry for a refused address', () => {
  it('reads like the value_error of Pydantic EmailStr', () => {
    expect(invalidEmail(['body', 'from_email'], 'ana@', 'There must be something after the @-sign.')).toEqual({
      loc: ['body', 'from_email'],
      type: 'value_error',
      msg: 'value is not a valid email address: There must be something after the @-sign.',
      input: 'ana@',
      ctx: { reason: 'There must be something after the @-sign.' },
    });
  });

  it('refuses a NUL in an address', () => {
    expect(parseEmail('a\u0000b@example.com')).toEqual({
      reason: 'The email address contains invalid characters before the @-sign: U+0000.',
    });
  });
});

describe('NUL characters (PostgreSQL text cannot hold them)', () => {
  const refused = (loc: (string | number)[], input: string) => ({
    loc,
    type: 'value_error',
    msg: 'Value error, text must not contain NUL (\\u0000) characters',
    input,
    ctx: { error: {} },
  });

  it('finds them in a string', () => {
    expect([containsNul('a\u0000b'), containsNul('ab'), containsNul(''), containsNul(null), containsNul(undefined)]).toEqual([
      true,
      false,
      false,
      false,
      false,
    ]);
    expect(nulViolation(['name'], 'a\u0000')).toEqual(refused(['name'], 'a\u0000'));
    expect(nulViolation(['name'], 'a')).toBeUndefined();
    expect(nulViolation(['name'], null)).toBeUndefined();
  });

  it('finds every one inside objects and arrays, naming fields as asked', () => {
    const write = { name: 'ok', fromName: '\u0000', csvAccountIds: ['1', '2\u0000'], variants: [{ label: 'l\u0000', weight: 1 }], none: null };
    const snakeCase = (key: string) => key.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
    expect(nulViolations(write, [], snakeCase)).toEqual([
      refused(['from_name'], '\u0000'),
      refused(['csv_account_ids', 1], '2\u0000'),
      refused(['variants', 0, 'label'], 'l\u0000'),
    ]);
    expect(nulViolations(write, ['body']).map((v) => v.loc)).toEqual([
      ['body', 'fromName'],
      ['body', 'csvAccountIds', 1],
      ['body', 'variants', 0, 'label'],
    ]);
    expect(nulViolations({ a: ['x'], b: 3 })).toEqual([]);
  });
});
