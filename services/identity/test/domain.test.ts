import { EnvReader, InvalidArgumentError } from '@mail/common';
import { identityV1 } from '@mail/proto';
import { readConfig } from '../src/config';
import { principalClaims, profilePatch } from '../src/domain/principal';
import { assignableRole } from '../src/domain/roles';
import { userPatchFromMask } from '../src/domain/users';
import { displayNameOrDefault, pageWindow, validEmail, validWorkspaceName } from '../src/domain/validation';

const { Role } = identityV1;

function violationsOf(check: () => unknown): unknown[] {
  try {
    check();
  } catch (error) {
    if (error instanceof InvalidArgumentError) return error.violations;
    throw error;
  }
  throw new Error('expected a validation failure');
}

const user = {
  id: '6f1c2a4e-9a1b-4c2d-8e3f-0a1b2c3d4e5f',
  email: 'ann@example.com',
  displayName: 'Ann',
  isPlatformAdmin: false,
  createdAt: new Date('2026-01-01T00:00:00.000Z'),
  updatedAt: new Date('2026-01-01T00:00:00.000Z'),
};

describe('config', () => {
  it('normalizes BOOTSTRAP_PLATFORM_ADMINS and defaults DATABASE_URL', () => {
    const config = readConfig(new EnvReader({ BOOTSTRAP_PLATFORM_ADMINS: ' Boss@Example.COM ,ops@example.com,' }));
    expect([...config.bootstrapPlatformAdmins]).toEqual(['boss@example.com', 'ops@example.com']);
    expect(config.databaseUrl).toBe('postgres://mail:mail@127.0.0.1:25432/mail');
  });
});

describe('roles', () => {
  it('maps the assignable roles', () => {
    expect([Role.ROLE_VIEWER, Role.ROLE_EDITOR, Role.ROLE_ADMIN].map(assignableRole)).toEqual(['viewer', 'editor', 'admin']);
  });

  it.each([
    [Role.ROLE_PLATFORM_ADMIN, 'platform_admin'],
    [Role.ROLE_UNSPECIFIED, null],
  ])('rejects role %s as a Pydantic enum error with input %s', (role, input) => {
    expect(violationsOf(() => assignableRole(role))).toEqual([
      {
        loc: ['role'],
        type: 'enum',
        msg: "Input should be 'viewer', 'editor' or 'admin'",
        input,
        ctx: { expected: "'viewer', 'editor' or 'admin'" },
      },
    ]);
  });
});

describe('e-mail', () => {
  it('trims and lower-cases, and reads the `Name <address>` form as Pydantic does', () => {
    expect(validEmail(['email'], '  Ann.Lee@Example.COM ')).toBe('ann.lee@example.com');
    expect(validEmail(['email'], 'Ann Lee <Ann.Lee@Example.COM>')).toBe('ann.lee@example.com');
  });

  it.each([
    ['An email address must have an @-sign.', 'ann.example.com'],
    ['There must be something before the @-sign.', '@example.com'],
    ['There must be something after the @-sign.', 'ann@'],
    ['The part after the @-sign is not valid. It should have a period.', 'ann@localhost'],
    ['The email address contains invalid characters before the @-sign: SPACE.', 'ann lee@example.com'],
    ['The email address contains invalid characters before the @-sign: U+0000.', 'ann\u0000@example.com'],
    ['The email address is too long before the @-sign (186 characters too many).', `${'a'.repeat(250)}@example.com`],
    [
      'The email address is too long (6 characters too many).',
      `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.com`,
    ],
  ])('rejects an address: %s', (reason, input) => {
    expect(violationsOf(() => validEmail(['email'], input))).toEqual([
      { loc: ['email'], type: 'value_error', msg: `value is not a valid email address: ${reason}`, input, ctx: { reason } },
    ]);
  });
});

describe('names', () => {
  it('accepts 1 to 200 characters, counting characters rather than UTF-16 units', () => {
    expect(validWorkspaceName('x')).toBe('x');
    expect(validWorkspaceName('😀'.repeat(200))).toBe('😀'.repeat(200));
  });

  it('rejects an empty or over-long workspace name', () => {
    expect(violationsOf(() => validWorkspaceName(''))).toEqual([
      { loc: ['name'], type: 'string_too_short', msg: 'String should have at least 1 character', input: '', ctx: { min_length: 1 } },
    ]);
    expect(violationsOf(() => validWorkspaceName('x'.repeat(201)))).toEqual([
      {
        loc: ['name'],
        type: 'string_too_long',
        msg: 'String should have at most 200 characters',
        input: 'x'.repeat(201),
        ctx: { max_length: 200 },
      },
    ]);
  });

  it('refuses NUL characters, which PostgreSQL text cannot hold', () => {
    const nul = (loc: string, input: string) => ({
      loc: [loc],
      type: 'value_error',
      msg: 'Value error, text must not contain NUL (\\u0000) characters',
      input,
      ctx: { error: {} },
    });
    expect(violationsOf(() => validWorkspaceName('w\u0000'))).toEqual([nul('name', 'w\u0000')]);
    expect(violationsOf(() => displayNameOrDefault(' Ann\u0000 ', 'ann@example.com'))).toEqual([nul('display_name', 'Ann\u0000')]);
  });

  it('falls back to the e-mail local part for a blank display name', () => {
    expect(displayNameOrDefault(undefined, 'ann.lee@example.com')).toBe('ann.lee');
    expect(displayNameOrDefault('   ', 'ann.lee@example.com')).toBe('ann.lee');
    expect(displayNameOrDefault(' Ann Lee ', 'ann.lee@example.com')).toBe('Ann Lee');
    expect(violationsOf(() => displayNameOrDefault('y'.repeat(201), 'a@b.co'))).toMatchObject([
      { loc: ['display_name'], type: 'string_too_long' },
    ]);
  });
});

describe('paging', () => {
  it('treats 0 as the default and caps the page size', () => {
    expect(pageWindow(undefined)).toEqual({ page: 1, pageSize: 50, offset: 0 });
    expect(pageWindow({ page: 0, pageSize: 0 })).toEqual({ page: 1, pageSize: 50, offset: 0 });
    expect(pageWindow({ page: 3, pageSize: 20 })).toEqual({ page: 3, pageSize: 20, offset: 40 });
    expect(pageWindow({ page: 2, pageSize: 10_000 })).toEqual({ page: 2, pageSize: 500, offset: 500 });
  });
});

describe('principal claims', () => {
  const token = { issuer: 'iss', subject: 'sub', email: 'Ann@Example.com', displayName: ' Ann ', grantPlatformAdmin: false };

  it('normalizes the claims and recognizes bootstrap admins', () => {
    expect(principalClaims(token, new Set())).toEqual({
      issuer: 'iss',
      subject: 'sub',
      email: 'ann@example.com',
      displayName: 'Ann',
      platformAdmin: false,
    });
    expect(principalClaims(token, new Set(['ann@example.com'])).platformAdmin).toBe(true);
    expect(principalClaims({ ...token, grantPlatformAdmin: true }, new Set()).platformAdmin).toBe(true);
  });

  it('treats empty claims as absent and cuts an over-long name', () => {
    const claims = principalClaims({ ...token, email: '', displayName: 'n'.repeat(250) }, new Set());
    expect(claims.email).toBeUndefined();
    expect(claims.displayName).toBe('n'.repeat(200));
    expect(principalClaims({ ...token, displayName: '  ' }, new Set()).displayName).toBeUndefined();
  });

  it('takes any syntactic address, whatever its domain, and refuses anything else', () => {
    expect(principalClaims({ ...token, email: 'Alice@corp.local' }, new Set()).email).toBe('alice@corp.local');
    expect(principalClaims({ ...token, email: 'qa@acceptance.test' }, new Set()).email).toBe('qa@acceptance.test');
    // Surrounding whitespace makes the claim malformed: it is not trimmed into an address (docs/api.md).
    for (const email of [
      'alice',
      '@corp.local',
      'alice@',
      'a@b@c',
      'al ice@corp.local',
      'alice@corp\u0000.local',
      ' alice@corp.local',
      'alice@corp.local\t',
    ]) {
      expect(violationsOf(() => principalClaims({ ...token, email }, new Set()))).toMatchObject([{ loc: ['email'], type: 'value_error' }]);
    }
  });

  it('requires issuer and subject, without NUL', () => {
    expect(violationsOf(() => principalClaims({ ...token, subject: ' ' }, new Set()))).toEqual([
      { loc: ['subject'], type: 'missing', msg: 'Field required', input: null },
    ]);
    expect(violationsOf(() => principalClaims({ ...token, subject: 's\u0000' }, new Set()))).toMatchObject([
      { loc: ['subject'], type: 'value_error', input: 's\u0000' },
    ]);
  });

  it('drops NUL from the name the identity provider sends rather than refusing the sign-in', () => {
    expect(principalClaims({ ...token, displayName: 'A\u0000nn\u0000' }, new Set()).displayName).toBe('Ann');
    expect(principalClaims({ ...token, displayName: '\u0000' }, new Set()).displayName).toBeUndefined();
  });

  it('patches only what changed and never revokes platform admin', () => {
    const claims = { issuer: 'iss', subject: 'sub', email: 'ann@example.com', displayName: 'Ann', platformAdmin: false };
    expect(profilePatch(user, claims)).toEqual({});
    expect(profilePatch(user, { ...claims, email: undefined, displayName: undefined })).toEqual({});
    expect(profilePatch(user, { ...claims, email: 'ann@new.example.com', displayName: 'Ann L' })).toEqual({
      email: 'ann@new.example.com',
      displayName: 'Ann L',
    });
    expect(profilePatch(user, { ...claims, platformAdmin: true })).toEqual({ isPlatformAdmin: true });
    expect(profilePatch({ ...user, isPlatformAdmin: true }, claims)).toEqual({});
  });
});

describe('user update mask', () => {
  const values = { email: 'New@Example.com', displayName: '', isPlatformAdmin: true };

  it('writes only the named fields', () => {
    expect(userPatchFromMask([], values, user)).toEqual({});
    expect(userPatchFromMask(['is_platform_admin'], values, user)).toEqual({ isPlatformAdmin: true });
    expect(userPatchFromMask(['email', 'display_name'], values, user)).toEqual({ email: 'new@example.com', displayName: 'new' });
    expect(userPatchFromMask(['display_name'], values, user)).toEqual({ displayName: 'ann' });
  });

  it('rejects unknown paths', () => {
    expect(violationsOf(() => userPatchFromMask(['id', 'email'], values, user))).toEqual([
      {
        loc: ['update_mask'],
        type: 'value_error',
        msg: "Value error, 'id' is not one of email, display_name, is_platform_admin",
        input: 'id',
        ctx: { error: {} },
      },
    ]);
  });
});
