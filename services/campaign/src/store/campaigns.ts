import { createHash } from 'node:crypto';
import type { Knex } from 'knex';
import {
  CAMPAIGN_FIELD_LIST,
  ConflictError,
  InvalidArgumentError,
  NotFoundError,
  OPEN_WORKSPACE,
  closeWorkspace,
  containsNul,
  containsPattern,
  insertIntoOpenWorkspace,
  withConnection,
  withTransaction,
  type PgConnection,
} from '@mail/common';
import type {
  Campaign,
  CampaignFields,
  CampaignPatch,
  CategoryMatch,
  CategoryRelease,
  NewCampaign,
  Page,
  ScheduledCampaign,
  VariantDraft,
} from '../domain/model';
import { abTestModeViolation, checkVariantIds, isUuid, type PageWindow } from '../domain/validation';

/**
 * Campaign SQL, each statement written out where it is used, its values in
 * named parameters (knex's `:name` bindings, named after the domain's
 * fields). Each write is one statement where it can be (data-modifying CTEs,
 * listmonk-style): one round trip, atomic without an explicit transaction,
 * and cheaper than separate queries (bench/README.md, "Campaign and
 * Postgres"). Every statement goes to the driver as a named statement
 * (`run`).
 */

/** Committed changes of provider_category_id are announced on this channel (a ChangeFeed of @mail/common). */
export const CATEGORY_CHANNEL = 'campaign_category_changed';

/** The columns a create or update writes: every declared field (CAMPAIGN_FIELDS of @mail/common) but the workspace. */
const WRITTEN = CAMPAIGN_FIELD_LIST.filter(([name]) => name !== 'workspaceId') as [keyof CampaignFields, { column: string }][];
const COLUMN_OF = Object.fromEntries(WRITTEN.map(([name, { column }]) => [name, column])) as Record<keyof CampaignFields, string>;

/** A JSON array of the variant records in `source` (rows shaped like campaign_variants), in list order. */
function variantList(source: string, where = 'true'): string {
  return `(SELECT coalesce(json_agg(json_build_object('id', v.id, 'templateId', v.template_id, 'weight', v.weight,
    'label', v.label, 'isActive', v.is_active) ORDER BY v.position), '[]') FROM ${source} v WHERE ${where})`;
}

/** A Campaign (domain names) from a campaigns row `c`; `variants` is null unless the campaign has a variant list. */
function campaignSelect(c: string, variants: string): string {
  return [
    `${c}.id`,
    ...CAMPAIGN_FIELD_LIST.map(([name, { column }]) => `${c}.${column} AS "${name}"`),
    `CASE WHEN ${c}.has_variant_list THEN ${variants} END AS variants`,
    `${c}.created_at AS "createdAt"`,
    `${c}.updated_at AS "updatedAt"`,
  ].join(', ');
}

const STORED_VARIANTS = (c: string): string => variantList('campaign_variants', `v.campaign_id = ${c}.id`);

/**
 * Variant drafts as one JSON value (:drafts), read back as rows by
 * VARIANT_DRAFTS. A draft of an existing variant may leave fields out: null
 * there (and keep_label for the label, which can be null) keeps the stored value.
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
  'jsonb_to_recordset(:drafts::jsonb) AS d(id uuid, position int, template_id text, weight int, label text, keep_label boolean, is_active boolean)';

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
 * once and reuses the plan: these CTEs take longer to plan than to run
 * (bench/README.md, "Campaign and Postgres"). The name is the text's hash, as
 * the driver requires one text per name.
 */
function named(text: string): NamedStatement {
  let statement = namedStatements.get(text);
  if (!statement) {
    statement = { name: `campaign_${createHash('sha1').update(text).digest('base64url')}`, text };
    if (namedStatements.size < MAX_NAMED_STATEMENTS) namedStatements.set(text, statement);
  }
  return statement;
}

/** Runs `statement` (`db.raw(sql, { name: value })`) on the driver connection, as a named statement. */
function run<Row extends object = Record<string, unknown>>(connection: PgConnection, statement: Knex.Raw): Promise<{ rows: Row[] }> {
  const { sql, bindings } = statement.toSQL().toNative();
  return connection.query<Row & Record<string, unknown>>({ ...named(sql), values: [...bindings] });
}

/** The unique index on provider_category_id, and the category's owner (category_owners), are all a write can hit. */
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
    INSERT INTO campaigns (workspace_id, ${WRITTEN.map(([, { column }]) => column).join(', ')}, has_variant_list)
    SELECT workspace.workspace_id, ${WRITTEN.map(([name]) => `:${name}`).join(', ')}, :hasVariantList FROM workspace
    RETURNING *
  ), variants AS (
    INSERT INTO campaign_variants (campaign_id, position, template_id, weight, label, is_active)
    SELECT campaign.id, d.position, d.template_id, d.weight, d.label, d.is_active FROM campaign, ${VARIANT_DRAFTS}
    RETURNING *
  ), announced AS (
    SELECT pg_notify(:channel, provider_category_id) FROM campaign WHERE provider_category_id IS NOT NULL
  )
  SELECT ${campaignSelect('campaign', variantList('variants'))}
  FROM campaign CROSS JOIN (SELECT count(*) FROM announced) AS announcement`;

export async function createCampaign(db: Knex, campaign: NewCampaign): Promise<Campaign> {
  const { variants, ...fields } = campaign;
  const statement = db.raw(CREATE_CAMPAIGN, {
    ...fields,
    hasVariantList: variants !== null,
    drafts: draftsJson(variants ?? []),
    channel: CATEGORY_CHANNEL,
  });
  return insertIntoOpenWorkspace(db, campaign.workspaceId, async () => {
    const { rows } = await withConnection(db, (connection) => run<Campaign>(connection, statement)).catch(conflictOnDuplicate);
    return rows[0];
  });
}

const GET_CAMPAIGN = `SELECT ${campaignSelect('c', STORED_VARIANTS('c'))} FROM campaigns c WHERE c.id = :id AND c.workspace_id = :workspaceId`;

export async function getCampaign(db: Knex, workspaceId: string, id: string): Promise<Campaign> {
  const campaign: Campaign | undefined = isUuid(id)
    ? (await withConnection(db, (connection) => run<Campaign>(connection, db.raw(GET_CAMPAIGN, { id, workspaceId })))).rows[0]
    : undefined;
  if (!campaign) throw notFound();
  return campaign;
}

export interface CampaignFilter {
  isActive?: boolean;
  /** Case-insensitive substring of the name. */
  nameQuery?: string;
  /** Only these campaigns; absent or empty: all. */
  ids?: string[];
}

/** The campaigns of a page; a filter that is null matches every campaign. */
const PAGE_FILTER = `c.workspace_id = :workspaceId
  AND (:isActive::boolean IS NULL OR c.is_active = :isActive)
  AND (:namePattern::text IS NULL OR c.name ILIKE :namePattern)
  AND (:ids::text[] IS NULL OR c.id::text = ANY (:ids::text[]))`;
const COUNT_CAMPAIGNS = `SELECT count(*) AS total FROM campaigns c WHERE ${PAGE_FILTER}`;
// Newest first; the id breaks ties so pages never overlap.
const LIST_CAMPAIGNS = `SELECT ${campaignSelect('c', STORED_VARIANTS('c'))} FROM campaigns c WHERE ${PAGE_FILTER}
  ORDER BY c.created_at DESC, c.id DESC LIMIT :limit OFFSET :offset`;

export async function listCampaigns(db: Knex, workspaceId: string, filter: CampaignFilter, window: PageWindow): Promise<Page<Campaign>> {
  // Postgres refuses NUL in a pattern, and no stored name can hold one.
  if (containsNul(filter.nameQuery)) return { items: [], total: 0, page: window.page, pageSize: window.pageSize };
  const filters = {
    workspaceId,
    isActive: filter.isActive ?? null,
    namePattern: filter.nameQuery ? containsPattern(filter.nameQuery) : null,
    ids: filter.ids?.length ? filter.ids.map((id) => id.toLowerCase()) : null,
  };
  const [counted, listed] = await Promise.all([
    withConnection(db, (connection) => run<{ total: string }>(connection, db.raw(COUNT_CAMPAIGNS, filters))),
    withConnection(db, (connection) =>
      run<Campaign>(connection, db.raw(LIST_CAMPAIGNS, { ...filters, limit: window.pageSize, offset: window.offset })),
    ),
  ]);
  return { items: listed.rows, total: Number(counted.rows[0].total), page: window.page, pageSize: window.pageSize };
}

const LOCK_CAMPAIGN = `SELECT c.provider_category_id AS "providerCategoryId",
    ARRAY(SELECT v.id::text FROM campaign_variants v WHERE v.campaign_id = c.id) AS "variantIds"
  FROM campaigns c WHERE c.id = :id AND c.workspace_id = :workspaceId FOR UPDATE OF c`;

/**
 * Rewrites the variant list of campaign :id to :drafts: unlisted variants
 * deleted, listed ids (:keptIds) rewritten in place, id-less drafts inserted.
 * The join names the campaign: its index finds the stored variants, where a
 * join on id alone scanned them all.
 */
const WRITE_VARIANTS = `removed AS (
    DELETE FROM campaign_variants WHERE campaign_id = :id AND NOT (id = ANY (:keptIds::uuid[]))
  ), written AS (
    INSERT INTO campaign_variants (id, campaign_id, position, template_id, weight, label, is_active)
    SELECT coalesce(d.id, gen_random_uuid()), :id, d.position, coalesce(d.template_id, v.template_id),
      coalesce(d.weight, v.weight), CASE WHEN d.keep_label THEN v.label ELSE d.label END, coalesce(d.is_active, v.is_active)
    FROM ${VARIANT_DRAFTS} LEFT JOIN campaign_variants v ON v.id = d.id AND v.campaign_id = :id
    ON CONFLICT (id) DO UPDATE SET position = excluded.position, template_id = excluded.template_id,
      weight = excluded.weight, label = excluded.label, is_active = excluded.is_active
    RETURNING *
  )`;

/** The update of campaign :id that writes `fields` (each from its named parameter) and, with `variants`, the variant list. */
function updateStatement(fields: (keyof CampaignFields)[], variants: boolean): string {
  const sets = [
    ...fields.map((field) => `${COLUMN_OF[field]} = :${field}`),
    ...(variants ? ['has_variant_list = :hasVariantList'] : []),
    'updated_at = clock_timestamp()',
  ];
  return `WITH campaign AS (
      UPDATE campaigns SET ${sets.join(', ')} WHERE id = :id RETURNING *
    )${variants ? `, ${WRITE_VARIANTS}` : ''}
    SELECT ${campaignSelect('campaign', variants ? variantList('written') : STORED_VARIANTS('campaign'))} FROM campaign`;
}

/** The named parameters of WRITE_VARIANTS and has_variant_list for the list an update asks for (null: no list). */
function variantListParams(variants: VariantDraft[] | null): Record<string, unknown> {
  const drafts = variants ?? [];
  return {
    hasVariantList: variants !== null,
    keptIds: drafts.flatMap((draft) => (draft.id === undefined ? [] : [draft.id])),
    drafts: draftsJson(drafts),
  };
}

const NOTIFY_CATEGORIES = 'SELECT pg_notify(:channel, category) FROM unnest(:categories::text[]) AS category';

/**
 * Locks the campaign row first (FOR UPDATE), so concurrent updates of one
 * campaign run one after the other: the variant ids are checked against the
 * list they will change, and the list is always wholly one request's. Then
 * one statement writes the fields and the whole variant list.
 */
export async function updateCampaign(db: Knex, workspaceId: string, id: string, patch: CampaignPatch): Promise<Campaign> {
  if (!isUuid(id)) throw notFound();
  const { variants, ...fields } = patch;
  return withTransaction(db, async (connection) => {
    const locked = await run<{ providerCategoryId: string | null; variantIds: string[] }>(
      connection,
      db.raw(LOCK_CAMPAIGN, { id, workspaceId }),
    );
    const current = locked.rows[0];
    if (!current) throw notFound();
    if (variants) checkVariantIds(variants, new Set(current.variantIds));

    const statement = db.raw(updateStatement(Object.keys(fields) as (keyof CampaignFields)[], variants !== undefined), {
      ...fields,
      id,
      ...(variants === undefined ? {} : variantListParams(variants)),
    });
    const { rows } = await run<Campaign>(connection, statement).catch(conflictOnDuplicate);
    const campaign = rows[0];
    // The rule reads the result: the write may change either field and leave the other as stored.
    const mode = abTestModeViolation(campaign);
    if (mode) throw new InvalidArgumentError([mode]);
    if (campaign.providerCategoryId !== current.providerCategoryId || variants !== undefined) {
      // Queued in the transaction: subscribers hear of the change (of the category, or of the variants it resolves
      // to) once it is committed.
      const categories = [current.providerCategoryId, campaign.providerCategoryId].filter((category) => category !== null);
      await run(connection, db.raw(NOTIFY_CATEGORIES, { channel: CATEGORY_CHANNEL, categories }));
    }
    return campaign;
  });
}

/** Deletes the campaigns `where` selects (its named parameters in `params`), announcing their categories; resolves to how many it deleted. */
async function deleteAnnounced(db: Knex, connection: PgConnection, where: string, params: Record<string, string>): Promise<number> {
  const { rows } = await run<{ deleted: string }>(
    connection,
    db.raw(
      `WITH deleted AS (
         DELETE FROM campaigns WHERE ${where} RETURNING provider_category_id
       ), announced AS (
         SELECT pg_notify(:channel, provider_category_id) FROM deleted WHERE provider_category_id IS NOT NULL
       )
       SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT count(*) FROM announced) AS announced`,
      { ...params, channel: CATEGORY_CHANNEL },
    ),
  );
  return Number(rows[0].deleted);
}

export async function deleteCampaign(db: Knex, workspaceId: string, id: string): Promise<void> {
  const deleted = isUuid(id)
    ? await withConnection(db, (connection) =>
        deleteAnnounced(db, connection, 'id = :id AND workspace_id = :workspaceId', { id, workspaceId }),
      )
    : 0;
  if (deleted === 0) throw notFound();
}

/**
 * Deletes every campaign and template of a workspace being deleted, and takes
 * no new ones there. Its categories stay bound to it (retired): events that
 * still name them must never be stored for another workspace, so only a
 * platform admin's release (releaseCategory) frees one. Resolves to how many
 * campaigns it deleted.
 */
export function closeWorkspaceCampaigns(db: Knex, workspaceId: string): Promise<number> {
  return closeWorkspace(db, workspaceId, async (connection) => {
    const deleted = await deleteAnnounced(db, connection, 'workspace_id = :workspaceId', { workspaceId });
    await run(connection, db.raw('DELETE FROM templates WHERE workspace_id = :workspaceId', { workspaceId }));
    return deleted;
  });
}

// The owner row is locked first: a campaign write claiming the category (its trigger upserts that row) waits,
// so the check for a campaign that uses it cannot miss one.
const LOCK_CATEGORY_OWNER = 'SELECT workspace_id AS "workspaceId" FROM category_owners WHERE provider_category_id = :id FOR UPDATE';
const CATEGORY_IN_USE = 'SELECT EXISTS (SELECT 1 FROM campaigns WHERE provider_category_id = :id) AS "inUse"';
const RELEASE_CATEGORY = `WITH released AS (DELETE FROM category_owners WHERE provider_category_id = :id)
  INSERT INTO category_releases (provider_category_id, workspace_id, released_by_user_id, released_by_email)
  VALUES (:id, :workspaceId, :userId, :email)
  RETURNING provider_category_id AS "providerCategoryId", workspace_id AS "workspaceId",
    released_by_user_id AS "releasedByUserId", released_by_email AS "releasedByEmail", released_at AS "releasedAt"`;

/**
 * Frees a category no campaign uses for any workspace to take, and records
 * who released it and when. NotFound when no workspace holds it; a conflict
 * while a campaign uses it (deleting or renaming that campaign comes first).
 */
export function releaseCategory(db: Knex, id: string, releasedBy: { userId: string; email: string }): Promise<CategoryRelease> {
  if (containsNul(id)) throw new NotFoundError('Provider category');
  return withTransaction(db, async (connection) => {
    const owner = await run<{ workspaceId: string }>(connection, db.raw(LOCK_CATEGORY_OWNER, { id }));
    if (owner.rows.length === 0) throw new NotFoundError('Provider category');
    const used = await run<{ inUse: boolean }>(connection, db.raw(CATEGORY_IN_USE, { id }));
    if (used.rows[0].inUse) throw new ConflictError('A campaign uses this provider_category_id: delete it or change its category first');
    const released = await run<CategoryRelease>(
      connection,
      db.raw(RELEASE_CATEGORY, { id, workspaceId: owner.rows[0].workspaceId, ...releasedBy }),
    );
    return released.rows[0];
  });
}

const RESOLVE_CATEGORIES = `SELECT c.provider_category_id AS "providerCategoryId", c.id AS "campaignId", c.workspace_id AS "workspaceId",
    coalesce(array_agg(v.id::text) FILTER (WHERE v.id IS NOT NULL), '{}') AS "variantIds"
  FROM campaigns c LEFT JOIN campaign_variants v ON v.campaign_id = c.id
  WHERE c.provider_category_id = ANY (:providerCategoryIds::text[])
  GROUP BY c.id`;

/** Across all workspaces: category ids are globally unique. */
export async function resolveCategories(db: Knex, providerCategoryIds: string[]): Promise<CategoryMatch[]> {
  if (providerCategoryIds.length === 0) return [];
  const { rows } = await withConnection(db, (connection) =>
    run<CategoryMatch>(connection, db.raw(RESOLVE_CATEGORIES, { providerCategoryIds })),
  );
  return rows;
}

const SCHEDULED_CAMPAIGNS = `SELECT id AS "campaignId", workspace_id AS "workspaceId", schedule_cron AS "scheduleCron",
    schedule_set_at AS "scheduleSetAt"
  FROM campaigns WHERE is_active AND schedule_cron IS NOT NULL`;

/** Across all workspaces: the delivery scheduler's input. */
export async function listScheduledCampaigns(db: Knex): Promise<ScheduledCampaign[]> {
  const { rows } = await withConnection(db, (connection) => run<ScheduledCampaign>(connection, db.raw(SCHEDULED_CAMPAIGNS)));
  return rows;
}
