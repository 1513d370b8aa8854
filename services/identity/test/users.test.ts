import { failure, MISSING_UUID, Role, startIdentity, status, type Identity } from './harness';

let identity: Identity;

beforeAll(async () => {
  identity = await startIdentity();
});

afterAll(async () => {
  await identity.close();
});

const userNotFound = { code: status.NOT_FOUND, details: 'User not found', violations: [] };
const emailTaken = { code: status.ALREADY_EXISTS, details: 'A user with this e-mail address already exists', violations: [] };

async function newUser(email: string, displayName = ''): Promise<string> {
  return (await identity.rpc('createUser', { email, displayName, isPlatformAdmin: false })).user!.id;
}

describe('users', () => {
  it('creates and gets a user', async () => {
    const { user } = await identity.rpc('createUser', { email: ' Hana@Example.com ', displayName: 'Hana', isPlatformAdmin: true });
    expect(user).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      email: 'hana@example.com',
      displayName: 'Hana',
      isPlatformAdmin: true,
      createdAt: expect.any(Date),
      updatedAt: user!.createdAt,
    });
    expect((await identity.rpc('getUser', { id: user!.id })).user).toEqual(user);
    expect(
      (await identity.rpc('createUser', { email: 'ivan@example.com', displayName: '', isPlatformAdmin: false })).user?.displayName,
    ).toBe('ivan');
  });

  it('refuses a taken e-mail in any letter case', async () => {
    expect(await failure(identity.rpc('createUser', { email: 'HANA@example.com', displayName: '', isPlatformAdmin: false }))).toEqual(
      emailTaken,
    );
  });

  it('rejects an invalid e-mail or an over-long display name', async () => {
    expect(await failure(identity.rpc('createUser', { email: 'hana.example.com', displayName: '', isPlatformAdmin: false }))).toEqual({
      code: status.INVALID_ARGUMENT,
      details: 'email: value is not a valid email address: An email address must have an @-sign.',
      violations: [
        {
          loc: ['email'],
          type: 'value_error',
          msg: 'value is not a valid email address: An email address must have an @-sign.',
          input: 'hana.example.com',
          ctx: { reason: 'An email address must have an @-sign.' },
        },
      ],
    });
    expect(
      await failure(identity.rpc('createUser', { email: 'long@example.com', displayName: 'd'.repeat(201), isPlatformAdmin: false })),
    ).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['display_name'], type: 'string_too_long' }],
    });
  });

  it('answers not found for an unknown or malformed id', async () => {
    expect(await failure(identity.rpc('getUser', { id: MISSING_UUID }))).toEqual(userNotFound);
    expect(await failure(identity.rpc('getUser', { id: 'abc' }))).toEqual(userNotFound);
    expect(await failure(identity.rpc('updateUser', { id: MISSING_UUID, updateMask: ['display_name'] }))).toEqual(userNotFound);
    expect(await failure(identity.rpc('deleteUser', { id: 'abc' }))).toEqual(userNotFound);
  });

  it('lists users by e-mail in pages with the total, filtered case-insensitively', async () => {
    await identity.db('users').delete();
    for (const email of ['kim@corp.example', 'lee@example.com', 'jo@corp.example', 'max_1@example.com', 'max21@example.com']) {
      await newUser(email);
    }
    const first = await identity.rpc('listUsers', { page: { page: 1, pageSize: 2 } });
    expect(first.users.map((u) => u.email)).toEqual(['jo@corp.example', 'kim@corp.example']);
    expect(first.page).toEqual({ total: 5, page: 1, pageSize: 2 });
    const last = await identity.rpc('listUsers', { page: { page: 3, pageSize: 2 } });
    expect(last.users.map((u) => u.email)).toEqual(['max_1@example.com']);

    const corp = await identity.rpc('listUsers', { emailContains: 'CORP' });
    expect(corp.users.map((u) => u.email)).toEqual(['jo@corp.example', 'kim@corp.example']);
    expect(corp.page).toEqual({ total: 2, page: 1, pageSize: 50 });
    expect((await identity.rpc('listUsers', { emailContains: 'x_' })).users.map((u) => u.email)).toEqual(['max_1@example.com']);
  });

  it('refuses NUL in an e-mail or display name, on create, add and update, and finds nothing for NUL in the filter', async () => {
    const badEmail = {
      loc: ['email'],
      type: 'value_error',
      msg: 'value is not a valid email address: The email address contains invalid characters before the @-sign: U+0000.',
    };
    const badName = {
      loc: ['display_name'],
      type: 'value_error',
      msg: 'Value error, text must not contain NUL (\\u0000) characters',
      input: 'N\u0000',
    };
    const refused = (violation: object) => ({ code: status.INVALID_ARGUMENT, violations: [violation] });
    expect(
      await failure(identity.rpc('createUser', { email: 'n\u0000@example.com', displayName: '', isPlatformAdmin: false })),
    ).toMatchObject(refused(badEmail));
    expect(
      await failure(identity.rpc('createUser', { email: 'nul@example.com', displayName: 'N\u0000', isPlatformAdmin: false })),
    ).toMatchObject(refused(badName));
    const { workspace } = await identity.rpc('createWorkspace', { name: 'Nul' });
    expect(
      await failure(
        identity.rpc('addMember', { workspaceId: workspace!.id, email: 'nul@example.com', displayName: 'N\u0000', role: Role.ROLE_VIEWER }),
      ),
    ).toMatchObject(refused(badName));
    const id = await newUser('nul@example.com');
    const values = { id: '', email: 'n\u0000@example.com', displayName: 'N\u0000', isPlatformAdmin: false };
    expect(await failure(identity.rpc('updateUser', { id, updateMask: ['email'], user: values }))).toMatchObject(refused(badEmail));
    expect(await failure(identity.rpc('updateUser', { id, updateMask: ['display_name'], user: values }))).toMatchObject(refused(badName));
    expect(await identity.rpc('listUsers', { emailContains: 'nul\u0000' })).toEqual({
      users: [],
      page: { total: 0, page: 1, pageSize: 50 },
    });
  });

  it('updates only the fields named in the mask', async () => {
    const id = await newUser('nora@example.com', 'Nora');
    const values = { id: '', email: 'Nora.New@Example.com', displayName: 'Nora N', isPlatformAdmin: true };

    const named = await identity.rpc('updateUser', { id, updateMask: ['display_name'], user: values });
    expect(named.user).toMatchObject({ email: 'nora@example.com', displayName: 'Nora N', isPlatformAdmin: false });

    const all = await identity.rpc('updateUser', { id, updateMask: ['email', 'is_platform_admin'], user: values });
    expect(all.user).toMatchObject({ id, email: 'nora.new@example.com', displayName: 'Nora N', isPlatformAdmin: true });
    expect(all.user!.updatedAt!.getTime()).toBeGreaterThan(all.user!.createdAt!.getTime());

    const revoked = await identity.rpc('updateUser', {
      id,
      updateMask: ['is_platform_admin'],
      user: { ...values, isPlatformAdmin: false },
    });
    expect(revoked.user?.isPlatformAdmin).toBe(false);
    expect((await identity.rpc('updateUser', { id, updateMask: [], user: values })).user).toEqual(revoked.user);
    expect((await identity.rpc('getUser', { id })).user).toEqual(revoked.user);
  });

  it('refuses an update to a taken e-mail or an unknown field', async () => {
    const id = await newUser('olga@example.com');
    await newUser('taken@example.com');
    const values = { id: '', email: 'Taken@example.com', displayName: '', isPlatformAdmin: false };
    expect(await failure(identity.rpc('updateUser', { id, updateMask: ['email'], user: values }))).toEqual(emailTaken);
    expect(await failure(identity.rpc('updateUser', { id, updateMask: ['created_at'], user: values }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['update_mask'], type: 'value_error', input: 'created_at' }],
    });
    expect((await identity.rpc('getUser', { id })).user?.email).toBe('olga@example.com');
  });

  it('deletes a user with its memberships', async () => {
    const id = await newUser('pia@example.com');
    const workspaceId = (await identity.rpc('createWorkspace', { name: 'Pia' })).workspace!.id;
    await identity.rpc('addMember', { workspaceId, email: 'pia@example.com', role: Role.ROLE_EDITOR });

    expect(await identity.rpc('deleteUser', { id })).toEqual({});
    expect(await failure(identity.rpc('getUser', { id }))).toEqual(userNotFound);
    expect((await identity.rpc('listMembers', { workspaceId })).page?.total).toBe(0);
    expect(await failure(identity.rpc('deleteUser', { id }))).toEqual(userNotFound);
  });
});
