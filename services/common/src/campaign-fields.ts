import { campaignV1 } from '@mail/proto';

/**
 * The campaign's fields, declared once. The gateway's update masks and JSON,
 * the campaign service's proto mapping, domain defaults and rules, and its
 * store's columns all read this table; docs/adding-a-campaign-field.md says
 * what else a new field needs.
 */

/**
 * A field's value as the API's JSON and the campaign domain hold it, to and
 * from its campaign.v1 form (CampaignInput and Campaign hold it alike).
 * undefined is "absent": not sent, or null.
 */
export interface FieldCodec<T, P> {
  toProto(value: T | undefined): P;
  fromProto(value: P): T | undefined;
}

export interface CampaignField<T, P, Nullable extends boolean> {
  /** The name in the API's JSON, in update_mask paths and in validation errors' `loc`. */
  json: string;
  /** The column of the campaign service's `campaigns` table. */
  column: string;
  /**
   * Whether the value can be null; also the PUT rule. An omitted field is
   * unchanged; null clears a nullable field and leaves any other unchanged.
   */
  nullable: Nullable;
  /** What a create that omits the field stores; a field without one is required on create. */
  default?: NoInfer<T> | (Nullable extends true ? null : never);
  codec: FieldCodec<T, P>;
}

/** A proto3 `optional` scalar: unset is absent. */
const optional = <T>(): FieldCodec<T, T | undefined> => ({ toProto: (value) => value, fromProto: (value) => value });

/** A plain proto3 string: '' is absent. */
const plainString: FieldCodec<string, string> = { toProto: (value) => value ?? '', fromProto: (value) => value || undefined };

/** A proto enum: the API's names to its members; `unspecified` (0) is absent. */
function enumeration<Name extends string, Member extends number>(
  unspecified: Member,
  members: Record<Name, Member>,
): FieldCodec<Name, Member> {
  const names = Object.keys(members) as Name[];
  return {
    toProto: (name) => (name === undefined ? unspecified : members[name]),
    fromProto: (member) => names.find((name) => members[name] === member),
  };
}

/** A list of strings, wrapped in a message so that an unset list (absent) differs from an empty one. */
const stringList: FieldCodec<string[], campaignV1.AccountIdList | undefined> = {
  toProto: (ids) => (ids === undefined ? undefined : { ids }),
  fromProto: (list) => list?.ids,
};

/** A campaign's A/B test, as the API's JSON and the campaign's `ab_test` column (jsonb) hold it. */
export interface AbTestSettings {
  test_fraction: number;
  wait_minutes: number;
  metric: 'open_rate' | 'click_rate';
}

export const AB_TEST_DEFAULTS: AbTestSettings = { test_fraction: 0.2, wait_minutes: 240, metric: 'open_rate' };
export const AB_TEST_FRACTION_RANGE = { min: 0.01, max: 0.5 };
export const AB_TEST_WAIT_MINUTES_RANGE = { min: 1, max: 10_080 };
export const AB_TEST_METRICS: readonly AbTestSettings['metric'][] = ['open_rate', 'click_rate'];

/**
 * The A/B test object: its omitted members take their defaults as it comes
 * from proto, so a stored or shown value is always whole. An object that
 * leaves members out is a whole new value on update too.
 */
const abTestCodec: FieldCodec<AbTestSettings, campaignV1.AbTest | undefined> = {
  toProto: (value) =>
    value === undefined ? undefined : { testFraction: value.test_fraction, waitMinutes: value.wait_minutes, metric: value.metric },
  fromProto: (message) =>
    message && {
      test_fraction: message.testFraction ?? AB_TEST_DEFAULTS.test_fraction,
      wait_minutes: message.waitMinutes ?? AB_TEST_DEFAULTS.wait_minutes,
      metric: (message.metric as AbTestSettings['metric'] | undefined) ?? AB_TEST_DEFAULTS.metric,
    },
};

const field = <T, P, Nullable extends boolean>(declared: CampaignField<T, P, Nullable>): NoInfer<CampaignField<T, P, Nullable>> => declared;

const { RecipientSource, DeliveryMode } = campaignV1;

/**
 * Keyed by the campaign.v1 field name as ts-proto spells it, which is also
 * the campaign domain's name; in the order of the API's write shape (the
 * order of Pydantic's errors). Every field of CampaignInput but `variants`,
 * a list of records of its own (campaign_variants) with its own mapping.
 */
export const CAMPAIGN_FIELDS = {
  workspaceId: field({ json: 'workspace_id', column: 'workspace_id', nullable: false, codec: plainString }),
  name: field({ json: 'name', column: 'name', nullable: false, codec: optional<string>() }),
  description: field({ json: 'description', column: 'description', nullable: true, default: null, codec: optional<string>() }),
  isActive: field({ json: 'is_active', column: 'is_active', nullable: false, default: true, codec: optional<boolean>() }),
  sendPriority: field({ json: 'send_priority', column: 'send_priority', nullable: false, default: 100, codec: optional<number>() }),
  trackOpens: field({ json: 'track_opens', column: 'track_opens', nullable: false, default: true, codec: optional<boolean>() }),
  trackClicks: field({ json: 'track_clicks', column: 'track_clicks', nullable: false, default: true, codec: optional<boolean>() }),
  scheduleCron: field({ json: 'schedule_cron', column: 'schedule_cron', nullable: true, default: null, codec: optional<string>() }),
  recipientSource: field({
    json: 'recipient_source',
    column: 'recipient_source',
    nullable: false,
    default: 'mssql_query',
    codec: enumeration(RecipientSource.RECIPIENT_SOURCE_UNSPECIFIED, {
      mssql_query: RecipientSource.RECIPIENT_SOURCE_MSSQL_QUERY,
      csv_account_ids: RecipientSource.RECIPIENT_SOURCE_CSV_ACCOUNT_IDS,
    }),
  }),
  mssqlQuery: field({ json: 'mssql_query', column: 'mssql_query', nullable: true, default: null, codec: optional<string>() }),
  csvAccountIds: field({ json: 'csv_account_ids', column: 'csv_account_ids', nullable: true, default: null, codec: stringList }),
  providerCategoryId: field({
    json: 'provider_category_id',
    column: 'provider_category_id',
    nullable: true,
    default: null,
    codec: optional<string>(),
  }),
  fromEmail: field({ json: 'from_email', column: 'from_email', nullable: true, default: null, codec: optional<string>() }),
  fromName: field({ json: 'from_name', column: 'from_name', nullable: true, default: null, codec: optional<string>() }),
  replyTo: field({ json: 'reply_to', column: 'reply_to', nullable: true, default: null, codec: optional<string>() }),
  deliveryMode: field({
    json: 'delivery_mode',
    column: 'delivery_mode',
    nullable: false,
    default: 'single_template',
    codec: enumeration(DeliveryMode.DELIVERY_MODE_UNSPECIFIED, {
      single_template: DeliveryMode.DELIVERY_MODE_SINGLE_TEMPLATE,
      variants: DeliveryMode.DELIVERY_MODE_VARIANTS,
    }),
  }),
  templateId: field({ json: 'template_id', column: 'template_id', nullable: true, default: null, codec: optional<string>() }),
  abTest: field({ json: 'ab_test', column: 'ab_test', nullable: true, default: null, codec: abTestCodec }),
} satisfies { [K in Exclude<keyof campaignV1.CampaignInput, 'variants'>]-?: CampaignField<unknown, campaignV1.CampaignInput[K], boolean> };

export type CampaignFieldName = keyof typeof CAMPAIGN_FIELDS;

type ValueOf<F> = F extends CampaignField<infer T, infer _P, infer Nullable> ? T | (Nullable extends true ? null : never) : never;

/** A campaign's values, as the campaign domain holds them. */
export type CampaignValues = { [K in CampaignFieldName]: ValueOf<(typeof CAMPAIGN_FIELDS)[K]> };

/** The declaration's fields in order, as pairs of name and declaration. */
export const CAMPAIGN_FIELD_LIST = Object.entries(CAMPAIGN_FIELDS) as [CampaignFieldName, CampaignField<unknown, unknown, boolean>][];

/** The write shape's JSON names in order (errors about several fields are reported so): the campaign's fields, then the variant list. */
export const CAMPAIGN_WRITE_FIELDS: readonly string[] = [...CAMPAIGN_FIELD_LIST.map(([, { json }]) => json), 'variants'];

/** The fields of a CampaignInput or Campaign message that the declaration maps. */
export type CampaignProtoFields = Pick<campaignV1.CampaignInput, CampaignFieldName>;

/** The proto form of `values`; an absent value (undefined or null) becomes the proto's unset value. */
export function campaignFieldsToProto(values: { readonly [K in CampaignFieldName]?: CampaignValues[K] }): CampaignProtoFields {
  return Object.fromEntries(
    CAMPAIGN_FIELD_LIST.map(([name, { codec }]) => [name, codec.toProto(values[name] ?? undefined)]),
  ) as unknown as CampaignProtoFields;
}

/** The values a CampaignInput or Campaign message carries; unset fields are absent (undefined). */
export function campaignFieldsFromProto(message: CampaignProtoFields): { [K in CampaignFieldName]?: NonNullable<CampaignValues[K]> } {
  return Object.fromEntries(CAMPAIGN_FIELD_LIST.map(([name, { codec }]) => [name, codec.fromProto(message[name])]));
}
