import type { ClickHouseClient } from '@clickhouse/client';
import { layoutOf, type EventDatabase, type TableSpec } from './layout';
import { enum8, identifier, int, join, list, raw, sql, str, stringSet, uuid, uuidSet, type SqlFragment } from './sql';

/** Bounce tracking rules (docs/api.md, "Bounce tracking and suppressions"). */

/** A hard bounce, an unsubscribe or a spam report suppresses at once; soft bounces need this many ... */
export const SOFT_BOUNCES_TO_SUPPRESS = 3;
/** ... within this many days, counted from the first of them to the last. */
export const SOFT_BOUNCE_WINDOW_DAYS = 30;

/** Signals that suppress at once; at the same second, the first listed names the reason. */
export const IMMEDIATE_REASONS = ['hard_bounce', 'unsubscribe', 'spam_report'] as const;

/** Why an address is suppressed: what the signals decide (suppression_state), or `manual`, added by hand. */
export const SUPPRESSION_REASONS = ['hard_bounce', 'soft_bounces', 'unsubscribe', 'spam_report', 'manual'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

/**
 * Suppressions added by hand. One stays in force until a lift after it
 * (suppression_lift_audit, to the millisecond, so an addition right after a
 * lift counts), beside whatever the signals decide.
 */
export const suppressionManualTable: TableSpec = {
  name: 'suppression_manual',
  structure: sql`(
    workspace_id UUID,
    email String,
    added_at DateTime('UTC'),
    added_at_ms UInt64,
    note String,
    added_by_user_id String,
    added_by_email String
  )`,
  family: 'ReplacingMergeTree',
  keys: sql`ORDER BY (workspace_id, email, added_at_ms)`,
};

/**
 * Who lifted an address's suppression and when, to the millisecond; written
 * beside suppression_lifts (which the signal rules read, to the second).
 */
export const suppressionLiftAuditTable: TableSpec = {
  name: 'suppression_lift_audit',
  structure: sql`(
    workspace_id UUID,
    email String,
    lifted_at_ms UInt64,
    lifted_by_user_id String,
    lifted_by_email String
  )`,
  family: 'ReplacingMergeTree',
  keys: sql`ORDER BY (workspace_id, email, lifted_at_ms)`,
};

/**
 * The addresses of a workspace (or one of them, or those of a list) suppressed
 * by hand now: (email, suppressed_at), suppressed_at the earliest addition
 * after the address's last audited lift.
 */
export function manualSuppressions(workspaceId: string, email?: string | string[]): SqlFragment {
  const addresses = email === undefined ? [] : [typeof email === 'string' ? sql`email = ${str(email)}` : sql`email IN ${stringSet(email)}`];
  const scope = join([sql`workspace_id = ${uuid(workspaceId)}`, ...addresses], ' AND ');
  return sql`
    SELECT email, min(added_at) AS suppressed_at
    FROM (SELECT email, added_at, added_at_ms FROM suppression_manual WHERE ${scope}) AS additions
    ANY LEFT JOIN (
      SELECT email, max(lifted_at_ms) AS last_lift_ms FROM suppression_lift_audit WHERE ${scope} GROUP BY email
    ) AS lifts USING (email)
    WHERE added_at_ms > last_lift_ms
    GROUP BY email`;
}

/** suppression_state.reason: what the signals decide, or 'none' for a lifted address that is not suppressed (again). */
const SUPPRESSION_STATE_REASON_TYPE = enum8(['none', ...SUPPRESSION_REASONS.filter((reason) => reason !== 'manual')], 0);

/**
 * The stored outcome of the rules per address, so reads need not derive it
 * from every signal. Each row is a function of the address's inputs (its
 * distinct signals and lifts), and `version` counts those inputs: they only
 * ever grow, so the row computed from more of them is the newer one, and two
 * rows with the same version are the same row. Writers (ingestion after
 * storing signals, analytics after a lift) recompute their addresses after
 * their own write, so the last computation sees every input and the
 * ReplacingMergeTree keeps it, whatever the order of concurrent writers.
 * Readers take the highest version per address (FINAL).
 */
export const suppressionStateTable = (name = 'suppression_state'): TableSpec => ({
  name,
  structure: sql`(
    workspace_id UUID,
    email String,
    reason ${SUPPRESSION_STATE_REASON_TYPE},
    suppressed_at DateTime('UTC'),
    version UInt64
  )`,
  family: 'ReplacingMergeTree',
  engineArguments: raw.trusted('version'),
  keys: sql`ORDER BY (workspace_id, email)`,
});

export interface SuppressedAddress {
  workspaceId: string;
  email: string;
}

/**
 * The given addresses in the given workspaces: a superset of the pairs when
 * several workspaces are involved, which is harmless (recomputing an address
 * writes its current state) and reads far faster than a tuple IN on 18.16.
 * Sets, not lists of literals: a batch may bring tens of thousands of addresses.
 */
function addressScope(addresses: SuppressedAddress[]): SqlFragment {
  const workspaces = [...new Set(addresses.map((address) => address.workspaceId))];
  const emails = [...new Set(addresses.map((address) => address.email))];
  return sql`workspace_id IN ${uuidSet(workspaces)} AND email IN ${stringSet(emails)}`;
}

/**
 * Rows of suppression_state (workspace_id, email, reason, suppressed_at,
 * version) computed from the signals and lifts of `addresses`, or of every
 * address with a signal. Per address, signals at or before its latest lift
 * are ignored; the earliest hard bounce, unsubscribe or spam report
 * suppresses at once, and so does the third soft bounce within the window.
 * - The earliest immediate signal is one minimum over time * 4 + rank (rank
 *   1-3 in IMMEDIATE_REASONS order), which keeps its reason and breaks ties
 *   in one cheap number per address.
 * - Soft bounces are collected as distinct (time, provider event id) pairs, so
 *   a stored duplicate counts once; of their sorted times t, the first t[i]
 *   with t[i] - t[i - 2] within the window is the suppression time (index 0,
 *   which arrayFirst gives when none qualifies, reads as 0 = "never").
 * - version: distinct provider event ids plus distinct lift times, all of
 *   them, lifted or not.
 * - An address never lifted gets no 'none' row: without lifts its state only
 *   ever goes from none to suppressed (new signals cannot undo a suppression,
 *   and a third soft bounce stays within the window whatever comes between),
 *   so there is no earlier suppressed row for a 'none' row to replace. Reads
 *   merge every row of a workspace (FINAL), and addresses with a soft bounce
 *   or two are many.
 */
export function suppressionStates(addresses?: SuppressedAddress[]): SqlFragment {
  const scope = addresses === undefined ? raw.trusted('1') : addressScope(addresses);
  const lag = int(SOFT_BOUNCES_TO_SUPPRESS - 1);
  const reasons = sql`[${list(IMMEDIATE_REASONS.map((reason) => str(reason)))}]`;
  const rank = sql`multiIf(${join(
    IMMEDIATE_REASONS.map((reason, index) => sql`reason = ${str(reason)}, ${int(index + 1)}`),
    ', ',
  )}, 0)`;
  return sql`
    SELECT workspace_id, email,
      CAST(multiIf(immediate_first, immediate_reason, soft_at > 0, 'soft_bounces', 'none') AS ${SUPPRESSION_STATE_REASON_TYPE}) AS reason,
      toDateTime(multiIf(immediate_first, immediate_at, soft_at), 'UTC') AS suppressed_at,
      version
    FROM (
      SELECT workspace_id, email, version, lifted,
        toUInt32(intDiv(first_immediate, 4)) AS immediate_at,
        ${reasons}[first_immediate % 4] AS immediate_reason,
        arrayMap(soft -> soft.1, arraySort(arrayDistinct(soft_bounces))) AS soft_times,
        soft_times[arrayFirst(
          i -> i > ${lag} AND soft_times[i] - soft_times[i - ${lag}] <= ${int(SOFT_BOUNCE_WINDOW_DAYS * 86_400)},
          arrayEnumerate(soft_times))] AS soft_at,
        immediate_at > 0 AND (soft_at = 0 OR immediate_at <= soft_at) AS immediate_first
      FROM (
        SELECT workspace_id, email,
          minIf(toUInt64(occurred_at) * 4 + ${rank}, ${rank} > 0 AND occurred_at > last_lift) AS first_immediate,
          groupArrayIf((toUInt32(occurred_at), provider_event_id), reason = 'soft_bounce' AND occurred_at > last_lift) AS soft_bounces,
          uniqExact(provider_event_id) + any(lifts) AS version,
          any(lifts) > 0 AS lifted
        FROM (SELECT workspace_id, email, reason, occurred_at, provider_event_id FROM suppression_signals WHERE ${scope}) AS signals
        ANY LEFT JOIN (
          SELECT workspace_id, email, max(lifted_at) AS last_lift, uniqExact(lifted_at) AS lifts
          FROM suppression_lifts WHERE ${scope} GROUP BY workspace_id, email
        ) AS address_lifts USING (workspace_id, email)
        GROUP BY workspace_id, email
      )
    )
    WHERE reason != 'none' OR lifted`;
}

/**
 * Recomputes the stored state of these addresses from their signals and
 * lifts; run by every writer after its own insert. A query text per batch
 * can outgrow the default 256 KiB query limit, hence the setting (in bytes:
 * an address of non-ASCII characters takes more than one each).
 */
export async function refreshSuppressionState(client: ClickHouseClient, addresses: SuppressedAddress[]): Promise<void> {
  if (addresses.length === 0) return;
  const query = suppressionStateRefresh(addresses).text;
  await client.command({ query, clickhouse_settings: { max_query_size: String(Buffer.byteLength(query) + 1024) } });
}

/** The statement refreshSuppressionState runs, for a client of another shape (a few addresses). */
export function suppressionStateRefresh(addresses: SuppressedAddress[]): SqlFragment {
  return sql`INSERT INTO suppression_state ${suppressionStates(addresses)}`;
}

/** How many addresses one refresh statement of repairSuppressionStates takes. */
const REPAIR_CHUNK = 10_000;

/**
 * Recomputes the state of every address whose stored state is behind its
 * signals and lifts (the state computed now counts more of them), and returns
 * those addresses. On one server there are none, since every writer
 * recomputes after its own insert. In a cluster, a batch a replica
 * acknowledged just before it died reaches the other replicas only when it is
 * back, after ingestion moved on and computed states without it: an
 * unsubscribe there would stay outside the state until the next signal of its
 * address. Reads every signal, so it is run now and then, not per batch.
 */
export async function repairSuppressionStates(client: ClickHouseClient): Promise<SuppressedAddress[]> {
  const result = await client.query({
    query: sql`
      SELECT toString(workspace_id) AS workspaceId, email
      FROM (${suppressionStates()}) AS computed
      ANY LEFT JOIN (
        SELECT workspace_id, email, max(version) AS stored_version FROM suppression_state GROUP BY workspace_id, email
      ) AS stored USING (workspace_id, email)
      WHERE version > stored_version`.text,
    format: 'JSONEachRow',
  });
  const behind = await result.json<SuppressedAddress>();
  for (let start = 0; start < behind.length; start += REPAIR_CHUNK) {
    await refreshSuppressionState(client, behind.slice(start, start + REPAIR_CHUNK));
  }
  return behind;
}

/** Writes the state of every address with a signal (e.g. after a bulk load of signals). */
export async function backfillSuppressionState(client: ClickHouseClient, table = 'suppression_state'): Promise<void> {
  await client.command({ query: sql`INSERT INTO ${identifier(table)} ${suppressionStates()}`.text });
}

const STAGING_TABLE = 'suppression_state_backfill';

async function tableExists(client: ClickHouseClient, table: string): Promise<boolean> {
  const result = await client.query({ query: sql`EXISTS TABLE ${identifier(table)}`.text, format: 'JSONEachRow' });
  const [{ result: exists }] = await result.json<{ result: number }>();
  return Number(exists) === 1;
}

/**
 * Creates suppression_state over the signals already stored, filled from
 * them: built under a staging name and renamed once complete, so readers never
 * see it half filled. A staging table left by a crash holds valid rows, so a
 * later build reuses it. Replicas starting together may each build: the
 * first rename wins, and a build the winner's rename cut short (its staging
 * table renamed away under it) ends there too. `client` is bound to the event
 * database. In a cluster the local staging table is renamed, and the
 * Distributed table made over it once it has its name.
 */
export async function ensureSuppressionState(client: ClickHouseClient, database: EventDatabase): Promise<void> {
  const layout = layoutOf(database);
  if (await tableExists(client, 'suppression_state')) return;
  const run = async (statement: SqlFragment) => {
    await client.command({ query: statement.text });
  };
  try {
    for (const statement of layout.createTable(suppressionStateTable(STAGING_TABLE))) await run(statement);
    await backfillSuppressionState(client, STAGING_TABLE);
    await run(sql`RENAME TABLE ${layout.local(STAGING_TABLE)} TO ${layout.local('suppression_state')}${layout.onCluster}`);
  } catch (error) {
    if (!(await tableExists(client, layout.localName('suppression_state')))) throw error;
    for (const statement of layout.dropTable(STAGING_TABLE)) await run(statement);
  }
  if (layout.sharded('suppression_state')) {
    await run(layout.createDistributed('suppression_state'));
    for (const statement of layout.dropTable(STAGING_TABLE)) await run(statement);
  }
}
