import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import {
  ConflictError,
  NotFoundError,
  OPEN_WORKSPACE,
  closeWorkspace,
  containsNul,
  insertIntoOpenWorkspace,
  withConnection,
  withTransaction,
  type PgConnection,
} from '@mail/common';
import type { Campaign, CampaignFields, CampaignPatch, CategoryMatch, NewCampaign, Page, VariantDraft } from '../domain/model';
import { checkVariantIds, isUuid, type PageWindow } from '../domain/validation';

/**
 * Campaign SQL. Each write is one statement where it can be (data-modifying
 * CTEs, listmonk-style): one round trip, atomic without an explicit
 * transaction, and about half the CPU of the same work as separate queries.
 * Reads and writes of one campaign go to the driver as named statements
 * (`run`); the list, whose filters vary, is built with knex.
 */

/** Committed changes of provider_category_id are announced on this channel (a ChangeFeed of @mail/common). */
export const CATEGORY_CHANNEL = 'campaign_category_changed';

const COLUMN_OF: Record<keyof CampaignFields, string> = {
  name: 'name',
  description: 'description',
  isActive: 'is_active',
  sendPriority: 'send_priority',
  scheduleCron: 'schedule_cron',
  recipientSource: 'recipient_source',
  mssqlQuery: 'mssql_query',
  csvAccountIds: 'csv_account_ids',
  providerCategoryId: 'provider_category_id',
  fromEmail: 'from_email',
  fromName: 'from_name',
  replyTo: 'reply_to',
  deliveryMode: 'delivery_mode',
  templateId: 'template_id',
};
const FIELDS = Object.keys(COLUMN_OF) as (keyof CampaignFields)[];

/** A JSON array of the variant records in `source` (rows shaped like campaign_variants), in list order. */
function variantList(source: string, where = 'true'): string {
  return `(SELECT coalesce(json_agg(json_build_object('id', v.id, 'templateId', v.template_id, 'weight', v.weight,
    'label', v.label, 'isActive', v.is_active) ORDER BY v.position), '[]') FROM ${source} v WHERE ${where})`;
}

/** A Campaign (domain names) from a campaigns row `c`; `variants` is null unless the campaign has a variant list. */
function campaignSelect(c: string, variants: string): string {
  return [
    `${c}.id`,
    `${c}.workspace_id AS "workspaceId"`,
    ...FIELDS.map((field) => `${c}.${COLUMN_OF[field]} AS "${field}"`),
    `CASE WHEN ${c}.has_variant_list THEN ${variants} END AS variants`,
    `${c}.created_at AS "createdAt"`,
    `${c}.updated_at AS "updatedAt"`,
  ].join(', ');
}

const STORED_VARIANTS = (c: string): string => variantList('campaign_variants', `v.campaign_id = ${c}.id`);

/**
 * Variant drafts as one JSON binding, read back as rows by VARIANT_DRAFTS.
 * A draft of an existing variant may leave fields out: null there (and
 * keep_label for the label, which can be null) keeps the stored value.
 */
function draftsJson(drafts: VariantDraft[]): string {
  return JSON.stringify(
    drafts.map((draft, position) => ({
      id: draft.id ?? null,
      position,
      template_id: draft.templateId ?? null,
      weight: draft.weight ?? null,
      label: draft.label ?? null,
      keep_label: draft.label === undefined,
      is_active: draft.isActive ?? null,
    })),
  );
}
const VARIANT_DRAFTS =
  'jsonb_to_recordset(?::jsonb) AS d(id uuid, position int, template_id text, weight int, label text, keep_label boolean, is_active boolean)';

const notFound = (): NotFoundError => new NotFoundError('Campaign');

interface NamedStatement {
  name: string;
  text: string;
}

/** Texts seen so far; an update's text depends on which fields it writes, so the count is capped. */
const namedStatements = new Map<string, NamedStatement>();
const MAX_NAMED_STATEMENTS = 1_000;

/**
 * A named statement: each connection has Postgres parse and plan a given text
 * once and reuses the plan, which halved Postgres's CPU for a create (these
 * CTEs take longer to plan than to run). The name is the text's hash, as the
 * driver requires one text per name; `?` placeholders become $1, $2, ...
 */
function named(text: string): NamedStatement {
  let statement = namedStatements.get(text);
  if (!statement) {
    let position = 0;
    statement = {
      name: `campaign_${createHash('sha1').update(text).digest('base64url')}`,
      text: text.replace(/\?/g, () => `$${++position}`),
    };
    if (namedStatements.size < MAX_NAMED_STATEMENTS) namedStatements.set(text, statement);
  }
  return statement;
}

function run<Row extends object = Record<string, unknown>>(
  connection: PgConnection,
  text: string,
  values: readonly unknown[],
): Promise<{ rows: Row[] }> {
  return connection.query<Row & Record<string, unknown>>({ ...named(text), values: [...values] });
}

/** The unique index on provider_category_id is the only one a write can hit. */
function conflictOnDuplicate(error: unknown): never {
  if ((error as { code?: unknown }).code === '23505') {
    throw new ConflictError('Another campaign already uses this provider_category_id');
  }
  throw error;
}

// `announced` is a SELECT, which Postgres runs only when read: the cross join reads it. The notification goes out
// when the statement commits.
// The campaign is inserted only while its workspace is open (workspace-states of @mail/common).
const CREATE_CAMPAIGN = `WITH workspace AS (${OPEN_WORKSPACE}), campaign AS (
    INSERT INTO campaigns (workspace_id, ${FIELDS.map((field) => COLUMN_OF[field]).join(', ')}, has_variant_list)
    SELECT workspace.workspace_id, ${FIELDS.map(() => '?').join(', ')}, ? FROM workspace
    RETURNING *
  ), variants AS (
    INSERT INTO campaign_variants (campaign_id, position, template_id, weight, label, is_active)
    SELECT campaign.id, d.position, d.template_id, d.weight, d.label, d.is_active FROM campaign, ${VARIANT_DRAFTS}
    RETURNING *
  ), announced AS (
    SELECT pg_notify(?, provider_category_id) FROM campaign WHERE provider_category_id IS NOT NULL
  )
  SELECT ${campaignSelect('campaign', variantList('variants'))}
  FROM campaign CROSS JOIN (SELECT count(*) FROM announced) AS announcement`;

export async function createCampaign(db: Knex, campaign: NewCampaign): Promise<Campaign> {
  const { workspaceId, variants, ...fields } = campaign;
  const bindings = [workspaceId, ...FIELDS.map((field) => fields[field]), variants !== null, draftsJson(variants ?? []), CATEGORY_CHANNEL];
  return insertIntoOpenWorkspace(db, workspaceId, async () => {
    const { rows } = await withConnection(db, (connection) => run<Campaign>(connection, CREATE_CAMPAIGN, bindings)).catch(
      conflictOnDuplicate,
    );
    return rows[0];
  });
}

const GET_CAMPAIGN = `SELECT ${campaignSelect('c', STORED_VARIANTS('c'))} FROM campaigns c WHERE c.id = ? AND c.workspace_id = ?`;

export async function getCampaign(db: Knex, workspaceId: string, id: string): Promise<Campaign> {
  const campaign: Campaign | undefined = isUuid(id)
    ? (await withConnection(db, (connection) => run<Campaign>(connection, GET_CAMPAIGN, [id, workspaceId]))).rows[0]
    : undefined;
  if (!campaign) throw notFound();
  return campaign;
}

export interface CampaignFilter {
  isActive?: boolean;
  /** Case-insensitive substring of the name. */
  nameQuery?: string;
}

/** Newest first; the id breaks ties so pages never overlap. */
export async function listCampaigns(db: Knex, workspaceId: string, filter: CampaignFilter, window: PageWindow): Promise<Page<Campaign>> {
  // Postgres refuses NUL in a pattern, and no stored name can hold one.
  if (containsNul(filter.nameQuery)) return { items: [], total: 0, page: window.page, pageSize: window.pageSize };
  const base = db('campaigns as c').where({ 'c.workspace_id': workspaceId });
  if (filter.isActive !== undefined) base.where({ 'c.is_active': filter.isActive });
  if (filter.nameQuery) base.whereILike('c.name', `%${filter.nameQuery.replace(/[\\%_]/g, '\\$&')}%`);
  const [counted, items] = await Promise.all([
    base.clone().count({ total: '*' }),
    base
      .clone()
      .select(db.raw(campaignSelect('c', STORED_VARIANTS('c'))))
      .orderBy([
        { column: 'c.created_at', order: 'desc' },
        { column: 'c.id', order: 'desc' },
      ])
      .limit(window.pageSize)
      .offset(window.offset),
  ]);
  return { items, total: Number(counted[0].total), page: window.page, pageSize: window.pageSize };
}

const LOCK_CAMPAIGN = `SELECT c.provider_category_id AS "providerCategoryId",
    ARRAY(SELECT v.id::text FROM campaign_variants v WHERE v.campaign_id = c.id) AS "variantIds"
  FROM campaigns c WHERE c.id = ? AND c.workspace_id = ? FOR UPDATE OF c`;

/**
 * Locks the campaign row first (FOR UPDATE), so concurrent updates of one
 * campaign run one after the other: the variant ids are checked against the
 * list they will change, and the list is always wholly one request's. Then
 * one statement writes the fields and the whole variant list: unlisted
 * variants deleted, listed ids rewritten in place, id-less drafts inserted.
 */
export async function updateCampaign(db: Knex, workspaceId: string, id: string, patch: CampaignPatch): Promise<Campaign> {
  if (!isUuid(id)) throw notFound();
  const { variants, ...fields } = patch;
  const written = Object.keys(fields) as (keyof CampaignFields)[];
  return withTransaction(db, async (connection) => {
    const current = (await run<{ providerCategoryId: string | null; variantIds: string[] }>(connection, LOCK_CAMPAIGN, [id, workspaceId]))
      .rows[0];
    if (!current) throw notFound();
    if (variants) checkVariantIds(variants, new Set(current.variantIds));

    const sets = [...written.map((field) => `${COLUMN_OF[field]} = ?`), 'updated_at = clock_timestamp()'];
    const bindings: unknown[] = written.map((field) => fields[field]);
    if (variants !== undefined) {
      sets.push('has_variant_list = ?');
      bindings.push(variants !== null);
    }
    bindings.push(id);
    const drafts = variants ?? [];
    if (variants !== undefined) {
      // The join names the campaign: its index finds the stored variants, where a join on id alone scanned them all.
      bindings.push(
        id,
        drafts.flatMap((draft) => (draft.id === undefined ? [] : [draft.id])),
        id,
        draftsJson(drafts),
        id,
      );
    }
    const { rows } = await run<Campaign>(
      connection,
      `WITH campaign AS (
           UPDATE campaigns SET ${sets.join(', ')} WHERE id = ? RETURNING *
         )${
           variants === undefined
             ? ''
             : `, removed AS (
           DELETE FROM campaign_variants WHERE campaign_id = ? AND NOT (id = ANY (?::uuid[]))
         ), written AS (
           INSERT INTO campaign_variants (id, campaign_id, position, template_id, weight, label, is_active)
           SELECT coalesce(d.id, gen_random_uuid()), ?, d.position, coalesce(d.template_id, v.template_id),
             coalesce(d.weight, v.weight), CASE WHEN d.keep_label THEN v.label ELSE d.label END, coalesce(d.is_active, v.is_active)
           FROM ${VARIANT_DRAFTS} LEFT JOIN campaign_variants v ON v.id = d.id AND v.campaign_id = ?
           ON CONFLICT (id) DO UPDATE SET position = excluded.position, template_id = excluded.template_id,
             weight = excluded.weight, label = excluded.label, is_active = excluded.is_active
           RETURNING *
         )`
         }
         SELECT ${campaignSelect('campaign', variants === undefined ? STORED_VARIANTS('campaign') : variantList('written'))}
         FROM campaign`,
      bindings,
    ).catch(conflictOnDuplicate);
    const campaign: Campaign = rows[0];
    if (campaign.providerCategoryId !== current.providerCategoryId || variants !== undefined) {
      // Queued in the transaction: subscribers hear of the change (of the category, or of the variants it resolves
      // to) once it is committed.
      const categories = [current.providerCategoryId, campaign.providerCategoryId].filter((category) => category !== null);
      await run(connection, 'SELECT pg_notify(?, category) FROM unnest(?::text[]) AS category', [CATEGORY_CHANNEL, categories]);
    }
    return campaign;
  });
}

/** Deletes the campaigns `where` selects, announcing their categories; resolves to how many it deleted. */
async function deleteAnnounced(connection: PgConnection, where: string, bindings: unknown[]): Promise<number> {
  const { rows } = await run<{ deleted: string }>(
    connection,
    `WITH deleted AS (
       DELETE FROM campaigns WHERE ${where} RETURNING provider_category_id
     ), announced AS (
       SELECT pg_notify(?, provider_category_id) FROM deleted WHERE provider_category_id IS NOT NULL
     )
     SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT count(*) FROM announced) AS announced`,
    [...bindings, CATEGORY_CHANNEL],
  );
  return Number(rows[0].deleted);
}

export async function deleteCampaign(db: Knex, workspaceId: string, id: string): Promise<void> {
  const deleted = isUuid(id)
    ? await withConnection(db, (connection) => deleteAnnounced(connection, 'id = ? AND workspace_id = ?', [id, workspaceId]))
    : 0;
  if (deleted === 0) throw notFound();
}

/** Deletes every campaign of a workspace being deleted, and takes no new ones there; resolves to how many it deleted. */
export function closeWorkspaceCampaigns(db: Knex, workspaceId: string): Promise<number> {
  return closeWorkspace(db, workspaceId, (connection) => deleteAnnounced(connection, 'workspace_id = ?', [workspaceId]));
}

/** Across all workspaces: category ids are globally unique. */
export function resolveCategories(db: Knex, providerCategoryIds: string[]): Promise<CategoryMatch[]> {
  if (providerCategoryIds.length === 0) return Promise.resolve([]);
  return db('campaigns as c')
    .leftJoin('campaign_variants as v', 'v.campaign_id', 'c.id')
    .whereIn('c.provider_category_id', providerCategoryIds)
    .groupBy('c.id')
    .select(
      'c.provider_category_id as providerCategoryId',
      'c.id as campaignId',
      'c.workspace_id as workspaceId',
      db.raw(`coalesce(array_agg(v.id::text) FILTER (WHERE v.id IS NOT NULL), '{}') AS "variantIds"`),
    );
}
