import type { ClickHouseClient } from '@clickhouse/client';
import { readRetryingBusy } from '../support/dev-api';
import type { Batch } from './load';

/**
 * The API's promises for engagement events, checked against what a load
 * recorded: every event of a batch that got a 202 is stored exactly once
 * (docs/api.md, "Engagement events"), nothing is stored that was never sent, and
 * no answer was a 5xx other than 503 (docs/api.md, "Errors").
 */

/** What the system holds for the campaign the load's events belong to. */
export interface StoreView {
  /** provider_event_id -> how often GET /campaign-events/ listed it, over all its pages. */
  listed: Map<string, number>;
  /** The `total` the API reported. */
  total: number;
  /** Rows in the store (events), copies included. */
  storedRows: number;
  /** provider_event_ids the store holds more than once, with their number of copies. */
  storedCopies: Map<string, number>;
}

/** Any other answer seen during the run (reads, probes): only its status matters here. */
export interface Answer {
  what: string;
  phase: string;
  status: number;
}

export interface Verdict {
  violations: string[];
  acceptedEvents: number;
}

const SAMPLE = 5;

function sample(ids: Iterable<string>): string {
  const all = [...ids];
  return `${all.slice(0, SAMPLE).join(', ')}${all.length > SAMPLE ? `, ... (${all.length} in all)` : ''}`;
}

export function checkInvariants(batches: readonly Batch[], view: StoreView, otherAnswers: readonly Answer[] = []): Verdict {
  const violations: string[] = [];
  const sent = new Set<string>();
  const acceptedIds = new Set<string>();

  for (const batch of batches) {
    batch.eventIds.forEach((id) => sent.add(id));
    for (const attempt of batch.attempts) {
      if (attempt.status === undefined) continue;
      if (attempt.status >= 500 && attempt.status !== 503) {
        violations.push(
          `server error: batch ${batch.index} answered ${attempt.status} during "${attempt.phase}": ${attempt.body?.slice(0, 200)}`,
        );
      }
      if (attempt.status === 202) {
        batch.eventIds.forEach((id) => acceptedIds.add(id));
        const count = safeJson(attempt.body)?.accepted;
        if (count !== batch.eventIds.length) {
          violations.push(`wrong count: batch ${batch.index} answered 202 with accepted=${String(count)}, sent ${batch.eventIds.length}`);
        }
      }
    }
  }
  for (const answer of otherAnswers) {
    if (answer.status >= 500 && answer.status !== 503)
      violations.push(`server error: ${answer.what} answered ${answer.status} during "${answer.phase}"`);
  }

  const missing = [...acceptedIds].filter((id) => !view.listed.has(id));
  if (missing.length > 0)
    violations.push(`lost: ${missing.length} events acknowledged with 202 are not in GET /campaign-events/: ${sample(missing)}`);
  const listedTwice = [...view.listed].filter(([, times]) => times > 1).map(([id]) => id);
  if (listedTwice.length > 0)
    violations.push(`duplicate: GET /campaign-events/ lists ${listedTwice.length} events more than once: ${sample(listedTwice)}`);
  if (view.storedCopies.size > 0) {
    violations.push(
      `duplicate: ${view.storedCopies.size} events are stored more than once: ${sample([...view.storedCopies].map(([id, n]) => `${id} x${n}`))}`,
    );
  }
  const unexpected = [...view.listed.keys()].filter((id) => !sent.has(id));
  if (unexpected.length > 0) violations.push(`unexpected: ${unexpected.length} stored events were never sent: ${sample(unexpected)}`);
  if (view.total !== view.listed.size)
    violations.push(`count: GET /campaign-events/ reports total ${view.total} but its pages hold ${view.listed.size} events`);
  const distinctStored = view.storedRows - [...view.storedCopies.values()].reduce((extra, copies) => extra + copies - 1, 0);
  if (distinctStored !== view.listed.size)
    violations.push(`count: the store holds ${distinctStored} distinct events, the API lists ${view.listed.size}`);
  return { violations, acceptedEvents: acceptedIds.size };
}

function safeJson(text: string | undefined): { accepted?: unknown } | undefined {
  try {
    return text ? (JSON.parse(text) as { accepted?: unknown }) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The store as the API shows it (every page of GET /campaign-events/ for the
 * campaign) and as ClickHouse holds it (copies are invisible through the API,
 * which counts each provider event once).
 */
export async function collectStoreView(options: {
  gatewayUrl: string;
  workspaceId: string;
  campaignId: string;
  clickhouse: ClickHouseClient;
}): Promise<StoreView> {
  const { gatewayUrl, workspaceId, campaignId, clickhouse } = options;
  const listed = new Map<string, number>();
  const pageSize = 500;
  let total = -1;
  for (let page = 1; ; page++) {
    const url = `${gatewayUrl}/campaign-events/?campaign_id=${campaignId}&page=${page}&page_size=${pageSize}`;
    const response = await readRetryingBusy(url, { workspace_id: workspaceId });
    if (response.status !== 200) throw new Error(`GET ${url} answered ${response.status}: ${await response.text()}`);
    const body = (await response.json()) as { items: { provider_event_id: string }[]; total: number };
    if (total !== -1 && body.total !== total) throw new Error(`total changed while paging: ${total} -> ${body.total}`);
    total = body.total;
    for (const item of body.items) listed.set(item.provider_event_id, (listed.get(item.provider_event_id) ?? 0) + 1);
    if (body.items.length < pageSize) break;
  }
  const where = `campaign_id = toUUID('${campaignId}')`;
  const rows = async <T>(query: string): Promise<T[]> => (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
  const [{ n }] = await rows<{ n: string }>(`SELECT count() AS n FROM events WHERE ${where}`);
  const copies = await rows<{ id: string; copies: string }>(
    `SELECT provider_event_id AS id, count() AS copies FROM events WHERE ${where} GROUP BY provider_event_id HAVING copies > 1`,
  );
  return { listed, total, storedRows: Number(n), storedCopies: new Map(copies.map((row) => [row.id, Number(row.copies)])) };
}
