import { Client } from 'pg';

/** The table campaigns' `csv_account_ids` are looked up in (docs/configuration.md, "Variables": RECIPIENTS_DATABASE_URL). */
export const ACCOUNTS_TABLE = `CREATE TABLE IF NOT EXISTS accounts (
  account_id text PRIMARY KEY,
  email text NOT NULL,
  first_name text,
  last_name text
)`;

/**
 * The login recipient queries run as: `deploy/local/infra.sh` creates it with
 * no rights of its own, and a recipient database grants it SELECT on
 * `accounts` only, so whatever a query says it can read that table and nothing
 * else, and write nothing (docs/configuration.md, "Recipient databases").
 */
export const RECIPIENT_READER = { user: 'mail_recipients', password: 'mail_recipients' };

/**
 * Creates the local recipient database (the database a PostgreSQL URL names,
 * through the server's `postgres` database) and its `accounts` table, when
 * missing (what is there is left alone), and lets the recipient reader read
 * `accounts`. Resolves to the reader's URL of that database.
 */
export async function ensureRecipientDatabase(url: string): Promise<string> {
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
    await grantRecipientReader(database, name);
  } finally {
    await database.end();
  }
  const reader = new URL(url);
  reader.username = RECIPIENT_READER.user;
  reader.password = RECIPIENT_READER.password;
  return reader.toString();
}

/** The reader may connect to the database and read `accounts`; PUBLIC keeps no right to create anything there. */
async function grantRecipientReader(database: Client, name: string): Promise<void> {
  const quoted = `"${name.replace(/"/g, '""')}"`;
  await database.query(`REVOKE TEMPORARY ON DATABASE ${quoted} FROM PUBLIC`);
  await database.query(`GRANT CONNECT ON DATABASE ${quoted} TO ${RECIPIENT_READER.user}`);
  await database.query(`REVOKE CREATE ON SCHEMA public FROM PUBLIC`);
  await database.query(`GRANT SELECT ON accounts TO ${RECIPIENT_READER.user}`);
}
