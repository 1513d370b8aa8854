import crypto from 'node:crypto';
import type { Knex } from 'knex';
import { ConfigError, EnvReader } from '@mail/common';
import { createTestPostgres, type TestPostgres } from '@mail/local';
import { readConfig } from '../src/config';
import { parseRecipientDatabaseUrl, redactedUrl, withoutPassword } from '../src/domain/recipient-database-url';
import { UnsealError, parseEncryptionKey, seal, unseal } from '../src/domain/sealed-secret';
import { openDatabase } from '../src/store/database';
import {
  RecipientDatabaseRefused,
  deleteRecipientDatabase,
  getRecipientDatabase,
  putRecipientDatabase,
  recipientDatabaseUrl,
  verifyRecipientDatabase,
} from '../src/store/recipient-databases';

/**
 * A workspace's own recipient database in the delivery service: the key and
 * its start-up checks, the URL's parts and redaction, sealing, verification
 * against the real PostgreSQL (and SQL Server's failure path), and the store.
 */

const KEY = crypto.randomBytes(32);
const PRODUCTION = { NODE_ENV: 'production', UNSUBSCRIBE_SIGNING_KEY: 'k', TRACKING_SIGNING_KEY: 't', SMTP_URL: 'smtp://smtp.example.com' };

test('production refuses to start without either signing key: of the unsubscribe links, of the tracking links', () => {
  const env = { ...PRODUCTION, RECIPIENTS_ENCRYPTION_KEY: KEY.toString('base64') };
  for (const key of ['UNSUBSCRIBE_SIGNING_KEY', 'TRACKING_SIGNING_KEY'] as const) {
    const { [key]: _removed, ...without } = env;
    expect(() => readConfig(new EnvReader(without))).toThrow(`${key} must be set when NODE_ENV=production`);
  }
  expect(readConfig(new EnvReader(env)).trackingSigningKey).toBe('t');
});

describe('RECIPIENTS_ENCRYPTION_KEY', () => {
  const read = (env: Record<string, string>) => readConfig(new EnvReader(env)).recipientsEncryptionKey;

  test('production refuses to start without it', () => {
    expect(() => read(PRODUCTION)).toThrow(ConfigError);
    expect(() => read(PRODUCTION)).toThrow('RECIPIENTS_ENCRYPTION_KEY must be set when NODE_ENV=production');
  });

  test('32 bytes in base64 or base64url are the key; anything else is refused', () => {
    const base64 = KEY.toString('base64');
    expect(read({ ...PRODUCTION, RECIPIENTS_ENCRYPTION_KEY: base64 })).toEqual(KEY);
    expect(read({ RECIPIENTS_ENCRYPTION_KEY: ` ${KEY.toString('base64url')} ` })).toEqual(KEY);
    for (const wrong of ['short', crypto.randomBytes(16).toString('base64'), crypto.randomBytes(33).toString('base64'), `${base64}!`]) {
      expect(() => read({ RECIPIENTS_ENCRYPTION_KEY: wrong })).toThrow('RECIPIENTS_ENCRYPTION_KEY must be 32 bytes in base64');
    }
  });

  test('development without one uses a fixed key', () => {
    expect(read({})).toHaveLength(32);
    expect(read({})).toEqual(read({ NODE_ENV: 'development' }));
  });
});

describe('sealing', () => {
  test('a sealed value opens with its key and context only, and differs each time', () => {
    const url = 'postgres://app:p%40ss@db.example.com/crm';
    const first = seal(KEY, url, 'workspace-a');
    expect(first).toMatch(/^v1:/);
    expect(first).not.toContain('p%40ss');
    expect(seal(KEY, url, 'workspace-a')).not.toBe(first);
    expect(unseal(KEY, first, 'workspace-a')).toBe(url);
    expect(() => unseal(KEY, first, 'workspace-b')).toThrow(UnsealError);
    expect(() => unseal(crypto.randomBytes(32), first, 'workspace-a')).toThrow(UnsealError);
    const bytes = Buffer.from(first.slice(3), 'base64');
    bytes[bytes.length - 1] ^= 1;
    expect(() => unseal(KEY, `v1:${bytes.toString('base64')}`, 'workspace-a')).toThrow(UnsealError);
    expect(parseEncryptionKey(KEY.toString('base64'))).toEqual(KEY);
  });
});

describe('recipient database URLs', () => {
  test('their parts, with the default ports', () => {
    expect(parseRecipientDatabaseUrl('postgresql://app:pw@db.example.com/crm')).toEqual({
      kind: 'postgres',
      host: 'db.example.com',
      port: 5432,
      database: 'crm',
      user: 'app',
    });
    expect(parseRecipientDatabaseUrl('sqlserver://sa:pw@[::1]:14330/Crm%20Data?trustServerCertificate=true')).toEqual({
      kind: 'mssql',
      host: '::1',
      port: 14330,
      database: 'Crm Data',
      user: 'sa',
    });
    expect(parseRecipientDatabaseUrl('mssql://sa:pw@sql.example.com/crm')).toMatchObject({ kind: 'mssql', port: 1433 });
  });

  test('what is wrong with one, never with its password', () => {
    const problems = [
      ['mysql://u:Secret1@h/db', 'postgres://, postgresql://, mssql:// or sqlserver://'],
      ['not a url Secret1', 'not a URL'],
      ['postgres://u:Secret1@h', 'one database'],
      ['postgres://u:Secret1@h/a/b', 'one database'],
      ['postgres://h/db', 'no user'],
      ['postgres://u%00:Secret1@h/db', 'NUL'],
      [`postgres://u:Secret1@h/${'d'.repeat(3000)}`, 'longer than'],
    ];
    for (const [url, problem] of problems) {
      const parsed = parseRecipientDatabaseUrl(url);
      expect(parsed).toEqual({ problem: expect.stringContaining(problem) });
      expect(JSON.stringify(parsed)).not.toContain('Secret1');
    }
  });

  test('the password is removed in every spelling, also from text that is not a URL', () => {
    const url = 'postgres://app:p%40ss%2Fword@db.example.com/crm';
    expect(redactedUrl(url)).toBe('postgres://app:***@db.example.com/crm');
    expect(withoutPassword(`failed for ${url}: p@ss/word or p%40ss%2Fword`, url)).toBe(
      'failed for postgres://app:***@db.example.com/crm: *** or ***',
    );
    expect(redactedUrl('postgres://app:pw with space@h/db')).not.toContain('pw with space');
    expect(withoutPassword('x', 'postgres://app@h/db')).toBe('x');
  });
});

describe('the store and verification', () => {
  let services: TestPostgres;
  let recipients: TestPostgres;
  let db: Knex;
  // The test servers' own user (tests may not create roles): its password is the one to keep out of sight.
  let goodUrl: string;
  let user: string;
  let password: string;

  beforeAll(async () => {
    [services, recipients] = await Promise.all([createTestPostgres('delivery_rdb'), createTestPostgres('recipients_rdb')]);
    goodUrl = recipients.url;
    user = decodeURIComponent(new URL(goodUrl).username);
    password = new URL(goodUrl).password;
    db = await openDatabase(services.url);
  });

  afterAll(async () => {
    await db?.destroy();
    await Promise.all([services?.drop(), recipients?.drop()]);
  });

  const refusal = async (url: string): Promise<string> => {
    const target = parseRecipientDatabaseUrl(url);
    if ('problem' in target) throw new Error(target.problem);
    const error = (await verifyRecipientDatabase(url, target).then(
      () => undefined,
      (failure: unknown) => failure,
    )) as Error | undefined;
    expect(error).toBeInstanceOf(RecipientDatabaseRefused);
    return error!.message;
  };

  test('a URL that works is verified; one that does not says what failed, without the password', async () => {
    const target = parseRecipientDatabaseUrl(goodUrl);
    if ('problem' in target) throw new Error(target.problem);
    await verifyRecipientDatabase(goodUrl, target);

    const wrongPassword = new URL(goodUrl);
    wrongPassword.password = encodeURIComponent('Wrong@Secret/77');
    const wrong = await refusal(wrongPassword.toString());
    expect(wrong).toContain('authentication failed for user');
    expect(wrong).not.toContain('Wrong@Secret/77');
    expect(wrong).not.toContain(wrongPassword.password);

    const missing = await refusal(goodUrl.replace(/\/[^/?]+$/, '/no_such_database_here'));
    expect(missing).toContain('database no_such_database_here does not exist');

    const refused = await refusal('postgres://u:Closed-Secret-1@127.0.0.1:1/db');
    expect(refused).toBe('could not connect to 127.0.0.1:1: connection refused');

    const mssql = await refusal('mssql://sa:Mssql-Secret-1@127.0.0.1:1/crm');
    expect(mssql).toMatch(/^could not connect to 127\.0\.0\.1:1/);
    expect(mssql).not.toContain('Mssql-Secret-1');
  });

  test('stored sealed, shown without the password, read back by the loader, deleted', async () => {
    const workspaceId = crypto.randomUUID();
    const target = parseRecipientDatabaseUrl(goodUrl);
    if ('problem' in target) throw new Error(target.problem);
    expect(await recipientDatabaseUrl(db, KEY, workspaceId)).toBeUndefined();
    expect(await getRecipientDatabase(db, workspaceId)).toBeUndefined();

    const verifiedAt = new Date();
    const stored = await putRecipientDatabase(db, KEY, workspaceId, goodUrl, target, verifiedAt);
    expect(stored).toEqual({ workspaceId, ...target, verifiedAt });
    expect(await getRecipientDatabase(db, workspaceId)).toEqual(stored);
    expect(await recipientDatabaseUrl(db, KEY, workspaceId.toUpperCase())).toBe(goodUrl);

    const [row] = await db('recipient_databases').where({ workspace_id: workspaceId });
    expect(row).toMatchObject({ user_name: user, host: target.host, database: target.database });
    expect(JSON.stringify(row)).not.toContain(goodUrl);
    expect(row.url_ciphertext).not.toContain(password);
    expect(Buffer.from(String(row.url_ciphertext).slice(3), 'base64').toString('latin1')).not.toContain(password);

    await expect(recipientDatabaseUrl(db, crypto.randomBytes(32), workspaceId)).rejects.toThrow('RECIPIENTS_ENCRYPTION_KEY');

    const replaced = 'postgres://other:x@127.0.0.1:25432/other';
    await putRecipientDatabase(db, KEY, workspaceId, replaced, { ...target, user: 'other' }, new Date());
    expect(await recipientDatabaseUrl(db, KEY, workspaceId)).toBe(replaced);

    expect(await deleteRecipientDatabase(db, workspaceId)).toBe(true);
    expect(await deleteRecipientDatabase(db, workspaceId)).toBe(false);
    expect(await recipientDatabaseUrl(db, KEY, workspaceId)).toBeUndefined();
  });
});
