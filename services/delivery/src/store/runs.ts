import type { Knex } from 'knex';
import { ConflictError, InvalidArgumentError, NotFoundError, valueError, withConnection, type PgConnection } from '@mail/common';
import type { AbPhase, AbTestPlan, DecidedBy } from '../domain/ab-test';
import type { Audience, Engagement, PlanVariant, RunPlan } from '../domain/plan';
import {
  RUN_ACTIONS,
  isUuid,
  type Page,
  type PageWindow,
  type Run,
  type RunAction,
  type RunRecipient,
  type RunStatus,
  type RunVariantFigures,
} from '../domain/run';
import { recordWinner } from './sending';

/** The runs as the API shows them; SQL written where it is used, values as $n parameters. */

interface RunRow {
  id: string;
  workspace_id: string;
  campaign_id: string;
  trigger: Run['trigger'];
  scheduled_for: Date | null;
  status: RunStatus;
  failure: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  duplicates: number;
  variants: PlanVariant[] | null;
  ab_test: AbTestPlan | null;
  ab_phase: AbPhase | null;
  decide_at: Date | null;
  decided_at: Date | null;
  winner_variant_id: string | null;
  decided_by: DecidedBy | null;
  /** As the API shows it. */
  audience: { run_id: string; engagement: Engagement } | null;
}

/** Of the plan only its variants, for the run's figures: its source alone can be a megabyte (a csv list of account ids). */
const RUN_COLUMNS = `id, workspace_id, campaign_id, trigger, scheduled_for, status, failure, created_at, started_at, finished_at,
  duplicates, plan->'variants' AS variants, plan->'abTest' AS ab_test, ab_phase, decide_at, decided_at, winner_variant_id, decided_by,
  audience`;

export interface NewRun {
  workspaceId: string;
  campaignId: string;
  trigger: Run['trigger'];
  scheduledFor: Date | null;
  /** Set: the run is ready to go (queued); unset: it failed at once with `failure`. */
  plan?: RunPlan;
  failure?: string;
  sendPriority: number;
  audience?: Audience;
}

/** The partial unique index that keeps one manual run of a campaign queued, sending or paused (migration 003). */
const ONE_ACTIVE_MANUAL_RUN = 'runs_one_active_manual_idx';

const isActiveManualRunConflict = (error: unknown): boolean =>
  (error as { code?: unknown }).code === '23505' && (error as { constraint?: unknown }).constraint === ONE_ACTIVE_MANUAL_RUN;

/**
 * Inserts a run; for a fire time that already has its run, inserts nothing and
 * resolves to undefined. A manual run while the campaign has one queued,
 * sending or paused is a ConflictError naming it: the index decides, so of
 * simultaneous requests on any replicas one run is made.
 */
export async function insertRun(db: Knex, run: NewRun): Promise<Run | undefined> {
  for (;;) {
    try {
      return await insertRunRow(db, run);
    } catch (error) {
      if (!isActiveManualRunConflict(error)) throw error;
      const active = await activeManualRun(db, run.campaignId);
      // Gone between the insert and the look-up (finished or cancelled): the insert may go in now.
      if (active) throw new ConflictError(`The campaign already has a manual run in progress: ${active.id} is ${active.status}`);
    }
  }
}

async function activeManualRun(db: Knex, campaignId: string): Promise<{ id: string; status: RunStatus } | undefined> {
  const { rows } = await withConnection(db, (connection) =>
    connection.query<{ id: string; status: RunStatus }>(
      `SELECT id, status FROM runs WHERE campaign_id = $1 AND trigger = 'manual' AND status IN ('queued', 'sending', 'paused')`,
      [campaignId],
    ),
  );
  return rows[0];
}

async function insertRunRow(db: Knex, run: NewRun): Promise<Run | undefined> {
  const rows = await withConnection(db, async (connection) => {
    const { rows: inserted } = await connection.query<RunRow>(
      `INSERT INTO runs (workspace_id, campaign_id, trigger, scheduled_for, status, failure, send_priority, plan, finished_at, ab_phase,
         audience)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, CASE WHEN $5 = 'failed' THEN now() END, $9, $10)
       ON CONFLICT (campaign_id, scheduled_for) DO NOTHING
       RETURNING ${RUN_COLUMNS}`,
      [
        run.workspaceId,
        run.campaignId,
        run.trigger,
        run.scheduledFor,
        run.plan ? 'queued' : 'failed',
        run.failure ?? null,
        run.sendPriority,
        run.plan ? JSON.stringify(run.plan) : null,
        run.plan?.abTest ? 'testing' : null,
        run.audience ? JSON.stringify({ run_id: run.audience.runId, engagement: run.audience.engagement }) : null,
      ],
    );
    return withFigures(connection, inserted);
  });
  return rows[0];
}

/** Whether the campaign's fire time has its run already (the scheduler's cheap check before it builds one). */
export async function hasScheduledRun(db: Knex, campaignId: string, scheduledFor: Date): Promise<boolean> {
  const { rows } = await withConnection(db, (connection) =>
    connection.query('SELECT 1 FROM runs WHERE campaign_id = $1 AND scheduled_for = $2', [campaignId, scheduledFor]),
  );
  return rows.length > 0;
}

export async function getRun(db: Knex, workspaceId: string, id: string): Promise<Run> {
  if (!isUuid(id)) throw new NotFoundError('Campaign run');
  const [run] = await withConnection(db, async (connection) => {
    const { rows } = await connection.query<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = $1 AND workspace_id = $2`, [
      id,
      workspaceId,
    ]);
    return withFigures(connection, rows);
  });
  if (!run) throw new NotFoundError('Campaign run');
  return run;
}

/** A campaign's runs, newest first. */
export async function listRuns(db: Knex, workspaceId: string, campaignId: string, window: PageWindow): Promise<Page<Run>> {
  if (!isUuid(campaignId)) return { items: [], total: 0, page: window.page, pageSize: window.pageSize };
  return withConnection(db, async (connection) => {
    const scope = [campaignId, workspaceId];
    const [{ rows }, { rows: totals }] = await Promise.all([
      connection.query<RunRow>(
        `SELECT ${RUN_COLUMNS} FROM runs WHERE campaign_id = $1 AND workspace_id = $2
         ORDER BY created_at DESC, id DESC LIMIT $3 OFFSET $4`,
        [...scope, window.pageSize, window.offset],
      ),
      connection.query<{ total: string }>('SELECT count(*) AS total FROM runs WHERE campaign_id = $1 AND workspace_id = $2', scope),
    ]);
    return { items: await withFigures(connection, rows), total: Number(totals[0].total), page: window.page, pageSize: window.pageSize };
  });
}

/** `claimed` and `held` are shown (and filtered) as pending. */
const SHOWN_STATUS = `CASE WHEN status IN ('claimed', 'held') THEN 'pending' ELSE status END`;

export async function listRecipients(
  db: Knex,
  workspaceId: string,
  runId: string,
  status: string | undefined,
  window: PageWindow,
): Promise<Page<RunRecipient>> {
  await getRunRow(db, workspaceId, runId);
  const statuses = status === undefined ? null : status === 'pending' ? ['pending', 'claimed', 'held'] : [status];
  return withConnection(db, async (connection) => {
    const scope = [runId, statuses];
    const [{ rows }, { rows: totals }] = await Promise.all([
      connection.query<RunRecipient>(
        `SELECT email, ${SHOWN_STATUS} AS status, variant_id AS "variantId", message_id AS "messageId", sent_at AS "sentAt", error
         FROM run_recipients WHERE run_id = $1 AND ($2::text[] IS NULL OR status = ANY ($2))
         ORDER BY seq LIMIT $3 OFFSET $4`,
        [...scope, window.pageSize, window.offset],
      ),
      connection.query<{ total: string }>(
        'SELECT count(*) AS total FROM run_recipients WHERE run_id = $1 AND ($2::text[] IS NULL OR status = ANY ($2))',
        scope,
      ),
    ]);
    return { items: rows, total: Number(totals[0].total), page: window.page, pageSize: window.pageSize };
  });
}

async function getRunRow(db: Knex, workspaceId: string, id: string): Promise<RunRow> {
  if (!isUuid(id)) throw new NotFoundError('Campaign run');
  const { rows } = await withConnection(db, (connection) =>
    connection.query<RunRow>(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = $1 AND workspace_id = $2`, [id, workspaceId]),
  );
  if (rows.length === 0) throw new NotFoundError('Campaign run');
  return rows[0];
}

/**
 * Pause, resume or cancel, if the run's status allows it (409 if not). Senders
 * check the run's status before each message, so none starts after this commits.
 */
export async function actOnRun(db: Knex, workspaceId: string, id: string, action: RunAction): Promise<Run> {
  const { from, to } = RUN_ACTIONS[action];
  await getRunRow(db, workspaceId, id);
  const [changed] = await withConnection(db, async (connection) => {
    const { rows } = await connection.query<RunRow>(
      `UPDATE runs SET status = $3,
         finished_at = CASE WHEN $3 = 'cancelled' THEN now() ELSE finished_at END
       WHERE id = $1 AND workspace_id = $2 AND status = ANY ($4)
       RETURNING ${RUN_COLUMNS}`,
      [id, workspaceId, to, from],
    );
    if (to === 'cancelled' && rows.length > 0) {
      // What no sender holds is not sent any more; what a sender is handing over right now finishes.
      await connection.query(`UPDATE run_recipients SET status = 'pending', worker_id = NULL WHERE run_id = $1 AND status = 'claimed'`, [
        id,
      ]);
    }
    return withFigures(connection, rows);
  });
  if (!changed) {
    const current = (await getRunRow(db, workspaceId, id)).status;
    throw new ConflictError(
      `A run that is ${current} cannot be ${action === 'pause' ? 'paused' : action === 'resume' ? 'resumed' : 'cancelled'}`,
    );
  }
  return changed;
}

/**
 * The winner of a run's A/B test, picked by hand while the test waits for
 * its decision (the run sending or paused); a ConflictError at any other time.
 */
export async function pickWinner(db: Knex, workspaceId: string, id: string, variantId: string): Promise<Run> {
  const row = await getRunRow(db, workspaceId, id);
  const refused = (phase: AbPhase | null, status: RunStatus): ConflictError =>
    new ConflictError(
      phase === null
        ? 'The run has no A/B test'
        : `A winner can be picked only while the run's A/B test waits for its decision: its phase is ${phase} and the run is ${status}`,
    );
  if (row.ab_phase !== 'waiting' || !['sending', 'paused'].includes(row.status)) throw refused(row.ab_phase, row.status);
  const variant = row.variants?.find((candidate) => candidate.id === variantId.toLowerCase());
  if (!variant) throw new InvalidArgumentError([valueError(['variant_id'], variantId, 'not a variant of this run')]);
  if (!(await recordWinner(db, id, variant.id, 'manual'))) {
    const current = await getRunRow(db, workspaceId, id);
    throw refused(current.ab_phase, current.status);
  }
  return getRun(db, workspaceId, id);
}

/**
 * A deleted workspace's runs and recipients go, and its test sends of the last
 * hour with them; a sender handing one over finds nothing to record.
 */
export async function deleteWorkspaceRuns(db: Knex, workspaceId: string): Promise<number> {
  const { rowCount } = await withConnection(db, (connection) =>
    connection.query('WITH quota AS (DELETE FROM test_sends WHERE workspace_id = $1) DELETE FROM runs WHERE workspace_id = $1', [
      workspaceId,
    ]),
  );
  return rowCount ?? 0;
}

interface CountRow {
  run_id: string;
  variant_id: string | null;
  status: string;
  ab_group: 'test' | 'holdout' | null;
  n: string;
}

/** Counts and per-variant figures of the runs, from their recipients. */
async function withFigures(connection: PgConnection, rows: RunRow[]): Promise<Run[]> {
  if (rows.length === 0) return [];
  const { rows: counts } = await connection.query<CountRow>(
    `SELECT run_id, variant_id, status, ab_group, count(*) AS n FROM run_recipients WHERE run_id = ANY ($1::uuid[])
     GROUP BY run_id, variant_id, status, ab_group`,
    [rows.map((row) => row.id)],
  );
  return rows.map((row) => {
    const mine = counts.filter((count) => count.run_id === row.id);
    const total = (statuses: string[], variantId?: string, testOnly = false): number =>
      mine
        .filter(
          (count) =>
            statuses.includes(count.status) &&
            (variantId === undefined || count.variant_id === variantId) &&
            (!testOnly || count.ab_group === 'test'),
        )
        .reduce((sum, count) => sum + Number(count.n), 0);
    const all = ['pending', 'held', 'claimed', 'sending', 'sent', 'failed', 'suppressed', 'invalid', 'unknown'];
    const variants: RunVariantFigures[] | null =
      row.variants?.map((variant) => ({
        id: variant.id,
        label: variant.label,
        weight: variant.weight,
        recipients: total(all, variant.id),
        sent: total(['sent'], variant.id),
      })) ?? null;
    return {
      id: row.id,
      workspaceId: row.workspace_id,
      campaignId: row.campaign_id,
      trigger: row.trigger,
      scheduledFor: row.scheduled_for,
      status: row.status,
      failure: row.failure,
      createdAt: row.created_at,
      startedAt: row.started_at,
      finishedAt: row.finished_at,
      counts: {
        recipients: total(all),
        sent: total(['sent']),
        failed: total(['failed']),
        suppressed: total(['suppressed']),
        invalid: total(['invalid']),
        duplicates: row.duplicates,
        pending: total(['pending', 'held', 'claimed', 'sending']),
        unknown: total(['unknown']),
      },
      variants,
      // Engagement is analytics' to tell: sending/runs.ts adds it (withEngagement).
      abTest:
        row.ab_test && row.ab_phase
          ? {
              phase: row.ab_phase,
              ...row.ab_test,
              testRecipients: total(all, undefined, true),
              decideAt: row.decide_at,
              decidedAt: row.decided_at,
              winnerVariantId: row.winner_variant_id,
              decidedBy: row.decided_by,
              variants: (row.variants ?? []).map((variant) => ({
                variantId: variant.id,
                sent: total(['sent'], variant.id, true),
                opens: 0,
                clicks: 0,
                rate: null,
              })),
              leaderVariantId: null,
            }
          : null,
      audience: row.audience && { runId: row.audience.run_id, engagement: row.audience.engagement },
    };
  });
}
