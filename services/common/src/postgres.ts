import knex, { type Knex } from 'knex';
import { Client, type ClientBase } from 'pg';

export interface Migration {
  name: string;
  up(db: Knex): Promise<void>;
  down(db: Knex): Promise<void>;
}

/** Migrations listed in code, so compiled and test runs see the same set. */
class ListMigrationSource implements Knex.MigrationSource<Migration> {
  constructor(private readonly migrations: Migration[]) {}
  getMigrations(): Promise<Migration[]> {
    return Promise.resolve(this.migrations);
  }
  getMigrationName(migration: Migration): string {
    return migration.name;
  }
  getMigration(migration: Migration): Promise<Knex.Migration> {
    return Promise.resolve({ up: (db: Knex) => migration.up(db), down: (db: Knex) => migration.down(db) });
  }
}

export interface PostgresOptions {
  url: string;
  /** Each service owns one schema; nothing reaches into another's. */
  schema: string;
  migrations: Migration[];
  poolMax?: number;
}

/**
 * Opens a pool whose search_path is the service's schema and brings the
 * schema up to date.
 */
export async function openPostgres(options: PostgresOptions): Promise<Knex> {
  const db = knex({
    client: 'pg',
    connection: { connectionString: options.url, options: `-c search_path=${options.schema}` },
    searchPath: [options.schema],
    pool: { min: 0, max: options.poolMax ?? 10, acquireTimeoutMillis: 3_000 },
    acquireConnectionTimeout: 3_000,
  });
  try {
    await whileHoldingMigrationLock(options.url, options.schema, async () => {
      await db.raw('CREATE SCHEMA IF NOT EXISTS ??', [options.schema]);
      await db.migrate.latest({
        migrationSource: new ListMigrationSource(options.migrations),
        schemaName: options.schema,
        tableName: 'knex_migrations',
      });
    });
  } catch (error) {
    await db.destroy();
    throw error;
  }
  return db;
}

/**
 * Runs work while holding the schema's migration lock, a Postgres advisory
 * lock held by a connection of its own. Replicas starting at once take turns:
 * knex's own lock lives in a table that a fresh schema does not have yet, and
 * concurrent `CREATE ... IF NOT EXISTS` of one name can fail in Postgres.
 */
async function whileHoldingMigrationLock(url: string, schema: string, work: () => Promise<void>): Promise<void> {
  const lock = new Client({ connectionString: url });
  await lock.connect();
  try {
    await lock.query("SELECT pg_advisory_lock(hashtext('migrations of schema ' || $1))", [schema]);
    await work();
  } finally {
    // Ending the session releases the lock.
    await lock.end();
  }
}

/** One connection of a knex pool, as the driver gives it. */
export type PgConnection = ClientBase;

/** What withConnection uses of knex's client, which knex types as `any`. */
interface KnexConnectionPool {
  acquireConnection(): Promise<PgConnection>;
  releaseConnection(connection: PgConnection): Promise<unknown>;
}

/**
 * Runs work on one connection of db's pool through the driver alone, for hot
 * paths: knex builds a whole instance per transaction and wraps every query
 * in its runner, a large share of a write's CPU and of its garbage (and so of
 * the collector's pauses). Figures: bench/README.md, "Campaign and Postgres".
 */
export async function withConnection<T>(db: Knex, work: (connection: PgConnection) => Promise<T>): Promise<T> {
  const pool = db.client as KnexConnectionPool;
  const connection = await pool.acquireConnection();
  try {
    return await work(connection);
  } finally {
    // A connection that failed is marked by knex's error listener and dropped by the pool's validation.
    await pool.releaseConnection(connection);
  }
}

/** Runs work in a transaction on one connection (see withConnection): committed if it resolves, rolled back if not. */
export function withTransaction<T>(db: Knex, work: (connection: PgConnection) => Promise<T>): Promise<T> {
  return withConnection(db, async (connection) => {
    await connection.query('BEGIN');
    try {
      const result = await work(connection);
      await connection.query('COMMIT');
      return result;
    } catch (error) {
      await connection.query('ROLLBACK').catch(() => undefined);
      throw error;
    }
  });
}

/** An (I)LIKE pattern matching `text` anywhere, with LIKE's wildcards and escape character in it taken literally. */
export function containsPattern(text: string): string {
  return `%${text.replace(/[\\%_]/g, '\\$&')}%`;
}
