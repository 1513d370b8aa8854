import type { Knex } from 'knex';
import { createTestPostgres, type TestPostgres } from '@mail/local';
import { openPostgres, withConnection, withTransaction } from '../src/postgres';

/** One connection in the pool, so each call below gets the connection the previous one gave back. */
let postgres: TestPostgres;
let db: Knex;

beforeAll(async () => {
  postgres = await createTestPostgres('common_postgres');
  db = await openPostgres({
    url: postgres.url,
    schema: 'common_test',
    poolMax: 1,
    migrations: [
      {
        name: '001_notes',
        up: (knex) => knex.raw('CREATE TABLE notes (id int PRIMARY KEY)'),
        down: (knex) => knex.raw('DROP TABLE notes'),
      },
    ],
  });
});

afterAll(async () => {
  await db.destroy();
  await postgres.drop();
});

const ids = async (): Promise<number[]> =>
  (await withConnection(db, (connection) => connection.query<{ id: number }>('SELECT id FROM notes ORDER BY id'))).rows.map(
    (row) => row.id,
  );

it('commits the work of a transaction that resolves', async () => {
  const answer = await withTransaction(db, async (connection) => {
    await connection.query('INSERT INTO notes (id) VALUES (1), (2)');
    return 'done';
  });
  expect(answer).toBe('done');
  expect(await ids()).toEqual([1, 2]);
});

it('rolls back a transaction that fails and gives its connection back ready for the next caller', async () => {
  const failed = withTransaction(db, async (connection) => {
    await connection.query('INSERT INTO notes (id) VALUES (3)');
    await connection.query('INSERT INTO notes (id) VALUES (1)');
  });
  await expect(failed).rejects.toMatchObject({ code: '23505' });
  // The same (only) connection: were it still in the aborted transaction, this would fail.
  expect(await ids()).toEqual([1, 2]);
  await withTransaction(db, (connection) => connection.query('INSERT INTO notes (id) VALUES (3)'));
  expect(await ids()).toEqual([1, 2, 3]);
});

it('gives the connection back when the work throws outside a transaction', async () => {
  await expect(withConnection(db, () => Promise.reject(new Error('work failed')))).rejects.toThrow('work failed');
  expect(await ids()).toEqual([1, 2, 3]);
});

it('brings one schema up to date from several replicas starting at once, each migration run once', async () => {
  const runs: string[] = [];
  const migrations = [
    {
      name: '001_items',
      up: async (knex: Knex) => {
        runs.push('001_items');
        await knex.raw('CREATE TABLE items (id int PRIMARY KEY)');
      },
      down: (knex: Knex) => knex.raw('DROP TABLE items'),
    },
  ];
  for (const round of [1, 2, 3]) {
    const schema = `common_replicas_${round}`;
    const replicas = await Promise.allSettled(
      Array.from({ length: 6 }, () => openPostgres({ url: postgres.url, schema, poolMax: 2, migrations })),
    );
    for (const replica of replicas) if (replica.status === 'fulfilled') await replica.value.destroy();
    expect(replicas.filter((replica) => replica.status === 'rejected').map((replica) => String(replica.reason))).toEqual([]);
  }
  expect(runs).toEqual(['001_items', '001_items', '001_items']);
});
