import { streamMssql } from './mssql-recipients';
import { streamPostgres } from './postgres-recipients';
import type { RecipientSource, SourceBatch, SourceLimits } from './recipient-source';

/**
 * A run's recipients from the recipient database its URL names (the
 * workspace's own, or RECIPIENTS_DATABASE_URL): a campaign's `mssql_query`,
 * or its `csv_account_ids` looked up in `accounts`, streamed in batches from
 * `position` on (rows for a query, account ids for a list), within `limits`.
 */
export function streamRecipients(url: string, source: RecipientSource, position: number, limits: SourceLimits): AsyncIterable<SourceBatch> {
  const protocol = url.slice(0, url.indexOf(':')).toLowerCase();
  if (protocol === 'mssql' || protocol === 'sqlserver') return streamMssql(url, source, position, limits);
  return streamPostgres(url, source, position, limits);
}
