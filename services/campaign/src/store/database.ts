import type { Knex } from 'knex';
import { openPostgres, workspaceStatesMigration, type Migration } from '@mail/common';

export const migrations: Migration[] = [
  {
    name: '001_campaigns_variants',
    async up(db) {
      // provider_category_id is unique across workspaces: webhook events find their campaign through it alone.
      // has_variant_list tells "variants": [] (true, no rows) from null (false). position keeps the list order.
      await db.raw(`
        CREATE TABLE campaigns (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          workspace_id uuid NOT NULL,
          name text NOT NULL,
          description text,
          is_active boolean NOT NULL,
          send_priority integer NOT NULL,
          schedule_cron text,
          recipient_source text NOT NULL CHECK (recipient_source IN ('mssql_query', 'csv_account_ids')),
          mssql_query text,
          csv_account_ids text[],
          provider_category_id text UNIQUE,
          from_email text,
          from_name text,
          reply_to text,
          delivery_mode text NOT NULL CHECK (delivery_mode IN ('single_template', 'variants')),
          template_id text,
          has_variant_list boolean NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX campaigns_workspace_newest_idx ON campaigns (workspace_id, created_at DESC, id DESC);
        CREATE TABLE campaign_variants (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          campaign_id uuid NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
          position integer NOT NULL,
          template_id text NOT NULL,
          weight integer NOT NULL CHECK (weight BETWEEN 0 AND 10000),
          label text,
          is_active boolean NOT NULL
        );
        CREATE INDEX campaign_variants_campaign_idx ON campaign_variants (campaign_id, position);
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE campaign_variants; DROP TABLE campaigns;');
    },
  },
  workspaceStatesMigration('002_workspace_states', 'campaigns'),
  {
    name: '003_category_owners',
    async up(db) {
      // A provider_category_id stays bound to the workspace that used it, after its campaign is renamed or
      // deleted: events still arriving for it must never be matched into another workspace. (Migration 004:
      // the workspace's deletion no longer releases it; a platform admin does.) The trigger claims the category on
      // every write of the column; a category bound elsewhere fails like the unique index (23505, a 409).
      // SET search_path FROM CURRENT: the function finds category_owners in the schema it was created in.
      await db.raw(`
        CREATE TABLE category_owners (
          provider_category_id text PRIMARY KEY,
          workspace_id uuid NOT NULL
        );
        CREATE INDEX category_owners_workspace_idx ON category_owners (workspace_id);
        INSERT INTO category_owners (provider_category_id, workspace_id)
          SELECT provider_category_id, workspace_id FROM campaigns WHERE provider_category_id IS NOT NULL;
        CREATE FUNCTION claim_provider_category() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
        DECLARE
          owner uuid;
        BEGIN
          IF NEW.provider_category_id IS NOT NULL THEN
            INSERT INTO category_owners (provider_category_id, workspace_id) VALUES (NEW.provider_category_id, NEW.workspace_id)
              ON CONFLICT (provider_category_id) DO UPDATE SET workspace_id = category_owners.workspace_id
              RETURNING workspace_id INTO owner;
            IF owner <> NEW.workspace_id THEN
              RAISE unique_violation USING MESSAGE = 'provider_category_id is bound to another workspace';
            END IF;
          END IF;
          RETURN NEW;
        END
        $$;
        CREATE TRIGGER campaigns_claim_category BEFORE INSERT OR UPDATE OF provider_category_id ON campaigns
          FOR EACH ROW EXECUTE FUNCTION claim_provider_category();
      `);
    },
    async down(db) {
      await db.raw(`
        DROP TRIGGER campaigns_claim_category ON campaigns;
        DROP FUNCTION claim_provider_category();
        DROP TABLE category_owners;
      `);
    },
  },
  {
    name: '004_templates',
    async up(db) {
      // A template always has a body: html, text or both (checked by the domain too, with a 422).
      await db.raw(`
        CREATE TABLE templates (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          workspace_id uuid NOT NULL,
          name text NOT NULL,
          subject text NOT NULL,
          html text,
          text text,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now(),
          CHECK (html IS NOT NULL OR text IS NOT NULL)
        );
        CREATE INDEX templates_workspace_newest_idx ON templates (workspace_id, created_at DESC, id DESC);
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE templates');
    },
  },
  {
    name: '005_schedule_set_at',
    async up(db) {
      // The delivery scheduler fires only the fire times after a schedule was set (or the campaign
      // activated): a campaign that gets a schedule must not be fired for times before it had one.
      await db.raw(`
        ALTER TABLE campaigns ADD COLUMN schedule_set_at timestamptz NOT NULL DEFAULT now();
        CREATE FUNCTION mark_schedule_set() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NEW.schedule_cron IS DISTINCT FROM OLD.schedule_cron OR (NEW.is_active AND NOT OLD.is_active) THEN
            NEW.schedule_set_at := now();
          END IF;
          RETURN NEW;
        END
        $$;
        CREATE TRIGGER campaigns_mark_schedule_set BEFORE UPDATE OF schedule_cron, is_active ON campaigns
          FOR EACH ROW EXECUTE FUNCTION mark_schedule_set();
        CREATE INDEX campaigns_scheduled_idx ON campaigns (id) WHERE is_active AND schedule_cron IS NOT NULL;
      `);
    },
    async down(db) {
      await db.raw(`
        DROP TRIGGER campaigns_mark_schedule_set ON campaigns;
        DROP FUNCTION mark_schedule_set();
        ALTER TABLE campaigns DROP COLUMN schedule_set_at;
      `);
    },
  },
  {
    name: '006_category_releases',
    async up(db) {
      // A deleted workspace's categories stay in category_owners (retired): only a platform admin's explicit
      // release frees one, and each release is recorded here, who and when.
      await db.raw(`
        CREATE TABLE category_releases (
          id bigserial PRIMARY KEY,
          provider_category_id text NOT NULL,
          workspace_id uuid NOT NULL,
          released_by_user_id uuid NOT NULL,
          released_by_email text NOT NULL,
          released_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX category_releases_category_idx ON category_releases (provider_category_id);
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE category_releases');
    },
  },
  {
    name: '007_ab_test',
    async up(db) {
      // A campaign's A/B test settings as the API shows them (test_fraction, wait_minutes, metric), or null.
      await db.raw('ALTER TABLE campaigns ADD COLUMN ab_test jsonb');
    },
    async down(db) {
      await db.raw('ALTER TABLE campaigns DROP COLUMN ab_test');
    },
  },
  {
    name: '008_tracking',
    async up(db) {
      // First-party tracking, on for every campaign unless switched off (docs/api.md, "First-party tracking").
      await db.raw(
        'ALTER TABLE campaigns ADD COLUMN track_opens boolean NOT NULL DEFAULT true, ADD COLUMN track_clicks boolean NOT NULL DEFAULT true',
      );
    },
    async down(db) {
      await db.raw('ALTER TABLE campaigns DROP COLUMN track_opens, DROP COLUMN track_clicks');
    },
  },
];

export function openDatabase(url: string): Promise<Knex> {
  return openPostgres({ url, schema: 'campaign', migrations });
}
