import { failure, MISSING_UUID, Role, startIdentity, status, type Identity } from './harness';

let identity: Identity;

beforeAll(async () => {
  identity = await startIdentity();
});

afterAll(async () => {
  await identity.close();
});

async function newWorkspace(name: string): Promise<string> {
  return (await identity.rpc('createWorkspace', { name })).workspace!.id;
}

const workspaceNotFound = { code: status.NOT_FOUND, details: 'Workspace not found', violations: [] };
const memberNotFound = { code: status.NOT_FOUND, details: 'Member not found', violations: [] };

describe('workspaces', () => {
  it('creates and gets a workspace', async () => {
    const { workspace } = await identity.rpc('createWorkspace', { name: 'Marketing' });
    expect(workspace).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      name: 'Marketing',
      createdAt: expect.any(Date),
      updatedAt: workspace!.createdAt,
    });
    expect((await identity.rpc('getWorkspace', { id: workspace!.id })).workspace).toEqual(workspace);
  });

  it('rejects an empty or over-long name', async () => {
    expect(await failure(identity.rpc('createWorkspace', { name: '' }))).toEqual({
      code: status.INVALID_ARGUMENT,
      details: 'name: String should have at least 1 character',
      violations: [
        { loc: ['name'], type: 'string_too_short', msg: 'String should have at least 1 character', input: '', ctx: { min_length: 1 } },
      ],
    });
    expect(await failure(identity.rpc('createWorkspace', { name: 'n'.repeat(201) }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['name'], type: 'string_too_long', ctx: { max_length: 200 } }],
    });
    expect((await identity.rpc('createWorkspace', { name: 'n'.repeat(200) })).workspace?.name).toBe('n'.repeat(200));
  });

  it('answers not found for an unknown or malformed id', async () => {
    expect(await failure(identity.rpc('getWorkspace', { id: MISSING_UUID }))).toEqual(workspaceNotFound);
    expect(await failure(identity.rpc('getWorkspace', { id: 'not-a-uuid' }))).toEqual(workspaceNotFound);
    expect(await failure(identity.rpc('updateWorkspace', { id: "1' or '1'='1", name: 'x' }))).toEqual(workspaceNotFound);
    expect(await failure(identity.rpc('deleteWorkspace', { id: MISSING_UUID }))).toEqual(workspaceNotFound);
  });

  it('renames a workspace, and leaves it alone without a name', async () => {
    const id = await newWorkspace('Old');
    const renamed = (await identity.rpc('updateWorkspace', { id, name: 'New' })).workspace!;
    expect(renamed.name).toBe('New');
    expect(renamed.updatedAt!.getTime()).toBeGreaterThan(renamed.createdAt!.getTime());
    expect((await identity.rpc('updateWorkspace', { id })).workspace).toEqual(renamed);
    expect((await failure(identity.rpc('updateWorkspace', { id, name: '' }))).code).toBe(status.INVALID_ARGUMENT);
    expect((await identity.rpc('getWorkspace', { id })).workspace?.name).toBe('New');
  });

  it('lists workspaces by name in pages with the total, filtered case-insensitively', async () => {
    await identity.db('workspaces').delete();
    const names = ['Zeta', 'alpha', 'Beta', 'gamma', 'Delta', '50% off', 'Sale 50 percent'];
    for (const name of names) await newWorkspace(name);

    const second = await identity.rpc('listWorkspaces', { page: { page: 2, pageSize: 3 } });
    expect(second.workspaces.map((w) => w.name)).toEqual(['Delta', 'gamma', 'Sale 50 percent']);
    expect(second.page).toEqual({ total: 7, page: 2, pageSize: 3 });

    const beyond = await identity.rpc('listWorkspaces', { page: { page: 9, pageSize: 3 } });
    expect(beyond).toEqual({ workspaces: [], page: { total: 7, page: 9, pageSize: 3 } });

    const defaults = await identity.rpc('listWorkspaces', {});
    expect(defaults.page).toEqual({ total: 7, page: 1, pageSize: 50 });
    expect(defaults.workspaces.map((w) => w.name)).toEqual(['50% off', 'alpha', 'Beta', 'Delta', 'gamma', 'Sale 50 percent', 'Zeta']);

    const filtered = await identity.rpc('listWorkspaces', { nameContains: 'ETA' });
    expect(filtered.workspaces.map((w) => w.name)).toEqual(['Beta', 'Zeta']);
    expect(filtered.page?.total).toBe(2);
    expect((await identity.rpc('listWorkspaces', { nameContains: '0%' })).workspaces.map((w) => w.name)).toEqual(['50% off']);
  });

  it('refuses NUL in a name (PostgreSQL text cannot hold it) and finds nothing for NUL in the filter', async () => {
    const nul = (input: string) => ({
      code: status.INVALID_ARGUMENT,
      violations: [
        {
          loc: ['name'],
          type: 'value_error',
          msg: 'Value error, text must not contain NUL (\\u0000) characters',
          input,
          ctx: { error: {} },
        },
      ],
    });
    expect(await failure(identity.rpc('createWorkspace', { name: 'a\u0000b' }))).toMatchObject(nul('a\u0000b'));
    const id = await newWorkspace('Clean');
    expect(await failure(identity.rpc('updateWorkspace', { id, name: '\u0000' }))).toMatchObject(nul('\u0000'));
    expect(await identity.rpc('listWorkspaces', { nameContains: 'Cl\u0000' })).toEqual({
      workspaces: [],
      page: { total: 0, page: 1, pageSize: 50 },
    });
  });

  it('deletes a workspace with its memberships but not its users', async () => {
    const id = await newWorkspace('Doomed');
    const { member } = await identity.rpc('addMember', { workspaceId: id, email: 'survivor@example.com', role: Role.ROLE_ADMIN });

    expect(await identity.rpc('deleteWorkspace', { id })).toEqual({});
    expect(await failure(identity.rpc('getWorkspace', { id }))).toEqual(workspaceNotFound);
    expect(await identity.db('memberships').where({ workspace_id: id })).toEqual([]);
    expect((await identity.rpc('getUser', { id: member!.user!.id })).user?.email).toBe('survivor@example.com');
    expect(await failure(identity.rpc('deleteWorkspace', { id }))).toEqual(workspaceNotFound);
  });
});

describe('members', () => {
  let workspaceId: string;

  beforeAll(async () => {
    workspaceId = await newWorkspace('Team');
  });

  it('adds an unknown e-mail as a new user', async () => {
    const { member } = await identity.rpc('addMember', {
      workspaceId,
      email: ' Carol@Example.com',
      displayName: 'Carol C',
      role: Role.ROLE_EDITOR,
    });
    expect(member).toEqual({
      user: {
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        email: 'carol@example.com',
        displayName: 'Carol C',
        isPlatformAdmin: false,
        createdAt: expect.any(Date),
        updatedAt: expect.any(Date),
      },
      workspaceId,
      role: Role.ROLE_EDITOR,
      createdAt: expect.any(Date),
      updatedAt: expect.any(Date),
    });
    const added = await identity.rpc('addMember', {
      workspaceId: await newWorkspace('Other'),
      email: 'dave@example.com',
      role: Role.ROLE_VIEWER,
    });
    expect(added.member?.user?.displayName).toBe('dave');
  });

  it('adds an existing user, keeping its name', async () => {
    const { user } = await identity.rpc('createUser', { email: 'erin@example.com', displayName: 'Erin', isPlatformAdmin: false });
    const { member } = await identity.rpc('addMember', {
      workspaceId,
      email: 'ERIN@example.com',
      displayName: 'Ignored',
      role: Role.ROLE_ADMIN,
    });
    expect(member?.user).toEqual(user);
    expect(member?.role).toBe(Role.ROLE_ADMIN);
  });

  it('refuses to add a member twice', async () => {
    expect(await failure(identity.rpc('addMember', { workspaceId, email: 'carol@example.com', role: Role.ROLE_VIEWER }))).toEqual({
      code: status.ALREADY_EXISTS,
      details: 'User is already a member of this workspace',
      violations: [],
    });
  });

  it('rejects platform_admin and unspecified roles, and reports every invalid field at once', async () => {
    const roleViolation = {
      loc: ['role'],
      type: 'enum',
      msg: "Input should be 'viewer', 'editor' or 'admin'",
      input: 'platform_admin',
      ctx: { expected: "'viewer', 'editor' or 'admin'" },
    };
    expect(
      await failure(identity.rpc('addMember', { workspaceId, email: 'frank@example.com', role: Role.ROLE_PLATFORM_ADMIN })),
    ).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [roleViolation],
    });
    expect(await failure(identity.rpc('addMember', { workspaceId, email: 'frank', role: Role.ROLE_UNSPECIFIED }))).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [
        { loc: ['email'], type: 'value_error' },
        { ...roleViolation, input: null },
      ],
    });
    expect((await identity.rpc('listUsers', { emailContains: 'frank' })).users).toEqual([]);
  });

  it('answers not found for an unknown workspace without creating the user', async () => {
    expect(
      await failure(identity.rpc('addMember', { workspaceId: MISSING_UUID, email: 'ghost@example.com', role: Role.ROLE_VIEWER })),
    ).toEqual(workspaceNotFound);
    expect(await failure(identity.rpc('addMember', { workspaceId: 'nope', email: 'ghost@example.com', role: Role.ROLE_VIEWER }))).toEqual(
      workspaceNotFound,
    );
    expect((await identity.rpc('listUsers', { emailContains: 'ghost' })).page?.total).toBe(0);
    expect(await failure(identity.rpc('listMembers', { workspaceId: MISSING_UUID }))).toEqual(workspaceNotFound);
  });

  it('lists members by e-mail in pages with the total', async () => {
    const listed = await identity.rpc('listMembers', { workspaceId, page: { page: 1, pageSize: 1 } });
    expect(listed.members.map((m) => [m.user?.email, m.role])).toEqual([['carol@example.com', Role.ROLE_EDITOR]]);
    expect(listed.page).toEqual({ total: 2, page: 1, pageSize: 1 });
    const second = await identity.rpc('listMembers', { workspaceId, page: { page: 2, pageSize: 1 } });
    expect(second.members.map((m) => [m.user?.email, m.role])).toEqual([['erin@example.com', Role.ROLE_ADMIN]]);
  });

  it('changes a role', async () => {
    const [carol] = (await identity.rpc('listMembers', { workspaceId })).members;
    const { member } = await identity.rpc('updateMember', { workspaceId, userId: carol.user!.id, role: Role.ROLE_VIEWER });
    expect(member).toMatchObject({ workspaceId, role: Role.ROLE_VIEWER, user: carol.user, createdAt: carol.createdAt });
    expect(member!.updatedAt!.getTime()).toBeGreaterThan(carol.updatedAt!.getTime());

    expect(
      await failure(identity.rpc('updateMember', { workspaceId, userId: carol.user!.id, role: Role.ROLE_PLATFORM_ADMIN })),
    ).toMatchObject({
      code: status.INVALID_ARGUMENT,
      violations: [{ loc: ['role'], type: 'enum' }],
    });
    expect(await failure(identity.rpc('updateMember', { workspaceId, userId: MISSING_UUID, role: Role.ROLE_EDITOR }))).toEqual(
      memberNotFound,
    );
    expect(await failure(identity.rpc('updateMember', { workspaceId: 'x', userId: carol.user!.id, role: Role.ROLE_EDITOR }))).toEqual(
      memberNotFound,
    );
  });

  it('leaves the role alone when none is given, and still answers the member', async () => {
    const [carol] = (await identity.rpc('listMembers', { workspaceId })).members;
    const { member } = await identity.rpc('updateMember', { workspaceId, userId: carol.user!.id });
    expect(member).toEqual(carol);
    expect(await failure(identity.rpc('updateMember', { workspaceId, userId: MISSING_UUID }))).toEqual(memberNotFound);
  });

  it('removes a member', async () => {
    const [carol] = (await identity.rpc('listMembers', { workspaceId })).members;
    expect(await identity.rpc('removeMember', { workspaceId, userId: carol.user!.id })).toEqual({});
    expect((await identity.rpc('listMembers', { workspaceId })).members.map((m) => m.user?.email)).toEqual(['erin@example.com']);
    expect(await failure(identity.rpc('removeMember', { workspaceId, userId: carol.user!.id }))).toEqual(memberNotFound);
    expect(await failure(identity.rpc('removeMember', { workspaceId, userId: 'bad' }))).toEqual(memberNotFound);
  });
});
