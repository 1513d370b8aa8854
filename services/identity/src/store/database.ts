import type { Knex } from 'knex';
import { openPostgres, type Migration } from '@mail/common';

/** Every committed change to the tables a principal is made of is announced here (see WatchAccessChanges). */
export const ACCESS_CHANNEL = 'identity_access_changed';

export const migrations: Migration[] = [
  {
    name: '001_users_workspaces_memberships',
    async up(db) {
      // E-mails are stored normalized (trimmed, lower-case) by the domain, so a plain unique index suffices.
      await db.raw(`
        CREATE TABLE users (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          email text NOT NULL UNIQUE,
          display_name text NOT NULL,
          is_platform_admin boolean NOT NULL DEFAULT false,
          issuer text,
          subject text,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now(),
          CHECK ((issuer IS NULL) = (subject IS NULL))
        );
        CREATE UNIQUE INDEX users_issuer_subject_key ON users (issuer, subject);
        CREATE TABLE workspaces (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          name text NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE memberships (
          workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
          user_id uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
          role text NOT NULL CHECK (role IN ('viewer', 'editor', 'admin')),
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now(),
          PRIMARY KEY (workspace_id, user_id)
        );
        CREATE INDEX memberships_user_id_idx ON memberships (user_id);
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE memberships; DROP TABLE workspaces; DROP TABLE users;');
    },
  },
  {
    // Statement triggers, so no write path can forget to announce; NOTIFY is delivered on commit.
    name: '002_announce_access_changes',
    async up(db) {
      await db.raw(`
        CREATE FUNCTION announce_access_change() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          PERFORM pg_notify('${ACCESS_CHANNEL}', '');
          RETURN NULL;
        END $$;
        CREATE TRIGGER users_access_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON users
          FOR EACH STATEMENT EXECUTE FUNCTION announce_access_change();
        CREATE TRIGGER workspaces_access_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON workspaces
          FOR EACH STATEMENT EXECUTE FUNCTION announce_access_change();
        CREATE TRIGGER memberships_access_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memberships
          FOR EACH STATEMENT EXECUTE FUNCTION announce_access_change();
      `);
    },
    async down(db) {
      await db.raw(`
        DROP TRIGGER memberships_access_changed ON memberships;
        DROP TRIGGER workspaces_access_changed ON workspaces;
        DROP TRIGGER users_access_changed ON users;
        DROP FUNCTION announce_access_change();
      `);
    },
  },
];

export function openDatabase(url: string): Promise<Knex> {
  return openPostgres({ url, schema: 'identity', migrations });
}
