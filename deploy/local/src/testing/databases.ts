import { createClient, type ClickHouseClient } from '@clickhouse/client';
import { createClickHouse, ensureEventSchema } from '@mail/event-store';
import { Client } from 'pg';
import { infraEnv, uniqueSuffix } from './infra';

export interface TestPostgres {
  /** Connection URL of a fresh, empty database. */
  url: string;
  drop(): Promise<void>;
}

/** A private PostgreSQL database for one test file, on the real server. */
export async function createTestPostgres(label: string): Promise<TestPostgres> {
  const adminUrl = infraEnv().databaseUrl;
  const name = `test_${label.replace(/\W/g, '_')}_${uniqueSuffix()}`.toLowerCase();
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

export interface TestClickHouse {
  url: string;
  database: string;
  drop(): Promise<void>;
}

/** A private ClickHouse database for one test file, on the real server. */
export async function createTestClickHouse(label: string): Promise<TestClickHouse> {
  const url = infraEnv().clickhouseUrl;
  const database = `test_${label.replace(/\W/g, '_')}_${uniqueSuffix()}`.toLowerCase();
  const client = createClient({ url });
  try {
    await client.command({ query: `CREATE DATABASE ${database}` });
  } finally {
    await client.close();
  }
  return {
    url,
    database,
    drop: async () => {
      const admin = createClient({ url });
      try {
        await admin.command({ query: `DROP DATABASE IF EXISTS ${database}` });
      } finally {
        await admin.close();
      }
    },
  };
}

export interface TestEventDatabase extends TestClickHouse {
  /** A client on the database, with the services' settings. */
  clickhouse: ClickHouseClient;
  rows<T>(query: string): Promise<T[]>;
  /** Closes the client and drops the database. */
  close(): Promise<void>;
}

/** A private ClickHouse database holding the event schema (tables, views, rollups), and a client on it. */
export async function createTestEventDatabase(label: string): Promise<TestEventDatabase> {
  const database = await createTestClickHouse(label);
  await ensureEventSchema(database.url, database.database);
  const clickhouse = createClickHouse(database.url, database.database);
  return {
    ...database,
    clickhouse,
    rows: async <T>(query: string) => (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>(),
    close: async () => {
      await clickhouse.close();
      await database.drop();
    },
  };
}
