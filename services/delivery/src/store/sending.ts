import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import type { QueryConfig } from 'pg';
import { withConnection, withTransaction } from '@mail/common';
import type { AbMetric, DecidedBy } from '../domain/ab-test';
import type { PlanVariant, RunPlan, SendingPlan } from '../domain/plan';

/**
 * The senders' SQL: exactly once rests on these statements (docs/api.md,
 * "Campaign runs"). A recipient goes pending -> claimed (a sender took it) ->
 * sending (committed right before its SMTP hand-over) -> sent, failed or back
 * to pending for a retry. A process that stops beating its heartbeat is dead:
 * its claimed rows go back to pending, its sending rows become unknown, which
 * nothing sends again. A settled recipient keeps the worker_id of the process
 * that settled it. A run with an A/B test loads its valid recipients `held`,
 * which no sender claims, until its test (then its winner) releases them as
 * pending.
 */

export interface LoadingRun {
  id: string;
  workspaceId: string;
  campaignId: string;
  plan: RunPlan;
  loadPosition: number;
}

export interface StoredRecipient {
  email: string;
  valid: boolean;
  error: string | null;
  variantId: string | null;
  fields: Record<string, unknown>;
}

export interface ClaimedRecipient {
  email: string;
  variantId: string | null;
  fields: Record<string, unknown>;
  attempts: number;
}

export interface ActiveRun {
  id: string;
  workspaceId: string;
  campaignId: string;
  plan: SendingPlan;
}

/** A run whose A/B test waited long enough: its winner is to be decided now. */
export interface DueDecision {
  id: string;
  workspaceId: string;
  variants: PlanVariant[];
  metric: AbMetric;
}

export interface SentRecipient {
  runId: string;
  workspaceId: string;
  campaignId: string;
  email: string;
  variantId: string | null;
  messageId: string;
  sentAt: Date;
  providerCategoryId: string | null;
}

/** A recipient its SMTP server refused (`code` 5xx), or kept refusing for now (4xx) until its attempts ran out. */
export interface BouncedRecipient {
  runId: string;
  workspaceId: string;
  campaignId: string;
  email: string;
  variantId: string | null;
  messageId: string;
  bouncedAt: Date;
  code: number;
  /** The server's answer. */
  reason: string;
  providerCategoryId: string | null;
}

/** The SMTP server's answer to a message handed over, as its recipient's status. */
export interface HandOverAnswer {
  runId: string;
  email: string;
  /** `pending`: a temporary failure, tried again in `retryInMs`. */
  status: 'sent' | 'pending' | 'failed' | 'unknown';
  error: string | null;
  retryInMs: number | null;
  /** The server's reply code when its answer is a bounce, whose event publishBounces sends. */
  bounceCode: number | null;
}

export interface HandOverStart {
  runId: string;
  email: string;
  messageId: string;
}

export function handOverKey(runId: string, email: string): string {
  return `${runId} ${email}`;
}

/** The recipient of a run's message, found by its Message-ID. */
export interface MessageRecipient {
  runId: string;
  workspaceId: string;
  campaignId: string;
  email: string;
  variantId: string | null;
  messageId: string;
  providerCategoryId: string | null;
}

const statementNames = new Map<string, string>();

/**
 * The senders repeat their statements many times a second: each is prepared once per connection, named by its
 * text, so that Postgres parses and plans it once rather than at every call.
 */
function prepared(text: string, values: unknown[]): QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `sending-${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    statementNames.set(text, name);
  }
  return { name, text, values };
}

/** A live worker's heartbeat is younger than the lease; the database's clock decides, for every replica alike. */
const DEAD = `SELECT id FROM workers WHERE heartbeat_at < now() - make_interval(secs => $1::double precision / 1000)`;
const LIVE = `SELECT id FROM workers WHERE heartbeat_at >= now() - make_interval(secs => $2::double precision / 1000)`;

/**
 * A recipient `rr` held by the worker (a parameter) in the status, for the statements that find recipients by
 * their key: written with IS NOT DISTINCT FROM, which no index serves, so that Postgres always looks them up by
 * the primary key. Plain equalities let it scan every in-flight row of the worker or of the run instead, which it
 * estimates as a handful whenever its statistics predate the claims, and that costs a scan of the batch per
 * commit (bench/README.md, "the fourteenth session").
 */
function heldBy(worker: string, status: 'claimed' | 'sending'): string {
  return `rr.worker_id IS NOT DISTINCT FROM ${worker} AND rr.status IS NOT DISTINCT FROM '${status}'`;
}

export class SendingStore {
  /** Also the database a follow-up run's audience is read from (store/audience.ts). */
  constructor(readonly db: Knex) {}

  async heartbeat(workerId: string): Promise<void> {
    await this.query(`INSERT INTO workers (id, heartbeat_at) VALUES ($1, now()) ON CONFLICT (id) DO UPDATE SET heartbeat_at = now()`, [
      workerId,
    ]);
  }

  /** On a clean stop: its claims go back at once, nothing of it is in flight. */
  async retire(workerId: string): Promise<void> {
    await this.query(`UPDATE run_recipients SET status = 'pending', worker_id = NULL WHERE worker_id = $1 AND status = 'claimed'`, [
      workerId,
    ]);
    await this.query('DELETE FROM workers WHERE id = $1', [workerId]);
  }

  /** The rows of dead workers: claimed back to pending, sending to unknown. Resolves to how many became unknown. */
  async reapDeadWorkers(leaseMs: number): Promise<number> {
    return withTransaction(this.db, async (connection) => {
      await connection.query(
        `UPDATE run_recipients SET status = 'pending', worker_id = NULL WHERE status = 'claimed' AND worker_id IN (${DEAD})`,
        [leaseMs],
      );
      const { rowCount } = await connection.query(
        `UPDATE run_recipients SET status = 'unknown',
           error = 'The sending process stopped after handing the message over and before recording the answer'
         WHERE status = 'sending' AND worker_id IN (${DEAD})`,
        [leaseMs],
      );
      await connection.query(`DELETE FROM workers WHERE id IN (${DEAD})`, [leaseMs]);
      return rowCount ?? 0;
    });
  }

  /**
   * A run whose recipients are not all in yet, that no live worker loads and
   * whose source is not waiting out a backoff: this worker loads it now.
   * Workspaces take turns (the one that began a load least recently first),
   * and a workspace loads one run at a time, so its slow or failing source
   * holds back only its own runs; within a workspace, the higher send_priority
   * first.
   */
  async claimLoad(workerId: string, leaseMs: number): Promise<LoadingRun | undefined> {
    const { rows } = await this.query<{ id: string; workspace_id: string; campaign_id: string; plan: RunPlan; load_position: number }>(
      `UPDATE runs SET loader_id = $1, load_started_at = clock_timestamp(),
         status = CASE WHEN status = 'queued' THEN 'sending' ELSE status END,
         started_at = coalesce(started_at, now())
       WHERE id = (
         SELECT r.id FROM runs r
         WHERE r.status IN ('queued', 'sending', 'paused') AND NOT r.loaded AND r.load_retry_at <= now()
           AND (r.loader_id IS NULL OR r.loader_id NOT IN (${LIVE}))
           AND NOT EXISTS (
             SELECT 1 FROM runs other
             WHERE other.workspace_id = r.workspace_id AND other.id <> r.id AND NOT other.loaded
               AND other.status IN ('queued', 'sending', 'paused') AND other.loader_id IN (${LIVE}))
         ORDER BY (SELECT max(w.load_started_at) FROM runs w WHERE w.workspace_id = r.workspace_id) NULLS FIRST,
           r.send_priority DESC, r.created_at
         LIMIT 1 FOR UPDATE OF r SKIP LOCKED)
       RETURNING id, workspace_id, campaign_id, plan, load_position`,
      [workerId, leaseMs],
    );
    const [row] = rows;
    return (
      row && { id: row.id, workspaceId: row.workspace_id, campaignId: row.campaign_id, plan: row.plan, loadPosition: row.load_position }
    );
  }

  /**
   * Adds a batch of the source's rows and moves the load position past them,
   * in one transaction, while this worker still loads the run and it is not
   * cancelled. An address already in the run is a duplicate. Resolves to false
   * when the load is no longer this worker's to do.
   */
  async addRecipients(runId: string, workerId: string, recipients: StoredRecipient[], position: number, held = false): Promise<boolean> {
    return withTransaction(this.db, async (connection) => {
      const { rows: owned } = await connection.query(
        `SELECT 1 FROM runs WHERE id = $1 AND loader_id = $2 AND status IN ('sending', 'paused') FOR UPDATE`,
        [runId, workerId],
      );
      if (owned.length === 0) return false;
      const { rowCount } = await connection.query(
        `INSERT INTO run_recipients (run_id, email, status, variant_id, fields, error)
         SELECT $1, r.email, CASE WHEN NOT r.valid THEN 'invalid' WHEN $3 THEN 'held' ELSE 'pending' END, r.variant_id, r.fields, r.error
         FROM jsonb_to_recordset($2::jsonb) AS r(email text, valid boolean, variant_id uuid, fields jsonb, error text)
         ON CONFLICT (run_id, email) DO NOTHING`,
        [
          runId,
          JSON.stringify(
            recipients.map((r) => ({ email: r.email, valid: r.valid, variant_id: r.variantId, fields: r.fields, error: r.error })),
          ),
          held,
        ],
      );
      await connection.query(
        `UPDATE runs SET load_position = $2, duplicates = duplicates + $3, source_failing_since = NULL, load_attempts = 0 WHERE id = $1`,
        [runId, position, recipients.length - (rowCount ?? 0)],
      );
      return true;
    });
  }

  /** Gives the load up (stopping, or the source unreachable for now): another worker, or this one later, resumes it. */
  async releaseLoad(runId: string, workerId: string): Promise<void> {
    await this.query('UPDATE runs SET loader_id = NULL WHERE id = $1 AND loader_id = $2', [runId, workerId]);
  }

  /**
   * The run's recipients are all in. With an A/B test (`test`), in the same
   * transaction: the first `size` of its held recipients in the order of a
   * hash keyed by the run (the same on every replica and resumption) become
   * its test recipients, pending, split across the variants by `bounds`
   * (domain/ab-test.ts); the others stay held for the winner.
   */
  async finishLoad(
    runId: string,
    workerId: string,
    test?: { size: (valid: number) => number; bounds: { id: string; upto: number }[] },
  ): Promise<void> {
    await withTransaction(this.db, async (connection) => {
      const { rowCount } = await connection.query('UPDATE runs SET loaded = true WHERE id = $1 AND loader_id = $2 AND NOT loaded', [
        runId,
        workerId,
      ]);
      if (rowCount !== 1 || !test) return;
      const { rows } = await connection.query<{ valid: number }>(
        `SELECT count(*)::integer AS valid FROM run_recipients WHERE run_id = $1 AND status = 'held'`,
        [runId],
      );
      const size = test.size(rows[0].valid);
      await connection.query(
        `WITH ranked AS (
           SELECT email, row_number() OVER (ORDER BY sha256(convert_to($1::text || ':test:' || email, 'UTF8')), email) AS position
           FROM run_recipients WHERE run_id = $1 AND status = 'held'
         )
         UPDATE run_recipients rr SET status = 'pending', ab_group = 'test',
           variant_id = (SELECT b.id FROM jsonb_to_recordset($3::jsonb) AS b(id uuid, upto double precision)
                         WHERE (ranked.position - 0.5) / $2::integer < b.upto ORDER BY b.upto LIMIT 1)
         FROM ranked WHERE rr.run_id = $1 AND rr.email = ranked.email AND ranked.position <= $2::integer`,
        [runId, size, JSON.stringify(test.bounds)],
      );
      await connection.query(`UPDATE run_recipients SET ab_group = 'holdout' WHERE run_id = $1 AND status = 'held'`, [runId]);
      // A run without a valid recipient has nothing to test: its test is over at once.
      if (size === 0) await connection.query(`UPDATE runs SET ab_phase = 'done' WHERE id = $1`, [runId]);
    });
  }

  /**
   * The source could not be reached: the load waits (backing off from 0.5 s
   * to 30 s) and any worker tries again. Resolves to whether the source has
   * now failed for longer than `giveUpAfterMs`, when the run should fail.
   */
  async deferLoad(runId: string, workerId: string, giveUpAfterMs: number): Promise<boolean> {
    const { rows } = await this.query<{ exhausted: boolean }>(
      `UPDATE runs SET loader_id = NULL,
         source_failing_since = coalesce(source_failing_since, now()),
         load_attempts = load_attempts + 1,
         load_retry_at = now() + make_interval(secs => least(30, 0.5 * power(2, load_attempts)))
       WHERE id = $1 AND loader_id = $2
       RETURNING source_failing_since < now() - make_interval(secs => $3::double precision / 1000) AS exhausted`,
      [runId, workerId, giveUpAfterMs],
    );
    return rows[0]?.exhausted ?? false;
  }

  /** A run whose source cannot be read ends `failed` with the reason; nothing of it is sent any more. */
  async failRun(runId: string, failure: string): Promise<void> {
    await this.query(
      `UPDATE runs SET status = 'failed', failure = $2, finished_at = now() WHERE id = $1 AND status IN ('queued', 'sending', 'paused')`,
      [runId, failure],
    );
  }

  /** A run whose template renders for nobody fails, unless a message of it was handed over already (attempts). */
  async failRunBeforeHandOver(runId: string, failure: string): Promise<boolean> {
    const { rowCount } = await this.query(
      `UPDATE runs SET status = 'failed', failure = $2, finished_at = now()
       WHERE id = $1 AND status IN ('queued', 'sending', 'paused')
         AND NOT EXISTS (SELECT 1 FROM run_recipients WHERE run_id = $1 AND attempts > 0)`,
      [runId, failure],
    );
    return rowCount === 1;
  }

  /** Runs whose loads wait for their source to answer again, across every replica. */
  async runsWaitingForSource(): Promise<number> {
    const { rows } = await this.query<{ waiting: number }>(
      `SELECT count(*)::integer AS waiting FROM runs
       WHERE status IN ('queued', 'sending', 'paused') AND NOT loaded AND source_failing_since IS NOT NULL`,
    );
    return rows[0]?.waiting ?? 0;
  }

  /**
   * Runs that are sending and have recipients ready. Workspaces take turns
   * (the one whose recipients were taken longest ago first), so no
   * workspace's send_priority or long run holds back another's; within a
   * workspace the higher send_priority goes first, and runs of one priority
   * take turns too.
   */
  async readyRuns(): Promise<ActiveRun[]> {
    const { rows } = await this.query<{ id: string; workspace_id: string; campaign_id: string; plan: SendingPlan }>(
      `SELECT id, workspace_id, campaign_id, plan - 'source' AS plan FROM runs r
       WHERE status = 'sending'
         AND EXISTS (SELECT 1 FROM run_recipients rr WHERE rr.run_id = r.id AND rr.status = 'pending' AND rr.retry_at <= now())
       ORDER BY max(claimed_at) OVER (PARTITION BY workspace_id) NULLS FIRST,
         min(created_at) OVER (PARTITION BY workspace_id), workspace_id,
         send_priority DESC, claimed_at NULLS FIRST, created_at
       LIMIT 20`,
    );
    return rows.map((row) => ({ id: row.id, workspaceId: row.workspace_id, campaignId: row.campaign_id, plan: row.plan }));
  }

  /** Takes up to `limit` ready recipients of a run that is still sending, in source order; committed at once. */
  async claim(runId: string, workerId: string, limit: number): Promise<ClaimedRecipient[]> {
    const { rows } = await this.query<{ email: string; variant_id: string | null; fields: Record<string, unknown>; attempts: number }>(
      `WITH turn AS (UPDATE runs SET claimed_at = clock_timestamp() WHERE id = $1)
       UPDATE run_recipients rr SET status = 'claimed', worker_id = $2
       FROM (
         SELECT run_id, email FROM run_recipients
         WHERE run_id = $1 AND status = 'pending' AND retry_at <= now()
           AND EXISTS (SELECT 1 FROM runs WHERE id = $1 AND status = 'sending')
         ORDER BY retry_at, seq
         LIMIT $3 FOR UPDATE SKIP LOCKED
       ) picked
       WHERE rr.run_id = picked.run_id AND rr.email = picked.email
       RETURNING rr.email, rr.variant_id, rr.fields, rr.attempts`,
      [runId, workerId, limit],
    );
    return rows.map((row) => ({ email: row.email, variantId: row.variant_id, fields: row.fields, attempts: row.attempts }));
  }

  /** Claimed recipients that turned out suppressed at hand-over. */
  async markSuppressed(runId: string, workerId: string, emails: string[]): Promise<void> {
    if (emails.length === 0) return;
    await this.query(
      `UPDATE run_recipients rr SET status = 'suppressed' WHERE rr.run_id = $1 AND rr.email = ANY ($3) AND ${heldBy('$2', 'claimed')}`,
      [runId, workerId, emails],
    );
  }

  /**
   * One commit of the hand-over ledger (sending/hand-over-ledger.ts): the
   * answers to messages handed over (`settled`), and the recipients about to
   * be handed over (`starting`), each `sending` from here on if this worker
   * still holds it and its run still sends (pause and cancel take effect
   * between messages). Resolves to the starting recipients that may go, by
   * handOverKey. The rows are found by their key (heldBy).
   */
  async recordHandOvers(workerId: string, settled: HandOverAnswer[], starting: HandOverStart[]): Promise<Set<string>> {
    const { rows } = await this.query<{ run_id: string; email: string }>(
      `WITH settled AS (
         UPDATE run_recipients rr SET status = a.status, error = a.error,
           sent_at = CASE WHEN a.status = 'sent' THEN now() ELSE rr.sent_at END,
           sent_xid = CASE WHEN a.status = 'sent' THEN pg_current_xact_id() END,
           worker_id = CASE WHEN a.status = 'pending' THEN NULL ELSE rr.worker_id END,
           retry_at = CASE WHEN a.status = 'pending' THEN now() + make_interval(secs => a.retry_in_ms / 1000) ELSE rr.retry_at END,
           bounce_code = a.bounce_code, bounced_at = CASE WHEN a.bounce_code IS NOT NULL THEN now() END
         FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::double precision[], $7::smallint[])
           AS a(run_id, email, status, error, retry_in_ms, bounce_code)
         WHERE rr.run_id = a.run_id AND rr.email = a.email AND ${heldBy('$1', 'sending')}
       )
       UPDATE run_recipients rr SET status = 'sending', attempts = rr.attempts + 1, message_id = s.message_id
       FROM unnest($8::uuid[], $9::text[], $10::text[]) AS s(run_id, email, message_id)
       WHERE rr.run_id = s.run_id AND rr.email = s.email AND ${heldBy('$1', 'claimed')}
         AND EXISTS (SELECT 1 FROM runs WHERE id = s.run_id AND status = 'sending')
       RETURNING rr.run_id, rr.email`,
      [
        workerId,
        settled.map((answer) => answer.runId),
        settled.map((answer) => answer.email),
        settled.map((answer) => answer.status),
        settled.map((answer) => answer.error),
        settled.map((answer) => answer.retryInMs),
        settled.map((answer) => answer.bounceCode),
        starting.map((start) => start.runId),
        starting.map((start) => start.email),
        starting.map((start) => start.messageId),
      ],
    );
    return new Set(rows.map((row) => handOverKey(row.run_id, row.email)));
  }

  /** A claimed recipient whose message could not be rendered: `failed` with the reason, never handed over. */
  async recordUnrendered(runId: string, workerId: string, email: string, error: string): Promise<void> {
    await this.query(
      `UPDATE run_recipients rr SET status = 'failed', error = $4 WHERE rr.run_id = $1 AND rr.email = $3 AND ${heldBy('$2', 'claimed')}`,
      [runId, workerId, email, error],
    );
  }

  /** This worker's claims of a run it stops sending (paused, cancelled, a dependency down) go back to pending. */
  async release(runId: string, workerId: string): Promise<void> {
    await this.query(
      `UPDATE run_recipients SET status = 'pending', worker_id = NULL WHERE run_id = $1 AND worker_id = $2 AND status = 'claimed'`,
      [runId, workerId],
    );
  }

  /**
   * Sending runs whose recipients are all in and all settled are completed;
   * one with an A/B test only once its winner was sent (its test `done`).
   */
  async completeFinishedRuns(): Promise<void> {
    await this.query(
      `UPDATE runs r SET status = 'completed', finished_at = now(), ab_phase = CASE WHEN ab_phase IS NOT NULL THEN 'done' END
       WHERE status = 'sending' AND loaded AND (ab_phase IS NULL OR ab_phase IN ('sending_winner', 'done'))
         AND NOT EXISTS (
           SELECT 1 FROM run_recipients rr WHERE rr.run_id = r.id AND rr.status IN ('pending', 'held', 'claimed', 'sending'))`,
    );
  }

  /**
   * Sending runs whose test recipients are all settled go on waiting: their
   * winner is decided `waitMinutes` after the last test message went out
   * (decide_at). A paused run keeps its phase.
   */
  async endTests(): Promise<void> {
    await this.query(
      `UPDATE runs r SET ab_phase = 'waiting',
         decide_at = coalesce(
           (SELECT max(sent_at) FROM run_recipients rr WHERE rr.run_id = r.id AND rr.ab_group = 'test'), now())
           + make_interval(mins => (plan->'abTest'->>'waitMinutes')::integer)
       WHERE ab_phase = 'testing' AND status = 'sending' AND loaded
         AND NOT EXISTS (SELECT 1 FROM run_recipients rr WHERE rr.run_id = r.id AND rr.status IN ('pending', 'claimed', 'sending'))`,
    );
  }

  /** Sending runs whose test waited until decide_at. */
  async dueDecisions(): Promise<DueDecision[]> {
    const { rows } = await this.query<{ id: string; workspace_id: string; variants: PlanVariant[]; metric: AbMetric }>(
      `SELECT id, workspace_id, plan->'variants' AS variants, plan->'abTest'->>'metric' AS metric FROM runs
       WHERE ab_phase = 'waiting' AND status = 'sending' AND decide_at <= now()
       ORDER BY decide_at LIMIT 20`,
    );
    return rows.map((row) => ({ id: row.id, workspaceId: row.workspace_id, variants: row.variants, metric: row.metric }));
  }

  /** A run's test recipients sent, by variant. */
  async testSent(runId: string): Promise<Map<string, number>> {
    return testSentByVariant(this.db, runId);
  }

  /** The automatic decision: taken only while the run still waits, sends, and decide_at has passed. */
  async decide(runId: string, winner: string, decidedBy: Exclude<DecidedBy, 'manual'>): Promise<boolean> {
    return recordWinner(this.db, runId, winner, decidedBy);
  }

  /**
   * The outbox of the sent events: passes the recipients recorded `sent`
   * after the outbox's cursor to `publish`, in the order of the transactions
   * that recorded them, and moves the cursor past them when it resolves (a
   * process that dies before that leaves them for the next pass). A page
   * takes about `limit` recipients, the whole of its last transaction's.
   * Only transactions older than the oldest one still running are taken:
   * they have all ended, so none of their rows turns up behind the cursor
   * later. One replica passes at a time (the cursor's lock). Resolves to how
   * many were published.
   */
  async publishSent(limit: number, publish: (sent: SentRecipient[]) => Promise<void>): Promise<number> {
    return withTransaction(this.db, async (connection) => {
      const { rows } = await connection.query<{
        run_id: string;
        workspace_id: string;
        campaign_id: string;
        email: string;
        variant_id: string | null;
        message_id: string;
        sent_at: Date;
        sent_xid: string;
        provider_category_id: string | null;
      }>(
        // The plan is read once per run, not once per message: each read of it unpacks it whole.
        `WITH outbox AS MATERIALIZED (
           SELECT published_through, pg_snapshot_xmin(pg_current_snapshot()) AS ended_below
           FROM sent_events_outbox FOR UPDATE SKIP LOCKED
         ), page_end AS MATERIALIZED (
           SELECT max(sent_xid) AS through FROM (
             SELECT sent_xid FROM run_recipients
             WHERE sent_xid > (SELECT published_through FROM outbox) AND sent_xid < (SELECT ended_below FROM outbox)
             ORDER BY sent_xid
             LIMIT $1
           ) first_rows
         ), picked AS MATERIALIZED (
           SELECT run_id, email, variant_id, message_id, sent_at, sent_xid FROM run_recipients
           WHERE sent_xid > (SELECT published_through FROM outbox) AND sent_xid <= (SELECT through FROM page_end)
         ), of_runs AS MATERIALIZED (
           SELECT id, workspace_id, campaign_id, plan->>'providerCategoryId' AS provider_category_id
           FROM runs WHERE id IN (SELECT run_id FROM picked)
         )
         SELECT p.run_id, r.workspace_id, r.campaign_id, p.email, p.variant_id, p.message_id, p.sent_at, p.sent_xid,
           r.provider_category_id
         FROM picked p JOIN of_runs r ON r.id = p.run_id
         ORDER BY p.sent_xid, p.sent_at`,
        [limit],
      );
      if (rows.length === 0) return 0;
      await publish(
        rows.map((row) => ({
          runId: row.run_id,
          workspaceId: row.workspace_id,
          campaignId: row.campaign_id,
          email: row.email,
          variantId: row.variant_id,
          messageId: row.message_id,
          sentAt: row.sent_at,
          providerCategoryId: row.provider_category_id,
        })),
      );
      await connection.query('UPDATE sent_events_outbox SET published_through = $1', [rows[rows.length - 1].sent_xid]);
      return rows.length;
    });
  }

  /**
   * The outbox of the bounces of SMTP answers, as publishSent: up to `limit` bounced recipients whose `bounce`
   * event is not published, marked published once `publish` resolves.
   */
  async publishBounces(limit: number, publish: (bounced: BouncedRecipient[]) => Promise<void>): Promise<number> {
    return withTransaction(this.db, async (connection) => {
      const { rows } = await connection.query<{
        run_id: string;
        workspace_id: string;
        campaign_id: string;
        email: string;
        variant_id: string | null;
        message_id: string;
        bounced_at: Date;
        bounce_code: number;
        error: string | null;
        provider_category_id: string | null;
      }>(
        `WITH picked AS MATERIALIZED (
           SELECT run_id, email, variant_id, message_id, bounced_at, bounce_code, error FROM run_recipients
           WHERE bounce_code IS NOT NULL AND NOT bounce_published
           ORDER BY bounced_at
           LIMIT $1 FOR UPDATE SKIP LOCKED
         )
         SELECT p.*, r.workspace_id, r.campaign_id, r.plan->>'providerCategoryId' AS provider_category_id
         FROM picked p JOIN runs r ON r.id = p.run_id
         ORDER BY p.bounced_at`,
        [limit],
      );
      if (rows.length === 0) return 0;
      await publish(
        rows.map((row) => ({
          runId: row.run_id,
          workspaceId: row.workspace_id,
          campaignId: row.campaign_id,
          email: row.email,
          variantId: row.variant_id,
          messageId: row.message_id,
          bouncedAt: row.bounced_at,
          code: row.bounce_code,
          reason: row.error ?? String(row.bounce_code),
          providerCategoryId: row.provider_category_id,
        })),
      );
      await connection.query(
        `UPDATE run_recipients rr SET bounce_published = true
         FROM unnest($1::uuid[], $2::text[]) AS done(run_id, email)
         WHERE rr.run_id = done.run_id AND rr.email = done.email`,
        [rows.map((row) => row.run_id), rows.map((row) => row.email)],
      );
      return rows.length;
    });
  }

  /** The recipient of the run's message with this Message-ID (without angle brackets), which a returned report names. */
  async recipientOfMessage(messageId: string): Promise<MessageRecipient | undefined> {
    const { rows } = await this.query<{
      run_id: string;
      workspace_id: string;
      campaign_id: string;
      email: string;
      variant_id: string | null;
      provider_category_id: string | null;
    }>(
      `SELECT rr.run_id, r.workspace_id, r.campaign_id, rr.email, rr.variant_id, r.plan->>'providerCategoryId' AS provider_category_id
       FROM run_recipients rr JOIN runs r ON r.id = rr.run_id
       WHERE rr.message_id = $1
       LIMIT 1`,
      [messageId],
    );
    const row = rows[0];
    return (
      row && {
        runId: row.run_id,
        workspaceId: row.workspace_id,
        campaignId: row.campaign_id,
        email: row.email,
        variantId: row.variant_id,
        messageId,
        providerCategoryId: row.provider_category_id,
      }
    );
  }

  /**
   * Takes up to `wanted` tokens of the transport's bucket (`rate` a second,
   * holding at most one second's worth), shared by every replica. Resolves to
   * how many it got (0 when the bucket is empty).
   */
  async takeTokens(transport: string, rate: number, wanted: number): Promise<number> {
    await this.query(
      `INSERT INTO rate_buckets (transport, tokens, refilled_at) VALUES ($1, $2, clock_timestamp()) ON CONFLICT (transport) DO NOTHING`,
      [transport, rate],
    );
    const { rows } = await this.query<{ granted: number }>(
      `UPDATE rate_buckets b SET tokens = a.available - least(floor(a.available), $3), refilled_at = clock_timestamp()
       FROM (
         SELECT least($2::double precision, tokens + $2 * extract(epoch FROM clock_timestamp() - refilled_at)) AS available
         FROM rate_buckets WHERE transport = $1 FOR UPDATE
       ) a
       WHERE b.transport = $1
       RETURNING least(floor(a.available), $3)::integer AS granted`,
      [transport, rate, wanted],
    );
    return rows[0]?.granted ?? 0;
  }

  private query<Row extends object = Record<string, unknown>>(text: string, values: unknown[] = []) {
    return withConnection(this.db, (connection) => connection.query<Row & Record<string, unknown>>(prepared(text, values)));
  }
}

/**
 * The decision of a run's A/B test, automatic (decide_at passed, the run
 * sending) or by hand (`manual`, the run sending or paused): one transaction,
 * taken by the first to update the run while it waits, whatever the
 * replicas. The run goes on sending the winner: its held recipients become
 * pending with the winner's variant. Resolves to false when another decided
 * first (or the run stopped waiting).
 */
export function recordWinner(db: Knex, runId: string, winner: string, decidedBy: DecidedBy): Promise<boolean> {
  return withTransaction(db, async (connection) => {
    const { rowCount } = await connection.query(
      `UPDATE runs SET ab_phase = 'sending_winner', winner_variant_id = $2, decided_by = $3, decided_at = now()
       WHERE id = $1 AND ab_phase = 'waiting'
         AND CASE WHEN $3 = 'manual' THEN status IN ('sending', 'paused') ELSE status = 'sending' AND decide_at <= now() END`,
      [runId, winner, decidedBy],
    );
    if (rowCount !== 1) return false;
    await connection.query(`UPDATE run_recipients SET status = 'pending', variant_id = $2 WHERE run_id = $1 AND status = 'held'`, [
      runId,
      winner,
    ]);
    return true;
  });
}

export async function testSentByVariant(db: Knex, runId: string): Promise<Map<string, number>> {
  const { rows } = await withConnection(db, (connection) =>
    connection.query<{ variant_id: string; sent: number }>(
      `SELECT variant_id, count(*)::integer AS sent FROM run_recipients
       WHERE run_id = $1 AND ab_group = 'test' AND status = 'sent' GROUP BY variant_id`,
      [runId],
    ),
  );
  return new Map(rows.map((row) => [row.variant_id, row.sent]));
}
