import type { Knex } from 'knex';
import { WORKSPACE_STATES_TABLE, openPostgres, type Migration } from '@mail/common';

export const migrations: Migration[] = [
  {
    name: '001_brand_guides',
    async up(db) {
      await db.raw(`
        CREATE TABLE brand_guides (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          workspace_id uuid NOT NULL,
          name text NOT NULL,
          description text,
          prompt_content text,
          is_active boolean NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX brand_guides_workspace_newest_idx ON brand_guides (workspace_id, created_at DESC, id DESC);
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE brand_guides;');
    },
  },
  {
    name: '002_workspace_states',
    async up(db) {
      await db.raw(WORKSPACE_STATES_TABLE);
      // Workspaces that already hold brand guides are open.
      await db.raw('INSERT INTO workspace_states (workspace_id) SELECT DISTINCT workspace_id FROM brand_guides');
    },
    async down(db) {
      await db.raw('DROP TABLE workspace_states;');
    },
  },
];

export function openDatabase(url: string): Promise<Knex> {
  return openPostgres({ url, schema: 'brand_guide', migrations });
}
