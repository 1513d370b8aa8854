import { cronProblem, cronViolation } from '../src/validation/cron';
import { invalidEmail, parseEmail } from '../src/validation/email';
import { memoized } from '../src/validation/memo';
import { readOnlySelectProblem, selectStatementViolation } from '../src/validation/select-statement';
import { containsNul, nulViolation, nulViolations } from '../src/validation/text';
import { LEGITIMATE_SELECTS, REFUSED_QUERIES } from './select-statement-queries';

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
    const write = {
      name: 'ok',
      fromName: '\u0000',
      csvAccountIds: ['1', '2\u0000'],
      variants: [{ label: 'l\u0000', weight: 1 }],
      none: null,
    };
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

describe('mssql_query: one read-only T-SQL SELECT', () => {
  it.each(LEGITIMATE_SELECTS)('accepts %s', (sql) => {
    expect(readOnlySelectProblem(sql)).toBeUndefined();
  });

  it.each(REFUSED_QUERIES)('refuses %j', (sql, reason) => {
    expect(readOnlySelectProblem(sql)).toBe(reason);
  });
});

describe('schedule_cron: a 5-field cron expression', () => {
  it.each(['*/5 * * * *', '0 9 * * MON-FRI', '0 0 1 JAN *', '5,10 1-5/2 * * *', '0 0 L * *', '0 0 * * THU', ' 0  0 * * * '])(
    'accepts %j',
    (cron) => expect(cronProblem(cron)).toBeUndefined(),
  );

  it.each([
    ['0 0 * * * *', 'expected 5 fields (minute hour day-of-month month day-of-week), got 6'],
    ['* * * *', 'expected 5 fields (minute hour day-of-month month day-of-week), got 4'],
    ['@daily', 'expected 5 fields (minute hour day-of-month month day-of-week), got 1'],
    ['', 'expected 5 fields (minute hour day-of-month month day-of-week), got 0'],
    ['60 * * * *', 'Constraint error, got value 60 expected range 0-59'],
    ['0 0 30 2 *', 'Invalid explicit day of month definition'],
    ['a b c d e', expect.any(String)],
    ['H * * * *', 'the H (hashed) notation is not supported'],
  ])('refuses %j', (cron, reason) => {
    expect(cronProblem(cron)).toEqual(reason);
  });
});

describe('the value_errors of both', () => {
  it('name the rule, and are absent when it holds', () => {
    expect(cronViolation(['schedule_cron'], '* * *')).toEqual({
      loc: ['schedule_cron'],
      type: 'value_error',
      msg: 'Value error, invalid cron expression: expected 5 fields (minute hour day-of-month month day-of-week), got 3',
      input: '* * *',
      ctx: { error: {} },
    });
    expect(selectStatementViolation(['mssql_query'], 'DELETE FROM t')).toEqual({
      loc: ['mssql_query'],
      type: 'value_error',
      msg: 'Value error, mssql_query must be a single read-only SELECT statement; DELETE is not allowed',
      input: 'DELETE FROM t',
      ctx: { error: {} },
    });
    expect(cronViolation(['schedule_cron'], '0 9 * * 1')).toBeUndefined();
    expect(selectStatementViolation(['mssql_query'], 'SELECT 1')).toBeUndefined();
  });
});

describe('memoized checks', () => {
  it('answers a repeated input from memory, and forgets everything once full', () => {
    const seen: string[] = [];
    const check = memoized((input: string) => {
      seen.push(input);
      return input.length;
    }, 2);
    expect([check('a'), check('bb'), check('a'), check('bb')]).toEqual([1, 2, 1, 2]);
    expect(seen).toEqual(['a', 'bb']);
    expect(check('ccc')).toBe(3);
    expect(check('a')).toBe(1);
    expect(seen).toEqual(['a', 'bb', 'ccc', 'a']);
  });
});
