import type { Knex } from 'knex';
import { openPostgres, workspaceStatesMigration, type Migration } from '@mail/common';

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
  workspaceStatesMigration('002_workspace_states', 'brand_guides'),
];

export function openDatabase(url: string): Promise<Knex> {
  return openPostgres({ url, schema: 'brand_guide', migrations });
}
