import { Client } from 'pg';

/** The table campaigns' `csv_account_ids` are looked up in (README, "Configuration": RECIPIENTS_DATABASE_URL). */
export const ACCOUNTS_TABLE = `CREATE TABLE IF NOT EXISTS accounts (
  account_id text PRIMARY KEY,
  email text NOT NULL,
  first_name text,
  last_name text
)`;

/**
 * Creates the local recipient database (the database a PostgreSQL URL names,
 * through the server's `postgres` database) and its `accounts` table, when
 * missing; what is there is left alone.
 */
export async function ensureRecipientDatabase(url: string): Promise<void> {
  const target = new URL(url);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  const server = new URL(url);
  server.pathname = '/postgres';
  const admin = new Client({ connectionString: server.toString() });
  await admin.connect();
  try {
    const { rows } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rows.length === 0) await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
  } finally {
    await admin.end();
  }
  const database = new Client({ connectionString: url });
  await database.connect();
  try {
    await database.query(ACCOUNTS_TABLE);
  } finally {
    await database.end();
  }
}
