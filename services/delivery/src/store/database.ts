import type { Knex } from 'knex';
import { openPostgres, type Migration } from '@mail/common';

export const migrations: Migration[] = [
  {
    name: '001_runs',
    async up(db) {
      // One run per campaign and fire time: replicas and restarts of the scheduler insert it once.
      // claimed_at: when a sender last took recipients of the run (runs of one priority take turns).
      // run_recipients holds one row per address of a run (the unique key drops repeats); seq keeps the
      // source's order. loader_id names the process streaming the source in, load_position where it is.
      await db.raw(`
        CREATE TABLE runs (
          id uuid PRIMARY KEY DEFAULT gen_random_uuid(),
          workspace_id uuid NOT NULL,
          campaign_id uuid NOT NULL,
          trigger text NOT NULL CHECK (trigger IN ('schedule', 'manual')),
          scheduled_for timestamptz,
          status text NOT NULL CHECK (status IN ('queued', 'sending', 'paused', 'completed', 'cancelled', 'failed')),
          failure text,
          send_priority integer NOT NULL,
          plan jsonb,
          loader_id text,
          load_position integer NOT NULL DEFAULT 0,
          loaded boolean NOT NULL DEFAULT false,
          duplicates integer NOT NULL DEFAULT 0,
          claimed_at timestamptz,
          created_at timestamptz NOT NULL DEFAULT now(),
          started_at timestamptz,
          finished_at timestamptz,
          UNIQUE (campaign_id, scheduled_for)
        );
        CREATE INDEX runs_campaign_newest_idx ON runs (campaign_id, created_at DESC, id DESC);
        CREATE INDEX runs_active_idx ON runs (send_priority DESC, created_at) WHERE status IN ('queued', 'sending', 'paused');
        CREATE TABLE run_recipients (
          run_id uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
          email text NOT NULL,
          seq bigserial NOT NULL,
          status text NOT NULL
            CHECK (status IN ('pending', 'claimed', 'sending', 'sent', 'failed', 'suppressed', 'invalid', 'unknown')),
          variant_id uuid,
          fields jsonb NOT NULL,
          worker_id text,
          attempts integer NOT NULL DEFAULT 0,
          retry_at timestamptz NOT NULL DEFAULT '-infinity',
          message_id text,
          sent_at timestamptz,
          error text,
          event_published boolean NOT NULL DEFAULT false,
          PRIMARY KEY (run_id, email)
        );
        CREATE INDEX run_recipients_ready_idx ON run_recipients (run_id, retry_at, seq) WHERE status = 'pending';
        CREATE INDEX run_recipients_in_flight_idx ON run_recipients (worker_id) WHERE status IN ('claimed', 'sending');
        CREATE INDEX run_recipients_unpublished_idx ON run_recipients (sent_at) WHERE status = 'sent' AND NOT event_published;
        CREATE INDEX run_recipients_listing_idx ON run_recipients (run_id, status, seq);
        CREATE TABLE workers (
          id text PRIMARY KEY,
          heartbeat_at timestamptz NOT NULL
        );
        CREATE TABLE rate_buckets (
          transport text PRIMARY KEY,
          tokens double precision NOT NULL,
          refilled_at timestamptz NOT NULL
        );
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE rate_buckets; DROP TABLE workers; DROP TABLE run_recipients; DROP TABLE runs;');
    },
  },
  {
    name: '002_loads_take_turns',
    async up(db) {
      // load_started_at: when a loader last took the run (workspaces take turns loading, the one that loaded
      // least recently first). source_failing_since, load_attempts and load_retry_at: a source that cannot be
      // reached is tried again with backoff, for RECIPIENTS_QUERY_TIMEOUT_MS at most, by whichever replica.
      await db.raw(`
        ALTER TABLE runs
          ADD COLUMN load_started_at timestamptz,
          ADD COLUMN source_failing_since timestamptz,
          ADD COLUMN load_attempts integer NOT NULL DEFAULT 0,
          ADD COLUMN load_retry_at timestamptz NOT NULL DEFAULT '-infinity';
        CREATE INDEX runs_workspace_loads_idx ON runs (workspace_id, load_started_at);
      `);
    },
    async down(db) {
      await db.raw(`
        DROP INDEX runs_workspace_loads_idx;
        ALTER TABLE runs DROP COLUMN load_started_at, DROP COLUMN source_failing_since, DROP COLUMN load_attempts, DROP COLUMN load_retry_at;
      `);
    },
  },
  {
    name: '003_test_sends_and_manual_runs',
    async up(db) {
      // One manual run of a campaign at a time, across replicas: the partial unique index refuses a second while
      // one is queued, sending or paused. Copies that simultaneous requests made before it are cancelled (the
      // oldest of each campaign goes on), as the cancel action does, so that the index can be built.
      // test_sends: each test send's addresses, kept for an hour (the workspace's sliding hourly quota).
      await db.raw(`
        WITH ranked AS (
          SELECT id, row_number() OVER (PARTITION BY campaign_id ORDER BY created_at, id) AS position
          FROM runs WHERE trigger = 'manual' AND status IN ('queued', 'sending', 'paused')
        ), copies AS (
          UPDATE runs SET status = 'cancelled', finished_at = now()
          FROM ranked WHERE runs.id = ranked.id AND ranked.position > 1
          RETURNING runs.id
        )
        UPDATE run_recipients SET status = 'pending', worker_id = NULL
        WHERE run_id IN (SELECT id FROM copies) AND status = 'claimed';
        CREATE UNIQUE INDEX runs_one_active_manual_idx ON runs (campaign_id)
          WHERE trigger = 'manual' AND status IN ('queued', 'sending', 'paused');
        CREATE TABLE test_sends (
          workspace_id uuid NOT NULL,
          sent_at timestamptz NOT NULL DEFAULT now(),
          addresses integer NOT NULL CHECK (addresses > 0)
        );
        CREATE INDEX test_sends_window_idx ON test_sends (workspace_id, sent_at);
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE test_sends; DROP INDEX runs_one_active_manual_idx;');
    },
  },
  {
    name: '004_recipient_databases',
    async up(db) {
      // A workspace's own recipient database (none: the shared RECIPIENTS_DATABASE_URL). The URL, password and all,
      // is only in url_ciphertext (AES-256-GCM, domain/sealed-secret.ts); the other columns are what may be shown.
      await db.raw(`
        CREATE TABLE recipient_databases (
          workspace_id uuid PRIMARY KEY,
          kind text NOT NULL CHECK (kind IN ('postgres', 'mssql')),
          url_ciphertext text NOT NULL,
          host text NOT NULL,
          port integer NOT NULL,
          database text NOT NULL,
          user_name text NOT NULL,
          verified_at timestamptz NOT NULL,
          created_at timestamptz NOT NULL DEFAULT now(),
          updated_at timestamptz NOT NULL DEFAULT now()
        );
      `);
    },
    async down(db) {
      await db.raw('DROP TABLE recipient_databases;');
    },
  },
  {
    name: '006_ab_tests_and_audiences',
    async up(db) {
      // A run with an A/B test (ab_phase set) loads its valid recipients `held`, which no sender claims; once loaded,
      // its test recipients (ab_group 'test') become pending with a variant, the others (ab_group 'holdout') stay held
      // until the winner is decided, when they become pending with the winner's variant (docs/api.md, "A/B test, then
      // the winner"). audience: a follow-up run's earlier run and engagement, as the API shows it.
      await db.raw(`
        ALTER TABLE runs
          ADD COLUMN ab_phase text CHECK (ab_phase IN ('testing', 'waiting', 'sending_winner', 'done')),
          ADD COLUMN decide_at timestamptz,
          ADD COLUMN winner_variant_id uuid,
          ADD COLUMN decided_by text CHECK (decided_by IN ('significance', 'best_rate', 'manual')),
          ADD COLUMN decided_at timestamptz,
          ADD COLUMN audience jsonb;
        CREATE INDEX runs_ab_undecided_idx ON runs (ab_phase) WHERE ab_phase IN ('testing', 'waiting');
        ALTER TABLE run_recipients
          DROP CONSTRAINT run_recipients_status_check,
          ADD CONSTRAINT run_recipients_status_check
            CHECK (status IN ('pending', 'held', 'claimed', 'sending', 'sent', 'failed', 'suppressed', 'invalid', 'unknown')),
          ADD COLUMN ab_group text CHECK (ab_group IN ('test', 'holdout'));
      `);
    },
    async down(db) {
      await db.raw(`
        ALTER TABLE run_recipients DROP COLUMN ab_group, DROP CONSTRAINT run_recipients_status_check,
          ADD CONSTRAINT run_recipients_status_check
            CHECK (status IN ('pending', 'claimed', 'sending', 'sent', 'failed', 'suppressed', 'invalid', 'unknown'));
        DROP INDEX runs_ab_undecided_idx;
        ALTER TABLE runs DROP COLUMN ab_phase, DROP COLUMN decide_at, DROP COLUMN winner_variant_id, DROP COLUMN decided_by,
          DROP COLUMN decided_at, DROP COLUMN audience;
      `);
    },
  },
  {
    name: '007_bounces',
    async up(db) {
      // bounce_code: the SMTP reply code of a recipient `failed` by its server's answer (5xx, or 4xx until its attempts
      // ran out), whose `bounce` event goes out through the outbox (event_published, as the sent events); the message_id
      // index finds the run and address a returned report (the bounce mailbox) names.
      await db.raw(`
        ALTER TABLE run_recipients ADD COLUMN bounce_code smallint, ADD COLUMN bounced_at timestamptz;
        CREATE INDEX run_recipients_unpublished_bounces_idx ON run_recipients (bounced_at)
          WHERE bounce_code IS NOT NULL AND NOT event_published;
        CREATE INDEX run_recipients_message_idx ON run_recipients (message_id) WHERE message_id IS NOT NULL;
      `);
    },
    async down(db) {
      await db.raw(`
        DROP INDEX run_recipients_message_idx;
        DROP INDEX run_recipients_unpublished_bounces_idx;
        ALTER TABLE run_recipients DROP COLUMN bounce_code, DROP COLUMN bounced_at;
      `);
    },
  },
  {
    name: '008_sent_events_by_transaction',
    async up(db) {
      // sent_xid: the transaction that recorded a recipient `sent`. The outbox of the sent events publishes them in
      // that order and keeps one cursor, published_through, instead of marking each row published: every transaction
      // older than the oldest one still running has ended, so none of its rows can turn up behind the cursor later.
      // That spares each recipient an update. event_published, now bounce_published, is the bounce outbox's alone.
      await db.raw(`
        ALTER TABLE run_recipients ADD COLUMN sent_xid xid8;
        UPDATE run_recipients SET sent_xid = pg_current_xact_id() WHERE status = 'sent' AND NOT event_published;
        DROP INDEX run_recipients_unpublished_idx;
        CREATE INDEX run_recipients_sent_xid_idx ON run_recipients (sent_xid) WHERE sent_xid IS NOT NULL;
        ALTER TABLE run_recipients RENAME COLUMN event_published TO bounce_published;
        CREATE TABLE sent_events_outbox (
          single boolean PRIMARY KEY DEFAULT true CHECK (single),
          published_through xid8 NOT NULL
        );
        INSERT INTO sent_events_outbox (published_through) VALUES ('0');
      `);
    },
    async down(db) {
      await db.raw(`
        ALTER TABLE run_recipients RENAME COLUMN bounce_published TO event_published;
        UPDATE run_recipients SET event_published = sent_xid IS NULL OR sent_xid <= (SELECT published_through FROM sent_events_outbox)
          WHERE status = 'sent';
        DROP TABLE sent_events_outbox;
        DROP INDEX run_recipients_sent_xid_idx;
        ALTER TABLE run_recipients DROP COLUMN sent_xid;
        CREATE INDEX run_recipients_unpublished_idx ON run_recipients (sent_at) WHERE status = 'sent' AND NOT event_published;
      `);
    },
  },
];

export function openDatabase(url: string): Promise<Knex> {
  return openPostgres({ url, schema: 'delivery', migrations, poolMax: 20 });
}
