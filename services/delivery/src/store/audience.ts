import type { Knex } from 'knex';
import { withConnection } from '@mail/common';
import type { RunPlan } from '../domain/plan';
import type { SourceBatch } from './recipient-source';

type AudienceSource = Extract<RunPlan['source'], { kind: 'audience' }>;

const BATCH = 1000;

/** Of the addresses, those with a human open (`open`) or click (`click`) of the run's message stored until `until`. */
export type EngagedFilter = (runId: string, engagement: 'open' | 'click', emails: string[], until: Date) => Promise<Set<string>>;

/**
 * A follow-up run's recipients: the earlier run's recipients that were sent
 * before the follow-up was created (a set that no longer changes), in its
 * order, with the fields they had there, kept or dropped by whether they
 * engaged as analytics knew at that moment. `position` counts the earlier
 * run's rows passed; a resumed load finds its place once, then pages by seq.
 */
export async function* streamAudience(
  db: Knex,
  source: AudienceSource,
  position: number,
  engaged: EngagedFilter,
): AsyncIterable<SourceBatch> {
  const asOf = new Date(source.asOf);
  const kind = source.engagement === 'opened' || source.engagement === 'not_opened' ? 'open' : 'click';
  const wantEngaged = source.engagement === 'opened' || source.engagement === 'clicked';
  const scope = `run_id = $1 AND status = 'sent' AND sent_at <= $2`;
  let afterSeq = '0';
  if (position > 0) {
    const { rows } = await withConnection(db, (connection) =>
      connection.query<{ seq: string }>(`SELECT seq FROM run_recipients WHERE ${scope} ORDER BY seq OFFSET $3 LIMIT 1`, [
        source.runId,
        asOf,
        position - 1,
      ]),
    );
    if (rows.length === 0) return;
    afterSeq = rows[0].seq;
  }
  let passed = position;
  for (;;) {
    const { rows } = await withConnection(db, (connection) =>
      connection.query<{ seq: string; email: string; fields: Record<string, unknown> }>(
        `SELECT seq, email, fields FROM run_recipients WHERE ${scope} AND seq > $3 ORDER BY seq LIMIT ${BATCH}`,
        [source.runId, asOf, afterSeq],
      ),
    );
    if (rows.length === 0) return;
    const found = await engaged(
      source.runId,
      kind,
      rows.map((row) => row.email),
      asOf,
    );
    passed += rows.length;
    afterSeq = rows[rows.length - 1].seq;
    yield {
      rows: rows.filter((row) => found.has(row.email) === wantEngaged).map((row) => ({ ...row.fields, email: row.email })),
      position: passed,
    };
  }
}
