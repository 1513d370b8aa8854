import { failure, MISSING_UUID, principal, Role, startIdentity, status, type Identity } from './harness';

let identity: Identity;

beforeAll(async () => {
  identity = await startIdentity(['boss@example.com']);
});

afterAll(async () => {
  await identity.close();
});

async function userRows(where: Record<string, string>): Promise<number> {
  const [{ count }] = await identity.db('users').where(where).count({ count: '*' });
  return Number(count);
}

describe('ResolvePrincipal', () => {
  it('provisions a new user, then finds it again without writing', async () => {
    const first = await identity.rpc(
      'resolvePrincipal',
      principal({ subject: 'new-1', email: 'New.One@Example.com', displayName: 'New One' }),
    );
    expect(first.user).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      email: 'new.one@example.com',
      displayName: 'New One',
      isPlatformAdmin: false,
      createdAt: expect.any(Date),
      updatedAt: expect.any(Date),
    });
    expect(first.memberships).toEqual([]);

    const again = await identity.rpc(
      'resolvePrincipal',
      principal({ subject: 'new-1', email: 'new.one@example.com', displayName: 'New One' }),
    );
    expect(again.user).toEqual(first.user);
  });

  it('uses the e-mail local part when the token has no name', async () => {
    const { user } = await identity.rpc(
      'resolvePrincipal',
      principal({ subject: 'nameless', email: 'quiet.person@example.com', displayName: '' }),
    );
    expect(user?.displayName).toBe('quiet.person');
  });

  it('follows changed e-mail and name claims and keeps stored values for absent ones', async () => {
    const { user } = await identity.rpc(
      'resolvePrincipal',
      principal({ subject: 'mover', email: 'old@example.com', displayName: 'Old Name' }),
    );
    const moved = await identity.rpc(
      'resolvePrincipal',
      principal({ subject: 'mover', email: 'New@Example.com', displayName: 'New Name' }),
    );
    expect(moved.user).toMatchObject({ id: user?.id, email: 'new@example.com', displayName: 'New Name' });
    expect(moved.user!.updatedAt!.getTime()).toBeGreaterThan(user!.updatedAt!.getTime());

    const bare = await identity.rpc('resolvePrincipal', principal({ subject: 'mover', email: '', displayName: '' }));
    expect(bare.user).toEqual(moved.user);
  });

  it('binds the user a workspace admin added by e-mail before the first sign-in', async () => {
    const { workspace } = await identity.rpc('createWorkspace', { name: 'Invited' });
    const { member } = await identity.rpc('addMember', {
      workspaceId: workspace!.id,
      email: 'invitee@example.com',
      displayName: 'Typed By Admin',
      role: Role.ROLE_EDITOR,
    });

    const resolved = await identity.rpc(
      'resolvePrincipal',
      principal({ subject: 'invitee', email: 'INVITEE@example.com', displayName: 'Invitee' }),
    );
    expect(resolved.user).toMatchObject({ id: member!.user!.id, email: 'invitee@example.com', displayName: 'Invitee' });
    expect(resolved.memberships).toEqual([{ workspaceId: workspace!.id, workspaceName: 'Invited', role: Role.ROLE_EDITOR }]);
    expect(await userRows({ email: 'invitee@example.com' })).toBe(1);
    expect(await identity.db('users').where({ email: 'invitee@example.com' }).first('issuer', 'subject')).toEqual({
      issuer: 'https://idp.example.com/',
      subject: 'invitee',
    });
  });

  it('refuses an e-mail that another sign-in identity owns', async () => {
    await identity.rpc('resolvePrincipal', principal({ subject: 'owner', email: 'owned@example.com' }));

    const newcomer = await failure(identity.rpc('resolvePrincipal', principal({ subject: 'intruder', email: 'owned@example.com' })));
    expect(newcomer).toEqual({
      code: status.ALREADY_EXISTS,
      details: 'This e-mail address belongs to another sign-in identity',
      violations: [],
    });

    await identity.rpc('resolvePrincipal', principal({ subject: 'other', email: 'other@example.com' }));
    const changed = await failure(identity.rpc('resolvePrincipal', principal({ subject: 'other', email: 'owned@example.com' })));
    expect(changed.code).toBe(status.ALREADY_EXISTS);
    expect(await userRows({ email: 'owned@example.com' })).toBe(1);
  });

  it('creates exactly one row for concurrent first requests of one user', async () => {
    const request = principal({ subject: 'racer', email: 'racer@example.com' });
    const results = await Promise.all(Array.from({ length: 25 }, () => identity.rpc('resolvePrincipal', request)));
    expect(new Set(results.map((r) => r.user!.id)).size).toBe(1);
    expect(await userRows({ subject: 'racer' })).toBe(1);
  });

  it('binds exactly once when an added member signs in with concurrent first requests', async () => {
    const { workspace } = await identity.rpc('createWorkspace', { name: 'Race' });
    const { member } = await identity.rpc('addMember', {
      workspaceId: workspace!.id,
      email: 'bind-racer@example.com',
      role: Role.ROLE_VIEWER,
    });
    const request = principal({ subject: 'bind-racer', email: 'bind-racer@example.com' });
    const results = await Promise.all(Array.from({ length: 25 }, () => identity.rpc('resolvePrincipal', request)));
    expect(new Set(results.map((r) => r.user!.id))).toEqual(new Set([member!.user!.id]));
    expect(await userRows({ email: 'bind-racer@example.com' })).toBe(1);
  });

  it('makes a bootstrap e-mail a platform admin, persistently', async () => {
    const { user } = await identity.rpc('resolvePrincipal', principal({ subject: 'boss', email: 'Boss@Example.com' }));
    expect(user?.isPlatformAdmin).toBe(true);
    expect((await identity.rpc('getUser', { id: user!.id })).user?.isPlatformAdmin).toBe(true);
  });

  it('raises an existing user to platform admin when the gateway grants it', async () => {
    const { user } = await identity.rpc('resolvePrincipal', principal({ subject: 'dev', email: 'dev@example.com' }));
    expect(user?.isPlatformAdmin).toBe(false);
    const granted = await identity.rpc(
      'resolvePrincipal',
      principal({ subject: 'dev', email: 'dev@example.com', grantPlatformAdmin: true }),
    );
    expect(granted.user?.isPlatformAdmin).toBe(true);
    expect((await identity.rpc('getUser', { id: user!.id })).user?.isPlatformAdmin).toBe(true);
  });

  it('lists memberships by workspace name, and every workspace for a platform admin', async () => {
    const names = ['beta', 'Alpha', 'gamma'];
    const created = await Promise.all(names.map((name) => identity.rpc('createWorkspace', { name })));
    const [beta, alpha] = created.map((c) => c.workspace!);
    await identity.rpc('addMember', { workspaceId: beta.id, email: 'member@example.com', role: Role.ROLE_ADMIN });
    await identity.rpc('addMember', { workspaceId: alpha.id, email: 'member@example.com', role: Role.ROLE_VIEWER });

    const member = await identity.rpc('resolvePrincipal', principal({ subject: 'member', email: 'member@example.com' }));
    expect(member.memberships).toEqual([
      { workspaceId: alpha.id, workspaceName: 'Alpha', role: Role.ROLE_VIEWER },
      { workspaceId: beta.id, workspaceName: 'beta', role: Role.ROLE_ADMIN },
    ]);

    const admin = await identity.rpc('resolvePrincipal', principal({ subject: 'boss', email: 'boss@example.com' }));
    const everyWorkspace = await identity.db('workspaces').select('id', 'name').orderByRaw('lower(name), id');
    expect(admin.memberships).toEqual(
      everyWorkspace.map((w) => ({ workspaceId: w.id, workspaceName: w.name, role: Role.ROLE_PLATFORM_ADMIN })),
    );
    expect(admin.memberships.map((m) => m.workspaceName)).toEqual(['Alpha', 'beta', 'gamma', 'Invited', 'Race']);
  });

  it('limits memberships to the workspace asked for, for members and platform admins alike', async () => {
    const { workspace: team } = await identity.rpc('createWorkspace', { name: 'Scoped' });
    const { workspace: other } = await identity.rpc('createWorkspace', { name: 'Elsewhere' });
    await identity.rpc('addMember', { workspaceId: team!.id, email: 'scoped@example.com', role: Role.ROLE_EDITOR });
    await identity.rpc('addMember', { workspaceId: other!.id, email: 'scoped@example.com', role: Role.ROLE_VIEWER });
    const member = (workspaceId?: string) =>
      identity.rpc('resolvePrincipal', principal({ subject: 'scoped', email: 'scoped@example.com', workspaceId }));
    const admin = (workspaceId?: string) =>
      identity.rpc('resolvePrincipal', principal({ subject: 'boss', email: 'boss@example.com', workspaceId }));

    expect((await member(team!.id)).memberships).toEqual([{ workspaceId: team!.id, workspaceName: 'Scoped', role: Role.ROLE_EDITOR }]);
    expect((await member()).memberships).toHaveLength(2);
    expect((await admin(team!.id)).memberships).toEqual([
      { workspaceId: team!.id, workspaceName: 'Scoped', role: Role.ROLE_PLATFORM_ADMIN },
    ]);
    expect((await admin()).memberships.length).toBeGreaterThan(2);

    // A workspace that does not exist, one the member is not in, or a value that is not a UUID: no membership.
    const { workspace: foreign } = await identity.rpc('createWorkspace', { name: 'Foreign' });
    expect((await member(foreign!.id)).memberships).toEqual([]);
    expect((await admin(MISSING_UUID)).memberships).toEqual([]);
    expect((await admin('not-a-uuid')).memberships).toEqual([]);
    expect((await admin('')).memberships).toEqual([]);
  });

  it('rejects a token without subject, and a first sign-in without e-mail', async () => {
    expect(await failure(identity.rpc('resolvePrincipal', principal({ subject: '' })))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['subject'], type: 'missing', msg: 'Field required', input: null }],
    });
    expect(await failure(identity.rpc('resolvePrincipal', principal({ subject: 'no-mail', email: '' })))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['email'], type: 'missing' }],
    });
    expect(await failure(identity.rpc('resolvePrincipal', principal({ subject: 'bad-mail', email: 'not-an-address' })))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['email'], type: 'value_error' }],
    });
    expect(await userRows({ subject: 'no-mail' })).toBe(0);
  });
});
