/**
 * The campaign write shape's fields in the order the specification declares
 * them: the gateway builds update masks from them, and errors about several
 * fields are reported in this order, as Pydantic would.
 */
export const CAMPAIGN_WRITE_FIELDS: readonly string[] = [
  'workspace_id',
  'name',
  'description',
  'is_active',
  'send_priority',
  'schedule_cron',
  'recipient_source',
  'mssql_query',
  'csv_account_ids',
  'provider_category_id',
  'from_email',
  'from_name',
  'reply_to',
  'delivery_mode',
  'template_id',
  'variants',
];
